//===- ShapeOps.cpp - shape and data-movement ONNX operators to nn --------===//
//
// Converters for operators that move data or compute shapes. With static
// input shapes, Shape and Size are constants and the chains PyTorch exports
// around them (Gather, Unsqueeze, Concat, ...) fold as they are built, so
// Reshape, Expand and friends see constant shape operands.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/ShapeLimits.h"
#include "passes/Conversion/OnnxToNN/NodeConverter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <functional>
#include <numeric>

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::onnx_to_nn;

namespace {

/// A constant 1-D i64 tensor.
Value intsConstant(NodeContext &ctx, ArrayRef<int64_t> values) {
  return ctx.i64Constant({static_cast<int64_t>(values.size())}, values);
}

/// Normalizes and checks a list of axes for `rank`.
FailureOr<SmallVector<int64_t>>
normalizeAxes(NodeContext &ctx, ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> result;
  for (int64_t axis : axes) {
    FailureOr<int64_t> normalized = ctx.normalizeAxis(axis, rank, "axes entry");
    if (failed(normalized))
      return failure();
    if (llvm::is_contained(result, *normalized)) {
      ctx.error() << "axis " << axis << " is listed twice";
      return failure();
    }
    result.push_back(*normalized);
  }
  return result;
}

/// Axes of Squeeze/Unsqueeze: an attribute before opset 13, an input after.
FailureOr<std::optional<SmallVector<int64_t>>> readAxes(NodeContext &ctx) {
  if (ctx.since < 13)
    return ctx.intsAttr("axes");
  if (!ctx.input(1))
    return std::optional<SmallVector<int64_t>>();
  FailureOr<SmallVector<int64_t>> axes = ctx.constantInts(1, "axes");
  if (failed(axes))
    return failure();
  return std::optional<SmallVector<int64_t>>(*axes);
}

LogicalResult convertReshape(NodeContext &ctx,
                             SmallVectorImpl<Value> &results) {
  ArrayRef<int64_t> inShape = ctx.inputType(0).getShape();
  SmallVector<int64_t> shape;
  if (ctx.since < 5) {
    shape = ctx.intsAttr("shape").value_or(SmallVector<int64_t>());
  } else {
    FailureOr<SmallVector<int64_t>> values = ctx.constantInts(1, "shape");
    if (failed(values))
      return failure();
    shape = *values;
  }
  bool allowZero = ctx.intAttr("allowzero", 0) != 0;
  int64_t inferred = -1, known = 1;
  for (auto [i, dim] : llvm::enumerate(shape)) {
    if (dim == 0 && !allowZero) {
      if (i >= inShape.size())
        return ctx.error() << "shape entry " << i
                           << " is 0 (copy) but the input has rank "
                           << inShape.size();
      dim = inShape[i];
    }
    if (dim == -1) {
      if (inferred >= 0)
        return ctx.error() << "shape has more than one -1";
      inferred = i;
      continue;
    }
    if (dim < 0)
      return ctx.error() << "shape entry " << i << " is " << dim;
    // Beyond the limit a product of entries could overflow: such a shape
    // cannot match the input's element count anyway.
    if (std::max<int64_t>(dim, 1) >
        nn::kMaxTensorElements / std::max<int64_t>(known, 1))
      return ctx.error() << "shape entry " << i << " (" << dim
                         << ") makes the target shape larger than 2^48 "
                            "elements";
    known *= dim;
  }
  int64_t total = ctx.inputType(0).getNumElements();
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return ctx.error() << "cannot reshape " << ctx.inputType(0)
                         << " with -1 in the target shape";
    shape[inferred] = total / known;
  } else if (known != total) {
    return ctx.error() << "cannot reshape " << ctx.inputType(0) << " (" << total
                       << " elements) to " << known << " elements";
  }
  return produce(results, ctx.reshape(ctx.input(0), shape));
}

LogicalResult convertTranspose(NodeContext &ctx,
                               SmallVectorImpl<Value> &results) {
  int64_t rank = ctx.rank(0);
  SmallVector<int64_t> perm = ctx.intsAttr("perm").value_or(
      llvm::to_vector(llvm::reverse(llvm::seq<int64_t>(0, rank))));
  return produce(results, ctx.create<nn::TransposeOp>(
                              ctx.input(0), {ctx.i64ArrayAttr("perm", perm)}));
}

