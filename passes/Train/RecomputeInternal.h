//===- RecomputeInternal.h - what ztc-recompute's parts share ---*- C++ -*-===//
//
// ztc-recompute in four files: the step's graph and its FLOP count
// (RecomputeGraph.cpp), the policies that choose what the backward
// recomputes (RecomputePolicies.cpp), budget mode's integer program and
// search (RecomputeBudget.cpp), and the pass with the rewrite that applies
// a choice (Recompute.cpp). This private header is what they share;
// Recompute.h is what the training pipeline sees.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_TRAIN_RECOMPUTEINTERNAL_H
#define ZTC_PASSES_TRAIN_RECOMPUTEINTERNAL_H

#include "passes/Train/Recompute.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <cstdint>
#include <utility>

namespace mlir::ztc::recompute {

//===----------------------------------------------------------------------===//
// The step's graph and its cost (RecomputeGraph.cpp)
//===----------------------------------------------------------------------===//

/// The bytes of `value`'s buffer; 0 unless it is a tensor of static shape.
int64_t tensorBytes(Value value);

/// Floating-point operations of one op of the step: what an nn op declares
/// (nn::CostOpInterface, counted as PyTorch's profiler counts them), none
/// for any other op.
int64_t estimateFlops(Operation *op);

/// The forward/backward function, as the policies see it.
class StepGraph {
public:
  explicit StepGraph(func::FuncOp func);

  /// Whether the function has a loss computed in its body.
  bool valid() const { return lossOp != nullptr; }
  /// The op computing the loss: the last forward op.
  Operation *loss() const { return lossOp; }

  /// Ops the loss depends on, in program order (constants excluded): the
  /// forward. Only these are ever recomputed.
  ArrayRef<Operation *> forwardOps() const { return forward.getArrayRef(); }
  bool isForward(Operation *op) const { return op && forward.contains(op); }
  /// The backward: the ops after the loss that compute gradients.
  ArrayRef<Operation *> backwardOps() const { return backward; }
  bool isBackward(Operation *op) const { return backwardSet.contains(op); }
  /// Counts `op` (a clone the rewrite adds) as backward.
  void addBackward(Operation *op) { backwardSet.insert(op); }

  /// Whether `value` is an activation: a forward op's result that depends
  /// on the step's data (inputs, labels, the random key). Only these are
  /// kept or recomputed; values of the weights alone (a transposed weight)
  /// are left as they are, so the kernels computing them, and the GEMM
  /// variants that read them, stay those of the step without
  /// recomputation, bit for bit.
  bool isActivation(Value value) const {
    return isForward(value.getDefiningOp()) && dataDependent.contains(value);
  }
  bool dependsOnData(Value value) const {
    return dataDependent.contains(value);
  }
  /// The ops reading `value` that are not backward ones (forward ops, other
  /// model outputs, the terminator), each once.
  SmallVector<Operation *> forwardUsers(Value value) const;

  /// The bytes of activations the backward reads: each buffer counted once
  /// (a reshape is a view of its operand at the kernel level).
  int64_t savedBytes() const;

private:
  Operation *lossOp = nullptr;
  llvm::SetVector<Operation *> forward;
  SmallVector<Operation *> backward;
  DenseSet<Operation *> backwardSet;
  DenseSet<Value> dataDependent;
};

/// The activations a policy recomputes (all others are kept).
using RecomputeSet = DenseSet<Value>;

//===----------------------------------------------------------------------===//
// Policies (RecomputePolicies.cpp)
//===----------------------------------------------------------------------===//

/// `selective`: keep the outputs of matrix products with a weight and of
/// convolutions; recompute the cheap ops between them (elementwise,
/// normalization, softmax, attention's products of two activations, as in
/// Megatron's selective recomputation). A value several forward ops read
/// (a residual stream, a branch) is kept, as is one whose replay would
/// clone more than kSelectiveClosureLimit ops.
RecomputeSet selectSelective(const StepGraph &graph);

/// `full` and `sqrt`: forward ops are grouped into segments (blocks); a
/// segment keeps only what crosses its boundary (its inputs, as the next
/// segment's inputs are its outputs) and recomputes everything inside it.
/// Ops in no segment (-1) keep their results.
RecomputeSet selectSegments(const StepGraph &graph,
                            const DenseMap<Operation *, int64_t> &segmentOf);

/// `full`'s blocks without --recompute-blocks: the node names' numbered
/// scopes, else repeated structure.
DenseMap<Operation *, int64_t> defaultBlocks(const StepGraph &graph);

/// `full`: the segments are the blocks the node names scope (or the text
/// `blocks` matches in them, or repeated structure). Fails, naming the
/// flag, when there is none.
FailureOr<DenseMap<Operation *, int64_t>>
blockSegments(const StepGraph &graph, func::FuncOp func,
              StringRef blocksPattern);

/// `sqrt`: Chen et al.'s √n checkpoints. The forward ops are cut into
/// ⌈√n⌉ segments; each cut is placed, within half a segment of its even
/// position, where the fewest bytes cross it.
DenseMap<Operation *, int64_t> sqrtSegments(const StepGraph &graph);

//===----------------------------------------------------------------------===//
// The rewrite (Recompute.cpp)
//===----------------------------------------------------------------------===//

/// Rewrites the backward's uses of recomputed values to clones; returns
/// the FLOPs the clones cost and how many there are.
std::pair<int64_t, int64_t> rewriteBackward(StepGraph &graph,
                                            const RecomputeSet &recompute);

//===----------------------------------------------------------------------===//
// Budget mode (RecomputeBudget.cpp)
//===----------------------------------------------------------------------===//

/// Budget mode's search: measures the fixed policies and the integer
/// program's plans for capacities spread between its smallest modelled
/// peak and that of keeping everything (the same plans whatever the
/// budget, so a larger budget never costs more), each by planning the
/// rest of the step on a copy; returns the cheapest that fits.
FailureOr<RecomputeSet>
chooseWithinBudget(func::FuncOp func, const StepGraph &graph, StringRef policy,
                   const RecomputeBudget &budget, int64_t searchNodes,
                   int64_t stepFlops, const RecomputePlanner &planner,
                   SmallVectorImpl<NamedAttribute> &figures);

} // namespace mlir::ztc::recompute

#endif // ZTC_PASSES_TRAIN_RECOMPUTEINTERNAL_H
