//===- CheckFinite.cpp - the ztc-check-finite pass ------------------------===//
//
// --check-finite: marks every nn op with a float result for a finite check
// (`train.finite_check` = {node, op, pass}); ztc-convert-nn-to-kernel
// scans the op's result right after its kernels. See the pass description
// in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/IR/DistOps.h"
#include "passes/Passes.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_CHECKFINITEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// The ops the entry's loss (its first result, when it is one) depends on.
DenseSet<Operation *> lossAncestors(func::FuncOp func) {
  DenseSet<Operation *> ancestors;
  Operation *ret = func.getBody().front().getTerminator();
  if (ret->getNumOperands() == 0 ||
      !train::isLossType(ret->getOperand(0).getType()) ||
      train::entryKind(func) == "forward")
    return ancestors;
  SmallVector<Value> worklist{ret->getOperand(0)};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val().getDefiningOp();
    if (!op || !ancestors.insert(op).second)
      continue;
    llvm::append_range(worklist, op->getOperands());
  }
  return ancestors;
}

struct CheckFinitePass
    : public ztc::impl::CheckFinitePassBase<CheckFinitePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Evaluation is not training: its padded batches may hold no counted
    // row (a loss of 0 / 0) and must not stop the run.
    if (func.isExternal() || train::entryKind(func) == "evaluate")
      return;
    bool forwardOnly = train::entryKind(func) == "forward";
    DenseSet<Operation *> forward = lossAncestors(func);
    Builder b(func.getContext());
    for (Operation &op : func.getBody().front()) {
      if (!isa_and_nonnull<nn::NNDialect, dist::DistDialect>(op.getDialect()) ||
          op.getNumResults() == 0 || isa<nn::ReshapeOp>(op))
        continue; // a reshape is a view of a buffer checked already
      auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
      if (!type || !isa<FloatType>(type.getElementType()))
        continue;
      SmallVector<std::string> nodes;
      train::collectNodeNames(op.getLoc(), nodes);
      // ztc's own arithmetic (optimizer, ZeRO, the loss scale) is named
      // after the pass that wrote it, not after an ONNX node.
      bool own = nodes.empty() ||
                 llvm::is_contained({"optimizer", "zero", "loss_scale"},
                                    StringRef(nodes.front()));
      kernel::FinitePass pass = kernel::FinitePass::backward;
      if (forwardOnly || forward.contains(&op))
        pass = kernel::FinitePass::forward;
      else if (op.hasAttr(train::kRecomputedAttr))
        pass = kernel::FinitePass::recomputed_forward;
      else if (own)
        pass = kernel::FinitePass::update;
      // A cast says what it casts to: an overflow of half precision shows
      // there.
      std::string name = op.getName().stripDialect().str();
      if (isa<nn::CastOp>(op)) {
        llvm::raw_string_ostream os(name);
        os << " to " << type.getElementType();
      }
      op.setAttr(train::kFiniteCheckAttr,
                 b.getDictionaryAttr(
                     {b.getNamedAttr("node",
                                     b.getStringAttr(own ? "" : nodes.front())),
                      b.getNamedAttr("op", b.getStringAttr(name)),
                      b.getNamedAttr("pass",
                                     b.getStringAttr(
                                         kernel::stringifyFinitePass(pass)))}));
    }
  }
};

} // namespace
