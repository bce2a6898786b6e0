//===- ScalarBodies.cpp - nn elementwise ops as scalar arith/math ---------===//
//
// One function per family of elementwise ops. Floating-point formulas follow
// PyTorch's numerically careful forms (softplus, sigmoid, gelu), so results
// match its kernels within rounding.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/NNToKernel/ScalarBodies.h"

#include "dialects/ElementTypes.h"
#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ztc;

namespace {

Value constantLike(OpBuilder &b, Location loc, Type type, double value) {
  if (auto floatType = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(floatType, value));
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(type, static_cast<int64_t>(value)));
}

bool isFloat(Value v) { return isa<FloatType>(v.getType()); }

Value binary(OpBuilder &b, Location loc, Operation *op, Value x, Value y) {
  bool f = isFloat(x);
  return TypeSwitch<Operation *, Value>(op)
      .Case([&](nn::AddOp) -> Value {
        return f ? Value(arith::AddFOp::create(b, loc, x, y))
                 : Value(arith::AddIOp::create(b, loc, x, y));
      })
      .Case([&](nn::SubOp) -> Value {
        return f ? Value(arith::SubFOp::create(b, loc, x, y))
                 : Value(arith::SubIOp::create(b, loc, x, y));
      })
      .Case([&](nn::MulOp) -> Value {
        return f ? Value(arith::MulFOp::create(b, loc, x, y))
                 : Value(arith::MulIOp::create(b, loc, x, y));
      })
      .Case([&](nn::DivOp) -> Value {
        return f ? Value(arith::DivFOp::create(b, loc, x, y))
                 : Value(arith::DivSIOp::create(b, loc, x, y));
      })
      .Case([&](nn::PowOp) -> Value {
        return f ? Value(math::PowFOp::create(b, loc, x, y))
                 : Value(math::IPowIOp::create(b, loc, x, y));
      })
      .Case([&](nn::MaxOp) -> Value {
        return f ? Value(arith::MaximumFOp::create(b, loc, x, y))
                 : Value(arith::MaxSIOp::create(b, loc, x, y));
      })
      .Case([&](nn::MinOp) -> Value {
        return f ? Value(arith::MinimumFOp::create(b, loc, x, y))
                 : Value(arith::MinSIOp::create(b, loc, x, y));
      })
      .Case([&](nn::EqualOp) -> Value {
        return f ? Value(arith::CmpFOp::create(b, loc,
                                               arith::CmpFPredicate::OEQ, x, y))
                 : Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                               x, y));
      })
      .Case([&](nn::LessOp) -> Value {
        return f ? Value(arith::CmpFOp::create(b, loc,
                                               arith::CmpFPredicate::OLT, x, y))
                 : Value(arith::CmpIOp::create(
                       b, loc, arith::CmpIPredicate::slt, x, y));
      })
      .Case([&](nn::GreaterOp) -> Value {
        return f ? Value(arith::CmpFOp::create(b, loc,
                                               arith::CmpFPredicate::OGT, x, y))
                 : Value(arith::CmpIOp::create(
                       b, loc, arith::CmpIPredicate::sgt, x, y));
      })
      .Case([&](nn::AndOp) -> Value {
        return arith::AndIOp::create(b, loc, x, y);
      })
      .Case(
          [&](nn::OrOp) -> Value { return arith::OrIOp::create(b, loc, x, y); })
      .Default([](Operation *) { return Value(); });
}

/// 1 / (1 + exp(-x)).
Value sigmoid(OpBuilder &b, Location loc, Value x) {
  Type t = x.getType();
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  Value d = arith::AddFOp::create(b, loc, constantLike(b, loc, t, 1.0), e);
  return arith::DivFOp::create(b, loc, constantLike(b, loc, t, 1.0), d);
}

/// max(x, 0) + log1p(exp(-|x|)): never overflows.
Value softplus(OpBuilder &b, Location loc, Value x) {
  Type t = x.getType();
  Value zero = constantLike(b, loc, t, 0.0);
  Value pos = arith::MaximumFOp::create(b, loc, x, zero);
  Value negAbs = arith::NegFOp::create(b, loc, math::AbsFOp::create(b, loc, x));
  Value tail =
      math::Log1pOp::create(b, loc, math::ExpOp::create(b, loc, negAbs));
  return arith::AddFOp::create(b, loc, pos, tail);
}

