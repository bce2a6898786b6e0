//===- Folding.h - what kernel folds share ----------------------*- C++ -*-===//
//
// What ztc-fold-transposes and ztc-fold-head-windows share while they let
// a kernel read or write a buffer in place of a copy: whether something
// writes a buffer between two ops, and the folded op's location kept on
// the kernel that now does its work.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_KERNEL_FOLDING_H
#define ZTC_PASSES_KERNEL_FOLDING_H

#include "dialects/Kernel/IR/KernelOps.h"

namespace mlir::ztc::kernel {

/// Whether an op after `from` and before `to` writes into `root`.
inline bool writtenBetween(Operation *from, Operation *to, Value root) {
  for (Operation *op = from->getNextNode(); op && op != to;
       op = op->getNextNode())
    for (Value written : writtenBuffers(op))
      if (rootBuffer(written) == root)
        return true;
  return false;
}

/// Adds `loc` to `op`'s location: the folded op's ONNX nodes join the
/// kernel that now does its work, so errors and reports still name them.
inline void addLoc(Operation *op, Location loc) {
  op->setLoc(FusedLoc::get(op->getContext(), {op->getLoc(), loc}));
}

} // namespace mlir::ztc::kernel

#endif // ZTC_PASSES_KERNEL_FOLDING_H
