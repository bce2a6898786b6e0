//===- Accumulate.cpp - the ztc-accumulate pass -------------------*- C++
//-*-===//
//
// Gradient accumulation over K micro-batches: an `@accumulate` entry that
// adds each gradient to a persistent accumulator, and a `@train_step` that
// hands the optimizer the mean and resets the accumulators. The numbered
// steps follow the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_ACCUMULATEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

struct AccumulatePass : public ztc::impl::AccumulatePassBase<AccumulatePass> {
  using AccumulatePassBase::AccumulatePassBase;

  void runOnOperation() override {
    if (microBatches == 0) {
      getOperation().emitError("micro-batches must be at least 1");
      return signalPassFailure();
    }
    if (microBatches == 1)
      return;
    auto step = getOperation().lookupSymbol<func::FuncOp>("train_step");
    if (!step || train::entryKind(step) != "train_step") {
      getOperation().emitError("gradient accumulation needs a @train_step "
                               "entry; run ztc-build-entries first");
      return signalPassFailure();
    }
    // 1-2. The accumulate entry is the step as it is now (before the
    // accumulators), rewritten below like the step.
    func::FuncOp accumulate = step.clone();
    accumulate.setName("accumulate");
    accumulate->setAttr(train::kEntryAttr,
                        StringAttr::get(&getContext(), "accumulate"));
    getOperation().insert(std::next(step->getIterator()), accumulate);
    for (func::FuncOp func : {accumulate, step})
      if (failed(rewrite(func, /*isStep=*/func == step)))
        return signalPassFailure();
  }

  /// A rank-0 f32 constant.
  static Value scalar(OpBuilder &b, Location loc, double value) {
    auto type = RankedTensorType::get({}, b.getF32Type());
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getF32FloatAttr(value)));
  }

  /// Adds the accumulators to `func` and rewrites its results: the
  /// accumulate entry returns the sums as accumulator updates, the step
  /// (3.) hands on the means and resets the accumulators.
  LogicalResult rewrite(func::FuncOp func, bool isStep) {
    OpBuilder b(func.getContext());
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    SmallVector<Value> results = {ret.getOperand(0)};
    SmallVector<DictionaryAttr> attrs = {func.getResultAttrDict(0)};
    SmallVector<std::pair<Value, std::string>> resets;
    unsigned count = func.getNumResults();
    for (unsigned i = 1; i < count; ++i) {
      // State updates (running statistics) happen in every micro-batch.
      if (func.getResultAttr(i, train::kUpdateOfAttr)) {
        results.push_back(ret.getOperand(i));
        attrs.push_back(func.getResultAttrDict(i));
        continue;
      }
      auto of = func.getResultAttrOfType<StringAttr>(i, train::kGradOfAttr);
      if (!of)
        return func.emitError("result ")
               << i << " is neither the loss, a gradient nor an update";
      std::string name = of.str() + ".grad_accum";
      Value grad = ret.getOperand(i);
      unsigned index = func.getNumArguments();
      if (failed(func.insertArgument(
              index, grad.getType(),
              train::bindingAttrs(func.getContext(), name,
                                  train::BindingRole::State),
              func.getLoc())))
        return failure();
      b.setInsertionPoint(ret);
      Location loc = grad.getLoc();
      Value sum = nn::AddOp::create(b, loc, func.getArgument(index), grad);
      if (!isStep) {
        results.push_back(sum);
        attrs.push_back(b.getDictionaryAttr(
            b.getNamedAttr(train::kUpdateOfAttr, b.getStringAttr(name))));
        continue;
      }
      results.push_back(
          nn::MulOp::create(b, loc, sum, scalar(b, loc, 1.0 / microBatches)));
      attrs.push_back(func.getResultAttrDict(i));
      auto shape = cast<RankedTensorType>(grad.getType()).getShape();
      resets.emplace_back(
          nn::BroadcastToOp::create(b, loc, scalar(b, loc, 0.0), shape), name);
    }
    for (auto &[zeros, name] : resets) {
      results.push_back(zeros);
      attrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(train::kUpdateOfAttr, b.getStringAttr(name))));
    }
    b.setInsertionPoint(ret);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    func.setAllResultAttrs(attrs);
    return success();
  }
};

} // namespace