LogicalResult convertFlatten(NodeContext &ctx,
                             SmallVectorImpl<Value> &results) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  int64_t rank = shape.size();
  int64_t axis = ctx.intAttr("axis", 1);
  if (axis < -rank || axis > rank)
    return ctx.error() << "axis " << axis << " is out of range for rank "
                       << rank;
  if (axis < 0)
    axis += rank;
  return produce(results,
                 ctx.reshape(ctx.input(0), {product(shape.take_front(axis)),
                                            product(shape.drop_front(axis))}));
}

LogicalResult convertSqueeze(NodeContext &ctx,
                             SmallVectorImpl<Value> &results) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  auto axes = readAxes(ctx);
  if (failed(axes))
    return failure();
  SmallVector<int64_t> drop;
  if (*axes) {
    auto normalized = normalizeAxes(ctx, **axes, shape.size());
    if (failed(normalized))
      return failure();
    drop = *normalized;
    for (int64_t axis : drop)
      if (shape[axis] != 1)
        return ctx.error() << "cannot squeeze axis " << axis << " of size "
                           << shape[axis];
  } else {
    for (auto [i, dim] : llvm::enumerate(shape))
      if (dim == 1)
        drop.push_back(i);
  }
  SmallVector<int64_t> result;
  for (auto [i, dim] : llvm::enumerate(shape))
    if (!llvm::is_contained(drop, static_cast<int64_t>(i)))
      result.push_back(dim);
  return produce(results, ctx.reshape(ctx.input(0), result));
}

LogicalResult convertUnsqueeze(NodeContext &ctx,
                               SmallVectorImpl<Value> &results) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  auto axes = readAxes(ctx);
  if (failed(axes))
    return failure();
  if (!*axes)
    return ctx.error() << "axes are required";
  int64_t outRank = shape.size() + (*axes)->size();
  auto normalized = normalizeAxes(ctx, **axes, outRank);
  if (failed(normalized))
    return failure();
  SmallVector<int64_t> result;
  const int64_t *next = shape.begin();
  for (int64_t i = 0; i < outRank; ++i)
    result.push_back(llvm::is_contained(*normalized, i) ? 1 : *next++);
  return produce(results, ctx.reshape(ctx.input(0), result));
}

LogicalResult convertConcat(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  if (!ctx.hasAttr("axis"))
    return ctx.error() << "axis is required";
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.intAttr("axis", 0), ctx.rank(0));
  if (failed(axis))
    return failure();
  SmallVector<Value> inputs;
  for (unsigned i = 0, e = ctx.node.getInputs().size(); i < e; ++i)
    inputs.push_back(ctx.input(i));
  return produce(
      results, ctx.create<nn::ConcatOp>(inputs, {ctx.i64Attr("axis", *axis)}));
}

LogicalResult convertSplit(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.intAttr("axis", 0), shape.size());
  if (failed(axis))
    return failure();
  int64_t dim = shape[*axis];
  int64_t outputs = ctx.node.getNumResults();
  SmallVector<int64_t> sizes;
  if (ctx.since >= 13 && ctx.input(1)) {
    FailureOr<SmallVector<int64_t>> values = ctx.constantInts(1, "split");
    if (failed(values))
      return failure();
    sizes = *values;
  } else if (ctx.since < 13 && ctx.hasAttr("split")) {
    sizes = *ctx.intsAttr("split");
  } else {
    // Equal parts; from opset 18 the last one may be smaller.
    int64_t parts = ctx.intAttr("num_outputs", outputs);
    if (parts != outputs)
      return ctx.error() << "num_outputs is " << parts << " but the node has "
                         << outputs << " outputs";
    int64_t chunk = (dim + parts - 1) / parts;
    if (ctx.since < 18 && dim % parts != 0)
      return ctx.error() << "cannot split size " << dim << " into " << parts
                         << " equal parts";
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::min(chunk, dim - i * chunk));
  }
  // Each size within [0, dim] keeps the running sum from overflowing.
  int64_t sum = 0;
  bool inRange = true;
  for (int64_t size : sizes) {
    inRange = inRange && size >= 0 && size <= dim - sum;
    if (inRange)
      sum += size;
  }
  if (static_cast<int64_t>(sizes.size()) != outputs || !inRange || sum != dim)
    return ctx.error() << "split sizes do not add up to dimension " << *axis
                       << " (size " << dim << ") over " << outputs
                       << " outputs";
  int64_t start = 0;
  for (int64_t size : sizes) {
    Value part = ctx.sliceAlong(ctx.input(0), *axis, start, size);
    if (!part)
      return failure();
    results.push_back(part);
    start += size;
  }
  return success();
}

