//===- NNOps.cpp - nn dialect -----------------------------------*- C++ -*-===//
//
// Registration, result-type inference, verifiers and folders of the nn
// dialect. Inference doubles as verification: it runs on every op after the
// ODS type constraints and rejects inconsistent shapes and attributes with a
// message. Folding evaluates small constant computations through a few shared
// helpers: an index-mapping helper (which element of an input feeds each
// output element) serves all data-movement folds, and one elementwise helper
// with broadcasting serves all arithmetic folds.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"
#include "dialects/ElementTypes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/APSInt.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>
#include <numeric>
#include <optional>
#include <type_traits>

using namespace mlir;
using namespace mlir::ztc::nn;

#include "dialects/NN/IR/NNOpsDialect.cpp.inc"

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/NN/IR/NNOps.cpp.inc"
      >();
}

Operation *NNDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}

//===----------------------------------------------------------------------===//
// Inference helpers
//===----------------------------------------------------------------------===//

/// Reports an inference failure of op `opName` at `loc` (if any), in the same
/// "'nn.op' op ..." form as verifier errors.
template <typename... Args>
static LogicalResult inferError(std::optional<Location> loc, StringRef opName,
                                Args &&...args) {
  return emitOptionalError(loc, "'", opName, "' op ",
                           std::forward<Args>(args)...);
}

/// The type of a tensor operand; ODS constraints guarantee it is ranked.
static RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Checks that `type` has the element type of `reference`.
static LogicalResult checkElementType(std::optional<Location> loc,
                                      StringRef opName, StringRef name,
                                      RankedTensorType type,
                                      RankedTensorType reference) {
  if (type.getElementType() == reference.getElementType())
    return success();
  return inferError(loc, opName, "expects ", name, " element type ",
                    reference.getElementType(), ", got ", type);
}

/// Checks that `type` has rank `rank`; `layout` names the dimensions.
static LogicalResult checkRank(std::optional<Location> loc, StringRef opName,
                               StringRef name, RankedTensorType type,
                               int64_t rank, StringRef layout) {
  if (type.getRank() == rank)
    return success();
  return inferError(loc, opName, "expects ", name, " of rank ", rank, " (",
                    layout, "), got ", type);
}

/// Checks that `type` has rank at least `rank`; `layout` names the
/// dimensions.
static LogicalResult checkMinRank(std::optional<Location> loc, StringRef opName,
                                  StringRef name, RankedTensorType type,
                                  int64_t rank, StringRef layout) {
  if (type.getRank() >= rank)
    return success();
  return inferError(loc, opName, "expects ", name, " of rank at least ", rank,
                    " (", layout, "), got ", type);
}

/// Checks that the array attribute `name` has `size` entries, each at least
/// `minValue`.
static LogicalResult checkArray(std::optional<Location> loc, StringRef opName,
                                StringRef name, ArrayRef<int64_t> values,
                                size_t size, int64_t minValue) {
  if (values.size() != size)
    return inferError(loc, opName, "expects '", name, "' to have ", size,
                      " entries, got ", values.size());
  if (llvm::any_of(values, [&](int64_t v) { return v < minValue; }))
    return inferError(loc, opName, "expects '", name,
                      "' entries to be at least ", minValue, ", got [", values,
                      "]");
  return success();
}

/// Checks that `axis` is a dimension of a rank-`rank` tensor.
static LogicalResult checkAxis(std::optional<Location> loc, StringRef opName,
                               int64_t axis, int64_t rank) {
  if (axis >= 0 && axis < rank)
    return success();
  return inferError(loc, opName, "expects axis in [0, ", rank, "), got ", axis);
}

/// Result type of the broadcasting binary ops (see NN_BinaryOp): the operands
/// share an element type and their shapes broadcast numpy-style.
static LogicalResult inferBroadcastBinary(std::optional<Location> loc,
                                          StringRef opName, Value lhs,
                                          Value rhs, bool boolResult,
                                          SmallVectorImpl<Type> &types) {
  RankedTensorType lhsType = tensorType(lhs), rhsType = tensorType(rhs);
  if (failed(checkElementType(loc, opName, "rhs", rhsType, lhsType)))
    return failure();
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(lhsType.getShape(),
                                          rhsType.getShape(), shape))
    return inferError(loc, opName, "operands ", lhsType, " and ", rhsType,
                      " are not broadcastable");
  Type element = boolResult ? IntegerType::get(lhs.getContext(), 1)
                            : lhsType.getElementType();
  types.push_back(RankedTensorType::get(shape, element));
  return success();
}

