//===- Autodiff.cpp - the ztc-autodiff pass ---------------------*- C++ -*-===//
//
// Reverse-mode automatic differentiation of a step function: appends the
// gradient of its loss (the first result) with respect to every trainable
// parameter as extra results. The pass only orchestrates: which values need
// a gradient, the reverse sweep, accumulation over several uses, and the new
// results. What each op's derivative is lives with the op, in the nn
// dialect's GradientOpInterface (dialects/NN/IR/*Gradients.cpp).
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"
#include "passes/Arithmetic.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

#include <cmath>

namespace mlir::ztc {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

/// A parameter to differentiate: its argument and ONNX name.
struct Param {
  BlockArgument arg;
  StringAttr name;
};

/// Records the ops a builder creates, so that the ones nothing uses can be
/// erased at the end.
struct CreatedOps : public OpBuilder::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    ops.push_back(op);
  }
  SmallVector<Operation *> ops;
};

/// Compiles the `frozen` patterns, each anchored to match a whole name.
/// Reports an invalid one at `func`.
FailureOr<SmallVector<llvm::Regex>>
compilePatterns(func::FuncOp func, ArrayRef<std::string> patterns) {
  SmallVector<llvm::Regex> compiled;
  for (const std::string &pattern : patterns) {
    llvm::Regex regex("^(" + pattern + ")$");
    std::string error;
    if (!regex.isValid(error))
      return func.emitError("invalid regular expression '")
             << pattern << "' in --freeze: " << error;
    compiled.push_back(std::move(regex));
  }
  return compiled;
}

/// Checks the function's shape and returns its loss: the first returned
/// value, a rank-0 float tensor.
FailureOr<Value> getLoss(func::FuncOp func) {
  if (!func.getBody().hasOneBlock())
    return func.emitError("ztc-autodiff expects a function with one block");
  if (func.getNumResults() == 0)
    return func.emitError("ztc-autodiff expects the loss as the first result, "
                          "but the function returns nothing");
  Type type = func.getResultTypes().front();
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.getRank() != 0 || !isFloatTensor(tensor))
    return func.emitError("ztc-autodiff expects the first result to be the "
                          "loss, a rank-0 float tensor, got ")
           << type;
  return func.getBody().front().getTerminator()->getOperand(0);
}

/// Whether `arg` is a batch-norm running statistic: a buffer PyTorch exports
/// as an initializer, recognized by use (it only feeds the `mean` or `var`
/// operand of nn.batch_norm). It is not trained, as in PyTorch.
bool isRunningStatistic(BlockArgument arg) {
  return !arg.use_empty() && llvm::all_of(arg.getUses(), [](OpOperand &use) {
    auto norm = dyn_cast<nn::BatchNormOp>(use.getOwner());
    return norm &&
           (&use == &norm.getMeanMutable() || &use == &norm.getVarMutable());
  });
}

/// The trainable parameters of `func`: float arguments bound as params
/// whose name no frozen pattern matches and that are not running
/// statistics, in inference form or updated by the step itself (a result
/// tagged `train.update_of` names them); those become buffers (their
/// binding's role, and their names in `buffers`).
SmallVector<Param> selectParams(func::FuncOp func, ArrayRef<llvm::Regex> frozen,
                                SmallVectorImpl<Attribute> &buffers) {
  llvm::StringSet<> updated;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (auto of = func.getResultAttrOfType<StringAttr>(i, train::kUpdateOfAttr))
      updated.insert(of.getValue());
  SmallVector<Param> params;
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    if (!train::hasRole(func, index, train::BindingRole::Param) ||
        !isFloatTensor(arg.getType()))
      continue;
    StringAttr name = train::getBinding(func, index).getName();
    if (func.getArgAttr(index, train::kFrozenAttr) ||
        llvm::any_of(frozen, [&](const llvm::Regex &regex) {
          return regex.match(name.getValue());
        }))
      continue;
    if (isRunningStatistic(arg) || updated.contains(name.getValue())) {
      buffers.push_back(name);
      train::setBinding(func, index, name.getValue(),
                        train::BindingRole::Buffer);
      continue;
    }
    params.push_back({arg, name});
  }
  return params;
}

