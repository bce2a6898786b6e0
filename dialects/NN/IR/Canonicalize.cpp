//===- Canonicalize.cpp - rewrite patterns of nn ops ------------*- C++ -*-===//
//
// The canonicalization patterns of the nn dialect, for rewrites a fold
// cannot express because they build new ops. One finds GELU written out
// as arithmetic, as exporters before ONNX's Gelu (opset 20) and Hugging
// Face's GPT-2 write it: each step of it was an op whose result the
// backward kept (three [tokens, 4 x width] tensors per MLP where PyTorch
// keeps the input alone), and `nn.gelu`'s backward needs only its input;
// another x * sigmoid(x), Llama's SiLU, which becomes `nn.silu` for the
// same reason.
// Another finds Llama's `rotate_half` (two slices, a negation and a
// concat) and makes it one `nn.rotate_half`, and the rotary embedding
// around it (`x * cos + rotate_half(x) * sin`) one `nn.rotary`; others find
// its RMSNorm (a mean of squares, a square root and a quotient, then the
// weight) and make it one `nn.layer_norm` with `rms`.
// The others undo what autodiff builds term by term where the whole is
// known:
//
//   - The gradient of a tensor that a model cuts into pieces (GPT-2's fused
//     q/k/v projection split three ways, ONNX Split, a Slice per head)
//     arrives as a sum of `nn.insert_slice`s of each piece's gradient into
//     zeros. Every one of those writes a whole tensor of zeros and the sum
//     reads them all; the pieces' gradients only need to sit side by side,
//     which is a concat, PyTorch's own backward of a split.
//   - A parameter both gathered and used otherwise (a tied embedding) has
//     as its gradient the sum of the other use's and a scatter of rows into
//     zeros: the scatter goes into the other term instead.
//   - The cross-entropy's gradient scatters each row's weight to its label
//     with a one-hot `nn.where`, and log-softmax's backward sums that row
//     again: a sum whose only non-zero term is the weight, so the sum is
//     the weight (where the label is a class). Without it the loss's
//     backward keeps two [tokens, vocabulary] tensors and a reduction over
//     the vocabulary; with it the whole backward is one elementwise loop.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::ztc::nn;

