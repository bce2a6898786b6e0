//===- BuildEntries.cpp - the ztc-build-entries pass --------------*- C++
//-*-===//
//
// Turns the model's one function into the entries of the compiled step
// (forward, train_step, loss_and_grads, loss), each a function named after
// its kind and tagged `train.entry`. The numbered steps follow the pass
// description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_BUILDENTRIESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// Drops every result of `func` for which `drop(i)` holds; the ops only
/// they used die in the cleanup that follows the pass.
LogicalResult dropResults(func::FuncOp func,
                          function_ref<bool(unsigned)> drop) {
  Operation *ret = func.getBody().back().getTerminator();
  llvm::BitVector erase(func.getNumResults());
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (drop(i))
      erase.set(i);
  ret->eraseOperands(erase);
  return func.eraseResults(erase);
}

struct BuildEntriesPass
    : public ztc::impl::BuildEntriesPassBase<BuildEntriesPass> {
  using BuildEntriesPassBase::BuildEntriesPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // 1. One model function; a loss first when training entries are asked.
    auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
    if (funcs.size() != 1) {
      module.emitError("ztc-build-entries needs a module with one function "
                       "(the model's step), found ")
          << funcs.size();
      return signalPassFailure();
    }
    func::FuncOp model = funcs.front();
    llvm::StringSet<> seen;
    for (const std::string &kind : entries) {
      if (!llvm::is_contained(train::kEntryKinds, StringRef(kind)) ||
          kind == "accumulate") {
        module.emitError("unknown entry '")
            << kind
            << "'; expected forward, train_step, loss_and_grads or loss "
               "(ztc-accumulate builds accumulate)";
        return signalPassFailure();
      }
      if (!seen.insert(kind).second) {
        module.emitError("entry '") << kind << "' is listed twice";
        return signalPassFailure();
      }
      if (kind != "forward" &&
          (model.getNumResults() == 0 ||
           !train::isLossType(model.getResultTypes()[0]))) {
        model.emitError("entry '")
            << kind
            << "' needs a function returning a scalar float loss first; "
               "run ztc-attach-loss and ztc-autodiff";
        return signalPassFailure();
      }
    }
    if (entries.empty()) {
      module.emitError("ztc-build-entries needs at least one entry");
      return signalPassFailure();
    }

    // 2. One clone per entry, in order.
    OpBuilder b(module.getContext());
    for (const std::string &kind : entries) {
      func::FuncOp entry = model.clone();
      entry.setName(kind);
      entry->setAttr(train::kEntryAttr, b.getStringAttr(kind));
      module.push_back(entry);
      LogicalResult built = success();
      if (kind == "forward" || kind == "loss_and_grads")
        train::eraseUpdateResults(entry);
      if (kind == "loss_and_grads") {
        for (unsigned i = 1, e = entry.getNumResults(); i < e; ++i)
          if (auto of =
                  entry.getResultAttrOfType<StringAttr>(i, train::kGradOfAttr))
            entry.setResultAttr(i, "onnx.name", of);
      } else if (kind == "loss") {
        built = dropResults(entry, [](unsigned i) { return i > 0; });
      } else if (kind == "train_step") {
        // The step records its loss on the device for the trainer's logs.
        Operation *ret = entry.getBody().back().getTerminator();
        b.setInsertionPoint(ret);
        train::RecordLossOp::create(b, ret->getLoc(), ret->getOperand(0));
      }
      if (failed(built))
        return signalPassFailure();
    }
    // 3. The model's function is now its entries.
    model.erase();
  }
};

} // namespace
