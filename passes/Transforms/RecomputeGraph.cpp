//===- RecomputeGraph.cpp - ztc-recompute's graph and FLOP count ----------===//
//
// What ztc-recompute's policies and budget mode see of the step: its
// forward, its backward and which values are activations (StepGraph), the
// bytes of the activations the backward keeps, and the FLOPs an op costs.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/RecomputeInternal.h"

#include "dialects/NN/IR/NNOps.h"
#include "dialects/NN/IR/ShapeLimits.h"
#include "dialects/Train/IR/TrainOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace mlir::ztc::recompute {
namespace {

int64_t elements(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape() ? type.getNumElements() : 0;
}

/// The product of `type`'s dimensions from `from` on.
int64_t trailingProduct(Value value, unsigned from) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t product = 1;
  for (int64_t dim : type.getShape().drop_front(from))
    product *= dim;
  return product;
}

} // namespace

int64_t tensorBytes(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return 0;
  return nn::storageBytes(type);
}

int64_t estimateFlops(Operation *op) {
  if (op->getNumResults() == 0)
    return 0;
  Value result = op->getResult(0);
  return TypeSwitch<Operation *, int64_t>(op)
      .Case([&](nn::MatMulOp matmul) {
        auto a = cast<RankedTensorType>(matmul.getA().getType());
        return 2 * elements(result) * a.getShape().back();
      })
      .Case([&](nn::Conv2dOp conv) {
        return 2 * elements(result) * trailingProduct(conv.getWeight(), 1);
      })
      .Case([&](nn::Conv2dBackwardDataOp conv) {
        return 2 * elements(conv.getGradOutput()) *
               trailingProduct(conv.getWeight(), 1);
      })
      .Case([&](nn::Conv2dBackwardFilterOp conv) {
        return 2 * elements(conv.getGradOutput()) * trailingProduct(result, 1);
      })
      .Case([&](nn::LayerNormOp) { return 8 * elements(result); })
      .Case([&](nn::LayerNormBackwardOp) { return 14 * elements(result); })
      .Case([&](nn::BatchNormOp) { return 4 * elements(result); })
      .Case<nn::SoftmaxOp, nn::LogSoftmaxOp>(
          [&](Operation *) { return 5 * elements(result); })
      .Case<nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp, nn::MaxPool2dOp,
            nn::AvgPool2dOp, nn::MaxPool2dBackwardOp, nn::AvgPool2dBackwardOp,
            nn::NllLossOp>(
          [&](Operation *op) { return elements(op->getOperand(0)); })
      .Case<nn::ReshapeOp, nn::TransposeOp, nn::ConcatOp, nn::SliceOp,
            nn::GatherOp, nn::BroadcastToOp, nn::InsertSliceOp>(
          [](Operation *) { return int64_t(0); })
      .Default([&](Operation *op) {
        return isa<nn::NNDialect>(op->getDialect()) ? elements(result)
                                                    : int64_t(0);
      });
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