namespace {

/// The splat constant `value` is, looking through a broadcast of a scalar
/// (what autodiff builds before canonicalization folds it); null if none.
SplatElementsAttr splatConstant(Value value) {
  if (auto broadcast = value.getDefiningOp<BroadcastToOp>())
    return splatConstant(broadcast.getX());
  Attribute attr;
  if (!matchPattern(value, m_Constant(&attr)))
    return {};
  return dyn_cast<SplatElementsAttr>(attr);
}

/// Whether `value` is all zeros, float or integer.
bool isZeros(Value value) {
  SplatElementsAttr splat = splatConstant(value);
  if (!splat)
    return false;
  if (isa<FloatType>(splat.getElementType()))
    return splat.getSplatValue<APFloat>().isZero();
  if (splat.getElementType().isInteger())
    return splat.getSplatValue<APInt>().isZero();
  return false;
}

/// The value of a float constant that is one number, as a double.
std::optional<double> scalarValue(Value value) {
  SplatElementsAttr splat = splatConstant(value);
  if (!splat || !isa<FloatType>(splat.getElementType()))
    return std::nullopt;
  return splat.getSplatValue<APFloat>().convertToDouble();
}

/// Whether `value` is the constant `expected`, as a float32 constant holds
/// it (a relative 1e-6: a bf16 or f16 one is too coarse to tell).
bool isConstant(Value value, double expected) {
  std::optional<double> actual = scalarValue(value);
  return actual && std::fabs(*actual - expected) <= 1e-6 * std::fabs(expected);
}

/// The operand of a commutative binary op other than the constant
/// `expected`, or null when neither operand is that constant.
template <typename OpT> Value besideConstant(Value value, double expected) {
  auto op = value.getDefiningOp<OpT>();
  if (!op)
    return Value();
  if (isConstant(op.getRhs(), expected))
    return op.getLhs();
  if (isConstant(op.getLhs(), expected))
    return op.getRhs();
  return Value();
}

/// The factors of a product: `value`, with every nn.mul that only the
/// product reads expanded into its operands; once four factors are found
/// the rest stay as they are (a GELU has three).
void collectFactors(Value value, bool root, SmallVectorImpl<Value> &factors) {
  auto mul = value.getDefiningOp<MulOp>();
  if (mul && (root || mul->hasOneUse()) && factors.size() < 4) {
    collectFactors(mul.getLhs(), false, factors);
    collectFactors(mul.getRhs(), false, factors);
    return;
  }
  factors.push_back(value);
}

/// Whether `value` is x^3: nn.pow of x by 3, or x * x * x.
bool isCube(Value value, Value x) {
  if (auto pow = value.getDefiningOp<PowOp>())
    return pow.getLhs() == x && isConstant(pow.getRhs(), 3.0);
  SmallVector<Value> factors;
  collectFactors(value, true, factors);
  return factors.size() == 3 &&
         llvm::all_of(factors, [&](Value factor) { return factor == x; });
}

/// The GELU `approximate` of `onePlus`, 1 + f, the factor beside x and 0.5:
/// "none" for f = erf(x / sqrt(2)) (or of x times 1/sqrt(2)), "tanh" for
/// f = tanh(sqrt(2/pi) * (x + 0.044715 x^3)); none for anything else.
std::optional<StringRef> geluForm(Value onePlus, Value x) {
  Value f = besideConstant<AddOp>(onePlus, 1.0);
  if (!f)
    return std::nullopt;
  if (auto erf = f.getDefiningOp<ErfOp>()) {
    Value u = erf.getX();
    auto div = u.getDefiningOp<DivOp>();
    if ((div && div.getLhs() == x && isConstant(div.getRhs(), M_SQRT2)) ||
        besideConstant<MulOp>(u, M_SQRT1_2) == x)
      return StringRef("none");
    return std::nullopt;
  }
  auto tanh = f.getDefiningOp<TanhOp>();
  if (!tanh)
    return std::nullopt;
  Value polynomial = besideConstant<MulOp>(tanh.getX(), std::sqrt(2.0 / M_PI));
  auto add = polynomial ? polynomial.getDefiningOp<AddOp>() : AddOp();
  if (!add)
    return std::nullopt;
  for (auto [linear, cubic] : {std::pair(add.getLhs(), add.getRhs()),
                               std::pair(add.getRhs(), add.getLhs())}) {
    Value cube = besideConstant<MulOp>(cubic, 0.044715);
    if (linear == x && cube && isCube(cube, x))
      return StringRef("tanh");
  }
  return std::nullopt;
}

/// x * 0.5 * (1 + erf(x / sqrt(2))) or x * 0.5 * (1 + tanh(sqrt(2/pi) *
/// (x + 0.044715 x^3))), its three factors multiplied in any order, is
/// nn.gelu of x. The arithmetic is PyTorch's GELU kernel's rather than the
/// exported steps', so results can differ in the last bits.
struct GeluOfSteps : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> factors;
    collectFactors(op.getResult(), true, factors);
    if (factors.size() != 3)
      return failure();
    for (int half = 0; half < 3; ++half) {
      if (!isConstant(factors[half], 0.5))
        continue;
      for (int x = 0; x < 3; ++x) {
        if (x == half || factors[x].getType() != op.getType())
          continue;
        std::optional<StringRef> form =
            geluForm(factors[3 - half - x], factors[x]);
        if (!form)
          continue;
        rewriter.replaceOpWithNewOp<GeluOp>(op, op.getType(), factors[x],
                                            rewriter.getStringAttr(*form));
        return success();
      }
    }
    return failure();
  }
};

/// x * sigmoid(x), either way round, is nn.silu of x when nothing else
/// reads the sigmoid (Llama's SwiGLU as exporters write it): the backward
/// keeps x alone, not the sigmoid too, and a half x rounds once, as
/// PyTorch's silu kernel does.
struct SiluOfSigmoid : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [x, other] : {std::pair(op.getLhs(), op.getRhs()),
                            std::pair(op.getRhs(), op.getLhs())}) {
      auto sigmoid = other.getDefiningOp<SigmoidOp>();
      if (!sigmoid || sigmoid.getX() != x || !sigmoid->hasOneUse() ||
          x.getType() != op.getType())
        continue;
      rewriter.replaceOpWithNewOp<SiluOp>(op, op.getType(), x);
      return success();
    }
    return failure();
  }
};

