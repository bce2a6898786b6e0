//===- ElementwiseOps.cpp - elementwise ONNX operators to nn --------------===//
//
// Converters for ONNX's elementwise operators: arithmetic with numpy
// broadcasting, comparisons, logic, activations, casts and pass-throughs.
// Versions before broadcasting became implicit (opset 7) are not handled.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/OnnxToNN/NodeConverter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::onnx_to_nn;

namespace {

template <typename OpTy>
LogicalResult convertUnary(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  return produce(results, ctx.create<OpTy>(ctx.input(0)));
}

template <typename OpTy>
LogicalResult convertBinary(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  return produce(results, ctx.create<OpTy>({ctx.input(0), ctx.input(1)}));
}

/// Min and Max take any number of inputs: fold them left to right.
template <typename OpTy>
LogicalResult convertVariadic(NodeContext &ctx,
                              SmallVectorImpl<Value> &results) {
  Value acc = ctx.input(0);
  for (unsigned i = 1, e = ctx.node.getInputs().size(); acc && i < e; ++i)
    acc = ctx.create<OpTy>({acc, ctx.input(i)});
  return produce(results, acc);
}

/// Pow lets the exponent have its own type: the power is computed in the
/// floating-point type of the two (the wider one if both are), then cast to
/// the base's type, so an integer base with exponent 0.5 takes square roots.
LogicalResult convertPow(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  Type baseType = ctx.inputType(0).getElementType();
  Type exponentType = ctx.inputType(1).getElementType();
  Type computeType = baseType;
  if (isa<FloatType>(exponentType) &&
      (!isa<FloatType>(baseType) ||
       exponentType.getIntOrFloatBitWidth() > baseType.getIntOrFloatBitWidth()))
    computeType = exponentType;
  Value base = ctx.castTo(ctx.input(0), computeType);
  Value exponent = base ? ctx.castTo(ctx.input(1), computeType) : nullptr;
  Value power = exponent ? ctx.create<nn::PowOp>({base, exponent}) : nullptr;
  return produce(results, power ? ctx.castTo(power, baseType) : nullptr);
}

LogicalResult convertLeakyRelu(NodeContext &ctx,
                               SmallVectorImpl<Value> &results) {
  return produce(
      results,
      ctx.create<nn::LeakyReluOp>(
          ctx.input(0), {ctx.f64Attr("alpha", ctx.floatAttr("alpha", 0.01))}));
}

LogicalResult convertGelu(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  std::string approximate = ctx.stringAttr("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return ctx.error() << "approximate must be \"none\" or \"tanh\", got \""
                       << approximate << "\"";
  return produce(
      results, ctx.create<nn::GeluOp>(
                   ctx.input(0), {ctx.attr("approximate",
                                           ctx.b.getStringAttr(approximate))}));
}

/// a <= b (or a >= b) as (a < b) or (a == b): false where either is NaN,
/// which not(a > b) would get wrong.
Value orEqual(NodeContext &ctx, Value strict, Value a, Value b) {
  Value equal = strict ? ctx.create<nn::EqualOp>({a, b}) : nullptr;
  return equal ? ctx.create<nn::OrOp>({strict, equal}) : nullptr;
}

LogicalResult convertLessOrEqual(NodeContext &ctx,
                                 SmallVectorImpl<Value> &results) {
  Value a = ctx.input(0), b = ctx.input(1);
  return produce(results, orEqual(ctx, ctx.create<nn::LessOp>({a, b}), a, b));
}

LogicalResult convertGreaterOrEqual(NodeContext &ctx,
                                    SmallVectorImpl<Value> &results) {
  Value a = ctx.input(0), b = ctx.input(1);
  return produce(results,
                 orEqual(ctx, ctx.create<nn::GreaterOp>({a, b}), a, b));
}

/// IsNaN(x) is x != x.
LogicalResult convertIsNaN(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  Value x = ctx.input(0);
  Value same = ctx.create<nn::EqualOp>({x, x});
  return produce(results, same ? ctx.create<nn::NotOp>(same) : nullptr);
}

/// IsInf compares with +inf and -inf, as `detect_positive` and
/// `detect_negative` ask.
/// IsInf, HardSigmoid and HardSwish take floats only (ONNX's type
/// constraint).
LogicalResult requireFloat(NodeContext &ctx) {
  Type elem = ctx.inputType(0).getElementType();
  if (!isa<FloatType>(elem))
    return ctx.error() << "X must be a floating-point tensor, got " << elem;
  return success();
}

LogicalResult convertIsInf(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  if (failed(requireFloat(ctx)))
    return failure();
  Value x = ctx.input(0);
  Type elem = ctx.inputType(0).getElementType();
  bool positive = ctx.intAttr("detect_positive", 1) != 0;
  bool negative = ctx.intAttr("detect_negative", 1) != 0;
  double inf = std::numeric_limits<double>::infinity();
  if (!positive && !negative)
    return produce(results, arith::ConstantOp::create(
                                ctx.b, ctx.loc,
                                DenseElementsAttr::get(
                                    ctx.inputType(0).clone(ctx.b.getI1Type()),
                                    false)));
  Value above = positive ? ctx.create<nn::EqualOp>({x, ctx.scalar(elem, inf)})
                         : nullptr;
  Value below = negative ? ctx.create<nn::EqualOp>({x, ctx.scalar(elem, -inf)})
                         : nullptr;
  if ((positive && !above) || (negative && !below))
    return failure();
  if (above && below)
    return produce(results, ctx.create<nn::OrOp>({above, below}));
  return produce(results, above ? above : below);
}

/// max(0, min(1, alpha x + beta)): one nn.hard_sigmoid, whose backward
/// keeps x alone, as PyTorch's hardsigmoid does.
LogicalResult convertHardSigmoid(NodeContext &ctx,
                                 SmallVectorImpl<Value> &results) {
  if (failed(requireFloat(ctx)))
    return failure();
  return produce(
      results,
      ctx.create<nn::HardSigmoidOp>(
          ctx.input(0), {ctx.f64Attr("alpha", ctx.floatAttr("alpha", 0.2)),
                         ctx.f64Attr("beta", ctx.floatAttr("beta", 0.5))}));
}

/// x * min(max(x + 3, 0), 6) / 6: one nn.hard_swish, PyTorch's hardswish
/// (its backward keeps x alone).
LogicalResult convertHardSwish(NodeContext &ctx,
                               SmallVectorImpl<Value> &results) {
  if (failed(requireFloat(ctx)))
    return failure();
  return produce(results, ctx.create<nn::HardSwishOp>(ctx.input(0)));
}

/// Mish is x * tanh(softplus(x)), ONNX's definition and PyTorch's `mish`
/// (YOLOv4's and v5's activation); its gradient is the three ops', PyTorch's
/// `mish_backward` written out.
LogicalResult convertMish(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  if (failed(requireFloat(ctx)))
    return failure();
  Value x = ctx.input(0);
  Value softplus = ctx.create<nn::SoftplusOp>(x);
  Value tanh = softplus ? ctx.create<nn::TanhOp>(softplus) : Value();
  return produce(results, tanh ? ctx.create<nn::MulOp>({x, tanh}) : Value());
}

/// Clip is min(max(x, lo), hi); bounds are inputs from opset 11 and
/// attributes before.
LogicalResult convertClip(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  Value x = ctx.input(0);
  Type elem = ctx.inputType(0).getElementType();
  Value lo, hi;
  if (ctx.since < 11) {
    if (ctx.hasAttr("min"))
      lo = ctx.scalar(elem, ctx.floatAttr("min", 0));
    if (ctx.hasAttr("max"))
      hi = ctx.scalar(elem, ctx.floatAttr("max", 0));
  } else {
    lo = ctx.input(1);
    hi = ctx.input(2);
  }
  if (lo && !(x = ctx.create<nn::MaxOp>({x, lo})))
    return failure();
  if (hi && !(x = ctx.create<nn::MinOp>({x, hi})))
    return failure();
  return produce(results, x);
}

LogicalResult convertWhere(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  return produce(results, ctx.create<nn::WhereOp>(
                              {ctx.input(0), ctx.input(1), ctx.input(2)}));
}

LogicalResult convertCast(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  int64_t to = ctx.intAttr("to", 0);
  Type elem = onnxElementType(ctx.b.getContext(), to);
  if (!elem)
    return ctx.error() << "unsupported element type: cannot cast to ONNX "
                          "data type "
                       << to
                       << " (supported: float, double, float16, bfloat16, "
                          "int64, int32, int8, bool)";
  return produce(results, ctx.castTo(ctx.input(0), elem));
}

LogicalResult convertCastLike(NodeContext &ctx,
                              SmallVectorImpl<Value> &results) {
  return produce(results,
                 ctx.castTo(ctx.input(0), ctx.inputType(1).getElementType()));
}

LogicalResult convertIdentity(NodeContext &ctx,
                              SmallVectorImpl<Value> &results) {
  return produce(results, ctx.input(0));
}

/// FNV-1a (64-bit) of `text`: the random stream of a Dropout node without a
/// seed, stable from build to build and different for each node name.
uint64_t fnv1a(StringRef text) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001B3ull;
  }
  return hash;
}

