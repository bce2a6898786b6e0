//===- RecomputePolicies.cpp - what ztc-recompute's policies keep ---------===//
//
// The fixed policies of ztc-recompute, each a choice of the activations
// the backward recomputes: `selective` (the cheap ops between layers), and
// `full` and `sqrt`, which cut the forward into segments (the blocks the
// node names scope or repeated structure; Chen et al.'s sqrt(n) cuts) and
// keep only what crosses a cut. Budget mode measures them too.
//
//===----------------------------------------------------------------------===//

#include "passes/Train/RecomputeInternal.h"

#include "dialects/NN/IR/NNOps.h"
#include "dialects/Train/IR/TrainOps.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Regex.h"

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace mlir;

namespace mlir::ztc::recompute {
namespace {

/// Most ops one recomputed value of the selective policy may clone: beyond
/// it the value is kept, so no chain (a residual stream) is replayed whole.
constexpr size_t kSelectiveClosureLimit = 32;

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

} // namespace

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

DenseMap<Operation *, int64_t> defaultBlocks(const StepGraph &graph) {
  DenseMap<Operation *, int64_t> segmentOf = scopeSegments(graph, nullptr);
  return segmentOf.empty() ? repeatedSegments(graph) : segmentOf;
}

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

} // namespace mlir::ztc::recompute
