//===- PlanMemory.cpp - the ztc-plan-memory pass --------------------------===//
//
// Static memory planning: every arena buffer gets a byte offset from its
// live range, so the step's peak memory is a compile-time number. See the
// pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Kernel/LiveRanges.h"
#include "passes/Passes.h"

#include "llvm/ADT/STLExtras.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

struct Buffer : LiveRange {
  int64_t offset = -1;
};

int64_t alignTo(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

struct PlanMemoryPass : public ztc::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      func.emitError("alignment must be a power of two, got ")
          << static_cast<int64_t>(alignment);
      return signalPassFailure();
    }
    // 1. Live ranges.
    FailureOr<SmallVector<LiveRange>> ranges = computeLiveRanges(func);
    if (failed(ranges))
      return signalPassFailure();
    SmallVector<Buffer> buffers;
    int64_t unplanned = 0;
    for (const LiveRange &range : *ranges) {
      buffers.push_back({range});
      unplanned += alignTo(range.bytes, alignment);
    }

    // 2. Largest first, lowest free offset among live-overlapping buffers.
    SmallVector<Buffer *> order;
    for (Buffer &buffer : buffers)
      order.push_back(&buffer);
    llvm::stable_sort(order, [](const Buffer *a, const Buffer *b) {
      return a->bytes > b->bytes;
    });
    SmallVector<Buffer *> placed;
    int64_t peak = 0;
    for (Buffer *buffer : order) {
      SmallVector<Buffer *> conflicts;
      for (Buffer *other : placed)
        if (!other->precedes(*buffer) && !buffer->precedes(*other))
          conflicts.push_back(other);
      llvm::sort(conflicts, [](const Buffer *a, const Buffer *b) {
        return a->offset < b->offset;
      });
      int64_t candidate = 0;
      for (Buffer *other : conflicts) {
        if (candidate + buffer->bytes <= other->offset)
          break;
        candidate = std::max(candidate,
                             alignTo(other->offset + other->bytes, alignment));
      }
      buffer->offset = candidate;
      // The arena ends where its highest buffer does: offsets are aligned,
      // the end is exact, so a run can measure it (the high-water mark).
      peak = std::max(peak, candidate + buffer->bytes);
      placed.push_back(buffer);
    }

    // 3. Record the plan.
    Builder b(func.getContext());
    for (Buffer &buffer : buffers)
      buffer.alloc.setOffsetAttr(b.getI64IntegerAttr(buffer.offset));
    func->setAttr("kernel.arena_bytes", b.getI64IntegerAttr(peak));
    func->setAttr("kernel.unplanned_bytes", b.getI64IntegerAttr(unplanned));
  }
};

} // namespace
