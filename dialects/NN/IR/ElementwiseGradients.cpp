//===- ElementwiseGradients.cpp - VJPs of elementwise nn ops ----*- C++ -*-===//
//
// The vector-Jacobian products of the elementwise ops (arithmetic,
// comparisons and logic, random numbers, unary functions, cast, where,
// broadcast_to). Every
// formula is PyTorch's (its derivatives.yaml and backward kernels), written
// in nn ops; where PyTorch picks a subgradient (relu at 0, max ties, abs at
// 0) the comment says which. Operands that broadcasting stretched get the
// gradient summed back to their shape.
//
//===----------------------------------------------------------------------===//

#include "dialects/ElementTypes.h"
#include "dialects/NN/IR/NNOps.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ztc::nn;

//===----------------------------------------------------------------------===//
// Binary arithmetic
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0];
  return setGradients(operandGrads, {v.sumToShape(g, getLhs().getType()),
                                     v.sumToShape(g, getRhs().getType())});
}

LogicalResult SubOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0];
  // Negate after summing: the summed gradient is the smaller tensor.
  return setGradients(operandGrads,
                      {v.sumToShape(g, getLhs().getType()),
                       v.neg(v.sumToShape(g, getRhs().getType()))});
}

LogicalResult MulOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0];
  return setGradients(operandGrads,
                      {v.sumToShape(v.mul(g, getRhs()), getLhs().getType()),
                       v.sumToShape(v.mul(g, getLhs()), getRhs().getType())});
}

LogicalResult DivOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0], x = getLhs(), y = getRhs();
  // d(x / y)/dy = -x / y^2, as PyTorch: -grad * x / (y * y).
  Value dy = v.div(v.mul(v.neg(g), x), v.mul(y, y));
  return setGradients(operandGrads, {v.sumToShape(v.div(g, y), x.getType()),
                                     v.sumToShape(dy, y.getType())});
}

LogicalResult PowOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0], x = getLhs(), e = getRhs();
  Value zero = v.scalar(x, 0.0);
  // PyTorch's pow_backward_self: 0 where the exponent is 0 (so 0^0 gives 0,
  // not 0 * inf), else grad * e * x^(e - 1).
  Value dx =
      v.where(v.equal(e, zero), zero,
              v.mul(g, v.mul(e, PowOp::create(b, getLoc(), x,
                                              v.sub(e, v.scalar(e, 1.0))))));
  // pow_backward_exponent: grad * x^e * log(x), but 0 where x == 0 and
  // e >= 0 (the limit, instead of 0 * -inf).
  Value nonNegative = v.logicalNot(v.less(e, zero));
  Value de = v.mul(g, v.where(v.logicalAnd(v.equal(x, zero), nonNegative), zero,
                              v.mul(getResult(), v.log(x))));
  return setGradients(operandGrads, {v.sumToShape(dx, x.getType()),
                                     v.sumToShape(de, e.getType())});
}

/// The VJP of nn.max (`isMax`) or nn.min. Ties split the gradient equally,
/// as PyTorch's maximum/minimum: `lhs` gets `grad` where it wins, half of it
/// where the operands are equal, 0 where it loses. When one operand is a
/// constant (Clip's bounds), the other gets the whole gradient strictly
/// inside the bound and none at it, as PyTorch 2's clamp, hardtanh and
/// relu6 (which the exporters write as Clip): a ReLU6 after an all-zero
/// window sits exactly at 0 and passes no gradient.
static LogicalResult buildExtremumVjp(OpBuilder &b, Location loc, Value lhs,
                                      Value rhs, Value g, bool isMax,
                                      SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, loc);
  Value zero = v.scalar(g, 0.0);
  // Where `a` loses to `c`.
  auto loses = [&](Value a, Value c) {
    return isMax ? v.less(a, c) : v.greater(a, c);
  };
  auto clampGrad = [&](Value x, Value bound) {
    // Inside: x > bound for max (x < bound for min), NaN excluded.
    Value inside = isMax ? v.greater(x, bound) : v.less(x, bound);
    return v.sumToShape(v.where(inside, g, zero), x.getType());
  };
  if (matchPattern(rhs, m_Constant()))
    return setGradients(operandGrads, {clampGrad(lhs, rhs), Value()});
  if (matchPattern(lhs, m_Constant()))
    return setGradients(operandGrads, {Value(), clampGrad(rhs, lhs)});
  Value tie = v.equal(lhs, rhs);
  Value shared = v.where(tie, v.mul(g, v.scalar(g, 0.5)), g);
  Value dl = v.where(loses(lhs, rhs), zero, shared);
  Value dr = v.where(loses(rhs, lhs), zero, shared);
  return setGradients(operandGrads, {v.sumToShape(dl, lhs.getType()),
                                     v.sumToShape(dr, rhs.getType())});
}

