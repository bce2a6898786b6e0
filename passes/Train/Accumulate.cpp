//===- Accumulate.cpp - the ztc-accumulate pass ---------------------------===//
//
// Gradient accumulation over K micro-batches: an `@accumulate` entry that
// adds each gradient to a persistent accumulator, and a `@train_step` that
// hands the optimizer the mean and resets the accumulators. The numbered
// steps follow the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Arithmetic.h"
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

  /// The accumulators' element type for a gradient of `element`: accum-dtype
  /// for f32 gradients (wider ones keep theirs).
  Type accumElement(Type element) {
    if (!element.isF32())
      return element;
    if (accumDtype == AccumType::Bf16)
      return BFloat16Type::get(&getContext());
    if (accumDtype == AccumType::Fp16)
      return Float16Type::get(&getContext());
    return element;
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
      auto gradType = cast<RankedTensorType>(grad.getType());
      auto accumType = gradType.clone(accumElement(gradType.getElementType()));
      unsigned index = func.getNumArguments();
      if (failed(func.insertArgument(
              index, accumType,
              train::bindingAttrs(func.getContext(), name,
                                  train::BindingRole::State),
              func.getLoc())))
        return failure();
      b.setInsertionPoint(ret);
      Location loc = grad.getLoc();
      // A narrower accumulator is widened, summed in the gradient's type
      // and rounded once.
      Value accum = func.getArgument(index);
      if (accumType != gradType)
        accum = nn::CastOp::create(b, loc, gradType, accum);
      Value sum = nn::AddOp::create(b, loc, accum, grad);
      if (!isStep) {
        if (accumType != gradType)
          sum = nn::CastOp::create(b, loc, accumType, sum);
        results.push_back(sum);
        attrs.push_back(b.getDictionaryAttr(
            b.getNamedAttr(train::kUpdateOfAttr, b.getStringAttr(name))));
        continue;
      }
      Value inverse = Arithmetic{b, loc}.scalar(1.0 / microBatches,
                                                gradType.getElementType());
      results.push_back(nn::MulOp::create(b, loc, sum, inverse));
      attrs.push_back(func.getResultAttrDict(i));
      Value zero = Arithmetic{b, loc}.scalar(0.0, accumType.getElementType());
      resets.emplace_back(
          nn::BroadcastToOp::create(b, loc, zero, gradType.getShape()), name);
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