/// Slice with ONNX's clamping rules, normalized to per-dimension start,
/// size and step.
LogicalResult convertSlice(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  int64_t rank = shape.size();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (ctx.since < 10) {
    starts = ctx.intsAttr("starts").value_or(SmallVector<int64_t>());
    ends = ctx.intsAttr("ends").value_or(SmallVector<int64_t>());
    axes = ctx.intsAttr("axes").value_or(SmallVector<int64_t>());
  } else {
    auto s = ctx.constantInts(1, "starts");
    auto e = ctx.constantInts(2, "ends");
    if (failed(s) || failed(e))
      return failure();
    starts = *s;
    ends = *e;
    if (ctx.input(3)) {
      auto a = ctx.constantInts(3, "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
    if (ctx.input(4)) {
      auto st = ctx.constantInts(4, "steps");
      if (failed(st))
        return failure();
      steps = *st;
    }
  }
  if (axes.empty())
    axes = llvm::to_vector(llvm::seq<int64_t>(0, starts.size()));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return ctx.error() << "starts, ends, axes and steps differ in length";
  auto normalized = normalizeAxes(ctx, axes, rank);
  if (failed(normalized))
    return failure();

  SmallVector<int64_t> outStarts(rank, 0), sizes(shape), outSteps(rank, 1);
  for (auto [i, axis] : llvm::enumerate(*normalized)) {
    int64_t dim = shape[axis], step = steps[i];
    if (step == 0)
      return ctx.error() << "slice step is 0 on axis " << axis;
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end =
        ends[i] < 0 && ends[i] > INT64_MIN / 2 ? ends[i] + dim : ends[i];
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    }
    // ceil(span / |step|) without overflow: a step may be INT64_MAX or
    // INT64_MIN (take one element), and the span lies in [-dim - 1, dim + 1].
    int64_t span = step > 0 ? end - start : start - end;
    uint64_t magnitude = step > 0 ? uint64_t(step) : uint64_t(0) - uint64_t(step);
    int64_t size = span > 0 ? int64_t((uint64_t(span) - 1) / magnitude + 1) : 0;
    outStarts[axis] = size == 0 ? 0 : start;
    sizes[axis] = size;
    outSteps[axis] = step;
  }
  return produce(
      results, ctx.create<nn::SliceOp>(ctx.input(0),
                                       {ctx.i64ArrayAttr("starts", outStarts),
                                        ctx.i64ArrayAttr("sizes", sizes),
                                        ctx.i64ArrayAttr("steps", outSteps)}));
}

LogicalResult convertGather(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.intAttr("axis", 0), ctx.rank(0));
  if (failed(axis))
    return failure();
  return produce(results,
                 ctx.create<nn::GatherOp>({ctx.input(0), ctx.input(1)},
                                          {ctx.i64Attr("axis", *axis)}));
}

/// Expand broadcasts both ways: the result is the broadcast of the input's
/// shape and the requested one.
LogicalResult convertExpand(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  FailureOr<SmallVector<int64_t>> requested = ctx.constantInts(1, "shape");
  if (failed(requested))
    return failure();
  ArrayRef<int64_t> in = ctx.inputType(0).getShape();
  size_t rank = std::max(in.size(), requested->size());
  SmallVector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i + in.size() >= rank ? in[i + in.size() - rank] : 1;
    int64_t b = i + requested->size() >= rank
                    ? (*requested)[i + requested->size() - rank]
                    : 1;
    if (a != b && a != 1 && b != 1)
      return ctx.error() << "cannot expand " << ctx.inputType(0)
                         << " to the requested shape: dimension " << i << " is "
                         << a << " vs " << b;
    shape[i] = a == 1 ? b : a;
  }
  return produce(results,
                 ctx.create<nn::BroadcastToOp>(
                     ctx.input(0), {ctx.i64ArrayAttr("shape", shape)}));
}