/// Result type of the reductions (see NN_ReduceOp): `axes` are strictly
/// increasing dimensions of `x`, kept as size 1 or dropped.
static LogicalResult inferReduction(std::optional<Location> loc,
                                    StringRef opName, Value x,
                                    ArrayRef<int64_t> axes, bool keepdims,
                                    SmallVectorImpl<Type> &types) {
  RankedTensorType type = tensorType(x);
  for (auto [i, axis] : llvm::enumerate(axes)) {
    if (axis < 0 || axis >= type.getRank())
      return inferError(loc, opName, "expects axes in [0, ", type.getRank(),
                        "), got [", axes, "]");
    if (i > 0 && axes[i - 1] >= axis)
      return inferError(loc, opName, "expects strictly increasing axes, got [",
                        axes, "]");
  }
  SmallVector<int64_t> shape;
  for (auto [dim, size] : llvm::enumerate(type.getShape())) {
    if (!llvm::is_contained(axes, static_cast<int64_t>(dim)))
      shape.push_back(size);
    else if (keepdims)
      shape.push_back(1);
  }
  types.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

/// Result type of softmax-like ops: `x`'s type, with `axis` a dimension.
static LogicalResult inferAlongAxis(std::optional<Location> loc,
                                    StringRef opName, Value x, int64_t axis,
                                    SmallVectorImpl<Type> &types) {
  RankedTensorType type = tensorType(x);
  if (failed(checkAxis(loc, opName, axis, type.getRank())))
    return failure();
  types.push_back(type);
  return success();
}

/// Output size of a sliding window along one dimension (convolution and
/// pooling): `input` padded by `padBefore` and `padAfter`, a window spanning
/// `extent` elements (dilation applied), moved by `stride`, over `padded`
/// elements (the input and both pads) of which the first `paddedBefore` are
/// the left padding and the input. In ceil mode a last window starting past
/// them is dropped (the ONNX and PyTorch rule). Returns std::nullopt when
/// the window does not fit.
static std::optional<int64_t> windowOutputSize(int64_t padded,
                                               int64_t paddedBefore,
                                               int64_t extent, int64_t stride,
                                               bool ceilMode) {
  if (padded < extent)
    return std::nullopt;
  int64_t span = padded - extent;
  int64_t size =
      (ceilMode ? llvm::divideCeil(span, stride) : span / stride) + 1;
  if (ceilMode && (size - 1) * stride >= paddedBefore)
    --size;
  return size;
}

/// The elements a window of `kernel` elements spans with `dilation`, or
/// nothing when that overflows (attributes come from model files).
static std::optional<int64_t> dilatedExtent(int64_t dilation, int64_t kernel) {
  std::optional<int64_t> extent = llvm::checkedMul(dilation, kernel - 1);
  return extent ? llvm::checkedAdd(*extent, int64_t(1)) : std::nullopt;
}

/// Spatial output sizes of a 2-D window op over `[N, C, H, W]` `input` whose
/// attributes are already checked; fails if a dilated window is larger than
/// the padded input.
static LogicalResult
inferWindowShape(std::optional<Location> loc, StringRef opName,
                 RankedTensorType input, int64_t channels,
                 ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                 ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                 bool ceilMode, SmallVectorImpl<Type> &types) {
  SmallVector<int64_t> shape = {input.getDimSize(0), channels};
  for (int dim = 0; dim < 2; ++dim) {
    std::optional<int64_t> extent = dilatedExtent(dilations[dim], kernel[dim]);
    if (!extent)
      return inferError(loc, opName, "dilated kernel (dilation ",
                        dilations[dim], ", kernel ", kernel[dim],
                        ") overflows 64 bits");
    // Checked: pads come from model files.
    std::optional<int64_t> paddedBefore =
        llvm::checkedAdd(input.getDimSize(dim + 2), pads[dim]);
    std::optional<int64_t> padded =
        paddedBefore ? llvm::checkedAdd(*paddedBefore, pads[dim + 2])
                     : std::nullopt;
    if (!padded)
      return inferError(loc, opName, "pads [", pads, "] overflow 64 bits");
    std::optional<int64_t> size = windowOutputSize(
        *padded, *paddedBefore, *extent, strides[dim], ceilMode);
    if (!size)
      return inferError(loc, opName, "padded input ",
                        dim == 0 ? "height" : "width", " (", *padded,
                        ") is smaller than the dilated kernel (", *extent, ")");
    shape.push_back(*size);
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

/// Shared inference of the pooling ops: checks the window attributes (each
/// pad smaller than the dilated kernel, so every window overlaps the input)
/// and computes `[N, C, Ho, Wo]`.
static LogicalResult inferPool2d(
    std::optional<Location> loc, StringRef opName, RankedTensorType type,
    ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
    ArrayRef<int64_t> dilations, bool ceilMode, SmallVectorImpl<Type> &types) {
  if (failed(checkRank(loc, opName, "input", type, 4, "[N, C, H, W]")) ||
      failed(checkArray(loc, opName, "kernel", kernel, 2, 1)) ||
      failed(checkArray(loc, opName, "strides", strides, 2, 1)) ||
      failed(checkArray(loc, opName, "pads", pads, 4, 0)) ||
      failed(checkArray(loc, opName, "dilations", dilations, 2, 1)))
    return failure();
  for (int i = 0; i < 4; ++i) {
    std::optional<int64_t> extent =
        dilatedExtent(dilations[i % 2], kernel[i % 2]);
    if (!extent)
      return inferError(loc, opName, "dilated kernel (dilation ",
                        dilations[i % 2], ", kernel ", kernel[i % 2],
                        ") overflows 64 bits");
    if (pads[i] >= *extent)
      return inferError(loc, opName, "expects pads smaller than the ",
                        "dilated kernel (", *extent, "), got [", pads, "]");
  }
  return inferWindowShape(loc, opName, type, type.getDimSize(1), kernel,
                          strides, pads, dilations, ceilMode, types);
}

/// Checks the attributes every convolution op shares: `strides` and
/// `dilations` (`[h, w]`, at least 1), `pads` (`[top, left, bottom, right]`,
/// at least 0) and `group` (at least 1).
static LogicalResult
checkConvAttributes(std::optional<Location> loc, StringRef opName,
                    ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                    ArrayRef<int64_t> dilations, int64_t group) {
  if (failed(checkArray(loc, opName, "strides", strides, 2, 1)) ||
      failed(checkArray(loc, opName, "pads", pads, 4, 0)) ||
      failed(checkArray(loc, opName, "dilations", dilations, 2, 1)))
    return failure();
  if (group < 1)
    return inferError(loc, opName, "expects group at least 1, got ", group);
  return success();
}

/// Checks that `gradOutput` has the type `forward` of the result of the
/// forward op whose gradient a backward op computes.
static LogicalResult checkGradOutput(std::optional<Location> loc,
                                     StringRef opName, Type forward,
                                     RankedTensorType gradOutput) {
  if (forward == gradOutput)
    return success();
  return inferError(loc, opName, "expects grad_output of type ", forward,
                    " (the forward result), got ", gradOutput);
}

/// Checks a strided window of a tensor of shape `shape` (nn.slice and
/// nn.insert_slice): one start, size and step per dimension, non-negative
/// sizes, non-zero steps, and every index the window `access`es ("reads",
/// "writes") in range.
static LogicalResult checkStridedWindow(std::optional<Location> loc,
                                        StringRef opName, StringRef access,
                                        ArrayRef<int64_t> shape,
                                        ArrayRef<int64_t> starts,
                                        ArrayRef<int64_t> sizes,
                                        ArrayRef<int64_t> steps) {
  auto rank = static_cast<int64_t>(shape.size());
  for (auto [attrName, values] :
       {std::pair<StringRef, ArrayRef<int64_t>>{"starts", starts},
        {"sizes", sizes},
        {"steps", steps}})
    if (values.size() != shape.size())
      return inferError(loc, opName, "expects '", attrName, "' to have ", rank,
                        " entries (one per dimension), got ", values.size());
  for (int64_t dim = 0; dim < rank; ++dim) {
    int64_t start = starts[dim], size = sizes[dim], step = steps[dim];
    if (size < 0)
      return inferError(loc, opName, "expects non-negative sizes, got [", sizes,
                        "]");
    if (step == 0)
      return inferError(loc, opName, "expects non-zero steps, got [", steps,
                        "]");
    if (size == 0)
      continue;
    int64_t last = start + (size - 1) * step, bound = shape[dim];
    if (start < 0 || start >= bound || last < 0 || last >= bound)
      return inferError(loc, opName, "dimension ", dim, " ", access,
                        " indices ", start, " to ", last, ", outside [0, ",
                        bound, ")");
  }
  return success();
}

/// The shape of nn.gather's result (and nn.scatter_add's updates):
/// `data[:axis] + indices + data[axis+1:]`.
static SmallVector<int64_t>
gatherShape(ArrayRef<int64_t> data, ArrayRef<int64_t> indices, int64_t axis) {
  SmallVector<int64_t> shape(data.take_front(axis));
  llvm::append_range(shape, indices);
  llvm::append_range(shape, data.drop_front(axis + 1));
  return shape;
}

//===----------------------------------------------------------------------===//
// Folding helpers
//===----------------------------------------------------------------------===//

/// Folds never build constants with more elements than this: folding is for
/// shape arithmetic and masks, not for evaluating the model.
static constexpr int64_t kMaxFoldElements = 65536;

/// Whether a result of `type` is small enough to fold.
static bool isFoldable(ShapedType type) {
  return type.getNumElements() <= kMaxFoldElements;
}

/// The constant operand `attr` as dense elements, if it is small enough to
/// read (splats always are).
static DenseElementsAttr getFoldable(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || (!dense.isSplat() && !isFoldable(dense.getType())))
    return {};
  return dense;
}

/// Row-major strides of a tensor of shape `shape`.
static SmallVector<int64_t> getStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t dim = static_cast<int64_t>(shape.size()) - 2; dim >= 0; --dim)
    strides[dim] = strides[dim + 1] * shape[dim + 1];
  return strides;
}

/// Pairs each element of a `fromShape` tensor, in row-major order, with an
/// element of a `toShape` tensor: `map` writes the `toShape` multi-index for a
/// `fromShape` multi-index, and the result holds the linear `toShape` indices.
/// Data movement maps output to input; reductions map input to output.
static SmallVector<int64_t> mapIndices(
    ArrayRef<int64_t> fromShape, ArrayRef<int64_t> toShape,
    function_ref<void(ArrayRef<int64_t>, MutableArrayRef<int64_t>)> map) {
  SmallVector<int64_t> toStrides = getStrides(toShape);
  int64_t count = ShapedType::getNumElements(fromShape);
  SmallVector<int64_t> from(fromShape.size(), 0), to(toShape.size(), 0);
  SmallVector<int64_t> linear;
  linear.reserve(count);
  for (int64_t i = 0; i < count; ++i) {
    map(from, to);
    linear.push_back(
        std::inner_product(to.begin(), to.end(), toStrides.begin(), 0LL));
    // Advance `from` to the next multi-index in row-major order.
    for (int64_t dim = static_cast<int64_t>(from.size()) - 1; dim >= 0; --dim) {
      if (++from[dim] < fromShape[dim])
        break;
      from[dim] = 0;
    }
  }
  return linear;
}

/// For each element of a `toShape` tensor, the element of a `shape` tensor
/// that numpy broadcasting reads.
static SmallVector<int64_t> broadcastIndices(ArrayRef<int64_t> shape,
                                             ArrayRef<int64_t> toShape) {
  size_t offset = toShape.size() - shape.size();
  return mapIndices(toShape, shape,
                    [&](ArrayRef<int64_t> from, MutableArrayRef<int64_t> to) {
                      for (auto [dim, size] : llvm::enumerate(shape))
                        to[dim] = size == 1 ? 0 : from[dim + offset];
                    });
}

/// Random-access reader of the elements of several constants as `T` (APInt or
/// APFloat), indexed into their row-major concatenation.
template <typename T> class ElementReader {
public:
  explicit ElementReader(ArrayRef<DenseElementsAttr> inputs) {
    int64_t offset = 0;
    for (DenseElementsAttr input : inputs) {
      begins.push_back(input.value_begin<T>());
      offsets.push_back(offset);
      offset += input.getNumElements();
    }
  }

  T operator[](int64_t index) const {
    size_t input = llvm::upper_bound(offsets, index) - offsets.begin() - 1;
    return *(begins[input] + (index - offsets[input]));
  }

private:
  using Iterator = decltype(std::declval<DenseElementsAttr>().value_begin<T>());
  SmallVector<Iterator> begins;
  SmallVector<int64_t> offsets;
};

template <typename T>
static DenseElementsAttr gatherElementsAs(ArrayRef<DenseElementsAttr> inputs,
                                          ArrayRef<int64_t> sources,
                                          ShapedType type) {
  ElementReader<T> reader(inputs);
  SmallVector<T> values;
  values.reserve(sources.size());
  for (int64_t source : sources)
    values.push_back(reader[source]);
  return DenseElementsAttr::get(type, values);
}

