//===- Fuse.cpp - the ztc-fuse pass ---------------------------------------===//
//
// Merges producer-consumer chains of kernel.elementwise into single loops,
// removing the intermediate buffers, a sum or mean of an elementwise
// kernel's values into one kernel.reduce, and reductions over the same
// loops into one. See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>

namespace mlir::ztc {
#define GEN_PASS_DEF_FUSEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// Whether `producer` (a kernel) can run where `consumer` is (fused into
/// it): no op between them reads what it writes or writes what it reads or
/// writes.
bool canMoveTo(Operation *producer, Operation *consumer) {
  DenseSet<Value> touched, written;
  for (Value operand : producer->getOperands())
    touched.insert(kernel::rootBuffer(operand));
  for (Value output : kernel::writtenBuffers(producer))
    written.insert(kernel::rootBuffer(output));
  for (Operation *op = producer->getNextNode(); op && op != consumer;
       op = op->getNextNode()) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects) {
      if (!isMemoryEffectFree(op))
        return false;
      continue;
    }
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &effect : instances) {
      bool writes = isa<MemoryEffects::Write>(effect.getEffect());
      bool reads = isa<MemoryEffects::Read>(effect.getEffect());
      if (!effect.getValue()) {
        // record_loss and check_finite write the step's training state,
        // which no kernel reads; signals and waits order streams.
        if ((writes || reads) &&
            !isa<kernel::RecordLossOp, kernel::CheckFiniteOp>(op))
          return false;
        continue;
      }
      Value root = kernel::rootBuffer(effect.getValue());
      if ((writes && touched.contains(root)) ||
          (reads && written.contains(root)))
        return false;
    }
  }
  return true;
}

/// Whether two elementwise kernels iterate over the same elements: their
/// outputs have one shape, whatever their element types (a comparison
/// feeding a selection, a cast feeding arithmetic).
bool sameSpace(kernel::ElementwiseOp a, kernel::ElementwiseOp b) {
  return cast<MemRefType>(a.getOutput().getType()).getShape() ==
         cast<MemRefType>(b.getOutput().getType()).getShape();
}

/// Whether `consumer` reads each of `producer`'s outputs it reads at all as
/// that very buffer, whole (no view of it, no broadcast): the fused loop
/// hands it their new elements, where a read through a view would see the
/// old ones.
bool readsOutputsWhole(kernel::ElementwiseOp producer,
                       kernel::ElementwiseOp consumer) {
  ArrayRef<int64_t> space =
      cast<MemRefType>(consumer.getOutput().getType()).getShape();
  DenseSet<Value> roots;
  for (Value output : producer.getOutputs())
    roots.insert(kernel::rootBuffer(output));
  return llvm::all_of(consumer.getInputs(), [&](Value input) {
    return !roots.contains(kernel::rootBuffer(input)) ||
           (llvm::is_contained(producer.getOutputs(), input) &&
            cast<MemRefType>(input.getType()).getShape() == space);
  });
}

/// The elementwise kernel that writes `buffer` and whose output nothing but
/// `consumer` reads, or null.
kernel::ElementwiseOp fusibleProducer(Value buffer,
                                      kernel::ElementwiseOp consumer) {
  auto alloc = buffer.getDefiningOp<kernel::AllocOp>();
  if (!alloc)
    return nullptr;
  kernel::ElementwiseOp producer;
  for (Operation *user : alloc->getUsers()) {
    auto elementwise = dyn_cast<kernel::ElementwiseOp>(user);
    bool writes = llvm::is_contained(kernel::writtenBuffers(user), buffer);
    if (writes && elementwise && !producer && elementwise != consumer)
      producer = elementwise;
    else if (user != consumer.getOperation())
      return nullptr;
  }
  // The consumer must not also write the buffer, and both loops must cover
  // the same elements. The producer's values are computed where the
  // consumer is once fused: nothing between may write what it reads (an
  // update in place of an argument it read). A producer of several outputs
  // (see fusibleSibling) writes its others there too: nothing between may
  // touch them either.
  if (!producer ||
      llvm::is_contained(kernel::writtenBuffers(consumer), buffer) ||
      !sameSpace(producer, consumer) ||
      producer->getBlock() != consumer->getBlock() ||
      !producer->isBeforeInBlock(consumer) || !canMoveTo(producer, consumer) ||
      (producer.getOutputs().size() > 1 &&
       !readsOutputsWhole(producer, consumer)))
    return nullptr;
  return producer;
}

