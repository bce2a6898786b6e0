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
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Recompute.h"
#include "dialects/NN/IR/NNOps.h"
#include "dialects/NN/IR/ShapeLimits.h"
#include "passes/Passes.h"
#include "passes/Transforms/Footprint.h"
#include "passes/Transforms/IntegerProgram.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Regex.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

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

/// The blocks the node names scope (or the text `regex` matches in them):
/// each forward op's block number, -1 for an op in no block. Empty when no
/// op is in a block.
DenseMap<Operation *, int64_t> scopeSegments(const StepGraph &graph,
                                             llvm::Regex *regex) {
  DenseMap<Operation *, int64_t> segmentOf;
  llvm::StringMap<int64_t> ids;
  for (Operation *op : graph.forwardOps()) {
    SmallVector<std::string> names;
    train::collectNodeNames(op->getLoc(), names);
    std::optional<std::string> scope;
    if (!names.empty() && regex) {
      SmallVector<StringRef> matches;
      if (regex->match(names.front(), &matches) && !matches.front().empty())
        scope = matches.front().str();
    } else if (!names.empty()) {
      scope = defaultScope(names.front());
    }
    segmentOf[op] =
        scope ? ids.try_emplace(*scope, ids.size()).first->second : -1;
  }
  if (ids.empty())
    segmentOf.clear();
  return segmentOf;
}

DenseMap<Operation *, int64_t> repeatedSegments(const StepGraph &graph);

/// `full`'s blocks without --recompute-blocks: the node names' numbered
/// scopes, else repeated structure.
DenseMap<Operation *, int64_t> defaultBlocks(const StepGraph &graph) {
  DenseMap<Operation *, int64_t> segmentOf = scopeSegments(graph, nullptr);
  return segmentOf.empty() ? repeatedSegments(graph) : segmentOf;
}

/// `full`: the segments are the blocks the node names scope (or the text
/// `blocks` matches in them, or repeated structure). Fails, naming the
/// flag, when there is none.
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
  DenseMap<Operation *, int64_t> segmentOf =
      regex ? scopeSegments(graph, &*regex) : defaultBlocks(graph);
  if (segmentOf.empty()) {
    if (regex)
      return func.emitError("--recompute-blocks '")
             << blocksPattern << "' matches no node name";
    return func.emitError(
        "--recompute full: no block found: no node name has a numbered "
        "scope (such as /h.0/ or /layer1/) and no run of ops repeats; name "
        "the blocks with --recompute-blocks REGEX");
  }
  return segmentOf;
}

/// crossing[p], for p in [0, n]: the bytes of forward values defined
/// before forward op p and read by op p or later (what a cut before op p
/// keeps).
std::vector<int64_t> crossingBytes(const StepGraph &graph) {
  ArrayRef<Operation *> ops = graph.forwardOps();
  int64_t n = ops.size();
  DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(ops))
    index[op] = i;
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
  return crossing;
}