Value gelu(OpBuilder &b, Location loc, Value x, StringRef approximate) {
  Type t = x.getType();
  Value half = constantLike(b, loc, t, 0.5);
  Value one = constantLike(b, loc, t, 1.0);
  Value inner;
  if (approximate == "tanh") {
    // tanh(sqrt(2/pi) * (x + 0.044715 x^3))
    Value x3 =
        arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
    Value poly = arith::AddFOp::create(
        b, loc, x,
        arith::MulFOp::create(b, loc, constantLike(b, loc, t, 0.044715), x3));
    inner = math::TanhOp::create(
        b, loc,
        arith::MulFOp::create(
            b, loc, constantLike(b, loc, t, std::sqrt(2.0 / M_PI)), poly));
  } else {
    inner = math::ErfOp::create(
        b, loc,
        arith::MulFOp::create(b, loc, x, constantLike(b, loc, t, M_SQRT1_2)));
  }
  Value scaled = arith::MulFOp::create(b, loc, half, x);
  return arith::MulFOp::create(b, loc, scaled,
                               arith::AddFOp::create(b, loc, one, inner));
}

/// Converts scalar `x` to `to` with C semantics (bool: != 0).
Value castScalar(OpBuilder &b, Location loc, Value x, Type to) {
  Type from = x.getType();
  if (from == to)
    return x;
  if (to.isInteger(1)) {
    Value zero = constantLike(b, loc, from, 0.0);
    return isa<FloatType>(from)
               ? Value(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE,
                                             x, zero))
               : Value(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                             x, zero));
  }
  bool fromFloat = isa<FloatType>(from), toFloat = isa<FloatType>(to);
  if (fromFloat && toFloat)
    return from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth()
               ? Value(arith::ExtFOp::create(b, loc, to, x))
               : Value(arith::TruncFOp::create(b, loc, to, x));
  if (fromFloat)
    return arith::FPToSIOp::create(b, loc, to, x);
  if (toFloat)
    return from.isInteger(1) ? Value(arith::UIToFPOp::create(b, loc, to, x))
                             : Value(arith::SIToFPOp::create(b, loc, to, x));
  unsigned fw = from.getIntOrFloatBitWidth(), tw = to.getIntOrFloatBitWidth();
  if (fw < tw)
    return from.isInteger(1) ? Value(arith::ExtUIOp::create(b, loc, to, x))
                             : Value(arith::ExtSIOp::create(b, loc, to, x));
  return arith::TruncIOp::create(b, loc, to, x);
}

/// A formula of several steps or with an inexact constant: PyTorch's
/// kernels compute it for bf16 and f16 tensors in float (their opmath
/// type), constants included, and round once.
bool isFloatFormula(Operation *op) {
  return isa<nn::SigmoidOp, nn::SiluOp, nn::SoftplusOp, nn::GeluOp,
             nn::LeakyReluOp, nn::HardSigmoidOp, nn::HardSwishOp>(op);
}