/// Whether every buffer of `inputs` (what a producer reads) is live at
/// `consumer` anyway (read there or later, or not planned: an argument, a
/// constant), so that moving the producer there keeps no buffer longer than
/// the plan did.
bool inputsLiveAt(ValueRange inputs, Operation *consumer) {
  return llvm::all_of(inputs, [&](Value input) {
    auto alloc = kernel::rootBuffer(input).getDefiningOp<kernel::AllocOp>();
    if (!alloc)
      return true;
    std::function<bool(Value)> readLater = [&](Value buffer) {
      return llvm::any_of(buffer.getUsers(), [&](Operation *user) {
        if (auto view = dyn_cast<kernel::ViewOp>(user))
          return readLater(view.getResult());
        return user == consumer || (user->getBlock() == consumer->getBlock() &&
                                    consumer->isBeforeInBlock(user));
      });
    };
    return readLater(alloc.getResult());
  });
}

/// Multi-output fusion of a shared value: the elementwise kernel that
/// writes `buffer`, an alloc that `consumer` reads whole and that later
/// ops read too (an activation the backward keeps, a gradient two updates
/// read), when it can run inside the consumer, still writing `buffer`:
/// every reader besides the consumer comes after it, the consumer does not
/// write `buffer`, and the two loops cover the same elements. The values
/// are computed as before and stored as before, in one loop instead of
/// two: GELU's four steps, each kept for the backward, become one kernel.
/// The producer's inputs must be live at the consumer already: fusing
/// never raises the planned peak.
kernel::ElementwiseOp fusibleSharedProducer(Value buffer,
                                            kernel::ElementwiseOp consumer) {
  auto alloc = buffer.getDefiningOp<kernel::AllocOp>();
  if (!alloc || llvm::is_contained(kernel::writtenBuffers(consumer), buffer))
    return nullptr;
  kernel::ElementwiseOp producer;
  for (Operation *user : alloc->getUsers()) {
    if (user == consumer.getOperation())
      continue;
    auto elementwise = dyn_cast<kernel::ElementwiseOp>(user);
    if (elementwise && !producer &&
        llvm::is_contained(elementwise.getOutputs(), buffer)) {
      producer = elementwise;
      continue;
    }
    // Any other use (a reader, a view) comes after the consumer, where the
    // values will be stored.
    if (user->getBlock() != consumer->getBlock() ||
        !consumer->isBeforeInBlock(user))
      return nullptr;
  }
  if (!producer || !sameSpace(producer, consumer) ||
      producer->getBlock() != consumer->getBlock() ||
      !producer->isBeforeInBlock(consumer) ||
      !readsOutputsWhole(producer, consumer) ||
      !canMoveTo(producer, consumer) ||
      !inputsLiveAt(producer.getInputs(), consumer))
    return nullptr;
  return producer;
}

/// Multi-output fusion: the elementwise kernel that last wrote `buffer`, a
/// step argument that `consumer` reads whole (an optimizer state the
/// previous update wrote in place), when it can run inside the consumer,
/// still writing `buffer`: both loops cover the same elements, nothing
/// between them reads what it writes or writes what it reads or writes, and
/// the consumer writes none of its outputs. Adam's moment updates then run
/// in the parameter's update: one pass over the parameter, its gradient and
/// its states instead of three.
kernel::ElementwiseOp fusibleSibling(Value buffer,
                                     kernel::ElementwiseOp consumer) {
  Type space = consumer.getOutput().getType();
  if (!isa<BlockArgument>(buffer) || buffer.getType() != space ||
      llvm::is_contained(consumer.getOutputs(), buffer))
    return nullptr;
  kernel::ElementwiseOp producer;
  for (Operation *op = consumer->getPrevNode(); op && !producer;
       op = op->getPrevNode()) {
    auto elementwise = dyn_cast<kernel::ElementwiseOp>(op);
    if (elementwise && llvm::is_contained(elementwise.getOutputs(), buffer))
      producer = elementwise;
  }
  if (!producer || producer.getOutput().getType() != space)
    return nullptr;
  for (Value output : consumer.getOutputs())
    if (llvm::is_contained(producer.getOutputs(), output))
      return nullptr;
  if (!readsOutputsWhole(producer, consumer) || !canMoveTo(producer, consumer))
    return nullptr;
  return producer;
}

/// The locations each fused kernel computes, gathered as kernels fuse and
/// merged into one FusedLoc at the end: merging at every fusion would
/// re-flatten the whole chain's names each time.
using FusedLocations = llvm::DenseMap<Operation *, SmallVector<Location>>;

