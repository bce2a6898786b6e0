//===- RecomputeBudget.cpp - ztc-recompute's budget mode ------------------===//
//
// `--recompute budget=...`: the budget's syntax, the integer program over
// the forward ops that proposes plans for a range of modelled peaks
// (solved with IntegerProgram), and the search that measures those plans
// and the fixed policies by planning the rest of the step on a copy and
// keeps the cheapest that fits.
//
//===----------------------------------------------------------------------===//

#include "passes/Train/RecomputeInternal.h"

#include "dialects/NN/IR/NNOps.h"
#include "passes/Kernel/Footprint.h"
#include "passes/Train/IntegerProgram.h"

#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::ztc;

namespace mlir::ztc::recompute {
namespace {

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
  /// `nodes` branch-and-bound nodes. `start`: a solution known to fit
  /// `capacity` (one for a smaller capacity), where the search begins.
  std::optional<std::pair<RecomputeSet, IntegerProgram::Solution>>
  solve(double capacity, int64_t nodes,
        const IntegerProgram::Solution *start = nullptr) const;
  /// The values a solution recomputes.
  RecomputeSet planOf(const IntegerProgram::Solution &solution) const;
  /// The plan of the smallest modelled peak (peakOf gives it, in MiB):
  /// a solution that fits every capacity.
  std::optional<IntegerProgram::Solution> smallestPeak(int64_t nodes) const;
  double peakOf(const IntegerProgram::Solution &smallest) const {
    return smallest.values[columns()];
  }
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
BudgetModel::solve(double capacity, int64_t nodes,
                   const IntegerProgram::Solution *start) const {
  std::optional<IntegerProgram::Solution> solution =
      program(capacity, nullptr)
          .solve(nodes, nullptr, start ? &start->values : nullptr);
  if (!solution)
    return std::nullopt;
  RecomputeSet chosen = planOf(*solution);
  return std::make_pair(std::move(chosen), std::move(*solution));
}

RecomputeSet
BudgetModel::planOf(const IntegerProgram::Solution &solution) const {
  RecomputeSet chosen;
  int columnsBefore = values.size();
  for (auto [j, op] : llvm::enumerate(ops)) {
    if (!solution.isSet(columnsBefore + j))
      continue;
    for (Value result : op->getResults()) {
      auto it = valueIndex.find(result);
      if (it != valueIndex.end() && !solution.isSet(it->second))
        chosen.insert(result);
    }
  }
  return chosen;
}

std::optional<IntegerProgram::Solution>
BudgetModel::smallestPeak(int64_t nodes) const {
  int peak = -1;
  IntegerProgram minimal = program(std::nullopt, &peak);
  assert(size_t(peak) == columns() && "the peak is the last column");
  return minimal.solve(nodes);
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

} // namespace

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
  std::optional<IntegerProgram::Solution> leanest =
      model.smallestPeak(searchNodes);
  double low = leanest ? model.peakOf(*leanest) : 0.0;
  auto plannedBytesOf = [&](const PlanKey &key) {
    for (const Candidate &candidate : candidates)
      if (candidate.key == key)
        return candidate.plannedBytes;
    llvm_unreachable("every plan is measured before it is weighed");
  };
  // The scan starts at the largest capacity predicted to fit: planned
  // bytes taken as none's less the modelled bytes the capacity saves (a
  // prediction only; every plan is measured).
  auto capacityAt = [&](int i) { return low + (high - low) * i / kCapacities; };
  auto predicted = [&](double capacity) {
    return double(noneBytes) - (high - capacity) * (1 << 20);
  };
  // How far a measured plan was from its prediction, at most.
  double missed = 0;
  auto weigh = [&](const PlanKey &key, double capacity) {
    missed = std::max(
        missed, std::fabs(double(plannedBytesOf(key)) - predicted(capacity)));
  };
  if (leanest) {
    PlanKey key = keyOf(func, model.planOf(*leanest));
    if (failed(measure("integer program at its smallest peak", key, leanest)))
      return failure();
    weigh(key, low);
  }
  int first = 0;
  for (int i = 0; i < kCapacities; ++i)
    if (predicted(capacityAt(i)) <= double(limit))
      first = i;
  // One capacity's plan, measured: its solution, and whether it fits.
  using Measured = std::optional<std::pair<IntegerProgram::Solution, bool>>;
  int solved = 0, tried = 0;
  auto solveAt = [&](int i, const IntegerProgram::Solution *start,
                     Measured &result) -> LogicalResult {
    ++tried;
    result.reset();
    double capacity = capacityAt(i);
    auto plan = model.solve(capacity, searchNodes, start);
    if (!plan)
      return success();
    ++solved;
    PlanKey key = keyOf(func, plan->first);
    if (failed(measure("integer program", key, plan->second)))
      return failure();
    weigh(key, capacity);
    result.emplace(std::move(plan->second), plannedBytesOf(key) <= limit);
    return success();
  };
  // The optimum only falls as the capacity grows, and the planned bytes
  // rise with it. Upwards, each search starts from the plan below it
  // (which fits its capacity too), until a plan no longer fits after one
  // did; downwards, from the smallest peak's plan, until a plan proven
  // optimal fits: no smaller capacity offers a cheaper one.
  const IntegerProgram::Solution *fallback = leanest ? &*leanest : nullptr;
  auto scanUp = [&](int from, std::optional<IntegerProgram::Solution> below,
                    bool fitted) -> LogicalResult {
    for (int i = from; i < kCapacities; ++i) {
      if (!fitted && predicted(capacityAt(i)) - missed > double(limit))
        break;
      Measured plan;
      if (failed(solveAt(i, below ? &*below : fallback, plan)))
        return failure();
      if (!plan)
        continue;
      if (!plan->second && fitted)
        break;
      fitted |= plan->second;
      below = std::move(plan->first);
    }
    return success();
  };
  Measured start;
  if (failed(solveAt(first, fallback, start)))
    return failure();
  std::optional<IntegerProgram::Solution> startSolution;
  if (start)
    startSolution = start->first;
  if (start && start->second) {
    if (failed(scanUp(first + 1, startSolution, /*fitted=*/true)))
      return failure();
  } else {
    bool found = false;
    for (int i = first - 1; i >= 0 && !found; --i) {
      Measured plan;
      if (failed(solveAt(i, fallback, plan)))
        return failure();
      found = plan && plan->second && plan->first.optimal;
    }
    // The model's bound is loosest at the smallest capacities: when none
    // below fits, the larger ones get their chance, as far as the
    // predictions have missed by.
    if (!found && failed(scanUp(first + 1, startSolution, /*fitted=*/false)))
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
          solved, tried,
          chosen->solution
              ? llvm::formatv("; gap {0:F2}%{1}", 100 * gap,
                              chosen->solution->optimal ? " (optimal)"
                                                        : " (node limit)")
                    .str()
              : std::string()))));
  return setOf(func, chosen->key);
}

} // namespace mlir::ztc::recompute

