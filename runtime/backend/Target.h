//===- Target.h - what each code-generation target is -----------*- C++ -*-===//
//
// The one table of targets: the driver, the training pipeline, the emitter,
// the artifact writer and the trainer ask it, instead of each branching on
// the target. Adding a target is a row here, its printer in codegen/, its
// kernel library in runtime/kernels/ and its backend in runtime/backend/.
// Header-only and free of MLIR, so the compiler's pipeline library and the
// runtime both include it.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_BACKEND_TARGET_H
#define ZTC_RUNTIME_BACKEND_TARGET_H

#include "runtime/kernels/cuda/Scratch.h"

#include <cstdint>
#include <optional>
#include <string>

namespace ztc::rt {

/// Where generated code runs.
enum class Target { Cpu, Cuda };

/// What a target is, for everything outside its printer and its library.
struct TargetInfo {
  Target target;
  /// Its name on command lines and in manifests.
  const char *name;
  /// For --help.
  const char *description;
  /// The generated source's file name in an artifact.
  const char *sourceName;
  /// The layout of f32 convolutions' activations when --conv-layout is
  /// not given: "nhwc" or "nchw" (both libraries take both).
  const char *defaultConvLayout;
  /// Whether channels-last convolutions (--conv-layout nhwc) include f16
  /// and bf16 ones: cuDNN's take them, oneDNN's fast ones are f32.
  bool channelsLastHalfTypes;
  /// The communicator `ztc-train --comm auto` takes under an MPI launcher.
  const char *launchedCommunicator;
  /// Whether its library's kernels work in scratch memory of the plan
  /// (the ZTC_SCRATCH rows of runtime/kernels/Library.def): the pipelines
  /// run ztc-plan-scratch, and the calls pass a ztc::Scratch.
  bool plannedScratch;
  /// Device memory its library holds once per process besides the plan
  /// (cuBLAS's workspace), which the memory report and the runtime's check
  /// count with the arena.
  int64_t reservedBytes;
  /// How many sets of the per-call bindings (inputs, labels,
  /// hyperparameters) its runtime keeps on the device: CUDA uploads the
  /// next call's into a second set while one runs. The plan counts them.
  int64_t inputSets;
  /// Whether `--fuse-attention auto` fuses attention (ztc-fuse-attention):
  /// on the GPU, where the scores' round trips through memory dominate; not
  /// on the CPU, whose results thus stay those of the unfused step.
  bool fusesAttention;
  /// Whether `--fuse-cross-entropy auto` fuses the classifier's product
  /// with its loss (ztc-fuse-cross-entropy): on the GPU, where the [N, V]
  /// logits are the step's largest buffer; not on the CPU, whose results
  /// thus stay those of the unfused step.
  bool fusesCrossEntropy;
  /// Whether each fused loop is a launch that consecutive independent
  /// loops can share (ztc-group-launches): a CUDA kernel launch; on the
  /// CPU a loop is a plain call, and its step stays as it was.
  bool groupsLaunches;
};

inline constexpr TargetInfo kTargets[] = {
    {Target::Cpu, "cpu", "C++ with OpenMP and OpenBLAS", "step.cpp", "nhwc",
     false, "mpi", false, 0, 1, false, false, false},
    {Target::Cuda, "cuda", "CUDA (cuBLAS and own kernels)", "step.cu", "nchw",
     true, "nccl", true, ::ztc::cuda::scratch::kCublasWorkspaceBytes, 2, true,
     true, true},
};

inline const TargetInfo &targetInfo(Target target) {
  return kTargets[static_cast<int>(target)];
}

/// "cpu" or "cuda".
inline const char *targetName(Target target) { return targetInfo(target).name; }

/// The target named `name`, or nullopt.
inline std::optional<Target> parseTarget(const std::string &name) {
  for (const TargetInfo &info : kTargets)
    if (name == info.name)
      return info.target;
  return std::nullopt;
}

} // namespace ztc::rt

#endif // ZTC_RUNTIME_BACKEND_TARGET_H
