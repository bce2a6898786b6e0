//===- FuseAttention.cpp - the ztc-fuse-attention pass --------------------===//
//
// Recognizes scaled-dot-product attention as the ONNX importer leaves it in
// nn (a matrix product of queries and transposed keys, a constant scale, a
// causal or additive constant mask, a softmax over the keys, a product with
// the values) and replaces it with one nn.attention, whose kernels never
// hold the scores or the probabilities. See the pass description in
// Passes.td; the code follows its numbered steps.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <optional>

namespace mlir::ztc {
#define GEN_PASS_DEF_FUSEATTENTIONPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// A value's only reader, if it has exactly one use.
Operation *soleUser(Value value) {
  return value.hasOneUse() ? *value.getUsers().begin() : nullptr;
}

/// The splat value of a constant float tensor, if `value` is one.
std::optional<double> splatConstant(Value value) {
  DenseFPElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !attr.isSplat())
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

/// Whether `fill` drops a score: exp(fill - max) is 0 for any maximum a
/// finite score reaches (-inf, or the float minimum Hugging Face writes).
bool dropsScore(Value fill) {
  std::optional<double> value = splatConstant(fill);
  return value && *value <= -1e30;
}

/// Whether the constant i1 `cond` is, broadcast over leading dimensions of
/// size 1, the pattern "key j after query i" (`future` true: j > i; false:
/// j <= i) of scores of shape [..., tq, tk].
bool isCausalPattern(Value cond, int64_t tq, int64_t tk, bool future) {
  DenseIntElementsAttr attr;
  if (!matchPattern(cond, m_Constant(&attr)))
    return false;
  auto type = cast<RankedTensorType>(attr.getType());
  ArrayRef<int64_t> shape = type.getShape();
  if (shape.size() < 2 || shape[shape.size() - 2] != tq || shape.back() != tk ||
      llvm::any_of(shape.drop_back(2), [](int64_t dim) { return dim != 1; }))
    return false;
  int64_t index = 0;
  for (APInt bit : attr.getValues<APInt>()) {
    int64_t i = index / tk, j = index % tk;
    if (bit.isOne() != (future ? j > i : j <= i))
      return false;
    ++index;
  }
  return true;
}

/// Whether `mask` is a constant additive causal bias of scores [..., tq,
/// tk]: 0 where key j <= query i and at most -1e30 (-inf, or the float
/// minimum) where j > i, its leading dimensions (any number) 1. ONNX
/// Attention's `is_causal` converts to one.
bool isCausalBias(Value mask, int64_t tq, int64_t tk) {
  DenseFPElementsAttr attr;
  if (!matchPattern(mask, m_Constant(&attr)))
    return false;
  ArrayRef<int64_t> shape = attr.getType().getShape();
  if (shape.size() < 2 || shape[shape.size() - 2] != tq || shape.back() != tk ||
      llvm::any_of(shape.drop_back(2), [](int64_t dim) { return dim != 1; }))
    return false;
  int64_t index = 0;
  for (const APFloat &value : attr.getValues<APFloat>()) {
    int64_t i = index / tk, j = index % tk;
    double bias = value.convertToDouble();
    if (j <= i ? bias != 0.0 : !(bias <= -1e30))
      return false;
    ++index;
  }
  return true;
}

/// What steps 2 to 4 find between the softmax and the first product.
struct Match {
  nn::MatMulOp scores;
  /// The product's operands behind their scales (q and kᵀ).
  Value q, keysT;
  double scale = 1.0;
  /// Gemma 2's cap on the scaled scores (0: none).
  double softcap = 0.0;
  bool causal = false;
  Value mask;
  /// The ops the fused op replaces, the final product last.
  SmallVector<Operation *> chain;
};

/// Step 1: PyTorch's exporter guards the probabilities against NaN,
/// where(not(equal(p, p)), 0, p), before the product with v. Returns the
/// guarded p (or `x` itself, when unguarded) and puts the guard's ops in
/// `guard`, in order; nullptr when the guard is read elsewhere. The fused
/// op has no guard: its probabilities are NaN only where the scores are
/// (a finite score and a finite or causal mask give none), and then
/// so is the step's loss.
Value matchNanGuard(Value x, SmallVector<Operation *> &guard) {
  auto where = x.getDefiningOp<nn::WhereOp>();
  if (!where)
    return x;
  auto isNot = where.getCond().getDefiningOp<nn::NotOp>();
  auto equal = isNot ? isNot.getX().getDefiningOp<nn::EqualOp>() : nullptr;
  Value p = where.getB();
  std::optional<double> fill = splatConstant(where.getA());
  if (!equal || equal.getLhs() != p || equal.getRhs() != p || !fill ||
      *fill != 0.0 || !where.getResult().hasOneUse() ||
      !isNot.getResult().hasOneUse() || !equal.getResult().hasOneUse() ||
      p.getType() != x.getType() ||
      llvm::any_of(p.getUsers(), [&](Operation *user) {
        return user != equal && user != where;
      }))
    return nullptr;
  guard = {equal, isNot, where};
  return p;
}

/// Step 2: the masking right before the softmax, if any. `x` is the
/// softmax's input; returns the value before the mask.
Value matchMask(Value x, Match &match) {
  auto scoresType = cast<RankedTensorType>(x.getType());
  int64_t rank = scoresType.getRank();
  int64_t tq = scoresType.getDimSize(rank - 2),
          tk = scoresType.getDimSize(rank - 1);
  if (auto where = x.getDefiningOp<nn::WhereOp>()) {
    // where(future, -inf, s) or where(past, s, -inf).
    for (bool future : {true, false}) {
      Value fill = future ? where.getA() : where.getB();
      Value scores = future ? where.getB() : where.getA();
      if (scores.getType() == scoresType && dropsScore(fill) &&
          isCausalPattern(where.getCond(), tq, tk, future)) {
        match.causal = true;
        match.chain.push_back(where);
        return scores;
      }
    }
    return nullptr;
  }
  if (auto add = x.getDefiningOp<nn::AddOp>()) {
    for (auto [scores, mask] : {std::pair(add.getLhs(), add.getRhs()),
                                std::pair(add.getRhs(), add.getLhs())}) {
      auto maskType = cast<RankedTensorType>(mask.getType());
      // A constant mask, of at most the scores' rank, that broadcasts in
      // place: it needs no gradient, which nn.attention does not give. A
      // causal bias is the `causal` flag instead (the kernels skip the
      // keys it drops).
      if (scores.getType() != scoresType || !matchPattern(mask, m_Constant()) ||
          maskType.getRank() > rank ||
          maskType.getElementType() != scoresType.getElementType())
        continue;
      match.chain.push_back(add);
      if (isCausalBias(mask, tq, tk))
        match.causal = true;
      else
        match.mask = mask;
      return scores;
    }
    return nullptr;
  }
  return x;
}

/// Step 2b: a cap on the scaled scores before the mask, c * tanh(s / c)
/// (Gemma 2's attention logit softcapping; ONNX Attention's `softcap` as
/// its conversion writes it), the division also as a product by 1 / c.
/// Returns s, or `x` itself when there is none.
Value matchSoftcap(Value x, Match &match) {
  auto outer = x.getDefiningOp<nn::MulOp>();
  if (!outer || !x.hasOneUse())
    return x;
  Value capped = outer.getLhs();
  std::optional<double> cap = splatConstant(outer.getRhs());
  if (!cap) {
    capped = outer.getRhs();
    cap = splatConstant(outer.getLhs());
  }
  auto tanh = cap ? capped.getDefiningOp<nn::TanhOp>() : nullptr;
  if (!tanh || !capped.hasOneUse() || capped.getType() != x.getType() ||
      !(*cap > 0) || !std::isfinite(*cap))
    return x;
  Value divided = tanh.getX();
  Operation *op = divided.getDefiningOp();
  if (!isa_and_nonnull<nn::DivOp, nn::MulOp>(op) || !divided.hasOneUse())
    return x;
  Value scores = op->getOperand(0);
  std::optional<double> divisor = splatConstant(op->getOperand(1));
  if (isa<nn::MulOp>(op)) {
    if (!divisor) {
      scores = op->getOperand(1);
      divisor = splatConstant(op->getOperand(0));
    }
    if (divisor)
      divisor = 1.0 / *divisor;
  }
  if (!divisor || scores.getType() != x.getType() ||
      std::abs(*divisor - *cap) > 1e-6 * *cap)
    return x;
  match.softcap = *cap;
  match.chain.append({outer, tanh, op});
  return scores;
}

/// Step 3: the constant scale, if any; returns the product it scales.
Value matchScale(Value x, Match &match) {
  Operation *op = x.getDefiningOp();
  if (!isa_and_nonnull<nn::MulOp, nn::DivOp>(op) || !x.hasOneUse())
    return x;
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  std::optional<double> factor;
  if (isa<nn::DivOp>(op)) {
    if (std::optional<double> divisor = splatConstant(rhs))
      factor = 1.0 / *divisor;
  } else if (!(factor = splatConstant(rhs)) && (factor = splatConstant(lhs))) {
    std::swap(lhs, rhs);
  }
  // The scale broadcasts against the product without changing its shape.
  if (!factor || lhs.getType() != x.getType())
    return nullptr;
  match.scale = *factor;
  match.chain.push_back(op);
  return lhs;
}

/// `value` as `tensor * factor`: an nn.mul of a tensor of `value`'s type
/// by a constant splat, read by nothing but `value`'s one reader. The
/// scales attention folds into its own (steps 4 and 6).
struct ConstantFactor {
  nn::MulOp mul;
  Value tensor;
  double factor;
};
std::optional<ConstantFactor> constantFactor(Value value) {
  auto mul = value.getDefiningOp<nn::MulOp>();
  if (!mul || !value.hasOneUse() || mul.getLhs().getType() != value.getType())
    return std::nullopt;
  std::optional<double> factor = splatConstant(mul.getRhs());
  if (!factor)
    return std::nullopt;
  return ConstantFactor{mul, mul.getLhs(), *factor};
}

/// Step 4, second form: the scale split over the product's operands,
/// (q * a)(kᵀ * b) as PyTorch's exporter writes it (a = b = D^-1/4): the
/// scale a * b, and q and kᵀ behind them. The ops go to `chain`.
void matchSplitScale(Match &match) {
  for (bool keys : {false, true}) {
    std::optional<ConstantFactor> scaled =
        constantFactor(keys ? match.scores.getB() : match.scores.getA());
    if (!scaled)
      continue;
    match.scale *= scaled->factor;
    (keys ? match.keysT : match.q) = scaled->tensor;
    match.chain.push_back(scaled->mul);
  }
}

/// Steps 1 to 4 from the final product `pv`: softmax(cap(scale * q kᵀ)
/// [+ mask]) times v, every intermediate read only by the next.
std::optional<Match> matchAttention(nn::MatMulOp pv) {
  SmallVector<Operation *> guard;
  Value probabilities = matchNanGuard(pv.getA(), guard);
  if (!probabilities)
    return std::nullopt;
  auto softmax = probabilities.getDefiningOp<nn::SoftmaxOp>();
  if (!softmax || (guard.empty() && !softmax.getResult().hasOneUse()) ||
      static_cast<int64_t>(softmax.getAxis()) !=
          softmax.getType().getRank() - 1)
    return std::nullopt;
  Match match;
  match.chain.push_back(softmax);
  Value x = softmax.getX();
  if (!x.hasOneUse())
    return std::nullopt;
  Value masked = matchMask(x, match);
  if (!masked || (masked != x && !masked.hasOneUse()))
    return std::nullopt;
  Value scaled = matchSoftcap(masked, match);
  Value product = matchScale(scaled, match);
  if (!product)
    return std::nullopt;
  match.scores = product.getDefiningOp<nn::MatMulOp>();
  if (!match.scores || !product.hasOneUse())
    return std::nullopt;
  match.chain.push_back(match.scores);
  match.q = match.scores.getA();
  match.keysT = match.scores.getB();
  matchSplitScale(match);
  std::reverse(match.chain.begin(), match.chain.end());
  match.chain.append(guard.begin(), guard.end());
  match.chain.push_back(pv);
  return match;
}

/// The k behind PyTorch's exporter's kᵀ: reshape(transpose(reshape(k)))
/// that merges k's batch dimensions, swaps the last two and splits the
/// batch again. nullptr for other forms.
Value keysBehindMergedTranspose(Value keysT) {
  auto split = keysT.getDefiningOp<nn::ReshapeOp>();
  auto transpose =
      split ? split.getX().getDefiningOp<nn::TransposeOp>() : nullptr;
  auto merge =
      transpose ? transpose.getX().getDefiningOp<nn::ReshapeOp>() : nullptr;
  if (!merge)
    return nullptr;
  Value k = merge.getX();
  auto kType = cast<RankedTensorType>(k.getType());
  auto mergedType = cast<RankedTensorType>(merge.getType());
  int64_t rank = kType.getRank(), merged = mergedType.getRank();
  ArrayRef<int64_t> perm = transpose.getPerm();
  if (rank < 2 || merged < 2)
    return nullptr;
  // The merge keeps k's last two dimensions, the transpose swaps just them.
  if (mergedType.getShape().take_back(2) != kType.getShape().take_back(2))
    return nullptr;
  for (int64_t i = 0; i < merged; ++i) {
    int64_t want = i == merged - 1   ? merged - 2
                   : i == merged - 2 ? merged - 1
                                     : i;
    if (perm[i] != want)
      return nullptr;
  }
  // The split gives back k's batch dimensions, with the last two swapped.
  SmallVector<int64_t> swapped(kType.getShape());
  std::swap(swapped[rank - 1], swapped[rank - 2]);
  if (cast<RankedTensorType>(keysT.getType()).getShape() !=
      ArrayRef<int64_t>(swapped))
    return nullptr;
  return k;
}

/// `kᵀ` ([..., D, Tk]) as k ([..., Tk, D]): the k of PyTorch's exporter's
/// merged transpose, the transpose that made kᵀ composed with the swap of
/// the last two dimensions, or a new transpose.
Value untranspose(OpBuilder &b, Location loc, Value keysT) {
  if (Value k = keysBehindMergedTranspose(keysT))
    return k;
  int64_t rank = cast<RankedTensorType>(keysT.getType()).getRank();
  auto swap = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(swap[rank - 1], swap[rank - 2]);
  Value source = keysT;
  SmallVector<int64_t> perm = swap;
  if (auto transpose = keysT.getDefiningOp<nn::TransposeOp>()) {
    source = transpose.getX();
    for (int64_t i = 0; i < rank; ++i)
      perm[i] = transpose.getPerm()[swap[i]];
  }
  if (llvm::equal(perm, llvm::seq<int64_t>(0, rank)))
    return source;
  return nn::TransposeOp::create(b, loc, source, perm);
}

/// The `[B, Hkv, T, D]` heads that `value` ([B, H, T, D]) repeats, each
/// H / Hkv times in place, as Hugging Face's `repeat_kv` and ONNX
/// Attention's `kv_num_heads` write it: a reshape to [B, Hkv, 1, T, D], a
/// broadcast along the unit dimension and a reshape merging it into the
/// heads. Null for anything else, or for one head repeated once.
Value repeatedHeadsSource(Value value) {
  auto merge = value.getDefiningOp<nn::ReshapeOp>();
  auto broadcast =
      merge ? merge.getX().getDefiningOp<nn::BroadcastToOp>() : nullptr;
  if (!broadcast)
    return Value();
  ArrayRef<int64_t> out = cast<RankedTensorType>(value.getType()).getShape();
  ArrayRef<int64_t> wide = broadcast.getType().getShape();
  ArrayRef<int64_t> narrow =
      cast<RankedTensorType>(broadcast.getX().getType()).getShape();
  if (out.size() != 4 || wide.size() != 5 || narrow.size() != 5 ||
      wide[2] < 2 || narrow[2] != 1 || wide[1] * wide[2] != out[1] ||
      wide[0] != out[0] || wide[3] != out[2] || wide[4] != out[3] ||
      narrow[0] != wide[0] || narrow[1] != wide[1] || narrow[3] != wide[3] ||
      narrow[4] != wide[4])
    return Value();
  auto unsqueeze = broadcast.getX().getDefiningOp<nn::ReshapeOp>();
  if (!unsqueeze)
    return Value();
  Value source = unsqueeze.getX();
  auto type = cast<RankedTensorType>(source.getType());
  if (type.getShape() != ArrayRef<int64_t>{out[0], wide[1], out[2], out[3]})
    return Value();
  return source;
}

/// Erases the repeat that made `value` from its source, op by op, as far
/// as nothing else reads it.
void eraseUnreadRepeat(Value value) {
  for (int step = 0; step < 3 && value.use_empty(); ++step) {
    Operation *op = value.getDefiningOp();
    value = op->getOperand(0);
    op->erase();
  }
}

/// Step 8: an operand that is a rotary embedding of a head split,
/// `nn.rotary (nn.transpose %x {perm = [0, 2, 1, 3]}), %cos, %sin`, each
/// read only by the next: the rotary runs on %x ([B, T, H, D], as the
/// projection stores it), its tables' dimensions 1 and 2 swapped, and the
/// split follows it, next to attention, which then reads it in place
/// (ztc-fold-transposes). Its gradient's split, built from this by
/// autodiff, folds into the backward kernel's writes the same way.
void rotateBeforeSplit(OpBuilder &b, OpOperand &operand) {
  auto rotary = operand.get().getDefiningOp<nn::RotaryOp>();
  if (!rotary || !rotary->hasOneUse())
    return;
  auto split = rotary.getX().getDefiningOp<nn::TransposeOp>();
  const int64_t headSplit[] = {0, 2, 1, 3};
  if (!split || !split->hasOneUse() ||
      split.getPerm() != ArrayRef<int64_t>(headSplit))
    return;
  auto table = cast<RankedTensorType>(rotary.getCos().getType());
  SmallVector<int64_t> shape(4 - table.getRank(), 1);
  llvm::append_range(shape, table.getShape());
  SmallVector<int64_t> swapped = {shape[0], shape[2], shape[1], shape[3]};
  b.setInsertionPoint(rotary);
  Location loc = rotary.getLoc();
  // Moving a dimension of size 1 moves no element: a reshape (a view).
  auto swap = [&](Value t) -> Value {
    Type element = table.getElementType();
    if (table.getShape() == ArrayRef<int64_t>(swapped))
      return t;
    if (shape[1] == 1 || shape[2] == 1)
      return nn::ReshapeOp::create(b, loc,
                                   RankedTensorType::get(swapped, element), t);
    if (table.getRank() < 4)
      t = nn::ReshapeOp::create(b, loc, RankedTensorType::get(shape, element),
                                t);
    return nn::TransposeOp::create(b, loc, t, headSplit);
  };
  Value cos = swap(rotary.getCos());
  Value sin = rotary.getSin() == rotary.getCos() ? cos : swap(rotary.getSin());
  Value rotated =
      nn::RotaryOp::create(b, loc, split.getX(), cos, sin, rotary.getInverse());
  operand.set(nn::TransposeOp::create(b, split.getLoc(), rotated, headSplit));
  rotary.erase();
  split.erase();
}

/// The reshapes, transposes and slices that make `operand` (a fused
/// attention's q, k or v) from the tensor they cut, added to `ops`: where
/// step 9 looks for head splits.
void collectHeadSplit(Value operand, SmallVectorImpl<Operation *> &ops) {
  Operation *op = operand.getDefiningOp();
  while (isa_and_nonnull<nn::ReshapeOp, nn::TransposeOp, nn::SliceOp>(op)) {
    if (!llvm::is_contained(ops, op))
      ops.push_back(op);
    op = op->getOperand(0).getDefiningOp();
  }
}

/// Whether every user of `value` is an `OpTy`.
template <typename OpTy> bool onlyReadBy(Value value) {
  return llvm::all_of(value.getUsers(),
                      [](Operation *user) { return isa<OpTy>(user); });
}

/// A slice of a transpose that only slices read, cutting one dimension
/// that the transpose moved, is the transpose of the slice: the same
/// elements, each transpose moving only its slice's (timm's
/// `qkv.permute(2, 0, 3, 1, 4).unbind(0)` then transposes a third of the
/// fused projection each, which ztc-fold-transposes folds into attention).
/// Dimension d of the result is dimension perm[d] of x: it is cut there.
/// A cut of a dimension the transpose kept in place (the halves of a
/// rotary embedding's last dimension) stays where it is, for the patterns
/// that read it there.
struct SliceOfTranspose : OpRewritePattern<nn::SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(nn::SliceOp op,
                                PatternRewriter &rewriter) const override {
    auto transpose = op.getX().getDefiningOp<nn::TransposeOp>();
    if (!transpose || !onlyReadBy<nn::SliceOp>(transpose.getResult()))
      return rewriter.notifyMatchFailure(op, "not a sliced transpose");
    ArrayRef<int64_t> perm = transpose.getPerm();
    size_t rank = perm.size();
    ArrayRef<int64_t> shape = op.getX().getType().getShape();
    SmallVector<size_t> cut;
    for (size_t d = 0; d < rank; ++d)
      if (op.getStarts()[d] != 0 || op.getSizes()[d] != shape[d] ||
          op.getSteps()[d] != 1)
        cut.push_back(d);
    if (cut.size() != 1 ||
        perm[cut.front()] == static_cast<int64_t>(cut.front()))
      return rewriter.notifyMatchFailure(op, "cuts no single moved dimension");
    SmallVector<int64_t> starts(rank), sizes(rank), steps(rank);
    for (size_t d = 0; d < rank; ++d) {
      starts[perm[d]] = op.getStarts()[d];
      sizes[perm[d]] = op.getSizes()[d];
      steps[perm[d]] = op.getSteps()[d];
    }
    Value slice = nn::SliceOp::create(rewriter, op.getLoc(), transpose.getX(),
                                      rewriter.getDenseI64ArrayAttr(starts),
                                      rewriter.getDenseI64ArrayAttr(sizes),
                                      rewriter.getDenseI64ArrayAttr(steps));
    rewriter.replaceOpWithNewOp<nn::TransposeOp>(op, slice,
                                                 transpose.getPermAttr());
    return success();
  }
};