/// Replaces `consumer` and `producer` by one kernel computing both and
/// returns it. The consumer reads what the producer computes for its
/// outputs as values. With `drop`, `buffer` (an alloc nothing else reads)
/// is written no more and goes; the producer's other outputs stay outputs.
/// The producer's body moves into the new kernel (no clone) and the
/// consumer's ops follow it, so fusing along a chain costs each step the
/// consumer's size, not the chain's: lowering stays linear in depth.
kernel::ElementwiseOp fuse(kernel::ElementwiseOp producer,
                           kernel::ElementwiseOp consumer, Value buffer,
                           bool drop, FusedLocations &locations) {
  OpBuilder b(consumer);
  // The inputs: the consumer's other inputs that the producer does not
  // already read (each once), then the producer's. Reading a value the
  // producer reads reuses its argument, so a chain that reads one value at
  // every step keeps one input, not one per step.
  llvm::SmallDenseMap<Value, int64_t> producerSlot, producedSlot;
  for (auto [i, input] : llvm::enumerate(producer.getInputs()))
    producerSlot.try_emplace(input, i);
  for (auto [i, output] : llvm::enumerate(producer.getOutputs()))
    producedSlot.try_emplace(output, i);
  SmallVector<Value> inputs;
  llvm::SmallDenseMap<Value, int64_t> frontSlot;
  // Per consumer argument: what it becomes.
  enum class From { Produced, Producer, Front };
  SmallVector<std::pair<int64_t, From>> consumerSlot;
  for (Value input : consumer.getInputs()) {
    if (auto it = producedSlot.find(input); it != producedSlot.end()) {
      consumerSlot.push_back({it->second, From::Produced});
    } else if (auto it = producerSlot.find(input); it != producerSlot.end()) {
      consumerSlot.push_back({it->second, From::Producer});
    } else {
      auto [slot, inserted] = frontSlot.try_emplace(input, inputs.size());
      if (inserted)
        inputs.push_back(input);
      consumerSlot.push_back({slot->second, From::Front});
    }
  }
  size_t producerBase = inputs.size();
  llvm::append_range(inputs, producer.getInputs());
  // The outputs: the producer's kept ones, then the consumer's.
  SmallVector<Value> outputs;
  SmallVector<unsigned> kept;
  for (auto [i, output] : llvm::enumerate(producer.getOutputs()))
    if (!drop || output != buffer) {
      outputs.push_back(output);
      kept.push_back(i);
    }
  llvm::append_range(outputs, consumer.getOutputs());

  // The producer's locations, then the consumer's (moved, not copied).
  SmallVector<Location> fusedLocations;
  for (Operation *op : {producer.getOperation(), consumer.getOperation()}) {
    auto it = locations.find(op);
    if (it == locations.end()) {
      fusedLocations.push_back(op->getLoc());
      continue;
    }
    if (fusedLocations.empty())
      fusedLocations = std::move(it->second);
    else
      llvm::append_range(fusedLocations, it->second);
    locations.erase(it);
  }
  Location loc = consumer.getLoc();
  auto fused = kernel::ElementwiseOp::create(b, loc, inputs, outputs);
  // The producer's block, with arguments for the consumer's other inputs
  // in front: the arguments follow `inputs`.
  fused.getBody().takeBody(producer.getBody());
  Block *body = &fused.getBody().front();
  for (size_t i = 0; i < producerBase; ++i)
    body->insertArgument(
        i, cast<MemRefType>(inputs[i].getType()).getElementType(), loc);
  // The producer's yields are the values it computes; the consumer's ops
  // follow, and one yield ends the body: the kept values, the consumer's.
  Operation *yield = body->getTerminator();
  SmallVector<Value> produced(cast<kernel::YieldOp>(yield).getValues());
  yield->erase();
  Block &consumerBody = consumer.getBody().front();
  for (auto [i, arg] : llvm::enumerate(consumerBody.getArguments())) {
    auto [slot, from] = consumerSlot[i];
    arg.replaceAllUsesWith(from == From::Produced ? produced[slot]
                           : from == From::Producer
                               ? body->getArgument(producerBase + slot)
                               : body->getArgument(slot));
  }
  body->getOperations().splice(body->end(), consumerBody.getOperations());
  auto consumerYield = cast<kernel::YieldOp>(body->getTerminator());
  SmallVector<Value> yielded;
  for (unsigned i : kept)
    yielded.push_back(produced[i]);
  llvm::append_range(yielded, consumerYield.getValues());
  b.setInsertionPoint(consumerYield);
  kernel::YieldOp::create(b, consumerYield.getLoc(), yielded);
  consumerYield.erase();

  consumer.erase();
  producer.erase();
  if (drop)
    buffer.getDefiningOp()->erase();
  locations[fused] = std::move(fusedLocations);
  return fused;
}