/// One piece of a tensor cut along an axis: `size` indices from `start`,
/// holding `value`, or zeros where `value` is null.
struct Piece {
  int64_t start = 0, size = 0;
  Value value;
};

/// A tensor as pieces side by side along `axis`, in order, covering it.
struct Pieces {
  int64_t axis = 0;
  SmallVector<Piece> pieces;
};

/// The pieces of an `nn.insert_slice` of a piece into zeros: the slice has
/// unit steps and the destination's sizes in every dimension but one, where
/// it is the piece (zeros before and after it).
std::optional<Pieces> slabPieces(InsertSliceOp insert) {
  if (!isZeros(insert.getDest()))
    return std::nullopt;
  ArrayRef<int64_t> dest = insert.getType().getShape();
  ArrayRef<int64_t> source =
      cast<RankedTensorType>(insert.getSource().getType()).getShape();
  std::optional<int64_t> axis;
  for (auto [dim, start] : llvm::enumerate(insert.getStarts())) {
    if (insert.getSteps()[dim] != 1)
      return std::nullopt;
    if (source[dim] == dest[dim] && start == 0)
      continue;
    if (axis)
      return std::nullopt;
    axis = dim;
  }
  if (!axis)
    return std::nullopt;
  int64_t start = insert.getStarts()[*axis], size = source[*axis];
  Pieces result{static_cast<int64_t>(*axis), {}};
  if (start > 0)
    result.pieces.push_back({0, start, Value()});
  result.pieces.push_back({start, size, insert.getSource()});
  if (start + size < dest[*axis])
    result.pieces.push_back(
        {start + size, dest[*axis] - start - size, Value()});
  return result;
}

/// The pieces of `value` if it is a slab of zeros (above) or a concat,
/// whose zero operands are zero pieces.
std::optional<Pieces> piecesOf(Value value) {
  if (auto insert = value.getDefiningOp<InsertSliceOp>())
    return slabPieces(insert);
  auto concat = value.getDefiningOp<ConcatOp>();
  if (!concat)
    return std::nullopt;
  Pieces result{static_cast<int64_t>(concat.getAxis()), {}};
  int64_t start = 0;
  for (Value input : concat.getInputs()) {
    int64_t size =
        cast<RankedTensorType>(input.getType()).getDimSize(result.axis);
    result.pieces.push_back({start, size, isZeros(input) ? Value() : input});
    start += size;
  }
  return result;
}

/// `a + b` of two tensors cut along one axis, where no index holds a
/// non-zero piece on both sides, is the concat of their non-zero pieces
/// with zeros in the gaps: each element is x + 0 = x (up to the sign of a
/// zero: -0 + 0 is +0, which the concat keeps as -0, as PyTorch's split
/// backward does).
struct AddOfDisjointPieces : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    if (op.getLhs().getType() != type || op.getRhs().getType() != type ||
        !type.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "operands broadcast");
    std::optional<Pieces> lhs = piecesOf(op.getLhs()),
                          rhs = piecesOf(op.getRhs());
    if (!lhs || !rhs || lhs->axis != rhs->axis)
      return rewriter.notifyMatchFailure(op, "not pieces along one axis");
    SmallVector<Piece> filled;
    for (const Pieces *side : {&*lhs, &*rhs})
      for (const Piece &piece : side->pieces)
        if (piece.value)
          filled.push_back(piece);
    llvm::sort(filled, [](const Piece &a, const Piece &b) {
      return a.start < b.start;
    });
    for (size_t i = 1; i < filled.size(); ++i)
      if (filled[i - 1].start + filled[i - 1].size > filled[i].start)
        return rewriter.notifyMatchFailure(op, "pieces overlap");

    // The non-zero pieces in order, zeros in the gaps.
    int64_t axis = lhs->axis, end = type.getDimSize(axis);
    SmallVector<Value> inputs;
    int64_t at = 0;
    auto zeros = [&](int64_t size) {
      SmallVector<int64_t> shape(type.getShape());
      shape[axis] = size;
      auto gap = RankedTensorType::get(shape, type.getElementType());
      inputs.push_back(arith::ConstantOp::create(
          rewriter, op.getLoc(),
          DenseElementsAttr::get(gap,
                                 rewriter.getZeroAttr(type.getElementType()))));
    };
    for (const Piece &piece : filled) {
      if (piece.start > at)
        zeros(piece.start - at);
      inputs.push_back(piece.value);
      at = piece.start + piece.size;
    }
    if (at < end)
      zeros(end - at);
    rewriter.replaceOpWithNewOp<ConcatOp>(op, type, inputs,
                                          rewriter.getI64IntegerAttr(axis));
    return success();
  }
};

