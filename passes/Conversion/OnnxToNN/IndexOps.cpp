//===- IndexOps.cpp - ONNX's indexing operators to nn ---------------------===//
//
// Converters for the operators that read or write elements at computed
// positions: GatherElements, GatherND, ScatterElements, ScatterND, Pad and
// CumSum. None is an nn op of its own. The gathers and scatters become
// `nn.gather` / `nn.scatter_add` along axis 0 of the flattened data, at a
// linear index built from the ONNX indices with integer arithmetic (the
// coordinate grids, fixed by the static shapes, are constants); their
// gradients are the existing ones of gather and scatter_add. An index
// outside its dimension is mapped outside the flattened data, so the
// kernels' range check reports it at run time rather than reading a
// neighbouring row. Pad is slices, concatenations and gathers with constant
// index vectors; CumSum is a log-step scan of shifted additions, exact for
// integers (position ids).
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/OnnxToNN/NodeConverter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::onnx_to_nn;

namespace {

/// Row-major strides of `shape`.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// `value` with indices normalized: negative ones count from `dims` (a
/// scalar or a tensor broadcasting against `value`), and any outside
/// [0, dims) replaced by `outside` (the same).
Value normalizeIndices(NodeContext &ctx, Value value, Value dims,
                       Value outside) {
  Type i64 = ctx.b.getI64Type();
  Value zero = ctx.scalar(i64, 0);
  Value negative = ctx.create<nn::LessOp>({value, zero});
  Value shifted = negative ? ctx.create<nn::AddOp>({value, dims}) : nullptr;
  Value index =
      shifted ? ctx.create<nn::WhereOp>({negative, shifted, value}) : nullptr;
  Value below = index ? ctx.create<nn::LessOp>({index, zero}) : nullptr;
  Value inside = below ? ctx.create<nn::LessOp>({index, dims}) : nullptr;
  Value notBelow = inside ? ctx.create<nn::NotOp>(below) : nullptr;
  Value valid = notBelow ? ctx.create<nn::AndOp>({notBelow, inside}) : nullptr;
  return valid ? ctx.create<nn::WhereOp>({valid, index, outside}) : nullptr;
}

/// The most index positions whose coordinate grid is built as a constant
/// (2^24: positions, not data).
constexpr int64_t kMaxIndexPositions = int64_t(1) << 24;

/// Refuses an index grid beyond kMaxIndexPositions, naming its size.
LogicalResult checkIndexPositions(NodeContext &ctx, int64_t positions) {
  if (positions > kMaxIndexPositions)
    return ctx.error() << "indices address " << positions
                       << " positions; ztc builds their coordinates as a "
                          "constant of at most "
                       << kMaxIndexPositions;
  return success();
}

/// An index whose product with `stride` reaches `total` (past data of
/// `total` elements) without overflowing. A stride of 0 only comes with
/// empty data, where every index is outside.
int64_t outsideIndex(int64_t total, int64_t stride) {
  return stride > 0 ? (total + stride - 1) / stride : total;
}

/// The linear index into the flattened `dataShape` of GatherElements and
/// ScatterElements: `indices` (any shape of the data's rank) along `axis`,
/// every other dimension its own coordinate.
Value elementsIndex(NodeContext &ctx, Value indices,
                    ArrayRef<int64_t> dataShape, int64_t axis) {
  Type i64 = ctx.b.getI64Type();
  auto type = cast<RankedTensorType>(indices.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t total = product(dataShape);
  SmallVector<int64_t> dataStrides = stridesOf(dataShape);
  if (failed(checkIndexPositions(ctx, product(shape))))
    return nullptr;
  // The coordinates' contribution, every dimension but `axis`.
  SmallVector<int64_t> offsets(product(shape), 0);
  SmallVector<int64_t> indexStrides = stridesOf(shape);
  for (int64_t p = 0, e = offsets.size(); p < e; ++p)
    for (int64_t d = 0, r = shape.size(); d < r; ++d)
      if (d != axis)
        offsets[p] += (p / indexStrides[d]) % shape[d] * dataStrides[d];
  Value index = ctx.castTo(indices, i64);
  // An index outside its dimension becomes one that, times the stride,
  // leaves [0, total) (without overflowing).
  int64_t stride = dataStrides[axis];
  Value normalized =
      index ? normalizeIndices(ctx, index, ctx.scalar(i64, dataShape[axis]),
                               ctx.scalar(i64, outsideIndex(total, stride)))
            : nullptr;
  Value scaled =
      normalized && stride != 1
          ? ctx.create<nn::MulOp>({normalized, ctx.scalar(i64, stride)})
          : normalized;
  return scaled
             ? ctx.create<nn::AddOp>({scaled, ctx.i64Constant(shape, offsets)})
             : nullptr;
}

/// The linear index of ScatterND and GatherND: the last dimension of
/// `indices` (k entries) addresses the data's dimensions `batchDims` to
/// `batchDims + k`, within the batch the first `batchDims` dimensions of
/// the index position select. The result has `indices.shape[:-1]` and
/// addresses the data reshaped to `[prod(shape[:batchDims + k]), rest...]`.
Value ndIndex(NodeContext &ctx, Value indices, ArrayRef<int64_t> dataShape,
              int64_t batchDims) {
  Type i64 = ctx.b.getI64Type();
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(indices.getType()).getShape();
  int64_t k = shape.back();
  SmallVector<int64_t> outer(shape.drop_back());
  ArrayRef<int64_t> addressed = dataShape.slice(batchDims, k);
  int64_t block = product(addressed);
  int64_t total = product(dataShape.take_front(batchDims + k));
  SmallVector<int64_t> strides = stridesOf(addressed);
  Value index = ctx.castTo(indices, i64);
  if (!index)
    return nullptr;
  // Entry j is bounded by dimension batchDims + j; an entry outside it
  // becomes one whose term reaches `total`, which with every other term
  // non-negative puts the sum past the data.
  SmallVector<int64_t> outside;
  for (int64_t stride : strides)
    outside.push_back(outsideIndex(total, stride));
  Value normalized = normalizeIndices(
      ctx, index, ctx.i64Constant({k}, SmallVector<int64_t>(addressed)),
      ctx.i64Constant({k}, outside));
  Value linear;
  for (int64_t j = 0; normalized && j < k; ++j) {
    Value column = ctx.sliceAlong(normalized, shape.size() - 1, j, 1);
    column = column ? ctx.reshape(column, outer) : nullptr;
    Value term =
        column && strides[j] != 1
            ? ctx.create<nn::MulOp>({column, ctx.scalar(i64, strides[j])})
            : column;
    if (!term)
      return nullptr;
    linear = linear ? ctx.create<nn::AddOp>({linear, term}) : term;
  }
  if (!normalized || !linear)
    return k == 0
               ? ctx.i64Constant(outer, SmallVector<int64_t>(product(outer), 0))
               : nullptr;
  if (batchDims == 0)
    return linear;
  // Each index position's batch, from its first batchDims coordinates.
  if (failed(checkIndexPositions(ctx, product(outer))))
    return nullptr;
  SmallVector<int64_t> offsets(product(outer), 0);
  SmallVector<int64_t> outerStrides = stridesOf(outer);
  for (int64_t p = 0, e = offsets.size(); p < e; ++p) {
    int64_t batch = 0;
    for (int64_t d = 0; d < batchDims; ++d)
      batch = batch * shape[d] + (p / outerStrides[d]) % shape[d];
    offsets[p] = batch * block;
  }
  return ctx.create<nn::AddOp>({linear, ctx.i64Constant(outer, offsets)});
}

/// ONNX's indices are int32 or int64.
LogicalResult checkIndexType(NodeContext &ctx) {
  Type elem = ctx.inputType(1).getElementType();
  if (!elem.isInteger(32) && !elem.isInteger(64))
    return ctx.error() << "indices must be int32 or int64, got " << elem;
  return success();
}

/// The axis of GatherElements and ScatterElements, whose indices may not
/// be larger than the data along any other dimension.
FailureOr<int64_t> elementsAxis(NodeContext &ctx, RankedTensorType dataType,
                                RankedTensorType indexType) {
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.intAttr("axis", 0), dataType.getRank());
  if (failed(axis))
    return failure();
  for (int64_t d = 0; d < dataType.getRank(); ++d)
    if (d != *axis && indexType.getDimSize(d) > dataType.getDimSize(d)) {
      ctx.error() << "indices dimension " << d << " is "
                  << indexType.getDimSize(d) << ", more than data's "
                  << dataType.getDimSize(d);
      return failure();
    }
  return axis;
}

/// GatherElements' and ScatterElements' data flattened and the linear
/// index into it (the axis checked as elementsAxis does); nulls after an
/// error.
std::pair<Value, Value> flatElements(NodeContext &ctx) {
  RankedTensorType dataType = ctx.inputType(0), indexType = ctx.inputType(1);
  FailureOr<int64_t> axis = elementsAxis(ctx, dataType, indexType);
  if (failed(axis))
    return {};
  Value linear = elementsIndex(ctx, ctx.input(1), dataType.getShape(), *axis);
  Value flat =
      linear ? ctx.reshape(ctx.input(0), {dataType.getNumElements()}) : nullptr;
  return {flat, linear};
}

LogicalResult convertGatherElements(NodeContext &ctx,
                                    SmallVectorImpl<Value> &results) {
  if (failed(checkIndexType(ctx)))
    return failure();
  RankedTensorType dataType = ctx.inputType(0), indexType = ctx.inputType(1);
  if (indexType.getRank() != dataType.getRank())
    return ctx.error() << "indices have rank " << indexType.getRank()
                       << " but data has rank " << dataType.getRank();
  if (dataType.getNumElements() == 0 && indexType.getNumElements() > 0)
    return ctx.error() << "gathers from empty data";
  auto [flat, linear] = flatElements(ctx);
  return produce(results, flat ? ctx.create<nn::GatherOp>(
                                     {flat, linear}, {ctx.i64Attr("axis", 0)})
                               : nullptr);
}

LogicalResult convertGatherND(NodeContext &ctx,
                              SmallVectorImpl<Value> &results) {
  if (failed(checkIndexType(ctx)))
    return failure();
  RankedTensorType dataType = ctx.inputType(0), indexType = ctx.inputType(1);
  ArrayRef<int64_t> dataShape = dataType.getShape(),
                    indexShape = indexType.getShape();
  int64_t batchDims = ctx.intAttr("batch_dims", 0);
  int64_t rank = dataShape.size();
  if (indexShape.empty())
    return ctx.error() << "indices must have rank 1 or more";
  int64_t k = indexShape.back();
  if (batchDims < 0 || batchDims >= std::min<int64_t>(rank, indexShape.size()))
    return ctx.error() << "batch_dims " << batchDims
                       << " must be less than the ranks of data (" << rank
                       << ") and indices (" << indexShape.size() << ")";
  if (k < 1 || k > rank - batchDims)
    return ctx.error() << "the last dimension of indices is " << k
                       << ", expected 1 to " << rank - batchDims
                       << " (data rank minus batch_dims)";
  for (int64_t d = 0; d < batchDims; ++d)
    if (indexShape[d] != dataShape[d])
      return ctx.error() << "batch dimension " << d << " is " << indexShape[d]
                         << " in indices but " << dataShape[d] << " in data";
  SmallVector<int64_t> flatShape{product(dataShape.take_front(batchDims + k))};
  llvm::append_range(flatShape, dataShape.drop_front(batchDims + k));
  if (flatShape.front() == 0 && indexType.getNumElements() > 0)
    return ctx.error() << "gathers from empty data";
  Value linear = ndIndex(ctx, ctx.input(1), dataShape, batchDims);
  Value flat = linear ? ctx.reshape(ctx.input(0), flatShape) : nullptr;
  return produce(results, flat ? ctx.create<nn::GatherOp>(
                                     {flat, linear}, {ctx.i64Attr("axis", 0)})
                               : nullptr);
}

/// `value`'s shape with `axis` of size `size`, filled with `fill` (rank 0).
Value filled(NodeContext &ctx, Value value, int64_t axis, int64_t size,
             Value fill) {
  SmallVector<int64_t> shape(
      cast<RankedTensorType>(value.getType()).getShape());
  shape[axis] = size;
  return ctx.create<nn::BroadcastToOp>(fill,
                                       {ctx.i64ArrayAttr("shape", shape)});
}

/// The identity of a max (`lowest`) or min reduction over `elem`: -inf
/// or +inf, or an integer type's extreme.
Value extreme(NodeContext &ctx, Type elem, bool lowest) {
  auto type = RankedTensorType::get({}, elem);
  if (auto floatType = dyn_cast<FloatType>(elem))
    return arith::ConstantOp::create(
        ctx.b, ctx.loc,
        DenseElementsAttr::get(
            type, APFloat::getInf(floatType.getFloatSemantics(), lowest)));
  unsigned width = elem.getIntOrFloatBitWidth();
  return arith::ConstantOp::create(
      ctx.b, ctx.loc,
      DenseElementsAttr::get(type, lowest ? APInt::getSignedMinValue(width)
                                          : APInt::getSignedMaxValue(width)));
}

/// Reductions mul, max and min: each update is matched with every row of
/// the flattened data through a one-hot [U, rows] (U positions of
/// `linear`), the updates at each row combined (a tree of products, or the
/// largest or smallest), then combined with the data where a row was hit.
/// Repeated indices thus combine as ONNX applies them, one after another.
/// `hit` (from scatter_add, whose kernel checks the range) marks the rows.
Value scatterReduce(NodeContext &ctx, Value flat, Value linear, Value updates,
                    Value hit, StringRef reduction) {
  auto type = cast<RankedTensorType>(flat.getType());
  Type elem = type.getElementType();
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rows = shape[0];
  int64_t positions = cast<RankedTensorType>(linear.getType()).getNumElements();
  if (positions == 0)
    return flat;
  // Divided, not multiplied: each side may be up to 2^48 elements.
  if (positions >
      kMaxIndexPositions / std::max<int64_t>(1, type.getNumElements())) {
    ctx.error() << "reduction '" << reduction << "' matches " << positions
                << " updates with " << type.getNumElements()
                << " data elements, more pairs than ztc builds ("
                << kMaxIndexPositions << ")";
    return nullptr;
  }
  SmallVector<int64_t> iota = llvm::to_vector(llvm::seq<int64_t>(0, rows));
  Value column = ctx.reshape(linear, {positions, 1});
  Value onehot =
      column
          ? ctx.create<nn::EqualOp>({column, ctx.i64Constant({1, rows}, iota)})
          : nullptr;
  // [U, rows, inner...] against updates [U, 1, inner...].
  SmallVector<int64_t> maskShape{positions, rows}, updateShape{positions, 1};
  for (int64_t dim : shape.drop_front()) {
    maskShape.push_back(1);
    updateShape.push_back(dim);
  }
  Value mask = onehot ? ctx.reshape(onehot, maskShape) : nullptr;
  Value spread = mask ? ctx.reshape(updates, updateShape) : nullptr;
  Value identity = reduction == "mul" ? ctx.scalar(elem, 1.0)
                                      : extreme(ctx, elem, reduction == "max");
  Value candidates =
      spread ? ctx.create<nn::WhereOp>({mask, spread, identity}) : nullptr;
  if (!candidates)
    return nullptr;
  Value combined;
  if (reduction == "mul") {
    // Halve axis 0 until one row is left (an odd row out takes a 1).
    while (candidates && positions > 1) {
      if (positions % 2) {
        Value one = filled(ctx, candidates, 0, 1, identity);
        candidates = one ? ctx.create<nn::ConcatOp>({candidates, one},
                                                    {ctx.i64Attr("axis", 0)})
                         : nullptr;
        ++positions;
      }
      Value low = candidates ? ctx.sliceAlong(candidates, 0, 0, positions / 2)
                             : nullptr;
      Value high =
          low ? ctx.sliceAlong(candidates, 0, positions / 2, positions / 2)
              : nullptr;
      candidates = high ? ctx.create<nn::MulOp>({low, high}) : nullptr;
      positions /= 2;
    }
    Value product = candidates ? ctx.reshape(candidates, shape) : nullptr;
    combined = product ? ctx.create<nn::MulOp>({flat, product}) : nullptr;
  } else {
    // min(x) = -max(-x).
    bool max = reduction == "max";
    Value signedCandidates =
        max ? candidates : ctx.create<nn::NegOp>(candidates);
    Value top = signedCandidates
                    ? ctx.create<nn::ReduceMaxOp>(
                          signedCandidates, {ctx.i64ArrayAttr("axes", {0}),
                                             ctx.boolAttr("keepdims", false)})
                    : nullptr;
    Value best = top && !max ? ctx.create<nn::NegOp>(top) : top;
    combined = best ? (max ? ctx.create<nn::MaxOp>({flat, best})
                           : ctx.create<nn::MinOp>({flat, best}))
                    : nullptr;
  }
  return combined ? ctx.create<nn::WhereOp>({hit, combined, flat}) : nullptr;
}

/// `data` (flattened as `linear` addresses it) with `updates` written at
/// `linear` along axis 0: added for reduction "add", replacing for "none",
/// combined for "mul", "max" and "min" (scatterReduce). Repeated indices
/// with "none" are undefined in ONNX; here they sum.
Value scatter(NodeContext &ctx, Value flat, Value linear, Value updates,
              StringRef reduction) {
  if (reduction == "add")
    return ctx.create<nn::ScatterAddOp>({flat, linear, updates},
                                        {ctx.i64Attr("axis", 0)});
  auto type = cast<RankedTensorType>(flat.getType());
  Type elem = type.getElementType();
  auto zeros = [&](RankedTensorType like) {
    return ctx.create<nn::BroadcastToOp>(
        ctx.scalar(elem, 0.0), {ctx.i64ArrayAttr("shape", like.getShape())});
  };
  auto updateType = cast<RankedTensorType>(updates.getType());
  // Reduction none: the updates summed where they land, then selected.
  Value written;
  if (reduction == "none" &&
      !(written = ctx.create<nn::ScatterAddOp>({zeros(type), linear, updates},
                                               {ctx.i64Attr("axis", 0)})))
    return nullptr;
  Value ones = ctx.create<nn::BroadcastToOp>(
      ctx.scalar(elem, 1.0),
      {ctx.i64ArrayAttr("shape", updateType.getShape())});
  Value counts = ones
                     ? ctx.create<nn::ScatterAddOp>({zeros(type), linear, ones},
                                                    {ctx.i64Attr("axis", 0)})
                     : nullptr;
  Value hit = counts
                  ? ctx.create<nn::GreaterOp>({counts, ctx.scalar(elem, 0.0)})
                  : nullptr;
  if (!hit)
    return nullptr;
  if (reduction != "none")
    return scatterReduce(ctx, flat, linear, updates, hit, reduction);
  return ctx.create<nn::WhereOp>({hit, written, flat});
}

/// ScatterElements' and ScatterND's `reduction` ("none" before opset 16),
/// after checking the element types of data and updates.
FailureOr<std::string> scatterReduction(NodeContext &ctx) {
  if (ctx.inputType(0).getElementType().isInteger(1)) {
    ctx.error() << "scattering into bool data is not supported";
    return failure();
  }
  if (ctx.inputType(2).getElementType() != ctx.inputType(0).getElementType()) {
    ctx.error() << "updates and data differ in element type";
    return failure();
  }
  std::string reduction = ctx.stringAttr("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" &&
      reduction != "max" && reduction != "min") {
    ctx.error() << "reduction '" << reduction
                << "' is not one of none, add, mul, max, min";
    return failure();
  }
  return reduction;
}

LogicalResult convertScatterElements(NodeContext &ctx,
                                     SmallVectorImpl<Value> &results) {
  if (failed(checkIndexType(ctx)))
    return failure();
  RankedTensorType dataType = ctx.inputType(0), indexType = ctx.inputType(1),
                   updateType = ctx.inputType(2);
  FailureOr<std::string> reduction = scatterReduction(ctx);
  if (failed(reduction))
    return failure();
  if (indexType.getRank() != dataType.getRank() ||
      updateType.getShape() != indexType.getShape())
    return ctx.error() << "indices " << indexType << " and updates "
                       << updateType
                       << " must have the same shape, of data's rank "
                       << dataType.getRank();
  auto [flat, linear] = flatElements(ctx);
  Value scattered =
      flat ? scatter(ctx, flat, linear, ctx.input(2), *reduction) : nullptr;
  return produce(results, scattered
                              ? ctx.reshape(scattered, dataType.getShape())
                              : nullptr);
}

LogicalResult convertScatterND(NodeContext &ctx,
                               SmallVectorImpl<Value> &results) {
  if (failed(checkIndexType(ctx)))
    return failure();
  RankedTensorType dataType = ctx.inputType(0), indexType = ctx.inputType(1),
                   updateType = ctx.inputType(2);
  FailureOr<std::string> reduction = scatterReduction(ctx);
  if (failed(reduction))
    return failure();
  ArrayRef<int64_t> dataShape = dataType.getShape(),
                    indexShape = indexType.getShape();
  if (indexShape.empty())
    return ctx.error() << "indices must have rank 1 or more";
  int64_t k = indexShape.back(), rank = dataShape.size();
  if (k < 1 || k > rank)
    return ctx.error() << "the last dimension of indices is " << k
                       << ", expected 1 to " << rank << " (data's rank)";
  SmallVector<int64_t> expected(indexShape.drop_back());
  llvm::append_range(expected, dataShape.drop_front(k));
  if (updateType.getShape() != ArrayRef<int64_t>(expected))
    return ctx.error() << "updates are " << updateType << ", expected "
                       << RankedTensorType::get(expected,
                                                updateType.getElementType());
  SmallVector<int64_t> flatShape{product(dataShape.take_front(k))};
  llvm::append_range(flatShape, dataShape.drop_front(k));
  Value linear = ndIndex(ctx, ctx.input(1), dataShape, 0);
  Value flat = linear ? ctx.reshape(ctx.input(0), flatShape) : nullptr;
  Value scattered =
      flat ? scatter(ctx, flat, linear, ctx.input(2), *reduction) : nullptr;
  return produce(results,
                 scattered ? ctx.reshape(scattered, dataShape) : nullptr);
}

/// The largest padded dimension Pad builds an index vector for.
constexpr int64_t kMaxPaddedDim = int64_t(1) << 24;

LogicalResult convertPad(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  RankedTensorType type = ctx.inputType(0);
  int64_t rank = type.getRank();
  Type elem = type.getElementType();
  std::string mode = ctx.stringAttr("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      !(mode == "wrap" && ctx.since >= 19))
    return ctx.error() << "mode '" << mode << "' is not one of constant, "
                       << "reflect, edge" << (ctx.since >= 19 ? ", wrap" : "");
  SmallVector<int64_t> pads;
  Value fill;
  if (ctx.since < 11) {
    std::optional<SmallVector<int64_t>> attr = ctx.intsAttr("pads");
    if (!attr)
      return ctx.error() << "pads is required";
    pads = *attr;
    fill = ctx.scalar(elem, ctx.floatAttr("value", 0.0));
  } else {
    FailureOr<SmallVector<int64_t>> values = ctx.constantInts(1, "pads");
    if (failed(values))
      return failure();
    pads = *values;
    if (Value value = ctx.input(2)) {
      auto valueType = cast<RankedTensorType>(value.getType());
      if (valueType.getNumElements() != 1 || valueType.getElementType() != elem)
        return ctx.error() << "constant_value must be one element of the "
                              "data's type, got "
                           << valueType;
      fill = ctx.reshape(value, {});
    } else {
      fill = ctx.scalar(elem, 0.0);
    }
  }
  // The axes the pads apply to: every one, or input 3 (opset 18).
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (ctx.since >= 18 && ctx.input(3)) {
    FailureOr<SmallVector<int64_t>> listed = ctx.constantInts(3, "axes");
    if (failed(listed))
      return failure();
    axes.clear();
    for (int64_t axis : *listed) {
      FailureOr<int64_t> normalized =
          ctx.normalizeAxis(axis, rank, "axes entry");
      if (failed(normalized))
        return failure();
      if (llvm::is_contained(axes, *normalized))
        return ctx.error() << "axis " << axis << " is listed twice";
      axes.push_back(*normalized);
    }
  }
  int64_t count = axes.size();
  if (int64_t(pads.size()) != 2 * count)
    return ctx.error() << "pads has " << pads.size() << " entries, expected "
                       << 2 * count << " (a begin and an end per axis)";
  if (!fill)
    return failure();
  Value x = ctx.input(0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t axis = axes[i], begin = pads[i], end = pads[i + count];
    int64_t dim = cast<RankedTensorType>(x.getType()).getDimSize(axis);
    // Bounded first, so that the sums below cannot overflow.
    if (begin > kMaxPaddedDim || end > kMaxPaddedDim)
      return ctx.error() << "pads " << begin << " and " << end << " on axis "
                         << axis << " exceed " << kMaxPaddedDim;
    // Negative pads crop first.
    if (begin < -dim || end < -dim || begin + end < -dim)
      return ctx.error() << "pads " << begin << " and " << end
                         << " remove more than the " << dim
                         << " elements of axis " << axis;
    if (begin < 0 || end < 0) {
      int64_t from = std::max<int64_t>(0, -begin);
      int64_t size = dim - from - std::max<int64_t>(0, -end);
      if (!(x = ctx.sliceAlong(x, axis, from, size)))
        return failure();
      dim = size;
      begin = std::max<int64_t>(0, begin);
      end = std::max<int64_t>(0, end);
    }
    if (begin == 0 && end == 0)
      continue;
    if (mode == "constant") {
      SmallVector<Value> parts;
      if (begin)
        parts.push_back(filled(ctx, x, axis, begin, fill));
      parts.push_back(x);
      if (end)
        parts.push_back(filled(ctx, x, axis, end, fill));
      if (llvm::is_contained(parts, Value()))
        return failure();
      if (!(x = ctx.create<nn::ConcatOp>(parts, {ctx.i64Attr("axis", axis)})))
        return failure();
      continue;
    }
    if (dim == 0)
      return ctx.error() << "mode '" << mode << "' cannot pad axis " << axis
                         << ", which is empty";
    // The gathered positions are a constant of the padded size.
    if (dim + begin + end > kMaxPaddedDim)
      return ctx.error() << "mode '" << mode << "' pads axis " << axis << " to "
                         << dim + begin + end << " elements, more than "
                         << kMaxPaddedDim;
    SmallVector<int64_t> positions;
    for (int64_t j = -begin; j < dim + end; ++j) {
      int64_t at;
      if (mode == "edge") {
        at = std::clamp<int64_t>(j, 0, dim - 1);
      } else if (mode == "wrap") {
        at = ((j % dim) + dim) % dim;
      } else if (dim == 1) {
        at = 0;
      } else {
        // Reflect about the first and last elements, which are not
        // repeated: period 2 (dim - 1), reflecting again past the far end
        // as numpy.pad (ONNX's reference) does.
        int64_t period = 2 * (dim - 1);
        at = ((j % period) + period) % period;
        if (at >= dim)
          at = period - at;
      }
      positions.push_back(at);
    }
    Value index = ctx.i64Constant({int64_t(positions.size())}, positions);
    if (!(x = ctx.create<nn::GatherOp>({x, index},
                                       {ctx.i64Attr("axis", axis)})))
      return failure();
  }
  return produce(results, x);
}

/// CumSum along a constant axis: y_i = x_0 + ... + x_i (`exclusive`: up to
/// x_{i-1}; `reverse`: from the end), as a Hillis-Steele scan: log2(n)
/// additions of the running sums shifted by 1, 2, 4, ... elements.
LogicalResult convertCumSum(NodeContext &ctx, SmallVectorImpl<Value> &results) {
  RankedTensorType type = ctx.inputType(0);
  FailureOr<SmallVector<int64_t>> axisValues = ctx.constantInts(1, "axis");
  if (failed(axisValues))
    return failure();
  if (axisValues->size() != 1)
    return ctx.error() << "axis must be one integer, got "
                       << axisValues->size();
  if (type.getRank() == 0)
    return ctx.error() << "x must have rank 1 or more";
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(axisValues->front(), type.getRank());
  if (failed(axis))
    return failure();
  if (type.getElementType().isInteger(1))
    return ctx.error() << "cannot sum bool elements";
  bool exclusive = ctx.intAttr("exclusive", 0) != 0;
  bool reverse = ctx.intAttr("reverse", 0) != 0;
  int64_t n = type.getDimSize(*axis);
  Value zero = ctx.scalar(type.getElementType(), 0.0);
  // `value` moved `by` elements toward the end (or the start, reversed),
  // zeros filling in.
  auto shift = [&](Value value, int64_t by) -> Value {
    if (by >= n)
      return filled(ctx, value, *axis, n, zero);
    Value kept = ctx.sliceAlong(value, *axis, reverse ? by : 0, n - by);
    Value pad = kept ? filled(ctx, value, *axis, by, zero) : nullptr;
    if (!pad)
      return nullptr;
    SmallVector<Value> parts =
        reverse ? SmallVector<Value>{kept, pad} : SmallVector<Value>{pad, kept};
    return ctx.create<nn::ConcatOp>(parts, {ctx.i64Attr("axis", *axis)});
  };
  Value y = ctx.input(0);
  if (exclusive && n > 0)
    y = shift(y, 1);
  for (int64_t by = 1; y && by < n; by *= 2) {
    Value moved = shift(y, by);
    y = moved ? ctx.create<nn::AddOp>({y, moved}) : nullptr;
  }
  return produce(results, y);
}

} // namespace

void onnx_to_nn::addIndexConverters(ConverterRegistry &registry) {
  registry.addSince("GatherElements", 11, convertGatherElements);
  registry.addSince("GatherND", 11, convertGatherND);
  registry.addSince("ScatterElements", 11, convertScatterElements);
  registry.addSince("ScatterND", 11, convertScatterND);
  registry.addSince("Pad", 2, convertPad);
  registry.addSince("CumSum", 11, convertCumSum);
}
