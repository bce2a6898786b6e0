//===- NeuralOps.cpp - neural-network ONNX operators to nn ----------------===//
//
// Converters for the structured operators: matrix products, convolution,
// pooling, normalization, softmax, reductions and losses. ONNX's many
// spellings (auto_pad, 1-D spatial forms, coerced-2-D softmax, axes as
// attribute or input) are normalized here, so `nn` ops see one form each.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/OnnxToNN/NodeConverter.h"

#include "dialects/NN/IR/ShapeLimits.h"

#include "llvm/ADT/STLExtras.h"

#include <tuple>

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::onnx_to_nn;

namespace {

/// Reports an error when an optional output the converter cannot produce is
/// used.
LogicalResult rejectUsedOutputs(NodeContext &ctx, unsigned from,
                                StringRef what) {
  for (unsigned i = from, e = ctx.node.getNumResults(); i < e; ++i)
    if (ctx.outputUsed(i))
      return ctx.error() << what << " (output " << i << ") is not supported";
  return success();
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// MatMul follows numpy: 1-D operands are promoted to matrices and the
/// promoted dimension is dropped from the result.
LogicalResult convertMatMul(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  Value a = ctx.input(0), bv = ctx.input(1);
  ArrayRef<int64_t> aShape = ctx.inputType(0).getShape();
  ArrayRef<int64_t> bShape = ctx.inputType(1).getShape();
  if (aShape.empty() || bShape.empty())
    return ctx.error() << "MatMul operands must have rank at least 1";
  bool aVector = aShape.size() == 1, bVector = bShape.size() == 1;
  if (aVector)
    a = ctx.reshape(a, {1, aShape[0]});
  if (bVector)
    bv = ctx.reshape(bv, {bShape[0], 1});
  if (!a || !bv)
    return failure();
  Value product = ctx.create<nn::MatMulOp>({a, bv});
  if (!product)
    return failure();
  if (!aVector && !bVector)
    return produce(results, product);
  SmallVector<int64_t> shape(
      cast<RankedTensorType>(product.getType()).getShape());
  if (bVector)
    shape.pop_back();
  if (aVector)
    shape.erase(shape.end() - (bVector ? 1 : 2));
  return produce(results, ctx.reshape(product, shape));
}

/// Gemm is alpha * op(A) * op(B) + beta * C.
LogicalResult convertGemm(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  Value a = ctx.input(0), bv = ctx.input(1);
  if (ctx.rank(0) != 2 || ctx.rank(1) != 2)
    return ctx.error() << "Gemm operands must be matrices";
  SmallVector<int64_t> swap = {1, 0};
  if (ctx.intAttr("transA", 0))
    a = ctx.create<nn::TransposeOp>(a, {ctx.i64ArrayAttr("perm", swap)});
  if (a && ctx.intAttr("transB", 0))
    bv = ctx.create<nn::TransposeOp>(bv, {ctx.i64ArrayAttr("perm", swap)});
  if (!a || !bv)
    return failure();
  Value y = ctx.create<nn::MatMulOp>({a, bv});
  Type elem = ctx.inputType(0).getElementType();
  double alpha = ctx.floatAttr("alpha", 1.0), beta = ctx.floatAttr("beta", 1.0);
  Value c = beta != 0.0 ? ctx.input(2) : nullptr;
  // Integer Gemm with fractional factors scales in f64, then casts back.
  bool scaled = alpha != 1.0 || (c && beta != 1.0);
  Type scaleType = isa<IntegerType>(elem) && scaled ? ctx.b.getF64Type() : elem;
  if (y && alpha != 1.0) {
    y = ctx.castTo(y, scaleType);
    y = y ? ctx.create<nn::MulOp>({y, ctx.scalar(scaleType, alpha)}) : nullptr;
  }
  if (y && c) {
    if (beta != 1.0) {
      c = ctx.castTo(c, scaleType);
      c = c ? ctx.create<nn::MulOp>({c, ctx.scalar(scaleType, beta)}) : nullptr;
      y = y && c ? ctx.castTo(y, scaleType) : nullptr;
    }
    y = y && c ? ctx.create<nn::AddOp>({y, c}) : nullptr;
  }
  return produce(results, y ? ctx.castTo(y, elem) : nullptr);
}

//===----------------------------------------------------------------------===//
// Windows: convolution and pooling
//===----------------------------------------------------------------------===//

/// Window attributes of Conv and the pools, normalized to two spatial
/// dimensions: 1-D windows run as 2-D ones over a height of 1.
struct Window {
  SmallVector<int64_t> kernel, strides, pads, dilations;
  bool oneDimensional = false;
};

FailureOr<Window> readWindow(NodeContext &ctx, ArrayRef<int64_t> inputShape,
                             ArrayRef<int64_t> kernel) {
  int64_t spatial = static_cast<int64_t>(inputShape.size()) - 2;
  if (spatial != 1 && spatial != 2) {
    ctx.error() << "only 1-D and 2-D windows are supported, input has rank "
                << inputShape.size();
    return failure();
  }
  auto ints = [&](StringRef name, int64_t size,
                  int64_t fill) -> FailureOr<SmallVector<int64_t>> {
    SmallVector<int64_t> values =
        ctx.intsAttr(name).value_or(SmallVector<int64_t>(size, fill));
    if (static_cast<int64_t>(values.size()) != size) {
      ctx.error() << name << " has " << values.size() << " entries, expected "
                  << size;
      return failure();
    }
    return values;
  };
  Window w;
  w.kernel.assign(kernel.begin(), kernel.end());
  auto strides = ints("strides", spatial, 1);
  auto pads = ints("pads", 2 * spatial, 0);
  auto dilations = ints("dilations", spatial, 1);
  if (failed(strides) || failed(pads) || failed(dilations))
    return failure();
  w.strides = *strides;
  w.pads = *pads;
  w.dilations = *dilations;
  // A stride or dilation of 0 would divide by zero below; beyond 2^32 the
  // window arithmetic could overflow. No model needs either.
  constexpr int64_t kMaxWindowValue = int64_t(1) << 32;
  for (auto [name, values, least] :
       {std::tuple<const char *, ArrayRef<int64_t>, int64_t>{"strides",
                                                             w.strides, 1},
        {"dilations", w.dilations, 1},
        {"pads", w.pads, 0}})
    for (int64_t value : values)
      if (value < least || value > kMaxWindowValue) {
        ctx.error() << name << " has " << value << ", expected " << least
                    << " to 2^32";
        return failure();
      }

  std::string autoPad = ctx.stringAttr("auto_pad", "NOTSET");
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t in = inputShape[i + 2];
      int64_t out = (in + w.strides[i] - 1) / w.strides[i];
      // In 128 bits: kernel (up to 2^48) times dilation (up to 2^32).
      __int128 need = __int128(out - 1) * w.strides[i] +
                      __int128(w.kernel[i] - 1) * w.dilations[i] + 1 - in;
      if (need > nn::kMaxTensorElements) {
        ctx.error() << "auto_pad " << autoPad << " would pad spatial axis "
                    << i << " by more than the 2^48 elements ztc supports";
        return failure();
      }
      int64_t total = std::max<int64_t>(0, int64_t(need));
      int64_t small = total / 2, large = total - small;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : large;
      w.pads[i + spatial] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad == "VALID") {
    w.pads.assign(2 * spatial, 0);
  } else if (autoPad != "NOTSET") {
    ctx.error() << "unknown auto_pad \"" << autoPad << "\"";
    return failure();
  }
  if (spatial == 1) {
    w.oneDimensional = true;
    w.kernel.insert(w.kernel.begin(), 1);
    w.strides.insert(w.strides.begin(), 1);
    w.dilations.insert(w.dilations.begin(), 1);
    w.pads = {0, w.pads[0], 0, w.pads[1]};
  }
  return w;
}

/// Adds a unit height to a 1-D window's [N, C, W] operand.
Value to2d(NodeContext &ctx, Value value) {
  ArrayRef<int64_t> s = cast<RankedTensorType>(value.getType()).getShape();
  return ctx.reshape(value, {s[0], s[1], 1, s[2]});
}

/// Drops the unit height again.
Value from2d(NodeContext &ctx, Value value) {
  if (!value)
    return value;
  ArrayRef<int64_t> s = cast<RankedTensorType>(value.getType()).getShape();
  return ctx.reshape(value, {s[0], s[1], s[3]});
}

LogicalResult convertConv(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  ArrayRef<int64_t> xShape = ctx.inputType(0).getShape();
  ArrayRef<int64_t> wShape = ctx.inputType(1).getShape();
  if (wShape.size() != xShape.size())
    return ctx.error() << "weight rank " << wShape.size()
                       << " differs from input rank " << xShape.size();
  // [M, C/group, spatial...]; readWindow refuses ranks below 3.
  ArrayRef<int64_t> spatial =
      wShape.size() >= 2 ? wShape.drop_front(2) : ArrayRef<int64_t>();
  FailureOr<Window> w = readWindow(ctx, xShape, spatial);
  if (failed(w))
    return failure();
  if (auto kernel = ctx.intsAttr("kernel_shape");
      kernel && ArrayRef<int64_t>(*kernel) != spatial)
    return ctx.error() << "kernel_shape disagrees with the weight's shape";
  Value x = ctx.input(0), weight = ctx.input(1);
  if (w->oneDimensional) {
    x = to2d(ctx, x);
    weight = to2d(ctx, weight);
  }
  SmallVector<Value> operands = {x, weight};
  if (Value bias = ctx.input(2))
    operands.push_back(bias);
  Value y = ctx.create<nn::Conv2dOp>(
      operands, {ctx.i64ArrayAttr("strides", w->strides),
                 ctx.i64ArrayAttr("pads", w->pads),
                 ctx.i64ArrayAttr("dilations", w->dilations),
                 ctx.i64Attr("group", ctx.intAttr("group", 1))});
  return produce(results, w->oneDimensional ? from2d(ctx, y) : y);
}

LogicalResult convertMaxPool(NodeContext &ctx,
                             SmallVectorImpl<Value> &results) {
  if (failed(rejectUsedOutputs(ctx, 1, "the Indices output")))
    return failure();
  if (ctx.intAttr("storage_order", 0) != 0)
    return ctx.error() << "storage_order 1 is not supported";
  auto kernel = ctx.intsAttr("kernel_shape");
  if (!kernel)
    return ctx.error() << "kernel_shape is required";
  FailureOr<Window> w = readWindow(ctx, ctx.inputType(0).getShape(), *kernel);
  if (failed(w))
    return failure();
  Value x = w->oneDimensional ? to2d(ctx, ctx.input(0)) : ctx.input(0);
  Value y = ctx.create<nn::MaxPool2dOp>(
      x, {ctx.i64ArrayAttr("kernel", w->kernel),
          ctx.i64ArrayAttr("strides", w->strides),
          ctx.i64ArrayAttr("pads", w->pads),
          ctx.i64ArrayAttr("dilations", w->dilations),
          ctx.boolAttr("ceil_mode", ctx.intAttr("ceil_mode", 0) != 0)});
  return produce(results, w->oneDimensional ? from2d(ctx, y) : y);
}

LogicalResult convertAveragePool(NodeContext &ctx,
                                 SmallVectorImpl<Value> &results) {
  auto kernel = ctx.intsAttr("kernel_shape");
  if (!kernel)
    return ctx.error() << "kernel_shape is required";
  FailureOr<Window> w = readWindow(ctx, ctx.inputType(0).getShape(), *kernel);
  if (failed(w))
    return failure();
  if (llvm::any_of(w->dilations, [](int64_t d) { return d != 1; }))
    return ctx.error() << "dilated average pooling is not supported";
  Value x = w->oneDimensional ? to2d(ctx, ctx.input(0)) : ctx.input(0);
  Value y = ctx.create<nn::AvgPool2dOp>(
      x, {ctx.i64ArrayAttr("kernel", w->kernel),
          ctx.i64ArrayAttr("strides", w->strides),
          ctx.i64ArrayAttr("pads", w->pads),
          ctx.boolAttr("ceil_mode", ctx.intAttr("ceil_mode", 0) != 0),
          ctx.boolAttr("count_include_pad",
                       ctx.intAttr("count_include_pad", 0) != 0)});
  return produce(results, w->oneDimensional ? from2d(ctx, y) : y);
}

LogicalResult convertGlobalAveragePool(NodeContext &ctx,
                                       SmallVectorImpl<Value> &results) {
  int64_t rank = ctx.rank(0);
  if (rank < 3)
    return ctx.error() << "input must have rank at least 3";
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(2, rank));
  return produce(results, ctx.create<nn::ReduceMeanOp>(
                              ctx.input(0), {ctx.i64ArrayAttr("axes", axes),
                                             ctx.boolAttr("keepdims", true)}));
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

/// Training-mode BatchNormalization: the batch's statistics normalize, and
/// the running statistics move toward them, as ONNX defines it:
/// `running = running * momentum + batch * (1 - momentum)` with the biased
/// batch variance. Running statistics that are initializers are written
/// back after the step (`NodeContext::updateState`). The `evaluate` entry
/// normalizes with the running statistics instead (nn.mode_select).
LogicalResult convertTrainingBatchNorm(NodeContext &ctx,
                                       SmallVectorImpl<Value> &results) {
  RankedTensorType type = ctx.inputType(0);
  int64_t rank = type.getRank();
  if (rank < 2)
    return ctx.error() << "expects an input of rank 2 or more ([N, C, ...]), "
                          "got "
                       << type;
  int64_t channels = type.getDimSize(1);
  Type elem = type.getElementType();
  static const char *const names[] = {"scale", "B", "input_mean", "input_var"};
  for (unsigned i = 1; i <= 4; ++i) {
    if (!ctx.input(i))
      return ctx.error() << names[i - 1] << " (input " << i << ") is missing";
    RankedTensorType operand = ctx.inputType(i);
    if (operand.getShape() != ArrayRef<int64_t>{channels} ||
        operand.getElementType() != elem)
      return ctx.error() << names[i - 1] << " (input " << i
                         << ") must be a vector of the " << channels
                         << " channels of type " << elem << ", got " << operand;
  }
  double epsilon = ctx.floatAttr("epsilon", 1e-5);
  double momentum = ctx.floatAttr("momentum", 0.9);
  auto scalar = [&](double value) { return ctx.scalar(elem, value); };

  // One op, whose gradient is one op: written out after autodiff
  // (ztc-expand-batch-norm).
  Value trained = ctx.create<nn::BatchNormTrainingOp>(
      {ctx.input(0), ctx.input(1), ctx.input(2)},
      {ctx.f64Attr("epsilon", epsilon)});
  // Evaluation normalizes with the running statistics, as inference does.
  Value inferred = ctx.create<nn::BatchNormOp>(
      {ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4)},
      {ctx.f64Attr("epsilon", epsilon)});
  if (!trained || !inferred)
    return failure();
  auto norm = trained.getDefiningOp<nn::BatchNormTrainingOp>();
  Value y = ctx.createWithTypes<nn::ModeSelectOp>(trained.getType(),
                                                  {trained, inferred});