/// Tile as a broadcast: the input gets a dimension of 1 before each
/// repeated one, broadcast to the repeat count, and the pairs merge
/// (x [d0, d1] by [r0, r1] is [1, d0, 1, d1] broadcast to [r0, d0, r1, d1],
/// reshaped to [r0 * d0, r1 * d1]); its gradient is the broadcast's, a sum
/// over the copies. Where that rank would pass nn::kMaxRank, one dimension
/// at a time ([before, 1, d, after] broadcast to [before, r, d, after]).
LogicalResult convertTile(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  FailureOr<SmallVector<int64_t>> repeats = ctx.constantInts(1, "repeats");
  if (failed(repeats))
    return failure();
  ArrayRef<int64_t> in = ctx.inputType(0).getShape();
  if (repeats->size() != in.size())
    return ctx.error() << "repeats has " << repeats->size()
                       << " entries but the input " << ctx.inputType(0)
                       << " has rank " << in.size();
  SmallVector<int64_t> spread, broadcast, tiled;
  int64_t elements = 1;
  for (auto [i, repeat] : llvm::enumerate(*repeats)) {
    if (repeat < 1)
      return ctx.error() << "repeats entry " << i << " is " << repeat
                         << " (an empty result; ztc takes repeats of 1 or "
                            "more)";
    int64_t dim = std::max<int64_t>(in[i], 1);
    if (dim > nn::kMaxTensorElements / elements ||
        repeat > nn::kMaxTensorElements / (elements * dim))
      return ctx.error() << "repeats [" << *repeats
                         << "] make the result larger than 2^48 elements";
    elements *= repeat * dim;
    if (repeat > 1) {
      spread.push_back(1);
      broadcast.push_back(repeat);
    }
    spread.push_back(in[i]);
    broadcast.push_back(in[i]);
    tiled.push_back(repeat * in[i]);
  }
  if (spread.size() == in.size())
    return produce(results, ctx.input(0));
  auto copies = [&](Value value, ArrayRef<int64_t> spread,
                    ArrayRef<int64_t> broadcast, ArrayRef<int64_t> tiled) {
    Value copied = ctx.create<nn::BroadcastToOp>(
        ctx.reshape(value, spread), {ctx.i64ArrayAttr("shape", broadcast)});
    return copied ? ctx.reshape(copied, tiled) : Value();
  };
  if (int64_t(spread.size()) <= nn::kMaxRank)
    return produce(results, copies(ctx.input(0), spread, broadcast, tiled));
  Value value = ctx.input(0);
  SmallVector<int64_t> shape(in);
  for (auto [i, repeat] : llvm::enumerate(*repeats)) {
    if (repeat == 1)
      continue;
    int64_t dim = shape[i];
    int64_t before = std::accumulate(shape.begin(), shape.begin() + i,
                                     int64_t(1), std::multiplies<int64_t>());
    int64_t after = std::accumulate(shape.begin() + i + 1, shape.end(),
                                    int64_t(1), std::multiplies<int64_t>());
    shape[i] *= repeat;
    value = copies(value, {before, 1, dim, after}, {before, repeat, dim, after},
                   shape);
    if (!value)
      return failure();
  }
  return produce(results, value);
}

/// Where output position `y` of an axis of `in` positions resized to `out`
/// by `scale` reads the input, per Resize's coordinate_transformation_mode
/// (ONNX's formulas, in double; `width` is scale * in, not rounded).
double resizeSource(StringRef mode, double y, double scale, int64_t in,
                    int64_t out) {
  const double width = scale * static_cast<double>(in);
  if (mode == "align_corners")
    return width == 1 ? 0.0 : y * static_cast<double>(in - 1) / (width - 1);
  if (mode == "asymmetric")
    return y / scale;
  if (mode == "pytorch_half_pixel")
    return width == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
  if (mode == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out) / width;
    const double offset = static_cast<double>(in) / 2 * (1 - adjustment);
    return offset + (y + 0.5) / scale - 0.5;
  }
  return (y + 0.5) / scale - 0.5; // half_pixel
}

/// The input positions each output position of a resized axis reads
/// (`taps` of them, clamped into the axis as ONNX's edge padding has it)
/// and their weights, row-major [out, taps]: ONNX's reference Resize
/// along one axis.
struct ResizeTaps {
  int64_t taps = 0;
  SmallVector<int64_t> index;
  SmallVector<double> weight;
};

