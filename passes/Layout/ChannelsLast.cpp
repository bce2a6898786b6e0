//===- ChannelsLast.cpp - the ztc-channels-last pass ----------------------===//
//
// f32 convolutions read and write NHWC activations, and the transposes
// that this puts around them move through the elementwise ops, reductions,
// poolings and inference batch norms between convolutions until they
// cancel. See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/NNToKernel/ScalarBodies.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Traits.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_CHANNELSLASTPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// NCHW to NHWC, and back: result dimension i is dimension perm[i].
constexpr int64_t kToNhwc[] = {0, 2, 3, 1};
constexpr int64_t kToNchw[] = {0, 3, 1, 2};

/// `shape` permuted: dimension i is shape[perm[i]].
SmallVector<int64_t> permuted(ArrayRef<int64_t> shape, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> result;
  for (int64_t p : perm)
    result.push_back(shape[p]);
  return result;
}

/// The value an NHWC-to-NCHW transpose reads: what `value` is in NHWC, when
/// it is one (null otherwise).
Value nhwcSource(Value value) {
  auto transpose = value.getDefiningOp<nn::TransposeOp>();
  if (transpose && transpose.getPerm() == ArrayRef<int64_t>(kToNchw))
    return transpose.getX();
  return nullptr;
}

/// Whether permuting `type` by `perm` keeps the order of its dimensions
/// other than 1, so that a reshape (a view) does it.
bool keepsOrder(RankedTensorType type, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> order;
  for (int64_t p : perm)
    if (type.getDimSize(p) != 1)
      order.push_back(p);
  return llvm::is_sorted(order);
}

/// `value` permuted by `perm` (result dimension i is dimension perm[i]),
/// built before the builder's point: the value an inverse transpose read,
/// an equal transpose made earlier, a reshape (free: a view) when the
/// dimensions other than 1 keep their order (a per-channel [1, C, 1, 1]),
/// else a transpose.
Value transposed(OpBuilder &b, Location loc, Value value,
                 ArrayRef<int64_t> perm) {
  if (auto transpose = value.getDefiningOp<nn::TransposeOp>()) {
    ArrayRef<int64_t> inner = transpose.getPerm();
    if (inner.size() == perm.size() &&
        llvm::all_of(llvm::seq<int64_t>(0, perm.size()),
                     [&](int64_t i) { return inner[perm[i]] == i; }))
      return transpose.getX();
  }
  Operation *at = &*b.getInsertionPoint();
  for (Operation *user : value.getUsers())
    if (auto earlier = dyn_cast<nn::TransposeOp>(user))
      if (earlier.getPerm() == perm && earlier->getBlock() == at->getBlock() &&
          earlier->isBeforeInBlock(at))
        return earlier;
  auto type = cast<RankedTensorType>(value.getType());
  if (keepsOrder(type, perm)) {
    auto to = RankedTensorType::get(permuted(type.getShape(), perm),
                                    type.getElementType());
    // A reshape of a reshape reshapes the first one's input.
    if (auto reshape = value.getDefiningOp<nn::ReshapeOp>())
      value = reshape.getX();
    if (value.getType() == to)
      return value;
    return nn::ReshapeOp::create(b, loc, to, value);
  }
  return nn::TransposeOp::create(b, loc, value, b.getDenseI64ArrayAttr(perm));
}

