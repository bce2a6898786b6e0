//===- GradientInterface.cpp - vector-Jacobian products ---------*- C++ -*-===//
//
// The gradient interface's generated definitions and the helpers every
// vector-Jacobian product uses (see GradientInterface.h).
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/GradientInterface.h"

#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::ztc::nn;

#include "dialects/NN/IR/GradientInterface.cpp.inc"

Value mlir::ztc::nn::buildScalar(OpBuilder &b, Location loc, Type elementType,
                                 double value) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute element = isa<FloatType>(elementType)
                          ? Attribute(b.getFloatAttr(elementType, value))
                          : Attribute(b.getIntegerAttr(
                                elementType, static_cast<int64_t>(value)));
  return arith::ConstantOp::create(b, loc,
                                   DenseElementsAttr::get(type, element));
}

Value mlir::ztc::nn::buildZeros(OpBuilder &b, Location loc,
                                RankedTensorType type) {
  Value zero = buildScalar(b, loc, type.getElementType(), 0.0);
  if (type.getRank() == 0)
    return zero;
  return BroadcastToOp::create(b, loc, zero, type.getShape());
}

Value mlir::ztc::nn::sumToShape(OpBuilder &b, Location loc, Value grad,
                                RankedTensorType type) {
  auto gradType = cast<RankedTensorType>(grad.getType());
  if (gradType == type)
    return grad;
  ArrayRef<int64_t> from = gradType.getShape(), to = type.getShape();
  int64_t offset = gradType.getRank() - type.getRank();
  SmallVector<int64_t> axes;
  for (int64_t dim = 0; dim < gradType.getRank(); ++dim)
    if (dim < offset || (to[dim - offset] == 1 && from[dim] != 1))
      axes.push_back(dim);
  Value summed = grad;
  if (!axes.empty())
    summed = ReduceSumOp::create(b, loc, grad, axes, /*keepdims=*/false);
  if (summed.getType() == type)
    return summed;
  return ReshapeOp::create(b, loc, type, summed);
}

Value mlir::ztc::nn::keepReducedDims(OpBuilder &b, Location loc, Value grad,
                                     RankedTensorType inputType,
                                     ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept(inputType.getShape());
  for (int64_t axis : axes)
    kept[axis] = 1;
  auto keptType = RankedTensorType::get(
      kept, cast<RankedTensorType>(grad.getType()).getElementType());
  if (grad.getType() == keptType)
    return grad;
  return ReshapeOp::create(b, loc, keptType, grad);
}

void mlir::ztc::nn::noGradients(Operation *op,
                                SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(op->getNumOperands(), Value());
}

LogicalResult mlir::ztc::nn::setGradients(SmallVectorImpl<Value> &operandGrads,
                                          ArrayRef<Value> grads) {
  operandGrads.assign(grads.begin(), grads.end());
  return success();
}

//===----------------------------------------------------------------------===//
// VjpBuilder
//===----------------------------------------------------------------------===//

static Type elementTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

Value VjpBuilder::scalar(Value like, double value) {
  return buildScalar(b, loc, elementTypeOf(like), value);
}
Value VjpBuilder::add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
Value VjpBuilder::sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
Value VjpBuilder::mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
Value VjpBuilder::div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
Value VjpBuilder::neg(Value x) { return NegOp::create(b, loc, x); }
Value VjpBuilder::exp(Value x) { return ExpOp::create(b, loc, x); }
Value VjpBuilder::log(Value x) { return LogOp::create(b, loc, x); }
Value VjpBuilder::sqrt(Value x) { return SqrtOp::create(b, loc, x); }
Value VjpBuilder::reciprocal(Value x) {
  return ReciprocalOp::create(b, loc, x);
}
Value VjpBuilder::tanh(Value x) { return TanhOp::create(b, loc, x); }
Value VjpBuilder::erf(Value x) { return ErfOp::create(b, loc, x); }
Value VjpBuilder::sigmoid(Value x) { return SigmoidOp::create(b, loc, x); }
Value VjpBuilder::equal(Value x, Value y) {
  return EqualOp::create(b, loc, x, y);
}
Value VjpBuilder::less(Value x, Value y) {
  return LessOp::create(b, loc, x, y);
}
Value VjpBuilder::greater(Value x, Value y) {
  return GreaterOp::create(b, loc, x, y);
}
Value VjpBuilder::logicalAnd(Value x, Value y) {
  return AndOp::create(b, loc, x, y);
}
Value VjpBuilder::logicalOr(Value x, Value y) {
  return OrOp::create(b, loc, x, y);
}
Value VjpBuilder::logicalNot(Value x) { return NotOp::create(b, loc, x); }
Value VjpBuilder::where(Value cond, Value x, Value y) {
  return WhereOp::create(b, loc, cond, x, y);
}
Value VjpBuilder::castTo(Value x, Type elementType) {
  auto type = cast<RankedTensorType>(x.getType()).clone(elementType);
  if (type == x.getType())
    return x;
  return CastOp::create(b, loc, type, x);
}
Value VjpBuilder::reshape(Value x, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(x.getType()).clone(shape);
  if (type == x.getType())
    return x;
  return ReshapeOp::create(b, loc, type, x);
}
Value VjpBuilder::broadcastTo(Value x, ArrayRef<int64_t> shape) {
  if (cast<RankedTensorType>(x.getType()).getShape() == shape)
    return x;
  return BroadcastToOp::create(b, loc, x, shape);
}
Value VjpBuilder::transpose(Value x, ArrayRef<int64_t> perm) {
  return TransposeOp::create(b, loc, x, perm);
}
Value VjpBuilder::reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims) {
  return ReduceSumOp::create(b, loc, x, axes, keepdims);
}
Value VjpBuilder::reduceMean(Value x, ArrayRef<int64_t> axes, bool keepdims) {
  return ReduceMeanOp::create(b, loc, x, axes, keepdims);
}
Value VjpBuilder::matmul(Value x, Value y) {
  return MatMulOp::create(b, loc, x, y);
}
Value VjpBuilder::sumToShape(Value grad, Type type) {
  return nn::sumToShape(b, loc, grad, cast<RankedTensorType>(type));
}
Value VjpBuilder::zeros(Type type) {
  return buildZeros(b, loc, cast<RankedTensorType>(type));
}
