//===- LiveRanges.h - arena buffers' live ranges ------------------*- C++
//-*-===//
//
// The live range of every arena buffer (kernel.alloc) of a kernel-level
// step: ztc-plan-memory places buffers by them, and `ztc inspect --memory`
// draws the step's memory over time from them.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_TRANSFORMS_LIVERANGES_H
#define ZTC_PASSES_TRANSFORMS_LIVERANGES_H

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
};

/// The live ranges of `func`'s buffers, in program order. Fails, with an
/// error at `func`, when a stream other than 0 has work stream 0 does not
/// wait for before the step ends (the next call would race with it).
FailureOr<SmallVector<LiveRange>> computeLiveRanges(func::FuncOp func);

} // namespace mlir::ztc

#endif // ZTC_PASSES_TRANSFORMS_LIVERANGES_H
