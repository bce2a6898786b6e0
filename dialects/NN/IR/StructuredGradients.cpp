//===- StructuredGradients.cpp - VJPs of structured nn ops ------*- C++ -*-===//
//
// The vector-Jacobian products of the non-elementwise ops: linear algebra,
// convolution and pooling, normalizations, softmax, reductions, data
// movement and the loss, then those of the backward ops themselves (second
// order). Normalizations recompute their statistics from the forward input
// rather than keeping them as extra results; ztc-recompute decides later
// what a step saves. Gradients follow PyTorch, and each choice it makes
// between subgradients is stated where it is made.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <numeric>

using namespace mlir;
using namespace mlir::ztc::nn;

/// The ranked tensor type of `value`.
static RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// `[0, rank)` with the last two entries swapped: a batched matrix transpose.
static SmallVector<int64_t> swapLastTwo(int64_t rank) {
  auto perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

//===----------------------------------------------------------------------===//
// Linear algebra and convolution
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0], lhs = getA(), rhs = getB();
  RankedTensorType lhsType = typeOf(lhs), rhsType = typeOf(rhs);
  int64_t lhsRank = lhsType.getRank(), rhsRank = rhsType.getRank();
  // dA = g B^T, summed over the batch dimensions A was broadcast along.
  Value da = v.sumToShape(v.matmul(g, v.transpose(rhs, swapLastTwo(rhsRank))),
                          lhsType);
  Value db;
  if (rhsRank == 2 && lhsRank > 2) {
    // A weight shared by every batch: one [K, P] x [P, N] product over all
    // P rows instead of a batch of products summed afterwards.
    int64_t k = lhsType.getShape().back(), n = rhsType.getShape().back();
    int64_t rows = lhsType.getNumElements() / std::max<int64_t>(k, 1);
    Value rowsOfA = v.reshape(lhs, {rows, k});
    Value rowsOfG = v.reshape(g, {rows, n});
    db = v.matmul(v.transpose(rowsOfA, {1, 0}), rowsOfG);
  } else {
    db = v.sumToShape(v.matmul(v.transpose(lhs, swapLastTwo(lhsRank)), g),
                      rhsType);
  }
  return setGradients(operandGrads, {da, db});
}

LogicalResult MatMulNf4Op::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // dx = g op(W)ᵀ: the same quantized weight, read the other way. The
  // weight's parts are frozen integers and scales: no gradient.
  Value dx = MatMulNf4Op::create(b, getLoc(), resultGrads[0], getPacked(),
                                 getAbsmax(), getNestedAbsmax(), getOffset(),
                                 getWeightShape(), !getTransposeB());
  return setGradients(operandGrads, {dx, Value(), Value(), Value(), Value()});
}

LogicalResult Conv2dOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value g = resultGrads[0];
  RankedTensorType input = getInput().getType(), weight = getWeight().getType();
  Value dx = Conv2dBackwardDataOp::create(
      b, loc, g, getWeight(), input.getShape().drop_front(2), getStrides(),
      getPads(), getDilations(), getGroup());
  Value dw = Conv2dBackwardFilterOp::create(
      b, loc, getInput(), g, weight.getShape().drop_front(2), getStrides(),
      getPads(), getDilations(), getGroup());
  if (!getBias())
    return setGradients(operandGrads, {dx, dw});
  Value db = VjpBuilder(b, loc).reduceSum(g, {0, 2, 3}, /*keepdims=*/false);
  return setGradients(operandGrads, {dx, dw, db});
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

LogicalResult BatchNormOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0], x = getX();
  RankedTensorType xType = typeOf(x);
  // Per-channel vectors broadcast as [1, C, 1, ...] (or [1, ..., 1, C]
  // with channels_last); sums run over every dimension but the channel one.
  int64_t channelDim = getChannelsLast() ? xType.getRank() - 1 : 1;
  SmallVector<int64_t> channelShape(xType.getRank(), 1);
  channelShape[channelDim] = xType.getDimSize(channelDim);
  SmallVector<int64_t> axes;
  for (int64_t dim = 0; dim < xType.getRank(); ++dim)
    if (dim != channelDim)
      axes.push_back(dim);
  auto perChannel = [&](Value vec) { return v.reshape(vec, channelShape); };
  Value rstd = v.reciprocal(
      v.sqrt(v.add(getVar(), v.scalar(x, getEpsilon().convertToDouble()))));
  Value centered = v.sub(x, perChannel(getMean()));
  Value gradSum = v.reduceSum(g, axes, /*keepdims=*/false);
  Value gradCenteredSum =
      v.reduceSum(v.mul(g, centered), axes, /*keepdims=*/false);
  Value scaleRstd = v.mul(getScale(), rstd);
  // y = (x - mean) * rstd * scale + bias with the statistics as inputs (the
  // inference form): every operand is differentiable.
  Value dx = v.mul(g, perChannel(scaleRstd));
  Value dscale = v.mul(gradCenteredSum, rstd);
  Value dmean = v.neg(v.mul(gradSum, scaleRstd));
  // d rstd / d var = -rstd^3 / 2.
  Value dvar = v.mul(v.mul(gradCenteredSum, scaleRstd),
                     v.mul(v.scalar(x, -0.5), v.mul(rstd, rstd)));
  return setGradients(operandGrads, {dx, dscale, gradSum, dmean, dvar});
}

