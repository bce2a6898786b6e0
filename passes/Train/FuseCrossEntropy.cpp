//===- FuseCrossEntropy.cpp - the ztc-fuse-cross-entropy pass -------------===//
//
// Recognizes the cross entropy ztc-attach-loss builds on a classifier's
// product (a matrix product with the weight, flattened to [N, V] and, in
// mixed precision, widened to f32, a log-softmax over the classes, a mean
// negative log-likelihood) and
// replaces it with one nn.linear_cross_entropy, whose kernels never hold
// the logits. See the pass description in Passes.td; the code follows its
// numbered steps.
//
//===----------------------------------------------------------------------===//

#include "dialects/ElementTypes.h"
#include "passes/Passes.h"

#include <optional>

namespace mlir::ztc {
#define GEN_PASS_DEF_FUSECROSSENTROPYPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// What steps 1 to 4 find behind a loss.
struct Match {
  nn::NllLossOp loss;
  nn::LogSoftmaxOp logSoftmax;
  /// What step 2 found between the product and the log-softmax: the
  /// flattening, the widening to f32, neither or both, from the
  /// log-softmax back.
  SmallVector<Operation *, 2> between;
  nn::MatMulOp product;
  /// The weight as the fused op reads it, and the transpose behind it.
  Value weight;
  nn::TransposeOp transpose;
};

Type elementOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

/// Steps 1 to 4 from the loss.
std::optional<Match> matchCrossEntropy(nn::NllLossOp loss) {
  Match match;
  match.loss = loss;
  // 1. A mean loss without class weights on the log-softmax of [N, V].
  if (loss.getReduction() != "mean" || loss.getWeight())
    return std::nullopt;
  match.logSoftmax = loss.getLogProbs().getDefiningOp<nn::LogSoftmaxOp>();
  if (!match.logSoftmax || !match.logSoftmax.getResult().hasOneUse() ||
      match.logSoftmax.getAxis() != 1 ||
      match.logSoftmax.getType().getRank() != 2)
    return std::nullopt;
  // 2. The product behind an optional flattening and an optional
  // widening, in either order, each read once.
  Value z = match.logSoftmax.getX();
  if (!z.hasOneUse())
    return std::nullopt;
  bool flattened = false, widened = false;
  for (int step = 0; step < 2; ++step) {
    Operation *op = z.getDefiningOp();
    if (auto flatten = dyn_cast_or_null<nn::ReshapeOp>(op);
        flatten && !flattened) {
      z = flatten.getX();
      flattened = true;
    } else if (auto widen = dyn_cast_or_null<nn::CastOp>(op);
               widen && !widened) {
      z = widen.getX();
      widened = true;
    } else {
      break;
    }
    match.between.push_back(op);
    if (!z.hasOneUse())
      return std::nullopt;
  }
  match.product = z.getDefiningOp<nn::MatMulOp>();
  if (!match.product)
    return std::nullopt;
  auto hType = cast<RankedTensorType>(match.product.getA().getType());
  auto bType = cast<RankedTensorType>(match.product.getB().getType());
  auto zType = cast<RankedTensorType>(match.product.getType());
  // The flattening keeps the classes last: [..., V] to [N, V].
  ArrayRef<int64_t> flat = match.logSoftmax.getType().getShape();
  if (hType.getRank() < 2 || bType.getRank() != 2 ||
      zType.getShape().drop_back() != hType.getShape().drop_back() ||
      flat.back() != zType.getShape().back())
    return std::nullopt;
  // 3. The kernels' element types: one for the operands, the loss in its
  // compute type (f32 through the widening of a half product).
  Type element = hType.getElementType(), lossElement = elementOf(loss);
  if (bType.getElementType() != element)
    return std::nullopt;
  bool wide = element.isF32() || element.isF64();
  if (widened ? !isHalfFloat(element) || !lossElement.isF32()
              : !wide || lossElement != element)
    return std::nullopt;
  // 4. A tied head's transposed embedding.
  match.weight = match.product.getB();
  if ((match.transpose = match.weight.getDefiningOp<nn::TransposeOp>()) &&
      llvm::equal(match.transpose.getPerm(), ArrayRef<int64_t>{1, 0}))
    match.weight = match.transpose.getX();
  else
    match.transpose = nullptr;
  return match;
}

struct FuseCrossEntropyPass
    : public ztc::impl::FuseCrossEntropyPassBase<FuseCrossEntropyPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<nn::NllLossOp> losses;
    func.walk([&](nn::NllLossOp op) { losses.push_back(op); });
    OpBuilder b(func.getContext());
    for (nn::NllLossOp loss : losses) {
      std::optional<Match> match = matchCrossEntropy(loss);
      if (!match)
        continue;
      // 5. x as [N, D], the target flat, then the fused op.
      b.setInsertionPoint(loss);
      Location loc = loss.getLoc();
      Value h = match->product.getA();
      auto hType = cast<RankedTensorType>(h.getType());
      int64_t width = hType.getShape().back();
      int64_t rows = hType.getNumElements() / std::max<int64_t>(width, 1);
      Value x = h;
      if (hType.getRank() != 2)
        x = nn::ReshapeOp::create(
            b, loc,
            RankedTensorType::get({rows, width}, hType.getElementType()), h);
      Value target = loss.getTarget();
      auto targetType = cast<RankedTensorType>(target.getType());
      if (targetType.getRank() != 1)
        target = nn::ReshapeOp::create(
            b, loc, RankedTensorType::get({rows}, targetType.getElementType()),
            target);
      auto fused = nn::LinearCrossEntropyOp::create(
          b, loc, x, match->weight, target,
          match->transpose ? b.getUnitAttr() : UnitAttr(),
          loss.getIgnoreIndexAttr());
      loss.getResult().replaceAllUsesWith(fused.getLoss());
      loss.erase();
      // The chain from the loss back to the product, each op's result
      // read only by the one erased before it.
      match->logSoftmax.erase();
      for (Operation *op : match->between)
        op->erase();
      match->product.erase();
      if (match->transpose && match->transpose.getResult().use_empty())
        match->transpose.erase();
    }
  }
};

} // namespace