/// A reduce call's axes, non-negative and increasing; empty when they
/// repeat.
SmallVector<int64_t> reducedAxes(kernel::CallOp call) {
  int64_t rank = cast<MemRefType>(call.getInputs().front().getType()).getRank();
  SmallVector<int64_t> axes;
  for (int64_t axis : kernel::configInts(call, "axes"))
    axes.push_back(axis < 0 ? axis + rank : axis);
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end() ||
      (!axes.empty() && (axes.front() < 0 || axes.back() >= rank)))
    return {};
  return axes;
}

/// What a float reduce_sum or reduce_mean call computes, as a
/// kernel.reduce would: its kind and its (non-negative, increasing) axes,
/// when the emitter has loops for them (see kernel::reductionGroups).
struct CallReduction {
  kernel::ReduceKind kind;
  SmallVector<int64_t> axes;
};

std::optional<CallReduction> callReduction(kernel::CallOp call) {
  bool sum = kernel::isCallOf(call, kernel::LibraryKernelId::reduce_sum);
  if (!sum && !kernel::isCallOf(call, kernel::LibraryKernelId::reduce_mean))
    return std::nullopt;
  auto type = cast<MemRefType>(call.getInputs().front().getType());
  SmallVector<int64_t> axes = reducedAxes(call);
  if (!isa<FloatType>(type.getElementType()) || axes.empty() ||
      !kernel::reductionGroups(type.getShape(), axes))
    return std::nullopt;
  return CallReduction{sum ? kernel::ReduceKind::sum : kernel::ReduceKind::mean,
                       std::move(axes)};
}

/// The elementwise kernel whose values `call` (a float reduce_sum or
/// reduce_mean) reduces, when they can be reduced where they are computed:
/// the kernel writes only the call's input, which nothing else reads; it
/// can run where the call is; it reads nothing the call writes; and the
/// emitter has loops for the reduction (see kernel::reductionGroups).
/// Null otherwise.
kernel::ElementwiseOp reducedProducer(kernel::CallOp call) {
  std::optional<CallReduction> reduction = callReduction(call);
  if (!reduction)
    return nullptr;
  Value buffer = call.getInputs().front();
  auto alloc = buffer.getDefiningOp<kernel::AllocOp>();
  if (!alloc)
    return nullptr;
  kernel::ElementwiseOp producer;
  for (Operation *user : alloc->getUsers()) {
    if (user == call.getOperation())
      continue;
    auto elementwise = dyn_cast<kernel::ElementwiseOp>(user);
    if (producer || !elementwise || elementwise.getOutputs().size() != 1 ||
        elementwise.getOutput() != buffer)
      return nullptr;
    producer = elementwise;
  }
  if (!producer || producer->getBlock() != call->getBlock() ||
      !producer->isBeforeInBlock(call) || !canMoveTo(producer, call))
    return nullptr;
  Value written = kernel::rootBuffer(call.getOutputs().front());
  for (Value input : producer.getInputs())
    if (kernel::rootBuffer(input) == written)
      return nullptr;
  ArrayRef<int64_t> space = cast<MemRefType>(buffer.getType()).getShape();
  for (Value input : producer.getInputs())
    if (!kernel::groupStrides(cast<MemRefType>(input.getType()).getShape(),
                              space, reduction->axes))
      return nullptr;
  return producer;
}

/// Replaces `producer` and the reduction `call` of its output by one
/// kernel.reduce: the producer's body, its values summed (or averaged) as
/// the call would, never stored. The producer's output buffer goes.
void fuseReduction(kernel::ElementwiseOp producer, kernel::CallOp call,
                   FusedLocations &locations) {
  OpBuilder b(call);
  Value buffer = producer.getOutput();
  SmallVector<Location> fused;
  if (auto it = locations.find(producer); it != locations.end()) {
    fused = std::move(it->second);
    locations.erase(it);
  } else {
    fused.push_back(producer.getLoc());
  }
  fused.push_back(call.getLoc());
  CallReduction reduction = *callReduction(call);
  auto reduce = kernel::ReduceOp::create(
      b, call.getLoc(), reduction.kind, producer.getInputs(),
      call.getOutputs().front(), reduction.axes,
      cast<MemRefType>(buffer.getType()).getShape());
  reduce.getBody().takeBody(producer.getBody());
  call.erase();
  producer.erase();
  buffer.getDefiningOp()->erase();
  locations[reduce] = std::move(fused);
}