/// Training-mode Dropout with a constant `ratio` in (0, 1]. An element is
/// kept where a uniform draw in [0, 1) is at least the ratio (ONNX's
/// reference) and then scaled by 1 / (1 - ratio), as PyTorch does; the mask
/// output is the kept elements. The draws are nn.random_uniform under the
/// function's random key, in the node's own stream (its `seed` attribute,
/// else a hash of its name), so two Dropout nodes drop different elements.
/// A ratio of 1 drops everything: no draws, and no infinite scale whose
/// gradient would be NaN.
LogicalResult convertTrainingDropout(NodeContext &ctx, double ratio,
                                     SmallVectorImpl<Value> &results) {
  RankedTensorType type = ctx.inputType(0);
  Type elem = type.getElementType(), f32 = ctx.b.getF32Type();
  Value y, keep;
  if (ratio == 1.0) {
    y = ctx.create<nn::BroadcastToOp>(
        ctx.scalar(elem, 0.0), {ctx.i64ArrayAttr("shape", type.getShape())});
    keep = arith::ConstantOp::create(
        ctx.b, ctx.loc,
        DenseElementsAttr::get(type.clone(ctx.b.getI1Type()), false));
  } else {
    Value key = ctx.randomKey();
    if (!key)
      return failure();
    uint64_t stream =
        ctx.hasAttr("seed") ? ctx.intAttr("seed", 0) : fnv1a(ctx.name());
    Value u = ctx.createWithTypes<nn::RandomUniformOp>(
        type.clone(f32), key, {ctx.i64Attr("stream", stream)});
    // u >= ratio, spelled !(u < ratio): nn has no greater-or-equal.
    Value dropped =
        u ? ctx.create<nn::LessOp>({u, ctx.scalar(f32, ratio)}) : nullptr;
    keep = dropped ? ctx.create<nn::NotOp>(dropped) : nullptr;
    Value scaled =
        keep ? ctx.create<nn::MulOp>(
                   {ctx.input(0), ctx.scalar(elem, 1.0 / (1.0 - ratio))})
             : nullptr;
    y = scaled ? ctx.create<nn::WhereOp>({keep, scaled, ctx.scalar(elem, 0.0)})
               : nullptr;
  }
  // The evaluate entry drops nothing.
  if (y)
    y = ctx.createWithTypes<nn::ModeSelectOp>(y.getType(), {y, ctx.input(0)});
  if (failed(produce(results, y)))
    return failure();
  if (ctx.outputUsed(1))
    results.push_back(keep);
  return success();
}

