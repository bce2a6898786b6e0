//===- LossScale.cpp - the ztc-loss-scale pass ----------------------------===//
//
// Dynamic loss scaling on the device: the finite check of the gradients the
// updates read, the skip of an overflowing step, and DeepSpeed's scale
// rule, all as nn arithmetic on `state` bindings, so no step synchronizes
// with the host. See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/IR/DistOps.h"
#include "passes/Arithmetic.h"
#include "passes/Passes.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_LOSSSCALEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// An update's results, each with the operand it replaces.
SmallVector<std::pair<Value, Value>> replacedValues(Operation *op) {
  SmallVector<std::pair<Value, Value>> pairs;
  if (auto sgd = dyn_cast<train::SgdOp>(op)) {
    pairs.push_back({sgd.getNewParam(), sgd.getParam()});
    if (Value buffer = sgd.getNewMomentumBuffer())
      pairs.push_back({buffer, sgd.getMomentumBuffer()});
  } else if (auto adam = dyn_cast<train::AdamOp>(op)) {
    pairs.push_back({adam.getNewParam(), adam.getParam()});
    pairs.push_back({adam.getNewExpAvg(), adam.getExpAvg()});
    pairs.push_back({adam.getNewExpAvgSq(), adam.getExpAvgSq()});
  } else if (auto adam = dyn_cast<train::Adam8bitOp>(op)) {
    pairs = adam.replacedOperands();
  }
  return pairs;
}

struct LossScalePass : public ztc::impl::LossScalePassBase<LossScalePass> {
  using LossScalePassBase::LossScalePassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (train::entryKind(func) != "train_step")
      return;
    BlockArgument scale = train::findBinding(func, train::kLossScaleName);
    // Static scaling (or none): nothing is checked or skipped, as in
    // DeepSpeed.
    if (!scale ||
        !train::hasRole(func, scale.getArgNumber(), train::BindingRole::State))
      return;
    if (window < 1 || hysteresis < 1 || !(minScale > 0)) {
      func.emitError("dynamic loss scaling needs loss-scale-window >= 1, "
                     "hysteresis >= 1 and min-loss-scale > 0; got ")
          << int64_t(window) << ", " << int64_t(hysteresis) << " and "
          << double(minScale);
      return signalPassFailure();
    }

    Block &block = func.getBody().front();
    SmallVector<Operation *> updates;
    for (Operation &op : block)
      if (isa<train::SgdOp, train::AdamOp, train::Adam8bitOp>(op))
        updates.push_back(&op);
    if (updates.empty()) {
      func.emitError("ztc-loss-scale found no optimizer update: run "
                     "ztc-optimizer first");
      return signalPassFailure();
    }
    Operation *first = updates.front();
    for (Operation *op : updates) {
      Operation *def = op->getOperand(1).getDefiningOp();
      if (def && !def->isBeforeInBlock(first)) {
        op->emitError("ztc-loss-scale expects every gradient an update "
                      "reads to be complete before the first update");
        return signalPassFailure();
      }
    }

    OpBuilder b(first);
    Location loc = NameLoc::get(b.getStringAttr("loss_scale"), func.getLoc());
    Arithmetic m{b, loc};
    Type f32 = b.getF32Type();
    auto scalarType = RankedTensorType::get({}, f32);
    BlockArgument stepHyper = train::findBinding(func, "step");
    if (!stepHyper ||
        !train::hasRole(func, stepHyper.getArgNumber(),
                        train::BindingRole::Hyper) ||
        stepHyper.getType() != scalarType) {
      func.emitError("dynamic loss scaling needs the optimizer's f32 'step' "
                     "hyper argument");
      return signalPassFailure();
    }
    auto state = [&](StringRef suffix) {
      return train::appendBoundArgument(func, scalarType,
                                        (train::kLossScaleName + suffix).str(),
                                        train::BindingRole::State);
    };
    Value goodSteps = state(".good_steps");
    Value hysteresisUsed = state(".hysteresis_used");
    Value skippedSteps = state(".skipped_steps");
    Value failedAt = state(".failed_at");

