//===- CmdGradCheck.cpp - `ztc gradcheck` ---------------------------------===//
//
// `ztc gradcheck MODEL.onnx`: the compiled gradients compared with finite
// differences in float64 on random inputs (GradCheck.h).
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "tools/ztc/GradCheck.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;
namespace mz = mlir::ztc;

namespace ztc::driver {

cl::SubCommand &gradcheckCommand() {
  static cl::SubCommand command(
      "gradcheck", "Compare compiled gradients with finite differences in "
                   "float64 on random inputs");
  return command;
}

namespace {

const char *const kGradCheckPipelineFlags[] = {"loss",
                                               "loss-input",
                                               "labels",
                                               "ignore-index",
                                               "freeze",
                                               "recompute",
                                               "recompute-blocks",
                                               "recompute-search-nodes",
                                               "fuse-attention",
                                               "fuse-cross-entropy"};

PipelineFlags gradcheckFlags(gradcheckCommand(), kGradCheckPipelineFlags);

cl::opt<std::string> gradcheckModel(cl::Positional, cl::desc("MODEL.onnx"),
                                    cl::Required, cl::sub(gradcheckCommand()));
cl::opt<int64_t> gradcheckBatchSize(
    "batch-size", cl::desc("Bind the batch (first) dimension of every input"),
    cl::init(0), cl::sub(gradcheckCommand()));
cl::list<std::string> gradcheckInputShapes(
    "input-shape",
    cl::desc("Bind a graph input's shape: NAME=D0xD1x... (repeatable)"),
    cl::sub(gradcheckCommand()));
cl::opt<uint64_t> gradcheckSeed("seed",
                                cl::desc("Seed of the random inputs, of "
                                         "the sampled elements and of the "
                                         "dropout masks"),
                                cl::init(0), cl::sub(gradcheckCommand()));
cl::opt<double> gradcheckTolerance("tolerance",
                                   cl::desc("Largest relative error allowed"),
                                   cl::init(1e-6), cl::sub(gradcheckCommand()));

} // namespace

int runGradCheck() {
  mz::GradCheckOptions options;
  for (const std::string &text : gradcheckInputShapes) {
    if (llvm::Error err = mz::onnx::parseInputShape(text, options.import)) {
      llvm::errs() << "ztc: error: " << llvm::toString(std::move(err)) << "\n";
      return 1;
    }
  }
  options.import.batchSize = gradcheckBatchSize;
  options.import.bindHint =
      "--batch-size B (a first dimension) or --input-shape";
  if (failed(gradcheckFlags.apply(options.training)))
    return 1;
  options.seed = gradcheckSeed;
  options.tolerance = gradcheckTolerance;
  std::unique_ptr<MLIRContext> context = makeContext();
  FailureOr<bool> passed =
      mz::gradCheck(*context, gradcheckModel, options, llvm::outs());
  return succeeded(passed) && *passed ? 0 : 1;
}

} // namespace ztc::driver
