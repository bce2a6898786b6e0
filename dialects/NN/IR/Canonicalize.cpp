//===- Canonicalize.cpp - rewrite patterns of nn ops ------------*- C++ -*-===//
//
// The canonicalization patterns of the nn dialect, for rewrites a fold
// cannot express because they build new ops. So far one family: the
// gradient of a tensor that a model cuts into pieces (GPT-2's fused q/k/v
// projection split three ways, ONNX Split, a Slice per head) arrives from
// autodiff as a sum of `nn.insert_slice`s of each piece's gradient into
// zeros. Every one of those writes a whole tensor of zeros and the sum reads
// them all; the pieces' gradients only need to sit side by side, which is a
// concat, PyTorch's own backward of a split.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

using namespace mlir;
using namespace mlir::ztc::nn;

namespace {

/// Whether `value` is all zeros: a splat constant of zero, or a scalar zero
/// broadcast (what autodiff builds before canonicalization folds it).
bool isZeros(Value value) {
  if (auto broadcast = value.getDefiningOp<BroadcastToOp>())
    return isZeros(broadcast.getX());
  Attribute attr;
  if (!matchPattern(value, m_Constant(&attr)))
    return false;
  auto splat = dyn_cast<SplatElementsAttr>(attr);
  if (!splat)
    return false;
  if (isa<FloatType>(splat.getElementType()))
    return splat.getSplatValue<APFloat>().isZero();
  if (splat.getElementType().isInteger())
    return splat.getSplatValue<APInt>().isZero();
  return false;
}

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

} // namespace

void AddOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                        MLIRContext *context) {
  patterns.add<AddOfDisjointPieces>(context);
}
