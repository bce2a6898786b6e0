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

/// What steps 2 to 4 find between the softmax and the first product.
struct Match {
  nn::MatMulOp scores;
  double scale = 1.0;
  bool causal = false;
  Value mask;
  /// The ops the fused op replaces, the final product last.
  SmallVector<Operation *> chain;
};

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
      // A constant mask of the scores' rank that broadcasts in place: it
      // needs no gradient, which nn.attention does not give.
      if (scores.getType() != scoresType || !matchPattern(mask, m_Constant()) ||
          maskType.getRank() != rank ||
          maskType.getElementType() != scoresType.getElementType())
        continue;
      match.mask = mask;
      match.chain.push_back(add);
      return scores;
    }
    return nullptr;
  }
  return x;
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

/// Steps 1 to 4 from the final product `pv`: softmax(scale * q kᵀ [+ mask])
/// times v, every intermediate read only by the next.
std::optional<Match> matchAttention(nn::MatMulOp pv) {
  auto softmax = pv.getA().getDefiningOp<nn::SoftmaxOp>();
  if (!softmax || !softmax.getResult().hasOneUse() ||
      static_cast<int64_t>(softmax.getAxis()) !=
          softmax.getType().getRank() - 1)
    return std::nullopt;
  Match match;
  match.chain.push_back(softmax);
  Value x = softmax.getX();
  if (!x.hasOneUse())
    return std::nullopt;
  Value scaled = matchMask(x, match);
  if (!scaled || (scaled != x && !scaled.hasOneUse()))
    return std::nullopt;
  Value product = matchScale(scaled, match);
  if (!product)
    return std::nullopt;
  match.scores = product.getDefiningOp<nn::MatMulOp>();
  if (!match.scores || !product.hasOneUse())
    return std::nullopt;
  match.chain.push_back(match.scores);
  std::reverse(match.chain.begin(), match.chain.end());
  match.chain.push_back(pv);
  return match;
}

/// `kᵀ` ([..., D, Tk]) as k ([..., Tk, D]): the transpose that made it,
/// composed with the swap of the last two dimensions, or a new transpose.
Value untranspose(OpBuilder &b, Location loc, Value keysT) {
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

struct FuseAttentionPass
    : public ztc::impl::FuseAttentionPassBase<FuseAttentionPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<nn::MatMulOp> products;
    func.walk([&](nn::MatMulOp op) { products.push_back(op); });
    OpBuilder b(func.getContext());
    for (nn::MatMulOp pv : products) {
      std::optional<Match> match = matchAttention(pv);
      if (!match)
        continue;
      Value q = match->scores.getA(), keysT = match->scores.getB(),
            v = pv.getB();
      // Step 5: q, k and v of one rank, type and batch dimensions (no
      // broadcasting), as nn.attention's inference checks, and the fused
      // op's type the product's; otherwise the chain stays.
      if (cast<RankedTensorType>(keysT.getType()).getRank() !=
          pv.getType().getRank())
        continue;
      b.setInsertionPoint(pv);
      Location loc = pv.getLoc();
      Value k = untranspose(b, loc, keysT);
      SmallVector<Value> operands = {q, k, v};
      if (match->mask)
        operands.push_back(match->mask);
      SmallVector<Type> inferred;
      if (failed(nn::AttentionOp::inferReturnTypes(
              func.getContext(), std::nullopt,
              nn::AttentionOp::Adaptor(operands, b.getDictionaryAttr({})),
              inferred)) ||
          inferred.front() != pv.getType()) {
        if (k != keysT && k.use_empty())
          k.getDefiningOp()->erase();
        continue;
      }
      auto fused = nn::AttentionOp::create(
          b, loc, q, k, v, match->mask, b.getF64FloatAttr(match->scale),
          match->causal ? b.getUnitAttr() : UnitAttr());
      pv.getResult().replaceAllUsesWith(fused.getResult());
      // Step 6: the replaced chain, last first (each read only its next).
      for (Operation *op : llvm::reverse(match->chain))
        op->erase();
      // The transpose that made kᵀ, now read by nothing.
      if (Operation *transpose = keysT.getDefiningOp();
          transpose && k != keysT && transpose->use_empty())
        transpose->erase();
    }
  }
};

} // namespace