ResizeTaps resizeTaps(NodeContext &ctx, StringRef mode, StringRef coordinates,
                      double scale, int64_t in, int64_t out) {
  const std::string nearest =
      ctx.stringAttr("nearest_mode", "round_prefer_floor");
  const double a = ctx.floatAttr("cubic_coeff_a", -0.75);
  const bool excludeOutside = ctx.intAttr("exclude_outside", 0) != 0;
  // Antialiased linear and cubic filters widen by 1 / scale when
  // downsampling: taps from `first` on, first <= 0.
  const bool antialias = ctx.intAttr("antialias", 0) != 0 && mode != "nearest";
  const double narrowed = std::min(scale, 1.0);
  const int64_t first =
      !antialias ? 0
                 : static_cast<int64_t>(
                       std::floor((mode == "cubic" ? -2.0 : -1.0) / narrowed)) +
                       1;
  ResizeTaps result;
  result.taps = antialias ? 2 - 2 * first : mode == "cubic" ? 4 : 2;
  const int64_t n = result.taps, pad = (n + 1) / 2;
  auto cubic = [&](double x) {
    x = std::abs(x);
    if (x <= 1)
      return ((a + 2) * x - (a + 3)) * x * x + 1;
    return x < 2 ? ((a * x - 5 * a) * x + 8 * a) * x - 4 * a : 0.0;
  };
  for (int64_t y = 0; y < out; ++y) {
    const double x =
        resizeSource(coordinates, static_cast<double>(y), scale, in, out);
    // The fraction past the input position at or left of x, 1 on one.
    const double floorX = std::floor(x);
    const double r = x == floorX ? 1.0 : x - floorX;
    SmallVector<double, 8> w;
    if (antialias) {
      // The filter at each tap's distance, scaled, normalized to sum 1.
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double at = (static_cast<double>(first + k) - r) * narrowed;
        w.push_back(mode == "cubic" ? cubic(at)
                                    : std::clamp(1 - std::abs(at), 0.0, 1.0));
        sum += w.back();
      }
      for (double &v : w)
        v /= sum;
    } else if (mode == "nearest") {
      bool right = r == 1.0                         ? true
                   : nearest == "round_prefer_ceil" ? r >= 0.5
                   : nearest == "floor"             ? false
                   : nearest == "ceil"              ? true
                                                    : r > 0.5;
      w = {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
    } else if (mode == "linear") {
      w = {1 - r, r};
    } else {
      // The kernel at the four taps' distances from x.
      const double s = 1 - r;
      w = {cubic(r + 1), cubic(r), cubic(s), cubic(s + 1)};
    }
    // The n positions nearest x, ties to the smaller: x's position in the
    // padded axis, rounded down, then back n / 2 (n / 2 - 1 past an
    // integer).
    const double padded = x + static_cast<double>(pad);
    const double cell = std::floor(padded);
    const int64_t start =
        static_cast<int64_t>(cell) - n / 2 + (padded == cell ? 0 : 1) - pad;
    if (excludeOutside) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (start + k < 0 || start + k >= in)
          w[k] = 0;
        sum += w[k];
      }
      for (double &v : w)
        v /= sum == 0 ? 1.0 : sum;
    }
    for (int64_t k = 0; k < n; ++k) {
      result.index.push_back(std::clamp<int64_t>(start + k, 0, in - 1));
      result.weight.push_back(w[k]);
    }
  }
  return result;
}

