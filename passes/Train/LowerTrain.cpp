//===- LowerTrain.cpp - the ztc-lower-train pass --------------------------===//
//
// Expands train ops (optimizer updates, global-norm clipping) into nn
// arithmetic with the formulas of torch.optim's single-tensor
// implementations. See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Arithmetic.h"
#include "passes/Passes.h"

#include "llvm/ADT/TypeSwitch.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_LOWERTRAINPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

using Math = Arithmetic;

SmallVector<Value> lower(train::SgdOp op, Math &m) {
  double decay = op.getWeightDecay().convertToDouble();
  double momentum = op.getMomentum().convertToDouble();
  Value p = op.getParam();
  Value g = op.getGrad();
  if (decay != 0)
    g = m.add(g, m.mul(p, decay));
  SmallVector<Value> results = {nullptr};
  if (Value buffer = op.getMomentumBuffer()) {
    Value newBuffer = m.add(m.mul(buffer, momentum), g);
    results.push_back(newBuffer);
    g = op.getNesterov() ? m.add(g, m.mul(newBuffer, momentum)) : newBuffer;
  }
  results[0] = m.sub(p, m.mul(g, op.getLr()));
  return results;
}

SmallVector<Value> lower(train::AdamOp op, Math &m) {
  double decay = op.getWeightDecay().convertToDouble();
  double beta1 = op.getBeta1().convertToDouble();
  double beta2 = op.getBeta2().convertToDouble();
  Value p = op.getParam();
  Value g = op.getGrad();
  Value lr = op.getLr();
  if (op.getDecoupled() && decay != 0)
    p = m.sub(p, m.mul(p, m.mul(lr, m.scalar(decay))));
  else if (decay != 0)
    g = m.add(g, m.mul(p, decay));
  // One builder call per statement (passes/Arithmetic.h).
  Value keptAvg = m.mul(op.getExpAvg(), beta1);
  Value newAvg = m.add(keptAvg, m.mul(g, 1.0 - beta1));
  Value keptAvgSq = m.mul(op.getExpAvgSq(), beta2);
  Value newAvgSq = m.add(keptAvgSq, m.mul(m.mul(g, g), 1.0 - beta2));
  auto biasCorrection = [&](double beta) {
    Value one = m.scalar(1.0);
    return m.sub(one, m.pow(m.scalar(beta), op.getStep()));
  };
  Value bc1 = biasCorrection(beta1);
  Value bc2 = biasCorrection(beta2);
  Value rootAvgSq = m.sqrt(newAvgSq);
  Value rootBc2 = m.sqrt(bc2);
  Value quotient = m.div(rootAvgSq, rootBc2);
  Value denom = m.add(quotient, m.scalar(op.getEps().convertToDouble()));
  Value stepSize = m.div(lr, bc1);
  Value newP = m.sub(p, m.mul(m.div(newAvg, denom), stepSize));
  return {newP, newAvg, newAvgSq};
}

SmallVector<Value> lower(train::ClipByGlobalNormOp op, Math &m) {
  Value total;
  for (Value grad : op.getGrads()) {
    Value squares = m.sumOfSquares(grad);
    total = total ? m.add(total, squares) : squares;
  }
  Value norm = m.sqrt(total);
  Value factor = m.div(m.scalar(op.getMaxNorm().convertToDouble()),
                       m.add(norm, m.scalar(1e-6)));
  factor = nn::MinOp::create(m.b, m.loc, factor, m.scalar(1.0));
  SmallVector<Value> results = {norm};
  for (Value grad : op.getGrads())
    results.push_back(m.mul(grad, factor));
  return results;
}

struct LowerTrainPass : public ztc::impl::LowerTrainPassBase<LowerTrainPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<train::SgdOp, train::AdamOp, train::ClipByGlobalNormOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Math m{b, op->getLoc()};
      SmallVector<Value> results =
          TypeSwitch<Operation *, SmallVector<Value>>(op)
              .Case<train::SgdOp, train::AdamOp, train::ClipByGlobalNormOp>(
                  [&](auto typed) { return lower(typed, m); });
      op->replaceAllUsesWith(results);
      op->erase();
    }
  }
};

} // namespace
