//===- MemoryReport.cpp - where a compiled step's memory goes -------------===//
//
// Builds, stores and prints `ztc inspect --memory`'s report; see the
// header.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/MemoryReport.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Kernel/IR/KernelOps.h"
#include "dialects/Train/IR/TrainOps.h"
#include "passes/Kernel/Footprint.h"
#include "passes/Kernel/LiveRanges.h"
#include "runtime/io/Manifest.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::ztc;

const char *mlir::ztc::arenaRoleName(ArenaRole role) {
  switch (role) {
  case ArenaRole::Activation:
    return "activations";
  case ArenaRole::Recompute:
    return "recomputation";
  case ArenaRole::Gradient:
    return "gradients";
  case ArenaRole::Workspace:
    return "workspace";
  }
  return "workspace";
}

namespace {

/// Up to three ONNX node names a location carries, comma-separated.
std::string nodeNames(Location loc) {
  SmallVector<std::string> names;
  train::collectNodeNames(loc, names);
  std::string text;
  for (auto [i, name] : llvm::enumerate(names)) {
    if (i == 3) {
      text += llvm::formatv(" (+{0} more)", names.size() - 3).str();
      break;
    }
    text += (i ? ", " : "") + name;
  }
  return text.empty() ? "(unnamed)" : text;
}

/// The alloc behind `value` (through views), or null (an argument or a
/// constant).
kernel::AllocOp allocOf(Value value) {
  return kernel::rootBuffer(value).getDefiningOp<kernel::AllocOp>();
}

/// What an arena buffer holds from op `from` on (its alloc's position for
/// the first value): a buffer a kernel wrote in place over one of its
/// inputs (ztc-write-in-place) holds one value after another.
struct BufferValue {
  int64_t from = 0;
  ArenaRole role = ArenaRole::Workspace;
  Operation *writer = nullptr;
};

/// Classifies the values of the arena buffers of `func` by what wrote
/// them: one per writer, in program order.
DenseMap<Operation *, SmallVector<BufferValue, 1>>
classifyBuffers(func::FuncOp func) {
  Block &block = func.getBody().front();
  DenseMap<Operation *, SmallVector<std::pair<int64_t, Operation *>, 1>>
      writers;
  DenseMap<Operation *, int64_t> position;
  Value loss;
  for (auto [i, op] : llvm::enumerate(block)) {
    position[&op] = i;
    for (Value written : kernel::writtenBuffers(&op))
      if (kernel::AllocOp alloc = allocOf(written)) {
        auto &list = writers[alloc];
        if (list.empty() || list.back().second != &op)
          list.push_back({int64_t(i), &op});
      }
    if (auto record = dyn_cast<kernel::RecordLossOp>(op))
      loss = record.getLoss();
  }
  Operation *ret = block.getTerminator();
  if (!loss && ret->getNumOperands())
    loss = ret->getOperand(0);

  // Buffers that depend on the step's data (inputs, labels, the random
  // key): a forward kernel of the weights alone (a transposed weight)
  // holds no activation.
  DenseSet<Operation *> dataDependent;
  auto dependent = [&](Value value) {
    Value root = kernel::rootBuffer(value);
    if (auto arg = dyn_cast<BlockArgument>(root)) {
      train::BindingAttr binding = train::getBinding(func, arg.getArgNumber());
      return !binding || (binding.getRole() != train::BindingRole::Param &&
                          binding.getRole() != train::BindingRole::Buffer);
    }
    Operation *alloc = root.getDefiningOp<kernel::AllocOp>();
    return alloc && dataDependent.contains(alloc);
  };
  for (Operation &op : block) {
    SmallVector<Value> written = kernel::writtenBuffers(&op);
    bool reads = llvm::any_of(op.getOperands(), [&](Value operand) {
      return !llvm::is_contained(written, operand) && dependent(operand);
    });
    if (reads)
      for (Value value : written)
        if (kernel::AllocOp alloc = allocOf(value))
          dataDependent.insert(alloc);
  }

  // The forward: the kernels the loss depends on, and the buffers it
  // depends on (a kernel with several outputs, such as the fused cross
  // entropy's gradient that also gives the loss, may write others; a
  // call's scratch is never one).
  DenseSet<Operation *> forward;
  DenseSet<Operation *> needed;
  if (kernel::AllocOp lossAlloc = loss ? allocOf(loss) : nullptr) {
    needed.insert(lossAlloc);
    // The value the loss is: its buffer's last write (nothing writes over
    // a loss the step records or returns).
    Operation *lossWriter = nullptr;
    for (auto [at, op] : writers.lookup(lossAlloc))
      lossWriter = op;
    for (Operation *op = lossWriter; op; op = op->getPrevNode()) {
      bool writes = llvm::any_of(kernel::writtenBuffers(op), [&](Value v) {
        kernel::AllocOp alloc = allocOf(v);
        return alloc && needed.contains(alloc);
      });
      if (!writes)
        continue;
      forward.insert(op);
      // What it reads: not its outputs, nor its scratch.
      SmallVector<Value> written = kernel::writtenBuffers(op);
      Value scratch;
      if (auto call = dyn_cast<kernel::CallOp>(op))
        scratch = call.getScratch();
      else if (auto reduce = dyn_cast<kernel::ReduceOp>(op))
        scratch = reduce.getScratch();
      for (Value operand : op->getOperands())
        if (kernel::AllocOp alloc = allocOf(operand))
          if (!llvm::is_contained(written, operand) && operand != scratch)
            needed.insert(alloc);
    }
  }
  // Gradients: what updates of the arguments (parameters and states, in
  // place) and the entry's results read.
  DenseSet<Operation *> gradients;
  for (Operation &op : block) {
    bool updates = llvm::any_of(kernel::writtenBuffers(&op), [](Value v) {
      return isa<BlockArgument>(kernel::rootBuffer(v));
    });
    if (updates || &op == ret)
      for (Value operand : op.getOperands())
        if (kernel::AllocOp alloc = allocOf(operand))
          gradients.insert(alloc);
  }

  DenseMap<Operation *, SmallVector<BufferValue, 1>> roles;
  for (auto alloc : block.getOps<kernel::AllocOp>()) {
    SmallVector<BufferValue, 1> &values = roles[alloc];
    for (auto [at, op] : writers.lookup(alloc)) {
      ArenaRole role = ArenaRole::Workspace;
      if (op->hasAttr(train::kRecomputedAttr))
        role = ArenaRole::Recompute;
      else if (forward.contains(op) && needed.contains(alloc) &&
               dataDependent.contains(alloc))
        role = ArenaRole::Activation;
      else if (gradients.contains(alloc))
        role = ArenaRole::Gradient;
      values.push_back(
          {values.empty() ? position.lookup(alloc) : at, role, op});
    }
    if (values.empty())
      values.push_back({position.lookup(alloc),
                        gradients.contains(alloc) ? ArenaRole::Gradient
                                                  : ArenaRole::Workspace,
                        nullptr});
  }
  return roles;
}

} // namespace

