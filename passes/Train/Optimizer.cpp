//===- Optimizer.cpp - the ztc-optimizer pass -----------------------------===//
//
// Appends SGD, Adam or AdamW updates (train ops) to a function that
// returns the loss and its gradients. See the pass description in
// Passes.td; ztc-lower-train expands the updates into nn arithmetic.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_OPTIMIZERPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

struct OptimizerPass : public ztc::impl::OptimizerPassBase<OptimizerPass> {
  using OptimizerPassBase::OptimizerPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Entries other than the training step keep their gradients.
    StringRef entry = train::entryKind(func);
    if (!entry.empty() && entry != "train_step")
      return;
    OptimizerKind kind = optimizer;
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    if (func.getNumResults() < 1 ||
        !train::isLossType(ret.getOperand(0).getType())) {
      func.emitError("the optimizer needs a function returning a scalar "
                     "float loss first; run ztc-attach-loss and ztc-autodiff");
      return signalPassFailure();
    }

    // Parameters by name, and the gradient results.
    llvm::StringMap<unsigned> argByName;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      if (StringRef name = train::bindingName(func, i); !name.empty())
        argByName[name] = i;
    struct Update {
      std::string name;
      unsigned arg;
      Value grad;
    };
    SmallVector<Update> updates;
    // Updates decided before the optimizer (gradient accumulators) pass
    // through unchanged.
    SmallVector<std::pair<Value, StringAttr>> passThrough;
    for (unsigned i = 1, e = func.getNumResults(); i < e; ++i) {
      if (auto update =
              func.getResultAttrOfType<StringAttr>(i, train::kUpdateOfAttr)) {
        passThrough.emplace_back(ret.getOperand(i), update);
        continue;
      }
      auto of = func.getResultAttrOfType<StringAttr>(i, train::kGradOfAttr);
      if (!of) {
        func.emitError("result ") << i
                                  << " is not a gradient of a parameter "
                                     "(train.grad_of)";
        return signalPassFailure();
      }
      auto it = argByName.find(of.getValue());
      if (it == argByName.end()) {
        func.emitError("result ")
            << i << " is the gradient of '" << of.getValue()
            << "', which names no argument";
        return signalPassFailure();
      }
      updates.push_back({of.str(), it->second, ret.getOperand(i)});
    }
    if (updates.empty()) {
      func.emitError("nothing to train: no parameter has a gradient");
      return signalPassFailure();
    }
    // The updates' arithmetic and hyperparameters are f32 (half
    // parameters get f32 masters under --precision); f64 has none.
    for (const Update &update : updates)
      if (cast<ShapedType>(func.getArgument(update.arg).getType())
              .getElementType()
              .isF64()) {
        func.emitError("parameter '")
            << update.name
            << "' is float64: ztc trains float32 parameters (bf16 or fp16 "
               "copies with --precision); convert the model to float32 "
               "(ztc gradcheck checks float64 gradients)";
        return signalPassFailure();
      }

    OpBuilder b(ret);
    Location loc = NameLoc::get(b.getStringAttr("optimizer"), ret.getLoc());
    Type scalarType = RankedTensorType::get({}, b.getF32Type());
    Value lr = train::appendBoundArgument(func, scalarType, "lr",
                                          train::BindingRole::Hyper);
    Value step = train::appendBoundArgument(func, scalarType, "step",
                                            train::BindingRole::Hyper);
    b.setInsertionPoint(ret);

    // 2. Global-norm clipping.
    Value gradNorm;
    if (clipGradNorm > 0) {
      SmallVector<Value> grads =
          llvm::map_to_vector(updates, [](Update &u) { return u.grad; });
      auto clip = train::ClipByGlobalNormOp::create(
          b, loc, scalarType, ValueRange(grads).getTypes(), grads,
          b.getF64FloatAttr(clipGradNorm));
      for (auto [u, clipped] : llvm::zip(updates, clip.getClipped()))
        u.grad = clipped;
      // The norm before clipping, kept for the trainer's log (grad_norm).
      gradNorm = clip.getNorm();
      train::appendBoundArgument(func, scalarType, "grad_norm",
                                 train::BindingRole::State);
    }

