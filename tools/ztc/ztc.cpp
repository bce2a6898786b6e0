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
#include "tools/ztc/Compile.h"
#include "tools/ztc/RuntimeBridge.h"

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
namespace mz = mlir::ztc;

namespace {

enum class EmitKind { Onnx, NN };

cl::SubCommand importCommand("import", "Import an ONNX model and print its IR");
cl::SubCommand listOpsCommand("list-ops",
                              "List the ONNX operators ztc converts");
cl::SubCommand runCommand(
    "run", "Compile the forward step of an ONNX model and run it on .npy "
           "inputs");
cl::SubCommand emitCommand(
    "emit", "Print the C++ or CUDA source ztc generates for a model's "
            "forward step");

cl::opt<std::string> modelPath(cl::Positional, cl::desc("MODEL.onnx"),
                               cl::Required, cl::sub(importCommand),
                               cl::sub(runCommand), cl::sub(emitCommand));
cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("Bind a graph input's shape: NAME=D0xD1x... "
                         "(repeatable); binds its symbolic dimensions"),
                cl::sub(importCommand), cl::sub(runCommand),
                cl::sub(emitCommand));
cl::opt<std::string> dataDir("data",
                             cl::desc("Directory with <input>.npy per graph "
                                      "input"),
                             cl::value_desc("DIR"), cl::Required,
                             cl::sub(runCommand));
cl::opt<std::string> outputDir("output-dir",
                               cl::desc("Directory for <output>.npy"),
                               cl::value_desc("DIR"), cl::Required,
                               cl::sub(runCommand));
cl::opt<mz::codegen::Target> target(
    "target", cl::desc("Where the step runs"), cl::init(mz::codegen::Target::Cpu),
    cl::values(clEnumValN(mz::codegen::Target::Cpu, "cpu",
                          "C++ with OpenMP and OpenBLAS"),
               clEnumValN(mz::codegen::Target::Cuda, "cuda",
                          "CUDA (cuBLASLt and own kernels)")),
    cl::sub(runCommand), cl::sub(emitCommand));
cl::opt<unsigned> repeat(
    "repeat",
    cl::desc("After the run, time N more forward steps on the same inputs "
             "and print the median and minimum"),
    cl::value_desc("N"), cl::init(0), cl::sub(runCommand));
cl::opt<std::string> artifactDir(
    "artifact-dir",
    cl::desc("Keep the compiled artifact (manifest, source, step.so, "
             "init.safetensors) in DIR"),
    cl::value_desc("DIR"), cl::sub(runCommand));
cl::list<std::string> constantInputs(
    "constant-input",
    cl::desc("Specialize a graph input to the value in a serialized ONNX "
             "TensorProto: NAME=FILE.pb (repeatable)"),
    cl::sub(importCommand), cl::sub(runCommand), cl::sub(emitCommand));
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

/// Reads the import flags shared by import, emit and run.
std::optional<mz::onnx::ImportOptions> importOptions() {
  mz::onnx::ImportOptions options;
  for (const std::string &text : inputShapes) {
    if (llvm::Error err = mz::onnx::parseInputShape(text, options)) {
      llvm::errs() << "ztc: error: " << llvm::toString(std::move(err))
                   << "\n";
      return std::nullopt;
    }
  }
  for (const std::string &text : constantInputs) {
    if (llvm::Error err = mz::onnx::parseConstantInput(text, options)) {
      llvm::errs() << "ztc: error: " << llvm::toString(std::move(err))
                   << "\n";
      return std::nullopt;
    }
  }
  return options;
}

/// A context with every ztc dialect and the one-line diagnostic printer.
std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  mz::registerAllDialects(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  installDiagnosticPrinter(*context);
  return context;
}

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

int runEmit() {
  std::unique_ptr<MLIRContext> context = makeContext();
  std::optional<mz::onnx::ImportOptions> options = importOptions();
  if (!options)
    return 1;
  mz::ArtifactContents artifact;
  if (failed(mz::compileForward(*context, modelPath, *options, target,
                                 artifact)))
    return 1;
  llvm::outs() << artifact.source;
  return 0;
}

int runRun() {
  std::unique_ptr<MLIRContext> context = makeContext();
  std::optional<mz::onnx::ImportOptions> options = importOptions();
  if (!options)
    return 1;
  // Dynamic dimensions not bound by --input-shape take the shapes of the
  // data given.
  std::string data = dataDir;
  options->shapeFor = [data](StringRef name)
      -> std::optional<llvm::SmallVector<int64_t>> {
    auto shape = ::ztc::bridge::npyShape(
        data + "/" + ::ztc::bridge::fileStem(name.str()) + ".npy");
    if (!shape)
      return std::nullopt;
    return llvm::SmallVector<int64_t>(shape->begin(), shape->end());
  };
  mz::ArtifactContents artifact;
  if (failed(mz::compileForward(*context, modelPath, *options, target,
                                 artifact)))
    return 1;

  std::string error, dir = artifactDir;
  bool temporary = dir.empty();
  if (temporary && (dir = ::ztc::bridge::makeTemporaryDirectory(error)).empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  error = ::ztc::bridge::writeAndBuildArtifact(dir, artifact);
  ::ztc::bridge::StepTimes times;
  if (error.empty())
    error = ::ztc::bridge::runArtifact(dir, dataDir, outputDir, repeat, times);
  if (temporary)
    ::ztc::bridge::removeDirectory(dir);
  if (!error.empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  if (times.runs)
    llvm::errs() << llvm::formatv(
        "ztc: forward step: median {0:F3} ms, min {1:F3} ms over {2} runs "
        "(arena {3} bytes)\n",
        times.median, times.min, times.runs, artifact.manifest.arenaBytes);
  return 0;
}

int runListOps() {
  for (StringRef name : mz::onnx_to_nn::ConverterRegistry::get().opTypes())
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
      "  ztc run MODEL.onnx --data DIR --output-dir OUT [--target cpu|cuda]\n"
      "  ztc emit MODEL.onnx [--target cpu|cuda]\n"
      "  ztc list-ops\n");
  if (importCommand)
    return runImport();
  if (listOpsCommand)
    return runListOps();
  if (runCommand)
    return runRun();
  if (emitCommand)
    return runEmit();
  llvm::errs() << "ztc: error: no command given; see `ztc --help`\n";
  return 1;
}
