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
