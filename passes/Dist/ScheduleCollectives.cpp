//===- ScheduleCollectives.cpp - the ztc-schedule-collectives pass --------===//
//
// Puts a step's collectives on a second stream where compute can overlap
// them, issues ZeRO stage 3's parameter gathers ahead of their readers
// within a byte budget, and joins consecutive gathers into buckets. See the
// pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_SCHEDULECOLLECTIVESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// The stream collectives run on.
constexpr int64_t kCommStream = 1;
/// The most ops a gather's input may take to compute and still move.
constexpr size_t kMaxChain = 16;
/// Inputs a moved reader may keep alive longer: scalars and the like.
constexpr int64_t kSmallBytes = 256;

/// Whether `op` is a collective that communicates (not a shard, which
/// takes this rank's block like any kernel).
bool isCollective(Operation *op) {
  auto collective = dyn_cast<kernel::CollectiveOpInterface>(op);
  return collective && collective.communicates();
}

bool isGather(Operation *op) {
  auto collective = dyn_cast<kernel::CollectiveOpInterface>(op);
  return collective &&
         collective.getKind() == kernel::CollectiveKind::all_gather;
}

/// Whether `op` is a kernel that computes on stream 0's buffers: an
/// elementwise, reduction or library kernel, or a shard.
bool isKernel(Operation *op) {
  return isa<kernel::ElementwiseOp, kernel::ReduceOp, kernel::CallOp,
             kernel::CollectiveOp>(op) &&
         !isCollective(op);
}

