//===- OpFacts.cpp - what passes read off an nn op --------------*- C++ -*-===//
//
// The cost and library-call interfaces' generated definitions, the FLOP
// counts of the ops that count their own (NN_CustomFlops: matrix products
// and convolutions, two per multiply-add) and the lookup of an op's
// autocast class (see OpFacts.td).
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/OpFacts.h"

#include "dialects/NN/IR/NNOps.h"

using namespace mlir;
using namespace mlir::ztc::nn;

#include "dialects/NN/IR/OpFacts.cpp.inc"

int64_t mlir::ztc::nn::staticElements(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape() ? type.getNumElements() : 0;
}

std::optional<ComputeClass> mlir::ztc::nn::getComputeClass(Operation *op) {
  if (op->hasTrait<HalfCompute>())
    return ComputeClass::Half;
  if (op->hasTrait<WideCompute>())
    return ComputeClass::Wide;
  if (op->hasTrait<FollowCompute>())
    return ComputeClass::Follow;
  if (op->hasTrait<OwnCompute>())
    return ComputeClass::Own;
  return std::nullopt;
}

namespace {

/// The product of `value`'s dimensions from `from` on: what one output
/// element of a convolution reads of the weight (C / group * kH * kW).
int64_t trailingProduct(Value value, unsigned from) {
  int64_t product = 1;
  for (int64_t dim :
       cast<RankedTensorType>(value.getType()).getShape().drop_front(from))
    product *= dim;
  return product;
}

} // namespace

/// Each result element is a dot product of length K.
int64_t MatMulOp::estimateFlops() {
  return 2 * staticElements(getResult()) *
         cast<RankedTensorType>(getA().getType()).getShape().back();
}

/// Each output element reads C / group * kH * kW weights.
int64_t Conv2dOp::estimateFlops() {
  return 2 * staticElements(getResult()) * trailingProduct(getWeight(), 1);
}

/// The forward convolution's products, taken back: each gradient element of
/// the output meets C / group * kH * kW weights.
int64_t Conv2dBackwardDataOp::estimateFlops() {
  return 2 * staticElements(getGradOutput()) * trailingProduct(getWeight(), 1);
}

/// Each gradient element of the output meets one input element per weight
/// of its filter.
int64_t Conv2dBackwardFilterOp::estimateFlops() {
  return 2 * staticElements(getGradOutput()) * trailingProduct(getResult(), 1);
}

/// Two products of the scores' size (q kᵀ, then P v), two per multiply-add,
/// and the softmax's five per score (as nn.softmax counts them); with a
/// softcap three more (a division, tanh and a product, one each as the
/// unfused ops count them).
int64_t AttentionOp::estimateFlops() {
  auto q = cast<RankedTensorType>(getQ().getType());
  auto v = cast<RankedTensorType>(getV().getType());
  int64_t scores = q.getNumElements() /
                   std::max<int64_t>(q.getShape().back(), 1) *
                   v.getShape()[v.getRank() - 2];
  return 2 * scores * (q.getShape().back() + v.getShape().back()) +
         (getSoftcap() ? 8 : 5) * scores;
}

/// The product x w (two per multiply-add) and, per score, what
/// nn.log_softmax and nn.nll_loss count (five).
int64_t LinearCrossEntropyOp::estimateFlops() {
  int64_t rows = getX().getType().getDimSize(0);
  int64_t width = getX().getType().getDimSize(1);
  int64_t scores =
      rows * (getW().getType().getNumElements() / std::max<int64_t>(width, 1));
  return 2 * scores * width + 5 * scores;
}

/// The products for dx and dw (dx's alone when nothing reads grad_w: its
/// kernel then skips dw, ztc-convert-nn-to-kernel), and the softmax's
/// gradient per score. The scores it recomputes are counted as the
/// forward's: an entry with both ops keeps only this one
/// (ztc-merge-cross-entropy), so the pair costs what this op runs.
int64_t LinearCrossEntropyBackwardOp::estimateFlops() {
  int64_t rows = getX().getType().getDimSize(0);
  int64_t width = getX().getType().getDimSize(1);
  int64_t scores =
      rows * (getW().getType().getNumElements() / std::max<int64_t>(width, 1));
  int64_t products = getGradW().use_empty() ? 1 : 2;
  return products * 2 * scores * width + 5 * scores;
}

/// The scores recomputed (q kᵀ), then four products of their size (dv, dP,
/// dq and dk) and the softmax's gradient, as FlashAttention counts its
/// backward; with a softcap, the cap and its slope (three and two a
/// score).
int64_t AttentionBackwardOp::estimateFlops() {
  auto q = cast<RankedTensorType>(getQ().getType());
  auto v = cast<RankedTensorType>(getV().getType());
  int64_t d = q.getShape().back(), dv = v.getShape().back();
  int64_t scores = q.getNumElements() / std::max<int64_t>(d, 1) *
                   v.getShape()[v.getRank() - 2];
  return 2 * scores * (3 * d + 2 * dv) + (getSoftcap() ? 10 : 5) * scores;
}