/// A constant of `type` whose element `i` is element `sources[i]` of the
/// row-major concatenation of `inputs` (which share `type`'s element type):
/// the common core of every data-movement fold.
static DenseElementsAttr gatherElements(ArrayRef<DenseElementsAttr> inputs,
                                        ArrayRef<int64_t> sources,
                                        ShapedType type) {
  if (isa<FloatType>(type.getElementType()))
    return gatherElementsAs<APFloat>(inputs, sources, type);
  return gatherElementsAs<APInt>(inputs, sources, type);
}

/// `R` without a std::optional around it.
template <typename R> struct WithoutOptional { using type = R; };
template <typename R> struct WithoutOptional<std::optional<R>> {
  using type = R;
};

/// Folds an elementwise op with numpy broadcasting over constant `operands`
/// whose elements read as `T` (APInt or APFloat). `fn` computes one result
/// element (APInt or APFloat) from one element of each operand; it may
/// return std::optional and std::nullopt to give up (division by zero).
template <typename T, typename Fn>
static Attribute foldElementwise(ArrayRef<Attribute> operands,
                                 ShapedType resultType, Fn fn) {
  using Result =
      typename WithoutOptional<std::invoke_result_t<Fn, ArrayRef<T>>>::type;
  if (!isFoldable(resultType))
    return {};
  SmallVector<ElementReader<T>> readers;
  SmallVector<SmallVector<int64_t>> sources;
  for (Attribute operand : operands) {
    DenseElementsAttr input = getFoldable(operand);
    if (!input ||
        isa<FloatType>(input.getElementType()) != std::is_same_v<T, APFloat>)
      return {};
    readers.emplace_back(input);
    sources.push_back(
        broadcastIndices(input.getType().getShape(), resultType.getShape()));
  }
  SmallVector<Result> results;
  results.reserve(resultType.getNumElements());
  SmallVector<T> args;
  for (int64_t i = 0, e = resultType.getNumElements(); i < e; ++i) {
    args.clear();
    for (auto [reader, source] : llvm::zip_equal(readers, sources))
      args.push_back(reader[source[i]]);
    std::optional<Result> result = fn(ArrayRef<T>(args));
    if (!result)
      return {};
    results.push_back(std::move(*result));
  }
  return DenseElementsAttr::get(resultType, results);
}

/// Folds an elementwise op on integers or floats: `fn` is called with an
/// ArrayRef of APInts or of APFloats, per the first operand's element type
/// (see foldElementwise for its result).
template <typename Fn>
static Attribute foldNumeric(ArrayRef<Attribute> operands,
                             ShapedType resultType, Fn fn) {
  auto first = dyn_cast_or_null<DenseElementsAttr>(operands.front());
  if (!first)
    return {};
  if (isa<FloatType>(first.getElementType()))
    return foldElementwise<APFloat>(operands, resultType, fn);
  return foldElementwise<APInt>(operands, resultType, fn);
}

/// Folds a broadcasting binary op on integers or floats: `fn` is called with
/// two APInts or two APFloats.
template <typename Fn>
static Attribute foldBinary(ArrayRef<Attribute> operands, ShapedType resultType,
                            Fn fn) {
  return foldNumeric(operands, resultType,
                     [&](auto v) { return fn(v[0], v[1]); });
}

// Element operations overloaded on APInt (signed; i1 unsigned) and APFloat,
// so that one generic lambda folds both kinds of element.

static APInt maxElement(const APInt &a, const APInt &b) {
  return llvm::APIntOps::smax(a, b);
}
static APFloat maxElement(const APFloat &a, const APFloat &b) {
  return llvm::maximum(a, b);
}
static APInt minElement(const APInt &a, const APInt &b) {
  return llvm::APIntOps::smin(a, b);
}
static APFloat minElement(const APFloat &a, const APFloat &b) {
  return llvm::minimum(a, b);
}
static std::optional<APInt> divElement(const APInt &a, const APInt &b) {
  // Division by zero and MIN / -1 are undefined: leave them to run time.
  if (b.isZero() || (a.isMinSignedValue() && b.isAllOnes()))
    return std::nullopt;
  return a.sdiv(b);
}
static std::optional<APFloat> divElement(const APFloat &a, const APFloat &b) {
  return a / b;
}
static APFloat::cmpResult compareElements(const APInt &a, const APInt &b) {
  // i1 only reaches nn.equal; compare it unsigned so that true > false.
  bool isBool = a.getBitWidth() == 1;
  if (isBool ? a.ult(b) : a.slt(b))
    return APFloat::cmpLessThan;
  return a == b ? APFloat::cmpEqual : APFloat::cmpGreaterThan;
}
static APFloat::cmpResult compareElements(const APFloat &a, const APFloat &b) {
  return a.compare(b);
}

/// An i1 element.
static APInt boolValue(bool value) { return APInt(1, value); }

/// Folds a comparison whose answer is `compareElements(lhs, rhs) == order`.
static Attribute foldCompare(ArrayRef<Attribute> operands,
                             ShapedType resultType, APFloat::cmpResult order) {
  return foldBinary(operands, resultType, [&](const auto &a, const auto &b) {
    return boolValue(compareElements(a, b) == order);
  });
}

/// Folds a reduction over integers: combines the elements of `x` that land on
/// the same result element, starting from `init`.
template <typename Combine>
static Attribute foldIntReduction(Attribute x, ShapedType resultType,
                                  ArrayRef<int64_t> axes, APInt init,
                                  Combine combine) {
  DenseElementsAttr input = getFoldable(x);
  if (!input || !isFoldable(input.getType()) || !isFoldable(resultType) ||
      !input.getElementType().isInteger())
    return {};
  ArrayRef<int64_t> shape = input.getType().getShape();
  // Map input elements to the keepdims form of the result; its row-major
  // order is the same as the result's either way.
  SmallVector<int64_t> keptShape(shape);
  for (int64_t axis : axes)
    keptShape[axis] = 1;
  SmallVector<int64_t> targets =
      mapIndices(shape, keptShape,
                 [&](ArrayRef<int64_t> from, MutableArrayRef<int64_t> to) {
                   for (auto [dim, index] : llvm::enumerate(from))
                     to[dim] = keptShape[dim] == 1 ? 0 : index;
                 });
  SmallVector<APInt> results(resultType.getNumElements(), init);
  for (auto [value, target] :
       llvm::zip_equal(input.getValues<APInt>(), targets))
    results[target] = combine(results[target], value);
  return DenseElementsAttr::get(resultType, results);
}

//===----------------------------------------------------------------------===//
// Elementwise binary ops
//===----------------------------------------------------------------------===//

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldBinary(adaptor.getOperands(), getType(), std::plus<>());
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldBinary(adaptor.getOperands(), getType(), std::minus<>());
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldBinary(adaptor.getOperands(), getType(), std::multiplies<>());
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getOperands(), getType(),
      [](const auto &a, const auto &b) { return divElement(a, b); });
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getOperands(), getType(),
      [](const auto &a, const auto &b) { return maxElement(a, b); });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      adaptor.getOperands(), getType(),
      [](const auto &a, const auto &b) { return minElement(a, b); });
}

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  return foldCompare(adaptor.getOperands(), getType(), APFloat::cmpEqual);
}

OpFoldResult LessOp::fold(FoldAdaptor adaptor) {
  return foldCompare(adaptor.getOperands(), getType(), APFloat::cmpLessThan);
}

OpFoldResult GreaterOp::fold(FoldAdaptor adaptor) {
  return foldCompare(adaptor.getOperands(), getType(), APFloat::cmpGreaterThan);
}

OpFoldResult AndOp::fold(FoldAdaptor adaptor) {
  return foldElementwise<APInt>(
      adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> v) -> std::optional<APInt> { return v[0] & v[1]; });
}

OpFoldResult OrOp::fold(FoldAdaptor adaptor) {
  return foldElementwise<APInt>(
      adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> v) -> std::optional<APInt> { return v[0] | v[1]; });
}

//===----------------------------------------------------------------------===//
// Elementwise unary ops
//===----------------------------------------------------------------------===//

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  return foldNumeric(adaptor.getOperands(), getType(),
                     [](auto v) { return -v[0]; });
}

OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  return foldElementwise<APInt>(
      adaptor.getOperands(), getType(),
      [](ArrayRef<APInt> v) -> std::optional<APInt> { return ~v[0]; });
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("expects approximate \"none\" or \"tanh\", got \"")
           << getApproximate() << "\"";
  return success();
}

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

/// Converts one constant element of type `from` to type `to` with ONNX Cast
/// semantics, or std::nullopt where the result is undefined (NaN or
/// out-of-range float to integer).
template <typename Result, typename T>
static std::optional<Result> castElement(const T &value, Type to);

template <> std::optional<APFloat> castElement(const APFloat &value, Type to) {
  APFloat result = value;
  bool losesInfo;
  result.convert(cast<FloatType>(to).getFloatSemantics(),
                 APFloat::rmNearestTiesToEven, &losesInfo);
  return result;
}