/// Dropout is the identity in inference and with a ratio of 0; training
/// mode (a constant input from Dropout-12 on; versions 7 and 10 are
/// inference only) draws random masks.
LogicalResult convertDropout(NodeContext &ctx,
                             SmallVectorImpl<Value> &results) {
  bool training = false;
  double ratio = 0.5; // ONNX's default.
  if (ctx.since >= 12) {
    if (ctx.input(2)) {
      DenseElementsAttr mode = ctx.constantInput(2);
      if (!mode || !mode.isSplat() || !mode.getElementType().isInteger(1))
        return ctx.error() << "training_mode must be a constant bool scalar";
      training = mode.getSplatValue<bool>();
    }
    if (training && ctx.input(1)) {
      DenseElementsAttr value = ctx.constantInput(1);
      if (!value || !value.isSplat() || !isa<FloatType>(value.getElementType()))
        return ctx.error() << "the ratio of a training-mode Dropout must be "
                              "a constant float";
      ratio =
          cast<FloatAttr>(value.getSplatValue<Attribute>()).getValueAsDouble();
    }
  }
  if (training && !(ratio >= 0.0 && ratio <= 1.0))
    return ctx.error() << "ratio must be in [0, 1], got " << ratio;
  if (training && ratio > 0.0)
    return convertTrainingDropout(ctx, ratio, results);
  if (failed(produce(results, ctx.input(0))))
    return failure();
  // Without dropping, the mask keeps everything: true from Dropout-10 on,
  // ones of the data's type before.
  if (ctx.outputUsed(1)) {
    RankedTensorType type = ctx.inputType(0);
    Attribute one = ctx.b.getBoolAttr(true);
    if (ctx.since < 10)
      one = ctx.b.getFloatAttr(type.getElementType(), 1.0);
    else
      type = type.clone(ctx.b.getI1Type());
    results.push_back(arith::ConstantOp::create(
        ctx.b, ctx.loc, DenseElementsAttr::get(type, one)));
  }
  return success();
}

} // namespace

