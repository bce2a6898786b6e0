//===- FoldTransposes.cpp - the ztc-fold-transposes pass ------------------===//
//
// Lets matmul read an operand whose last two dimensions a transpose kernel
// swapped as it is stored, with a transpose flag, instead of copying it;
// and attention read and write the heads of [B, T, H, D] tensors in place
// of the head splits' copies.
// See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Kernel/Folding.h"
#include "passes/Passes.h"

#include "runtime/kernels/AttentionShape.h"

#include <optional>

namespace mlir::ztc {
#define GEN_PASS_DEF_FOLDTRANSPOSESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;
using mlir::ztc::kernel::addLoc;
using mlir::ztc::kernel::attentionRole;
using mlir::ztc::kernel::writtenBetween;

namespace {

/// Whether `call` is a transpose that swaps only the last two dimensions.
bool swapsLastTwo(kernel::CallOp call) {
  if (!kernel::isCallOf(call, kernel::LibraryKernelId::transpose) ||
      call.getInputs().size() != 1 || call.getOutputs().size() != 1)
    return false;
  ArrayRef<int64_t> p = kernel::configInts(call, "perm");
  if (p.size() < 2)
    return false;
  int64_t rank = p.size();
  for (int64_t i = 0; i < rank - 2; ++i)
    if (p[i] != i)
      return false;
  return p[rank - 2] == rank - 1 && p[rank - 1] == rank - 2;
}

/// The matmul's flag for operand `index` (0: a, 1: b).
bool transposeFlag(kernel::CallOp matmul, unsigned index) {
  auto flag = matmul.getConfig().getAs<BoolAttr>(index == 0 ? "transpose_a"
                                                            : "transpose_b");
  return flag && flag.getValue();
}

/// Sets matmul's flags for a and b (an unset flag is false).
void setTransposeFlags(kernel::CallOp matmul, bool a, bool b) {
  NamedAttrList config(matmul.getConfig());
  config.erase("transpose_a");
  config.erase("transpose_b");
  MLIRContext *context = matmul.getContext();
  if (a)
    config.set("transpose_a", BoolAttr::get(context, true));
  if (b)
    config.set("transpose_b", BoolAttr::get(context, true));
  matmul.setConfigAttr(config.getDictionary(context));
}

/// Whether `transpose` is the first op to touch its result's buffer, so
/// that a producer folded into it may write the buffer earlier.
bool firstToTouch(kernel::CallOp transpose) {
  for (Operation *user : transpose.getOutputs()[0].getUsers())
    if (user != transpose && user->getBlock() == transpose->getBlock() &&
        !transpose->isBeforeInBlock(user))
      return false;
  return true;
}

/// Erases `transpose` and then the alloc of `buffer` (its result or its
/// input) when nothing else uses it.
void eraseTranspose(kernel::CallOp transpose, Value buffer) {
  Operation *alloc = buffer.getDefiningOp();
  transpose.erase();
  if (alloc && alloc->use_empty())
    alloc->erase();
}

/// Folds `transpose` into the matmuls that read its result, when they are
/// its only readers and nothing overwrites its input before they run. A
/// matmul that already reads the result transposed reads the input as
/// stored (two transposes cancel).
bool foldIntoReaders(kernel::CallOp transpose) {
  Value result = transpose.getOutputs()[0];
  Value source = transpose.getInputs()[0];
  if (!result.getDefiningOp<kernel::AllocOp>())
    return false;
  SmallVector<std::pair<kernel::CallOp, unsigned>> reads;
  for (OpOperand &use : result.getUses()) {
    if (use.getOwner() == transpose)
      continue;
    auto matmul = dyn_cast<kernel::CallOp>(use.getOwner());
    if (!kernel::isCallOf(matmul, kernel::LibraryKernelId::matmul) ||
        matmul->getBlock() != transpose->getBlock() ||
        !transpose->isBeforeInBlock(matmul))
      return false;
    unsigned index = use.getOperandNumber();
    if (index >= matmul.getInputs().size())
      return false; // written, not read
    // Both operands the same buffer: one flag cannot describe both.
    if (matmul.getInputs()[0] == matmul.getInputs()[1])
      return false;
    if (writtenBetween(transpose, matmul, kernel::rootBuffer(source)))
      return false;
    reads.emplace_back(matmul, index);
  }
  if (reads.empty())
    return false;
  for (auto [matmul, index] : reads) {
    bool a = transposeFlag(matmul, 0), b = transposeFlag(matmul, 1);
    (index == 0 ? a : b) ^= true;
    setTransposeFlags(matmul, a, b);
    matmul->setOperand(index, source);
    addLoc(matmul, transpose.getLoc());
  }
  eraseTranspose(transpose, result);
  return true;
}

/// Folds `transpose` into the matmul that computed its input, when the
/// product is read by nothing else: the matmul writes the transposed
/// product, (A B)^T = B^T A^T, by swapping its operands and their flags
/// (weight gradients: dW^T = (x^T dy)^T = dy^T x).
bool foldIntoProducer(kernel::CallOp transpose) {
  Value result = transpose.getOutputs()[0];
  Value product = transpose.getInputs()[0];
  auto resultAlloc = result.getDefiningOp<kernel::AllocOp>();
  if (!resultAlloc || !product.getDefiningOp<kernel::AllocOp>())
    return false;
  kernel::CallOp matmul;
  for (Operation *user : product.getUsers()) {
    if (user == transpose)
      continue;
    auto call = dyn_cast<kernel::CallOp>(user);
    if (matmul || !kernel::isCallOf(call, kernel::LibraryKernelId::matmul) ||
        call.getOutputs()[0] != product ||
        call->getBlock() != transpose->getBlock() ||
        !call->isBeforeInBlock(transpose))
      return false;
    matmul = call;
  }
  if (!matmul || resultAlloc->getBlock() != matmul->getBlock())
    return false;
  // Rank-1 operands have no second dimension to swap.
  for (Value input : matmul.getInputs())
    if (cast<MemRefType>(input.getType()).getRank() < 2)
      return false;
  // The matmul now writes the result, earlier than the transpose did.
  if (!firstToTouch(transpose))
    return false;
  bool a = transposeFlag(matmul, 0), b = transposeFlag(matmul, 1);
  Value lhs = matmul.getInputs()[0], rhs = matmul.getInputs()[1];
  matmul->setOperand(0, rhs);
  matmul->setOperand(1, lhs);
  setTransposeFlags(matmul, !b, !a);
  if (!resultAlloc->isBeforeInBlock(matmul))
    resultAlloc->moveBefore(matmul);
  matmul->setOperand(matmul.getInputs().size(), result);
  addLoc(matmul, transpose.getLoc());
  eraseTranspose(transpose, product);
  return true;
}

//===----------------------------------------------------------------------===//
// Head splits into attention
//===----------------------------------------------------------------------===//

/// Whether `call` is a transpose that swaps the tokens and heads of a
/// rank-4 tensor: [B, T, H, D] <-> [B, H, T, D].
bool swapsHeads(kernel::CallOp call) {
  if (!kernel::isCallOf(call, kernel::LibraryKernelId::transpose) ||
      call.getInputs().size() != 1 || call.getOutputs().size() != 1)
    return false;
  return kernel::configInts(call, "perm") == ArrayRef<int64_t>{0, 2, 1, 3};
}

/// Gives operand `index` of attention call `op` the buffer `stored`, laid
/// out the other way (its role's `bthd` bit flipped).
void readOtherLayout(Operation *op, unsigned index, Value stored,
                     Location loc) {
  auto call = cast<kernel::CallOp>(op);
  int64_t bits = kernel::configInt(call, "bthd") ^
                 (int64_t(1) << attentionRole(call, index));
  MLIRContext *context = call.getContext();
  NamedAttrList config(call.getConfig());
  config.erase("bthd");
  if (bits)
    config.set("bthd", IntegerAttr::get(IntegerType::get(context, 64), bits));
  call.setConfigAttr(config.getDictionary(context));
  call->setOperand(index, stored);
  addLoc(call, loc);
}

/// Folds a head split (`transpose`, swapsHeads) into the attention calls
/// that read its result, when they are its only readers (as q, k, v, the
/// forward's result or its gradient) and nothing overwrites its input
/// before they run: each reads the input as stored.
bool foldHeadsIntoReaders(kernel::CallOp transpose) {
  Value result = transpose.getOutputs()[0];
  Value source = transpose.getInputs()[0];
  if (!result.getDefiningOp<kernel::AllocOp>())
    return false;
  SmallVector<std::pair<Operation *, unsigned>> reads;
  for (OpOperand &use : result.getUses()) {
    Operation *reader = use.getOwner();
    if (reader == transpose)
      continue;
    unsigned index = use.getOperandNumber();
    auto call = dyn_cast<kernel::CallOp>(reader);
    if (attentionRole(reader, index) < 0 || index >= call.getInputs().size() ||
        reader->getBlock() != transpose->getBlock() ||
        !transpose->isBeforeInBlock(reader) ||
        writtenBetween(transpose, reader, kernel::rootBuffer(source)))
      return false;
    reads.emplace_back(reader, index);
  }
  if (reads.empty())
    return false;
  for (auto [reader, index] : reads)
    readOtherLayout(reader, index, source, transpose.getLoc());
  eraseTranspose(transpose, result);
  return true;
}

/// Folds a head split (`transpose`, swapsHeads) into the attention call
/// that wrote its input (the forward's result, a gradient of q, k or v),
/// when the transpose is the input's first reader and its other readers
/// are attention calls after it (the backward reading the forward's
/// result) before which nothing writes the transpose's buffer: the call
/// writes that buffer in the other layout, and those readers read it so.
bool foldHeadsIntoProducer(kernel::CallOp transpose) {
  Value result = transpose.getOutputs()[0];
  Value produced = transpose.getInputs()[0];
  auto resultAlloc = result.getDefiningOp<kernel::AllocOp>();
  if (!resultAlloc || !produced.getDefiningOp<kernel::AllocOp>())
    return false;
  std::optional<std::pair<Operation *, unsigned>> writer;
  SmallVector<std::pair<Operation *, unsigned>> reads;
  for (OpOperand &use : produced.getUses()) {
    Operation *user = use.getOwner();
    if (user == transpose)
      continue;
    unsigned index = use.getOperandNumber();
    auto call = dyn_cast<kernel::CallOp>(user);
    if (attentionRole(user, index) < 0 ||
        user->getBlock() != transpose->getBlock())
      return false;
    if (index >= call.getInputs().size()) {
      if (writer || !user->isBeforeInBlock(transpose))
        return false;
      writer = {user, index};
    } else if (!transpose->isBeforeInBlock(user) ||
               writtenBetween(transpose, user, kernel::rootBuffer(result))) {
      return false;
    } else {
      reads.emplace_back(user, index);
    }
  }
  if (!writer || resultAlloc->getBlock() != writer->first->getBlock())
    return false;
  // The writer now writes the result, earlier than the transpose did.
  if (!firstToTouch(transpose))
    return false;
  if (!resultAlloc->isBeforeInBlock(writer->first))
    resultAlloc->moveBefore(writer->first);
  readOtherLayout(writer->first, writer->second, result, transpose.getLoc());
  for (auto [reader, index] : reads)
    readOtherLayout(reader, index, result, transpose.getLoc());
  eraseTranspose(transpose, produced);
  return true;
}

struct FoldTransposesPass
    : public mlir::ztc::impl::FoldTransposesPassBase<FoldTransposesPass> {
  void runOnOperation() override {
    // Until nothing folds: folding one transpose can leave another's result
    // read only by matmuls (a weight transposed for the forward product and
    // transposed back for the backward one).
    for (bool changed = true; changed;) {
      changed = false;
      SmallVector<kernel::CallOp> transposes, headSplits;
      getOperation().walk([&](kernel::CallOp call) {
        if (swapsLastTwo(call))
          transposes.push_back(call);
        else if (swapsHeads(call))
          headSplits.push_back(call);
      });
      for (kernel::CallOp transpose : transposes)
        changed |= foldIntoReaders(transpose) || foldIntoProducer(transpose);
      for (kernel::CallOp split : headSplits)
        changed |= foldHeadsIntoReaders(split) || foldHeadsIntoProducer(split);
    }
  }
};

} // namespace
