//===- FoldHeadWindows.cpp - the ztc-fold-head-windows pass ---------------===//
//
// Lets attention read its q, k and v as windows of heads of the one tensor
// a fused projection wrote (GPT-2's c_attn: [B, T, 3C]), instead of three
// slice copies, and write its gradients straight into their concat.
// See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Kernel/Folding.h"
#include "passes/Passes.h"

#include "runtime/kernels/AttentionShape.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_FOLDHEADWINDOWSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

ArrayRef<int64_t> shapeOf(Value buffer) {
  return cast<MemRefType>(buffer.getType()).getShape();
}

/// Whether the operand of `role` of `call` is stored [B, T, H, D] (its
/// `bthd` bit), the layout in which a window of heads is a column range of
/// a [B, T, W] tensor.
bool tokensOuter(kernel::CallOp call, int role) {
  return (kernel::configInt(call, "bthd") >> role & 1) != 0;
}

/// A window of heads: `source`, a [B, T, W] buffer, holds an operand's
/// [B, T, H, D] heads from column `column` on.
struct Window {
  Value source;
  int64_t column = 0;
};

/// Whether operand `index` of attention call `call`, a [B, T, H, D] buffer
/// stored bthd, may instead be the window `window`: the columns are whole
/// heads, and a call already windowed has the same logical head count. A
/// grouped-query call (k with fewer heads than q) takes no windows: they
/// share one logical head count.
bool fitsWindow(kernel::CallOp call, unsigned index, const Window &window) {
  int role = kernel::attentionRole(call, index);
  ArrayRef<int64_t> heads = shapeOf(call->getOperand(index));
  ArrayRef<int64_t> source = shapeOf(window.source);
  if (role < 0 || !tokensOuter(call, role) || heads.size() != 4 ||
      source.size() != 3)
    return false;
  if (!call.getConfig().get("heads") &&
      kernel::attentionStoredHeads(call, 0) !=
          kernel::attentionStoredHeads(call, 1))
    return false;
  int64_t d = heads[3], width = source[2];
  if (heads[0] != source[0] || heads[1] != source[1] || width % d != 0 ||
      window.column % d != 0 || window.column + heads[2] * d > width)
    return false;
  auto logical = call.getConfig().getAs<IntegerAttr>("heads");
  return !logical || logical.getInt() == heads[2];
}

/// Makes operand `index` of `call` the window `window`, seen through a
/// [B, T, W / D, D] view built before `call`: its role's first head in
/// `head_starts` (one entry per role, 0 for the others) and the logical
/// head count in `heads`.
void useWindow(kernel::CallOp call, unsigned index, const Window &window,
               Location loc) {
  ArrayRef<int64_t> heads = shapeOf(call->getOperand(index));
  ArrayRef<int64_t> source = shapeOf(window.source);
  int64_t d = heads[3];
  OpBuilder b(call);
  auto type = MemRefType::get(
      {source[0], source[1], source[2] / d, d},
      cast<MemRefType>(window.source.getType()).getElementType());
  Value view = kernel::ViewOp::create(b, loc, type, window.source);

  MLIRContext *context = call.getContext();
  SmallVector<int64_t> starts(::ztc::kAttentionRoles, 0);
  if (auto existing = call.getConfig().getAs<DenseI64ArrayAttr>("head_starts"))
    starts.assign(existing.asArrayRef().begin(), existing.asArrayRef().end());
  starts[kernel::attentionRole(call, index)] = window.column / d;
  NamedAttrList config(call.getConfig());
  config.set("heads",
             IntegerAttr::get(IntegerType::get(context, 64), heads[2]));
  config.set("head_starts", DenseI64ArrayAttr::get(context, starts));
  call.setConfigAttr(config.getDictionary(context));
  call->setOperand(index, view);
  kernel::addLoc(call, loc);
}

/// Erases `op` and then each op that defined one of `values` and has no
/// uses left (views, then allocs), in order.
void eraseWithDead(Operation *op, ArrayRef<Value> values) {
  op->erase();
  for (Value value : values)
    if (Operation *def = value.getDefiningOp(); def && def->use_empty())
      def->erase();
}

/// The window a slice cuts: the last dimension of a [B, T, W] buffer at
/// unit steps, whole in the others.
std::optional<Window> sliceWindow(kernel::CallOp slice) {
  if (!kernel::isCallOf(slice, kernel::LibraryKernelId::slice) ||
      shapeOf(slice.getInputs()[0]).size() != 3)
    return std::nullopt;
  ArrayRef<int64_t> starts = kernel::configInts(slice, "starts"),
                    steps = kernel::configInts(slice, "steps");
  ArrayRef<int64_t> in = shapeOf(slice.getInputs()[0]),
                    out = shapeOf(slice.getOutputs()[0]);
  if (starts[0] != 0 || starts[1] != 0 ||
      llvm::any_of(steps, [](int64_t s) { return s != 1; }) ||
      in[0] != out[0] || in[1] != out[1])
    return std::nullopt;
  return Window{slice.getInputs()[0], starts[2]};
}

