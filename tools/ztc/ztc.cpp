//===- ztc.cpp - the ztc command ----------------------------------*- C++ -*-===//
//
// The user-facing driver: `ztc import` brings an ONNX model into MLIR and
// prints it; `ztc list-ops` lists the ONNX operators ztc converts. Every
// error is one line naming the file (and, where it applies, the ONNX node),
// and the exit status is 1.
//
//===----------------------------------------------------------------------===//

#include "dialects/Onnx/Import/Importer.h"
#include "passes/Conversion/OnnxToNN/NodeConverter.h"
#include "passes/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace {

enum class EmitKind { Onnx, NN };

cl::SubCommand importCommand("import", "Import an ONNX model and print its IR");
cl::SubCommand listOpsCommand("list-ops",
                              "List the ONNX operators ztc converts");

cl::opt<std::string> modelPath(cl::Positional, cl::desc("MODEL.onnx"),
                               cl::Required, cl::sub(importCommand));
cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("Bind a graph input's shape: NAME=D0xD1x... "
                         "(repeatable); binds its symbolic dimensions"),
                cl::sub(importCommand));
cl::list<std::string> constantInputs(
    "constant-input",
    cl::desc("Specialize a graph input to the value in a serialized ONNX "
             "TensorProto: NAME=FILE.pb (repeatable)"),
    cl::sub(importCommand));
cl::opt<EmitKind>
    emitKind("emit", cl::desc("IR to print"), cl::init(EmitKind::NN),
             cl::values(clEnumValN(EmitKind::Onnx, "onnx",
                                   "the onnx dialect, as imported"),
                        clEnumValN(EmitKind::NN, "nn",
                                   "the nn dialect, with static types")),
             cl::sub(importCommand));
cl::opt<std::string> outputPath("o", cl::desc("Write the IR to FILE"),
                                cl::value_desc("FILE"), cl::init("-"),
                                cl::sub(importCommand));
cl::opt<bool> printSummary(
    "summary",
    cl::desc("Print a summary (inputs, outputs, parameters, ops) to stderr"),
    cl::sub(importCommand));

/// Prints diagnostics as `FILE: error: MESSAGE`, one line each: users read
/// them, so MLIR's location syntax stays out of the way.
void installDiagnosticPrinter(MLIRContext &context) {
  context.getDiagEngine().registerHandler([](Diagnostic &diag) {
    std::string file;
    diag.getLocation()->walk([&](Location loc) {
      if (auto fileLoc = dyn_cast<FileLineColLoc>(loc)) {
        file = fileLoc.getFilename().str();
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    const char *severity = diag.getSeverity() == DiagnosticSeverity::Error
                               ? "error"
                           : diag.getSeverity() == DiagnosticSeverity::Warning
                               ? "warning"
                               : "note";
    llvm::errs() << (file.empty() ? "ztc" : file) << ": " << severity << ": "
                 << diag.str() << "\n";
    for (const Diagnostic &note : diag.getNotes())
      llvm::errs() << "  note: " << note.str() << "\n";
    return success();
  });
}

/// Human-readable byte count.
std::string formatBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  double value = bytes;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return llvm::formatv("{0:F1} {1}", value, units[unit]).str();
}

void summarize(ModuleOp module, llvm::raw_ostream &os) {
  module.walk([&](func::FuncOp func) {
    uint64_t paramCount = 0, paramBytes = 0;
    unsigned params = 0;
    os << "function @" << func.getName() << "\n";
    for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
      auto name = func.getArgAttrOfType<StringAttr>(i, "onnx.name");
      auto type = cast<ShapedType>(arg.getType());
      if (func.getArgAttr(i, "onnx.param")) {
        ++params;
        paramCount += type.getNumElements();
        paramBytes += type.getNumElements() *
                      type.getElementTypeBitWidth() / 8;
        continue;
      }
      os << "  input  " << (name ? name.getValue() : "?") << ": " << type
         << "\n";
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

int runImport() {
  DialectRegistry registry;
  ztc::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  installDiagnosticPrinter(context);

  ztc::onnx::ImportOptions options;
  for (const std::string &text : inputShapes) {
    if (llvm::Error err = ztc::onnx::parseInputShape(text, options)) {
      llvm::errs() << "ztc: error: " << llvm::toString(std::move(err))
                   << "\n";
      return 1;
    }
  }
  for (const std::string &text : constantInputs) {
    if (llvm::Error err = ztc::onnx::parseConstantInput(text, options)) {
      llvm::errs() << "ztc: error: " << llvm::toString(std::move(err))
                   << "\n";
      return 1;
    }
  }
  OwningOpRef<ModuleOp> module =
      ztc::onnx::importOnnxFile(context, modelPath, options);
  if (!module)
    return 1;
  if (emitKind == EmitKind::NN) {
    PassManager pm(&context);
    ztc::buildOnnxToNNPipeline(pm);
    if (failed(pm.run(*module)))
      return 1;
  }
  std::string error;
  auto output = openOutputFile(outputPath, &error);
  if (!output) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  module->print(output->os());
  output->os() << "\n";
  output->keep();
  if (printSummary)
    summarize(*module, llvm::errs());
  return 0;
}

int runListOps() {
  for (StringRef name : ztc::onnx_to_nn::ConverterRegistry::get().opTypes())
    llvm::outs() << name << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv,
      "ztc: compile the training step of an ONNX model\n\n"
      "  ztc import MODEL.onnx [--input-shape NAME=D0xD1...] [--emit "
      "onnx|nn]\n"
      "  ztc list-ops\n");
  if (importCommand)
    return runImport();
  if (listOpsCommand)
    return runListOps();
  llvm::errs() << "ztc: error: no command given; see `ztc --help`\n";
  return 1;
}
