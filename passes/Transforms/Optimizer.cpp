//===- Optimizer.cpp - the ztc-optimizer pass ---------------------*- C++
//-*-===//
//
// Appends SGD, Adam or AdamW updates, written with nn ops, to a function
// that returns the loss and its gradients. See the pass description in
// Passes.td; the formulas follow torch.optim's single-tensor
// implementations.
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

/// Builds scalar-broadcast arithmetic for one parameter's update.
struct Math {
  OpBuilder &b;
  Location loc;

  Value scalar(double value) {
    auto type = RankedTensorType::get({}, b.getF32Type());
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getF32FloatAttr(value)));
  }
  Value add(Value x, Value y) { return nn::AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return nn::SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return nn::MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return nn::DivOp::create(b, loc, x, y); }
  Value mul(Value x, double y) { return mul(x, scalar(y)); }
  Value sqrt(Value x) { return nn::SqrtOp::create(b, loc, x); }
  /// The sum of squares of every element, as a scalar.
  Value sumOfSquares(Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> axes =
        llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    Value square = mul(x, x);
    return axes.empty()
               ? square
               : Value(nn::ReduceSumOp::create(b, loc, square, axes, false));
  }
};

struct OptimizerPass : public ztc::impl::OptimizerPassBase<OptimizerPass> {
  using OptimizerPassBase::OptimizerPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (optimizer != "sgd" && optimizer != "adam" && optimizer != "adamw") {
      func.emitError("unknown optimizer '")
          << optimizer << "'; expected sgd, adam or adamw";
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    if (func.getNumResults() < 1 ||
        !isScalarFloat(ret.getOperand(0).getType())) {
      func.emitError("the optimizer needs a function returning a scalar "
                     "float loss first; run ztc-attach-loss and ztc-autodiff");
      return signalPassFailure();
    }

    // Parameters by name, and the gradient results.
    llvm::StringMap<unsigned> argByName;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      if (auto name = func.getArgAttrOfType<StringAttr>(i, "onnx.name"))
        argByName[name.getValue()] = i;
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
              func.getResultAttrOfType<StringAttr>(i, "train.update_of")) {
        passThrough.emplace_back(ret.getOperand(i), update);
        continue;
      }
      auto of = func.getResultAttrOfType<StringAttr>(i, "train.grad_of");
      auto it = of ? argByName.find(of.getValue()) : argByName.end();
      if (it == argByName.end()) {
        func.emitError("result ") << i
                                  << " is not a gradient of a parameter "
                                     "(train.grad_of)";
        return signalPassFailure();
      }
      updates.push_back({of.str(), it->second, ret.getOperand(i)});
    }
    if (updates.empty()) {
      func.emitError("nothing to train: no parameter has a gradient");
      return signalPassFailure();
    }

    OpBuilder b(ret);
    Location loc = NameLoc::get(b.getStringAttr("optimizer"), ret.getLoc());
    Math m{b, loc};
    Type scalarType = RankedTensorType::get({}, b.getF32Type());
    Value lr = addArgument(func, scalarType, "lr", "train.hyper");
    Value step = addArgument(func, scalarType, "step", "train.hyper");
    b.setInsertionPoint(ret);

    // 2. Global-norm clipping.
    if (clipGradNorm > 0) {
      Value total;
      for (Update &u : updates) {
        Value sq = m.sumOfSquares(u.grad);
        total = total ? m.add(total, sq) : sq;
      }
      Value norm = m.sqrt(total);
      Value factor = m.div(m.scalar(clipGradNorm), m.add(norm, m.scalar(1e-6)));
      factor = nn::MinOp::create(b, loc, factor, m.scalar(1.0));
      for (Update &u : updates)
        u.grad = m.mul(u.grad, factor);
    }

    // 3. Updates.
    double decay =
        weightDecay >= 0 ? weightDecay : (optimizer == "adamw" ? 0.01 : 0.0);
    SmallVector<Value> results = {ret.getOperand(0)};
    SmallVector<std::string> updatedNames;
    for (Update &u : updates) {
      Value p = func.getArgument(u.arg);
      auto type = p.getType();
      Value g = u.grad;
      if (optimizer == "sgd") {
        if (decay != 0)
          g = m.add(g, m.mul(p, decay));
        if (momentum != 0) {
          Value buf = addArgument(func, type, u.name + ".momentum_buffer",
                                  "train.state");
          b.setInsertionPoint(ret);
          Value newBuf = m.add(m.mul(buf, momentum), g);
          results.push_back(newBuf);
          updatedNames.push_back(u.name + ".momentum_buffer");
          g = nesterov ? m.add(g, m.mul(newBuf, momentum)) : newBuf;
        }
        results.push_back(m.sub(p, m.mul(g, lr)));
        updatedNames.push_back(u.name);
        continue;
      }
      // Adam and AdamW.
      Value expAvg =
          addArgument(func, type, u.name + ".exp_avg", "train.state");
      Value expAvgSq =
          addArgument(func, type, u.name + ".exp_avg_sq", "train.state");
      b.setInsertionPoint(ret);
      if (optimizer == "adamw" && decay != 0)
        p = m.sub(p, m.mul(p, m.mul(lr, m.scalar(decay))));
      else if (decay != 0)
        g = m.add(g, m.mul(p, decay));
      Value newAvg = m.add(m.mul(expAvg, beta1), m.mul(g, 1.0 - beta1));
      Value newAvgSq =
          m.add(m.mul(expAvgSq, beta2), m.mul(m.mul(g, g), 1.0 - beta2));
      Value bc1 = m.sub(m.scalar(1.0),
                        nn::PowOp::create(b, loc, m.scalar(beta1), step));
      Value bc2 = m.sub(m.scalar(1.0),
                        nn::PowOp::create(b, loc, m.scalar(beta2), step));
      Value denom = m.add(m.div(m.sqrt(newAvgSq), m.sqrt(bc2)), m.scalar(eps));
      Value stepSize = m.div(lr, bc1);
      Value newP = m.sub(p, m.mul(m.div(newAvg, denom), stepSize));
      results.append({newP, newAvg, newAvgSq});
      updatedNames.append(
          {u.name, u.name + ".exp_avg", u.name + ".exp_avg_sq"});
    }

    for (auto [value, name] : passThrough) {
      results.push_back(value);
      updatedNames.push_back(name.str());
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
          i + 1, b.getDictionaryAttr(
                     b.getNamedAttr("train.update_of", b.getStringAttr(name))));
  }

  static bool isScalarFloat(Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && tensor.getRank() == 0 &&
           isa<FloatType>(tensor.getElementType());
  }

  /// Appends an argument named `name` with the unit attribute `role`.
  static Value addArgument(func::FuncOp func, Type type, StringRef name,
                           StringRef role) {
    Builder b(func.getContext());
    unsigned index = func.getNumArguments();
    (void)func.insertArgument(
        index, type,
        b.getDictionaryAttr({b.getNamedAttr("onnx.name", b.getStringAttr(name)),
                             b.getNamedAttr(role, b.getUnitAttr())}),
        func.getLoc());
    return func.getArgument(index);
  }
};

} // namespace