  Value savedMean = norm.getMean();
  Value savedVar = norm.getVar();
  auto runningUpdate = [&](Value running, Value batch) {
    return ctx.create<nn::AddOp>(
        {ctx.create<nn::MulOp>({running, scalar(momentum)}),
         ctx.create<nn::MulOp>({batch, scalar(1.0 - momentum)})});
  };
  Value runningMean = runningUpdate(ctx.input(3), savedMean);
  Value runningVar = runningUpdate(ctx.input(4), savedVar);
  if (failed(ctx.updateState(3, runningMean)) ||
      failed(ctx.updateState(4, runningVar)))
    return failure();
  results.append({y, runningMean, runningVar});
  // BatchNormalization-9 also has the saved (batch) mean and variance.
  if (ctx.since < 14)
    results.append({savedMean, savedVar});
  return success();
}

LogicalResult convertBatchNorm(NodeContext &ctx,
                               SmallVectorImpl<Value> &results) {
  // Training mode: an attribute from BatchNormalization-14 on; before, the
  // node has the running-statistics outputs.
  bool training = ctx.since >= 14 ? ctx.intAttr("training_mode", 0) != 0
                                  : ctx.node.getNumResults() > 1;
  if (training)
    return convertTrainingBatchNorm(ctx, results);
  if (failed(rejectUsedOutputs(ctx, 1, "a running-statistics output")))
    return failure();
  return produce(results,
                 ctx.create<nn::BatchNormOp>(
                     {ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3),
                      ctx.input(4)},
                     {ctx.f64Attr("epsilon", ctx.floatAttr("epsilon", 1e-5))}));
}

