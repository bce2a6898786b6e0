//===- LiveRanges.cpp - arena buffers' live ranges ------------------------===//
//
// When each arena buffer of a kernel-level step is in use, streams and
// waits included: what ztc-plan-memory places buffers by, and what memory
// reports draw.
//
//===----------------------------------------------------------------------===//

#include "passes/Kernel/LiveRanges.h"

#include "dialects/NN/IR/ShapeLimits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// The cross-stream order of a step: which streams run which ops, and which
/// waits order one stream after another's work (kernel.signal/kernel.wait).
class StreamOrder {
public:
  StreamOrder(Block &block, const DenseMap<Operation *, int64_t> &number,
              int64_t end)
      : streamAt(end, -1), end(end) {
    for (Operation &op : block) {
      if (!isa<kernel::ElementwiseOp, kernel::ReduceOp, kernel::CallOp,
               kernel::CollectiveOp, kernel::RecordLossOp,
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

  /// The streams of the step (at least 1).
  int64_t count() const { return std::max<int64_t>(1, lastWork.size()); }
  /// The stream of the op at `at` (-1: placement, views, the end).
  int64_t streamOf(int64_t at) const { return at < end ? streamAt[at] : -1; }

  /// The first position by which stream `other` is ordered after the op at
  /// `at`: the op itself on its own stream or when `other` runs no later
  /// work; else the first wait on `other` for a signal on the op's stream
  /// after the op, or the end of the step when there is none.
  int64_t completionOn(int64_t at, int64_t other) const {
    int64_t stream = streamOf(at);
    if (stream < 0 || other == stream || other >= int64_t(lastWork.size()) ||
        lastWork[other] <= at)
      return at;
    for (const Wait &wait : waits)
      if (wait.stream == other && wait.signalStream == stream &&
          wait.signalAt > at)
        return wait.at;
    return end;
  }

  /// The first position by which every stream that runs work after the op
  /// at `at` is ordered after it.
  int64_t completion(int64_t at) const {
    int64_t done = at;
    for (int64_t other = 0; other < count(); ++other)
      done = std::max(done, completionOn(at, other));
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
    Operation *top = topLevelIn(user, block);
    int64_t at = isa<func::ReturnOp>(top) ? end : number.lookup(top);
    buffer.last = std::max(buffer.last, order.completion(at));
    if (auto view = dyn_cast<kernel::ViewOp>(user)) {
      extendOverUses(view.getResult(), buffer, block, number, end, order);
      continue;
    }
    // A returned buffer is read after the step, on stream 0.
    int64_t stream = at == end ? 0 : order.streamOf(at);
    if (stream >= 0)
      buffer.firstOn[stream] = std::min(buffer.firstOn[stream], at);
    for (int64_t other = 0; other < order.count(); ++other)
      buffer.lastOn[other] =
          std::max(buffer.lastOn[other], order.completionOn(at, other));
  }
}

} // namespace

Operation *mlir::ztc::topLevelIn(Operation *op, Block &block) {
  while (op->getBlock() != &block)
    op = op->getParentOp();
  return op;
}

bool LiveRange::precedes(const LiveRange &later) const {
  bool touched = false;
  for (size_t stream = 0; stream < later.firstOn.size(); ++stream) {
    if (later.firstOn[stream] == std::numeric_limits<int64_t>::max())
      continue;
    touched = true;
    // Stream 0 counts from the alloc, as a one-stream plan always has.
    int64_t from = stream == 0 ? later.first : later.firstOn[stream];
    if (stream >= lastOn.size() || from <= lastOn[stream])
      return false;
  }
  return touched || later.first > last;
}

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
    range.firstOn.assign(streams.count(), std::numeric_limits<int64_t>::max());
    range.lastOn.assign(streams.count(), range.first);
    extendOverUses(alloc.getResult(), range, block, number, end, streams);
    ranges.push_back(range);
  }
  return ranges;
}