FailureOr<MemoryReport> mlir::ztc::buildMemoryReport(ModuleOp module) {
  MemoryReport report;
  FailureOr<StepFootprint> footprint = measureFootprint(module);
  if (failed(footprint))
    return failure();
  func::FuncOp entry = footprint->entry;
  report.params = footprint->params;
  report.buffers = footprint->buffers;
  report.states = footprint->states;
  report.constants = footprint->constants;
  report.data = footprint->data;
  report.arena = footprint->arena;
  report.reserved = footprint->reserved;
  report.inputSets = footprint->inputSets;
  auto countScratch = [&](Value scratch) {
    if (scratch)
      report.scratch = std::max<uint64_t>(
          report.scratch, cast<MemRefType>(scratch.getType()).getNumElements());
  };
  entry.walk([&](kernel::CallOp call) { countScratch(call.getScratch()); });
  entry.walk([&](kernel::ReduceOp op) { countScratch(op.getScratch()); });
  report.paramCount = footprint->paramCount;
  report.gradients = footprint->gradients;
  report.workingCopies = footprint->workingCopies;
  report.copies = footprint->copies;
  report.worldSize = footprint->worldSize;
  report.zeroStage = footprint->zeroStage;
  if (auto precision = entry->getAttrOfType<StringAttr>(train::kPrecisionAttr))
    report.precision = precision.str();
  report.entry = entry.getSymName().str();
  if (auto recompute =
          entry->getAttrOfType<DictionaryAttr>(train::kRecomputeAttr)) {
    report.policy = recompute.getAs<StringAttr>("policy").str();
    auto figure = [&](StringRef key) {
      return uint64_t(recompute.getAs<IntegerAttr>(key).getInt());
    };
    report.recompute = MemoryReport::Recompute{
        figure("saved_bytes"), figure("baseline_saved_bytes"),
        figure("recompute_flops"), figure("step_flops")};
    if (recompute.get("budget_bytes")) {
      report.recompute->budgetBytes = figure("budget_bytes");
      report.recompute->budgetPlan =
          recompute.getAs<StringAttr>("budget_plan").str();
      // Budget mode measured its plan on a copy of this very step.
      if (figure("planned_bytes") != report.total())
        return entry.emitError("--recompute ")
               << report.policy << ": the plan was measured at "
               << figure("planned_bytes") << " bytes, but the step plans "
               << report.total() << " (a bug in ztc: please report it)";
    }
  }

  // The weights, and whether the step writes each.
  DenseSet<unsigned> written;
  for (unsigned index : kernel::writtenArguments(entry))
    written.insert(index);
  for (BlockArgument arg : entry.getArguments()) {
    unsigned index = arg.getArgNumber();
    train::BindingAttr binding = train::getBinding(entry, index);
    if (!binding || (binding.getRole() != train::BindingRole::Param &&
                     binding.getRole() != train::BindingRole::Buffer))
      continue;
    MemoryReport::Weight weight;
    weight.name = binding.getName().str();
    bool param = binding.getRole() == train::BindingRole::Param;
    weight.role = written.contains(index)
                      ? (param ? "trained" : "updated buffer")
                      : (param ? "frozen" : "buffer");
    auto type = cast<ShapedType>(arg.getType());
    llvm::raw_string_ostream(weight.dtype) << type.getElementType();
    weight.shape.assign(type.getShape().begin(), type.getShape().end());
    if (auto full = entry.getArgAttrOfType<DenseI64ArrayAttr>(
            index, dist::DistDialect::kFullShapeAttr))
      weight.shape.assign(full.asArrayRef().begin(), full.asArrayRef().end());
    if (auto nf4 =
            entry.getArgAttrOfType<DenseI64ArrayAttr>(index, train::kNf4Attr))
      weight.nf4Shape.assign(nf4.asArrayRef().begin(), nf4.asArrayRef().end());
    if (BlockArgument of = train::nf4WeightOf(entry, index))
      weight.nf4Of = train::bindingName(entry, of.getArgNumber()).str();
    report.weights.push_back(std::move(weight));
  }

  // The collectives, per entry: what ztc-train's "communication" line
  // counts, with the runtime's own Collective::ringElements, planned.
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    func.walk([&](kernel::CollectiveOpInterface collective) {
      if (!collective.communicates())
        return;
      StringRef op = kernel::stringifyCollectiveKind(collective.getKind());
      Type element =
          cast<MemRefType>(collective.getOutput().getType()).getElementType();
      std::string dtype;
      llvm::raw_string_ostream(dtype) << element;
      ::ztc::rt::Collective counted;
      counted.op = static_cast<::ztc::rt::CollectiveOp>(
          kernel::collectiveCode(collective.getKind()));
      counted.elements = collective.getElements();
      auto line = llvm::find_if(report.communication, [&](const auto &l) {
        return l.entry == func.getSymName() && l.op == op && l.dtype == dtype;
      });
      if (line == report.communication.end())
        line = report.communication.insert(
            report.communication.end(),
            {func.getSymName().str(), op.str(), dtype, 0, 0, 0, 0});
      ++line->calls;
      if (kernel::streamOf(collective) != 0)
        ++line->streamed;
      line->elements += counted.elements;
      line->sent += counted.ringElements(report.worldSize);
    });

  FailureOr<SmallVector<LiveRange>> ranges = computeLiveRanges(entry);
  if (failed(ranges))
    return failure();
  auto roles = classifyBuffers(entry);
  uint64_t ops = entry.getBody().front().getOperations().size();
  report.ops = ops;
  // The loops of one launch group (ztc-group-launches) are one launch.
  std::optional<int64_t> lastGroup;
  for (Operation &op : entry.getBody().front()) {
    std::optional<int64_t> group = kernel::launchGroupOf(&op);
    if (group && group == lastGroup)
      continue;
    if (isa<kernel::ElementwiseOp, kernel::ReduceOp, kernel::CallOp,
            kernel::CollectiveOp, kernel::RecordLossOp, kernel::CheckFiniteOp>(
            op))
      lastGroup = group;
    if (isa<kernel::ElementwiseOp, kernel::ReduceOp>(op))
      ++report.loops;
    else if (isa<kernel::CallOp>(op))
      ++report.calls;
    else if (isa<kernel::CollectiveOp, kernel::RecordLossOp,
                 kernel::CheckFiniteOp>(op))
      ++report.otherKernels;
  }
  // Live bytes per role after each op: a difference array, summed.
  std::vector<std::array<int64_t, kArenaRoles>> delta(ops + 1);
  // A buffer counts under the role of the value it holds: each value from
  // its writer to the next one's.
  auto valuesOf = [&](const LiveRange &range) {
    auto values = roles.lookup(range.alloc);
    values.front().from = range.first;
    return values;
  };
  for (const LiveRange &range : *ranges) {
    SmallVector<BufferValue, 1> values = valuesOf(range);
    int64_t end = std::min<int64_t>(range.last, ops - 1) + 1;
    for (auto [i, value] : llvm::enumerate(values)) {
      int64_t until = i + 1 < values.size() ? values[i + 1].from : end;
      if (until <= value.from)
        continue;
      delta[value.from][size_t(value.role)] += range.bytes;
      delta[until][size_t(value.role)] -= range.bytes;
    }
  }
  std::array<int64_t, kArenaRoles> live{};
  uint64_t best = 0;
  for (uint64_t at = 0; at < ops; ++at) {
    std::array<uint64_t, kArenaRoles> row;
    uint64_t total = 0;
    for (size_t role = 0; role < kArenaRoles; ++role) {
      live[role] += delta[at][role];
      row[role] = uint64_t(live[role]);
      total += row[role];
    }
    report.timeline.push_back(row);
    if (total > best) {
      best = total;
      report.peakAt = at;
      report.peakRoles = row;
    }
  }
  for (LiveRange range : *ranges) {
    if (range.first > int64_t(report.peakAt) ||
        range.last < int64_t(report.peakAt))
      continue;
    // The value it holds then.
    BufferValue held;
    for (const BufferValue &value : valuesOf(range))
      if (value.from <= int64_t(report.peakAt))
        held = value;
    Operation *writer = held.writer;
    MemoryReport::Tensor tensor;
    tensor.role = held.role;
    tensor.bytes = range.bytes;
    tensor.offset = range.alloc.getOffset().value_or(0);
    tensor.nodes = nodeNames(writer ? writer->getLoc() : range.alloc.getLoc());
    report.atPeak.push_back(std::move(tensor));
  }
  llvm::stable_sort(report.atPeak, [](const auto &a, const auto &b) {
    return a.bytes > b.bytes;
  });
  return report;
}