/// The optional Mean and InvStdDev outputs of LayerNormalization, computed
/// over `axes` in the stash type (f32 unless stash_type says otherwise).
LogicalResult layerNormStatistics(NodeContext &ctx, ArrayRef<int64_t> axes,
                                  double epsilon,
                                  SmallVectorImpl<Value> &results) {
  Value x = ctx.input(0);
  if (ctx.intAttr("stash_type", 1) == 1)
    x = ctx.castTo(x, ctx.b.getF32Type());
  auto reduceAttrs = [&] {
    return SmallVector<NamedAttribute>{ctx.i64ArrayAttr("axes", axes),
                                       ctx.boolAttr("keepdims", true)};
  };
  Value mean = x ? ctx.create<nn::ReduceMeanOp>(x, reduceAttrs()) : nullptr;
  Value centered = mean ? ctx.create<nn::SubOp>({x, mean}) : nullptr;
  Value square =
      centered ? ctx.create<nn::MulOp>({centered, centered}) : nullptr;
  Value var =
      square ? ctx.create<nn::ReduceMeanOp>(square, reduceAttrs()) : nullptr;
  Type elem = x ? cast<RankedTensorType>(x.getType()).getElementType() : Type();
  Value shifted =
      var ? ctx.create<nn::AddOp>({var, ctx.scalar(elem, epsilon)}) : nullptr;
  Value root = shifted ? ctx.create<nn::SqrtOp>(shifted) : nullptr;
  Value invStdDev = root ? ctx.create<nn::ReciprocalOp>(root) : nullptr;
  results.push_back(mean);
  results.push_back(invStdDev);
  return success(invStdDev != nullptr);
}