/// Fuses into each elementwise kernel, in program order, the producers
/// that `shared` allows (step 1 and 3's kinds, and with `shared` step 6's
/// as well) until none is left: a producer comes before its consumer, so
/// when a consumer is visited its producers are already fused as far as
/// they go, and each fusion may expose the producer's own producers.
void fuseElementwise(func::FuncOp func, bool shared,
                     FusedLocations &locations) {
  SmallVector<kernel::ElementwiseOp> kernels;
  func.walk([&](kernel::ElementwiseOp op) { kernels.push_back(op); });
  for (kernel::ElementwiseOp consumer : kernels) {
    bool fusedOne = true;
    while (fusedOne) {
      fusedOne = false;
      for (Value input : consumer.getInputs()) {
        kernel::ElementwiseOp producer;
        bool drop = false;
        if ((producer = fusibleProducer(input, consumer)))
          drop = true;
        else if (!(producer = fusibleSibling(input, consumer)) && shared)
          producer = fusibleSharedProducer(input, consumer);
        if (producer) {
          consumer = fuse(producer, consumer, input, drop, locations);
          fusedOne = true;
          break;
        }
      }
    }
  }
}

/// A reduction sibling merging takes: a kernel.reduce, or a float
/// reduce_sum or reduce_mean call the emitter has loops for (a
/// kernel.reduce of its input as it is).
struct Reduction {
  Operation *op = nullptr;
  kernel::ReduceKind kind;
  SmallVector<int64_t> space, axes;
  Type element;
  /// What it reads (a call: its input, whose elements it sums).
  SmallVector<Value> inputs;

  bool sameLoops(const Reduction &other) const {
    return kind == other.kind && space == other.space && axes == other.axes &&
           element == other.element;
  }
};

std::optional<Reduction> asReduction(Operation *op) {
  if (auto reduce = dyn_cast<kernel::ReduceOp>(op)) {
    if (reduce.getScratch() ||
        !kernel::reductionGroups(reduce.getSpace(), reduce.getAxes()))
      return std::nullopt;
    return Reduction{op,
                     reduce.getKind(),
                     llvm::to_vector(reduce.getSpace()),
                     llvm::to_vector(reduce.getAxes()),
                     cast<MemRefType>(reduce.getOutputs().front().getType())
                         .getElementType(),
                     llvm::to_vector(reduce.getInputs())};
  }
  auto call = dyn_cast<kernel::CallOp>(op);
  if (!call || call.getScratch())
    return std::nullopt;
  std::optional<CallReduction> reduction = callReduction(call);
  if (!reduction)
    return std::nullopt;
  auto type = cast<MemRefType>(call.getInputs().front().getType());
  return Reduction{op,
                   reduction->kind,
                   llvm::to_vector(type.getShape()),
                   std::move(reduction->axes),
                   type.getElementType(),
                   {call.getInputs().front()}};
}

/// Whether `later` can take in `earlier`, a reduction over the same loops
/// before it in its block, and gains by it: they read a buffer in common;
/// `earlier` can run where `later` is; `later` neither reads what `earlier`
/// writes nor writes what it reads; and what `earlier` reads is live at
/// `later` anyway.
bool canMerge(const Reduction &earlier, const Reduction &later) {
  DenseSet<Value> earlierWrites;
  for (Value output : kernel::writtenBuffers(earlier.op))
    earlierWrites.insert(kernel::rootBuffer(output));
  DenseSet<Value> earlierReads;
  for (Value input : earlier.inputs)
    earlierReads.insert(kernel::rootBuffer(input));
  if (llvm::none_of(later.inputs, [&](Value input) {
        return earlierReads.contains(kernel::rootBuffer(input));
      }))
    return false;
  for (Value operand : later.op->getOperands())
    if (earlierWrites.contains(kernel::rootBuffer(operand)))
      return false;
  for (Value output : kernel::writtenBuffers(later.op))
    if (earlierReads.contains(kernel::rootBuffer(output)))
      return false;
  return canMoveTo(earlier.op, later.op) &&
         inputsLiveAt(earlier.inputs, later.op);
}