/// Step 1: every f32 convolution (forward and both gradients; f16 and bf16
/// ones too with `halfTypes`) in NHWC, an NCHW-to-NHWC transpose before
/// each activation it reads and the inverse after the one it writes.
void convertConvolutions(func::FuncOp func, bool halfTypes) {
  auto takes = [&](Type type) {
    Type element = cast<RankedTensorType>(type).getElementType();
    return element.isF32() ||
           (halfTypes && (element.isF16() || element.isBF16()));
  };
  SmallVector<Operation *> convs;
  func.walk([&](Operation *op) {
    if (isa<nn::Conv2dOp, nn::Conv2dBackwardDataOp, nn::Conv2dBackwardFilterOp>(
            op) &&
        !op->hasAttr("channels_last") &&
        llvm::all_of(op->getOperandTypes(), takes))
      convs.push_back(op);
  });
  for (Operation *op : convs) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    // The activation operands: conv2d's input, the data gradient's output
    // gradient, both of the filter gradient's.
    SmallVector<unsigned> activations = isa<nn::Conv2dBackwardFilterOp>(op)
                                            ? SmallVector<unsigned>{0, 1}
                                            : SmallVector<unsigned>{0};
    for (unsigned i : activations)
      op->setOperand(i, transposed(b, loc, op->getOperand(i), kToNhwc));
    op->setAttr("channels_last", b.getUnitAttr());
    if (isa<nn::Conv2dBackwardFilterOp>(op))
      continue;
    // The result: NHWC, read back through the inverse transpose.
    Value result = op->getResult(0);
    auto type = cast<RankedTensorType>(result.getType());
    result.setType(RankedTensorType::get(permuted(type.getShape(), kToNhwc),
                                         type.getElementType()));
    b.setInsertionPointAfter(op);
    Value nchw = nn::TransposeOp::create(b, loc, result,
                                         b.getDenseI64ArrayAttr(kToNchw));
    result.replaceAllUsesExcept(nchw, nchw.getDefiningOp());
  }
}

/// Whether operand `value` of an elementwise op over the NCHW shape
/// `space` has an NHWC form that costs no transpose of a tensor as large
/// as the space (see nhwcOperand).
bool hasCheapNhwcForm(Value value, ArrayRef<int64_t> space) {
  if (nhwcSource(value))
    return true;
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getNumElements() == 1)
    return true;
  if (auto broadcast = value.getDefiningOp<nn::BroadcastToOp>())
    return hasCheapNhwcForm(broadcast.getX(), space);
  int64_t spaceElements = 1;
  for (int64_t d : space)
    spaceElements *= d;
  return type.getRank() <= 4 && type.getNumElements() * 8 <= spaceElements;
}

/// The NHWC form of such an operand, built before the builder's point: the
/// transpose's input for an NHWC-to-NCHW transpose, a single element as it
/// is, a broadcast_to its source's form (the op broadcasts it anyway), a
/// small operand (rank 4 after leading ones) transposed.
Value nhwcOperand(OpBuilder &b, Location loc, Value value) {
  if (Value source = nhwcSource(value))
    return source;
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getNumElements() == 1)
    return value;
  if (auto broadcast = value.getDefiningOp<nn::BroadcastToOp>())
    return nhwcOperand(b, loc, broadcast.getX());
  if (type.getRank() < 4) {
    SmallVector<int64_t> shape(4 - type.getRank(), 1);
    llvm::append_range(shape, type.getShape());
    value = nn::ReshapeOp::create(
        b, loc, RankedTensorType::get(shape, type.getElementType()), value);
  }
  Value nhwc = transposed(b, loc, value, kToNhwc);
  // The rank-4 reshape went into another one.
  if (type.getRank() < 4 && value.use_empty())
    value.getDefiningOp()->erase();
  return nhwc;
}

/// The shape of nhwcOperand(value), without building it.
SmallVector<int64_t> nhwcShape(Value value) {
  if (Value source = nhwcSource(value))
    return SmallVector<int64_t>(
        cast<RankedTensorType>(source.getType()).getShape());
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getNumElements() == 1)
    return SmallVector<int64_t>(type.getShape());
  if (auto broadcast = value.getDefiningOp<nn::BroadcastToOp>())
    return nhwcShape(broadcast.getX());
  SmallVector<int64_t> shape(4 - type.getRank(), 1);
  llvm::append_range(shape, type.getShape());
  return permuted(shape, kToNhwc);
}

