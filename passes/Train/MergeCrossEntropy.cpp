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

/// Decides whether a value of the backward is one of the forward: the
/// value itself, or its recomputation (ztc-recompute's clones, marked
/// train.recomputed, of the ops that computed it, reading the same values
/// or their recomputations), which has the same bits.
class SameValues {
public:
  bool operator()(Value original, Value value) {
    if (original == value)
      return true;
    auto result = dyn_cast<OpResult>(value);
    auto from = dyn_cast<OpResult>(original);
    if (!result || !from || result.getResultNumber() != from.getResultNumber())
      return false;
    auto [known, inserted] = memo.try_emplace({original, value}, false);
    if (!inserted)
      return known->second;
    bool same = sameOp(from.getOwner(), result.getOwner());
    memo[{original, value}] = same;
    return same;
  }

private:
  /// Whether `clone` is a recomputation of `op`: the same op, properties,
  /// attributes (but the mark) and result types, and operands that are
  /// the same values.
  bool sameOp(Operation *op, Operation *clone) {
    if (!clone->hasAttr(train::kRecomputedAttr) ||
        clone->getName() != op->getName() ||
        clone->getNumOperands() != op->getNumOperands() ||
        clone->getResultTypes() != op->getResultTypes() ||
        clone->getNumRegions() != 0 || op->getNumRegions() != 0 ||
        clone->getPropertiesAsAttribute() != op->getPropertiesAsAttribute())
      return false;
    // The dictionary holds every attribute an op keeps outside its
    // properties (all of them for nn ops).
    NamedAttrList attributes(clone->getRawDictionaryAttrs());
    attributes.erase(train::kRecomputedAttr);
    if (attributes.getDictionary(clone->getContext()) !=
        op->getRawDictionaryAttrs())
      return false;
    return llvm::all_of(llvm::zip(op->getOperands(), clone->getOperands()),
                        [&](auto pair) {
                          return (*this)(std::get<0>(pair), std::get<1>(pair));
                        });
  }

  DenseMap<std::pair<Value, Value>, bool> memo;
};

/// Whether `backward` is the gradient of `forward`: the same attributes,
/// and operands that are the same values (a policy may have recomputed x
/// for the backward).
bool isGradientOf(nn::LinearCrossEntropyBackwardOp backward,
                  nn::LinearCrossEntropyOp forward, SameValues &same) {
  return backward.getTransposeB() == forward.getTransposeB() &&
         backward.getIgnoreIndexAttr() == forward.getIgnoreIndexAttr() &&
         same(forward.getX(), backward.getX()) &&
         same(forward.getW(), backward.getW()) &&
         same(forward.getTarget(), backward.getTarget());
}

struct MergeCrossEntropyPass
    : public ztc::impl::MergeCrossEntropyPassBase<MergeCrossEntropyPass> {
  void runOnOperation() override {
    SmallVector<nn::LinearCrossEntropyOp> forwards;
    SmallVector<nn::LinearCrossEntropyBackwardOp> backwards;
    getOperation().walk([&](Operation *op) {
      if (auto forward = dyn_cast<nn::LinearCrossEntropyOp>(op))
        forwards.push_back(forward);
      else if (auto backward = dyn_cast<nn::LinearCrossEntropyBackwardOp>(op))
        backwards.push_back(backward);
    });
    SameValues same;
    for (nn::LinearCrossEntropyOp forward : forwards) {
      // 1. The forward's count unread, and its backward in the block.
      if (!forward.getCorrect().use_empty())
        continue;
      nn::LinearCrossEntropyBackwardOp backward;
      for (nn::LinearCrossEntropyBackwardOp candidate : backwards)
        if (candidate->getBlock() == forward->getBlock() &&
            isGradientOf(candidate, forward, same)) {
          backward = candidate;
          break;
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