/// Blocks from repeated structure, for names without scopes: the longest
/// run of k ≥ 2 consecutive repetitions of the same ops (by op name and
/// result types) — the most forward ops covered, then the shortest period
/// — and, among the shifts of that run, the one whose cuts keep the fewest
/// bytes. Each repetition is a block; empty when nothing repeats.
DenseMap<Operation *, int64_t> repeatedSegments(const StepGraph &graph) {
  ArrayRef<Operation *> ops = graph.forwardOps();
  int64_t n = ops.size();
  // Each op as a number: equal numbers, equal op name and result types.
  std::vector<int64_t> ids;
  std::map<std::vector<const void *>, int64_t> numbers;
  for (Operation *op : ops) {
    std::vector<const void *> key{op->getName().getAsOpaquePointer()};
    for (Type type : op->getResultTypes())
      key.push_back(type.getAsOpaquePointer());
    ids.push_back(numbers.try_emplace(key, numbers.size()).first->second);
  }
  // equalRun(i, j, p): ops [i, i+p) and [j, j+p) have the same numbers.
  auto equalRun = [&](int64_t i, int64_t j, int64_t p) {
    return std::equal(ids.begin() + i, ids.begin() + i + p, ids.begin() + j);
  };
  int64_t bestStart = -1, bestPeriod = 0, bestCount = 0;
  for (int64_t p = 2; 2 * p <= n; ++p)
    for (int64_t i = 0; i + 2 * p <= n; ++i) {
      if (ids[i] != ids[i + p] || !equalRun(i, i + p, p))
        continue;
      int64_t count = 2;
      while (i + (count + 1) * p <= n && equalRun(i, i + count * p, p))
        ++count;
      if (count * p > bestCount * bestPeriod) {
        bestStart = i;
        bestPeriod = p;
        bestCount = count;
      }
      i += (count - 1) * p; // the rest of this run repeats what it found
    }
  DenseMap<Operation *, int64_t> segmentOf;
  if (bestStart < 0)
    return segmentOf;
  // The run starts where its repetitions first do; a later start (up to a
  // period later) keeps them all while the ops stay periodic. Take the
  // one whose cuts keep the fewest bytes.
  std::vector<int64_t> crossing = crossingBytes(graph);
  int64_t span = bestCount * bestPeriod;
  auto cost = [&](int64_t start) {
    int64_t bytes = 0;
    for (int64_t j = 0; j <= bestCount; ++j)
      bytes += crossing[start + j * bestPeriod];
    return bytes;
  };
  int64_t start = bestStart;
  for (int64_t s = bestStart + 1;
       s < bestStart + bestPeriod && s + span <= n &&
       equalRun(s, s + bestPeriod, span - bestPeriod);
       ++s)
    if (cost(s) < cost(start))
      start = s;
  for (auto [i, op] : llvm::enumerate(ops)) {
    int64_t at = int64_t(i) - start;
    segmentOf[op] = at >= 0 && at < span ? at / bestPeriod : -1;
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
  std::vector<int64_t> crossing = crossingBytes(graph);
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

//===----------------------------------------------------------------------===//
// Budget mode
//===----------------------------------------------------------------------===//

/// A plan by position: the (op number in the block, result number) of each
/// recomputed value, so that it applies to a copy of the function.
using PlanKey = std::vector<std::pair<unsigned, unsigned>>;

PlanKey keyOf(func::FuncOp func, const RecomputeSet &recompute) {
  DenseMap<Operation *, unsigned> number;
  for (auto [i, op] : llvm::enumerate(func.getBody().front()))
    number[&op] = i;
  PlanKey key;
  for (Value value : recompute)
    key.push_back({number.lookup(value.getDefiningOp()),
                   cast<OpResult>(value).getResultNumber()});
  llvm::sort(key);
  return key;
}

RecomputeSet setOf(func::FuncOp func, const PlanKey &key) {
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front())
    ops.push_back(&op);
  RecomputeSet recompute;
  for (auto [op, result] : key)
    recompute.insert(ops[op]->getResult(result));
  return recompute;
}

/// Budget mode's integer program over the step's forward ops, on nn-level
/// liveness (the pass description in Passes.td states it). Bytes are in
/// MiB and costs in millionths of the step's FLOPs, so CBC's tolerances
/// apply to both alike.
class BudgetModel {
public:
  BudgetModel(const StepGraph &graph, func::FuncOp func,
              const DenseMap<Operation *, int64_t> &segmentOf,
              int64_t stepFlops);

  /// The plan of least recompute whose modelled peak is at most
  /// `capacity` MiB; nullopt when none is, or none was found within
  /// `nodes` branch-and-bound nodes.
  std::optional<std::pair<RecomputeSet, IntegerProgram::Solution>>
  solve(double capacity, int64_t nodes) const;
  /// The smallest modelled peak a plan reaches (MiB).
  std::optional<double> smallestPeak(int64_t nodes) const;
  /// The modelled peak of keeping every activation (MiB).
  double peakWithoutRecompute() const { return keepAllPeak; }

  size_t columns() const { return keep.size() + recompute.size(); }
  size_t rows() const { return logic.size() + memory.size(); }

private:
  using Terms = std::vector<std::pair<int, double>>;
  /// Columns 0..|values|-1: keep value v; then recompute op o.
  std::vector<Value> values;
  DenseMap<Value, int> valueIndex;
  std::vector<Operation *> ops;
  std::vector<double> keep, recompute;
  /// Rows Σ ≥ lower that make a plan valid.
  std::vector<std::pair<Terms, double>> logic;
  /// Rows Σ + base ≤ capacity, one per interval of the backward in which
  /// the same values are alive.
  std::vector<std::pair<Terms, double>> memory;
  double keepAllPeak = 0;

  IntegerProgram program(std::optional<double> capacity, int *peak) const;
};

BudgetModel::BudgetModel(const StepGraph &graph, func::FuncOp func,
                         const DenseMap<Operation *, int64_t> &segmentOf,
                         int64_t stepFlops) {
  Block &block = func.getBody().front();
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(block))
    position[&op] = i;
  int64_t end = block.getOperations().size();
  auto mib = [](int64_t bytes) { return double(bytes) / (1 << 20); };
  auto isView = [](Value value) {
    return isa_and_nonnull<nn::ReshapeOp>(value.getDefiningOp());
  };
  auto viewedBytes = [&](Value value) {
    return isView(value) ? 0 : tensorBytes(value);
  };

  // The candidates: forward nn ops with an activation result.
  DenseMap<Operation *, int> opColumn;
  for (Operation *op : graph.forwardOps())
    if (isa<nn::NNDialect>(op->getDialect()) &&
        llvm::any_of(op->getResults(),
                     [&](Value v) { return graph.isActivation(v); })) {
      opColumn[op] = ops.size();
      ops.push_back(op);
    }
  // The values a plan decides on: activations the backward or a candidate
  // reads.
  DenseMap<Value, int> valueColumn;
  for (Operation *op : graph.forwardOps())
    for (Value result : op->getResults()) {
      if (!graph.isActivation(result))
        continue;
      bool needed = llvm::any_of(result.getUsers(), [&](Operation *user) {
        return graph.isBackward(user) || opColumn.contains(user);
      });
      if (needed) {
        valueColumn[result] = values.size();
        values.push_back(result);
      }
    }
  valueIndex = valueColumn;
  int columnsBefore = values.size();
  auto recomputeColumn = [&](Operation *op) {
    return columnsBefore + opColumn.lookup(op);
  };
  keep.assign(values.size(), 0.0);
  for (Operation *op : ops)
    recompute.push_back(
        (stepFlops ? 1e6 * double(estimateFlops(op)) / double(stepFlops)
                   : double(estimateFlops(op))) +
        1e-3);

  // When the backward reads each value (first and last), and in which
  // span of the backward each segment's clones can be alive: a clone is
  // made at a backward use of its segment's values, or for a clone of its
  // segment that reads it (chains never leave a segment).
  auto segment = [&](Operation *op) { return segmentOf.lookup(op); };
  DenseMap<int64_t, std::pair<int64_t, int64_t>> window;
  std::vector<int64_t> lastUse(values.size(), -1);
  for (auto [i, value] : llvm::enumerate(values)) {
    int64_t first = end, last = -1;
    for (Operation *user : value.getUsers())
      if (graph.isBackward(user)) {
        first = std::min(first, position.lookup(user));
        last = std::max(last, position.lookup(user));
      }
    lastUse[i] = last;
    Operation *def = value.getDefiningOp();
    if (last >= 0 && opColumn.contains(def)) {
      auto [it, inserted] =
          window.try_emplace(segment(def), std::make_pair(first, last));
      it->second.first = std::min(it->second.first, first);
      it->second.second = std::max(it->second.second, last);
    }
  }
  // A kept value lives until the backward's last read of it, or of a clone
  // that reads it; a view keeps its operand's buffer.
  for (auto [i, value] : llvm::enumerate(values))
    for (Operation *user : value.getUsers())
      if (opColumn.contains(user))
        if (auto it = window.find(segment(user)); it != window.end())
          lastUse[i] = std::max(lastUse[i], it->second.second);
  for (int i = values.size() - 1; i >= 0; --i)
    if (isView(values[i]))
      if (auto it = valueColumn.find(values[i].getDefiningOp()->getOperand(0));
          it != valueColumn.end())
        lastUse[it->second] = std::max(lastUse[it->second], lastUse[i]);

  // Validity: what the backward reads is kept or recomputed; a recomputed
  // op's operands are kept, or recomputed in its own segment; a kept view
  // keeps its operand.
  for (auto [i, value] : llvm::enumerate(values)) {
    Operation *def = value.getDefiningOp();
    bool read = llvm::any_of(value.getUsers(), [&](Operation *user) {
      return graph.isBackward(user);
    });
    if (read) {
      Terms terms{{int(i), 1.0}};
      if (opColumn.contains(def))
        terms.push_back({recomputeColumn(def), 1.0});
      logic.push_back({std::move(terms), 1.0});
    }
  }
  for (Operation *op : ops) {
    llvm::SmallDenseSet<Value> seen;
    for (Value operand : op->getOperands()) {
      auto it = valueColumn.find(operand);
      if (it == valueColumn.end() || !seen.insert(operand).second)
        continue;
      Terms terms{{it->second, 1.0}, {recomputeColumn(op), -1.0}};
      Operation *def = operand.getDefiningOp();
      if (opColumn.contains(def) && segment(def) == segment(op))
        terms.push_back({recomputeColumn(def), 1.0});
      logic.push_back({std::move(terms), 0.0});
    }
    if (isa<nn::ReshapeOp>(op))
      if (auto operand = valueColumn.find(op->getOperand(0));
          operand != valueColumn.end())
        if (auto result = valueColumn.find(op->getResult(0));
            result != valueColumn.end())
          logic.push_back(
              {{{operand->second, 1.0}, {result->second, -1.0}}, 0.0});
  }

  // What lives whatever the plan: every other value from its definition to
  // its last use (a view's uses extend its operand's), and the decided
  // values until their last forward use. Only the loss op and what follows
  // it matter: the backward holds the peak (the end of the forward is its
  // first op).
  int64_t from = position.lookup(graph.loss());
  std::vector<int64_t> delta(end + 2, 0);
  DenseMap<Value, int64_t> last;
  for (Operation &op : llvm::reverse(block)) {
    for (Value result : op.getResults()) {
      int64_t at = position.lookup(&op);
      bool decided = valueColumn.contains(result);
      for (Operation *user : result.getUsers())
        if (!decided || !graph.isBackward(user))
          at = std::max(at, position.lookup(user));
      at = std::max(at, last.lookup(result));
      if (isView(result)) {
        Value operand = op.getOperand(0);
        last[operand] = std::max(last.lookup(operand), at);
        continue;
      }
      if (op.hasTrait<OpTrait::ConstantLike>())
        continue;
      int64_t begin = std::max(from, position.lookup(&op));
      if (at >= begin) {
        delta[begin] += tensorBytes(result);
        delta[at + 1] -= tensorBytes(result);
      }
    }
  }
  std::vector<int64_t> base(end + 1, 0);
  for (int64_t p = 0, live = 0; p <= end; ++p)
    base[p] = live += delta[p];

  // The intervals of the backward in which the same decided values are
  // alive: one memory row each, at its largest base.
  std::vector<int64_t> events{from, end + 1};
  for (int64_t at : lastUse)
    if (at + 1 > from)
      events.push_back(at + 1);
  for (auto &[segmentId, span] : window) {
    events.push_back(std::max(from, span.first));
    events.push_back(std::max(from, span.second + 1));
  }
  llvm::sort(events);
  events.erase(std::unique(events.begin(), events.end()), events.end());
  for (size_t e = 0; e + 1 < events.size(); ++e) {
    int64_t at = events[e];
    int64_t most = *std::max_element(
        base.begin() + at, base.begin() + std::min(events[e + 1], end + 1));
    Terms terms;
    double kept = 0;
    for (auto [i, value] : llvm::enumerate(values))
      if (lastUse[i] >= at && viewedBytes(value) > 0) {
        terms.push_back({int(i), mib(viewedBytes(value))});
        if (llvm::any_of(value.getUsers(), [&](Operation *user) {
              return graph.isBackward(user);
            }))
          kept += mib(viewedBytes(value));
      }
    for (Operation *op : ops) {
      auto it = window.find(segment(op));
      if (it == window.end() || at < it->second.first || at > it->second.second)
        continue;
      int64_t bytes = 0;
      for (Value result : op->getResults())
        bytes += viewedBytes(result);
      if (bytes)
        terms.push_back({recomputeColumn(op), mib(bytes)});
    }
    keepAllPeak = std::max(keepAllPeak, mib(most) + kept);
    memory.push_back({std::move(terms), mib(most)});
  }
}