/// A sum of which one term is `nn.scatter_add` into zeros (gather's
/// gradient) becomes that scatter into the other term: a parameter both
/// gathered and used otherwise (GPT-2's tied embedding and head). The sum
/// was a tensor of zeros the size of the parameter, the scatter's copy of
/// it, and the sum's reads of both; the scatter into the other term only
/// adds the gathered rows, and writes over that term where nothing reads
/// it after (ztc-write-in-place). Each sum adds the other term first where
/// it added it last: a rounding of the order, as PyTorch's accumulation of
/// a parameter's gradients in place has.
struct AddOfScatterIntoZeros : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    for (auto [term, other] : {std::pair(op.getLhs(), op.getRhs()),
                               std::pair(op.getRhs(), op.getLhs())}) {
      auto scatter = term.getDefiningOp<ScatterAddOp>();
      if (!scatter || !scatter->hasOneUse() || scatter.getType() != type ||
          other.getType() != type || !isZeros(scatter.getData()))
        continue;
      rewriter.replaceOpWithNewOp<ScatterAddOp>(
          op, type, other, scatter.getIndices(), scatter.getUpdates(),
          scatter.getAxisAttr());
      return success();
    }
    return rewriter.notifyMatchFailure(op, "no term scatters into zeros");
  }
};

/// Whether `value` is a constant integer tensor that counts 0, 1, ...,
/// `count` - 1 along `axis`, of `rank` dimensions, every other one 1: the
/// class indices a one-hot comparison tests labels against.
bool isIota(Value value, int64_t rank, int64_t axis, int64_t count) {
  Attribute attr;
  if (!matchPattern(value, m_Constant(&attr)))
    return false;
  auto ints = dyn_cast<DenseIntElementsAttr>(attr);
  if (!ints)
    return false;
  ArrayRef<int64_t> shape = ints.getType().getShape();
  if (static_cast<int64_t>(shape.size()) != rank || shape[axis] != count)
    return false;
  for (auto [dim, size] : llvm::enumerate(shape))
    if (static_cast<int64_t>(dim) != axis && size != 1)
      return false;
  int64_t expected = 0;
  for (const APInt &element : ints.getValues<APInt>())
    if (element.getSExtValue() != expected++)
      return false;
  return true;
}