//===----------------------------------------------------------------------===//
// memory.json
//===----------------------------------------------------------------------===//

llvm::json::Value mlir::ztc::memoryReportToJson(const MemoryReport &report) {
  llvm::json::Object roles;
  for (size_t role = 0; role < kArenaRoles; ++role)
    roles[arenaRoleName(ArenaRole(role))] = int64_t(report.peakRoles[role]);
  llvm::json::Array tensors;
  for (const MemoryReport::Tensor &tensor : report.atPeak)
    tensors.push_back(llvm::json::Object{{"role", arenaRoleName(tensor.role)},
                                         {"bytes", int64_t(tensor.bytes)},
                                         {"offset", int64_t(tensor.offset)},
                                         {"nodes", tensor.nodes}});
  llvm::json::Array timeline;
  for (const auto &row : report.timeline)
    timeline.push_back(llvm::json::Array(
        {int64_t(row[0]), int64_t(row[1]), int64_t(row[2]), int64_t(row[3])}));
  llvm::json::Object root{
      {"entry", report.entry},
      {"policy", report.policy},
      {"precision", report.precision},
      {"param_count", int64_t(report.paramCount)},
      {"gradient_bytes", int64_t(report.gradients)},
      {"working_copy_bytes", int64_t(report.workingCopies)},
      {"world_size", int64_t(report.worldSize)},
      {"zero_stage", int64_t(report.zeroStage)},
      {"total_bytes", int64_t(report.total())},
      {"bindings",
       llvm::json::Object{{"params", int64_t(report.params)},
                          {"buffers", int64_t(report.buffers)},
                          {"optimizer_state", int64_t(report.states)},
                          {"param_copies", int64_t(report.copies)},
                          {"constants", int64_t(report.constants)},
                          {"data", int64_t(report.data)}}},
      {"arena_bytes", int64_t(report.arena)},
      {"reserved_bytes", int64_t(report.reserved)},
      {"scratch_bytes", int64_t(report.scratch)},
      {"input_sets", int64_t(report.inputSets)},
      {"ops", int64_t(report.ops)},
      {"kernels", llvm::json::Object{{"loops", int64_t(report.loops)},
                                     {"calls", int64_t(report.calls)},
                                     {"other", int64_t(report.otherKernels)}}},
      {"peak", llvm::json::Object{{"op", int64_t(report.peakAt)},
                                  {"live_bytes", int64_t(report.peakLive())},
                                  {"roles", std::move(roles)},
                                  {"tensors", std::move(tensors)}}},
      {"timeline_roles", llvm::json::Array({"activations", "recomputation",
                                            "gradients", "workspace"})},
      {"timeline", std::move(timeline)}};
  if (report.recompute) {
    llvm::json::Object recompute{
        {"saved_activation_bytes", int64_t(report.recompute->savedBytes)},
        {"baseline_saved_activation_bytes",
         int64_t(report.recompute->baselineSavedBytes)},
        {"recompute_flops", int64_t(report.recompute->recomputeFlops)},
        {"step_flops", int64_t(report.recompute->stepFlops)}};
    if (report.recompute->budgetBytes) {
      recompute["budget_bytes"] = int64_t(report.recompute->budgetBytes);
      recompute["budget_plan"] = report.recompute->budgetPlan;
    }
    root["recompute"] = std::move(recompute);
  }
  llvm::json::Array communication;
  for (const MemoryReport::Collectives &line : report.communication)
    communication.push_back(
        llvm::json::Object{{"entry", line.entry},
                           {"op", line.op},
                           {"dtype", line.dtype},
                           {"calls", int64_t(line.calls)},
                           {"elements", int64_t(line.elements)},
                           {"sent_per_rank", int64_t(line.sent)},
                           {"streamed", int64_t(line.streamed)}});
  root["communication"] = std::move(communication);
  llvm::json::Array weights;
  for (const MemoryReport::Weight &weight : report.weights) {
    llvm::json::Array shape;
    for (int64_t dim : weight.shape)
      shape.push_back(dim);
    llvm::json::Object object{{"name", weight.name},
                              {"role", weight.role},
                              {"dtype", weight.dtype},
                              {"shape", std::move(shape)}};
    if (!weight.nf4Shape.empty())
      object["nf4_shape"] = llvm::json::Array(weight.nf4Shape);
    if (!weight.nf4Of.empty())
      object["nf4_of"] = weight.nf4Of;
    weights.push_back(std::move(object));
  }
  root["weights"] = std::move(weights);
  return root;
}

