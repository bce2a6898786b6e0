//===- Arithmetic.h - nn arithmetic on scalars and flat tensors -----------===//
//
// The builder the training passes write formulas with (optimizer updates in
// ztc-lower-train, ZeRO's buckets and clipping, the loss scaler): one nn op
// per call at one insertion point and location, scalars as rank-0
// constants that nn ops broadcast.
//
// Build one op per statement where two would be arguments of a third: C++
// leaves the order of arguments open, and the ops' order (hence the memory
// plan) must not depend on the compiler ztc is built with.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_ARITHMETIC_H
#define ZTC_PASSES_ARITHMETIC_H

#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

namespace mlir::ztc {

struct Arithmetic {
  OpBuilder &b;
  Location loc;

  /// A rank-0 constant of `element` (default f32).
  Value scalar(double value, Type element = {}) {
    if (!element)
      element = b.getF32Type();
    auto type = RankedTensorType::get({}, element);
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
  }
  Value zeros(int64_t n, Type element) {
    auto type = RankedTensorType::get({n}, element);
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, 0.0)));
  }
  Value add(Value x, Value y) { return nn::AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return nn::SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return nn::MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return nn::DivOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return nn::MinOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return nn::MaxOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return nn::SqrtOp::create(b, loc, x); }
  Value pow(Value x, Value y) { return nn::PowOp::create(b, loc, x, y); }
  Value equal(Value x, Value y) { return nn::EqualOp::create(b, loc, x, y); }
  Value less(Value x, Value y) { return nn::LessOp::create(b, loc, x, y); }
  Value logicalAnd(Value x, Value y) { return nn::AndOp::create(b, loc, x, y); }
  Value logicalOr(Value x, Value y) { return nn::OrOp::create(b, loc, x, y); }
  Value logicalNot(Value x) { return nn::NotOp::create(b, loc, x); }
  /// `condition ? x : y`, elementwise.
  Value select(Value condition, Value x, Value y) {
    return nn::WhereOp::create(b, loc, condition, x, y);
  }
  /// `x` times a constant of its own element type.
  Value mul(Value x, double y) { return mul(x, scalar(y, elementOf(x))); }
  Value scale(Value x, double factor) { return mul(x, factor); }
  /// The sum of every element, as a scalar.
  Value sum(Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    if (type.getRank() == 0)
      return x;
    SmallVector<int64_t> axes =
        llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    return nn::ReduceSumOp::create(b, loc, x, axes, false);
  }
  /// The sum of squares of every element, as a scalar.
  Value sumOfSquares(Value x) {
    Value square = mul(x, x);
    return sum(square);
  }

  Value reshape(Value x, RankedTensorType type) {
    if (x.getType() == type)
      return x;
    return nn::ReshapeOp::create(b, loc, type, x);
  }
  Value flat(Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    return reshape(x, RankedTensorType::get({type.getNumElements()},
                                            type.getElementType()));
  }
  /// The values flattened and joined, then `pad` zeros.
  Value concat(ArrayRef<Value> values, int64_t pad) {
    SmallVector<Value> parts =
        llvm::map_to_vector(values, [&](Value v) { return flat(v); });
    if (pad > 0)
      parts.push_back(zeros(pad, elementOf(parts.front())));
    if (parts.size() == 1)
      return parts.front();
    return nn::ConcatOp::create(b, loc, parts, uint64_t(0));
  }
  Value slice(Value x, int64_t start, int64_t size) {
    if (start == 0 && cast<RankedTensorType>(x.getType()).getDimSize(0) == size)
      return x;
    return nn::SliceOp::create(b, loc, x, ArrayRef<int64_t>{start},
                               ArrayRef<int64_t>{size}, ArrayRef<int64_t>{1});
  }

  /// `layout` (single-operand layout ops, a transpose or reshape, as met
  /// walking back from a value: the last one read the original) cloned onto
  /// `x` in the order they ran, their results in `x`'s element type: the
  /// same layout for a copy in another precision.
  Value relayout(ArrayRef<Operation *> layout, Value x) {
    Type element = elementOf(x);
    for (Operation *op : llvm::reverse(layout)) {
      Operation *copy = b.clone(*op);
      copy->setOperand(0, x);
      x = copy->getResult(0);
      x.setType(cast<RankedTensorType>(x.getType()).clone(element));
    }
    return x;
  }

  static Type elementOf(Value x) {
    return cast<RankedTensorType>(x.getType()).getElementType();
  }
};

} // namespace mlir::ztc

#endif // ZTC_PASSES_ARITHMETIC_H