/// A sum along `axis` of `where(iota == label, x, 0)`, where the iota
/// counts the classes along `axis` and neither `label` nor `x` varies
/// along it, has one non-zero term at most: it is `x` where
/// `0 <= label < classes`, else 0. (Exactly: adding zeros changes nothing
/// but the sign of a zero x.)
struct SumOfOneHot : OpRewritePattern<ReduceSumOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReduceSumOp op,
                                PatternRewriter &rewriter) const override {
    auto where = op.getX().getDefiningOp<WhereOp>();
    if (op.getAxes().size() != 1 || !where || !isZeros(where.getB()))
      return rewriter.notifyMatchFailure(op, "not a sum of a selection");
    RankedTensorType type = where.getType();
    int64_t rank = type.getRank(), axis = op.getAxes()[0];
    if (!type.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic shape");
    auto equal = where.getCond().getDefiningOp<EqualOp>();
    if (!equal)
      return rewriter.notifyMatchFailure(op, "not a one-hot selection");
    // The label side: the comparison's other operand, one per row. Every
    // index along the axis is a class, each tested once.
    int64_t classes = type.getDimSize(axis);
    Value label;
    if (isIota(equal.getLhs(), rank, axis, classes))
      label = equal.getRhs();
    else if (isIota(equal.getRhs(), rank, axis, classes))
      label = equal.getLhs();
    auto constantAlongAxis = [&](Value v) {
      auto t = cast<RankedTensorType>(v.getType());
      int64_t at = axis - (rank - t.getRank());
      return at < 0 || t.getDimSize(at) == 1;
    };
    // So the selection below, of label, x and the zeros, has the kept
    // shape's elements: it needs at most a reshape.
    if (!label || !constantAlongAxis(label) ||
        !constantAlongAxis(where.getA()) || !constantAlongAxis(where.getB()))
      return rewriter.notifyMatchFailure(op, "not one class per row");

    // where(0 <= label < classes, x, 0), of the kept shape.
    Location loc = op.getLoc();
    Type indexType = cast<RankedTensorType>(label.getType()).getElementType();
    auto scalar = [&](int64_t v) -> Value {
      auto t = RankedTensorType::get({}, indexType);
      return arith::ConstantOp::create(
          rewriter, loc,
          DenseElementsAttr::get(t, rewriter.getIntegerAttr(indexType, v)));
    };
    Value below = LessOp::create(rewriter, loc, label, scalar(0));
    Value under =
        LessOp::create(rewriter, loc, label, scalar(type.getDimSize(axis)));
    Value inRange = AndOp::create(
        rewriter, loc, NotOp::create(rewriter, loc, below.getType(), below),
        under);
    Value picked =
        WhereOp::create(rewriter, loc, inRange, where.getA(), where.getB());
    if (picked.getType() != op.getType())
      picked = ReshapeOp::create(rewriter, loc, op.getType(), picked);
    rewriter.replaceOp(op, picked);
    return success();
  }
};

/// The tensor `value` slices when it is the first (`half` 0) or second
/// half of that tensor's last dimension, whole in every other dimension,
/// at unit steps; null otherwise.
Value halfOf(Value value, int64_t half) {
  auto slice = value.getDefiningOp<SliceOp>();
  if (!slice)
    return Value();
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(slice.getX().getType()).getShape();
  if (shape.empty() || shape.back() % 2 != 0)
    return Value();
  const size_t last = shape.size() - 1;
  const int64_t size = shape.back() / 2;
  for (size_t dim = 0; dim < shape.size(); ++dim) {
    int64_t start = dim == last ? half * size : 0;
    int64_t extent = dim == last ? size : shape[dim];
    if (slice.getStarts()[dim] != start || slice.getSizes()[dim] != extent ||
        slice.getSteps()[dim] != 1)
      return Value();
  }
  return slice.getX();
}

/// `concat(-x2, x1)` along the last dimension, x1 and x2 the halves of a
/// float tensor's last dimension, is nn.rotate_half of that tensor (Hugging
/// Face's `rotate_half`, in Llama's rotary embedding); `concat(x2, -x1)`
/// is its inverse. Two slices, a negation and a concat (five kernels) are
/// one, and so is their backward; the elements are the same.
struct RotateHalfOfSlices : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    if (op.getInputs().size() != 2 ||
        static_cast<int64_t>(op.getAxis()) != type.getRank() - 1 ||
        !isa<FloatType>(type.getElementType()))
      return rewriter.notifyMatchFailure(op, "not two halves of floats");
    Value first = op.getInputs()[0], second = op.getInputs()[1];
    for (bool inverse : {false, true}) {
      auto neg = (inverse ? second : first).getDefiningOp<NegOp>();
      if (!neg)
        continue;
      Value upper = inverse ? first : neg.getX();
      Value lower = inverse ? neg.getX() : second;
      Value x = halfOf(upper, 1);
      if (!x || halfOf(lower, 0) != x || x.getType() != type)
        continue;
      rewriter.replaceOpWithNewOp<RotateHalfOp>(op, type, x,
                                                rewriter.getBoolAttr(inverse));
      return success();
    }
    return rewriter.notifyMatchFailure(op, "not a turn of the halves");
  }
};

