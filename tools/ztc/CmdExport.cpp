//===- CmdExport.cpp - `ztc export` ---------------------------------------===//
//
// `ztc export ART.ztc --checkpoint DIR`: the weights of a checkpoint written
// back into the ONNX model (-o), as a state dict (--state-dict) or as a peft
// adapter (--adapter).
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "tools/ztc/RuntimeBridge.h"

#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
namespace cl = llvm::cl;
namespace mz = mlir::ztc;

namespace ztc::driver {

cl::SubCommand &exportCommand() {
  static cl::SubCommand command(
      "export", "Write the ONNX model with the weights of a checkpoint");
  return command;
}

namespace {

cl::opt<std::string> artifactPath(cl::Positional, cl::desc("ART.ztc"),
                                  cl::Required, cl::sub(exportCommand()));
cl::opt<std::string> checkpointDir("checkpoint",
                                   cl::desc("Checkpoint directory (ztc train "
                                            "--save)"),
                                   cl::value_desc("DIR"), cl::Required,
                                   cl::sub(exportCommand()));
cl::opt<std::string> exportOutput("o", cl::desc("Write the model to FILE"),
                                  cl::value_desc("trained.onnx"),
                                  cl::sub(exportCommand()));
cl::opt<std::string> exportStateDict(
    "state-dict",
    cl::desc("Write the trained parameters and buffers to FILE as "
             "safetensors, under the model's state-dict names (a model "
             "exported with python/ztc_export.py; tied parameters under "
             "each of their names), for PyTorch's load_state_dict"),
    cl::value_desc("FILE.safetensors"), cl::sub(exportCommand()));
cl::opt<bool> exportMerge(
    "merge",
    cl::desc("A LoRA step (--lora): fold the trained adapters into their "
             "base weights (W + scale * B A) for -o and --state-dict"),
    cl::sub(exportCommand()));
cl::opt<std::string> exportAdapter(
    "adapter",
    cl::desc("A LoRA step (--lora): write the trained adapters to DIR as "
             "Hugging Face peft saves them (adapter_model.safetensors, "
             "adapter_config.json), for PeftModel.from_pretrained"),
    cl::value_desc("DIR"), cl::sub(exportCommand()));
cl::opt<bool> exportInference(
    "inference",
    cl::desc("Switch training-mode BatchNormalization (running statistics "
             "normalize) and Dropout (identity) to inference"),
    cl::sub(exportCommand()));

/// `ztc export --state-dict`.
int writeStateDict(MLIRContext &context, const std::string &sourceModel) {
  bool hasRoles = false;
  std::map<std::string, std::vector<std::string>> tied;
  if (failed(
          mz::onnx::readTiedParameters(context, sourceModel, hasRoles, tied)))
    return 1;
  if (!hasRoles)
    llvm::errs() << "ztc: warning: " << sourceModel
                 << " has no 'ztc.initializers' metadata: the tensors are "
                    "named as its ONNX initializers, which may not be the "
                    "model's state-dict names (export it with "
                    "python/ztc_export.py)\n";
  size_t tensors = 0;
  std::string error = ::ztc::bridge::writeStateDict(
      artifactPath, checkpointDir, tied, exportStateDict, tensors, exportMerge);
  if (!error.empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  llvm::errs() << "ztc: wrote " << exportStateDict << " (" << tensors
               << " tensors under the model's state-dict names)\n";
  return 0;
}

} // namespace

int runExport() {
  if (exportOutput.empty() && exportStateDict.empty() &&
      exportAdapter.empty()) {
    llvm::errs() << "ztc: error: ztc export needs -o trained.onnx, "
                    "--state-dict weights.safetensors or --adapter DIR\n";
    return 1;
  }
  if (!exportAdapter.empty()) {
    size_t tensors = 0;
    std::string error = ::ztc::bridge::writeLoraAdapter(
        artifactPath, checkpointDir, exportAdapter, tensors);
    if (!error.empty()) {
      llvm::errs() << "ztc: error: " << error << "\n";
      return 1;
    }
    llvm::errs() << "ztc: wrote " << exportAdapter << " (" << tensors
                 << " adapter tensors under peft's names, and "
                    "adapter_config.json)\n";
    if (exportOutput.empty() && exportStateDict.empty())
      return 0;
  }
  std::string sourceModel;
  std::map<std::string, std::vector<uint8_t>> params;
  std::string error = ::ztc::bridge::readCheckpointForExport(
      artifactPath, checkpointDir, sourceModel, params, exportMerge);
  if (!error.empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  std::unique_ptr<MLIRContext> context = makeContext();
  if (!exportStateDict.empty() && writeStateDict(*context, sourceModel))
    return 1;
  if (exportOutput.empty())
    return 0;
  mz::onnx::ExportSummary summary;
  if (failed(mz::onnx::writeModelWithInitializers(*context, sourceModel,
                                                  exportOutput, params,
                                                  exportInference, &summary)))
    return 1;
  llvm::errs() << "ztc: wrote " << exportOutput << " (" << params.size()
               << " trained parameters";
  if (exportInference)
    llvm::errs() << "; inference mode: " << summary.batchNorms
                 << " BatchNormalization, " << summary.dropouts << " Dropout";
  llvm::errs() << ")\n";
  return 0;
}

} // namespace ztc::driver