template <> std::optional<APInt> castElement(const APFloat &value, Type to) {
  unsigned width = to.getIntOrFloatBitWidth();
  if (width == 1)
    return boolValue(!value.isZero());
  llvm::APSInt result(width, /*isUnsigned=*/false);
  bool isExact;
  if (value.convertToInteger(result, APFloat::rmTowardZero, &isExact) ==
      APFloat::opInvalidOp)
    return std::nullopt;
  return APInt(result);
}

template <> std::optional<APFloat> castElement(const APInt &value, Type to) {
  APFloat result(cast<FloatType>(to).getFloatSemantics());
  result.convertFromAPInt(value, /*IsSigned=*/value.getBitWidth() != 1,
                          APFloat::rmNearestTiesToEven);
  return result;
}

template <> std::optional<APInt> castElement(const APInt &value, Type to) {
  unsigned width = to.getIntOrFloatBitWidth();
  if (width == 1)
    return boolValue(!value.isZero());
  // i1 is 0 or 1, wider integers are signed.
  return value.getBitWidth() == 1 ? value.zext(width)
                                  : value.sextOrTrunc(width);
}

/// Folds a cast of constant elements read as `From` to `Result` elements.
template <typename From, typename Result>
static Attribute foldCastAs(Attribute x, ShapedType resultType) {
  Type to = resultType.getElementType();
  return foldElementwise<From>(x, resultType, [&](ArrayRef<From> v) {
    return castElement<Result>(v[0], to);
  });
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  bool fromFloat = isa<FloatType>(getX().getType().getElementType());
  bool toFloat = isa<FloatType>(getType().getElementType());
  if (fromFloat)
    return toFloat ? foldCastAs<APFloat, APFloat>(adaptor.getX(), getType())
                   : foldCastAs<APFloat, APInt>(adaptor.getX(), getType());
  return toFloat ? foldCastAs<APInt, APFloat>(adaptor.getX(), getType())
                 : foldCastAs<APInt, APInt>(adaptor.getX(), getType());
}

//===----------------------------------------------------------------------===//
// WhereOp
//===----------------------------------------------------------------------===//

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  RankedTensorType cond = tensorType(adaptor.getCond());
  RankedTensorType a = tensorType(adaptor.getA());
  RankedTensorType b = tensorType(adaptor.getB());
  if (failed(checkElementType(location, getOperationName(), "b", b, a)))
    return failure();
  SmallVector<int64_t> valueShape, shape;
  if (!OpTrait::util::getBroadcastedShape(a.getShape(), b.getShape(),
                                          valueShape) ||
      !OpTrait::util::getBroadcastedShape(cond.getShape(), valueShape, shape))
    return inferError(location, getOperationName(), "operands ", cond, ", ", a,
                      " and ", b, " are not broadcastable");
  types.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr cond = getFoldable(adaptor.getCond());
  if (!cond)
    return {};
  // A uniform condition picks one operand whole, if it needs no broadcast.
  if (cond.isSplat()) {
    Value picked = cond.getSplatValue<bool>() ? getA() : getB();
    if (picked.getType() == getType())
      return picked;
  }
  DenseElementsAttr a = getFoldable(adaptor.getA());
  DenseElementsAttr b = getFoldable(adaptor.getB());
  if (!a || !b || !isFoldable(getType()))
    return {};
  ArrayRef<int64_t> shape = getType().getShape();
  SmallVector<int64_t> condSources =
      broadcastIndices(cond.getType().getShape(), shape);
  SmallVector<int64_t> aSources =
      broadcastIndices(a.getType().getShape(), shape);
  SmallVector<int64_t> bSources =
      broadcastIndices(b.getType().getShape(), shape);
  // Read from the concatenation [a, b].
  auto condValues = cond.value_begin<bool>();
  SmallVector<int64_t> sources;
  sources.reserve(getType().getNumElements());
  for (auto [condSource, aSource, bSource] :
       llvm::zip_equal(condSources, aSources, bSources))
    sources.push_back(
        *(condValues + condSource) ? aSource : a.getNumElements() + bSource);
  return gatherElements({a, b}, sources, getType());
}

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  RankedTensorType a = tensorType(adaptor.getA());
  RankedTensorType b = tensorType(adaptor.getB());
  if (failed(checkMinRank(location, getOperationName(), "a", a, 2,
                          "[..., M, K]")) ||
      failed(
          checkMinRank(location, getOperationName(), "b", b, 2, "[..., K, N]")))
    return failure();
  if (failed(checkElementType(location, getOperationName(), "b", b, a)))
    return failure();
  int64_t k = a.getShape().back(), bk = b.getShape().drop_back().back();
  if (k != bk)
    return inferError(location, getOperationName(),
                      "contraction sizes differ: ", a, " has K = ", k, ", ", b,
                      " has K = ", bk);
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(a.getShape().drop_back(2),
                                          b.getShape().drop_back(2), shape))
    return inferError(location, getOperationName(), "batch dimensions of ", a,
                      " and ", b, " are not broadcastable");
  shape.push_back(a.getShape().drop_back().back());
  shape.push_back(b.getShape().back());
  types.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// MatMulNf4Op
//===----------------------------------------------------------------------===//

