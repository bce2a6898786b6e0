//===- GroupLaunches.cpp - the ztc-group-launches pass --------------------===//
//
// Marks runs of consecutive, independent fused loops of a planned step as
// one launch group (kernel.launch_group), which the CUDA emitter prints as
// one kernel. See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Kernel/IR/KernelOps.h"
#include "dialects/NN/IR/ShapeLimits.h"

#include "llvm/ADT/STLExtras.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_GROUPLAUNCHESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// The bytes one operand touches: a whole argument, or a range of the arena
/// (a planned kernel.alloc, through any views). Constants are never
/// written, so they conflict with nothing.
struct Extent {
  Value argument;
  int64_t first = 0, end = 0;

  bool overlaps(const Extent &other) const {
    if (argument || other.argument)
      return argument == other.argument;
    return first < other.end && other.first < end;
  }
};

/// The extent of `buffer`, nullopt for a constant; failure when the buffer
/// is neither an argument nor a planned allocation.
FailureOr<std::optional<Extent>> extentOf(Value buffer) {
  Value root = kernel::rootBuffer(buffer);
  if (isa<BlockArgument>(root))
    return std::optional<Extent>(Extent{root, 0, 0});
  Operation *def = root.getDefiningOp();
  if (isa_and_nonnull<kernel::ConstantOp>(def))
    return std::optional<Extent>();
  auto alloc = dyn_cast_or_null<kernel::AllocOp>(def);
  if (!alloc || !alloc.getOffset())
    return failure();
  int64_t first = *alloc.getOffset();
  return std::optional<Extent>(
      Extent{Value(), first,
             first + nn::storageBytes(cast<MemRefType>(alloc.getType()))});
}

/// What one fused loop reads and writes.
struct Access {
  SmallVector<Extent> reads, writes;
  int64_t params = 0;
};

FailureOr<Access> accessOf(kernel::ElementwiseOp op) {
  Access access;
  auto add = [&](ValueRange buffers, SmallVector<Extent> &into) {
    for (Value buffer : buffers) {
      FailureOr<std::optional<Extent>> extent = extentOf(buffer);
      if (failed(extent))
        return failure();
      if (*extent)
        into.push_back(**extent);
      ++access.params;
    }
    return success();
  };
  if (failed(add(op.getInputs(), access.reads)) ||
      failed(add(op.getOutputs(), access.writes)))
    return failure();
  return access;
}

bool anyOverlap(ArrayRef<Extent> a, ArrayRef<Extent> b) {
  return llvm::any_of(a, [&](const Extent &x) {
    return llvm::any_of(b, [&](const Extent &y) { return x.overlaps(y); });
  });
}

/// Whether `later` may run in the same launch as every loop of `group`:
/// neither writes what the other reads or writes.
bool independent(ArrayRef<Access> group, const Access &later) {
  return llvm::none_of(group, [&](const Access &member) {
    return anyOverlap(member.writes, later.reads) ||
           anyOverlap(member.writes, later.writes) ||
           anyOverlap(member.reads, later.writes);
  });
}

struct GroupLaunchesPass
    : public ztc::impl::GroupLaunchesPassBase<GroupLaunchesPass> {
  using GroupLaunchesPassBase::GroupLaunchesPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (maxParams < 1) {
      func.emitError("max-params must be at least 1, got ")
          << static_cast<int64_t>(maxParams);
      return signalPassFailure();
    }
    Builder b(func.getContext());
    int64_t nextGroup = 0;
    SmallVector<kernel::ElementwiseOp> members;
    SmallVector<Access> accesses;
    int64_t params = 0;
    auto close = [&] {
      if (members.size() > 1) {
        for (kernel::ElementwiseOp member : members)
          member->setAttr(kernel::kLaunchGroupAttr,
                          b.getI64IntegerAttr(nextGroup));
        ++nextGroup;
      }
      members.clear();
      accesses.clear();
      params = 0;
    };
    for (Operation &op : func.getBody().front()) {
      // Allocations, views and constants run nothing: they do not end a
      // run of loops.
      if (isa<kernel::AllocOp, kernel::ViewOp, kernel::ConstantOp>(op))
        continue;
      auto loop = dyn_cast<kernel::ElementwiseOp>(op);
      if (!loop) {
        close();
        continue;
      }
      FailureOr<Access> access = accessOf(loop);
      if (failed(access)) {
        loop.emitOpError("has a buffer that is neither an argument, a "
                         "constant nor a planned allocation (run "
                         "ztc-plan-memory first)");
        return signalPassFailure();
      }
      bool joins = !members.empty() &&
                   kernel::streamOf(loop) == kernel::streamOf(members[0]) &&
                   params + access->params <= maxParams &&
                   independent(accesses, *access);
      if (!joins)
        close();
      members.push_back(loop);
      params += access->params;
      accesses.push_back(std::move(*access));
    }
    close();
  }
};

} // namespace