/// A slice of a reshape that splits one dimension (`[B, T, 3C]` as `[B, T,
/// 3, H, D]`), cutting the first of the split's dimensions at unit steps
/// and the rest whole, is the reshape of a slice of the unsplit dimension:
/// `[B, T, 3C]` cut along its last one at whole heads, which
/// ztc-fold-head-windows lets attention read in place. A reshape that also
/// splits or merges other dimensions (GPT-2's `[B*T, 3C]` as `[B, T, 3C]`)
/// keeps its slices, which that pass reads as they are.
struct SliceOfReshape : OpRewritePattern<nn::SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(nn::SliceOp op,
                                PatternRewriter &rewriter) const override {
    auto reshape = op.getX().getDefiningOp<nn::ReshapeOp>();
    if (!reshape)
      return rewriter.notifyMatchFailure(op, "not a sliced reshape");
    ArrayRef<int64_t> from = reshape.getX().getType().getShape();
    ArrayRef<int64_t> to = reshape.getType().getShape();
    SmallVector<int64_t> starts, sizes;
    size_t d = 0;
    bool split = false;
    for (auto [i, extent] : llvm::enumerate(from)) {
      // Dimension i splits into to[first, d): at least one, until their
      // product is its extent; trailing 1s join the last group.
      size_t first = d;
      int64_t product = 1;
      do {
        if (d == to.size())
          return rewriter.notifyMatchFailure(op, "not a split");
        product *= to[d++];
      } while (product < extent);
      if (i + 1 == from.size())
        while (d < to.size() && to[d] == 1)
          ++d;
      if (product != extent)
        return rewriter.notifyMatchFailure(op, "not a split");
      // One dimension split, and that one cut.
      bool cutHere = op.getStarts()[first] != 0 ||
                     op.getSizes()[first] != to[first] ||
                     op.getSteps()[first] != 1;
      if (d - first > 1) {
        if (split || !cutHere)
          return rewriter.notifyMatchFailure(op, "not one cut split");
        split = true;
      } else if (cutHere) {
        return rewriter.notifyMatchFailure(op, "cuts an unsplit dimension");
      }
      // The group's first dimension cut, at unit steps unless it keeps
      // one index; the others whole.
      int64_t inner = extent / std::max<int64_t>(to[first], 1);
      if (op.getSteps()[first] != 1 && op.getSizes()[first] != 1)
        return rewriter.notifyMatchFailure(op, "a strided split dimension");
      for (size_t k = first + 1; k < d; ++k)
        if (op.getStarts()[k] != 0 || op.getSizes()[k] != to[k] ||
            op.getSteps()[k] != 1)
          return rewriter.notifyMatchFailure(op, "cuts an inner dimension");
      starts.push_back(op.getStarts()[first] * inner);
      sizes.push_back(op.getSizes()[first] * inner);
    }
    if (d != to.size() || !split)
      return rewriter.notifyMatchFailure(op, "not a split");
    Value slice = nn::SliceOp::create(
        rewriter, op.getLoc(), reshape.getX(),
        rewriter.getDenseI64ArrayAttr(starts),
        rewriter.getDenseI64ArrayAttr(sizes),
        rewriter.getDenseI64ArrayAttr(SmallVector<int64_t>(from.size(), 1)));
    rewriter.replaceOpWithNewOp<nn::ReshapeOp>(op, op.getType(), slice);
    return success();
  }
};

