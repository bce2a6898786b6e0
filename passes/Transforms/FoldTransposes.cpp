//===- FoldTransposes.cpp - the ztc-fold-transposes pass ----------*- C++
//-*-===//
//
// Lets matmul read an operand whose last two dimensions a transpose kernel
// swapped as it is stored, with a transpose flag, instead of copying it.
// See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_FOLDTRANSPOSESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// Whether `call` is a transpose that swaps only the last two dimensions.
bool swapsLastTwo(kernel::CallOp call) {
  if (call.getCallee() != "transpose" || call.getInputs().size() != 1 ||
      call.getOutputs().size() != 1)
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

/// Whether an op after `from` and before `to` writes into `root`.
bool writtenBetween(Operation *from, Operation *to, Value root) {
  for (Operation *op = from->getNextNode(); op && op != to;
       op = op->getNextNode())
    for (Value written : kernel::writtenBuffers(op))
      if (kernel::rootBuffer(written) == root)
        return true;
  return false;
}

/// Folds `transpose` into the matmuls that read its result, when they are
/// its only readers and nothing overwrites its input before they run.
bool fold(kernel::CallOp transpose) {
  Value result = transpose.getOutputs()[0];
  Value source = transpose.getInputs()[0];
  if (!result.getDefiningOp<kernel::AllocOp>())
    return false;
  SmallVector<std::pair<kernel::CallOp, unsigned>> reads;
  for (OpOperand &use : result.getUses()) {
    if (use.getOwner() == transpose)
      continue;
    auto matmul = dyn_cast<kernel::CallOp>(use.getOwner());
    if (!matmul || matmul.getCallee() != "matmul" ||
        matmul->getBlock() != transpose->getBlock() ||
        !transpose->isBeforeInBlock(matmul))
      return false;
    unsigned index = use.getOperandNumber();
    if (index >= matmul.getInputs().size())
      return false; // written, not read
    StringRef flag = index == 0 ? "transpose_a" : "transpose_b";
    if (matmul.getConfig().get(flag))
      return false;
    if (writtenBetween(transpose, matmul, kernel::rootBuffer(source)))
      return false;
    reads.emplace_back(matmul, index);
  }
  if (reads.empty())
    return false;
  for (auto [matmul, index] : reads) {
    NamedAttrList config(matmul.getConfig());
    config.set(index == 0 ? "transpose_a" : "transpose_b",
               BoolAttr::get(matmul.getContext(), true));
    matmul.setConfigAttr(config.getDictionary(matmul.getContext()));
    matmul->setOperand(index, source);
    matmul->setLoc(FusedLoc::get(matmul.getContext(),
                                 {matmul.getLoc(), transpose.getLoc()}));
  }
  Operation *alloc = result.getDefiningOp();
  transpose.erase();
  if (alloc->use_empty())
    alloc->erase();
  return true;
}

struct FoldTransposesPass
    : public ztc::impl::FoldTransposesPassBase<FoldTransposesPass> {
  void runOnOperation() override {
    SmallVector<kernel::CallOp> transposes;
    getOperation().walk([&](kernel::CallOp call) {
      if (swapsLastTwo(call))
        transposes.push_back(call);
    });
    for (kernel::CallOp transpose : transposes)
      (void)fold(transpose);
  }
};

} // namespace