    // 1. The finite check, DeepSpeed's: the sum of every gradient the
    // updates read is finite. A shard's sum is summed over the ranks
    // (stages 1-3), so every rank takes the same decision; whole gradients
    // are equal on every rank already.
    Value total;
    for (Operation *op : updates) {
      Value sum = m.sum(op->getOperand(1));
      if (Arithmetic::elementOf(sum) != f32)
        sum = nn::CastOp::create(b, loc, scalarType, sum);
      total = total ? m.add(total, sum) : sum;
    }
    auto stage =
        func->getAttrOfType<IntegerAttr>(dist::DistDialect::kZeroStageAttr);
    auto world =
        func->getAttrOfType<IntegerAttr>(dist::DistDialect::kWorldSizeAttr);
    if (stage && world && stage.getInt() >= 1 && world.getInt() > 1)
      total =
          dist::AllReduceOp::create(b, loc, scalarType, total, world.getInt());
    Value zero = m.scalar(0.0);
    Value difference = m.sub(total, total);
    Value finite = m.equal(difference, zero);
    // After the scale failed at its minimum nothing changes any more: the
    // trainer stops at its next read of the state.
    Value alive = m.equal(failedAt, zero);
    Value apply = m.logicalAnd(finite, alive);

    // 2. Adam's step count counts applied steps only.
    Value stepCount, newStepCount;
    if (llvm::any_of(updates, [](Operation *op) {
          return isa<train::AdamOp, train::Adam8bitOp>(op);
        })) {
      stepCount = train::appendBoundArgument(func, scalarType, "optimizer.step",
                                             train::BindingRole::State);
      Value next = m.add(stepCount, m.scalar(1.0));
      for (Operation *op : updates)
        if (auto adam = dyn_cast<train::AdamOp>(op))
          adam.getStepMutable().assign(next);
        else if (auto adam = dyn_cast<train::Adam8bitOp>(op))
          adam.getStepMutable().assign(next);
      newStepCount = m.select(apply, next, stepCount);
    }

    // 3. A skipped step leaves every parameter and optimizer state as it
    // was (the updates still run; their results are discarded elementwise).
    for (Operation *op : updates) {
      b.setInsertionPointAfter(op);
      for (auto [result, old] : replacedValues(op)) {
        Value kept = m.select(apply, result, old);
        result.replaceAllUsesExcept(kept, kept.getDefiningOp());
      }
    }

    // 4. The scale, DeepSpeed's DynamicLossScaler.update_scale: an
    // overflow first spends the hysteresis, then halves the scale (not
    // below the minimum; already at it, training fails); `window`
    // consecutive finite steps double it. good_steps counts finite steps
    // since the last overflow or growth; hysteresis_used counts overflows
    // forgiven since the hysteresis was last restored.
    b.setInsertionPoint(block.getTerminator());
    Value one = m.scalar(1.0);
    Value exhausted =
        m.logicalNot(m.less(hysteresisUsed, m.scalar(double(hysteresis) - 1)));
    Value half = m.mul(scale, 0.5);
    Value minimum = m.scalar(minScale);
    Value halved = m.max(half, minimum);
    Value overflowScale = m.select(exhausted, halved, scale);
    Value spent = m.add(hysteresisUsed, one);
    Value overflowHysteresis = m.select(exhausted, hysteresisUsed, spent);
    Value counted = m.add(goodSteps, one);
    Value grow = m.logicalNot(m.less(counted, m.scalar(double(window))));
    Value finiteGood = m.select(grow, zero, counted);
    Value doubled = m.mul(scale, 2.0);
    Value finiteScale = m.select(grow, doubled, scale);
    Value finiteHysteresis =
        consecutiveHysteresis ? zero : m.select(grow, zero, hysteresisUsed);
    Value atMinimum = m.equal(scale, minimum);
    Value overflow = m.logicalNot(finite);
    Value noRoom = m.logicalAnd(exhausted, atMinimum);
    Value failsNow = m.logicalAnd(overflow, noRoom);
    Value newFailedAt = m.select(failsNow, stepHyper, failedAt);
    Value newScale = m.select(finite, finiteScale, overflowScale);
    Value newGood = m.select(finite, finiteGood, zero);
    Value newHysteresis =
        m.select(finite, finiteHysteresis, overflowHysteresis);
    Value newSkipped = m.select(apply, skippedSteps, m.add(skippedSteps, one));
    SmallVector<std::pair<Value, Value>> stateUpdates = {
        {scale, m.select(alive, newScale, scale)},
        {goodSteps, m.select(alive, newGood, goodSteps)},
        {hysteresisUsed, m.select(alive, newHysteresis, hysteresisUsed)},
        {skippedSteps, newSkipped},
        {failedAt, m.select(alive, newFailedAt, failedAt)}};
    if (stepCount)
      stateUpdates.push_back({stepCount, newStepCount});
    if (failed(train::returnUpdates(func, stateUpdates))) {
      func.emitError("cannot add the loss scale's results");
      return signalPassFailure();
    }
  }
};

} // namespace
