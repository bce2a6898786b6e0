//===- AttachLoss.cpp - the ztc-attach-loss pass --------------------------===//
//
// Builds the training objective on top of an imported model: a labels
// argument and a scalar loss made of nn ops, so autodiff and lowering treat
// it like any other part of the graph. See the pass description in
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_ATTACHLOSSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

struct AttachLossPass : public ztc::impl::AttachLossPassBase<AttachLossPass> {
  using AttachLossPassBase::AttachLossPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    LossKind kind = loss;
    if (kind == LossKind::Auto) {
      // The model's own loss when it returns exactly one scalar float.
      auto type = func.getNumResults() == 1
                      ? dyn_cast<RankedTensorType>(func.getResultTypes()[0])
                      : RankedTensorType();
      bool scalar = type && type.getNumElements() == 1 &&
                    isa<FloatType>(type.getElementType());
      if (!scalar) {
        func.emitError("the model does not return one scalar float loss (it "
                       "returns ")
            << func.getNumResults() << " output"
            << (func.getNumResults() == 1 ? "" : "s") << ", the first "
            << outputName(func, 0)
            << "); choose a loss with --loss cross_entropy|mse";
        return signalPassFailure();
      }
      kind = LossKind::None;
    }
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    FailureOr<unsigned> index = pickOutput(func);
    if (failed(index))
      return signalPassFailure();
    Value output = ret.getOperand(*index);
    auto outType = dyn_cast<RankedTensorType>(output.getType());
    if (!outType || !isa<FloatType>(outType.getElementType())) {
      func.emitError("the loss reads output ")
          << outputName(func, *index) << " of type " << output.getType()
          << ", which is not a float tensor";
      return signalPassFailure();
    }

    OpBuilder b(ret);
    Location loc = NameLoc::get(b.getStringAttr("loss"), ret.getLoc());
    Value lossValue;
    if (kind == LossKind::None) {
      if (outType.getRank() != 0 && outType.getNumElements() != 1) {
        func.emitError("output ")
            << outputName(func, *index) << " of type " << outType
            << " is not a scalar; choose a loss with --loss";
        return signalPassFailure();
      }
      lossValue =
          outType.getRank() == 0
              ? output
              : nn::ReshapeOp::create(
                    b, loc, RankedTensorType::get({}, outType.getElementType()),
                    output);
    } else {
      FailureOr<Value> built = kind == LossKind::CrossEntropy
                                   ? crossEntropy(func, b, loc, output)
                                   : meanSquaredError(func, b, loc, output);
      if (failed(built))
        return signalPassFailure();
      lossValue = *built;
    }
    if (tokenWeighted) {
      if (kind != LossKind::CrossEntropy) {
        func.emitError("token-weighted losses weigh labels that count: they "
                       "need cross_entropy, not ")
            << spell(kLossKinds, kind);
        return signalPassFailure();
      }
      Value weight = train::appendBoundArgument(
          func, lossValue.getType(), "loss_weight", train::BindingRole::Hyper);
      lossValue = nn::MulOp::create(b, loc, lossValue, weight);
    }

    // The loss, then the state updates (running statistics) unchanged.
    SmallVector<Value> results = {lossValue};
    SmallVector<DictionaryAttr> attrs = {b.getDictionaryAttr(
        b.getNamedAttr("onnx.name", b.getStringAttr("loss")))};
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      if (func.getResultAttr(i, train::kUpdateOfAttr)) {
        results.push_back(ret.getOperand(i));
        attrs.push_back(func.getResultAttrDict(i));
      }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    func.setAllResultAttrs(attrs);
    // Which loss was built (auto resolves here), for the artifact.
    func->setAttr(train::kLossAttr, b.getStringAttr(spell(kLossKinds, kind)));
  }

  std::string outputName(func::FuncOp func, unsigned i) {
    if (auto name = func.getResultAttrOfType<StringAttr>(i, "onnx.name"))
      return "'" + name.str() + "'";
    return "#" + std::to_string(i);
  }

  FailureOr<unsigned> pickOutput(func::FuncOp func) {
    unsigned count = func.getNumResults();
    if (count == 0) {
      func.emitError("the model has no outputs");
      return failure();
    }
    if (lossInput.empty())
      return 0u;
    std::string known;
    for (unsigned i = 0; i < count; ++i) {
      auto name = func.getResultAttrOfType<StringAttr>(i, "onnx.name");
      if (name && name.getValue() == lossInput)
        return i;
      known += (known.empty() ? "" : ", ") + outputName(func, i);
    }
    func.emitError("--loss-input names '")
        << lossInput << "', which is not a model output (outputs: " << known
        << ")";
    return failure();
  }

  /// Adds the labels argument after the graph inputs (before parameters).
  FailureOr<Value> addLabels(func::FuncOp func, RankedTensorType type) {
    unsigned position = 0;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      if (train::bindingName(func, i) == labels) {
        func.emitError("the model already has an input named '")
            << labels << "'; choose another with --labels";
        return failure();
      }
      if (!train::hasRole(func, i, train::BindingRole::Param))
        position = i + 1;
    }
    if (failed(
            func.insertArgument(position, type,
                                train::bindingAttrs(func.getContext(), labels,
                                                    train::BindingRole::Label),
                                func.getLoc())))
      return failure();
    return func.getArgument(position);
  }

  FailureOr<Value> crossEntropy(func::FuncOp func, OpBuilder &b, Location loc,
                                Value logits) {
    auto type = cast<RankedTensorType>(logits.getType());
    if (type.getRank() < 1) {
      func.emitError("cross_entropy needs class scores in the output's last "
                     "dimension, but the output is a scalar");
      return failure();
    }
    ArrayRef<int64_t> shape = type.getShape();
    int64_t classes = shape.back(), rows = 1;
    for (int64_t d : shape.drop_back())
      rows *= d;
    FailureOr<Value> target = addLabels(
        func, RankedTensorType::get(shape.drop_back(), b.getI64Type()));
    if (failed(target))
      return failure();
    Value flat = nn::ReshapeOp::create(
        b, loc, RankedTensorType::get({rows, classes}, type.getElementType()),
        logits);
    Value flatTarget = nn::ReshapeOp::create(
        b, loc, RankedTensorType::get({rows}, b.getI64Type()), *target);
    Value logProbs = nn::LogSoftmaxOp::create(b, loc, flat, uint64_t(1));
    // The class count, for checking labels before a run.
    func->setAttr(train::kClassesAttr, b.getI64IntegerAttr(classes));
    return Value(nn::NllLossOp::create(b, loc, logProbs, flatTarget, Value(),
                                       "mean",
                                       b.getI64IntegerAttr(ignoreIndex)));
  }

  FailureOr<Value> meanSquaredError(func::FuncOp func, OpBuilder &b,
                                    Location loc, Value output) {
    auto type = cast<RankedTensorType>(output.getType());
    FailureOr<Value> target = addLabels(func, type);
    if (failed(target))
      return failure();
    Value diff = nn::SubOp::create(b, loc, output, *target);
    Value square = nn::MulOp::create(b, loc, diff, diff);
    SmallVector<int64_t> axes =
        llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    return Value(nn::ReduceMeanOp::create(b, loc, square, axes, false));
  }
};

} // namespace