IntegerProgram BudgetModel::program(std::optional<double> capacity,
                                    int *peak) const {
  IntegerProgram program;
  for (double cost : keep)
    program.addColumn(cost);
  for (double cost : recompute)
    program.addColumn(capacity ? cost : 0.0);
  for (const auto &[terms, lower] : logic)
    program.addRowAtLeast(terms, lower);
  if (!capacity)
    *peak = program.addColumn(1.0, 0, 1e18, /*continuous=*/true);
  for (const auto &[terms, base] : memory) {
    auto row = terms;
    if (capacity) {
      program.addRowAtMost(std::move(row), *capacity - base);
    } else {
      row.push_back({*peak, -1.0});
      program.addRowAtMost(std::move(row), -base);
    }
  }
  return program;
}

std::optional<std::pair<RecomputeSet, IntegerProgram::Solution>>
BudgetModel::solve(double capacity, int64_t nodes) const {
  std::optional<IntegerProgram::Solution> solution =
      program(capacity, nullptr).solve(nodes);
  if (!solution)
    return std::nullopt;
  RecomputeSet chosen;
  int columnsBefore = values.size();
  for (auto [j, op] : llvm::enumerate(ops)) {
    if (!solution->isSet(columnsBefore + j))
      continue;
    for (Value result : op->getResults()) {
      auto it = valueIndex.find(result);
      if (it != valueIndex.end() && !solution->isSet(it->second))
        chosen.insert(result);
    }
  }
  return std::make_pair(std::move(chosen), std::move(*solution));
}

