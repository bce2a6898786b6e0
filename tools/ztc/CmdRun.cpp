//===- CmdRun.cpp - `ztc run` ---------------------------------------------===//
//
// `ztc run MODEL.onnx --data DIR --output-dir OUT`: the forward step
// compiled, built and run on the .npy inputs in DIR, its outputs written as
// .npy; --repeat times more steps.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "tools/ztc/Compile.h"
#include "tools/ztc/RuntimeBridge.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;
namespace mz = mlir::ztc;

namespace ztc::driver {

cl::SubCommand &runCommand() {
  static cl::SubCommand command(
      "run", "Compile the forward step of an ONNX model and run it on .npy "
             "inputs");
  return command;
}

namespace {

cl::opt<std::string> dataDir("data",
                             cl::desc("Directory with <input>.npy per graph "
                                      "input"),
                             cl::value_desc("DIR"), cl::Required,
                             cl::sub(runCommand()));
cl::opt<std::string> outputDir("output-dir",
                               cl::desc("Directory for <output>.npy"),
                               cl::value_desc("DIR"), cl::Required,
                               cl::sub(runCommand()));
cl::opt<unsigned> repeat(
    "repeat",
    cl::desc("After the run, time N more forward steps on the same inputs "
             "and print the median and minimum"),
    cl::value_desc("N"), cl::init(0), cl::sub(runCommand()));
cl::opt<uint64_t> runSeed("seed",
                          cl::desc("Seed of the random numbers (the masks of "
                                   "training-mode Dropout)"),
                          cl::init(0), cl::sub(runCommand()));
cl::opt<std::string> artifactDir(
    "artifact-dir",
    cl::desc("Keep the compiled artifact (manifest, source, step.so, "
             "init.safetensors) in DIR"),
    cl::value_desc("DIR"), cl::sub(runCommand()));

} // namespace

int runRun() {
  std::unique_ptr<MLIRContext> context = makeContext();
  std::optional<mz::onnx::ImportOptions> options = importOptions();
  if (!options)
    return 1;
  // Dynamic dimensions not bound by --input-shape take the shapes of the
  // data given; a missing or unreadable file says so, naming it.
  std::string data = dataDir;
  options->shapeFor =
      [data](StringRef name,
             std::string &why) -> std::optional<llvm::SmallVector<int64_t>> {
    auto shape = ::ztc::bridge::npyShape(
        data + "/" + ::ztc::bridge::fileStem(name.str()) + ".npy", why);
    if (!shape)
      return std::nullopt;
    return llvm::SmallVector<int64_t>(shape->begin(), shape->end());
  };
  mz::ArtifactContents artifact;
  if (failed(
          mz::compileForward(*context, modelPath, *options, target, artifact)))
    return 1;

  std::string error, dir = artifactDir;
  bool temporary = dir.empty();
  if (!temporary &&
      !(error = ::ztc::bridge::checkArtifactOutput(dir)).empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  if (temporary &&
      (dir = ::ztc::bridge::makeTemporaryDirectory(error)).empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  error = ::ztc::bridge::writeAndBuildArtifact(dir, artifact);
  ::ztc::bridge::StepTimes times;
  if (error.empty())
    error = ::ztc::bridge::runArtifact(dir, dataDir, outputDir, runSeed, repeat,
                                       times);
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

} // namespace ztc::driver