LogicalResult MaxOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  return buildExtremumVjp(b, getLoc(), getLhs(), getRhs(), resultGrads[0],
                          /*isMax=*/true, operandGrads);
}

LogicalResult MinOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  return buildExtremumVjp(b, getLoc(), getLhs(), getRhs(), resultGrads[0],
                          /*isMax=*/false, operandGrads);
}

//===----------------------------------------------------------------------===//
// Comparisons and logic: boolean results carry no gradient.
//===----------------------------------------------------------------------===//

#define ZTC_NO_GRADIENT(OpClass)                                               \
  LogicalResult OpClass::buildVjp(OpBuilder &, ArrayRef<Value>,                \
                                  SmallVectorImpl<Value> &operandGrads) {      \
    noGradients(getOperation(), operandGrads);                                 \
    return success();                                                          \
  }

ZTC_NO_GRADIENT(EqualOp)
ZTC_NO_GRADIENT(LessOp)
ZTC_NO_GRADIENT(GreaterOp)
ZTC_NO_GRADIENT(AndOp)
ZTC_NO_GRADIENT(OrOp)
ZTC_NO_GRADIENT(NotOp)

// Random numbers are a function of an integer key: nothing to differentiate.
// A dropout mask built from them is a constant of the step, and the
// gradient flows through the nn.where that applies it.
ZTC_NO_GRADIENT(RandomUniformOp)

#undef ZTC_NO_GRADIENT

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

LogicalResult NegOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  return setGradients(operandGrads,
                      {VjpBuilder(b, getLoc()).neg(resultGrads[0])});
}

LogicalResult ExpOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  return setGradients(
      operandGrads, {VjpBuilder(b, getLoc()).mul(resultGrads[0], getResult())});
}

LogicalResult LogOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  return setGradients(operandGrads,
                      {VjpBuilder(b, getLoc()).div(resultGrads[0], getX())});
}

LogicalResult TanhOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value y = getResult();
  // 1 - tanh^2, from the saved result (PyTorch's tanh_backward).
  return setGradients(
      operandGrads,
      {v.mul(resultGrads[0], v.sub(v.scalar(y, 1.0), v.mul(y, y)))});
}

LogicalResult SigmoidOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value y = getResult();
  // sigmoid * (1 - sigmoid), from the saved result.
  return setGradients(
      operandGrads,
      {v.mul(resultGrads[0], v.mul(v.sub(v.scalar(y, 1.0), y), y))});
}

LogicalResult ReluOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value y = getResult(), zero = v.scalar(y, 0.0);
  // 0 at x <= 0 (PyTorch's threshold_backward on the result).
  return setGradients(operandGrads,
                      {v.where(v.greater(y, zero), resultGrads[0], zero)});
}

LogicalResult SqrtOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value y = getResult();
  return setGradients(operandGrads,
                      {v.div(resultGrads[0], v.mul(v.scalar(y, 2.0), y))});
}

