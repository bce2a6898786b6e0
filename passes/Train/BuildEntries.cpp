//===- BuildEntries.cpp - the ztc-build-entries pass ----------------------===//
//
// Turns the model's one function into the entries of the compiled step
// (forward, train_step, loss_and_grads, loss, evaluate), each a function
// named after its kind and tagged `train.entry`. The numbered steps follow the
// pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Arithmetic.h"
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

/// Each nn.mode_select becomes its training operand, or in `evaluate` its
/// inference one.
void selectMode(func::FuncOp entry, bool evaluation) {
  entry.walk([&](nn::ModeSelectOp select) {
    select.replaceAllUsesWith(evaluation ? select.getInference()
                                         : select.getTraining());
    select.erase();
  });
}

/// The cross entropy the loss is, if it is one: the mean nll_loss or the
/// nn.linear_cross_entropy (ztc-fuse-cross-entropy) the first result is
/// computed from.
Operation *crossEntropyOf(func::FuncOp entry) {
  Operation *ret = entry.getBody().back().getTerminator();
  Value loss = ret->getOperand(0);
  // A cast back to the loss's type (mixed precision, fp64) may follow.
  while (auto cast = loss.getDefiningOp<nn::CastOp>())
    loss = cast.getX();
  if (auto fused = loss.getDefiningOp<nn::LinearCrossEntropyOp>())
    return fused;
  auto nll = loss.getDefiningOp<nn::NllLossOp>();
  return nll && nll.getReduction() == "mean" ? nll : nullptr;
}

/// The rows whose label's score is the highest, as an i1 per row, from the
/// log-probabilities a mean nll_loss reads.
Value bestRows(Arithmetic &m, nn::NllLossOp nll) {
  Value scores = nll.getLogProbs();
  Value best =
      nn::ReduceMaxOp::create(m.b, m.loc, scores, ArrayRef<int64_t>{1}, false);
  Value picked =
      nn::NllLossOp::create(m.b, m.loc, scores, nll.getTarget(), Value(),
                            "none", nll.getIgnoreIndexAttr());
  Value atLabel = nn::NegOp::create(m.b, m.loc, picked);
  return m.equal(atLabel, best);
}

/// `evaluate`: the loss, and for a cross entropy the rows whose label's
/// score is the highest (`correct`) among those not ignored (`counted`),
/// as f32 scalars the trainer sums over batches and ranks. A tie with the
/// label counts as correct (argmax would pick the first class).
LogicalResult buildEvaluate(func::FuncOp entry) {
  train::eraseUpdateResults(entry);
  if (failed(dropResults(entry, [](unsigned i) { return i > 0; })))
    return failure();
  Operation *crossEntropy = crossEntropyOf(entry);
  if (!crossEntropy)
    return success();
  auto fused = dyn_cast<nn::LinearCrossEntropyOp>(crossEntropy);
  auto nll = dyn_cast<nn::NllLossOp>(crossEntropy);
  Operation *ret = entry.getBody().back().getTerminator();
  OpBuilder b(ret);
  Arithmetic m{b, NameLoc::get(b.getStringAttr("evaluate.accuracy"),
                               crossEntropy->getLoc())};
  Value target = fused ? fused.getTarget() : nll.getTarget();
  auto targetType = cast<RankedTensorType>(target.getType());
  Type index = targetType.getElementType();
  // The fused op counts its correct rows itself: it never holds the
  // scores.
  Value hit = nll ? bestRows(m, nll) : Value();
  // Without an ignore index every row counts: a label never equals it.
  std::optional<int64_t> ignoreIndex =
      fused ? fused.getIgnoreIndex() : nll.getIgnoreIndex();
  Value counted;
  if (ignoreIndex) {
    Value ignore = arith::ConstantOp::create(
        b, m.loc,
        DenseElementsAttr::get(RankedTensorType::get({}, index),
                               b.getIntegerAttr(index, *ignoreIndex)));
    Value ignored = m.equal(target, ignore);
    counted = m.logicalNot(ignored);
  } else {
    counted = arith::ConstantOp::create(
        b, m.loc,
        DenseElementsAttr::get(
            RankedTensorType::get(targetType.getShape(), b.getI1Type()), true));
  }
  auto f32 = RankedTensorType::get({}, b.getF32Type());
  auto f32Rows = RankedTensorType::get(targetType.getShape(), b.getF32Type());
  Value rightRows;
  if (hit)
    rightRows =
        nn::CastOp::create(b, m.loc, f32Rows, m.logicalAnd(hit, counted));
  Value countedRows = nn::CastOp::create(b, m.loc, f32Rows, counted);
  Value correct = hit ? m.sum(rightRows) : fused.getCorrect();
  if (correct.getType() != f32)
    correct = nn::CastOp::create(b, m.loc, f32, correct);
  Value total = m.sum(countedRows);
  SmallVector<Value> results(ret->getOperands());
  results.append({correct, total});
  ret->setOperands(results);
  unsigned first = entry.getNumResults();
  if (failed(entry.insertResult(first, f32, {})) ||
      failed(entry.insertResult(first + 1, f32, {})))
    return failure();
  entry.setResultAttr(first, "onnx.name", b.getStringAttr("correct"));
  entry.setResultAttr(first + 1, "onnx.name", b.getStringAttr("counted"));
  return success();
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
            << "'; expected forward, train_step, loss_and_grads, loss or "
               "evaluate "
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
      selectMode(entry, kind == "evaluate");
      if (kind == "evaluate")
        built = buildEvaluate(entry);
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
