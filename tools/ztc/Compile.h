//===- Compile.h - ONNX model to a ztc artifact -------------------*- C++
//-*-===//
//
// The compiler half of `ztc run` and `ztc emit`: import, lower through the
// nn and kernel dialects, plan memory and print the step's source, then
// gather what the runtime needs to execute it (manifest, initial values).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TOOLS_ZTC_COMPILE_H
#define ZTC_TOOLS_ZTC_COMPILE_H

#include "codegen/Emit.h"
#include "mlir/Pass/PassManager.h"
#include "dialects/Onnx/Import/Importer.h"

#include "runtime/Artifact.h"
#include "runtime/Schedule.h"
#include "runtime/Tensor.h"

#include <map>
#include <string>

namespace mlir::ztc {

/// Everything an artifact directory holds, in memory.
struct ArtifactContents {
  ::ztc::rt::Manifest manifest;
  std::string source;
  std::map<std::string, ::ztc::rt::Tensor> initialValues;
  /// The ONNX model compiled (absolute path), for `ztc export`.
  std::string sourceModel;
};

/// The little-endian bytes of a constant, one byte per bool (the layout of
/// init.safetensors).
std::vector<uint8_t> constantBytes(ElementsAttr value);

/// The runtime's role for an emitted binding.
::ztc::rt::BindingRole toRole(codegen::Binding::Role role);

/// Manifest outputs for an entry's emitted outputs.
std::vector<::ztc::rt::Output>
toOutputs(const std::vector<codegen::Output> &outputs);

/// How a model trains: loss, optimizer, schedule, frozen parameters.
struct TrainingOptions {
  std::string loss = "cross_entropy";
  std::string lossInput;
  std::string labels = "labels";
  int64_t ignoreIndex = -100;
  std::string optimizer = "adamw";
  double momentum = 0, weightDecay = -1, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
         clipGradNorm = 0;
  bool nesterov = false;
  /// Micro-batches per optimizer step (1: none).
  unsigned gradAccum = 1;
  std::vector<std::string> frozen;
  ::ztc::rt::ScheduleConfig schedule;
};

/// Adds the passes that turn an nn model function into one returning the
/// loss and its gradients (attach the loss, autodiff, clean up).
void addLossAndGradientPasses(OpPassManager &pm,
                              const TrainingOptions &training);

/// Compiles the training step of the model at `modelPath` for `target`:
/// entries `ztc_train_step` (loss, gradients, in-place update) and
/// `ztc_loss_and_grads`.
LogicalResult compileTraining(MLIRContext &context, llvm::StringRef modelPath,
                              const onnx::ImportOptions &options,
                              const TrainingOptions &training,
                              codegen::Target target,
                              ArtifactContents &artifact);

/// Compiles the forward step of the model at `modelPath` for `target`.
/// Diagnostics go to `context`; fails after reporting.
LogicalResult compileForward(MLIRContext &context, llvm::StringRef modelPath,
                             const onnx::ImportOptions &options,
                             codegen::Target target,
                             ArtifactContents &artifact);

} // namespace mlir::ztc

#endif // ZTC_TOOLS_ZTC_COMPILE_H