std::optional<MemoryReport>
mlir::ztc::memoryReportFromJson(const llvm::json::Value &json,
                                std::string &error) {
  MemoryReport report;
  auto fail = [&](const std::string &what) -> std::optional<MemoryReport> {
    error = what;
    return std::nullopt;
  };
  const llvm::json::Object *top = json.getAsObject();
  if (!top)
    return fail("not a JSON object");
  auto number = [&](const llvm::json::Object *object, StringRef key,
                    uint64_t &out) {
    std::optional<int64_t> value =
        object ? object->getInteger(key) : std::nullopt;
    if (!value || *value < 0)
      return false;
    out = uint64_t(*value);
    return true;
  };
  const llvm::json::Object *bindings = top->getObject("bindings");
  const llvm::json::Object *peak = top->getObject("peak");
  const llvm::json::Object *roles = peak ? peak->getObject("roles") : nullptr;
  std::optional<StringRef> entry = top->getString("entry");
  std::optional<StringRef> policy = top->getString("policy");
  if (!entry || !policy || !number(bindings, "params", report.params) ||
      !number(bindings, "buffers", report.buffers) ||
      !number(bindings, "optimizer_state", report.states) ||
      !number(bindings, "constants", report.constants) ||
      !number(bindings, "data", report.data) ||
      !number(top, "arena_bytes", report.arena) ||
      !number(top, "ops", report.ops) || !number(peak, "op", report.peakAt))
    return fail("a field of the report is missing or not a count");
  report.entry = entry->str();
  report.policy = policy->str();
  // Reports of an older ztc have no kernel counts.
  if (top->get("kernels")) {
    const llvm::json::Object *kernels = top->getObject("kernels");
    if (!number(kernels, "loops", report.loops) ||
        !number(kernels, "calls", report.calls) ||
        !number(kernels, "other", report.otherKernels))
      return fail("kernels is not an object of three counts");
  }
  // Reports of an older ztc have neither: nothing reserved, no scratch.
  if ((top->get("reserved_bytes") &&
       !number(top, "reserved_bytes", report.reserved)) ||
      (top->get("scratch_bytes") &&
       !number(top, "scratch_bytes", report.scratch)) ||
      (top->get("input_sets") && !number(top, "input_sets", report.inputSets)))
    return fail("reserved_bytes, scratch_bytes or input_sets is not a count");
  // Reports of an older ztc have neither: f32, and no count.
  if (top->get("precision") || top->get("param_count")) {
    std::optional<StringRef> precision = top->getString("precision");
    if (!precision || !number(top, "param_count", report.paramCount))
      return fail("precision is not a string or param_count not a count");
    report.precision = precision->str();
  }
  // Reports of an older ztc: one rank, whole gradients.
  report.gradients = report.params;
  if (top->get("gradient_bytes") &&
      (!number(top, "gradient_bytes", report.gradients) ||
       !number(top, "world_size", report.worldSize) ||
       !number(top, "zero_stage", report.zeroStage)))
    return fail("gradient_bytes, world_size or zero_stage is not a count");
  // Reports of an older ztc: no parameter copies.
  if (bindings->get("param_copies") &&
      !number(bindings, "param_copies", report.copies))
    return fail("bindings.param_copies is not a count");
  // Reports of an older ztc: no working copies.
  if (top->get("working_copy_bytes") &&
      !number(top, "working_copy_bytes", report.workingCopies))
    return fail("working_copy_bytes is not a count");
  for (size_t role = 0; role < kArenaRoles; ++role)
    if (!number(roles, arenaRoleName(ArenaRole(role)), report.peakRoles[role]))
      return fail(std::string("peak.roles has no count for ") +
                  arenaRoleName(ArenaRole(role)));
  const llvm::json::Array *tensors = peak->getArray("tensors");
  const llvm::json::Array *timeline = top->getArray("timeline");
  if (!tensors || !timeline)
    return fail("peak.tensors or timeline is missing");
  for (const llvm::json::Value &value : *tensors) {
    const llvm::json::Object *object = value.getAsObject();
    MemoryReport::Tensor tensor;
    std::optional<StringRef> role =
        object ? object->getString("role") : std::nullopt;
    std::optional<StringRef> nodes =
        object ? object->getString("nodes") : std::nullopt;
    if (!role || !nodes || !number(object, "bytes", tensor.bytes) ||
        !number(object, "offset", tensor.offset))
      return fail("an entry of peak.tensors is malformed");
    for (size_t r = 0; r < kArenaRoles; ++r)
      if (*role == arenaRoleName(ArenaRole(r)))
        tensor.role = ArenaRole(r);
    tensor.nodes = nodes->str();
    report.atPeak.push_back(std::move(tensor));
  }
  for (const llvm::json::Value &value : *timeline) {
    const llvm::json::Array *row = value.getAsArray();
    if (!row || row->size() != kArenaRoles)
      return fail("a timeline row is not " + std::to_string(kArenaRoles) +
                  " counts");
    std::array<uint64_t, kArenaRoles> counts;
    for (size_t role = 0; role < kArenaRoles; ++role) {
      std::optional<int64_t> count = (*row)[role].getAsInteger();
      if (!count || *count < 0)
        return fail("a timeline row is not " + std::to_string(kArenaRoles) +
                    " counts");
      counts[role] = uint64_t(*count);
    }
    report.timeline.push_back(counts);
  }
  if (const llvm::json::Object *recompute = top->getObject("recompute")) {
    MemoryReport::Recompute figures;
    if (!number(recompute, "saved_activation_bytes", figures.savedBytes) ||
        !number(recompute, "baseline_saved_activation_bytes",
                figures.baselineSavedBytes) ||
        !number(recompute, "recompute_flops", figures.recomputeFlops) ||
        !number(recompute, "step_flops", figures.stepFlops))
      return fail("a field of recompute is missing or not a count");
    if (recompute->get("budget_bytes")) {
      std::optional<StringRef> plan = recompute->getString("budget_plan");
      if (!number(recompute, "budget_bytes", figures.budgetBytes) || !plan)
        return fail("recompute's budget_bytes is not a count, or its "
                    "budget_plan is missing");
      figures.budgetPlan = plan->str();
    }
    report.recompute = figures;
  }
  // Reports of an older ztc have no communication.
  if (const llvm::json::Array *lines = top->getArray("communication")) {
    for (const llvm::json::Value &value : *lines) {
      const llvm::json::Object *object = value.getAsObject();
      MemoryReport::Collectives line;
      std::optional<StringRef> entry, op, dtype;
      if (object) {
        entry = object->getString("entry");
        op = object->getString("op");
        dtype = object->getString("dtype");
      }
      if (!entry || !op || !dtype || !number(object, "calls", line.calls) ||
          !number(object, "elements", line.elements) ||
          !number(object, "sent_per_rank", line.sent))
        return fail("an entry of communication is malformed");
      // Reports of an older ztc have no "streamed": in program order.
      if (object->get("streamed") && !number(object, "streamed", line.streamed))
        return fail("an entry of communication is malformed");
      line.entry = entry->str();
      line.op = op->str();
      line.dtype = dtype->str();
      report.communication.push_back(std::move(line));
    }
  }
  // Reports of an older ztc have no weights.
  if (const llvm::json::Array *weights = top->getArray("weights")) {
    for (const llvm::json::Value &value : *weights) {
      const llvm::json::Object *object = value.getAsObject();
      std::optional<StringRef> name, role, dtype;
      const llvm::json::Array *shape = nullptr;
      if (object) {
        name = object->getString("name");
        role = object->getString("role");
        dtype = object->getString("dtype");
        shape = object->getArray("shape");
      }
      if (!name || !role || !dtype || !shape)
        return fail("an entry of weights is malformed");
      MemoryReport::Weight weight{name->str(), role->str(), dtype->str(), {}};
      for (const llvm::json::Value &dim : *shape) {
        std::optional<int64_t> size = dim.getAsInteger();
        if (!size || *size < 0)
          return fail("the shape of weight '" + weight.name + "' is not sizes");
        weight.shape.push_back(*size);
      }
      if (const llvm::json::Array *nf4 = object->getArray("nf4_shape"))
        for (const llvm::json::Value &dim : *nf4) {
          std::optional<int64_t> size = dim.getAsInteger();
          if (!size || *size < 1)
            return fail("the NF4 shape of weight '" + weight.name +
                        "' is not sizes");
          weight.nf4Shape.push_back(*size);
        }
      if (!weight.nf4Shape.empty() && weight.nf4Shape.size() != 2)
        return fail("the NF4 shape of weight '" + weight.name +
                    "' is not [rows, cols]");
      if (std::optional<StringRef> of = object->getString("nf4_of"))
        weight.nf4Of = of->str();
      report.weights.push_back(std::move(weight));
    }
  }
  return report;
}

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