/// `[1, C, 1, ...]` for an `[N, C, ...]` tensor: how a per-channel vector
/// broadcasts over it.
static SmallVector<int64_t> channelShapeOf(RankedTensorType x) {
  SmallVector<int64_t> shape(x.getRank(), 1);
  shape[1] = x.getDimSize(1);
  return shape;
}

LogicalResult
BatchNormTrainingOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0], gMean = resultGrads[1], gVar = resultGrads[2];
  Value x = getX(), dx, dscale, dbias;
  // One op for all three, keeping x and the statistics.
  if (g) {
    auto grads = BatchNormTrainingBackwardOp::create(
        b, getLoc(), x, getScale(), getMean(), getVar(), g, getEpsilonAttr());
    dx = grads.getGradX();
    dscale = grads.getGradScale();
    dbias = grads.getGradBias();
  }
  // The statistics' own gradients, where something differentiable reads
  // them (BatchNormalization-9's batch mean and variance outputs): mean =
  // sum(x) / M and var = sum((x - mean)^2) / M add gMean / M and gVar * 2
  // (x - mean) / M to x's gradient.
  if (gMean || gVar) {
    VjpBuilder v(b, getLoc());
    RankedTensorType xType = typeOf(x);
    SmallVector<int64_t> channels = channelShapeOf(xType);
    double count = static_cast<double>(xType.getNumElements()) /
                   std::max<int64_t>(xType.getDimSize(1), 1);
    auto perElement = [&](Value grad, double factor) {
      return v.reshape(v.mul(grad, v.scalar(grad, factor)), channels);
    };
    auto accumulate = [&](Value term) { dx = dx ? v.add(dx, term) : term; };
    if (gMean)
      accumulate(
          v.broadcastTo(perElement(gMean, 1.0 / count), xType.getShape()));
    if (gVar)
      accumulate(v.mul(v.sub(x, v.reshape(getMean(), channels)),
                       perElement(gVar, 2.0 / count)));
  }
  return setGradients(operandGrads, {dx, dscale, dbias});
}

LogicalResult BatchNormTrainingBackwardOp::buildVjp(OpBuilder &,
                                                    ArrayRef<Value>,
                                                    SmallVectorImpl<Value> &) {
  return emitOpError("has no second-order gradient");
}

LogicalResult LayerNormOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0], x = getX();
  // One kernel for all three (nn.layer_norm_backward recomputes the row
  // statistics): dx = rstd * (dn - mean(dn) - xhat * mean(dn * xhat)) with
  // dn = g * scale, the scale's sum(g * xhat) and the bias's sum(g) over
  // the rows (without the mean(dn) term under `rms`). Without a bias, the
  // third result goes unused.
  auto grads =
      LayerNormBackwardOp::create(b, getLoc(), x, getScale(), g, getAxisAttr(),
                                  getEpsilonAttr(), getRmsAttr());
  if (!getBias())
    return setGradients(operandGrads, {grads.getGradX(), grads.getGradScale()});
  return setGradients(operandGrads, {grads.getGradX(), grads.getGradScale(),
                                     grads.getGradBias()});
}

LogicalResult LayerNormBackwardOp::buildVjp(OpBuilder &, ArrayRef<Value>,
                                            SmallVectorImpl<Value> &) {
  return emitOpError("has no second-order gradient");
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

LogicalResult MaxPool2dOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  return setGradients(
      operandGrads,
      {MaxPool2dBackwardOp::create(
          b, getLoc(), getX(), resultGrads[0], getKernel(), getStrides(),
          getPads(), getDilations(), getCeilMode(), getChannelsLast())});
}