LogicalResult MatMulNf4Op::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  StringRef name = getOperationName();
  RankedTensorType x = tensorType(adaptor.getX());
  if (failed(checkMinRank(location, name, "x", x, 1, "[..., K]")))
    return failure();
  ArrayRef<int64_t> shape = adaptor.getWeightShape();
  if (failed(checkArray(location, name, "weight_shape", shape, 2, 1)))
    return failure();
  // Sizes of the parts: runtime/kernels/Nf4.h.
  int64_t n = shape[0] * shape[1], blocks = (n + 63) / 64;
  struct Part {
    StringRef name;
    Value value;
    int64_t size;
  } parts[] = {
      {"packed", adaptor.getPacked(), (n + 1) / 2},
      {"absmax", adaptor.getAbsmax(), blocks},
      {"nested_absmax", adaptor.getNestedAbsmax(), (blocks + 255) / 256},
      {"offset", adaptor.getOffset(), 1}};
  for (const Part &part : parts) {
    RankedTensorType type = tensorType(part.value);
    if (type.getRank() != 1 || type.getDimSize(0) != part.size)
      return inferError(location, name, "expects ", part.name, " of shape [",
                        part.size, "] for a weight of ", shape[0], "x",
                        shape[1], ", got ", type);
  }
  bool transposed = adaptor.getTransposeB();
  int64_t k = transposed ? shape[1] : shape[0];
  int64_t out = transposed ? shape[0] : shape[1];
  if (x.getShape().back() != k)
    return inferError(location, name, "contraction sizes differ: ", x,
                      " has K = ", x.getShape().back(), ", the weight ",
                      shape[0], "x", shape[1],
                      transposed ? " (transposed)" : "", " has K = ", k);
  SmallVector<int64_t> result(x.getShape());
  result.back() = out;
  types.push_back(RankedTensorType::get(result, x.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Conv2dOp
//===----------------------------------------------------------------------===//

/// With `channelsLast`, the [N, C, H, W] type of a 4-D activation stored
/// [N, H, W, C] (`toNchw`), or the reverse; any other type as it is.
static RankedTensorType relayout(RankedTensorType type, bool channelsLast,
                                 bool toNchw) {
  if (!channelsLast || !type || type.getRank() != 4)
    return type;
  ArrayRef<int64_t> d = type.getShape();
  SmallVector<int64_t, 4> shape =
      toNchw ? SmallVector<int64_t, 4>{d[0], d[3], d[1], d[2]}
             : SmallVector<int64_t, 4>{d[0], d[2], d[3], d[1]};
  return RankedTensorType::get(shape, type.getElementType());
}

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  StringRef name = getOperationName();
  bool channelsLast = adaptor.getChannelsLast();
  RankedTensorType input =
      relayout(tensorType(adaptor.getInput()), channelsLast, true);
  RankedTensorType weight = tensorType(adaptor.getWeight());
  if (failed(checkRank(location, name, "input", input, 4, "[N, C, H, W]")) ||
      failed(checkRank(location, name, "weight", weight, 4,
                       "[O, C / group, kH, kW]")) ||
      failed(checkElementType(location, name, "weight", weight, input)) ||
      failed(checkConvAttributes(location, name, adaptor.getStrides(),
                                 adaptor.getPads(), adaptor.getDilations(),
                                 static_cast<int64_t>(adaptor.getGroup()))))
    return failure();
  auto group = static_cast<int64_t>(adaptor.getGroup());
  int64_t channels = input.getDimSize(1), outChannels = weight.getDimSize(0);
  if (channels % group != 0 || channels / group != weight.getDimSize(1))
    return inferError(location, name, "input channels (", channels,
                      ") must equal weight channels (", weight.getDimSize(1),
                      ") times group (", group, ")");
  if (outChannels % group != 0)
    return inferError(location, name, "output channels (", outChannels,
                      ") must be divisible by group (", group, ")");
  if (Value bias = adaptor.getBias()) {
    RankedTensorType biasType = tensorType(bias);
    if (biasType.getShape() != ArrayRef<int64_t>{outChannels})
      return inferError(location, name, "expects bias of shape [", outChannels,
                        "], got ", biasType);
    if (failed(checkElementType(location, name, "bias", biasType, input)))
      return failure();
  }
  if (failed(inferWindowShape(
          location, name, input, outChannels, weight.getShape().drop_front(2),
          adaptor.getStrides(), adaptor.getPads(), adaptor.getDilations(),
          /*ceilMode=*/false, types)))
    return failure();
  types.back() =
      relayout(cast<RankedTensorType>(types.back()), channelsLast, false);
  return success();
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

/// Checks that each named operand in `vectors` is a vector of the `channels`
/// channels of `x`, of its element type (a batch norm's scale, bias and
/// statistics).
static LogicalResult
checkChannelVectors(std::optional<Location> location, StringRef opName,
                    RankedTensorType x, int64_t channels,
                    ArrayRef<std::pair<StringRef, Value>> vectors) {
  for (auto [name, value] : vectors) {
    RankedTensorType type = tensorType(value);
    if (type.getShape() != ArrayRef<int64_t>{channels})
      return inferError(location, opName, "expects ", name, " of shape [",
                        channels, "], got ", type);
    if (failed(checkElementType(location, opName, name, type, x)))
      return failure();
  }
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorType(adaptor.getX());
  bool channelsLast = adaptor.getChannelsLast();
  if (failed(checkMinRank(location, getOperationName(), "x", x, 2,
                          channelsLast ? "[N, ..., C]" : "[N, C, ...]")))
    return failure();
  int64_t channels = x.getDimSize(channelsLast ? x.getRank() - 1 : 1);
  if (failed(checkChannelVectors(location, getOperationName(), x, channels,
                                 {{"scale", adaptor.getScale()},
                                  {"bias", adaptor.getBias()},
                                  {"mean", adaptor.getMean()},
                                  {"var", adaptor.getVar()}})))
    return failure();
  types.push_back(x);
  return success();
}

/// The results of nn.batch_norm_training and of its backward for `x`
/// (`[N, C, ...]`): x's type and two `[C]` vectors, once each of `vectors`
/// is a vector of the channels.
static LogicalResult
inferTrainingBatchNorm(std::optional<Location> location, StringRef opName,
                       RankedTensorType x,
                       ArrayRef<std::pair<StringRef, Value>> vectors,
                       SmallVectorImpl<Type> &types) {
  if (failed(checkMinRank(location, opName, "x", x, 2, "[N, C, ...]")) ||
      failed(
          checkChannelVectors(location, opName, x, x.getDimSize(1), vectors)))
    return failure();
  RankedTensorType channels = tensorType(vectors.front().second);
  types.append({x, channels, channels});
  return success();
}

LogicalResult BatchNormTrainingOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  return inferTrainingBatchNorm(
      location, getOperationName(), tensorType(adaptor.getX()),
      {{"scale", adaptor.getScale()}, {"bias", adaptor.getBias()}}, types);
}

LogicalResult BatchNormTrainingBackwardOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorType(adaptor.getX());
  if (failed(checkGradOutput(location, getOperationName(), x,
                             tensorType(adaptor.getGradOutput()))))
    return failure();
  return inferTrainingBatchNorm(location, getOperationName(), x,
                                {{"scale", adaptor.getScale()},
                                 {"mean", adaptor.getMean()},
                                 {"var", adaptor.getVar()}},
                                types);
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorType(adaptor.getX());
  auto axis = static_cast<int64_t>(adaptor.getAxis());
  if (failed(checkAxis(location, getOperationName(), axis, x.getRank())))
    return failure();
  ArrayRef<int64_t> normalized = x.getShape().drop_front(axis);
  for (auto [name, value] :
       {std::pair<StringRef, Value>{"scale", adaptor.getScale()},
        {"bias", adaptor.getBias()}}) {
    if (!value)
      continue;
    RankedTensorType type = tensorType(value);
    if (type.getShape() != normalized)
      return inferError(location, getOperationName(), "expects ", name,
                        " of shape [", normalized, "] (x.shape[axis:]), got ",
                        type);
    if (failed(checkElementType(location, getOperationName(), name, type, x)))
      return failure();
  }
  types.push_back(x);
  return success();
}

LogicalResult LayerNormBackwardOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorType(adaptor.getX());
  auto axis = static_cast<int64_t>(adaptor.getAxis());
  if (failed(checkAxis(location, getOperationName(), axis, x.getRank())))
    return failure();
  RankedTensorType scale = tensorType(adaptor.getScale());
  if (scale.getShape() != x.getShape().drop_front(axis))
    return inferError(location, getOperationName(), "expects scale of shape [",
                      x.getShape().drop_front(axis),
                      "] (x.shape[axis:]), got ", scale);
  if (failed(checkElementType(location, getOperationName(), "scale", scale,
                              x)) ||
      failed(checkGradOutput(location, getOperationName(), x,
                             tensorType(adaptor.getGradOutput()))))
    return failure();
  types.append({x, scale, scale});
  return success();
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

LogicalResult MaxPool2dOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  bool channelsLast = adaptor.getChannelsLast();
  if (failed(inferPool2d(
          location, getOperationName(),
          relayout(tensorType(adaptor.getX()), channelsLast, true),
          adaptor.getKernel(), adaptor.getStrides(), adaptor.getPads(),
          adaptor.getDilations(), adaptor.getCeilMode(), types)))
    return failure();
  types.back() =
      relayout(cast<RankedTensorType>(types.back()), channelsLast, false);
  return success();
}

LogicalResult AvgPool2dOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  bool channelsLast = adaptor.getChannelsLast();
  if (failed(inferPool2d(
          location, getOperationName(),
          relayout(tensorType(adaptor.getX()), channelsLast, true),
          adaptor.getKernel(), adaptor.getStrides(), adaptor.getPads(),
          /*dilations=*/{1, 1}, adaptor.getCeilMode(), types)))
    return failure();
  types.back() =
      relayout(cast<RankedTensorType>(types.back()), channelsLast, false);
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  return inferAlongAxis(location, getOperationName(), adaptor.getX(),
                        static_cast<int64_t>(adaptor.getAxis()), types);
}

LogicalResult LogSoftmaxOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> location,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  return inferAlongAxis(location, getOperationName(), adaptor.getX(),
                        static_cast<int64_t>(adaptor.getAxis()), types);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// The result type of nn.attention (and the forward nn.attention_backward
/// takes back): q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv] of one
/// element type and the same batch dimensions give [..., Tq, Dv]; a mask
/// has the scores' rank, each dimension 1 or the scores'.
static FailureOr<RankedTensorType>
inferAttention(std::optional<Location> loc, StringRef opName, Value qValue,
               Value kValue, Value vValue, Value maskValue) {
  RankedTensorType q = tensorType(qValue), k = tensorType(kValue),
                   v = tensorType(vValue);
  if (failed(checkMinRank(loc, opName, "q", q, 2, "[..., Tq, D]")) ||
      failed(checkElementType(loc, opName, "k", k, q)) ||
      failed(checkElementType(loc, opName, "v", v, q)))
    return failure();
  if (k.getRank() != q.getRank() || v.getRank() != q.getRank())
    return inferError(loc, opName, "expects q, k and v of one rank, got ", q,
                      ", ", k, " and ", v);
  ArrayRef<int64_t> batch = q.getShape().drop_back(2);
  // Grouped-query attention: rank-4 k and v may have fewer heads (dimension
  // 1) than q, the same number, dividing q's.
  auto sameBatch = [&](RankedTensorType t) {
    ArrayRef<int64_t> other = t.getShape().drop_back(2);
    if (other == batch)
      return true;
    return q.getRank() == 4 && other[0] == batch[0] && other[1] > 0 &&
           batch[1] % other[1] == 0;
  };
  if (!sameBatch(k) || !sameBatch(v) ||
      k.getShape().drop_back(2) != v.getShape().drop_back(2))
    return inferError(loc, opName,
                      "expects q, k and v with the same batch dimensions (k "
                      "and v may share fewer heads, dividing q's), got ",
                      q, ", ", k, " and ", v);
  int64_t tq = q.getShape()[q.getRank() - 2], d = q.getShape().back();
  int64_t tk = k.getShape()[k.getRank() - 2];
  if (k.getShape().back() != d)
    return inferError(loc, opName, "expects k of head size ", d, " (q's), got ",
                      k);
  if (v.getShape()[v.getRank() - 2] != tk)
    return inferError(loc, opName, "expects v with ", tk, " keys (k's), got ",
                      v);
  SmallVector<int64_t> scores(batch);
  scores.append({tq, tk});
  if (maskValue) {
    RankedTensorType mask = tensorType(maskValue);
    if (failed(checkElementType(loc, opName, "mask", mask, q)))
      return failure();
    bool fits =
        mask.getRank() == static_cast<int64_t>(scores.size()) &&
        llvm::all_of(llvm::zip_equal(mask.getShape(), scores), [](auto pair) {
          auto [dim, full] = pair;
          return dim == 1 || dim == full;
        });
    if (!fits)
      return inferError(
          loc, opName, "expects a mask that broadcasts to the scores [",
          ArrayRef<int64_t>(scores),
          "] in place (same rank, each dimension 1 or the scores'), got ",
          mask);
  }
  SmallVector<int64_t> shape(batch);
  shape.append({tq, v.getShape().back()});
  return RankedTensorType::get(shape, q.getElementType());
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> result =
      inferAttention(location, getOperationName(), adaptor.getQ(),
                     adaptor.getK(), adaptor.getV(), adaptor.getMask());
  if (failed(result))
    return failure();
  types.push_back(*result);
  return success();
}