Value unary(OpBuilder &b, Location loc, Operation *op, Value x) {
  bool f = isFloat(x);
  Type t = x.getType();
  if (isHalfFloat(t) && isFloatFormula(op)) {
    Value wide =
        unary(b, loc, op, arith::ExtFOp::create(b, loc, b.getF32Type(), x));
    return arith::TruncFOp::create(b, loc, t, wide);
  }
  return TypeSwitch<Operation *, Value>(op)
      .Case([&](nn::NegOp) -> Value {
        return f ? Value(arith::NegFOp::create(b, loc, x))
                 : Value(arith::SubIOp::create(b, loc,
                                               constantLike(b, loc, t, 0), x));
      })
      .Case([&](nn::ExpOp) -> Value { return math::ExpOp::create(b, loc, x); })
      .Case([&](nn::LogOp) -> Value { return math::LogOp::create(b, loc, x); })
      .Case(
          [&](nn::TanhOp) -> Value { return math::TanhOp::create(b, loc, x); })
      .Case(
          [&](nn::SqrtOp) -> Value { return math::SqrtOp::create(b, loc, x); })
      .Case([&](nn::ErfOp) -> Value { return math::ErfOp::create(b, loc, x); })
      .Case([&](nn::SinOp) -> Value { return math::SinOp::create(b, loc, x); })
      .Case([&](nn::CosOp) -> Value { return math::CosOp::create(b, loc, x); })
      .Case([&](nn::SigmoidOp) { return sigmoid(b, loc, x); })
      .Case([&](nn::SiluOp) -> Value {
        // x / (1 + exp(-x)), PyTorch's silu kernel.
        Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
        Value d =
            arith::AddFOp::create(b, loc, constantLike(b, loc, t, 1.0), e);
        return arith::DivFOp::create(b, loc, x, d);
      })
      .Case([&](nn::SoftplusOp) { return softplus(b, loc, x); })
      .Case([&](nn::ReluOp) -> Value {
        Value zero = constantLike(b, loc, t, 0);
        return f ? Value(arith::MaximumFOp::create(b, loc, x, zero))
                 : Value(arith::MaxSIOp::create(b, loc, x, zero));
      })
      .Case([&](nn::ReciprocalOp) -> Value {
        return arith::DivFOp::create(b, loc, constantLike(b, loc, t, 1.0), x);
      })
      .Case([&](nn::AbsOp) -> Value {
        return f ? Value(math::AbsFOp::create(b, loc, x))
                 : Value(math::AbsIOp::create(b, loc, x));
      })
      .Case([&](nn::NotOp) -> Value {
        return arith::XOrIOp::create(b, loc, x, constantLike(b, loc, t, 1));
      })
      .Case([&](nn::LeakyReluOp leaky) -> Value {
        Value zero = constantLike(b, loc, t, 0);
        Value scaled = arith::MulFOp::create(
            b, loc, x,
            constantLike(b, loc, t, leaky.getAlpha().convertToDouble()));
        Value neg =
            arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, zero);
        return arith::SelectOp::create(b, loc, neg, scaled, x);
      })
      .Case([&](nn::GeluOp g) { return gelu(b, loc, x, g.getApproximate()); })
      .Case([&](nn::HardSigmoidOp h) -> Value {
        // max(0, min(1, alpha x + beta)); NaN stays NaN.
        Value line = arith::AddFOp::create(
            b, loc,
            arith::MulFOp::create(
                b, loc, constantLike(b, loc, t, h.getAlpha().convertToDouble()),
                x),
            constantLike(b, loc, t, h.getBeta().convertToDouble()));
        Value upper = arith::MinimumFOp::create(b, loc, line,
                                                constantLike(b, loc, t, 1.0));
        return arith::MaximumFOp::create(b, loc, upper,
                                         constantLike(b, loc, t, 0.0));
      })
      .Case([&](nn::HardSwishOp) -> Value {
        // x * min(max(x + 3, 0), 6) / 6, PyTorch's hardswish.
        Value six = constantLike(b, loc, t, 6.0);
        Value shifted =
            arith::AddFOp::create(b, loc, x, constantLike(b, loc, t, 3.0));
        Value clamped = arith::MinimumFOp::create(
            b, loc,
            arith::MaximumFOp::create(b, loc, shifted,
                                      constantLike(b, loc, t, 0.0)),
            six);
        return arith::DivFOp::create(
            b, loc, arith::MulFOp::create(b, loc, x, clamped), six);
      })
      .Case([&](nn::CastOp cast) {
        return castScalar(b, loc, x,
                          cast.getResult().getType().getElementType());
      })
      .Case([&](nn::BroadcastToOp) { return x; })
      .Default([](Operation *) { return Value(); });
}

} // namespace

bool mlir::ztc::isElementwiseNNOp(Operation *op) {
  return isa<nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp, nn::PowOp, nn::MaxOp,
             nn::MinOp, nn::EqualOp, nn::LessOp, nn::GreaterOp, nn::AndOp,
             nn::OrOp, nn::NegOp, nn::ExpOp, nn::LogOp, nn::TanhOp,
             nn::SigmoidOp, nn::SiluOp, nn::ReluOp, nn::SqrtOp,
             nn::ReciprocalOp, nn::ErfOp, nn::SinOp, nn::CosOp, nn::AbsOp,
             nn::SoftplusOp, nn::NotOp, nn::LeakyReluOp, nn::GeluOp,
             nn::HardSigmoidOp, nn::HardSwishOp, nn::CastOp, nn::WhereOp,
             nn::BroadcastToOp>(op);
}

Value mlir::ztc::buildScalarBody(OpBuilder &b, Location loc, Operation *op,
                                 ValueRange args) {
  if (isa<nn::WhereOp>(op))
    return arith::SelectOp::create(b, loc, args[0], args[1], args[2]);
  if (args.size() == 2)
    return binary(b, loc, op, args[0], args[1]);
  return unary(b, loc, op, args[0]);
}
