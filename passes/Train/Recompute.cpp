//===- Recompute.cpp - the ztc-recompute pass -----------------------------===//
//
// Gradient checkpointing as a rewrite of the forward/backward function that
// ztc-autodiff built: a policy decides which forward values the backward
// keeps (saved activations) and which it recomputes; every backward use of
// a recomputed value then reads a clone built right before its first use.
// The memory planner sees the shorter live ranges, so the plan's peak is
// what the policy buys. The numbered steps follow the pass description in
// Passes.td.
//
// This file holds the pass and the rewrite; the step's graph, the policies
// and budget mode are in RecomputeGraph.cpp, RecomputePolicies.cpp and
// RecomputeBudget.cpp, which share RecomputeInternal.h.
//
//===----------------------------------------------------------------------===//

#include "passes/Train/Recompute.h"
#include "passes/Passes.h"
#include "passes/Train/RecomputeInternal.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include <optional>

namespace mlir::ztc {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::recompute;

namespace mlir::ztc::recompute {

std::pair<int64_t, int64_t> rewriteBackward(StepGraph &graph,
                                            const RecomputeSet &recompute) {
  OpBuilder b(graph.backwardOps().empty()
                  ? nullptr
                  : graph.backwardOps().front()->getContext());
  IRMapping clones;
  int64_t flops = 0, count = 0;
  auto materialize = [&](Value value, Operation *before) {
    SmallVector<std::pair<Operation *, bool>> stack{
        {value.getDefiningOp(), false}};
    while (!stack.empty()) {
      auto [op, expanded] = stack.pop_back_val();
      if (clones.contains(op->getResult(0)))
        continue;
      if (!expanded) {
        stack.push_back({op, true});
        for (Value operand : op->getOperands())
          if (recompute.contains(operand) && !clones.contains(operand))
            stack.push_back({operand.getDefiningOp(), false});
        continue;
      }
      b.setInsertionPoint(before);
      Operation *clone = b.clone(*op, clones);
      clone->setAttr(train::kRecomputedAttr, b.getUnitAttr());
      graph.addBackward(clone);
      flops += estimateFlops(clone);
      ++count;
    }
    return clones.lookup(value);
  };
  for (Operation *op : SmallVector<Operation *>(graph.backwardOps()))
    for (OpOperand &use : op->getOpOperands())
      if (recompute.contains(use.get()))
        use.set(materialize(use.get(), op));
  return {flops, count};
}

} // namespace mlir::ztc::recompute

namespace {

struct RecomputePass : public ztc::impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;
  RecomputePass(const RecomputePassOptions &options, RecomputePlanner planner)
      : RecomputePassBase(options), planner(std::move(planner)) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<RecomputeBudget> budget;
    if (policy == RecomputePolicy::Budget) {
      std::string error;
      budget = parseRecomputeBudget(this->budget, error);
      if (!budget) {
        module.emitError(error);
        return signalPassFailure();
      }
    } else if (!this->budget.empty()) {
      module.emitError("ztc-recompute: budget applies to policy budget, not ")
          << spell(kRecomputePolicies, policy);
      return signalPassFailure();
    }
    for (func::FuncOp func :
         llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (failed(runOnFunction(func, budget)))
        return signalPassFailure();
  }

  LogicalResult runOnFunction(func::FuncOp func,
                              const std::optional<RecomputeBudget> &budget) {
    if (func.isExternal() || func.getNumResults() == 0 ||
        !train::isLossType(func.getResultTypes().front()))
      return success();
    if (!func.getBody().hasOneBlock())
      return func.emitError("ztc-recompute expects a function with one block");
    StepGraph graph(func);
    if (!graph.valid())
      return success();
    int64_t stepFlops = 0;
    for (Operation &op : func.getBody().front())
      stepFlops += estimateFlops(&op);
    int64_t baselineBytes = graph.savedBytes();

    // 1. The policy chooses what the backward recomputes.
    RecomputeSet recompute;
    SmallVector<NamedAttribute> figures;
    std::string spec = recomputeSpec(policy, this->budget);
    if (policy == RecomputePolicy::Selective) {
      recompute = selectSelective(graph);
    } else if (policy == RecomputePolicy::Full) {
      FailureOr<DenseMap<Operation *, int64_t>> segments =
          blockSegments(graph, func, blocks);
      if (failed(segments))
        return failure();
      recompute = selectSegments(graph, *segments);
    } else if (policy == RecomputePolicy::Sqrt) {
      recompute = selectSegments(graph, sqrtSegments(graph));
    } else if (budget) {
      FailureOr<RecomputeSet> chosen = chooseWithinBudget(
          func, graph, spec, *budget, searchNodes, stepFlops, planner, figures);
      if (failed(chosen))
        return failure();
      recompute = std::move(*chosen);
    }

    // 2. The backward reads clones of what it no longer keeps.
    auto [recomputeFlops, recomputedOps] = rewriteBackward(graph, recompute);

    // 3. What the choice buys, for the manifest and `ztc compile`'s report.
    Builder b(&getContext());
    figures.append({
        b.getNamedAttr("policy", b.getStringAttr(spec)),
        b.getNamedAttr("saved_bytes", b.getI64IntegerAttr(graph.savedBytes())),
        b.getNamedAttr("baseline_saved_bytes",
                       b.getI64IntegerAttr(baselineBytes)),
        b.getNamedAttr("recompute_flops", b.getI64IntegerAttr(recomputeFlops)),
        b.getNamedAttr("recomputed_ops", b.getI64IntegerAttr(recomputedOps)),
        b.getNamedAttr("step_flops", b.getI64IntegerAttr(stepFlops)),
    });
    func->setAttr(train::kRecomputeAttr, b.getDictionaryAttr(figures));
    return success();
  }

  RecomputePlanner planner;
};

} // namespace

std::unique_ptr<Pass>
mlir::ztc::createRecomputePass(const RecomputePassOptions &options,
                               RecomputePlanner planner) {
  return std::make_unique<RecomputePass>(options, std::move(planner));
}