/// Resize (opset 11 on) in nearest, linear or cubic mode (antialiased
/// too), every aspect-ratio policy: each resized axis in turn, as a gather
/// of the input positions each output position reads (constant indices)
/// and, unless every output reads one position whole (nearest), their sum
/// weighted by constants. The scales or sizes must be constant;
/// tf_crop_and_resize is refused. The gradient is the gather's (a
/// scatter-add) and the products'.
LogicalResult convertResize(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  RankedTensorType type = ctx.inputType(0);
  ArrayRef<int64_t> shape = type.getShape();
  const int64_t rank = shape.size();
  const std::string mode = ctx.stringAttr("mode", "nearest");
  const std::string coordinates =
      ctx.stringAttr("coordinate_transformation_mode", "half_pixel");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return ctx.error() << "mode '" << mode
                       << "' is not one of nearest, linear, cubic";
  if (!llvm::is_contained({"half_pixel", "pytorch_half_pixel", "align_corners",
                           "asymmetric", "half_pixel_symmetric"},
                          coordinates))
    return ctx.error() << "coordinate_transformation_mode '" << coordinates
                       << "' is not supported (ztc takes half_pixel, "
                          "pytorch_half_pixel, align_corners, asymmetric and "
                          "half_pixel_symmetric)";
  if (!isa<FloatType>(type.getElementType()))
    return ctx.error() << "X must be a float tensor, got " << type;
  std::string policy = ctx.stringAttr("keep_aspect_ratio_policy", "stretch");
  if (!llvm::is_contained({"stretch", "not_larger", "not_smaller"}, policy))
    return ctx.error() << "keep_aspect_ratio_policy '" << policy
                       << "' is not one of stretch, not_larger, not_smaller";
  // The axes the scales or sizes list (opset 18), else all of them.
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (std::optional<SmallVector<int64_t>> listed = ctx.intsAttr("axes")) {
    FailureOr<SmallVector<int64_t>> normalized =
        normalizeAxes(ctx, *listed, rank);
    if (failed(normalized))
      return failure();
    axes = *normalized;
  }
  auto given = [&](unsigned i) {
    DenseElementsAttr attr = ctx.input(i) ? ctx.constantInput(i) : nullptr;
    return attr && attr.getNumElements() > 0 ? attr : DenseElementsAttr();
  };
  SmallVector<double> scales(rank, 1.0);
  SmallVector<int64_t> sizes(shape);
  // Sizes where given and not empty (opset 11 and 13 pass an empty one
  // beside scales).
  DenseElementsAttr sizesAttr = ctx.input(3) ? ctx.constantInput(3) : nullptr;
  if (ctx.input(3) && !(sizesAttr && sizesAttr.getNumElements() == 0)) {
    FailureOr<SmallVector<int64_t>> values = ctx.constantInts(3, "sizes");
    if (failed(values))
      return failure();
    if (values->size() != axes.size())
      return ctx.error() << "sizes has " << values->size() << " entries for "
                         << axes.size() << " axes";
    for (auto [axis, size] : llvm::zip(axes, *values)) {
      if (size < 1)
        return ctx.error() << "sizes entry for axis " << axis << " is " << size;
      sizes[axis] = size;
      scales[axis] =
          static_cast<double>(size) / static_cast<double>(shape[axis]);
    }
    // One scale for every listed axis, the smallest or largest, each size
    // rounded half up from it.
    if (policy != "stretch") {
      double scale = scales[axes.front()];
      for (int64_t axis : axes)
        scale = policy == "not_larger" ? std::min(scale, scales[axis])
                                       : std::max(scale, scales[axis]);
      for (int64_t axis : axes) {
        scales[axis] = scale;
        sizes[axis] = static_cast<int64_t>(
            scale * static_cast<double>(shape[axis]) + 0.5);
      }
    }
  } else {
    DenseElementsAttr attr = given(2);
    if (!attr || !isa<FloatType>(attr.getElementType()))
      return ctx.error() << "scales (input 2) or sizes (input 3) must be a "
                            "constant tensor once input shapes are static";
    SmallVector<double> values;
    for (const APFloat &v : attr.getValues<APFloat>())
      values.push_back(v.convertToDouble());
    if (values.size() != axes.size())
      return ctx.error() << "scales has " << values.size() << " entries for "
                         << axes.size() << " axes";
    for (auto [axis, scale] : llvm::zip(axes, values)) {
      double size = scale * static_cast<double>(shape[axis]);
      if (!(scale > 0) || !(size >= 1) || size > nn::kMaxTensorElements)
        return ctx.error() << "scales entry " << scale << " for axis " << axis
                           << " makes its size " << size;
      scales[axis] = scale;
      sizes[axis] = static_cast<int64_t>(size);
    }
  }
  if (!nn::isWithinSizeLimit(sizes))
    return ctx.error() << "the result [" << sizes
                       << "] is larger than 2^48 elements";
  Type elem = type.getElementType();
  Value y = ctx.input(0);
  for (int64_t axis : axes) {
    const double scale = scales[axis];
    const int64_t in = shape[axis], out = sizes[axis];
    if (out == in && std::abs(scale - 1.0) <= 1e-9)
      continue;
    if (ctx.intAttr("antialias", 0) != 0 && mode == "nearest")
      return ctx.error() << "antialias is not supported in nearest mode";
    ResizeTaps taps = resizeTaps(ctx, mode, coordinates, scale, in, out);
    const int64_t n = taps.taps;
    // Every output reading one position whole (one weight 1, the others
    // 0): that position alone.
    auto wholeTap = [&](int64_t o) -> std::optional<int64_t> {
      std::optional<int64_t> picked;
      for (int64_t k = 0; k < n; ++k) {
        const double w = taps.weight[o * n + k];
        if (w == 0.0)
          continue;
        if (w != 1.0 || picked)
          return std::nullopt;
        picked = taps.index[o * n + k];
      }
      return picked;
    };
    SmallVector<int64_t> whole;
    for (int64_t o = 0; o < out; ++o) {
      std::optional<int64_t> tap = wholeTap(o);
      if (!tap)
        break;
      whole.push_back(*tap);
    }
    if (int64_t(whole.size()) == out) {
      y = ctx.create<nn::GatherOp>({y, ctx.i64Constant({out}, whole)},
                                   {ctx.i64Attr("axis", axis)});
    } else {
      Value gathered =
          ctx.create<nn::GatherOp>({y, ctx.i64Constant({out, n}, taps.index)},
                                   {ctx.i64Attr("axis", axis)});
      SmallVector<int64_t> weightShape(rank + 1, 1);
      weightShape[axis] = out;
      weightShape[axis + 1] = n;
      SmallVector<Attribute> weights;
      for (double w : taps.weight)
        weights.push_back(ctx.b.getFloatAttr(elem, w));
      Value weight = arith::ConstantOp::create(
          ctx.b, ctx.loc,
          DenseElementsAttr::get(RankedTensorType::get(weightShape, elem),
                                 weights));
      Value weighted =
          gathered ? ctx.create<nn::MulOp>({gathered, weight}) : nullptr;
      y = weighted ? ctx.create<nn::ReduceSumOp>(
                         weighted, {ctx.i64ArrayAttr("axes", {axis + 1}),
                                    ctx.boolAttr("keepdims", false)})
                   : nullptr;
    }
    if (!y)
      return failure();
  }
  return produce(results, y);
}