/// Replaces `earlier` and `later` by one kernel.reduce where `later` is,
/// reading both's inputs once and summing both's values into both's
/// outputs; returns it.
kernel::ReduceOp mergeReductions(const Reduction &earlier,
                                 const Reduction &later,
                                 FusedLocations &locations) {
  SmallVector<Value> inputs;
  for (const SmallVector<Value> *part : {&earlier.inputs, &later.inputs})
    for (Value input : *part)
      if (!llvm::is_contained(inputs, input))
        inputs.push_back(input);
  SmallVector<Value> outputs;
  for (Operation *op : {earlier.op, later.op})
    for (Value output : kernel::writtenBuffers(op))
      outputs.push_back(output);
  OpBuilder b(later.op);
  auto merged =
      kernel::ReduceOp::create(b, later.op->getLoc(), later.kind, inputs,
                               outputs, later.axes, later.space);
  Block *body = b.createBlock(&merged.getBody());
  for (Value input : inputs)
    body->addArgument(cast<MemRefType>(input.getType()).getElementType(),
                      input.getLoc());
  SmallVector<Value> yielded;
  for (const Reduction *part : {&earlier, &later}) {
    IRMapping mapping;
    auto argOf = [&](Value input) {
      return body->getArgument(llvm::find(inputs, input) - inputs.begin());
    };
    auto reduce = dyn_cast<kernel::ReduceOp>(part->op);
    if (!reduce) {
      // A call sums its input as it is.
      yielded.push_back(argOf(part->inputs.front()));
      continue;
    }
    Block &old = reduce.getBody().front();
    for (auto [input, arg] : llvm::zip(part->inputs, old.getArguments()))
      mapping.map(arg, argOf(input));
    for (Operation &op : old.without_terminator())
      b.clone(op, mapping);
    for (Value value : reduce.getYielded())
      yielded.push_back(mapping.lookupOrDefault(value));
  }
  kernel::YieldOp::create(b, later.op->getLoc(), yielded);
  SmallVector<Location> fused;
  for (Operation *op : {earlier.op, later.op}) {
    if (auto it = locations.find(op); it != locations.end()) {
      fused.append(it->second);
      locations.erase(it);
    } else {
      fused.push_back(op->getLoc());
    }
  }
  locations[merged] = std::move(fused);
  earlier.op->erase();
  later.op->erase();
  return merged;
}

/// Sibling reductions over the same loops (space, axes, kind and element
/// type) that read a buffer in common, each with the nearest earlier one
/// it can take in, within a few ops: one pass reads what they share.
void mergeSiblingReductions(func::FuncOp func, FusedLocations &locations) {
  constexpr int kWindow = 24;
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (isa<kernel::ReduceOp, kernel::CallOp>(op))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    std::optional<Reduction> later = asReduction(op);
    while (later) {
      std::optional<Reduction> earlier;
      int seen = 0;
      for (Operation *prev = later->op->getPrevNode(); prev && seen < kWindow;
           prev = prev->getPrevNode(), ++seen) {
        std::optional<Reduction> candidate = asReduction(prev);
        if (candidate && candidate->sameLoops(*later) &&
            canMerge(*candidate, *later)) {
          earlier = std::move(candidate);
          break;
        }
      }
      if (!earlier)
        break;
      later = asReduction(mergeReductions(*earlier, *later, locations));
    }
  }
}

struct FusePass : public ztc::impl::FusePassBase<FusePass> {
  void runOnOperation() override {
    FusedLocations locations;
    fuseElementwise(getOperation(), /*shared=*/false, locations);
    // Then reductions take in the kernel computing what they reduce (which
    // has absorbed its own producers by now).
    SmallVector<kernel::CallOp> calls;
    getOperation().walk([&](kernel::CallOp call) { calls.push_back(call); });
    for (kernel::CallOp call : calls)
      if (auto producer = reducedProducer(call))
        fuseReduction(producer, call, locations);
    // Last, values other kernels read too join their readers' loops: after
    // the reductions, which take single-output kernels only.
    fuseElementwise(getOperation(), /*shared=*/true, locations);
    // Then reductions over the same loops sum side by side.
    mergeSiblingReductions(getOperation(), locations);
    // Every fused kernel names all the ONNX nodes it computes.
    for (auto &[op, merged] : locations)
      op->setLoc(FusedLoc::get(&getContext(), merged));
  }
};

} // namespace