int64_t bytesOf(Type type) {
  auto memref = cast<MemRefType>(type);
  return memref.getNumElements() *
         ((memref.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

/// The views of `buffer`, and of those views, that come before `op`, in
/// block order: what must follow the buffer when it moves down to `op`.
SmallVector<Operation *> viewsBefore(Value buffer, Operation *op) {
  SmallVector<Operation *> views;
  SmallVector<Value> pending{buffer};
  while (!pending.empty()) {
    Value value = pending.pop_back_val();
    for (Operation *user : value.getUsers())
      if (auto view = dyn_cast<kernel::ViewOp>(user);
          view && view->isBeforeInBlock(op)) {
        views.push_back(view);
        pending.push_back(view.getResult());
      }
  }
  llvm::sort(views,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return views;
}

/// A parameter gather that may move up: the ops that compute its input
/// from the step's arguments alone and its own buffers, in block order.
struct Gather {
  kernel::CollectiveOpInterface op;
  SmallVector<Operation *> chain;
  /// The step arguments the chain reads.
  SmallVector<Value> reads;
  /// Its result's size, in the unit the limits count.
  int64_t size = 0;
  /// Op numbers (of the block before any move): the chain's first op, the
  /// gather, its result's first and last reader, and the last op before
  /// the gather that writes an argument the chain reads (-1: none).
  int64_t first = 0, at = 0, firstUse = 0, lastUse = 0, lowest = -1;
  /// Where it is issued: an op number, with x.5 meaning after op x and
  /// x - 0.5 before it.
  double issue = 0;
  /// The op the chain moves before (or after, when `after`); null: stays.
  Operation *anchor = nullptr;
  bool after = false;
};

/// Collects what `gather` needs to move: fails when its input depends on
/// anything but the step's arguments, or when something other than the
/// chain touches the chain's buffers before the gather.
bool collectChain(kernel::CollectiveOpInterface gather, Gather &out) {
  llvm::SetVector<Operation *> chain;
  chain.insert(gather);
  SmallVector<Value> pending(gather->getOperands().begin(),
                             gather->getOperands().end());
  DenseSet<Value> seen;
  while (!pending.empty()) {
    Value value = pending.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    Value root = value;
    while (auto view = root.getDefiningOp<kernel::ViewOp>()) {
      chain.insert(view);
      root = view.getSource();
    }
    if (isa<BlockArgument>(root)) {
      if (!llvm::is_contained(out.reads, root))
        out.reads.push_back(root);
      continue;
    }
    auto alloc = root.getDefiningOp<kernel::AllocOp>();
    if (!alloc)
      return false;
    if (!chain.insert(alloc))
      continue;
    SmallVector<Operation *> users;
    kernel::bufferUsers(alloc.getResult(), users);
    for (Operation *user : users) {
      if (user == gather || !user->isBeforeInBlock(gather))
        continue;
      if (!isKernel(user))
        return false;
      if (chain.insert(user))
        pending.append(user->getOperands().begin(), user->getOperands().end());
    }
    if (chain.size() > kMaxChain)
      return false;
  }
  out.chain.assign(chain.begin(), chain.end());
  llvm::sort(out.chain,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return true;
}

/// The largest sum of `size` over gathers other than `skip` whose live
/// interval [issue, lastUse] covers some op number in [from, to].
int64_t mostLiveBetween(ArrayRef<Gather> gathers, size_t skip, double from,
                        double to) {
  SmallVector<std::pair<double, int64_t>> events;
  for (size_t i = 0; i < gathers.size(); ++i) {
    if (i == skip)
      continue;
    double start = std::max(gathers[i].issue, from);
    double end = std::min(double(gathers[i].lastUse), to);
    if (start > end)
      continue;
    events.push_back({start, gathers[i].size});
    events.push_back({end + 0.25, -gathers[i].size});
  }
  llvm::sort(events, [](const auto &a, const auto &b) {
    return a.first < b.first || (a.first == b.first && a.second < b.second);
  });
  int64_t live = 0, most = 0;
  for (const auto &[at, delta] : events) {
    live += delta;
    most = std::max(most, live);
  }
  return most;
}

struct ScheduleCollectivesPass
    : public ztc::impl::ScheduleCollectivesPassBase<ScheduleCollectivesPass> {
  using ScheduleCollectivesPassBase::ScheduleCollectivesPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    for (auto [name, value] :
         {std::pair<StringRef, int64_t>{"prefetch-bytes", prefetchBytes},
          {"prefetch-elements", prefetchElements},
          {"max-live-bytes", maxLiveBytes},
          {"max-live-elements", maxLiveElements},
          {"allgather-bucket-bytes", bucketBytes},
          {"allgather-bucket-elements", bucketElements}})
      if (value < 0) {
        func.emitError() << name << " must not be negative, got " << value;
        return signalPassFailure();
      }
    Block &block = func.getBody().front();
    if (llvm::none_of(block, [](Operation &op) { return isCollective(&op); }))
      return;
    for (Operation &op : block)
      if (kernel::streamOf(&op) != 0 || isa<kernel::SignalOp>(op)) {
        op.emitOpError("is already scheduled on streams; "
                       "ztc-schedule-collectives runs once, on one stream");
        return signalPassFailure();
      }
    prefetch(block);
    bucketGathers(block);
    sinkReaders(block);
    assignStreams(block);
  }

  /// Joins runs of consecutive parameter gathers of one element type into
  /// one all-gather of at most `allgather-bucket-bytes`: each block is
  /// copied into the bucket, the bucket gathered, and each parameter's
  /// rows sliced out of it right before the first op that reads it. The
  /// later gathers of a bucket start with the first, so they are issued
  /// ahead as a prefetch would issue them, within `max-live-bytes` (the
  /// gathered bucket counted beside the parameters sliced from it).
  void bucketGathers(Block &block) {
    int64_t limit = inUnit(bucketElements, bucketBytes);
    int64_t maxLive = inUnit(maxLiveElements, maxLiveBytes);
    if (limit <= 0)
      return;
    SmallVector<Operation *> ops;
    std::vector<Gather> gathers = movableGathers(block, ops);
    auto elementType = [](Gather &g) {
      return cast<MemRefType>(g.op.getInput().getType()).getElementType();
    };
    auto flat = [](Gather &g) {
      return cast<MemRefType>(g.op.getInput().getType()).getRank() == 1;
    };
    for (size_t i = 0; i < gathers.size();) {
      SmallVector<size_t> bucket{i};
      int64_t total = gathers[i].size;
      size_t j = i + 1;
      for (; j < gathers.size() && flat(gathers[i]); ++j) {
        Gather &g = gathers[j];
        if (!flat(g) || elementType(g) != elementType(gathers[i]) ||
            g.op.getWorldSize() != gathers[i].op.getWorldSize() ||
            total + g.size > limit || g.lowest >= gathers[i].at)
          break;
        // The gathered bucket lives beside the parameters sliced from it.
        if (maxLive > 0 &&
            mostLiveBetween(gathers, j, double(gathers[i].at), double(g.at)) +
                    g.size + total + g.size >
                maxLive)
          break;
        g.issue = double(gathers[i].at);
        total += g.size;
        bucket.push_back(j);
      }
      if (bucket.size() > 1) {
        SmallVector<Gather *> members;
        for (size_t k : bucket)
          members.push_back(&gathers[k]);
        join(members);
      }
      i = j;
    }
  }

  /// Replaces the gathers of `members` (in program order, all movable to
  /// the first) with one.
  void join(ArrayRef<Gather *> members) {
    kernel::CollectiveOpInterface first = members.front()->op;
    Location loc = first.getLoc();
    MLIRContext *context = first.getContext();
    int64_t world = first.getWorldSize();
    Type element =
        cast<MemRefType>(first.getInput().getType()).getElementType();
    // Every member's input is computed before the bucket starts.
    for (Gather *g : members.drop_front())
      for (Operation *op : g->chain)
        op->moveBefore(first);
    OpBuilder b(first);
    int64_t total = 0;
    SmallVector<int64_t> offsets;
    SmallVector<Location> locs;
    for (Gather *g : members) {
      offsets.push_back(total);
      total += cast<MemRefType>(g->op.getInput().getType()).getNumElements();
      locs.push_back(g->op.getLoc());
    }
    loc = FusedLoc::get(context, locs);
    Value in = kernel::AllocOp::create(
        b, loc, MemRefType::get({total}, element), IntegerAttr());
    for (auto [g, offset] : llvm::zip(members, offsets))
      kernel::CallOp::create(
          b, loc, "copy_into", ValueRange{g->op.getInput()}, ValueRange{in},
          b.getDictionaryAttr(
              {b.getNamedAttr("axis", b.getI64IntegerAttr(0)),
               b.getNamedAttr("offset", b.getI64IntegerAttr(offset))}));
    Value out = kernel::AllocOp::create(
        b, loc, MemRefType::get({world * total}, element), IntegerAttr());
    kernel::CollectiveOp::create(b, loc, kernel::CollectiveKind::all_gather, in,
                                 out, world);
    Value rows = kernel::ViewOp::create(
        b, loc, MemRefType::get({world, total}, element), out);
    for (auto [g, offset] : llvm::zip(members, offsets)) {
      Value whole = g->op.getOutput();
      auto alloc = whole.getDefiningOp<kernel::AllocOp>();
      int64_t block =
          cast<MemRefType>(g->op.getInput().getType()).getNumElements();
      // Right before the first op that reads the parameter; the buffer
      // and its views begin there.
      SmallVector<Operation *> readers;
      kernel::bufferUsers(whole, readers);
      llvm::erase_if(readers, [op = g->op](Operation *r) { return r == op; });
      Operation *reader =
          *llvm::min_element(readers, [](Operation *a, Operation *c) {
            return a->isBeforeInBlock(c);
          });
      SmallVector<Operation *> views = viewsBefore(whole, reader);
      Location memberLoc = g->op.getLoc();
      g->op->erase();
      alloc->moveBefore(reader);
      OpBuilder at(reader);
      Value target = kernel::ViewOp::create(
          at, memberLoc, MemRefType::get({world, block}, element), whole);
      kernel::CallOp::create(
          at, memberLoc, "slice", ValueRange{rows}, ValueRange{target},
          at.getDictionaryAttr(
              {at.getNamedAttr("starts", at.getDenseI64ArrayAttr({0, offset})),
               at.getNamedAttr("sizes",
                               at.getDenseI64ArrayAttr({world, block})),
               at.getNamedAttr("steps", at.getDenseI64ArrayAttr({1, 1}))}));
      for (Operation *view : views)
        view->moveBefore(reader);
    }
  }

  /// Moves the ops that read a reduction's result (the slices of a
  /// reduced bucket, their scaling), and the ops reading theirs, down to
  /// right before the first op that needs what they write, so stream 0 does
  /// not wait for the reduction right after starting it. (A gather's
  /// readers already follow it where they need it.)
  void sinkReaders(Block &block) {
    DenseSet<Value> sources;
    for (Operation &op : block)
      if (isCollective(&op) && !isGather(&op))
        sources.insert(kernel::rootBuffer(
            cast<kernel::CollectiveOpInterface>(op).getOutput()));
    // The movable readers, in program order: each writes only fresh
    // buffers that nothing else writes.
    SmallVector<Operation *> movable;
    for (Operation &op : block) {
      if (!isKernel(&op))
        continue;
      bool reads = llvm::any_of(op.getOperands(), [&](Value operand) {
        return isa<MemRefType>(operand.getType()) &&
               sources.contains(kernel::rootBuffer(operand));
      });
      if (!reads)
        continue;
      // Moving an op keeps its inputs alive until it runs: only what it
      // reads of the collectives, arguments and scalars may wait so long.
      SmallVector<Value> written = kernel::writtenBuffers(&op);
      bool cheap = llvm::all_of(op.getOperands(), [&](Value operand) {
        if (!isa<MemRefType>(operand.getType()) ||
            llvm::is_contained(written, operand))
          return true;
        Value root = kernel::rootBuffer(operand);
        return sources.contains(root) || isa<BlockArgument>(root) ||
               bytesOf(root.getType()) <= kSmallBytes;
      });
      if (!cheap)
        continue;
      bool fresh = !written.empty() && llvm::all_of(written, [&](Value w) {
        auto alloc = kernel::rootBuffer(w).getDefiningOp<kernel::AllocOp>();
        if (!alloc || w != alloc.getResult())
          return false;
        SmallVector<Operation *> users;
        kernel::bufferUsers(alloc.getResult(), users);
        return llvm::all_of(users, [&](Operation *user) {
          return user == &op ||
                 (op.isBeforeInBlock(user) &&
                  !llvm::is_contained(kernel::writtenBuffers(user), w));
        });
      });
      if (!fresh)
        continue;
      movable.push_back(&op);
      for (Value w : written)
        sources.insert(w);
    }
    // Latest first, so a reader moves below its own readers' new places.
    for (Operation *op : llvm::reverse(movable)) {
      SmallVector<Value> written = kernel::writtenBuffers(op);
      SmallVector<Value> inputs;
      for (Value operand : op->getOperands())
        if (isa<MemRefType>(operand.getType()) &&
            !llvm::is_contained(written, operand))
          inputs.push_back(kernel::rootBuffer(operand));
      Operation *target = op->getNextNode();
      for (; target; target = target->getNextNode()) {
        if (isa<func::ReturnOp>(target))
          break;
        if (isa<kernel::ViewOp, kernel::AllocOp>(target))
          continue;
        bool needed = llvm::any_of(target->getOperands(), [&](Value v) {
          return isa<MemRefType>(v.getType()) &&
                 llvm::is_contained(written, kernel::rootBuffer(v));
        });
        for (Value w : kernel::writtenBuffers(target))
          if (llvm::is_contained(inputs, kernel::rootBuffer(w)))
            needed = true;
        if (needed)
          break;
      }
      if (!target || target == op->getNextNode())
        continue;
      op->moveBefore(target);
      // Its buffers begin where it now writes them; views of them that
      // were taken in between follow it.
      for (Value w : written) {
        SmallVector<Operation *> views = viewsBefore(w, op);
        w.getDefiningOp()->moveBefore(op);
        for (Operation *view : llvm::reverse(views))
          view->moveAfter(op);
      }
    }
  }

  /// A limit in the unit sizeOf counts: its -elements option when given,
  /// else its -bytes one (0: none).
  static int64_t inUnit(int64_t elements, int64_t bytes) {
    return elements > 0 ? elements : bytes;
  }

  /// The size of `gather`'s result in the unit the limits count.
  int64_t sizeOf(kernel::CollectiveOpInterface gather) const {
    Type type = gather.getOutput().getType();
    bool elements =
        prefetchElements > 0 || maxLiveElements > 0 || bucketElements > 0;
    return elements ? cast<MemRefType>(type).getNumElements() : bytesOf(type);
  }

  /// The parameter gathers of `block` that may move, with the op numbers
  /// of the block as it is now; `ops` receives the block's ops by number.
  std::vector<Gather> movableGathers(Block &block,
                                     SmallVectorImpl<Operation *> &ops) const {
    DenseMap<Operation *, int64_t> number;
    for (Operation &op : block) {
      number[&op] = ops.size();
      ops.push_back(&op);
    }
    std::vector<Gather> gathers;
    for (Operation *op : ops) {
      if (!isGather(op))
        continue;
      Gather gather;
      gather.op = cast<kernel::CollectiveOpInterface>(op);
      if (!collectChain(gather.op, gather))
        continue;
      SmallVector<Operation *> readers;
      kernel::bufferUsers(kernel::rootBuffer(gather.op.getOutput()), readers);
      llvm::erase_if(readers, [&](Operation *user) {
        return llvm::is_contained(gather.chain, user);
      });
      if (readers.empty())
        continue;
      gather.size = sizeOf(gather.op);
      gather.first = number[gather.chain.front()];
      gather.at = number[op];
      gather.firstUse = gather.lastUse = number[readers.front()];
      for (Operation *reader : readers) {
        gather.firstUse = std::min(gather.firstUse, number[reader]);
        gather.lastUse = std::max(gather.lastUse, number[reader]);
      }
      for (int64_t i = gather.at - 1; i >= 0 && gather.lowest < 0; --i) {
        if (llvm::is_contained(gather.chain, ops[i]))
          continue;
        for (Value written : kernel::writtenBuffers(ops[i]))
          if (llvm::is_contained(gather.reads, kernel::rootBuffer(written)))
            gather.lowest = i;
      }
      gather.issue = double(gather.at);
      gathers.push_back(std::move(gather));
    }
    return gathers;
  }

  void prefetch(Block &block) {
    int64_t limit = inUnit(prefetchElements, prefetchBytes);
    int64_t maxLive = inUnit(maxLiveElements, maxLiveBytes);
    if (limit <= 0)
      return;
    SmallVector<Operation *> ops;
    std::vector<Gather> gathers = movableGathers(block, ops);

    // Decide in program order, each gather as early as the budget allows:
    // right before the first reader of gather j, when the gathers after j
    // up to this one fit in `limit`.
    for (size_t k = 0; k < gathers.size(); ++k) {
      Gather &g = gathers[k];
      double floor = g.lowest >= 0 ? g.lowest + 0.5 : -1.0;
      double previous = k > 0 ? gathers[k - 1].issue : -1.0;
      // Try the earliest reader first; a later one if the live bound fails.
      int64_t sum = g.size;
      SmallVector<size_t> candidates;
      for (size_t i = k; i-- > 0;) {
        if (sum > limit)
          break;
        candidates.push_back(i);
        sum += gathers[i].size;
      }
      std::reverse(candidates.begin(), candidates.end());
      for (size_t i : candidates) {
        double target = std::max({gathers[i].firstUse - 0.5, floor, previous});
        if (target >= g.first - 0.5)
          continue; // no earlier than where it is
        if (maxLive > 0 &&
            mostLiveBetween(gathers, k, target, double(g.at)) + g.size >
                maxLive)
          continue;
        g.issue = target;
        if (target == previous) {
          g.anchor = gathers[k - 1].op;
          g.after = true;
        } else if (target == floor) {
          g.anchor = ops[g.lowest];
          g.after = true;
        } else {
          g.anchor = ops[gathers[i].firstUse];
        }
        break;
      }
    }
    for (Gather &g : gathers) {
      if (!g.anchor)
        continue;
      Operation *cursor = g.anchor;
      bool after = g.after;
      for (Operation *op : g.chain) {
        if (after)
          op->moveAfter(cursor);
        else
          op->moveBefore(cursor);
        if (after)
          cursor = op;
      }
    }
  }

  /// Whether `op` is work of stream 0 a collective can overlap.
  static bool isCompute(Operation *op) {
    return isKernel(op) || isa<kernel::RecordLossOp, kernel::CheckFiniteOp>(op);
  }

  /// The first op after collective `op` that needs it done: one that reads
  /// or writes its result or overwrites its input, for a reduction also the
  /// next reduction (at most two buckets in flight), else the return.
  static Operation *neededAt(kernel::CollectiveOpInterface op) {
    Value input = kernel::rootBuffer(op.getInput());
    Value output = kernel::rootBuffer(op.getOutput());
    bool reduction = !isGather(op);
    for (Operation *next = op->getNextNode(); next;
         next = next->getNextNode()) {
      if (isa<func::ReturnOp>(next))
        return next;
      if (isa<kernel::ViewOp, kernel::AllocOp>(next))
        continue;
      if (reduction && isCollective(next) && !isGather(next))
        return next;
      for (Value operand : next->getOperands())
        if (isa<MemRefType>(operand.getType()) &&
            kernel::rootBuffer(operand) == output)
          return next;
      for (Value written : kernel::writtenBuffers(next))
        if (kernel::rootBuffer(written) == input)
          return next;
    }
    return nullptr;
  }

  void assignStreams(Block &block) {
    MLIRContext *context = block.getParentOp()->getContext();
    auto eventType = kernel::EventType::get(context);
    auto onComm = [&](Operation *op) {
      op->setAttr(kernel::KernelDialect::kStreamAttr,
                  IntegerAttr::get(IntegerType::get(context, 64), kCommStream));
    };
    // Which collectives go to stream 1, and where stream 0 needs each:
    // decided on the program as it is, before any signal moves an op.
    struct Plan {
      kernel::CollectiveOpInterface op;
      Operation *needed;
      bool streamed;
    };
    SmallVector<Plan> plans;
    for (Operation &op : block) {
      if (!isCollective(&op))
        continue;
      auto collective = cast<kernel::CollectiveOpInterface>(op);
      Operation *needed = neededAt(collective);
      // Only compute between the collective and its first need can
      // overlap it; with none, a second stream would only add hand-overs.
      bool streamed = false;
      for (Operation *next = op.getNextNode(); next && next != needed;
           next = next->getNextNode())
        streamed |= isCompute(next);
      plans.push_back({collective, needed, streamed});
    }
    // Stream 1's events, then stream 0's waits for them, then what stream
    // 1 waits for: each inserted right before its place, so an op placed
    // before the same op as an earlier one follows it.
    DenseMap<Operation *, kernel::SignalOp> done;
    for (Plan &plan : plans) {
      if (!plan.streamed)
        continue;
      onComm(plan.op);
      OpBuilder builder(context);
      builder.setInsertionPointAfter(plan.op);
      auto signal =
          kernel::SignalOp::create(builder, plan.op.getLoc(), eventType);
      onComm(signal);
      done[plan.op] = signal;
      builder.setInsertionPoint(plan.needed);
      kernel::WaitOp::create(builder, plan.op.getLoc(), signal.getEvent());
    }
    // A collective left on stream 0 starts after stream 1's last one ended:
    // collectives run one at a time, in the order every rank issues them.
    kernel::SignalOp lastStreamed;
    for (Plan &plan : plans) {
      OpBuilder builder(plan.op);
      if (!plan.streamed) {
        auto previous =
            dyn_cast_or_null<kernel::WaitOp>(plan.op->getPrevNode());
        bool waited = previous && lastStreamed &&
                      previous.getEvent() == lastStreamed.getEvent();
        if (lastStreamed && !waited)
          kernel::WaitOp::create(builder, plan.op.getLoc(),
                                 lastStreamed.getEvent());
        lastStreamed = nullptr;
        continue;
      }
      auto ready =
          kernel::SignalOp::create(builder, plan.op.getLoc(), eventType);
      auto wait = kernel::WaitOp::create(builder, plan.op.getLoc(), ready);
      onComm(wait);
      lastStreamed = done[plan.op];
    }
  }
};

} // namespace