/// A reshape that drops the dimensions of 1 of a transpose, which reshapes
/// alone read, where the transpose moves one of them, is the transpose of x
/// without them: the dimensions other than 1 in the same order (a q cut
/// from timm's `[3, B, H, T, D]` and squeezed is `[B, T, H, D]`
/// transposed, as nanoGPT's, which ztc-fold-transposes folds into
/// attention).
struct ReshapeOfUnitTranspose : OpRewritePattern<nn::ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(nn::ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto transpose = op.getX().getDefiningOp<nn::TransposeOp>();
    if (!transpose || !onlyReadBy<nn::ReshapeOp>(transpose.getResult()))
      return rewriter.notifyMatchFailure(op, "not a reshaped transpose");
    RankedTensorType x = transpose.getX().getType();
    ArrayRef<int64_t> perm = transpose.getPerm();
    // x's dimensions other than 1, renumbered in order.
    SmallVector<int64_t> kept, renumbered(x.getRank(), -1);
    for (int64_t dim = 0; dim < x.getRank(); ++dim)
      if (x.getDimSize(dim) != 1) {
        renumbered[dim] = kept.size();
        kept.push_back(x.getDimSize(dim));
      }
    bool movesUnit = false;
    for (auto [to, from] : llvm::enumerate(perm))
      movesUnit |= renumbered[from] < 0 && static_cast<int64_t>(to) != from;
    SmallVector<int64_t> smaller, result;
    for (int64_t dim : perm)
      if (renumbered[dim] >= 0) {
        smaller.push_back(renumbered[dim]);
        result.push_back(x.getDimSize(dim));
      }
    if (!movesUnit || op.getType().getShape() != ArrayRef<int64_t>(result))
      return rewriter.notifyMatchFailure(
          op, "no moved dimension of 1 that the reshape drops");
    // A reshape of a reshape reshapes the first one's input: one view.
    Value source = transpose.getX();
    if (auto inner = source.getDefiningOp<nn::ReshapeOp>())
      source = inner.getX();
    Value squeezed = nn::ReshapeOp::create(
        rewriter, op.getLoc(), RankedTensorType::get(kept, x.getElementType()),
        source);
    rewriter.replaceOpWithNewOp<nn::TransposeOp>(
        op, squeezed, rewriter.getDenseI64ArrayAttr(smaller));
    return success();
  }
};