/// The values that need a gradient: float values that depend on a parameter
/// and that the loss depends on.
DenseSet<Value> findActiveValues(Block &block, ArrayRef<Param> params,
                                 Value loss) {
  DenseSet<Value> varied, useful;
  for (const Param &param : params)
    varied.insert(param.arg);
  for (Operation &op : block)
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return varied.contains(v); }))
      for (Value result : op.getResults())
        if (isFloatTensor(result.getType()))
          varied.insert(result);
  useful.insert(loss);
  for (Operation &op : llvm::reverse(block))
    if (llvm::any_of(op.getResults(),
                     [&](Value v) { return useful.contains(v); }))
      for (Value operand : op.getOperands())
        if (isFloatTensor(operand.getType()))
          useful.insert(operand);
  DenseSet<Value> active;
  for (Value value : varied)
    if (useful.contains(value))
      active.insert(value);
  return active;
}

/// The reverse sweep over one function; holds the gradient of every value
/// visited so far.
class ReverseSweep {
public:
  ReverseSweep(OpBuilder &builder, const DenseSet<Value> &active)
      : b(builder), active(active) {}

  /// Seeds the loss with `seed` (a rank-0 tensor of the loss's type) and
  /// propagates through `block` in reverse.
  LogicalResult run(Block &block, Value loss, Value seed);

  /// The gradient of `value`, or null if it has none.
  Value lookup(Value value) const { return grads.lookup(value); }

private:
  LogicalResult visit(Operation *op);
  void accumulate(Value value, Value grad);

  OpBuilder &b;
  const DenseSet<Value> &active;
  DenseMap<Value, Value> grads;
};

LogicalResult ReverseSweep::run(Block &block, Value loss, Value seed) {
  if (!active.contains(loss))
    return success();
  grads[loss] = seed;
  // The forward's ops, listed before the walk: the VJPs are inserted before
  // the terminator, where a reverse iterator that starts there would next
  // visit them (and the first op again), not the op before it.
  SmallVector<Operation *> forward = llvm::map_to_vector(
      block.without_terminator(), [](Operation &op) { return &op; });
  for (Operation *op : llvm::reverse(forward))
    if (failed(visit(op)))
      return failure();
  return success();
}

LogicalResult ReverseSweep::visit(Operation *op) {
  SmallVector<Value> resultGrads;
  for (Value result : op->getResults())
    resultGrads.push_back(active.contains(result) ? grads.lookup(result)
                                                  : Value());
  if (llvm::all_of(resultGrads, [](Value g) { return !g; }))
    return success();
  auto differentiable = dyn_cast<nn::GradientOpInterface>(op);
  if (!differentiable)
    return op->emitOpError("has no gradient, but the loss depends on its "
                           "result through a trainable parameter");
  SmallVector<Value> operandGrads;
  if (failed(differentiable.buildVjp(b, resultGrads, operandGrads)))
    return failure();
  // The interface's contract, checked: a broken VJP must not produce
  // silently wrong gradients.
  if (operandGrads.size() != op->getNumOperands())
    return op->emitOpError("built ")
           << operandGrads.size() << " operand gradients for "
           << op->getNumOperands() << " operands";
  for (auto [index, operand, grad] :
       llvm::enumerate(op->getOperands(), operandGrads)) {
    if (!grad || !active.contains(operand))
      continue;
    if (grad.getType() != operand.getType())
      return op->emitOpError("built a gradient of type ")
             << grad.getType() << " for operand #" << index << " of type "
             << operand.getType();
    accumulate(operand, grad);
  }
  return success();
}

void ReverseSweep::accumulate(Value value, Value grad) {
  Value &slot = grads[value];
  slot =
      slot ? nn::AddOp::create(b, grad.getLoc(), slot, grad).getResult() : grad;
}