LogicalResult convertLayerNorm(NodeContext &ctx,
                               SmallVectorImpl<Value> &results) {
  int64_t rank = ctx.rank(0);
  FailureOr<int64_t> axis = ctx.normalizeAxis(ctx.intAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  double epsilon = ctx.floatAttr("epsilon", 1e-5);
  SmallVector<Value> operands = {ctx.input(0), ctx.input(1)};
  if (Value bias = ctx.input(2))
    operands.push_back(bias);
  Value y = ctx.create<nn::LayerNormOp>(
      operands, {ctx.i64Attr("axis", *axis), ctx.f64Attr("epsilon", epsilon)});
  if (failed(produce(results, y)))
    return failure();
  if (!ctx.outputUsed(1) && !ctx.outputUsed(2))
    return success();
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(*axis, rank));
  return layerNormStatistics(ctx, axes, epsilon, results);
}

/// x [N, C, ...] normalized over each group of C / `groups` channels (and
/// every spatial position), then scaled and shifted by inputs 1 and 2, per
/// channel or (`perChannel` false) per group: nn.layer_norm's statistics
/// over the last axis of x viewed as [N, G, rest]. Checks the scale's and
/// bias's shapes.
LogicalResult normalizeGroups(NodeContext &ctx, int64_t groups, bool perChannel,
                              SmallVectorImpl<Value> &results) {
  RankedTensorType type = ctx.inputType(0);
  ArrayRef<int64_t> shape = type.getShape();
  int64_t channels = shape[1];
  int64_t perGroup = perChannel ? channels : groups;
  for (unsigned i : {1u, 2u}) {
    RankedTensorType t = ctx.inputType(i);
    if (t.getRank() != 1 || t.getDimSize(0) != perGroup)
      return ctx.error() << (i == 1 ? "scale" : "bias") << " is " << t
                         << ", expected " << perGroup << " elements (one per "
                         << (perChannel ? "channel" : "group") << ")";
  }
  Type elem = type.getElementType();
  int64_t rest = type.getNumElements() / std::max<int64_t>(1, shape[0]) /
                 groups;
  double epsilon = ctx.floatAttr("epsilon", 1e-5);
  Value grouped = ctx.reshape(ctx.input(0), {shape[0], groups, rest});
  Value ones = ctx.create<nn::BroadcastToOp>(
      ctx.scalar(elem, 1.0), {ctx.i64ArrayAttr("shape", {rest})});
  Value normalized =
      grouped && ones
          ? ctx.create<nn::LayerNormOp>(
                {grouped, ones}, {ctx.i64Attr("axis", 2),
                                  ctx.f64Attr("epsilon", epsilon)})
          : nullptr;
  if (!normalized)
    return failure();
  // Scale and bias broadcast over [N, G, rest] per group, or over x's
  // shape per channel.
  SmallVector<int64_t> affineShape;
  Value y = normalized;
  if (perChannel) {
    y = ctx.reshape(normalized, shape);
    affineShape.assign(shape.size(), 1);
    affineShape[1] = channels;
  } else {
    affineShape = {1, groups, 1};
  }
  Value scale = ctx.reshape(ctx.input(1), affineShape);
  Value bias = ctx.reshape(ctx.input(2), affineShape);
  Value scaled = y && scale ? ctx.create<nn::MulOp>({y, scale}) : nullptr;
  Value shifted = scaled && bias ? ctx.create<nn::AddOp>({scaled, bias}) : nullptr;
  return produce(results, shifted ? ctx.reshape(shifted, shape) : nullptr);
}