/// nn.attention's and nn.attention_backward's softcap, where present: a
/// positive finite cap.
static LogicalResult verifySoftcap(Operation *op, FloatAttr softcap) {
  if (softcap && !(softcap.getValueAsDouble() > 0 &&
                   std::isfinite(softcap.getValueAsDouble())))
    return op->emitOpError("expects a positive finite softcap, got ")
           << softcap.getValueAsDouble();
  return success();
}

LogicalResult AttentionOp::verify() {
  return verifySoftcap(*this, getSoftcapAttr());
}

LogicalResult AttentionBackwardOp::verify() {
  return verifySoftcap(*this, getSoftcapAttr());
}

LogicalResult AttentionBackwardOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> forward =
      inferAttention(location, getOperationName(), adaptor.getQ(),
                     adaptor.getK(), adaptor.getV(), adaptor.getMask());
  if (failed(forward))
    return failure();
  RankedTensorType out = tensorType(adaptor.getOut());
  if (out != *forward)
    return inferError(location, getOperationName(), "expects out of type ",
                      *forward, " (the forward result), got ", out);
  if (failed(checkGradOutput(location, getOperationName(), *forward,
                             tensorType(adaptor.getGradOutput()))))
    return failure();
  types.append({adaptor.getQ().getType(), adaptor.getK().getType(),
                adaptor.getV().getType()});
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

OpFoldResult ReduceSumOp::fold(FoldAdaptor adaptor) {
  if (getAxes().empty())
    return getX();
  unsigned width = getType().getElementTypeBitWidth();
  return foldIntReduction(
      adaptor.getX(), getType(), getAxes(), APInt::getZero(width),
      [](const APInt &acc, const APInt &v) { return acc + v; });
}

/// Reductions may read constants this large when their result is small: an
/// exported attention mask ([B, 1, T, T]) reduced to one value per row,
/// which tells which rows are fully masked.
static constexpr int64_t kMaxFoldReadElements = int64_t(1) << 26;

/// Folds a float reduce_max whose result is small enough to fold, over a
/// constant of up to kMaxFoldReadElements: the maximum is exact, and NaN
/// wins, as in ReduceMax and the kernels.
static Attribute foldFloatMax(Attribute x, ShapedType resultType,
                              ArrayRef<int64_t> axes) {
  auto input = dyn_cast_or_null<DenseElementsAttr>(x);
  if (!input || !isFoldable(resultType) ||
      !isa<FloatType>(input.getElementType()))
    return {};
  if (input.isSplat())
    return DenseElementsAttr::get(resultType, input.getSplatValue<Attribute>());
  if (input.getNumElements() > kMaxFoldReadElements)
    return {};
  ArrayRef<int64_t> shape = input.getType().getShape();
  // Each input element's result element, as row-major strides of the
  // keepdims form (0 along a reduced axis).
  SmallVector<int64_t> keptStrides(shape.size(), 0);
  int64_t stride = 1;
  for (int64_t dim = int64_t(shape.size()) - 1; dim >= 0; --dim) {
    if (llvm::is_contained(axes, dim))
      continue;
    keptStrides[dim] = stride;
    stride *= shape[dim];
  }
  auto floats = cast<FloatType>(input.getElementType());
  SmallVector<APFloat> results(resultType.getNumElements(),
                               APFloat::getInf(floats.getFloatSemantics(),
                                               /*Negative=*/true));
  SmallVector<int64_t> index(shape.size(), 0);
  int64_t target = 0;
  for (const APFloat &value : input.getValues<APFloat>()) {
    results[target] = llvm::maximum(results[target], value);
    for (int64_t dim = int64_t(shape.size()) - 1; dim >= 0; --dim) {
      target += keptStrides[dim];
      if (++index[dim] < shape[dim])
        break;
      target -= keptStrides[dim] * shape[dim];
      index[dim] = 0;
    }
  }
  return DenseElementsAttr::get(resultType, results);
}

OpFoldResult ReduceMaxOp::fold(FoldAdaptor adaptor) {
  if (getAxes().empty())
    return getX();
  if (isa<FloatType>(getType().getElementType()))
    return foldFloatMax(adaptor.getX(), getType(), getAxes());
  unsigned width = getType().getElementTypeBitWidth();
  return foldIntReduction(adaptor.getX(), getType(), getAxes(),
                          APInt::getSignedMinValue(width),
                          [](const APInt &acc, const APInt &v) {
                            return llvm::APIntOps::smax(acc, v);
                          });
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType from = getX().getType(), to = getType();
  if (from.getElementType() != to.getElementType())
    return emitOpError("expects result element type ")
           << from.getElementType() << ", got " << to;
  if (from.getNumElements() != to.getNumElements())
    return emitOpError("element count changes from ")
           << from.getNumElements() << " (" << from << ") to "
           << to.getNumElements() << " (" << to << ")";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  if (DenseElementsAttr x = getFoldable(adaptor.getX());
      x && isFoldable(getType()))
    return x.reshape(getType());
  return {};
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorType(adaptor.getX());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  if (!llvm::equal(sorted, llvm::seq<int64_t>(0, x.getRank())))
    return inferError(location, getOperationName(), "expects perm to be a ",
                      "permutation of [0, ", x.getRank(), "), got [", perm,
                      "]");
  SmallVector<int64_t> shape =
      llvm::map_to_vector(perm, [&](int64_t dim) { return x.getDimSize(dim); });
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPerm();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getX();
  DenseElementsAttr x = getFoldable(adaptor.getX());
  if (!x || !isFoldable(getType()))
    return {};
  SmallVector<int64_t> sources =
      mapIndices(getType().getShape(), x.getType().getShape(),
                 [&](ArrayRef<int64_t> from, MutableArrayRef<int64_t> to) {
                   for (auto [dim, index] : llvm::enumerate(from))
                     to[perm[dim]] = index;
                 });
  return gatherElements(x, sources, getType());
}

