//===- Recompute.cpp - the ztc-recompute pass ---------------------*- C++
//-*-===//
//
// Gradient checkpointing as a rewrite of the forward/backward function that
// ztc-autodiff built: a policy decides which forward values the backward
// keeps (saved activations) and which it recomputes; every backward use of
// a recomputed value then reads a clone built right before its first use.
// The memory planner sees the shorter live ranges, so the plan's peak is
// what the policy buys. The numbered steps follow the pass description in
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "dialects/NN/IR/NNOps.h"
#include "dialects/NN/IR/ShapeLimits.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Regex.h"

#include <cmath>
#include <optional>

namespace mlir::ztc {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// Most ops one recomputed value of the selective policy may clone: beyond
/// it the value is kept, so no chain (a residual stream) is replayed whole.
constexpr size_t kSelectiveClosureLimit = 32;

int64_t tensorBytes(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return 0;
  return nn::storageBytes(type);
}

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

/// Floating-point operations of one nn op, counted as PyTorch's profiler
/// and the papers on recomputation count them: a multiply-add is two, an
/// elementwise op one per element, normalizations and softmax a few per
/// element, data movement none.
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

/// The block scope exporters write into node names: the path up to the
/// first numbered scope, as in `/transformer/h.3/attn/c_attn/MatMul` →
/// `/transformer/h.3`, `/blocks.0/ln1/LayerNormalization` → `/blocks.0`,
/// `/layer1/layer1.0/conv1/Conv` → `/layer1`. The last component is the
/// node's own name and never a scope.
std::optional<std::string> defaultScope(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '/');
  if (parts.size() < 2)
    return std::nullopt;
  static const llvm::Regex numbered("^([A-Za-z_][A-Za-z0-9_]*\\.?)?[0-9]+$");
  std::string path;
  for (StringRef part : ArrayRef(parts).drop_back()) {
    if (part.empty())
      continue;
    path += "/" + part.str();
    if (numbered.match(part))
      return path;
  }
  return std::nullopt;
}

/// The forward/backward function, as the policies see it.
class StepGraph {
public:
  explicit StepGraph(func::FuncOp func);

  /// Whether the function has a loss computed in its body.
  bool valid() const { return lossOp != nullptr; }

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

/// The activations a policy recomputes (all others are kept).
using RecomputeSet = DenseSet<Value>;

/// `selective`: keep the outputs of matrix products with a weight and of
/// convolutions; recompute the cheap ops between them (elementwise,
/// normalization, softmax, attention's products of two activations, as in
/// Megatron's selective recomputation). A value several forward ops read
/// (a residual stream, a branch) is kept, as is one whose replay would
/// clone more than kSelectiveClosureLimit ops.
RecomputeSet selectSelective(const StepGraph &graph) {
  RecomputeSet recompute;
  // The ops each recomputed value clones (itself and its recomputed
  // operands, transitively).
  DenseMap<Value, SmallVector<Operation *>> closure;
  for (Operation *op : graph.forwardOps()) {
    // A matrix product with a weight operand (one that does not depend on
    // the data) is a layer, kept like a convolution.
    bool layer = isa<nn::Conv2dOp>(op);
    if (auto matmul = dyn_cast<nn::MatMulOp>(op))
      layer = !graph.dependsOnData(matmul.getA()) ||
              !graph.dependsOnData(matmul.getB());
    if (layer || op->getNumResults() != 1 ||
        !isa<nn::NNDialect>(op->getDialect()))
      continue;
    Value result = op->getResult(0);
    if (!graph.isActivation(result) || graph.forwardUsers(result).size() > 1)
      continue;
    llvm::SetVector<Operation *> ops;
    ops.insert(op);
    for (Value operand : op->getOperands())
      if (recompute.contains(operand))
        ops.insert(closure[operand].begin(), closure[operand].end());
    if (ops.size() > kSelectiveClosureLimit)
      continue;
    recompute.insert(result);
    closure[result] = ops.takeVector();
  }
  return recompute;
}

/// `full` and `sqrt`: forward ops are grouped into segments (blocks); a
/// segment keeps only what crosses its boundary (its inputs, as the next
/// segment's inputs are its outputs) and recomputes everything inside it.
/// Ops in no segment (-1) keep their results.
RecomputeSet selectSegments(const StepGraph &graph,
                            const DenseMap<Operation *, int64_t> &segmentOf) {
  RecomputeSet recompute;
  for (Operation *op : graph.forwardOps()) {
    int64_t segment = segmentOf.lookup(op);
    if (segment < 0 || !isa<nn::NNDialect>(op->getDialect()))
      continue;
    for (Value result : op->getResults()) {
      if (!graph.isActivation(result))
        continue;
      bool crosses =
          llvm::any_of(graph.forwardUsers(result), [&](Operation *user) {
            auto it = segmentOf.find(user);
            return it == segmentOf.end() || it->second != segment;
          });
      if (!crosses)
        recompute.insert(result);
    }
  }
  return recompute;
}

/// `full`: the segments are the blocks the node names scope (or the text
/// `blocks` matches in them). Fails, naming the flag, when there is none.
FailureOr<DenseMap<Operation *, int64_t>>
blockSegments(const StepGraph &graph, func::FuncOp func,
              StringRef blocksPattern) {
  std::optional<llvm::Regex> regex;
  if (!blocksPattern.empty()) {
    regex.emplace(blocksPattern);
    std::string error;
    if (!regex->isValid(error))
      return func.emitError("--recompute-blocks '")
             << blocksPattern
             << "' is not a valid regular expression: " << error;
  }
  DenseMap<Operation *, int64_t> segmentOf;
  llvm::StringMap<int64_t> ids;
  for (Operation *op : graph.forwardOps()) {
    SmallVector<std::string> names;
    train::collectNodeNames(op->getLoc(), names);
    std::optional<StringRef> name;
    if (!names.empty())
      name = names.front();
    std::optional<std::string> scope;
    if (name && regex) {
      SmallVector<StringRef> matches;
      if (regex->match(*name, &matches) && !matches.front().empty())
        scope = matches.front().str();
    } else if (name) {
      scope = defaultScope(*name);
    }
    segmentOf[op] =
        scope ? ids.try_emplace(*scope, ids.size()).first->second : -1;
  }
  if (ids.empty()) {
    if (regex)
      return func.emitError("--recompute-blocks '")
             << blocksPattern << "' matches no node name";
    return func.emitError(
        "--recompute full: no block found: no node name has a numbered "
        "scope (such as /h.0/ or /layer1/); name the blocks with "
        "--recompute-blocks REGEX");
  }
  return segmentOf;
}

/// `sqrt`: Chen et al.'s √n checkpoints. The forward ops are cut into
/// ⌈√n⌉ segments; each cut is placed, within half a segment of its even
/// position, where the fewest bytes cross it.
DenseMap<Operation *, int64_t> sqrtSegments(const StepGraph &graph) {
  ArrayRef<Operation *> ops = graph.forwardOps();
  int64_t n = ops.size();
  DenseMap<Operation *, int64_t> segmentOf;
  if (n == 0)
    return segmentOf;
  int64_t k = int64_t(std::ceil(std::sqrt(double(n))));
  DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(ops))
    index[op] = i;
  // crossing[p]: bytes defined before op p and read by op p or later.
  std::vector<int64_t> delta(n + 2, 0);
  for (auto [i, op] : llvm::enumerate(ops))
    for (Value result : op->getResults()) {
      int64_t last = -1;
      for (Operation *user : result.getUsers())
        if (auto it = index.find(user); it != index.end())
          last = std::max(last, it->second);
      if (last > int64_t(i)) {
        delta[i + 1] += tensorBytes(result);
        delta[last + 1] -= tensorBytes(result);
      }
    }
  std::vector<int64_t> crossing(n + 1, 0);
  for (int64_t p = 1; p <= n; ++p)
    crossing[p] = crossing[p - 1] + delta[p];
  std::vector<int64_t> cuts;
  int64_t half = std::max<int64_t>(1, n / (2 * k));
  for (int64_t s = 1; s < k; ++s) {
    int64_t ideal = s * n / k, best = -1;
    int64_t from =
        std::max<int64_t>(cuts.empty() ? 1 : cuts.back() + 1, ideal - half);
    for (int64_t p = from; p <= std::min(n - 1, ideal + half); ++p)
      if (best < 0 || crossing[p] < crossing[best])
        best = p;
    if (best > 0)
      cuts.push_back(best);
  }
  int64_t segment = 0;
  size_t next = 0;
  for (auto [i, op] : llvm::enumerate(ops)) {
    while (next < cuts.size() && cuts[next] <= int64_t(i)) {
      ++segment;
      ++next;
    }
    segmentOf[op] = segment;
  }
  return segmentOf;
}

