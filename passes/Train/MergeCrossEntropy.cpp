//===- MergeCrossEntropy.cpp - the ztc-merge-cross-entropy pass -----------===//
//
// In an entry that has both, takes a fused cross entropy's loss from its
// backward op (which recomputes the logits anyway) and drops the forward
// op, so the classifier's product runs once per chunk less. See the pass
// description in Passes.td; the code follows its numbered steps.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_MERGECROSSENTROPYPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// Whether `backward` is the gradient of `forward`: the same operands and
/// attributes.
bool isGradientOf(nn::LinearCrossEntropyBackwardOp backward,
                  nn::LinearCrossEntropyOp forward) {
  return backward.getX() == forward.getX() &&
         backward.getW() == forward.getW() &&
         backward.getTarget() == forward.getTarget() &&
         backward.getTransposeB() == forward.getTransposeB() &&
         backward.getIgnoreIndexAttr() == forward.getIgnoreIndexAttr();
}

struct MergeCrossEntropyPass
    : public ztc::impl::MergeCrossEntropyPassBase<MergeCrossEntropyPass> {
  void runOnOperation() override {
    SmallVector<nn::LinearCrossEntropyOp> forwards;
    getOperation().walk(
        [&](nn::LinearCrossEntropyOp op) { forwards.push_back(op); });
    for (nn::LinearCrossEntropyOp forward : forwards) {
      // 1. The forward's count unread, and its backward in the block.
      if (!forward.getCorrect().use_empty())
        continue;
      nn::LinearCrossEntropyBackwardOp backward;
      for (Operation *user : forward.getX().getUsers()) {
        auto candidate = dyn_cast<nn::LinearCrossEntropyBackwardOp>(user);
        if (candidate && candidate->getBlock() == forward->getBlock() &&
            isGradientOf(candidate, forward)) {
          backward = candidate;
          break;
        }
      }
      if (!backward)
        continue;
      // 2. Every reader of the loss after the backward op.
      Value loss = forward.getLoss();
      if (llvm::any_of(loss.getUsers(), [&](Operation *user) {
            Operation *reader =
                forward->getBlock()->findAncestorOpInBlock(*user);
            return !reader || !backward->isBeforeInBlock(reader);
          }))
        continue;
      loss.replaceAllUsesWith(backward.getLoss());
      forward.erase();
    }
  }
};

} // namespace