/// GroupNormalization: normalizeGroups with num_groups, scaled and shifted
/// per channel (opset 21) or per group (opset 18).
LogicalResult convertGroupNorm(NodeContext &ctx,
                               SmallVectorImpl<Value> &results) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  if (shape.size() < 2)
    return ctx.error() << "X must have rank 2 or more, got " << shape.size();
  if (!ctx.hasAttr("num_groups"))
    return ctx.error() << "num_groups is required";
  int64_t groups = ctx.intAttr("num_groups", 1), channels = shape[1];
  if (groups <= 0 || channels % groups != 0)
    return ctx.error() << "num_groups " << groups << " does not divide the "
                       << channels << " channels";
  return normalizeGroups(ctx, groups, ctx.since >= 21, results);
}

/// InstanceNormalization: each channel of each sample normalized over its
/// spatial positions, then scaled and shifted per channel: a group
/// normalization of one channel a group. PyTorch's exporter writes
/// GroupNorm (diffusion U-Nets, PoolFormer) as one over [N, G, rest].
LogicalResult convertInstanceNorm(NodeContext &ctx,
                                  SmallVectorImpl<Value> &results) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  if (shape.size() < 3)
    return ctx.error() << "input must have rank 3 or more ([N, C, D1, ...]), "
                          "got "
                       << shape.size();
  return normalizeGroups(ctx, shape[1], /*perChannel=*/true, results);
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