LogicalResult AvgPool2dOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // The input's [H, W]: after N and C, or after N with channels_last.
  ArrayRef<int64_t> shape = getX().getType().getShape();
  ArrayRef<int64_t> inputSize =
      getChannelsLast() ? shape.slice(1, 2) : shape.drop_front(2);
  return setGradients(
      operandGrads,
      {AvgPool2dBackwardOp::create(
          b, getLoc(), resultGrads[0], inputSize, getKernel(), getStrides(),
          getPads(), getCeilMode(), getCountIncludePad(), getChannelsLast())});
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0], y = getResult();
  // y * (g - sum(g * y)) along the axis.
  Value dot = v.reduceSum(v.mul(g, y), {static_cast<int64_t>(getAxis())},
                          /*keepdims=*/true);
  return setGradients(operandGrads, {v.mul(y, v.sub(g, dot))});
}

LogicalResult LogSoftmaxOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0];
  // g - softmax * sum(g) along the axis; softmax = exp(log_softmax).
  Value sum = v.reduceSum(g, {static_cast<int64_t>(getAxis())},
                          /*keepdims=*/true);
  return setGradients(operandGrads, {v.sub(g, v.mul(v.exp(getResult()), sum))});
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // One kernel for the three gradients, which recomputes the probabilities
  // from the scores, as the forward never materializes them. The additive
  // mask gets none (the op's description says why).
  auto grads = AttentionBackwardOp::create(
      b, getLoc(), getQ(), getK(), getV(), getResult(), resultGrads[0],
      getMask(), getScaleAttr(), getCausalAttr(), getSoftcapAttr());
  SmallVector<Value> result = {grads.getGradQ(), grads.getGradK(),
                               grads.getGradV()};
  if (getMask())
    result.push_back(Value());
  return setGradients(operandGrads, result);
}

LogicalResult AttentionBackwardOp::buildVjp(OpBuilder &, ArrayRef<Value>,
                                            SmallVectorImpl<Value> &) {
  return emitOpError("has no second-order gradient");
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  RankedTensorType xType = getX().getType();
  Value kept = keepReducedDims(b, getLoc(), resultGrads[0], xType, getAxes());
  return setGradients(operandGrads, {v.broadcastTo(kept, xType.getShape())});
}

LogicalResult ReduceMeanOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  RankedTensorType xType = getX().getType();
  int64_t count = 1;
  for (int64_t axis : getAxes())
    count *= xType.getDimSize(axis);
  // Divide before broadcasting: fewer elements.
  Value kept = keepReducedDims(b, getLoc(), resultGrads[0], xType, getAxes());
  Value scaled = v.div(kept, v.scalar(kept, static_cast<double>(count)));
  return setGradients(operandGrads, {v.broadcastTo(scaled, xType.getShape())});
}

LogicalResult ReduceMaxOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value x = getX();
  RankedTensorType xType = getX().getType();
  ArrayRef<int64_t> axes = getAxes();
  // Ties share the gradient equally, as PyTorch's amax (ONNX ReduceMax
  // keeps no index of the winner).
  Value winners =
      v.equal(x, keepReducedDims(b, getLoc(), getResult(), xType, axes));
  Value count = v.reduceSum(v.castTo(winners, xType.getElementType()), axes,
                            /*keepdims=*/true);
  Value share =
      v.div(keepReducedDims(b, getLoc(), resultGrads[0], xType, axes), count);
  return setGradients(operandGrads,
                      {v.where(winners, share, v.scalar(x, 0.0))});
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  return setGradients(
      operandGrads,
      {VjpBuilder(b, getLoc())
           .reshape(resultGrads[0], getX().getType().getShape())});
}

LogicalResult TransposeOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, dim] : llvm::enumerate(perm))
    inverse[dim] = static_cast<int64_t>(i);
  return setGradients(
      operandGrads,
      {VjpBuilder(b, getLoc()).transpose(resultGrads[0], inverse)});
}

LogicalResult ConcatOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  // Each input's gradient is its slab of the result's gradient.
  auto axis = static_cast<int64_t>(getAxis());
  int64_t rank = getType().getRank(), offset = 0;
  SmallVector<int64_t> starts(rank, 0), steps(rank, 1);
  operandGrads.clear();
  for (Value input : getInputs()) {
    RankedTensorType type = typeOf(input);
    starts[axis] = offset;
    operandGrads.push_back(SliceOp::create(b, getLoc(), resultGrads[0], starts,
                                           type.getShape(), steps));
    offset += type.getDimSize(axis);
  }
  return success();
}

