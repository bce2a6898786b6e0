//===- Fuse.cpp - the ztc-fuse pass -------------------------------*- C++
//-*-===//
//
// Merges producer-consumer chains of kernel.elementwise into single loops,
// removing the intermediate buffers. See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/IRMapping.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_FUSEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

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
  // the same elements.
  if (!producer ||
      llvm::is_contained(kernel::writtenBuffers(consumer), buffer) ||
      producer.getOutput().getType() != consumer.getOutput().getType() ||
      producer->getBlock() != consumer->getBlock() ||
      !producer->isBeforeInBlock(consumer))
    return nullptr;
  return producer;
}

/// The locations each fused kernel computes, gathered as kernels fuse and
/// merged into one FusedLoc at the end: merging at every fusion would
/// re-flatten the whole chain's names each time.
using FusedLocations = llvm::DenseMap<Operation *, SmallVector<Location>>;

/// Replaces `consumer` and `producer` by one kernel computing both and
/// returns it. The producer's body moves into the new kernel (no clone) and
/// the consumer's ops follow it, so fusing along a chain costs each step
/// the consumer's size, not the chain's: lowering stays linear in depth.
kernel::ElementwiseOp fuse(kernel::ElementwiseOp producer,
                           kernel::ElementwiseOp consumer, Value buffer,
                           FusedLocations &locations) {
  OpBuilder b(consumer);
  // The inputs: the consumer's other inputs that the producer does not
  // already read (each once), then the producer's. Reading a value the
  // producer reads reuses its argument, so a chain that reads one value at
  // every step keeps one input, not one per step.
  llvm::SmallDenseMap<Value, int64_t> producerSlot;
  for (auto [i, input] : llvm::enumerate(producer.getInputs()))
    producerSlot.try_emplace(input, i);
  SmallVector<Value> inputs;
  llvm::SmallDenseMap<Value, int64_t> frontSlot;
  // Per consumer argument: -1 for the fused value, else (slot, from the
  // producer's inputs?).
  SmallVector<std::pair<int64_t, bool>> consumerSlot;
  for (Value input : consumer.getInputs()) {
    if (input == buffer) {
      consumerSlot.push_back({-1, false});
    } else if (auto it = producerSlot.find(input); it != producerSlot.end()) {
      consumerSlot.push_back({it->second, true});
    } else {
      auto [slot, inserted] = frontSlot.try_emplace(input, inputs.size());
      if (inserted)
        inputs.push_back(input);
      consumerSlot.push_back({slot->second, false});
    }
  }
  size_t producerBase = inputs.size();
  llvm::append_range(inputs, producer.getInputs());

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
  auto fused =
      kernel::ElementwiseOp::create(b, loc, inputs, consumer.getOutput());
  // The producer's block, with arguments for the consumer's other inputs
  // in front: the arguments follow `inputs`.
  fused.getBody().takeBody(producer.getBody());
  Block *body = &fused.getBody().front();
  for (size_t i = 0; i < producerBase; ++i)
    body->insertArgument(
        i, cast<MemRefType>(inputs[i].getType()).getElementType(), loc);
  // The producer's yield is the fused value; the consumer's ops follow.
  Operation *yield = body->getTerminator();
  Value produced = cast<kernel::YieldOp>(yield).getValue();
  yield->erase();
  Block &consumerBody = consumer.getBody().front();
  for (auto [i, arg] : llvm::enumerate(consumerBody.getArguments())) {
    auto [slot, fromProducer] = consumerSlot[i];
    arg.replaceAllUsesWith(
        slot < 0
            ? produced
            : body->getArgument(fromProducer ? producerBase + slot : slot));
  }
  body->getOperations().splice(body->end(), consumerBody.getOperations());

  Operation *alloc = buffer.getDefiningOp();
  consumer.erase();
  producer.erase();
  alloc->erase();
  locations[fused] = std::move(fusedLocations);
  return fused;
}

struct FusePass : public ztc::impl::FusePassBase<FusePass> {
  void runOnOperation() override {
    // One pass in program order: a producer comes before its consumer, so
    // when a consumer is visited its producers are already fused as far as
    // they go; the consumer then absorbs fusible producers until none is
    // left (each fusion may expose the producer's own producers).
    SmallVector<kernel::ElementwiseOp> kernels;
    getOperation().walk(
        [&](kernel::ElementwiseOp op) { kernels.push_back(op); });
    FusedLocations locations;
    for (kernel::ElementwiseOp consumer : kernels) {
      bool fusedOne = true;
      while (fusedOne) {
        fusedOne = false;
        for (Value input : consumer.getInputs())
          if (auto producer = fusibleProducer(input, consumer)) {
            consumer = fuse(producer, consumer, input, locations);
            fusedOne = true;
            break;
          }
      }
    }
    // Every fused kernel names all the ONNX nodes it computes.
    for (auto &[op, merged] : locations)
      op->setLoc(FusedLoc::get(&getContext(), merged));
  }
};

} // namespace