struct FuseAttentionPass
    : public ztc::impl::FuseAttentionPassBase<FuseAttentionPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<nn::MatMulOp> products;
    func.walk([&](nn::MatMulOp op) { products.push_back(op); });
    SmallVector<Operation *> splits;
    OpBuilder b(func.getContext());
    for (nn::MatMulOp pv : products) {
      std::optional<Match> match = matchAttention(pv);
      if (!match)
        continue;
      Value q = match->q, keysT = match->keysT, v = pv.getB();
      // Step 5: q, k and v of one rank, type and batch dimensions (no
      // broadcasting), as nn.attention's inference checks, and the fused
      // op's type the product's; otherwise the chain stays.
      if (cast<RankedTensorType>(keysT.getType()).getRank() !=
          pv.getType().getRank())
        continue;
      b.setInsertionPoint(pv);
      Location loc = pv.getLoc();
      Value k = untranspose(b, loc, keysT);
      // Step 6: grouped-query heads, k and v repeated from the same fewer
      // heads, are read unrepeated; a constant factor on the repeated k
      // (ONNX Attention's scale on keys an exporter repeated) joins the
      // scale.
      Value repeatedK = k, repeatedV = v;
      double scale = match->scale;
      std::optional<ConstantFactor> after = constantFactor(k);
      Value kRepeats = after ? after->tensor : k;
      Value kSource = repeatedHeadsSource(kRepeats),
            vSource = repeatedHeadsSource(v);
      if (kSource && vSource && kSource.getType() == vSource.getType()) {
        k = kSource;
        v = vSource;
        if (after)
          scale *= after->factor;
        // So does one on the keys before their repeat (ONNX Attention's
        // conversion scales K first).
        if (std::optional<ConstantFactor> before = constantFactor(k)) {
          scale *= before->factor;
          k = before->tensor;
        }
      }
      // A mask of lower rank, with its leading 1s.
      Value mask = match->mask;
      if (mask && cast<RankedTensorType>(mask.getType()).getRank() <
                      pv.getType().getRank()) {
        auto type = cast<RankedTensorType>(mask.getType());
        SmallVector<int64_t> shape(pv.getType().getRank() - type.getRank(), 1);
        llvm::append_range(shape, type.getShape());
        mask = nn::ReshapeOp::create(
            b, loc, RankedTensorType::get(shape, type.getElementType()), mask);
      }
      SmallVector<Value> operands = {q, k, v};
      if (mask)
        operands.push_back(mask);
      SmallVector<Type> inferred;
      if (failed(nn::AttentionOp::inferReturnTypes(
              func.getContext(), std::nullopt,
              nn::AttentionOp::Adaptor(operands, b.getDictionaryAttr({})),
              inferred)) ||
          inferred.front() != pv.getType()) {
        if (repeatedK != keysT && repeatedK.use_empty())
          repeatedK.getDefiningOp()->erase();
        if (mask != match->mask)
          mask.getDefiningOp()->erase();
        continue;
      }
      auto fused = nn::AttentionOp::create(
          b, loc, q, k, v, mask, b.getF64FloatAttr(scale),
          match->causal ? b.getUnitAttr() : UnitAttr(),
          match->softcap > 0 ? b.getF64FloatAttr(match->softcap) : FloatAttr());
      pv.getResult().replaceAllUsesWith(fused.getResult());
      // Step 7: the replaced chain, last first (each read only its next).
      for (Operation *op : llvm::reverse(match->chain))
        op->erase();
      // What made kᵀ from k (a transpose, or the exporter's reshapes
      // around one), now read by nothing.
      for (Value made = keysT; made != repeatedK;) {
        Operation *op = made.getDefiningOp();
        if (!op || !op->use_empty() || !isa<nn::TransposeOp, nn::ReshapeOp>(op))
          break;
        made = op->getOperand(0);
        op->erase();
      }
      // And the repeats of grouped-query heads (and k's factor), once
      // nothing reads them.
      if (v == vSource) {
        if (kRepeats != repeatedK && repeatedK.use_empty())
          repeatedK.getDefiningOp()->erase();
        eraseUnreadRepeat(kRepeats);
        eraseUnreadRepeat(repeatedV);
        if (k != kSource && kSource.use_empty())
          kSource.getDefiningOp()->erase();
      }
      // Step 8: rotary embeddings on q and k before their head splits.
      rotateBeforeSplit(b, fused->getOpOperand(0));
      rotateBeforeSplit(b, fused->getOpOperand(1));
      for (Value operand : {fused.getQ(), fused.getK(), fused.getV()})
        collectHeadSplit(operand, splits);
    }
    // Step 9: heads cut from a fused projection's permuted reshape as
    // slices of the projection, transposed.
    RewritePatternSet patterns(func.getContext());
    patterns.add<SliceOfTranspose, SliceOfReshape, ReshapeOfUnitTranspose>(
        func.getContext());
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    (void)applyOpPatternsGreedily(splits, std::move(patterns), config);
  }
};

} // namespace