LogicalResult SliceOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  return setGradients(
      operandGrads,
      {InsertSliceOp::create(b, getLoc(), v.zeros(getX().getType()),
                             resultGrads[0], getStarts(), getSteps())});
}

LogicalResult GatherOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  // Repeated indices (an embedding row used twice) accumulate.
  Value ddata = ScatterAddOp::create(b, getLoc(), v.zeros(getData().getType()),
                                     getIndices(), resultGrads[0], getAxis());
  return setGradients(operandGrads, {ddata, Value()});
}

LogicalResult RotateHalfOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // A signed permutation whose transpose is its inverse: the other turn.
  return setGradients(
      operandGrads,
      {RotateHalfOp::create(b, getLoc(), resultGrads[0], !getInverse())});
}

LogicalResult RotaryOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0], x = getX();
  // With respect to x the map is linear, and the other form is its
  // transpose. The tables' gradients, for tables that are not constants:
  // y = x c + R(x) s gives dc = g x, ds = g R(x); y = x c + R^T(x s) gives
  // ds = x R(g), since <g, R^T(x s)> = <R g, x s>.
  Value dx =
      RotaryOp::create(b, getLoc(), g, getCos(), getSin(), !getInverse());
  auto turn = [&](Value t) {
    return RotateHalfOp::create(b, getLoc(), t, /*inverse=*/false);
  };
  Value ds = getInverse() ? v.mul(x, turn(g)) : v.mul(g, turn(x));
  return setGradients(operandGrads,
                      {dx, v.sumToShape(v.mul(g, x), getCos().getType()),
                       v.sumToShape(ds, getSin().getType())});
}

LogicalResult TriluOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  // A fixed mask: the gradient keeps the same triangle.
  return setGradients(operandGrads,
                      {TriluOp::create(b, getLoc(), resultGrads[0], getUpper(),
                                       getDiagonal())});
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

/// `[0, classes)` shaped `[1, classes, 1, ...]` (rank `rank`), of integer
/// type `elementType`: compared with the targets, the one-hot mask.
static Value buildClassIndices(OpBuilder &b, Location loc, int64_t classes,
                               int64_t rank, Type elementType) {
  SmallVector<int64_t> shape(rank, 1);
  shape[1] = classes;
  unsigned width = elementType.getIntOrFloatBitWidth();
  SmallVector<APInt> values;
  values.reserve(classes);
  for (int64_t c = 0; c < classes; ++c)
    values.push_back(APInt(width, c));
  return arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get(shape, elementType),
                             values));
}

LogicalResult NllLossOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value g = resultGrads[0], target = getTarget(), weight = getWeight();
  RankedTensorType lpType = getLogProbs().getType();
  RankedTensorType targetType = typeOf(target);
  Type indexType = targetType.getElementType();
  Value zero = v.scalar(g, 0.0);
  // Elements whose target is ignore_index take no part, and read no weight
  // (their index may be out of range).
  Value valid, safeTarget = target;
  if (std::optional<uint64_t> ignore = getIgnoreIndex()) {
    // The attribute holds a signed value (often -100).
    auto index = static_cast<int64_t>(*ignore);
    Value ignored =
        buildScalar(b, getLoc(), indexType, static_cast<double>(index));
    valid = v.logicalNot(v.equal(target, ignored));
    if (weight)
      safeTarget =
          v.where(valid, target, buildScalar(b, getLoc(), indexType, 0.0));
  }
  // The weight of each element (null: 1).
  Value elementWeight;
  if (weight) {
    elementWeight = GatherOp::create(b, getLoc(), weight, safeTarget, 0);
    if (valid)
      elementWeight = v.where(valid, elementWeight, zero);
  } else if (valid) {
    elementWeight = v.castTo(valid, lpType.getElementType());
  }
  // d loss / d log_probs[n, t, ...] = -weight[t] * g / normalizer, where the
  // mean's normalizer is the total weight of the counted elements (0/0 gives
  // NaN, as in the forward kernel and PyTorch).
  Value coefficient = g;
  if (getReduction() == "mean") {
    Value total =
        elementWeight
            ? v.reduceSum(
                  elementWeight,
                  llvm::to_vector(llvm::seq<int64_t>(0, targetType.getRank())),
                  /*keepdims=*/false)
            : v.scalar(g, static_cast<double>(targetType.getNumElements()));
    coefficient = v.div(coefficient, total);
  }
  coefficient = v.neg(coefficient);
  if (elementWeight)
    coefficient = v.mul(coefficient, elementWeight);
  // Ignored elements get exactly 0, even when the normalizer is 0 (PyTorch
  // masks the same way).
  if (valid)
    coefficient = v.where(valid, coefficient, zero);
  // Scatter the coefficients to the target classes through a one-hot mask.
  SmallVector<int64_t> expanded(targetType.getShape());
  expanded.insert(expanded.begin() + 1, 1);
  Value classes = buildClassIndices(b, getLoc(), lpType.getDimSize(1),
                                    lpType.getRank(), indexType);
  Value hot = v.equal(classes, v.reshape(target, expanded));
  if (typeOf(coefficient).getRank() != 0)
    coefficient = v.reshape(coefficient, expanded);
  Value dlp = v.where(hot, coefficient, zero);
  // No gradient for the class weights: PyTorch does not define one either.
  if (weight)
    return setGradients(operandGrads, {dlp, Value(), Value()});
  return setGradients(operandGrads, {dlp, Value()});
}