/// The factor beside `x` in `product`, a single-use nn.mul, or null.
Value factorBeside(Value product, Value x) {
  auto mul = product.getDefiningOp<MulOp>();
  if (!mul || !mul->hasOneUse())
    return {};
  if (mul.getLhs() == x)
    return mul.getRhs();
  if (mul.getRhs() == x)
    return mul.getLhs();
  return {};
}

/// `x * cos + rotate_half(x) * sin` (either order of each sum and product)
/// is nn.rotary: Llama's rotary embedding in one kernel each way, where
/// the turn and a loop over x, its turn and both tables were two. The
/// tables have one type, broadcast to x's (the products are x's type), and
/// only the sum reads the products and the turn.
struct RotaryOfSum : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [first, second] : {std::pair(op.getLhs(), op.getRhs()),
                                 std::pair(op.getRhs(), op.getLhs())}) {
      auto turned = second.getDefiningOp<MulOp>();
      if (!turned)
        continue;
      for (Value side : {turned.getLhs(), turned.getRhs()}) {
        auto turn = side.getDefiningOp<RotateHalfOp>();
        if (!turn || turn.getInverse() || !turn->hasOneUse())
          continue;
        Value x = turn.getX();
        Value sin = factorBeside(second, side);
        Value cos = factorBeside(first, x);
        if (!sin || !cos || x.getType() != op.getType() ||
            second.getType() != op.getType() ||
            first.getType() != op.getType() || cos.getType() != sin.getType() ||
            cast<RankedTensorType>(cos.getType()).getRank() >
                op.getType().getRank())
          continue;
        rewriter.replaceOpWithNewOp<RotaryOp>(op, op.getType(), x, cos, sin,
                                              rewriter.getBoolAttr(false));
        return success();
      }
    }
    return rewriter.notifyMatchFailure(op, "not x * cos + turn(x) * sin");
  }
};

/// Whether `value` is x squared: nn.pow of x by 2, or x * x.
bool isSquare(Value value, Value x) {
  if (auto pow = value.getDefiningOp<PowOp>())
    return pow.getLhs() == x && isConstant(pow.getRhs(), 2.0);
  auto mul = value.getDefiningOp<MulOp>();
  return mul && mul.getLhs() == x && mul.getRhs() == x;
}

/// Where a root-mean-square normalization of a tensor normalizes, and by
/// what it shifts the mean square.
struct RmsForm {
  int64_t axis;
  double epsilon;
};

/// The form of `root` when it is sqrt(mean(x^2) + epsilon): the mean over
/// dimensions `axis` to the last of x, keeping them, of nn.pow(x, 2) or x
/// * x, plus a constant (either order). Each step is read by the next
/// alone, so that nothing of it stays beside the op that replaces it.
std::optional<RmsForm> rootMeanSquareOf(Value root, Value x) {
  auto sqrt = root.getDefiningOp<SqrtOp>();
  auto add =
      sqrt && sqrt->hasOneUse() ? sqrt.getX().getDefiningOp<AddOp>() : AddOp();
  if (!add || !add->hasOneUse())
    return std::nullopt;
  auto type = cast<RankedTensorType>(x.getType());
  for (auto [term, shift] : {std::pair(add.getLhs(), add.getRhs()),
                             std::pair(add.getRhs(), add.getLhs())}) {
    std::optional<double> epsilon = scalarValue(shift);
    auto mean = term.getDefiningOp<ReduceMeanOp>();
    if (!epsilon || *epsilon < 0 || !mean || !mean->hasOneUse() ||
        !mean.getKeepdims() || add.getType() != mean.getType() ||
        !mean.getX().hasOneUse() || !isSquare(mean.getX(), x))
      continue;
    // The axes: every dimension from the first of them to the last.
    ArrayRef<int64_t> axes = mean.getAxes();
    if (axes.empty() || axes.back() != type.getRank() - 1 ||
        axes.back() - axes.front() + 1 != static_cast<int64_t>(axes.size()))
      continue;
    return RmsForm{axes.front(), *epsilon};
  }
  return std::nullopt;
}

