//===- PlanMemory.cpp - the ztc-plan-memory pass ------------------*- C++
//-*-===//
//
// Static memory planning: every arena buffer gets a byte offset from its
// live range, so the step's peak memory is a compile-time number. See the
// pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "llvm/ADT/STLExtras.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

struct Buffer {
  kernel::AllocOp alloc;
  int64_t bytes = 0;
  int64_t first = 0, last = 0; // live range, in op numbers, inclusive
  int64_t offset = -1;
};

int64_t alignTo(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

int64_t bufferBytes(MemRefType type) {
  int64_t elementBytes = (type.getElementTypeBitWidth() + 7) / 8;
  return type.getNumElements() * elementBytes;
}

/// The op of `block` that contains `op`.
Operation *topLevel(Operation *op, Block &block) {
  while (op->getBlock() != &block)
    op = op->getParentOp();
  return op;
}

/// Extends `buffer`'s range over every op that reads `value` or a view of it.
void extendOverUses(Value value, Buffer &buffer, Block &block,
                    const DenseMap<Operation *, int64_t> &number, int64_t end) {
  for (Operation *user : value.getUsers()) {
    Operation *top = topLevel(user, block);
    int64_t at = isa<func::ReturnOp>(top) ? end : number.lookup(top);
    buffer.last = std::max(buffer.last, at);
    if (auto view = dyn_cast<kernel::ViewOp>(user))
      extendOverUses(view.getResult(), buffer, block, number, end);
  }
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
    Block &block = func.getBody().front();
    DenseMap<Operation *, int64_t> number;
    for (auto [i, op] : llvm::enumerate(block))
      number[&op] = i;
    int64_t end = block.getOperations().size();

    // 1. Live ranges.
    SmallVector<Buffer> buffers;
    int64_t unplanned = 0;
    for (auto alloc : block.getOps<kernel::AllocOp>()) {
      Buffer buffer;
      buffer.alloc = alloc;
      buffer.bytes = bufferBytes(cast<MemRefType>(alloc.getType()));
      buffer.first = buffer.last = number.lookup(alloc);
      extendOverUses(alloc.getResult(), buffer, block, number, end);
      unplanned += alignTo(buffer.bytes, alignment);
      buffers.push_back(buffer);
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
        if (other->first <= buffer->last && buffer->first <= other->last)
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
      peak = std::max(peak, alignTo(candidate + buffer->bytes, alignment));
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