LogicalResult ReciprocalOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value y = getResult();
  // -1/x^2 = -y^2.
  return setGradients(operandGrads,
                      {v.mul(v.neg(resultGrads[0]), v.mul(y, y))});
}

namespace {
/// x in the type a gradient formula with inexact constants computes in:
/// f32 for bf16 and f16, as PyTorch's kernels of half tensors compute (in
/// their opmath type, with float constants) and round once at the end
/// (`narrowed`). Constants such as sqrt(2/pi) in bf16 would be off by
/// 0.1%.
Value widened(VjpBuilder &v, Value x) {
  Type t = mlir::getElementTypeOrSelf(x.getType());
  return v.castTo(x, mlir::ztc::computeElementType(t));
}

/// The gradient r, computed by `widened`, in the type of `like`.
Value narrowed(VjpBuilder &v, Value r, Value like) {
  return v.castTo(r, mlir::getElementTypeOrSelf(like.getType()));
}
} // namespace

LogicalResult ErfOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value x = widened(v, getX()), g = resultGrads[0];
  // 2 / sqrt(pi) * exp(-x^2).
  Value slope = v.mul(v.scalar(x, M_2_SQRTPI), v.exp(v.neg(v.mul(x, x))));
  return setGradients(operandGrads,
                      {narrowed(v, v.mul(widened(v, g), slope), g)});
}

LogicalResult SinOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  return setGradients(operandGrads,
                      {v.mul(resultGrads[0], CosOp::create(b, getLoc(), getX()))});
}

LogicalResult CosOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  // -sin(x), as PyTorch's cos backward: grad * -sin(x).
  return setGradients(
      operandGrads,
      {v.mul(resultGrads[0], v.neg(SinOp::create(b, getLoc(), getX())))});
}

LogicalResult AbsOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value x = getX(), g = resultGrads[0], zero = v.scalar(x, 0.0);
  // grad * sign(x), with sign(0) = 0 as PyTorch.
  Value dx =
      v.where(v.greater(x, zero), g, v.where(v.less(x, zero), v.neg(g), zero));
  return setGradients(operandGrads, {dx});
}

LogicalResult SoftplusOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  // d/dx ln(1 + e^x) = sigmoid(x). PyTorch returns grad unchanged above its
  // threshold (x > 20), where sigmoid(x) rounds to 1 in f32 anyway.
  return setGradients(operandGrads, {v.mul(resultGrads[0], v.sigmoid(getX()))});
}

LogicalResult LeakyReluOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value x = getX(), g = resultGrads[0], wide = widened(v, g);
  // The slope at 0 is alpha, as PyTorch's leaky_relu_backward (x > 0).
  Value scaled =
      narrowed(v, v.mul(wide, v.scalar(wide, getAlpha().convertToDouble())), g);
  return setGradients(operandGrads,
                      {v.where(v.greater(x, v.scalar(x, 0.0)), g, scaled)});
}

LogicalResult HardSigmoidOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value x = widened(v, getX()), g = widened(v, resultGrads[0]);
  // alpha g strictly inside (0, 1), as PyTorch's hardsigmoid_backward.
  Value alpha = v.scalar(x, getAlpha().convertToDouble());
  Value t = v.add(v.mul(alpha, x), v.scalar(x, getBeta().convertToDouble()));
  Value inside =
      v.logicalAnd(v.greater(t, v.scalar(x, 0.0)), v.less(t, v.scalar(x, 1.0)));
  Value dx = v.where(inside, v.mul(g, alpha), v.scalar(g, 0.0));
  return setGradients(operandGrads, {narrowed(v, dx, resultGrads[0])});
}

