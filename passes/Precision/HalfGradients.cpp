//===- HalfGradients.cpp - the ztc-half-gradients pass --------------------===//
//
// Mixed precision: the widening of each half-precision parameter gradient
// (marked by ztc-autodiff) is redone right before each reader, so the
// gradient waits for the optimizer in half precision. See the pass
// description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_HALFGRADIENTSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

struct HalfGradientsPass
    : public ztc::impl::HalfGradientsPassBase<HalfGradientsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<Operation *> marked;
    llvm::SetVector<StringRef> names;
    for (Operation &op : func.getBody().front()) {
      auto of = op.getAttrOfType<StringAttr>(train::kHalfGradientOfAttr);
      if (!of)
        continue;
      marked.push_back(&op);
      if (isa<nn::CastOp>(op))
        names.insert(of.getValue());
    }
    if (marked.empty())
      return;
    // Latest first: a chain's later op is cloned before its readers while
    // it still reads the earlier one, which is then cloned before each of
    // those clones.
    OpBuilder b(func.getContext());
    for (Operation *op : llvm::reverse(marked)) {
      SmallVector<Operation *> readers;
      for (Operation *user : op->getUsers())
        if (!llvm::is_contained(readers, user))
          readers.push_back(user);
      for (Operation *reader : readers) {
        b.setInsertionPoint(reader);
        Operation *copy = b.clone(*op);
        copy->removeAttr(train::kHalfGradientOfAttr);
        op->getResult(0).replaceUsesWithIf(
            copy->getResult(0),
            [&](OpOperand &use) { return use.getOwner() == reader; });
      }
      op->erase();
    }
    SmallVector<StringRef> sorted(names.begin(), names.end());
    llvm::sort(sorted);
    Builder attrs(func.getContext());
    func->setAttr(train::kHalfGradientsAttr, attrs.getStrArrayAttr(sorted));
  }
};

} // namespace