LogicalResult convertShape(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  ArrayRef<int64_t> shape = ctx.inputType(0).getShape();
  int64_t rank = shape.size();
  auto clampIndex = [&](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank);
  };
  int64_t start = clampIndex(ctx.intAttr("start", 0));
  int64_t end = clampIndex(ctx.intAttr("end", rank));
  return produce(
      results,
      intsConstant(ctx, shape.slice(start, std::max<int64_t>(end - start, 0))));
}

LogicalResult convertSize(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  return produce(results, ctx.scalar(ctx.b.getI64Type(),
                                     ctx.inputType(0).getNumElements()));
}

LogicalResult convertConstant(NodeContext &ctx,
                              SmallVectorImpl<Value> &results) {
  auto attrs = ctx.node.getAttrs();
  if (attrs.size() != 1)
    return ctx.error() << "exactly one value attribute is required";
  NamedAttribute attr = *attrs.begin();
  StringRef name = attr.getName().getValue();
  OpBuilder &b = ctx.b;
  TypedAttr value;
  if (name == "value") {
    value = dyn_cast<DenseElementsAttr>(attr.getValue());
  } else if (name == "value_float") {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                   cast<FloatAttr>(attr.getValue()));
  } else if (name == "value_int") {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                   cast<IntegerAttr>(attr.getValue()));
  } else if (name == "value_floats" || name == "value_ints") {
    auto list = cast<ArrayAttr>(attr.getValue()).getValue();
    Type elem =
        name == "value_floats" ? Type(b.getF32Type()) : Type(b.getI64Type());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(list.size())}, elem), list);
  }
  if (!value)
    return ctx.error() << "constant attribute '" << name
                       << "' is not supported";
  return produce(results, arith::ConstantOp::create(b, ctx.loc, value));
}