std::optional<double> BudgetModel::smallestPeak(int64_t nodes) const {
  int peak = -1;
  IntegerProgram minimal = program(std::nullopt, &peak);
  std::optional<IntegerProgram::Solution> solution = minimal.solve(nodes);
  if (!solution)
    return std::nullopt;
  return solution->values[peak];
}

/// One plan budget mode measured: its planned bytes per rank and its cost.
struct Candidate {
  std::string name;
  PlanKey key;
  uint64_t plannedBytes = 0;
  int64_t flops = 0, ops = 0;
  int64_t savedBytes = 0;
  /// For a plan of the integer program: its solution.
  std::optional<IntegerProgram::Solution> solution;
};

/// The segments budget mode's chains stay in: the blocks the node names
/// scope, each run of forward ops in no block a segment of its own; √n
/// segments when no name has a scope.
DenseMap<Operation *, int64_t> budgetSegments(const StepGraph &graph) {
  DenseMap<Operation *, int64_t> segmentOf = defaultBlocks(graph);
  if (segmentOf.empty())
    return sqrtSegments(graph);
  int64_t next = 0;
  for (auto &entry : segmentOf)
    next = std::max(next, entry.second + 1);
  bool inRun = false;
  for (Operation *op : graph.forwardOps()) {
    int64_t &id = segmentOf[op];
    if (id >= 0) {
      inRun = false;
      continue;
    }
    if (!inRun)
      ++next;
    inRun = true;
    id = next;
  }
  return segmentOf;
}