//===----------------------------------------------------------------------===//
// ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return inferError(location, getOperationName(),
                      "expects at least one operand");
  RankedTensorType first = tensorType(inputs.front());
  auto axis = static_cast<int64_t>(adaptor.getAxis());
  if (failed(checkAxis(location, getOperationName(), axis, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  for (Value input : inputs.drop_front()) {
    RankedTensorType type = tensorType(input);
    if (failed(checkElementType(location, getOperationName(), "operand", type,
                                first)))
      return failure();
    bool sameShape = type.getRank() == first.getRank();
    for (int64_t dim = 0; sameShape && dim < first.getRank(); ++dim)
      sameShape = dim == axis || type.getDimSize(dim) == first.getDimSize(dim);
    if (!sameShape)
      return inferError(location, getOperationName(), "operand ", type,
                        " does not match ", first, " outside axis ", axis);
    shape[axis] += type.getDimSize(axis);
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  if (!isFoldable(getType()))
    return {};
  SmallVector<DenseElementsAttr> inputs;
  for (Attribute attr : adaptor.getInputs()) {
    inputs.push_back(getFoldable(attr));
    if (!inputs.back())
      return {};
  }
  // Row-major, the result is, for each index before `axis`, one contiguous
  // chunk of each input in turn.
  auto axis = static_cast<int64_t>(getAxis());
  ArrayRef<int64_t> shape = getType().getShape();
  int64_t outer = ShapedType::getNumElements(shape.take_front(axis));
  SmallVector<int64_t> sources;
  sources.reserve(getType().getNumElements());
  for (int64_t o = 0; o < outer; ++o) {
    int64_t offset = 0;
    for (DenseElementsAttr input : inputs) {
      int64_t chunk = input.getNumElements() / std::max<int64_t>(outer, 1);
      for (int64_t i = 0; i < chunk; ++i)
        sources.push_back(offset + o * chunk + i);
      offset += input.getNumElements();
    }
  }
  return gatherElements(inputs, sources, getType());
}

//===----------------------------------------------------------------------===//
// SliceOp
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorType(adaptor.getX());
  ArrayRef<int64_t> sizes = adaptor.getSizes();
  if (failed(checkStridedWindow(location, getOperationName(), "reads",
                                x.getShape(), adaptor.getStarts(), sizes,
                                adaptor.getSteps())))
    return failure();
  types.push_back(RankedTensorType::get(sizes, x.getElementType()));
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType() &&
      llvm::all_of(getStarts(), [](int64_t s) { return s == 0; }) &&
      llvm::all_of(getSteps(), [](int64_t s) { return s == 1; }))
    return getX();
  DenseElementsAttr x = getFoldable(adaptor.getX());
  if (!x || !isFoldable(getType()))
    return {};
  ArrayRef<int64_t> starts = getStarts(), steps = getSteps();
  SmallVector<int64_t> sources =
      mapIndices(getType().getShape(), x.getType().getShape(),
                 [&](ArrayRef<int64_t> from, MutableArrayRef<int64_t> to) {
                   for (auto [dim, index] : llvm::enumerate(from))
                     to[dim] = starts[dim] + index * steps[dim];
                 });
  return gatherElements(x, sources, getType());
}

//===----------------------------------------------------------------------===//
// GatherOp
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  RankedTensorType data = tensorType(adaptor.getData());
  RankedTensorType indices = tensorType(adaptor.getIndices());
  auto axis = static_cast<int64_t>(adaptor.getAxis());
  if (failed(checkAxis(location, getOperationName(), axis, data.getRank())))
    return failure();
  types.push_back(RankedTensorType::get(
      gatherShape(data.getShape(), indices.getShape(), axis),
      data.getElementType()));
  return success();
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr data = getFoldable(adaptor.getData());
  DenseElementsAttr indices = getFoldable(adaptor.getIndices());
  if (!data || !indices || !isFoldable(getType()) ||
      !isFoldable(indices.getType()))
    return {};
  auto axis = static_cast<int64_t>(getAxis());
  int64_t bound = data.getType().getDimSize(axis);
  // Normalize negative indices; out-of-range ones are left to run time.
  SmallVector<int64_t> positions;
  for (const APInt &index : indices.getValues<APInt>()) {
    int64_t position = index.getSExtValue();
    if (position < -bound || position >= bound)
      return {};
    positions.push_back(position < 0 ? position + bound : position);
  }
  ArrayRef<int64_t> indicesShape = indices.getType().getShape();
  SmallVector<int64_t> indicesStrides = getStrides(indicesShape);
  auto rank = static_cast<int64_t>(indicesShape.size());
  SmallVector<int64_t> sources = mapIndices(
      getType().getShape(), data.getType().getShape(),
      [&](ArrayRef<int64_t> from, MutableArrayRef<int64_t> to) {
        ArrayRef<int64_t> at = from.slice(axis, rank);
        llvm::copy(from.take_front(axis), to.begin());
        to[axis] = positions[std::inner_product(at.begin(), at.end(),
                                                indicesStrides.begin(), 0LL)];
        llvm::copy(from.drop_front(axis + rank), to.begin() + axis + 1);
      });
  return gatherElements(data, sources, getType());
}

//===----------------------------------------------------------------------===//
// BroadcastToOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastToOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> location,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorType(adaptor.getX());
  ArrayRef<int64_t> shape = adaptor.getShape();
  bool compatible = shape.size() >= static_cast<size_t>(x.getRank()) &&
                    llvm::none_of(shape, [](int64_t s) { return s < 0; });
  size_t offset = compatible ? shape.size() - x.getRank() : 0;
  for (int64_t dim = 0; compatible && dim < x.getRank(); ++dim)
    compatible =
        x.getDimSize(dim) == 1 || x.getDimSize(dim) == shape[dim + offset];
  if (!compatible)
    return inferError(location, getOperationName(), "cannot broadcast ", x,
                      " to shape [", shape, "]");
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

OpFoldResult BroadcastToOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  DenseElementsAttr x = getFoldable(adaptor.getX());
  if (!x || !isFoldable(getType()))
    return {};
  return gatherElements(
      x, broadcastIndices(x.getType().getShape(), getType().getShape()),
      getType());
}

//===----------------------------------------------------------------------===//
// RotateHalfOp
//===----------------------------------------------------------------------===//

/// x of rank at least 1 whose last dimension is two halves (the turns of
/// nn.rotate_half and nn.rotary).
static LogicalResult checkHalves(std::optional<Location> location,
                                 StringRef opName, RankedTensorType x) {
  if (failed(checkMinRank(location, opName, "x", x, 1, "[..., features]")))
    return failure();
  if (x.getShape().back() % 2 != 0)
    return inferError(location, opName,
                      "expects x's last dimension to be even (two halves), "
                      "got ",
                      x);
  return success();
}

LogicalResult RotateHalfOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> location,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorType(adaptor.getX());
  if (failed(checkHalves(location, getOperationName(), x)))
    return failure();
  types.push_back(x);
  return success();
}

//===----------------------------------------------------------------------===//
// RotaryOp
//===----------------------------------------------------------------------===//

LogicalResult RotaryOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorType(adaptor.getX());
  RankedTensorType cos = tensorType(adaptor.getCos());
  RankedTensorType sin = tensorType(adaptor.getSin());
  if (failed(checkHalves(location, getOperationName(), x)))
    return failure();
  if (cos != sin)
    return inferError(location, getOperationName(),
                      "expects cos and sin of one type, got ", cos, " and ",
                      sin);
  if (cos.getElementType() != x.getElementType())
    return inferError(location, getOperationName(),
                      "expects cos and sin of x's element type, got ", cos,
                      " for ", x);
  // The tables broadcast to x; x itself is never widened.
  SmallVector<int64_t> shape;
  if (cos.getRank() > x.getRank() ||
      !OpTrait::util::getBroadcastedShape(x.getShape(), cos.getShape(),
                                          shape) ||
      ArrayRef<int64_t>(shape) != x.getShape())
    return inferError(location, getOperationName(), "expects cos and sin ", cos,
                      " to broadcast to x's shape, got x ", x);
  types.push_back(x);
  return success();
}

//===----------------------------------------------------------------------===//
// TriluOp
//===----------------------------------------------------------------------===//

LogicalResult TriluOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  RankedTensorType x = tensorType(adaptor.getX());
  if (failed(checkMinRank(location, getOperationName(), "x", x, 2,
                          "[..., rows, columns]")))
    return failure();
  types.push_back(x);
  return success();
}

//===----------------------------------------------------------------------===//
// NllLossOp
//===----------------------------------------------------------------------===//

LogicalResult NllLossOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  StringRef name = getOperationName();
  RankedTensorType logProbs = tensorType(adaptor.getLogProbs());
  RankedTensorType target = tensorType(adaptor.getTarget());
  if (failed(checkMinRank(location, name, "log_probs", logProbs, 2,
                          "[N, C, ...]")))
    return failure();
  ArrayRef<int64_t> lpShape = logProbs.getShape();
  SmallVector<int64_t> targetShape = {lpShape[0]};
  llvm::append_range(targetShape, lpShape.drop_front(2));
  if (target.getShape() != ArrayRef<int64_t>(targetShape))
    return inferError(location, name, "expects target of shape [", targetShape,
                      "] ([N, d1, ...]), got ", target);
  if (Value weight = adaptor.getWeight()) {
    RankedTensorType weightType = tensorType(weight);
    if (weightType.getShape() != ArrayRef<int64_t>{lpShape[1]})
      return inferError(location, name, "expects weight of shape [", lpShape[1],
                        "], got ", weightType);
    if (failed(
            checkElementType(location, name, "weight", weightType, logProbs)))
      return failure();
  }
  StringRef reduction = adaptor.getReduction();
  if (reduction == "none")
    types.push_back(
        RankedTensorType::get(targetShape, logProbs.getElementType()));
  else if (reduction == "sum" || reduction == "mean")
    types.push_back(RankedTensorType::get({}, logProbs.getElementType()));
  else
    return inferError(location, name,
                      "expects reduction \"none\", \"sum\" or \"mean\", got \"",
                      reduction, "\"");
  return success();
}

//===----------------------------------------------------------------------===//
// LinearCrossEntropyOp
//===----------------------------------------------------------------------===//

/// The loss's type of nn.linear_cross_entropy and its gradient: rank 0 of
/// x's compute type (f32 for f16 and bf16, else x's). x [N, D] and w [D, V]
/// ([V, D] with transpose_b) have one element type (every float type of
/// the dialect has kernels), and there are N targets.
static FailureOr<RankedTensorType>
inferLinearCrossEntropy(std::optional<Location> loc, StringRef opName,
                        Value xValue, Value wValue, Value targetValue,
                        bool transposeB) {
  RankedTensorType x = tensorType(xValue), w = tensorType(wValue),
                   target = tensorType(targetValue);
  if (x.getRank() != 2)
    return inferError(loc, opName, "expects x of rank 2 ([N, D]), got ", x);
  if (failed(checkElementType(loc, opName, "w", w, x)))
    return failure();
  int64_t rows = x.getDimSize(0), width = x.getDimSize(1);
  if (w.getRank() != 2 || w.getDimSize(transposeB ? 1 : 0) != width)
    return inferError(loc, opName, "expects w of shape ",
                      transposeB ? "[V, " : "[", width,
                      transposeB ? "] (transpose_b)" : ", V]", ", got ", w);
  if (target.getShape() != ArrayRef<int64_t>{rows})
    return inferError(loc, opName, "expects target of shape [", rows,
                      "] (x's rows), got ", target);
  return RankedTensorType::get(
      {}, mlir::ztc::computeElementType(x.getElementType()));
}