/// `op`, which computes x over sqrt(mean(x^2) + epsilon), as nn.layer_norm
/// with `rms` and a scale of ones (ScaledNorm below takes a scale that
/// multiplies it into the op).
LogicalResult replaceByRmsNorm(PatternRewriter &rewriter, Operation *op,
                               Value x, Value root) {
  auto type = dyn_cast<RankedTensorType>(x.getType());
  if (!type || !isa<FloatType>(type.getElementType()) || type.getRank() == 0 ||
      op->getResult(0).getType() != type)
    return rewriter.notifyMatchFailure(op, "not a float tensor's quotient");
  std::optional<RmsForm> form = rootMeanSquareOf(root, x);
  if (!form)
    return rewriter.notifyMatchFailure(op, "not over a root mean square");
  auto scaleType = RankedTensorType::get(type.getShape().drop_front(form->axis),
                                         type.getElementType());
  Value ones = arith::ConstantOp::create(
      rewriter, op->getLoc(),
      DenseElementsAttr::get(scaleType,
                             rewriter.getFloatAttr(type.getElementType(), 1)));
  rewriter.replaceOpWithNewOp<LayerNormOp>(op, x, ones, Value(), form->axis,
                                           form->epsilon, /*rms=*/true);
  return success();
}

/// x * (1 / sqrt(mean(x^2) + epsilon)), in either order, is x's
/// root-mean-square normalization (Hugging Face's LlamaRMSNorm, whose
/// `torch.rsqrt` exports as a reciprocal of a square root): a squaring, a
/// mean, a sum, a square root, a reciprocal and a product, each a kernel
/// whose result the backward kept, are one op and one backward kernel.
/// The arithmetic is the layer norm kernel's rather than the exported
/// steps', so results can differ in the last bits.
struct RmsNormOfProduct : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [x, factor] : {std::pair(op.getLhs(), op.getRhs()),
                             std::pair(op.getRhs(), op.getLhs())}) {
      auto reciprocal = factor.getDefiningOp<ReciprocalOp>();
      if (reciprocal && reciprocal->hasOneUse() &&
          rootMeanSquareOf(reciprocal.getX(), x))
        return replaceByRmsNorm(rewriter, op, x, reciprocal.getX());
    }
    return rewriter.notifyMatchFailure(op, "not x times a reciprocal");
  }
};

/// x / sqrt(mean(x^2) + epsilon): the same normalization (ONNX's
/// RMSNormalization as its function body writes it).
struct RmsNormOfQuotient : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp op,
                                PatternRewriter &rewriter) const override {
    return replaceByRmsNorm(rewriter, op, op.getLhs(), op.getRhs());
  }
};

/// A layer norm without a bias whose scale is ones, multiplied by a tensor
/// of the scale's type, is the layer norm with that tensor as its scale:
/// the learned weight of an RMSNorm (or of a layer norm written with
/// elementwise_affine off and a product after it). The products' order
/// rounds once where it rounded twice.
struct ScaledNorm : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [normalized, scale] : {std::pair(op.getLhs(), op.getRhs()),
                                     std::pair(op.getRhs(), op.getLhs())}) {
      auto norm = normalized.getDefiningOp<LayerNormOp>();
      if (!norm || !norm->hasOneUse() || norm.getBias() ||
          !isConstant(norm.getScale(), 1.0) ||
          scale.getType() != norm.getScale().getType() ||
          op.getType() != norm.getType())
        continue;
      rewriter.replaceOpWithNewOp<LayerNormOp>(
          op, norm.getX(), scale, Value(), norm.getAxis(),
          norm.getEpsilon().convertToDouble(), norm.getRms());
      return success();
    }
    return rewriter.notifyMatchFailure(op, "not a unit-scaled norm's product");
  }
};

} // namespace

void DivOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                        MLIRContext *context) {
  patterns.add<RmsNormOfQuotient>(context);
}

void ConcatOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<RotateHalfOfSlices>(context);
}

void ReduceSumOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<SumOfOneHot>(context);
}

void MulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                        MLIRContext *context) {
  patterns.add<GeluOfSteps, SiluOfSigmoid, RmsNormOfProduct, ScaledNorm>(
      context);
}

void AddOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                        MLIRContext *context) {
  patterns.add<AddOfDisjointPieces, AddOfScatterIntoZeros, RotaryOfSum>(
      context);
}