/// Replaces `op` (4-D result) with a copy on the NHWC `operands` before it,
/// its result NHWC and read through an NHWC-to-NCHW transpose; the copy.
Operation *rebuildNhwc(OpBuilder &b, Operation *op, ValueRange operands) {
  Operation *rebuilt = b.clone(*op);
  rebuilt->setOperands(operands);
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  rebuilt->getResult(0).setType(RankedTensorType::get(
      permuted(type.getShape(), kToNhwc), type.getElementType()));
  Value nchw = nn::TransposeOp::create(b, op->getLoc(), rebuilt->getResult(0),
                                       b.getDenseI64ArrayAttr(kToNchw));
  op->getResult(0).replaceAllUsesWith(nchw);
  op->erase();
  return rebuilt;
}

/// Moves an NHWC-to-NCHW transpose that `op` (elementwise, 4-D result)
/// reads past it: `op` is rebuilt on the NHWC values and its result read
/// through the transpose. Whether it moved.
bool sinkThroughElementwise(Operation *op) {
  auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!resultType || resultType.getRank() != 4 || isa<nn::BroadcastToOp>(op) ||
      llvm::none_of(op->getOperands(),
                    [](Value v) { return static_cast<bool>(nhwcSource(v)); }))
    return false;
  ArrayRef<int64_t> space = resultType.getShape();
  if (!llvm::all_of(op->getOperands(), [&](Value operand) {
        return hasCheapNhwcForm(operand, space);
      }))
    return false;
  // The NHWC operands must broadcast to the NHWC space (a broadcast_to's
  // source, taken for it, may not reach it alone).
  SmallVector<int64_t> nhwcSpace = permuted(space, kToNhwc), shape;
  for (Value operand : op->getOperands()) {
    SmallVector<int64_t> next;
    if (!OpTrait::util::getBroadcastedShape(shape, nhwcShape(operand), next))
      return false;
    shape = std::move(next);
  }
  if (shape != nhwcSpace)
    return false;
  OpBuilder b(op);
  Location loc = op->getLoc();
  SmallVector<Value> operands;
  for (Value operand : op->getOperands())
    operands.push_back(nhwcOperand(b, loc, operand));
  rebuildNhwc(b, op, operands);
  return true;
}

/// Moves an NHWC-to-NCHW transpose past a reduction that reads it: the
/// reduction runs over the NHWC dimensions, and its result is transposed
/// back only when the kept dimensions' order differs (with keepdims, a
/// 4-D result: a small transpose, which moves on). Whether it moved.
bool sinkThroughReduction(Operation *op) {
  Value source = nhwcSource(op->getOperand(0));
  if (!source)
    return false;
  auto axesAttr = op->getAttrOfType<DenseI64ArrayAttr>("axes");
  auto keepdimsAttr = op->getAttrOfType<BoolAttr>("keepdims");
  if (!axesAttr || !keepdimsAttr || axesAttr.empty())
    return false;
  // NCHW dimension i is NHWC dimension kToNhwc-inverse(i) = kToNchw[i].
  SmallVector<int64_t> axes;
  for (int64_t axis : axesAttr.asArrayRef())
    axes.push_back(kToNchw[axis]);
  llvm::sort(axes);
  OpBuilder b(op);
  Location loc = op->getLoc();
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  auto sourceType = cast<RankedTensorType>(source.getType());
  SmallVector<int64_t> shape;
  SmallVector<int64_t> kept; // NHWC dimensions kept, in NHWC order
  for (int64_t d = 0; d < 4; ++d) {
    bool reduced = llvm::is_contained(axes, d);
    if (!reduced)
      kept.push_back(d);
    if (!reduced || keepdimsAttr.getValue())
      shape.push_back(reduced ? 1 : sourceType.getDimSize(d));
  }
  Operation *rebuilt = b.clone(*op);
  rebuilt->setOperand(0, source);
  rebuilt->setAttr("axes", b.getDenseI64ArrayAttr(axes));
  rebuilt->getResult(0).setType(
      RankedTensorType::get(shape, resultType.getElementType()));
  Value result = rebuilt->getResult(0);
  if (keepdimsAttr.getValue()) {
    result = transposed(b, loc, result, kToNchw);
  } else {
    // The NCHW result keeps the NCHW dimensions in NCHW order: NHWC
    // dimension kToNhwc[i] for each kept NCHW dimension i.
    SmallVector<int64_t> perm;
    for (int64_t i = 0; i < 4; ++i)
      if (!llvm::is_contained(axesAttr.asArrayRef(), i))
        perm.push_back(llvm::find(kept, kToNchw[i]) - kept.begin());
    if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
      result = transposed(b, loc, result, perm);
  }
  op->getResult(0).replaceAllUsesWith(result);
  op->erase();
  return true;
}