    // 3. Updates.
    double decay =
        weightDecay >= 0
            ? weightDecay
            : train::defaultWeightDecay(spell(kOptimizerKinds, kind));
    bool eightBit =
        kind == OptimizerKind::Adam8bit || kind == OptimizerKind::Adamw8bit;
    SmallVector<Value> results = {ret.getOperand(0)};
    SmallVector<std::string> updatedNames;
    for (Update &u : updates) {
      Value p = func.getArgument(u.arg);
      Type type = p.getType();
      if (kind == OptimizerKind::Sgd) {
        SmallVector<Value> operands = {p, u.grad, lr};
        SmallVector<Type> types = {type};
        if (momentum != 0) {
          operands.push_back(train::appendBoundArgument(
              func, type, u.name + ".momentum_buffer",
              train::BindingRole::State));
          types.push_back(type);
        }
        SmallVector<NamedAttribute> attrs = {
            b.getNamedAttr("momentum", b.getF64FloatAttr(momentum)),
            b.getNamedAttr("weight_decay", b.getF64FloatAttr(decay))};
        if (nesterov)
          attrs.push_back(b.getNamedAttr("nesterov", b.getUnitAttr()));
        b.setInsertionPoint(ret);
        auto sgd = train::SgdOp::create(b, loc, types, operands, attrs);
        if (Value buffer = sgd.getNewMomentumBuffer()) {
          results.push_back(buffer);
          updatedNames.push_back(u.name + ".momentum_buffer");
        }
        results.push_back(sgd.getNewParam());
        updatedNames.push_back(u.name);
        continue;
      }
      // Adam8bit and AdamW8bit (bitsandbytes): 8-bit moments for float32
      // parameters of at least 4096 elements, float32 ones (as Adam, with
      // bitsandbytes' decoupled decay) below.
      auto tensorType = cast<RankedTensorType>(type);
      if (eightBit && tensorType.getElementType().isF32() &&
          tensorType.getNumElements() >= train::kMin8bitStateElements) {
        int64_t n = tensorType.getNumElements();
        auto codes = RankedTensorType::get({n}, b.getIntegerType(8));
        auto scales =
            RankedTensorType::get({train::scalesOf8bit(n)}, b.getF32Type());
        Value m = train::appendBoundArgument(func, codes, u.name + ".exp_avg",
                                             train::BindingRole::State);
        Value mScale =
            train::appendBoundArgument(func, scales, u.name + ".exp_avg_absmax",
                                       train::BindingRole::State);
        Value v = train::appendBoundArgument(
            func, codes, u.name + ".exp_avg_sq", train::BindingRole::State);
        Value vScale = train::appendBoundArgument(func, scales,
                                                  u.name + ".exp_avg_sq_absmax",
                                                  train::BindingRole::State);
        b.setInsertionPoint(ret);
        auto adam = train::Adam8bitOp::create(
            b, loc, TypeRange{type, codes, scales, codes, scales},
            ValueRange{p, u.grad, m, mScale, v, vScale, lr, step},
            {b.getNamedAttr("beta1", b.getF64FloatAttr(beta1)),
             b.getNamedAttr("beta2", b.getF64FloatAttr(beta2)),
             b.getNamedAttr("eps", b.getF64FloatAttr(eps)),
             b.getNamedAttr("weight_decay", b.getF64FloatAttr(decay))});
        results.append(adam->result_begin(), adam->result_end());
        updatedNames.append({u.name, u.name + ".exp_avg",
                             u.name + ".exp_avg_absmax", u.name + ".exp_avg_sq",
                             u.name + ".exp_avg_sq_absmax"});
        continue;
      }
      // Adam and AdamW.
      Value expAvg = train::appendBoundArgument(func, type, u.name + ".exp_avg",
                                                train::BindingRole::State);
      Value expAvgSq = train::appendBoundArgument(
          func, type, u.name + ".exp_avg_sq", train::BindingRole::State);
      SmallVector<NamedAttribute> attrs = {
          b.getNamedAttr("beta1", b.getF64FloatAttr(beta1)),
          b.getNamedAttr("beta2", b.getF64FloatAttr(beta2)),
          b.getNamedAttr("eps", b.getF64FloatAttr(eps)),
          b.getNamedAttr("weight_decay", b.getF64FloatAttr(decay))};
      // bitsandbytes decays decoupled in both of its 8-bit optimizers.
      if (kind != OptimizerKind::Adam)
        attrs.push_back(b.getNamedAttr("decoupled", b.getUnitAttr()));
      b.setInsertionPoint(ret);
      auto adam = train::AdamOp::create(
          b, loc, TypeRange{type, type, type},
          ValueRange{p, u.grad, expAvg, expAvgSq, lr, step}, attrs);
      results.append(adam->result_begin(), adam->result_end());
      updatedNames.append(
          {u.name, u.name + ".exp_avg", u.name + ".exp_avg_sq"});
    }

    for (auto [value, name] : passThrough) {
      results.push_back(value);
      updatedNames.push_back(name.str());
    }
    if (gradNorm) {
      results.push_back(gradNorm);
      updatedNames.push_back("grad_norm");
    }

    // 4. Return the loss and the updates.
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> resultTypes;
    for (Value v : results)
      resultTypes.push_back(v.getType());
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                   resultTypes));
    func.setResultAttrs(0, b.getDictionaryAttr(b.getNamedAttr(
                               "onnx.name", b.getStringAttr("loss"))));
    for (auto [i, name] : llvm::enumerate(updatedNames))
      func.setResultAttrs(
          i + 1, b.getDictionaryAttr(b.getNamedAttr(train::kUpdateOfAttr,
                                                    b.getStringAttr(name))));
  }
};

} // namespace