/// Appends `grads` to the function's results, each tagged with the name of
/// its parameter.
LogicalResult appendGradients(func::FuncOp func, ArrayRef<Value> grads,
                              ArrayRef<StringAttr> names) {
  Operation *ret = func.getBody().front().getTerminator();
  unsigned end = func.getNumResults();
  SmallVector<unsigned> indices(grads.size(), end);
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
  Builder b(func.getContext());
  for (auto [grad, name] : llvm::zip_equal(grads, names)) {
    types.push_back(grad.getType());
    attrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(train::kGradOfAttr, name)));
  }
  if (failed(func.insertResults(indices, types, attrs)))
    return func.emitError("cannot add the gradient results");
  ret->insertOperands(ret->getNumOperands(), grads);
  return success();
}

struct AutodiffPass : public ztc::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  /// A --freeze pattern that names no parameter is most likely a typo: say
  /// so, with a name it could have meant.
  void warnUnmatched(func::FuncOp func, ArrayRef<llvm::Regex> patterns) {
    SmallVector<StringRef> names;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      if (train::hasRole(func, i, train::BindingRole::Param) ||
          train::hasRole(func, i, train::BindingRole::Buffer))
        names.push_back(train::bindingName(func, i));
    for (auto [pattern, regex] : llvm::zip(frozen, patterns))
      if (!names.empty() && llvm::none_of(names, [&re = regex](StringRef name) {
            return re.match(name);
          }))
        func.emitWarning("--freeze '")
            << pattern << "' matches no parameter (they are named as the "
            << "model's initializers, such as '" << names.front() << "')";
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    FailureOr<SmallVector<llvm::Regex>> frozenPatterns =
        compilePatterns(func, frozen);
    FailureOr<Value> loss = getLoss(func);
    if (failed(frozenPatterns) || failed(loss))
      return signalPassFailure();
    Block &block = func.getBody().front();
    SmallVector<Attribute> buffers;
    SmallVector<Param> params = selectParams(func, *frozenPatterns, buffers);
    warnUnmatched(func, *frozenPatterns);
    DenseSet<Value> active = findActiveValues(block, params, *loss);

    OpBuilder b(block.getTerminator());
    CreatedOps created;
    b.setListener(&created);
    FailureOr<Value> scale = lossScale(func, b);
    if (failed(scale))
      return signalPassFailure();
    Type lossElement =
        cast<RankedTensorType>((*loss).getType()).getElementType();
    Value seed = *scale
                     ? castTo(b, *scale, lossElement)
                     : nn::buildScalar(b, (*loss).getLoc(), lossElement, 1.0);
    // With a loss scale, the backward runs on scale * loss; each gradient
    // leaves it unscaled as soon as it is complete (an overflow stays inf
    // or NaN, for ztc-loss-scale to find).
    Value inverse;
    if (*scale)
      inverse = nn::ReciprocalOp::create(b, scaleLoc(), *scale);
    ReverseSweep sweep(b, active);
    if (failed(sweep.run(block, *loss, seed)))
      return signalPassFailure();

    SmallVector<Value> grads;
    SmallVector<StringAttr> names;
    SmallVector<Attribute> noGrad;
    for (const Param &param : params) {
      if (Value grad = sweep.lookup(param.arg)) {
        Operation *widen = halfWidening(b, grad);
        if (widen)
          grad = widen->getResult(0);
        if (inverse) {
          OpBuilder::InsertionGuard guard(b);
          if (Operation *def = grad.getDefiningOp())
            b.setInsertionPointAfter(def);
          Value factor =
              castTo(b, inverse,
                     cast<RankedTensorType>(grad.getType()).getElementType());
          grad = nn::MulOp::create(b, scaleLoc(), grad, factor);
          if (widen)
            grad.getDefiningOp()->setAttr(train::kHalfGradientOfAttr,
                                          param.name);
        }
        if (widen)
          widen->setAttr(train::kHalfGradientOfAttr, param.name);
        grads.push_back(grad);
        names.push_back(param.name);
      } else {
        noGrad.push_back(param.name);
      }
    }
    if (failed(appendGradients(func, grads, names)))
      return signalPassFailure();
    if (!noGrad.empty())
      func->setAttr(train::kNoGradAttr, ArrayAttr::get(&getContext(), noGrad));
    if (!buffers.empty())
      func->setAttr(train::kBuffersAttr,
                    ArrayAttr::get(&getContext(), buffers));

    // VJPs build every operand's gradient; drop those nothing needed.
    // Users are created after what they use, so one reverse walk suffices.
    // The others are the backward's (train.gradient).
    for (Operation *op : llvm::reverse(created.ops)) {
      if (op->use_empty())
        op->erase();
      else
        op->setLoc(train::gradientLoc(op->getLoc()));
    }
  }

  /// The cast that widens a half-precision gradient to its parameter's
  /// type (the VJP of the forward's cast to half), when `grad` is one,
  /// possibly transposed or reshaped after it (a weight the forward
  /// transposed in f32, then cast). Such layout ops are rebuilt on the half
  /// value, so that the widening cast comes last and is what is returned.
  static Operation *halfWidening(OpBuilder &b, Value grad) {
    // A parameter's gradient is read by nothing yet; what leads to it, by
    // the next op alone.
    if (!grad.use_empty())
      return nullptr;
    SmallVector<Operation *> layout;
    Value value = grad;
    while (isa_and_nonnull<nn::TransposeOp, nn::ReshapeOp>(
        value.getDefiningOp())) {
      layout.push_back(value.getDefiningOp());
      value = layout.back()->getOperand(0);
      if (!value.hasOneUse())
        return nullptr;
    }
    auto widen = value.getDefiningOp<nn::CastOp>();
    if (!widen)
      return nullptr;
    Type from = widen.getX().getType().getElementType();
    auto to = dyn_cast<FloatType>(widen.getType().getElementType());
    if (!isa<Float16Type, BFloat16Type>(from) || !to || to.getWidth() <= 16)
      return nullptr;
    if (layout.empty())
      return widen;
    // The layout ops in half, in their order, then the cast. The old ones
    // are left unused, for the cleanup of unused backward ops.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(layout.front());
    Value half = Arithmetic{b, widen.getLoc()}.relayout(layout, widen.getX());
    return nn::CastOp::create(b, widen.getLoc(), grad.getType(), half);
  }

  Location scaleLoc() {
    return NameLoc::get(StringAttr::get(&getContext(), "loss_scale"));
  }

  /// `value` (rank 0) in `element`.
  Value castTo(OpBuilder &b, Value value, Type element) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getElementType() == element)
      return value;
    return nn::CastOp::create(b, scaleLoc(), type.clone(element), value);
  }

  /// The loss scale the backward is seeded with, as a rank-0 f32 value:
  /// null without scaling (loss-scale 1); a constant for a static scale;
  /// for dynamic scaling (loss-scale 0) the `loss_scale` state, added with
  /// the initial value 2^initial-scale-power, which ztc-loss-scale updates.
  FailureOr<Value> lossScale(func::FuncOp func, OpBuilder &b) {
    if (lossScaleValue == 1.0)
      return Value();
    if (!(lossScaleValue >= 0) || !std::isfinite(lossScaleValue)) {
      func.emitError("loss-scale must be 0 (dynamic) or a positive number, "
                     "got ")
          << lossScaleValue;
      return failure();
    }
    auto type = RankedTensorType::get({}, b.getF32Type());
    if (lossScaleValue > 0)
      return Value(arith::ConstantOp::create(
          b, scaleLoc(),
          DenseElementsAttr::get(type, b.getF32FloatAttr(lossScaleValue))));
    if (initialScalePower > 126) {
      func.emitError("initial-scale-power ")
          << unsigned(initialScalePower)
          << " is beyond float32's range (at most 126)";
      return failure();
    }
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      if (train::bindingName(func, i) == train::kLossScaleName) {
        func.emitError("argument ")
            << i << " is already bound as '" << train::kLossScaleName
            << "', the dynamic loss scale's state";
        return failure();
      }
    unsigned index = func.getNumArguments();
    NamedAttrList attrs(train::bindingAttrs(
        func.getContext(), train::kLossScaleName, train::BindingRole::State));
    attrs.set(train::kInitialAttr,
              DenseElementsAttr::get(
                  type, b.getF32FloatAttr(std::ldexp(1.0, initialScalePower))));
    (void)func.insertArgument(
        index, type, attrs.getDictionary(func.getContext()), scaleLoc());
    return Value(func.getArgument(index));
  }
};

} // namespace