/// Rewrites the backward's uses of recomputed values to clones; returns
/// the FLOPs the clones cost and how many there are.
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

struct RecomputePass : public ztc::impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (policy != "none" && policy != "selective" && policy != "full" &&
        policy != "sqrt") {
      func.emitError("--recompute '")
          << policy << "': expected none, selective, full or sqrt";
      return signalPassFailure();
    }
    if (func.isExternal() || func.getNumResults() == 0 ||
        !train::isLossType(func.getResultTypes().front()))
      return;
    if (!func.getBody().hasOneBlock()) {
      func.emitError("ztc-recompute expects a function with one block");
      return signalPassFailure();
    }
    StepGraph graph(func);
    if (!graph.valid())
      return;
    int64_t stepFlops = 0;
    for (Operation &op : func.getBody().front())
      stepFlops += estimateFlops(&op);
    int64_t baselineBytes = graph.savedBytes();

    // 1. The policy chooses what the backward recomputes.
    RecomputeSet recompute;
    if (policy == "selective") {
      recompute = selectSelective(graph);
    } else if (policy == "full") {
      FailureOr<DenseMap<Operation *, int64_t>> segments =
          blockSegments(graph, func, blocks);
      if (failed(segments))
        return signalPassFailure();
      recompute = selectSegments(graph, *segments);
    } else if (policy == "sqrt") {
      recompute = selectSegments(graph, sqrtSegments(graph));
    }

    // 2. The backward reads clones of what it no longer keeps.
    auto [recomputeFlops, recomputedOps] = rewriteBackward(graph, recompute);

    // 3. What the choice buys, for the manifest and `ztc compile`'s report.
    Builder b(&getContext());
    func->setAttr(
        train::kRecomputeAttr,
        b.getDictionaryAttr({
            b.getNamedAttr("policy", b.getStringAttr(policy)),
            b.getNamedAttr("saved_bytes",
                           b.getI64IntegerAttr(graph.savedBytes())),
            b.getNamedAttr("baseline_saved_bytes",
                           b.getI64IntegerAttr(baselineBytes)),
            b.getNamedAttr("recompute_flops",
                           b.getI64IntegerAttr(recomputeFlops)),
            b.getNamedAttr("recomputed_ops",
                           b.getI64IntegerAttr(recomputedOps)),
            b.getNamedAttr("step_flops", b.getI64IntegerAttr(stepFlops)),
        }));
  }
};

} // namespace