LogicalResult LinearCrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> loss = inferLinearCrossEntropy(
      location, getOperationName(), adaptor.getX(), adaptor.getW(),
      adaptor.getTarget(), adaptor.getTransposeB());
  if (failed(loss))
    return failure();
  types.append({*loss, *loss});
  return success();
}

LogicalResult LinearCrossEntropyBackwardOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> loss = inferLinearCrossEntropy(
      location, getOperationName(), adaptor.getX(), adaptor.getW(),
      adaptor.getTarget(), adaptor.getTransposeB());
  if (failed(loss))
    return failure();
  RankedTensorType grad = tensorType(adaptor.getGrad());
  if (grad != *loss)
    return inferError(location, getOperationName(), "expects grad of type ",
                      *loss, " (the loss's), got ", grad);
  types.append({adaptor.getX().getType(), adaptor.getW().getType(), *loss});
  return success();
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

LogicalResult Conv2dBackwardDataOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  StringRef name = getOperationName();
  bool channelsLast = adaptor.getChannelsLast();
  RankedTensorType gradOutput =
      relayout(tensorType(adaptor.getGradOutput()), channelsLast, true);
  RankedTensorType weight = tensorType(adaptor.getWeight());
  ArrayRef<int64_t> inputSize = adaptor.getInputSize();
  auto group = static_cast<int64_t>(adaptor.getGroup());
  if (failed(checkRank(location, name, "grad_output", gradOutput, 4,
                       "[N, O, Ho, Wo]")) ||
      failed(checkRank(location, name, "weight", weight, 4,
                       "[O, C / group, kH, kW]")) ||
      failed(checkElementType(location, name, "weight", weight, gradOutput)) ||
      failed(checkArray(location, name, "input_size", inputSize, 2, 0)) ||
      failed(checkConvAttributes(location, name, adaptor.getStrides(),
                                 adaptor.getPads(), adaptor.getDilations(),
                                 group)))
    return failure();
  int64_t outChannels = weight.getDimSize(0);
  if (outChannels % group != 0)
    return inferError(location, name, "output channels (", outChannels,
                      ") must be divisible by group (", group, ")");
  std::optional<int64_t> channels =
      llvm::checkedMul(weight.getDimSize(1), group);
  if (!channels)
    return inferError(location, name, "input channels (", weight.getDimSize(1),
                      " times group ", group, ") overflow 64 bits");
  auto input = RankedTensorType::get(
      {gradOutput.getDimSize(0), *channels, inputSize[0], inputSize[1]},
      gradOutput.getElementType());
  SmallVector<Type, 1> forward;
  if (failed(inferWindowShape(
          location, name, input, outChannels, weight.getShape().drop_front(2),
          adaptor.getStrides(), adaptor.getPads(), adaptor.getDilations(),
          /*ceilMode=*/false, forward)) ||
      failed(checkGradOutput(location, name, forward.front(), gradOutput)))
    return failure();
  types.push_back(relayout(input, channelsLast, false));
  return success();
}

LogicalResult Conv2dBackwardFilterOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  StringRef name = getOperationName();
  bool channelsLast = adaptor.getChannelsLast();
  RankedTensorType input =
      relayout(tensorType(adaptor.getInput()), channelsLast, true);
  RankedTensorType gradOutput =
      relayout(tensorType(adaptor.getGradOutput()), channelsLast, true);
  ArrayRef<int64_t> kernel = adaptor.getKernel();
  auto group = static_cast<int64_t>(adaptor.getGroup());
  if (failed(checkRank(location, name, "input", input, 4, "[N, C, H, W]")) ||
      failed(checkRank(location, name, "grad_output", gradOutput, 4,
                       "[N, O, Ho, Wo]")) ||
      failed(
          checkElementType(location, name, "grad_output", gradOutput, input)) ||
      failed(checkArray(location, name, "kernel", kernel, 2, 1)) ||
      failed(checkConvAttributes(location, name, adaptor.getStrides(),
                                 adaptor.getPads(), adaptor.getDilations(),
                                 group)))
    return failure();
  int64_t channels = input.getDimSize(1);
  int64_t outChannels = gradOutput.getDimSize(1);
  if (channels % group != 0 || outChannels % group != 0)
    return inferError(location, name, "input channels (", channels,
                      ") and output channels (", outChannels,
                      ") must be divisible by group (", group, ")");
  SmallVector<Type, 1> forward;
  if (failed(inferWindowShape(location, name, input, outChannels, kernel,
                              adaptor.getStrides(), adaptor.getPads(),
                              adaptor.getDilations(), /*ceilMode=*/false,
                              forward)) ||
      failed(checkGradOutput(location, name, forward.front(), gradOutput)))
    return failure();
  types.push_back(RankedTensorType::get(
      {outChannels, channels / group, kernel[0], kernel[1]},
      input.getElementType()));
  return success();
}

LogicalResult MaxPool2dBackwardOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  StringRef name = getOperationName();
  bool channelsLast = adaptor.getChannelsLast();
  RankedTensorType x = tensorType(adaptor.getX());
  SmallVector<Type, 1> forward;
  if (failed(inferPool2d(location, name, relayout(x, channelsLast, true),
                         adaptor.getKernel(), adaptor.getStrides(),
                         adaptor.getPads(), adaptor.getDilations(),
                         adaptor.getCeilMode(), forward)) ||
      failed(checkGradOutput(location, name,
                             relayout(cast<RankedTensorType>(forward.front()),
                                      channelsLast, false),
                             tensorType(adaptor.getGradOutput()))))
    return failure();
  types.push_back(x);
  return success();
}

LogicalResult AvgPool2dBackwardOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  StringRef name = getOperationName();
  bool channelsLast = adaptor.getChannelsLast();
  RankedTensorType gradOutput =
      relayout(tensorType(adaptor.getGradOutput()), channelsLast, true);
  ArrayRef<int64_t> inputSize = adaptor.getInputSize();
  if (failed(checkRank(location, name, "grad_output", gradOutput, 4,
                       "[N, C, Ho, Wo]")) ||
      failed(checkArray(location, name, "input_size", inputSize, 2, 0)))
    return failure();
  auto input =
      RankedTensorType::get({gradOutput.getDimSize(0), gradOutput.getDimSize(1),
                             inputSize[0], inputSize[1]},
                            gradOutput.getElementType());
  SmallVector<Type, 1> forward;
  if (failed(inferPool2d(location, name, input, adaptor.getKernel(),
                         adaptor.getStrides(), adaptor.getPads(),
                         /*dilations=*/{1, 1}, adaptor.getCeilMode(),
                         forward)) ||
      failed(checkGradOutput(location, name, forward.front(), gradOutput)))
    return failure();
  types.push_back(relayout(input, channelsLast, false));
  return success();
}

LogicalResult ScatterAddOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> location,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  StringRef name = getOperationName();
  RankedTensorType data = tensorType(adaptor.getData());
  RankedTensorType indices = tensorType(adaptor.getIndices());
  RankedTensorType updates = tensorType(adaptor.getUpdates());
  auto axis = static_cast<int64_t>(adaptor.getAxis());
  if (failed(checkAxis(location, name, axis, data.getRank())) ||
      failed(checkElementType(location, name, "updates", updates, data)))
    return failure();
  SmallVector<int64_t> expected =
      gatherShape(data.getShape(), indices.getShape(), axis);
  if (updates.getShape() != ArrayRef<int64_t>(expected))
    return inferError(location, name, "expects updates of shape [", expected,
                      "] (data[:axis] + indices + data[axis+1:]), got ",
                      updates);
  types.push_back(data);
  return success();
}

LogicalResult InsertSliceOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> location,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  StringRef name = getOperationName();
  RankedTensorType dest = tensorType(adaptor.getDest());
  RankedTensorType source = tensorType(adaptor.getSource());
  if (failed(checkElementType(location, name, "source", source, dest)) ||
      failed(checkRank(location, name, "source", source, dest.getRank(),
                       "dest's rank")) ||
      failed(checkStridedWindow(location, name, "writes", dest.getShape(),
                                adaptor.getStarts(), source.getShape(),
                                adaptor.getSteps())))
    return failure();
  types.push_back(dest);
  return success();
}

#define GET_OP_CLASSES
#include "dialects/NN/IR/NNOps.cpp.inc"
