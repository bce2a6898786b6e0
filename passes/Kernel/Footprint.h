//===- Footprint.h - the planned bytes of a training step -------*- C++ -*-===//
//
// What one rank holds for a planned (kernel-level) module: its bindings by
// role, its constants and the arena every entry shares. `ztc inspect`
// reports it; ztc-recompute's budget mode measures its candidate plans by
// it.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_KERNEL_FOOTPRINT_H
#define ZTC_PASSES_KERNEL_FOOTPRINT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::ztc {

struct StepFootprint {
  /// The entry with the largest arena (train_step when there is one).
  func::FuncOp entry;
  /// Bytes of the bindings by role (each name once across entries), of the
  /// distinct constants, and of the arena (the largest entry's plan).
  uint64_t params = 0, buffers = 0, states = 0, constants = 0, data = 0,
           arena = 0;
  /// How many parameters the model has (elements of the param bindings,
  /// whole: a stage-3 shard counts its tensor's `dist.full_shape`).
  uint64_t paramCount = 0;
  /// One rank's gradient as the ZeRO paper counts it: each trained
  /// parameter's (one an entry writes; frozen ones have none) elements at
  /// its gradient's width (2 bytes for those in
  /// `train.half_gradients`, else the parameter's), whole, or a
  /// 1/world-size share from stage 2 on.
  uint64_t gradients = 0;
  /// Mixed precision: the half working copies of the parameters with half
  /// gradients, 2 bytes per element, which the step casts once and keeps
  /// from the forward to the backward (in the arena); at stage 3, the
  /// rank's persistent half blocks of its sharded parameters (`copies`),
  /// gathered for each use.
  uint64_t workingCopies = 0;
  /// Stage 3 under mixed precision: bytes of the `state` bindings that are
  /// a `train.copy_of` a parameter (its persistent half block).
  uint64_t copies = 0;
  /// The training step's `dist.world_size` and `dist.zero_stage`.
  uint64_t worldSize = 1, zeroStage = 0;
  /// The target library's memory besides the plan, once per process
  /// (`kernel.reserved_bytes`, CUDA's cuBLAS workspace; 0 on the CPU).
  uint64_t reserved = 0;
  /// How many sets of the per-call bindings the runtime keeps
  /// (`kernel.input_sets`; `data` counts them all).
  uint64_t inputSets = 1;
  uint64_t total() const {
    return params + buffers + states + copies + constants + data + arena +
           reserved;
  }
};

/// The footprint of a module after ztc-plan-memory. Fails with a diagnostic
/// when no entry is planned.
FailureOr<StepFootprint> measureFootprint(ModuleOp module);

/// Bytes as reports print them: "512 B", "7.25 GiB" (binary units, two
/// decimals).
std::string bytesText(uint64_t bytes);

/// A byte count as flags take it: a number and an optional unit, decimal
/// (KB, MB, GB, TB) or binary (KiB, MiB, GiB, TiB): `8GiB`, `7.5GB`,
/// `6000000000`. None, and `error` says why, for anything else.
std::optional<uint64_t> parseByteCount(llvm::StringRef text,
                                       std::string &error);

} // namespace mlir::ztc

#endif // ZTC_PASSES_KERNEL_FOOTPRINT_H
