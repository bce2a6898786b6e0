//===- LiveRanges.h - arena buffers' live ranges ----------------*- C++ -*-===//
//
// The live range of every arena buffer (kernel.alloc) of a kernel-level
// step: ztc-plan-memory places buffers by them, and `ztc inspect --memory`
// draws the step's memory over time from them.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_KERNEL_LIVERANGES_H
#define ZTC_PASSES_KERNEL_LIVERANGES_H

#include "dialects/Kernel/IR/KernelOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::ztc {

/// When an arena buffer is in use, in numbers of the ops of the step's
/// block (from 0, in program order), inclusive: from its kernel.alloc to
/// the last op that reads or writes it or a view of it, extended until
/// every stream that runs later work is ordered after that op; a returned
/// buffer lives to the end (the number of ops).
struct LiveRange {
  kernel::AllocOp alloc;
  int64_t bytes = 0;
  int64_t first = 0, last = 0;
  /// Per stream of the step: the first op of that stream that reads or
  /// writes the buffer (INT64_MAX: none), and the position by which that
  /// stream is ordered after every use of the buffer on any stream.
  SmallVector<int64_t, 2> firstOn, lastOn;

  /// Whether `later` may take this buffer's bytes: every stream touches
  /// `later` only after it is ordered after this buffer's last use (stream
  /// 0 from `later`'s alloc on). With one stream, whether `later` is
  /// allocated after this one's last use.
  bool precedes(const LiveRange &later) const;
};

/// The op of `block` that contains `op` (`op` itself when it is in
/// `block`): where a use inside a region happens in the step's order.
Operation *topLevelIn(Operation *op, Block &block);

/// The live ranges of `func`'s buffers, in program order. Fails, with an
/// error at `func`, when a stream other than 0 has work stream 0 does not
/// wait for before the step ends (the next call would race with it).
FailureOr<SmallVector<LiveRange>> computeLiveRanges(func::FuncOp func);

} // namespace mlir::ztc

#endif // ZTC_PASSES_KERNEL_LIVERANGES_H