LogicalResult HardSwishOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value x = widened(v, getX()), g = widened(v, resultGrads[0]);
  // PyTorch's hardswish_backward: 0 up to -3, g (x / 3 + 1/2) below 3, g
  // from 3 (a NaN x falls through to g, as there).
  Value three = v.scalar(x, 3.0), minusThree = v.scalar(x, -3.0);
  Value upToMinusThree =
      v.logicalOr(v.less(x, minusThree), v.equal(x, minusThree));
  Value slope = v.mul(g, v.add(v.div(x, three), v.scalar(x, 0.5)));
  Value dx = v.where(upToMinusThree, v.scalar(g, 0.0),
                     v.where(v.less(x, three), slope, g));
  return setGradients(operandGrads, {narrowed(v, dx, resultGrads[0])});
}

LogicalResult SiluOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value x = widened(v, getX()), g = widened(v, resultGrads[0]);
  // PyTorch's silu_backward: g s (1 + x (1 - s)), s = sigmoid(x).
  Value s = v.sigmoid(x), one = v.scalar(x, 1.0);
  Value dx = v.mul(v.mul(g, s), v.add(one, v.mul(x, v.sub(one, s))));
  return setGradients(operandGrads, {narrowed(v, dx, resultGrads[0])});
}

LogicalResult GeluOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value x = widened(v, getX()), g = widened(v, resultGrads[0]);
  auto c = [&](double value) { return v.scalar(x, value); };
  if (getApproximate() == "tanh") {
    // PyTorch's GeluBackward, tanh form: with u = sqrt(2/pi) (x + k x^3),
    // d/dx [x/2 (1 + tanh u)] = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) u'.
    const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
    Value square = v.mul(x, x);
    Value inner = v.mul(c(beta), v.add(x, v.mul(c(kappa), v.mul(square, x))));
    Value t = v.tanh(inner);
    Value left = v.mul(c(0.5), v.add(c(1.0), t));
    Value innerSlope =
        v.mul(c(beta), v.add(c(1.0), v.mul(c(3.0 * kappa), square)));
    Value right =
        v.mul(v.mul(v.mul(c(0.5), x), v.sub(c(1.0), v.mul(t, t))), innerSlope);
    return setGradients(operandGrads, {narrowed(v, v.mul(g, v.add(left, right)),
                                                resultGrads[0])});
  }
  // Exact form: Phi(x) + x phi(x), Phi the normal CDF, phi its density.
  Value cdf = v.mul(c(0.5), v.add(c(1.0), v.erf(v.mul(x, c(M_SQRT1_2)))));
  Value pdf = v.mul(v.exp(v.mul(v.mul(x, x), c(-0.5))),
                    c(M_2_SQRTPI * M_SQRT1_2 * 0.5));
  return setGradients(
      operandGrads,
      {narrowed(v, v.mul(g, v.add(cdf, v.mul(x, pdf))), resultGrads[0])});
}

//===----------------------------------------------------------------------===//
// Cast, where, broadcast_to
//===----------------------------------------------------------------------===//

LogicalResult CastOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  // Only a float-to-float cast is differentiable: the gradient is cast back.
  Type from = getX().getType().getElementType();
  if (!isa<FloatType>(from) || !isa<FloatType>(getType().getElementType()))
    return setGradients(operandGrads, {Value()});
  return setGradients(operandGrads,
                      {VjpBuilder(b, getLoc()).castTo(resultGrads[0], from)});
}

LogicalResult WhereOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0], cond = getCond(), zero = v.scalar(g, 0.0);
  return setGradients(operandGrads,
                      {Value(),
                       v.sumToShape(v.where(cond, g, zero), getA().getType()),
                       v.sumToShape(v.where(cond, zero, g), getB().getType())});
}

LogicalResult ModeSelectOp::buildVjp(OpBuilder &,
                                     ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // Training computes the first operand; the second is evaluation's alone.
  return setGradients(operandGrads, {resultGrads[0], Value()});
}

LogicalResult BroadcastToOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  return setGradients(
      operandGrads,
      {VjpBuilder(b, getLoc()).sumToShape(resultGrads[0], getX().getType())});
}
