//===- RecomputeGraph.cpp - ztc-recompute's graph and FLOP count ----------===//
//
// What ztc-recompute's policies and budget mode see of the step: its
// forward, its backward and which values are activations (StepGraph), the
// bytes of the activations the backward keeps, and the FLOPs an op costs
// (which each nn op declares).
//
//===----------------------------------------------------------------------===//

#include "passes/Train/RecomputeInternal.h"

#include "dialects/NN/IR/NNOps.h"
#include "dialects/NN/IR/ShapeLimits.h"
#include "dialects/Train/IR/TrainOps.h"

using namespace mlir;

namespace mlir::ztc::recompute {

int64_t tensorBytes(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return 0;
  return nn::storageBytes(type);
}

int64_t estimateFlops(Operation *op) {
  // An nn op states its cost (NN_CostOpInterface, mandatory on every nn op:
  // dialects/NN/IR/OpFacts.td); the other ops of a step graph (constants,
  // the return) count none.
  if (auto cost = dyn_cast<nn::CostOpInterface>(op))
    return cost.estimateFlops();
  return 0;
}

StepGraph::StepGraph(func::FuncOp func) {
  Block &block = func.getBody().front();
  Value loss = block.getTerminator()->getOperand(0);
  lossOp = loss.getDefiningOp();
  if (!lossOp)
    return;
  // The forward: what the loss depends on.
  DenseSet<Operation *> ancestors;
  SmallVector<Operation *> worklist{lossOp};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!ancestors.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        worklist.push_back(def);
  }
  for (BlockArgument arg : func.getArguments()) {
    train::BindingAttr binding = train::getBinding(func, arg.getArgNumber());
    if (!binding || (binding.getRole() != train::BindingRole::Param &&
                     binding.getRole() != train::BindingRole::Buffer))
      dataDependent.insert(arg);
  }
  bool afterLoss = false;
  for (Operation &op : block.without_terminator()) {
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return dataDependent.contains(v); }))
      dataDependent.insert(op.result_begin(), op.result_end());
    if (ancestors.contains(&op)) {
      if (!op.hasTrait<OpTrait::ConstantLike>())
        forward.insert(&op);
    } else if (afterLoss) {
      backward.push_back(&op);
      backwardSet.insert(&op);
    }
    afterLoss |= &op == lossOp;
  }
}

SmallVector<Operation *> StepGraph::forwardUsers(Value value) const {
  llvm::SetVector<Operation *> users;
  for (Operation *user : value.getUsers())
    if (!isBackward(user))
      users.insert(user);
  return users.takeVector();
}

int64_t StepGraph::savedBytes() const {
  DenseSet<Value> roots;
  int64_t bytes = 0;
  for (Operation *op : forward)
    for (Value result : op->getResults()) {
      if (llvm::none_of(result.getUsers(),
                        [&](Operation *user) { return isBackward(user); }))
        continue;
      Value root = result;
      while (auto reshape = root.getDefiningOp<nn::ReshapeOp>())
        root = reshape->getOperand(0);
      if (isActivation(root) && roots.insert(root).second)
        bytes += tensorBytes(root);
    }
  return bytes;
}

} // namespace mlir::ztc::recompute