std::optional<RecomputeSpec> mlir::ztc::parseRecomputeSpec(StringRef spec,
                                                           std::string &error) {
  RecomputeSpec parsed;
  if (spec.consume_front("budget=")) {
    parsed.policy = RecomputePolicy::Budget;
    parsed.budget = spec.str();
    if (!parseRecomputeBudget(parsed.budget, error))
      return std::nullopt;
    return parsed;
  }
  std::optional<RecomputePolicy> policy =
      parseSpelling(kRecomputePolicies, spec);
  if (!policy || *policy == RecomputePolicy::Budget) {
    error = ("--recompute '" + spec +
             "': expected none, selective, full, sqrt, budget=BYTES or "
             "budget=FRACTION")
                .str();
    return std::nullopt;
  }
  parsed.policy = *policy;
  return parsed;
}

std::string mlir::ztc::recomputeSpec(RecomputePolicy policy, StringRef budget) {
  if (policy == RecomputePolicy::Budget)
    return ("budget=" + budget).str();
  return spell(kRecomputePolicies, policy).str();
}

std::optional<RecomputeBudget>
mlir::ztc::parseRecomputeBudget(StringRef text, std::string &error) {
  auto fail = [&](const Twine &why) {
    error = ("--recompute 'budget=" + text + "': " + why).str();
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