/// Moves the NHWC-to-NCHW transpose that a pooling, a pooling's gradient or
/// an inference batch_norm reads (its input; avg_pool2d_backward's output
/// gradient) past it: the op runs channels_last on the NHWC value, its
/// result read through the transpose. Its other activation, the output
/// gradient of max_pool2d_backward (the smaller operand), is transposed to
/// NHWC where it does not come from NHWC (the gradient reaching the last
/// pool through a flatten); batch_norm's [C] vectors stay as they are.
/// Whether it moved.
bool sinkThroughChannelOp(Operation *op) {
  if (op->hasAttr("channels_last") || !nhwcSource(op->getOperand(0)))
    return false;
  unsigned activations = isa<nn::MaxPool2dBackwardOp>(op) ? 2 : 1;
  OpBuilder b(op);
  Location loc = op->getLoc();
  SmallVector<Value> operands(op->getOperands());
  for (unsigned i = 0; i < activations; ++i)
    operands[i] = transposed(b, loc, operands[i], kToNhwc);
  rebuildNhwc(b, op, operands)->setAttr("channels_last", b.getUnitAttr());
  return true;
}

struct ChannelsLastPass
    : public ztc::impl::ChannelsLastPassBase<ChannelsLastPass> {
  using ChannelsLastPassBase::ChannelsLastPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    convertConvolutions(func, halfTypes);
    // Step 2: transposes move forward until none can; each move takes one
    // past one op, so this ends.
    Block &block = func.getBody().front();
    bool moved = true;
    while (moved) {
      moved = false;
      for (Operation &op : llvm::make_early_inc_range(block)) {
        auto transpose = dyn_cast<nn::TransposeOp>(op);
        if (transpose && transpose.getPerm() == ArrayRef<int64_t>(kToNhwc)) {
          // Back to NHWC what came from NHWC: the value itself.
          if (Value source = nhwcSource(transpose.getX())) {
            transpose.getResult().replaceAllUsesWith(source);
            transpose.erase();
            moved = true;
          }
          continue;
        }
        if (isa<nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp>(op))
          moved |= sinkThroughReduction(&op);
        else if (isa<nn::MaxPool2dOp, nn::AvgPool2dOp, nn::MaxPool2dBackwardOp,
                     nn::AvgPool2dBackwardOp, nn::BatchNormOp>(op))
          moved |= sinkThroughChannelOp(&op);
        else if (isElementwiseNNOp(&op))
          moved |= sinkThroughElementwise(&op);
      }
    }
    // Step 3: what no longer has a reader goes (the transposes that
    // cancelled, broadcasts of operands taken from their source), and a
    // layout transpose left that moves only dimensions of 1 (the pooled
    // [N, 1, 1, C] features of a global average pool) is a reshape.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block))) {
      if (isa<nn::TransposeOp, nn::ReshapeOp, nn::BroadcastToOp>(op) &&
          op.use_empty()) {
        op.erase();
        continue;
      }
      auto transpose = dyn_cast<nn::TransposeOp>(op);
      if (!transpose ||
          (transpose.getPerm() != ArrayRef<int64_t>(kToNchw) &&
           transpose.getPerm() != ArrayRef<int64_t>(kToNhwc)) ||
          !keepsOrder(cast<RankedTensorType>(transpose.getX().getType()),
                      transpose.getPerm()))
        continue;
      OpBuilder b(transpose);
      transpose.getResult().replaceAllUsesWith(nn::ReshapeOp::create(
          b, transpose.getLoc(), transpose.getType(), transpose.getX()));
      transpose.erase();
    }
  }
};

} // namespace