LogicalResult
LinearCrossEntropyOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  // `correct` counts rows: it has no gradient. One kernel recomputes the
  // scores chunk by chunk, as the forward never holds them.
  if (!resultGrads[0])
    return setGradients(operandGrads, {Value(), Value(), Value()});
  auto grads = LinearCrossEntropyBackwardOp::create(
      b, getLoc(), getX(), getW(), getTarget(), resultGrads[0],
      getTransposeBAttr(), getIgnoreIndexAttr());
  return setGradients(operandGrads,
                      {grads.getGradX(), grads.getGradW(), Value()});
}

LogicalResult LinearCrossEntropyBackwardOp::buildVjp(OpBuilder &,
                                                     ArrayRef<Value>,
                                                     SmallVectorImpl<Value> &) {
  return emitOpError("has no second-order gradient");
}

//===----------------------------------------------------------------------===//
// Backward ops (second order)
//===----------------------------------------------------------------------===//

// Each backward op is linear in its gradient operand (and conv's in both
// operands), so its VJP is a forward op or the other backward op.

LogicalResult
Conv2dBackwardDataOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value c = resultGrads[0];
  // dx = A(w)^T dy, so <c, dx> = <conv2d(c, w), dy>.
  Value dGradOutput =
      Conv2dOp::create(b, loc, c, getWeight(), Value(), getStrides(), getPads(),
                       getDilations(), getGroup());
  Value dWeight = Conv2dBackwardFilterOp::create(
      b, loc, c, getGradOutput(),
      getWeight().getType().getShape().drop_front(2), getStrides(), getPads(),
      getDilations(), getGroup());
  return setGradients(operandGrads, {dGradOutput, dWeight});
}

LogicalResult
Conv2dBackwardFilterOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value c = resultGrads[0];
  // <c, dw> = <conv2d(x, c), dy>.
  Value dInput = Conv2dBackwardDataOp::create(
      b, loc, getGradOutput(), c, getInput().getType().getShape().drop_front(2),
      getStrides(), getPads(), getDilations(), getGroup());
  Value dGradOutput =
      Conv2dOp::create(b, loc, getInput(), c, Value(), getStrides(), getPads(),
                       getDilations(), getGroup());
  return setGradients(operandGrads, {dInput, dGradOutput});
}

LogicalResult MaxPool2dBackwardOp::buildVjp(OpBuilder &, ArrayRef<Value>,
                                            SmallVectorImpl<Value> &) {
  // Would need the values at the winners' positions, which no op reads.
  return emitOpError("has no second-order gradient");
}

LogicalResult
AvgPool2dBackwardOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  // The transpose of the transpose: the forward pooling.
  return setGradients(
      operandGrads,
      {AvgPool2dOp::create(b, getLoc(), resultGrads[0], getKernel(),
                           getStrides(), getPads(), getCeilMode(),
                           getCountIncludePad(), getChannelsLast())});
}

LogicalResult ScatterAddOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Value c = resultGrads[0];
  return setGradients(
      operandGrads,
      {c, Value(), GatherOp::create(b, getLoc(), c, getIndices(), getAxis())});
}

LogicalResult InsertSliceOp::buildVjp(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  VjpBuilder v(b, getLoc());
  Value c = resultGrads[0];
  RankedTensorType source = getSource().getType();
  // dest keeps what the slice does not overwrite; source gets the slice.
  Value dDest = InsertSliceOp::create(b, getLoc(), c, v.zeros(source),
                                      getStarts(), getSteps());
  Value dSource = SliceOp::create(b, getLoc(), c, getStarts(),
                                  source.getShape(), getSteps());
  return setGradients(operandGrads, {dDest, dSource});
}
