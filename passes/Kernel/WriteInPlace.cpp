//===- WriteInPlace.cpp - the ztc-write-in-place pass ---------------------===//
//
// Lets a kernel write its result over an input that nothing reads after
// it, so the two never take memory side by side: a fused loop over a
// gradient it consumes, log-softmax over the logits.
// See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Kernel/LiveRanges.h"
#include "passes/Passes.h"

#include "dialects/Kernel/IR/KernelOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_WRITEINPLACEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// Whether every op that reads or writes `buffer` or a view of it, `writer`
/// aside, comes before `writer` on `writer`'s stream. A use on another
/// stream may run while `writer` does, and one after it would read what
/// `writer` wrote over the buffer.
bool usedOnlyBefore(Value buffer, Operation *writer) {
  Block &block = *writer->getBlock();
  int64_t stream = kernel::streamOf(writer);
  SmallVector<Operation *> users;
  kernel::bufferUsers(buffer, users);
  return llvm::all_of(users, [&](Operation *user) {
    Operation *top = topLevelIn(user, block);
    return top == writer ||
           (top->isBeforeInBlock(writer) && kernel::streamOf(top) == stream);
  });
}

/// Whether `writer` may write its output `output` over its input `input`,
/// and nothing is lost by it: `output` is an arena buffer of its own that
/// only `writer` and later ops use; `input` is a view of, or is, an arena
/// buffer that no op uses after `writer` or on another stream; every
/// operand of `writer` on that buffer is `input` itself (an elementwise
/// kernel reads the element it writes, so its other reads of the buffer
/// with the output's shape are safe too).
bool canWriteOver(Operation *writer, Value input, Value output) {
  const bool sameIndex = isa<kernel::ElementwiseOp>(writer);
  if (input.getType() != output.getType())
    return false;
  auto outputAlloc = output.getDefiningOp<kernel::AllocOp>();
  Value root = kernel::rootBuffer(input);
  if (!outputAlloc || !root.getDefiningOp<kernel::AllocOp>() || root == output)
    return false;
  for (Operation *user : output.getUsers()) {
    if (user == writer)
      continue;
    // A returned result stays a buffer of its own, not a view.
    if (isa<func::ReturnOp>(user) && input != root)
      return false;
    if (topLevelIn(user, *writer->getBlock())->isBeforeInBlock(writer))
      return false;
  }
  for (Value operand : writer->getOperands()) {
    if (operand == output || kernel::rootBuffer(operand) != root)
      continue;
    if (operand != input &&
        !(sameIndex && operand.getType() == output.getType()))
      return false;
  }
  return usedOnlyBefore(root, writer);
}

/// The last op in `op`'s block before `op` that uses `input`'s buffer (or
/// a view of it); null if none does.
Operation *lastUseBefore(Value input, Operation *op) {
  Block &block = *op->getBlock();
  SmallVector<Operation *> users;
  kernel::bufferUsers(kernel::rootBuffer(input), users);
  Operation *last = nullptr;
  for (Operation *user : users) {
    Operation *top = topLevelIn(user, block);
    if (top != op && top->isBeforeInBlock(op) &&
        (!last || last->isBeforeInBlock(top)))
      last = top;
  }
  return last;
}

/// The (input, output) pairs `op` could write in place, in the order to
/// try them: a loop's inputs whose buffers were last used furthest back
/// first, so that writing over one adds no dependence on the ops just
/// before (ztc-group-launches may still launch the loop with them).
SmallVector<std::pair<Value, Value>> candidates(Operation *op) {
  SmallVector<std::pair<Value, Value>> pairs;
  if (auto loop = dyn_cast<kernel::ElementwiseOp>(op)) {
    SmallVector<std::pair<Operation *, Value>> inputs;
    for (Value input : loop.getInputs())
      inputs.push_back({lastUseBefore(input, op), input});
    llvm::stable_sort(inputs, [](const auto &a, const auto &b) {
      return !a.first ? b.first != nullptr
                      : b.first && a.first->isBeforeInBlock(b.first);
    });
    for (Value output : loop.getOutputs())
      for (auto [last, input] : inputs)
        if (input.getType() == output.getType())
          pairs.push_back({input, output});
  } else if (auto call = dyn_cast<kernel::CallOp>(op)) {
    std::optional<unsigned> index =
        kernel::libraryKernelOf(call).inPlaceInput();
    if (index && *index < call.getInputs().size())
      pairs.push_back({call.getInputs()[*index], call.getOutputs().front()});
  }
  return pairs;
}

struct WriteInPlacePass
    : public mlir::ztc::impl::WriteInPlacePassBase<WriteInPlacePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.getBody().empty())
      return;
    for (Operation &op : func.getBody().front()) {
      // One pair at a time: writing over an input replaces an output, so
      // the pairs are listed again after each.
      bool changed = true;
      while (changed) {
        changed = false;
        for (auto [input, output] : candidates(&op)) {
          if (!canWriteOver(&op, input, output))
            continue;
          Operation *alloc = output.getDefiningOp();
          output.replaceAllUsesWith(input);
          alloc->erase();
          changed = true;
          break;
        }
      }
    }
  }
};

} // namespace