/// Bytes in budget mode's messages: "7.25 GiB (7784628224 bytes)".
std::string budgetBytes(uint64_t bytes) {
  return bytesText(bytes) + " (" + std::to_string(bytes) + " bytes)";
}
/// Budget mode's search: measures the fixed policies and the integer
/// program's plans for capacities spread between its smallest modelled
/// peak and that of keeping everything (the same plans whatever the
/// budget, so a larger budget never costs more), each by planning the
/// rest of the step on a copy; returns the cheapest that fits.
FailureOr<RecomputeSet>
chooseWithinBudget(func::FuncOp func, const StepGraph &graph, StringRef policy,
                   const RecomputeBudget &budget, int64_t searchNodes,
                   int64_t stepFlops, const RecomputePlanner &planner,
                   SmallVectorImpl<NamedAttribute> &figures) {
  if (!planner)
    return func.emitError("--recompute ")
           << policy
           << ": budget mode measures each plan by planning the rest of the "
              "step; run it in the training pipeline (ztc compile, ztc "
              "inspect, or ztc-opt --ztc-training-pipeline)";
  ModuleOp module = func->getParentOfType<ModuleOp>();
  std::vector<Candidate> candidates;
  std::set<PlanKey> measured;
  auto measure =
      [&](StringRef name, PlanKey key,
          std::optional<IntegerProgram::Solution> solution) -> LogicalResult {
    if (!measured.insert(key).second)
      return success();
    OwningOpRef<ModuleOp> copy = cast<ModuleOp>(module->clone());
    auto copyFunc = copy->lookupSymbol<func::FuncOp>(func.getSymName());
    StepGraph copyGraph(copyFunc);
    auto [flops, count] = rewriteBackward(copyGraph, setOf(copyFunc, key));
    int64_t saved = copyGraph.savedBytes();
    FailureOr<uint64_t> bytes = planner(*copy);
    if (failed(bytes))
      return failure();
    candidates.push_back(
        {name.str(), std::move(key), *bytes, flops, count, saved, solution});
    return success();
  };

  // The fixed policies: `none` first (a fraction is of its peak).
  if (failed(measure("none", {}, std::nullopt)) ||
      failed(measure("selective", keyOf(func, selectSelective(graph)),
                     std::nullopt)))
    return failure();
  DenseMap<Operation *, int64_t> blocks = defaultBlocks(graph);
  if (!blocks.empty() &&
      failed(measure("full", keyOf(func, selectSegments(graph, blocks)),
                     std::nullopt)))
    return failure();
  if (failed(measure("sqrt",
                     keyOf(func, selectSegments(graph, sqrtSegments(graph))),
                     std::nullopt)))
    return failure();
  uint64_t noneBytes = candidates.front().plannedBytes;
  uint64_t limit = budget.fraction > 0
                       ? uint64_t(budget.fraction * double(noneBytes))
                       : budget.bytes;

  // The integer program's plans.
  BudgetModel model(graph, func, budgetSegments(graph), stepFlops);
  constexpr int kCapacities = 24;
  double high = model.peakWithoutRecompute();
  double low = model.smallestPeak(searchNodes).value_or(0.0);
  int solved = 0;
  for (int i = 0; i < kCapacities; ++i) {
    double capacity = low + (high - low) * i / kCapacities;
    auto plan = model.solve(capacity, searchNodes);
    if (!plan)
      continue;
    ++solved;
    if (failed(
            measure("integer program", keyOf(func, plan->first), plan->second)))
      return failure();
  }

  const Candidate *chosen = nullptr, *smallest = nullptr;
  for (const Candidate &candidate : candidates) {
    if (!smallest || candidate.plannedBytes < smallest->plannedBytes)
      smallest = &candidate;
    if (candidate.plannedBytes > limit)
      continue;
    if (!chosen || candidate.flops < chosen->flops ||
        (candidate.flops == chosen->flops &&
         candidate.plannedBytes < chosen->plannedBytes))
      chosen = &candidate;
  }
  if (!chosen)
    return func.emitError("--recompute ")
           << policy << ": no plan fits in " << budgetBytes(limit)
           << ": the smallest planned peak reachable is "
           << budgetBytes(smallest->plannedBytes) << " (" << smallest->name
           << "); without recomputation it is " << budgetBytes(noneBytes);

  Builder b(func.getContext());
  double gap = chosen->solution ? chosen->solution->gap() : 0.0;
  figures.push_back(b.getNamedAttr("budget_bytes", b.getI64IntegerAttr(limit)));
  figures.push_back(b.getNamedAttr("planned_bytes",
                                   b.getI64IntegerAttr(chosen->plannedBytes)));
  figures.push_back(b.getNamedAttr(
      "budget_plan",
      b.getStringAttr(llvm::formatv(
          "{0}, the cheapest of {1} plans measured ({2} columns and {3} "
          "rows in the integer program, {4} of {5} solves found a plan){6}",
          chosen->name, candidates.size(), model.columns(), model.rows(),
          solved, kCapacities,
          chosen->solution
              ? llvm::formatv("; gap {0:F2}%{1}", 100 * gap,
                              chosen->solution->optimal ? " (optimal)"
                                                        : " (node limit)")
                    .str()
              : std::string()))));
  return setOf(func, chosen->key);
}