LogicalResult convertConstantOfShape(NodeContext &ctx,
                                     SmallVectorImpl<Value> &results) {
  FailureOr<SmallVector<int64_t>> shape = ctx.constantInts(0, "shape");
  if (failed(shape))
    return failure();
  Attribute fill = ctx.b.getF32FloatAttr(0.0f);
  Type elem = ctx.b.getF32Type();
  if (auto value = dyn_cast_or_null<DenseElementsAttr>(
          ctx.node.getAttrs().get("value"))) {
    if (value.getNumElements() != 1)
      return ctx.error() << "value must hold exactly one element";
    elem = value.getElementType();
    fill = *value.value_begin<Attribute>();
  }
  if (!nn::isWithinSizeLimit(*shape))
    return ctx.error() << "shape [" << *shape
                       << "] has a negative entry or more than 2^48 elements";
  auto type = RankedTensorType::get(*shape, elem);
  return produce(results,
                 arith::ConstantOp::create(ctx.b, ctx.loc,
                                           DenseElementsAttr::get(type, fill)));
}

/// The most elements a Range may fold to (2^24: positions, not data).
constexpr int64_t kMaxRangeElements = int64_t(1) << 24;

/// Range needs constant bounds; its result then is a constant.
LogicalResult convertRange(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  DenseElementsAttr attrs[3];
  for (unsigned i = 0; i < 3; ++i)
    if (!(attrs[i] = ctx.constantInput(i)) || attrs[i].getNumElements() != 1)
      return ctx.error() << "start, limit and delta must be constant scalars";
  Type elem = attrs[0].getElementType();
  auto asDouble = [](DenseElementsAttr attr) -> double {
    if (isa<FloatType>(attr.getElementType()))
      return (*attr.value_begin<APFloat>()).convertToDouble();
    return static_cast<double>((*attr.value_begin<APInt>()).getSExtValue());
  };
  double start = asDouble(attrs[0]), limit = asDouble(attrs[1]),
         delta = asDouble(attrs[2]);
  if (delta == 0)
    return ctx.error() << "delta is 0";
  // The result is a constant, materialized here: bounded, and finite first
  // (casting a NaN or an out-of-range double to an integer is undefined).
  double steps = std::ceil((limit - start) / delta);
  if (!std::isfinite(steps) || steps > double(kMaxRangeElements))
    return ctx.error() << "Range(" << start << ", " << limit << ", " << delta
                       << ") has more than " << kMaxRangeElements
                       << " elements";
  int64_t count = std::max<int64_t>(0, static_cast<int64_t>(steps));
  auto type = RankedTensorType::get({count}, elem);
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < count; ++i) {
    double v = start + i * delta;
    values.push_back(
        isa<FloatType>(elem)
            ? Attribute(ctx.b.getFloatAttr(elem, v))
            : Attribute(ctx.b.getIntegerAttr(elem, static_cast<int64_t>(v))));
  }
  return produce(
      results, arith::ConstantOp::create(ctx.b, ctx.loc,
                                         DenseElementsAttr::get(type, values)));
}

LogicalResult convertTrilu(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  int64_t k = 0;
  if (ctx.input(1)) {
    FailureOr<SmallVector<int64_t>> values = ctx.constantInts(1, "k");
    if (failed(values))
      return failure();
    k = values->empty() ? 0 : values->front();
  }
  return produce(
      results,
      ctx.create<nn::TriluOp>(
          ctx.input(0), {ctx.boolAttr("upper", ctx.intAttr("upper", 1) != 0),
                         ctx.i64Attr("diagonal", k)}));
}

} // namespace

void onnx_to_nn::addShapeConverters(ConverterRegistry &registry) {
  registry.addSince("Reshape", 5, convertReshape);
  registry.addSince("Transpose", 1, convertTranspose);
  registry.addSince("Flatten", 1, convertFlatten);
  registry.addSince("Squeeze", 1, convertSqueeze);
  registry.addSince("Unsqueeze", 1, convertUnsqueeze);
  registry.addSince("Concat", 4, convertConcat);
  registry.addSince("Split", 2, convertSplit);
  registry.addSince("Slice", 1, convertSlice);
  registry.addSince("Gather", 1, convertGather);
  registry.addSince("Expand", 8, convertExpand);
  registry.addSince("Tile", 6, convertTile);
  registry.addSince("Resize", 11, convertResize);
  registry.addSince("Shape", 1, convertShape);
  registry.addSince("Size", 1, convertSize);
  registry.addSince("Constant", 1, convertConstant);
  registry.addSince("ConstantOfShape", 9, convertConstantOfShape);
  registry.addSince("Range", 11, convertRange);
  registry.addSince("Trilu", 14, convertTrilu);
}
