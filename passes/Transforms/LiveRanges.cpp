//===- LiveRanges.cpp - arena buffers' live ranges ----------------*- C++
//-*-===//
//
// When each arena buffer of a kernel-level step is in use, streams and
// waits included: what ztc-plan-memory places buffers by, and what memory
// reports draw.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/LiveRanges.h"

#include "dialects/NN/IR/ShapeLimits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// The op of `block` that contains `op`.
Operation *topLevel(Operation *op, Block &block) {
  while (op->getBlock() != &block)
    op = op->getParentOp();
  return op;
}

/// The cross-stream order of a step: which streams run which ops, and which
/// waits order one stream after another's work (kernel.signal/kernel.wait).
class StreamOrder {
public:
  StreamOrder(Block &block, const DenseMap<Operation *, int64_t> &number,
              int64_t end)
      : streamAt(end, -1), end(end) {
    for (Operation &op : block) {
      if (!isa<kernel::ElementwiseOp, kernel::CallOp, kernel::RecordLossOp,
               kernel::CheckFiniteOp, kernel::SignalOp, kernel::WaitOp>(op))
        continue; // placement and views run on no stream
      int64_t at = number.lookup(&op), stream = kernel::streamOf(&op);
      streamAt[at] = stream;
      if (lastWork.size() <= size_t(stream))
        lastWork.resize(stream + 1, -1);
      if (!isa<kernel::SignalOp>(op))
        lastWork[stream] = at;
      if (auto wait = dyn_cast<kernel::WaitOp>(op)) {
        Operation *signal = wait.getEvent().getDefiningOp();
        waits.push_back(
            {at, stream, number.lookup(signal), kernel::streamOf(signal)});
      }
    }
  }

  /// The first position by which every stream that runs work after the op
  /// at `at` is ordered after it: the latest of the first covering waits
  /// (a wait on that stream for a signal on the op's stream after the op),
  /// or the end of the step when some stream has none.
  int64_t completion(int64_t at) const {
    int64_t stream = at < end ? streamAt[at] : -1;
    if (stream < 0)
      return at;
    int64_t done = at;
    for (int64_t other = 0; other < int64_t(lastWork.size()); ++other) {
      if (other == stream || lastWork[other] <= at)
        continue;
      const Wait *covering = nullptr;
      for (const Wait &wait : waits)
        if (wait.stream == other && wait.signalStream == stream &&
            wait.signalAt > at) {
          covering = &wait;
          break;
        }
      if (!covering)
        return end;
      done = std::max(done, covering->at);
    }
    return done;
  }

  /// The streams whose work stream 0 does not wait for before the step
  /// ends: the next call would race with them.
  SmallVector<int64_t> unjoined() const {
    SmallVector<int64_t> streams;
    for (int64_t stream = 1; stream < int64_t(lastWork.size()); ++stream) {
      if (lastWork[stream] < 0)
        continue;
      bool joined = llvm::any_of(waits, [&](const Wait &wait) {
        return wait.stream == 0 && wait.signalStream == stream &&
               wait.signalAt > lastWork[stream];
      });
      if (!joined)
        streams.push_back(stream);
    }
    return streams;
  }

private:
  struct Wait {
    int64_t at, stream, signalAt, signalStream;
  };
  /// Per op number: its stream, or -1 for ops that run on none.
  std::vector<int64_t> streamAt;
  /// Per stream: the last op number with work on it (not a signal).
  std::vector<int64_t> lastWork;
  std::vector<Wait> waits;
  int64_t end;
};

/// Extends `buffer`'s range over every op that reads or writes `value` or a
/// view of it, up to where every stream is ordered after that op.
void extendOverUses(Value value, LiveRange &buffer, Block &block,
                    const DenseMap<Operation *, int64_t> &number, int64_t end,
                    const StreamOrder &order) {
  for (Operation *user : value.getUsers()) {
    Operation *top = topLevel(user, block);
    int64_t at = isa<func::ReturnOp>(top) ? end : number.lookup(top);
    buffer.last = std::max(buffer.last, order.completion(at));
    if (auto view = dyn_cast<kernel::ViewOp>(user))
      extendOverUses(view.getResult(), buffer, block, number, end, order);
  }
}

} // namespace

FailureOr<SmallVector<LiveRange>>
mlir::ztc::computeLiveRanges(func::FuncOp func) {
  Block &block = func.getBody().front();
  DenseMap<Operation *, int64_t> number;
  for (auto [i, op] : llvm::enumerate(block))
    number[&op] = i;
  int64_t end = block.getOperations().size();
  StreamOrder streams(block, number, end);
  SmallVector<int64_t> unjoined = streams.unjoined();
  if (!unjoined.empty())
    return func.emitError("stream ")
           << unjoined.front()
           << " has work that stream 0 does not wait for before the step "
              "ends (add a kernel.signal on it and a kernel.wait on stream 0)";
  SmallVector<LiveRange> ranges;
  for (auto alloc : block.getOps<kernel::AllocOp>()) {
    LiveRange range;
    range.alloc = alloc;
    range.bytes = nn::storageBytes(cast<MemRefType>(alloc.getType()));
    range.first = range.last = number.lookup(alloc);
    extendOverUses(alloc.getResult(), range, block, number, end, streams);
    ranges.push_back(range);
  }
  return ranges;
}