/// Softmax and LogSoftmax over one axis from opset 13; before, over the
/// input coerced to 2-D at `axis` (default 1).
template <typename OpTy>
LogicalResult convertSoftmax(NodeContext &ctx,
                             SmallVectorImpl<Value> &results) {
  int64_t rank = ctx.rank(0);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.intAttr("axis", ctx.since >= 13 ? -1 : 1), rank);
  if (failed(axis))
    return failure();
  if (ctx.since >= 13 || rank == 0)
    return produce(
        results, ctx.create<OpTy>(ctx.input(0), {ctx.i64Attr("axis", *axis)}));
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < *axis ? outer : inner) *= shape[i];
  Value flat = ctx.reshape(ctx.input(0), {outer, inner});
  Value y = flat ? ctx.create<OpTy>(flat, {ctx.i64Attr("axis", 1)}) : nullptr;
  return produce(results, y ? ctx.reshape(y, shape) : nullptr);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Reductions take axes as an attribute or (ReduceSum from 13, the others
/// from 18) as an input; no axes means all, unless noop_with_empty_axes.
template <typename OpTy>
LogicalResult convertReduce(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  int64_t rank = ctx.rank(0);
  bool axesAsInput =
      ctx.since >= (std::is_same_v<OpTy, nn::ReduceSumOp> ? 13 : 18);
  SmallVector<int64_t> axes;
  if (axesAsInput && ctx.input(1)) {
    FailureOr<SmallVector<int64_t>> values = ctx.constantInts(1, "axes");
    if (failed(values))
      return failure();
    axes = *values;
  } else if (!axesAsInput) {
    axes = ctx.intsAttr("axes").value_or(SmallVector<int64_t>());
  }
  if (axes.empty()) {
    if (axesAsInput && ctx.intAttr("noop_with_empty_axes", 0))
      return produce(results, ctx.input(0));
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  for (int64_t &axis : axes) {
    FailureOr<int64_t> normalized = ctx.normalizeAxis(axis, rank, "axes entry");
    if (failed(normalized))
      return failure();
    axis = *normalized;
  }
  llvm::sort(axes);
  axes.erase(llvm::unique(axes), axes.end());
  return produce(
      results,
      ctx.create<OpTy>(ctx.input(0),
                       {ctx.i64ArrayAttr("axes", axes),
                        ctx.boolAttr("keepdims", ctx.intAttr("keepdims", 1))}));
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Builds nn.nll_loss from the node's reduction and ignore_index.
Value nllLoss(NodeContext &ctx, Value logProbs, Value target, Value weight) {
  std::string reduction = ctx.stringAttr("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    ctx.error() << "reduction must be none, sum or mean, got \"" << reduction
                << "\"";
    return nullptr;
  }
  SmallVector<NamedAttribute> attrs = {
      ctx.attr("reduction", ctx.b.getStringAttr(reduction))};
  if (ctx.hasAttr("ignore_index"))
    attrs.push_back(
        ctx.i64Attr("ignore_index", ctx.intAttr("ignore_index", 0)));
  SmallVector<Value> operands = {logProbs, target};
  if (weight)
    operands.push_back(weight);
  return ctx.create<nn::NllLossOp>(operands, attrs);
}

LogicalResult convertSoftmaxCrossEntropy(NodeContext &ctx,
                                         SmallVectorImpl<Value> &results) {
  if (ctx.rank(0) < 2)
    return ctx.error() << "scores must have rank at least 2 ([N, C, ...])";
  Value logProbs =
      ctx.create<nn::LogSoftmaxOp>(ctx.input(0), {ctx.i64Attr("axis", 1)});
  if (!logProbs)
    return failure();
  Value loss = nllLoss(ctx, logProbs, ctx.input(1), ctx.input(2));
  results.push_back(loss);
  results.push_back(logProbs);
  return success(loss != nullptr);
}

LogicalResult convertNllLoss(NodeContext &ctx,
                             SmallVectorImpl<Value> &results) {
  return produce(results,
                 nllLoss(ctx, ctx.input(0), ctx.input(1), ctx.input(2)));
}

} // namespace

void onnx_to_nn::addNeuralConverters(ConverterRegistry &registry) {
  registry.addSince("MatMul", 9, convertMatMul);
  registry.addSince("Gemm", 7, convertGemm);
  registry.addSince("Conv", 1, convertConv);
  registry.addSince("MaxPool", 8, convertMaxPool);
  registry.addSince("AveragePool", 7, convertAveragePool);
  registry.addSince("GlobalAveragePool", 1, convertGlobalAveragePool);
  registry.addSince("BatchNormalization", 9, convertBatchNorm);
  registry.addSince("LayerNormalization", 17, convertLayerNorm);
  registry.addSince("GroupNormalization", 18, convertGroupNorm);
  registry.addSince("InstanceNormalization", 6, convertInstanceNorm);
  registry.addSince("Softmax", 1, convertSoftmax<nn::SoftmaxOp>);
  registry.addSince("LogSoftmax", 1, convertSoftmax<nn::LogSoftmaxOp>);
  registry.addSince("ReduceSum", 1, convertReduce<nn::ReduceSumOp>);
  registry.addSince("ReduceMean", 1, convertReduce<nn::ReduceMeanOp>);
  registry.addSince("ReduceMax", 1, convertReduce<nn::ReduceMaxOp>);
  registry.addSince("SoftmaxCrossEntropyLoss", 12, convertSoftmaxCrossEntropy);
  registry.addSince("NegativeLogLikelihoodLoss", 12, convertNllLoss);
}