/// Folds a slice of q, k or v out of a fused projection into the attention
/// calls that read it through [B, T, H, D] views, when they are its only
/// readers and nothing overwrites the projection before them.
bool foldSliceIntoReaders(kernel::CallOp slice) {
  std::optional<Window> window = sliceWindow(slice);
  Value result = slice.getOutputs()[0];
  if (!window || !result.getDefiningOp<kernel::AllocOp>())
    return false;
  Value root = kernel::rootBuffer(window->source);
  SmallVector<Value> views;
  SmallVector<std::pair<kernel::CallOp, unsigned>> reads;
  for (Operation *user : result.getUsers()) {
    if (user == slice)
      continue;
    auto view = dyn_cast<kernel::ViewOp>(user);
    if (!view)
      return false;
    views.push_back(view.getResult());
    for (OpOperand &use : view.getResult().getUses()) {
      auto call = dyn_cast<kernel::CallOp>(use.getOwner());
      unsigned index = use.getOperandNumber();
      if (!call || index >= call.getInputs().size() ||
          call->getBlock() != slice->getBlock() ||
          !slice->isBeforeInBlock(call) || !fitsWindow(call, index, *window) ||
          kernel::writtenBetween(slice, call, root))
        return false;
      reads.emplace_back(call, index);
    }
  }
  if (reads.empty())
    return false;
  for (auto [call, index] : reads)
    useWindow(call, index, *window, slice.getLoc());
  views.push_back(result);
  eraseWithDead(slice, views);
  return true;
}

/// The column ranges [start, end) of `dest`, a [B, T, W] buffer, that
/// `user` writes and the only thing it does with `dest`: a copy_into along
/// the last dimension, or a view of heads that only attention calls write
/// windows of (an earlier fold's). Nullopt for any other use.
std::optional<SmallVector<std::pair<int64_t, int64_t>>>
columnsWritten(Operation *user, Value dest) {
  SmallVector<std::pair<int64_t, int64_t>> columns;
  if (auto copy = dyn_cast<kernel::CallOp>(user)) {
    if (!kernel::isCallOf(copy, kernel::LibraryKernelId::copy_into) ||
        copy.getOutputs()[0] != dest || kernel::configInt(copy, "axis") != 2)
      return std::nullopt;
    int64_t start = kernel::configInt(copy, "offset");
    columns.emplace_back(start, start + shapeOf(copy.getInputs()[0])[2]);
    return columns;
  }
  auto view = dyn_cast<kernel::ViewOp>(user);
  if (!view || shapeOf(view.getResult()).size() != 4)
    return std::nullopt;
  int64_t d = shapeOf(view.getResult())[3];
  for (OpOperand &use : view.getResult().getUses()) {
    auto call = dyn_cast<kernel::CallOp>(use.getOwner());
    int role = kernel::attentionRole(call, use.getOperandNumber());
    auto starts = call
                      ? call.getConfig().getAs<DenseI64ArrayAttr>("head_starts")
                      : DenseI64ArrayAttr();
    if (role < 0 || use.getOperandNumber() < call.getInputs().size() || !starts)
      return std::nullopt;
    int64_t start = starts.asArrayRef()[role] * d;
    columns.emplace_back(start, start + kernel::configInt(call, "heads") * d);
  }
  return columns;
}

/// Folds a `copy_into` of an attention call's output (dq, dk, dv: the
/// pieces of a fused projection's gradient) into that call, which then
/// writes its window of the concat directly, when the copy is the only
/// reader of the output and nothing but copies into other windows touches
/// the concat before the copy.
bool foldCopyIntoProducer(kernel::CallOp copy) {
  if (!kernel::isCallOf(copy, kernel::LibraryKernelId::copy_into))
    return false;
  Value dest = copy.getOutputs()[0];
  auto destAlloc = dest.getDefiningOp<kernel::AllocOp>();
  auto piece = copy.getInputs()[0].getDefiningOp<kernel::ViewOp>();
  if (!destAlloc || !piece || shapeOf(dest).size() != 3 ||
      kernel::configInt(copy, "axis") != 2 || !piece.getResult().hasOneUse())
    return false;
  Value produced = piece.getSource();
  if (!produced.getDefiningOp<kernel::AllocOp>())
    return false;
  // The one writer of the output, before the copy; nothing else uses it.
  std::optional<std::pair<kernel::CallOp, unsigned>> writer;
  for (OpOperand &use : produced.getUses()) {
    if (use.getOwner() == piece)
      continue;
    auto call = dyn_cast<kernel::CallOp>(use.getOwner());
    if (writer || !call || use.getOperandNumber() < call.getInputs().size() ||
        call->getBlock() != copy->getBlock() || !call->isBeforeInBlock(copy))
      return false;
    writer = {call, use.getOperandNumber()};
  }
  Window window{dest, kernel::configInt(copy, "offset")};
  if (!writer || !fitsWindow(writer->first, writer->second, window))
    return false;
  // Only copies into other columns of the concat, and calls this pass
  // already lets write theirs, come before this copy: the call may write
  // its columns earlier.
  int64_t width = shapeOf(copy.getInputs()[0])[2];
  for (OpOperand &use : dest.getUses()) {
    Operation *user = use.getOwner();
    if (user == copy || copy->isBeforeInBlock(user))
      continue;
    std::optional<SmallVector<std::pair<int64_t, int64_t>>> columns =
        columnsWritten(user, dest);
    if (!columns)
      return false;
    for (auto [start, end] : *columns)
      if (start < window.column + width && window.column < end)
        return false;
  }
  auto [call, index] = *writer;
  if (!destAlloc->isBeforeInBlock(call))
    destAlloc->moveBefore(call);
  useWindow(call, index, window, copy.getLoc());
  eraseWithDead(copy, {piece.getResult(), produced});
  return true;
}

struct FoldHeadWindowsPass
    : public mlir::ztc::impl::FoldHeadWindowsPassBase<FoldHeadWindowsPass> {
  void runOnOperation() override {
    SmallVector<kernel::CallOp> calls;
    getOperation().walk([&](kernel::CallOp call) { calls.push_back(call); });
    // Each fold erases only the call it visits (and buffers nothing else
    // uses), so one walk's list stays valid.
    for (kernel::CallOp call : calls)
      if (!foldSliceIntoReaders(call))
        foldCopyIntoProducer(call);
  }
};

} // namespace