void onnx_to_nn::addElementwiseConverters(ConverterRegistry &registry) {
  registry.addSince("Add", 7, convertBinary<nn::AddOp>);
  registry.addSince("Sub", 7, convertBinary<nn::SubOp>);
  registry.addSince("Mul", 7, convertBinary<nn::MulOp>);
  registry.addSince("Div", 7, convertBinary<nn::DivOp>);
  registry.addSince("Pow", 7, convertPow);
  registry.addSince("Max", 8, convertVariadic<nn::MaxOp>);
  registry.addSince("Min", 8, convertVariadic<nn::MinOp>);
  registry.addSince("Equal", 7, convertBinary<nn::EqualOp>);
  registry.addSince("Less", 7, convertBinary<nn::LessOp>);
  registry.addSince("Greater", 7, convertBinary<nn::GreaterOp>);
  registry.addSince("LessOrEqual", 12, convertLessOrEqual);
  registry.addSince("GreaterOrEqual", 12, convertGreaterOrEqual);
  registry.addSince("IsNaN", 9, convertIsNaN);
  registry.addSince("IsInf", 10, convertIsInf);
  registry.addSince("And", 7, convertBinary<nn::AndOp>);
  registry.addSince("Or", 7, convertBinary<nn::OrOp>);
  registry.addSince("Not", 1, convertUnary<nn::NotOp>);
  registry.addSince("Neg", 6, convertUnary<nn::NegOp>);
  registry.addSince("Exp", 6, convertUnary<nn::ExpOp>);
  registry.addSince("Log", 6, convertUnary<nn::LogOp>);
  registry.addSince("Tanh", 6, convertUnary<nn::TanhOp>);
  registry.addSince("Sigmoid", 6, convertUnary<nn::SigmoidOp>);
  registry.addSince("Relu", 6, convertUnary<nn::ReluOp>);
  registry.addSince("Sqrt", 6, convertUnary<nn::SqrtOp>);
  registry.addSince("Reciprocal", 6, convertUnary<nn::ReciprocalOp>);
  registry.addSince("Erf", 9, convertUnary<nn::ErfOp>);
  registry.addSince("Sin", 7, convertUnary<nn::SinOp>);
  registry.addSince("Cos", 7, convertUnary<nn::CosOp>);
  registry.addSince("HardSigmoid", 6, convertHardSigmoid);
  registry.addSince("HardSwish", 14, convertHardSwish);
  registry.addSince("Abs", 6, convertUnary<nn::AbsOp>);
  registry.addSince("Softplus", 1, convertUnary<nn::SoftplusOp>);
  registry.addSince("Mish", 18, convertMish);
  registry.addSince("LeakyRelu", 6, convertLeakyRelu);
  registry.addSince("Gelu", 20, convertGelu);
  registry.addSince("Clip", 6, convertClip);
  registry.addSince("Where", 9, convertWhere);
  registry.addSince("Cast", 6, convertCast);
  registry.addSince("CastLike", 15, convertCastLike);
  registry.addSince("Identity", 1, convertIdentity);
  registry.addSince("Dropout", 7, convertDropout);
}