struct RecomputePass : public ztc::impl::RecomputePassBase<RecomputePass> {
  using RecomputePassBase::RecomputePassBase;
  RecomputePass(const RecomputePassOptions &options, RecomputePlanner planner)
      : RecomputePassBase(options), planner(std::move(planner)) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<RecomputeBudget> budget;
    if (isRecomputeBudget(policy)) {
      std::string error;
      budget = parseRecomputeBudget(policy, error);
      if (!budget) {
        module.emitError(error);
        return signalPassFailure();
      }
    } else if (policy != "none" && policy != "selective" && policy != "full" &&
               policy != "sqrt") {
      module.emitError("--recompute '")
          << policy
          << "': expected none, selective, full, sqrt, budget=BYTES or "
             "budget=FRACTION";
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
    if (policy == "selective") {
      recompute = selectSelective(graph);
    } else if (policy == "full") {
      FailureOr<DenseMap<Operation *, int64_t>> segments =
          blockSegments(graph, func, blocks);
      if (failed(segments))
        return failure();
      recompute = selectSegments(graph, *segments);
    } else if (policy == "sqrt") {
      recompute = selectSegments(graph, sqrtSegments(graph));
    } else if (budget) {
      FailureOr<RecomputeSet> chosen = chooseWithinBudget(
          func, graph, policy, *budget, searchNodes, stepFlops, planner,
          figures);
      if (failed(chosen))
        return failure();
      recompute = std::move(*chosen);
    }

    // 2. The backward reads clones of what it no longer keeps.
    auto [recomputeFlops, recomputedOps] = rewriteBackward(graph, recompute);

    // 3. What the choice buys, for the manifest and `ztc compile`'s report.
    Builder b(&getContext());
    figures.append({
        b.getNamedAttr("policy", b.getStringAttr(policy)),
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

bool mlir::ztc::isRecomputeBudget(StringRef policy) {
  return policy.starts_with("budget=");
}

std::optional<RecomputeBudget>
mlir::ztc::parseRecomputeBudget(StringRef policy, std::string &error) {
  StringRef text = policy.drop_front(strlen("budget="));
  auto fail = [&](const Twine &why) {
    error = ("--recompute '" + policy + "': " + why).str();
    return std::nullopt;
  };
  const char *expected =
      "expected budget=BYTES (such as 8GiB, 7.5GB, 512MiB or 6000000000) or "
      "a fraction of the peak without recomputation (0.6 or 60%)";
  if (text.empty())
    return fail(expected);
  // The number, then its unit.
  size_t digits = text.find_first_not_of("0123456789.eE+");
  StringRef number = text.take_front(digits),
            unit = text.drop_front(number.size());
  double value = 0;
  if (number.empty() || number.getAsDouble(value) || !std::isfinite(value) ||
      value <= 0)
    return fail(expected);
  RecomputeBudget budget;
  if (unit == "%") {
    if (value > 100)
      return fail("a share of the peak is at most 100%");
    budget.fraction = value / 100;
    return budget;
  }
  if (unit.empty() && value <= 1) {
    budget.fraction = value;
    return budget;
  }
  std::string why;
  std::optional<uint64_t> bytes = parseByteCount(text, why);
  if (!bytes)
    return fail(why + "; " + expected);
  budget.bytes = *bytes;
  return budget;
}

std::unique_ptr<Pass>
mlir::ztc::createRecomputePass(const RecomputePassOptions &options,
                               RecomputePlanner planner) {
  return std::make_unique<RecomputePass>(options, std::move(planner));
}