namespace {

std::string flopsText(uint64_t flops) {
  const char *units[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
  double value = double(flops);
  int unit = 0;
  while (value >= 1000 && unit < 5) {
    value /= 1000;
    ++unit;
  }
  return llvm::formatv("{0:F2} {1}", value, units[unit]).str();
}

/// Bytes per parameter of the model held by one rank, as the ZeRO paper
/// counts them: the parameters (the f32 masters under mixed precision),
/// their half working copies, their gradients (a 1/N share from stage 2
/// on) and the optimizer state.
std::string perParameter(const MemoryReport &report) {
  if (!report.paramCount)
    return "-";
  return llvm::formatv("{0:F1} B", double(report.params + report.workingCopies +
                                          report.gradients + report.states) /
                                       double(report.paramCount))
      .str();
}

/// perParameter's terms: "parameter 4.0 + gradient 4.0 + optimizer state
/// 8.0"; under mixed precision "master 4.0 + bf16 working copy 2.0 + ..."
/// (at stage 3 the working copy is the rank's half block).
std::string perParameterTerms(const MemoryReport &report) {
  auto each = [&](uint64_t bytes) {
    return llvm::formatv("{0:F1}", double(bytes) / double(report.paramCount))
        .str();
  };
  bool mixed = report.precision == "bf16" || report.precision == "fp16";
  std::string terms = (mixed ? "master " : "parameter ") + each(report.params);
  if (report.workingCopies)
    terms += " + " + report.precision + " working copy " +
             each(report.workingCopies);
  return terms + " + gradient " + each(report.gradients) +
         " + optimizer state " + each(report.states);
}

std::string percent(uint64_t part, uint64_t whole) {
  return whole ? llvm::formatv("{0:F1}%", 100.0 * part / whole).str() : "-";
}

} // namespace

void mlir::ztc::printMemoryReport(const MemoryReport &report,
                                  llvm::raw_ostream &os) {
  os << llvm::formatv("memory per rank: {0} ({1} bytes), recompute {2}",
                      bytesText(report.total()), report.total(), report.policy);
  if (report.worldSize > 1)
    os << llvm::formatv(", ZeRO stage {0} on {1} ranks", report.zeroStage,
                        report.worldSize);
  os << "\n";
  auto line = [&](StringRef what, uint64_t bytes) {
    os << llvm::formatv("  {0,-30} {1,12}  {2,6}\n", what, bytesText(bytes),
                        percent(bytes, report.total()));
  };
  line("parameters", report.params);
  line("optimizer state", report.states);
  if (report.copies)
    line(report.precision + " parameter blocks", report.copies);
  if (report.paramCount)
    os << llvm::formatv("  {0,-30} {1,12}  ({2}; {3} parameters, {4})\n",
                        "per parameter", perParameter(report),
                        perParameterTerms(report), report.paramCount,
                        report.precision);
  if (report.buffers)
    line("buffers (running statistics)", report.buffers);
  if (report.constants)
    line("constants", report.constants);
  line(
      report.inputSets > 1
          ? llvm::formatv("inputs and labels, {0} sets", report.inputSets).str()
          : std::string("inputs and labels"),
      report.data);
  line("arena (planned peak)", report.arena);
  if (report.scratch)
    os << llvm::formatv("  {0,-30} {1,12}\n", "  of which kernels' scratch",
                        bytesText(report.scratch));
  if (report.reserved)
    line("cuBLAS workspace (reserved)", report.reserved);
  os << llvm::formatv("arena at its fullest, op {0} of {1} in {2}: {3} "
                      "live\n",
                      report.peakAt, report.ops, report.entry,
                      bytesText(report.peakLive()));
  for (size_t role = 0; role < kArenaRoles; ++role)
    os << llvm::formatv("  {0,-30} {1,12}  {2,6}\n",
                        role == 0 ? "saved activations"
                                  : arenaRoleName(ArenaRole(role)),
                        bytesText(report.peakRoles[role]),
                        percent(report.peakRoles[role], report.peakLive()));
  if (report.kernels())
    os << llvm::formatv("kernels in {0}: {1} ({2} fused loops, {3} library "
                        "calls, {4} other)\n",
                        report.entry, report.kernels(), report.loops,
                        report.calls, report.otherKernels);
  if (report.recompute) {
    const MemoryReport::Recompute &figures = *report.recompute;
    os << llvm::formatv("saved activations {0} (none: {1}); recomputation "
                        "{2}, {3} of the step's {4}\n",
                        bytesText(figures.savedBytes),
                        bytesText(figures.baselineSavedBytes),
                        flopsText(figures.recomputeFlops),
                        percent(figures.recomputeFlops, figures.stepFlops),
                        flopsText(figures.stepFlops));
  }
  size_t shown = std::min<size_t>(report.atPeak.size(), 12);
  os << llvm::formatv("largest tensors live then ({0} of {1}):\n", shown,
                      report.atPeak.size());
  for (size_t i = 0; i < shown; ++i) {
    const MemoryReport::Tensor &tensor = report.atPeak[i];
    os << llvm::formatv("  {0,12}  {1,-13}  {2}\n", bytesText(tensor.bytes),
                        arenaRoleName(tensor.role), tensor.nodes);
  }
}

void mlir::ztc::printWeights(const MemoryReport &report,
                             llvm::raw_ostream &os) {
  if (report.weights.empty()) {
    os << "weights: not recorded (an artifact of an older ztc: compile it "
          "again)\n";
    return;
  }
  // Counts and elements by role, in a fixed order.
  const char *order[] = {"trained", "frozen", "buffer", "updated buffer"};
  os << "weights:";
  bool first = true;
  for (const char *role : order) {
    uint64_t count = 0, elements = 0;
    for (const MemoryReport::Weight &weight : report.weights)
      if (weight.role == role) {
        ++count;
        // An NF4 weight's model elements, once (its parts add none).
        elements += !weight.nf4Shape.empty()
                        ? uint64_t(weight.nf4Shape[0] * weight.nf4Shape[1])
                    : weight.nf4Of.empty() ? weight.elements()
                                           : 0;
      }
    if (!count)
      continue;
    os << (first ? " " : ", ")
       << llvm::formatv("{0} {1}{2} ({3} elements)", count, role,
                        StringRef(role).ends_with("buffer") && count != 1 ? "s"
                                                                          : "",
                        elements);
    first = false;
  }
  os << "\n";
  // A LoRA step (ztc-lora's params): the adapters, the frozen base by
  // element type, and the optimizer state per trained element.
  auto bytesOf = [](const MemoryReport::Weight &weight) {
    uint64_t width = weight.dtype == "f64" || weight.dtype == "i64"    ? 8
                     : weight.dtype == "bf16" || weight.dtype == "f16" ? 2
                     : weight.dtype == "i8"                            ? 1
                                                                       : 4;
    return weight.elements() * width;
  };
  uint64_t adapters = 0, adapterElements = 0, adapterBytes = 0,
           trainedElements = 0;
  // By element type: elements and bytes; NF4 weights (QLoRA) under "nf4",
  // their model's elements and every byte of their parts.
  std::map<std::string, std::pair<uint64_t, uint64_t>> frozenByType;
  for (const MemoryReport::Weight &weight : report.weights) {
    StringRef name = weight.name;
    if (weight.role == "trained")
      trainedElements += weight.elements();
    if (name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight")) {
      ++adapters;
      adapterElements += weight.elements();
      adapterBytes += bytesOf(weight);
    } else if (weight.role == "frozen") {
      bool nf4 = !weight.nf4Shape.empty() || !weight.nf4Of.empty();
      auto &figures = frozenByType[nf4 ? "nf4" : weight.dtype];
      if (!weight.nf4Shape.empty())
        figures.first += uint64_t(weight.nf4Shape[0] * weight.nf4Shape[1]);
      else if (!nf4)
        figures.first += weight.elements();
      figures.second += bytesOf(weight);
    }
  }
  if (adapters) {
    os << llvm::formatv("LoRA: {0} adapter tensors ({1} elements, {2} bytes)",
                        adapters, adapterElements, adapterBytes);
    for (const auto &[dtype, figures] : frozenByType)
      os << llvm::formatv("; frozen base {0}: {1} elements, {2} bytes ({3:F3} "
                          "B each)",
                          dtype, figures.first, figures.second,
                          double(figures.second) /
                              double(std::max<uint64_t>(figures.first, 1)));
    if (trainedElements)
      os << llvm::formatv("; optimizer state {0:F1} bytes per trained element",
                          double(report.states) / double(trainedElements));
    os << "\n";
  }
  size_t width = 0;
  for (const MemoryReport::Weight &weight : report.weights)
    width = std::max(width, weight.name.size());
  for (const MemoryReport::Weight &weight : report.weights) {
    std::string shape;
    for (int64_t dim : weight.shape)
      shape += (shape.empty() ? "" : "x") + std::to_string(dim);
    os << llvm::formatv("  {0,-14} {1}{2} {3} {4}\n", weight.role, weight.name,
                        std::string(width - weight.name.size(), ' '),
                        weight.dtype, shape.empty() ? "scalar" : shape);
  }
}

void mlir::ztc::printCommunication(const MemoryReport &report,
                                   llvm::raw_ostream &os) {
  if (report.worldSize <= 1) {
    os << "communication: none (one rank)\n";
    return;
  }
  os << llvm::formatv("communication per rank, per call of each entry (ZeRO "
                      "stage {0} on {1} ranks; a ring: each rank receives as "
                      "many elements as it sends):\n",
                      report.zeroStage, report.worldSize);
  // Entries in the order their first collective appears, each with its
  // total, then its lines.
  std::vector<std::string> entries;
  for (const MemoryReport::Collectives &line : report.communication)
    if (!llvm::is_contained(entries, line.entry))
      entries.push_back(line.entry);
  for (const std::string &entry : entries) {
    uint64_t total = 0, calls = 0, streamed = 0;
    for (const MemoryReport::Collectives &line : report.communication)
      if (line.entry == entry) {
        total += line.sent;
        calls += line.calls;
        streamed += line.streamed;
      }
    os << llvm::formatv("  {0}: sends {1} elements per rank; ", entry, total);
    if (streamed == calls)
      os << "collectives on a second stream, overlapping compute\n";
    else if (streamed == 0)
      os << "collectives in program order (none has compute to overlap, "
            "or --overlap-comm=false)\n";
    else
      os << llvm::formatv("{0} of {1} collectives on a second stream, "
                          "overlapping compute\n",
                          streamed, calls);
    for (const MemoryReport::Collectives &line : report.communication)
      if (line.entry == entry)
        os << llvm::formatv("    {0,-15} {1,-5} {2,4} calls {3,12} elements  "
                            "sends {4,12}\n",
                            line.op, line.dtype, line.calls, line.elements,
                            line.sent);
  }
  if (report.communication.empty())
    os << "  no collectives\n";
}

void mlir::ztc::printMemoryComparison(llvm::ArrayRef<MemoryReport> reports,
                                      llvm::raw_ostream &os) {
  // Rows are named by what differs between them: the policy (--recompute
  // all) or the precision (--precision all).
  bool byPrecision = llvm::any_of(reports, [&](const MemoryReport &report) {
    return report.precision != reports.front().precision;
  });
  os << llvm::formatv("{0,-10} {1,14} {2,14} {3,16} {4,12} {5,12}\n",
                      byPrecision ? "precision" : "recompute", "total", "arena",
                      "saved activ.", "extra FLOPs", "bytes/param");
  for (const MemoryReport &report : reports) {
    std::string saved = "-", flops = "-";
    if (report.recompute) {
      saved = bytesText(report.recompute->savedBytes);
      flops = percent(report.recompute->recomputeFlops,
                      report.recompute->stepFlops);
    }
    os << llvm::formatv("{0,-10} {1,14} {2,14} {3,16} {4,12} {5,12}\n",
                        byPrecision ? report.precision : report.policy,
                        bytesText(report.total()), bytesText(report.arena),
                        saved, flops, perParameter(report));
  }
}

void mlir::ztc::writeMemorySvg(const MemoryReport &report,
                               llvm::raw_ostream &os) {
  constexpr double kWidth = 900, kHeight = 360, kLeft = 80, kRight = 180,
                   kTop = 40, kBottom = 50;
  const char *colors[kArenaRoles] = {"#4e79a7", "#f28e2b", "#59a14f",
                                     "#bab0ac"};
  double plotW = kWidth - kLeft - kRight, plotH = kHeight - kTop - kBottom;
  double top = std::max<double>(1, double(report.arena));
  size_t n = report.timeline.size();
  auto x = [&](double at) {
    return kLeft + (n > 1 ? at / double(n - 1) : 0.0) * plotW;
  };
  auto y = [&](double bytes) { return kTop + plotH - bytes / top * plotH; };
  os << llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" "
                      "width=\"{0}\" height=\"{1}\" font-family=\"sans-serif\" "
                      "font-size=\"12\">\n",
                      int(kWidth), int(kHeight));
  os << llvm::formatv(
      "<title>ztc memory timeline: {0}, recompute {1}</title>\n", report.entry,
      report.policy);
  os << llvm::formatv("<text x=\"{0}\" y=\"20\" font-size=\"14\">Arena bytes "
                      "live over {1}'s ops (recompute {2})</text>\n",
                      kLeft, report.entry, report.policy);
  // One stacked band per role: the polygon between the sum of the roles
  // below it and that sum plus its own bytes.
  std::vector<double> below(n, 0.0);
  for (size_t role = 0; role < kArenaRoles; ++role) {
    std::string upper, lower;
    for (size_t i = 0; i < n; ++i) {
      double base = below[i], high = base + double(report.timeline[i][role]);
      upper += llvm::formatv("{0:F1},{1:F1} ", x(i), y(high)).str();
      lower = llvm::formatv("{0:F1},{1:F1} ", x(i), y(base)).str() + lower;
      below[i] = high;
    }
    os << llvm::formatv("<polygon class=\"{0}\" fill=\"{1}\" "
                        "points=\"{2}{3}\"/>\n",
                        arenaRoleName(ArenaRole(role)), colors[role], upper,
                        lower);
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"12\" "
                        "height=\"12\" fill=\"{2}\"/><text x=\"{3}\" "
                        "y=\"{4}\">{5}</text>\n",
                        kWidth - kRight + 20, kTop + 20 * role, colors[role],
                        kWidth - kRight + 38, kTop + 20 * role + 11,
                        arenaRoleName(ArenaRole(role)));
  }
  // Axes, the planned arena and the fullest point.
  os << llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" "
                      "stroke=\"black\"/>\n",
                      kLeft, kTop, kTop + plotH);
  os << llvm::formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" "
                      "stroke=\"black\"/>\n",
                      kLeft, kTop + plotH, kLeft + plotW);
  os << llvm::formatv("<line class=\"arena\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" "
                      "y2=\"{1}\" stroke=\"black\" stroke-dasharray=\"4 3\"/>"
                      "<text x=\"{3}\" y=\"{4}\">planned arena {5}</text>\n",
                      kLeft, y(top), kLeft + plotW, kLeft + plotW + 4,
                      y(top) + 4, bytesText(report.arena));
  os << llvm::formatv("<line class=\"peak\" x1=\"{0:F1}\" y1=\"{1}\" "
                      "x2=\"{0:F1}\" y2=\"{2}\" stroke=\"red\"/>"
                      "<text x=\"{3:F1}\" y=\"{4}\" fill=\"red\">fullest: {5} "
                      "at op {6}</text>\n",
                      x(report.peakAt), kTop, kTop + plotH,
                      x(report.peakAt) + 4, kTop + 14,
                      bytesText(report.peakLive()), report.peakAt);
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\">0</text><text x=\"{2}\" "
                      "y=\"{1}\" text-anchor=\"end\">op {3}</text>\n",
                      kLeft, kTop + plotH + 16, kLeft + plotW, n ? n - 1 : 0);
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">{2}"
                      "</text><text x=\"{0}\" y=\"{3}\" text-anchor=\"end\">0"
                      "</text>\n",
                      kLeft - 6, kTop + 4, bytesText(report.arena),
                      kTop + plotH);
  os << "</svg>\n";
}
