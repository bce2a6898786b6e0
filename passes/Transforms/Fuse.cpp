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

/// Replaces `consumer` and `producer` by one kernel computing both.
void fuse(kernel::ElementwiseOp producer, kernel::ElementwiseOp consumer,
          Value buffer) {
  OpBuilder b(consumer);
  SmallVector<Value> inputs;
  SmallVector<int64_t> consumerSlot;
  for (Value input : consumer.getInputs()) {
    consumerSlot.push_back(input == buffer ? -1 : inputs.size());
    if (input != buffer)
      inputs.push_back(input);
  }
  size_t producerBase = inputs.size();
  llvm::append_range(inputs, producer.getInputs());

  Location loc = b.getFusedLoc({producer.getLoc(), consumer.getLoc()});
  auto fused =
      kernel::ElementwiseOp::create(b, loc, inputs, consumer.getOutput());
  Block *body = b.createBlock(&fused.getBody());
  for (Value input : inputs)
    body->addArgument(cast<MemRefType>(input.getType()).getElementType(), loc);
  b.setInsertionPointToStart(body);

  IRMapping mapping;
  Block &producerBody = producer.getBody().front();
  for (auto [i, arg] : llvm::enumerate(producerBody.getArguments()))
    mapping.map(arg, body->getArgument(producerBase + i));
  for (Operation &op : producerBody.without_terminator())
    b.clone(op, mapping);
  Value produced = mapping.lookup(producer.getYielded());

  Block &consumerBody = consumer.getBody().front();
  for (auto [i, arg] : llvm::enumerate(consumerBody.getArguments()))
    mapping.map(arg, consumerSlot[i] < 0 ? produced
                                         : body->getArgument(consumerSlot[i]));
  for (Operation &op : consumerBody)
    b.clone(op, mapping);

  Operation *alloc = buffer.getDefiningOp();
  consumer.erase();
  producer.erase();
  alloc->erase();
}

struct FusePass : public ztc::impl::FusePassBase<FusePass> {
  void runOnOperation() override {
    bool changed = true;
    while (changed) {
      changed = false;
      getOperation().walk([&](kernel::ElementwiseOp consumer) {
        for (Value input : consumer.getInputs()) {
          if (auto producer = fusibleProducer(input, consumer)) {
            fuse(producer, consumer, input);
            changed = true;
            return WalkResult::interrupt();
          }
        }
        return WalkResult::advance();
      });
    }
  }
};

} // namespace
