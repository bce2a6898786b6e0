//===- CmdImport.cpp - `ztc import` ---------------------------------------===//
//
// `ztc import MODEL.onnx`: the model imported into the onnx dialect and, by
// default, converted to the nn dialect, printed; --summary adds the inputs,
// outputs, parameters and ops of each function on stderr.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "passes/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;
namespace mz = mlir::ztc;

namespace ztc::driver {

cl::SubCommand &importCommand() {
  static cl::SubCommand command("import",
                                "Import an ONNX model and print its IR");
  return command;
}

namespace {

enum class EmitKind { Onnx, NN };

cl::opt<EmitKind>
    emitKind("emit", cl::desc("IR to print"), cl::init(EmitKind::NN),
             cl::values(clEnumValN(EmitKind::Onnx, "onnx",
                                   "the onnx dialect, as imported"),
                        clEnumValN(EmitKind::NN, "nn",
                                   "the nn dialect, with static types")),
             cl::sub(importCommand()));
cl::opt<std::string> outputPath("o", cl::desc("Write the IR to FILE"),
                                cl::value_desc("FILE"), cl::init("-"),
                                cl::sub(importCommand()));
cl::opt<bool> printLocations(
    "locations",
    cl::desc("Print each op's location: the ONNX node name and the file, "
             "which `ztc-opt` then reads back (for --recompute full's "
             "blocks, and errors that name the node)"),
    cl::sub(importCommand()));
cl::opt<bool> printSummary(
    "summary",
    cl::desc("Print a summary (inputs, outputs, parameters, ops) to stderr"),
    cl::sub(importCommand()));

void summarize(ModuleOp module, llvm::raw_ostream &os) {
  module.walk([&](func::FuncOp func) {
    uint64_t paramCount = 0, paramBytes = 0;
    unsigned params = 0;
    os << "function @" << func.getName() << "\n";
    for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
      StringRef name = mz::train::bindingName(func, i);
      if (name.empty())
        name = "?";
      auto type = cast<ShapedType>(arg.getType());
      if (mz::train::hasRole(func, i, mz::train::BindingRole::Param)) {
        ++params;
        paramCount += type.getNumElements();
        paramBytes += type.getNumElements() * type.getElementTypeBitWidth() / 8;
        continue;
      }
      if (mz::train::hasRole(func, i, mz::train::BindingRole::Hyper)) {
        os << "  hyper  " << name << ": " << type << "\n";
        continue;
      }
      os << "  input  " << name << ": " << type << "\n";
    }
    for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
      auto name = func.getResultAttrOfType<StringAttr>(i, "onnx.name");
      os << "  output " << (name ? name.getValue() : "?") << ": " << type
         << "\n";
    }
    os << "  parameters: " << params << " tensors, " << paramCount
       << " elements, " << formatBytes(paramBytes) << "\n";
    llvm::MapVector<StringRef, unsigned> counts;
    func.walk([&](Operation *op) {
      if (op != func.getOperation() && !isa<func::ReturnOp>(op))
        ++counts[op->getName().getStringRef()];
    });
    os << "  ops:";
    for (auto &[name, count] : counts)
      os << " " << name << "=" << count;
    os << "\n";
  });
}

} // namespace

int runImport() {
  std::unique_ptr<MLIRContext> contextPtr = makeContext();
  MLIRContext &context = *contextPtr;
  std::optional<mz::onnx::ImportOptions> options = importOptions();
  if (!options)
    return 1;
  OwningOpRef<ModuleOp> module =
      mz::onnx::importOnnxFile(context, modelPath, *options);
  if (!module)
    return 1;
  if (emitKind == EmitKind::NN) {
    PassManager pm(&context);
    mz::buildOnnxToNNPipeline(pm);
    if (failed(pm.run(*module)))
      return 1;
  }
  std::string error;
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, OpPrintingFlags().enableDebugInfo(printLocations));
  os << "\n";
  if (!(error = writeOutput(outputPath, text)).empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  if (printSummary)
    summarize(*module, llvm::errs());
  return 0;
}

} // namespace ztc::driver
