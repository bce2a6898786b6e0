//===- GradientInterface.h - vector-Jacobian products -----------*- C++ -*-===//
//
// The gradient interface of nn ops (see GradientInterface.td) and the small
// vocabulary the ops' vector-Jacobian products are written in: constants,
// zeros, and undoing numpy broadcasting and reductions. The products
// themselves live in ElementwiseGradients.cpp and StructuredGradients.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_NN_IR_GRADIENTINTERFACE_H
#define ZTC_DIALECTS_NN_IR_GRADIENTINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"

#include "dialects/NN/IR/GradientInterface.h.inc"

namespace mlir::ztc::nn {

/// A rank-0 `arith.constant` of element type `elementType` holding `value`;
/// nn ops broadcast it against any shape.
Value buildScalar(OpBuilder &b, Location loc, Type elementType, double value);

/// Zeros of `type`: a scalar zero broadcast with nn.broadcast_to, so a large
/// zero tensor costs a fill at run time, not a constant in the artifact.
Value buildZeros(OpBuilder &b, Location loc, RankedTensorType type);

/// The gradient of an operand of type `type` that numpy broadcasting
/// stretched to `grad`'s shape: `grad` summed over the leading dimensions
/// broadcasting added and over the size-1 dimensions it repeated, with
/// `type`'s shape. Returns `grad` itself when no broadcast happened.
Value sumToShape(OpBuilder &b, Location loc, Value grad, RankedTensorType type);

/// Undoes the shape change of a reduction over `axes` of a tensor of type
/// `inputType`: `grad`, of the reduced shape (reduced dimensions dropped or
/// kept), reshaped to keep them as size 1, so that it broadcasts against
/// `inputType` in elementwise ops.
Value keepReducedDims(OpBuilder &b, Location loc, Value grad,
                      RankedTensorType inputType, ArrayRef<int64_t> axes);

/// Fills `operandGrads` with one null Value per operand of `op`: the
/// gradient of ops (or operands) that have none.
void noGradients(Operation *op, SmallVectorImpl<Value> &operandGrads);

/// Sets `operandGrads` to `grads` (null: no gradient) and succeeds: the last
/// step of most vector-Jacobian products.
LogicalResult setGradients(SmallVectorImpl<Value> &operandGrads,
                           ArrayRef<Value> grads);

/// Builds nn ops at one location (the forward op's, so diagnostics and
/// reports about backward ops name the ONNX node), so that vector-Jacobian
/// products read like their formulas. Binary ops broadcast numpy-style;
/// `scalar` constants broadcast against anything.
class VjpBuilder {
public:
  VjpBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  /// A rank-0 constant with `like`'s element type.
  Value scalar(Value like, double value);
  Value add(Value x, Value y);
  Value sub(Value x, Value y);
  Value mul(Value x, Value y);
  Value div(Value x, Value y);
  Value neg(Value x);
  Value exp(Value x);
  Value log(Value x);
  Value sqrt(Value x);
  Value reciprocal(Value x);
  Value tanh(Value x);
  Value erf(Value x);
  Value sigmoid(Value x);
  Value equal(Value x, Value y);
  Value less(Value x, Value y);
  Value greater(Value x, Value y);
  Value logicalAnd(Value x, Value y);
  Value logicalOr(Value x, Value y);
  Value logicalNot(Value x);
  /// `cond ? x : y`, broadcasting.
  Value where(Value cond, Value x, Value y);
  /// `x` converted to element type `elementType`.
  Value castTo(Value x, Type elementType);
  Value reshape(Value x, ArrayRef<int64_t> shape);
  Value broadcastTo(Value x, ArrayRef<int64_t> shape);
  Value transpose(Value x, ArrayRef<int64_t> perm);
  Value reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims);
  Value reduceMean(Value x, ArrayRef<int64_t> axes, bool keepdims);
  Value matmul(Value x, Value y);
  Value sumToShape(Value grad, Type type);
  Value zeros(Type type);

private:
  OpBuilder &b;
  Location loc;
};

} // namespace mlir::ztc::nn

#endif // ZTC_DIALECTS_NN_IR_GRADIENTINTERFACE_H
