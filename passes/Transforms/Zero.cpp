//===- Zero.cpp - the ztc-zero pass -----------------------------*- C++ -*-===//
//
// Data parallelism (stage 0) and ZeRO stages 1 to 3 on the training step:
// gradient buckets, their collectives, sharded optimizer states, the
// all-gather of the updated parameters, and at stage 3 parameters held in
// shards and gathered where each entry reads them. See the pass
// description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Transforms/Arithmetic.h"

#include "dialects/NN/IR/ShapeLimits.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

namespace mlir::ztc {
#define GEN_PASS_DEF_ZEROPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

/// One parameter the step updates.
struct Update {
  /// The train.sgd or train.adam that updates it.
  Operation *op;
  BlockArgument param;
  /// Where its gradient is read: the clip's operand, else the update's.
  OpOperand *gradUse;
  /// Elements, and where the backward completes the gradient.
  int64_t elements;
  int64_t readyAt;
  /// Mixed precision: the gradient in half precision, before ztc-autodiff
  /// widened (and, in fp16, unscaled) it, and those ops, first to last
  /// (marked `train.half_gradient_of`); null and empty otherwise.
  Value half;
  SmallVector<Operation *> widening;

  /// What the collectives reduce: the half gradient when there is one.
  Value reduced() const { return half ? half : gradUse->get(); }
};

/// Fills `u.half` and `u.widening` when its gradient is a marked widening
/// of a half one that nothing else reads.
void findHalfGradient(Update &u) {
  Value value = u.gradUse->get();
  SmallVector<Operation *> chain;
  while (Operation *def = value.getDefiningOp()) {
    if (!def->hasAttr(train::kHalfGradientOfAttr) || !value.hasOneUse())
      break;
    chain.insert(chain.begin(), def);
    value = def->getOperand(0);
  }
  if (chain.empty() || !isa<nn::CastOp>(chain.front()))
    return;
  u.half = value;
  u.widening = std::move(chain);
}

/// Builders at one insertion point.
using Build = Arithmetic;

RankedTensorType flatType(int64_t n, Type element) {
  return RankedTensorType::get({n}, element);
}

struct ZeroPass : public ztc::impl::ZeroPassBase<ZeroPass> {
  using ZeroPassBase::ZeroPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    StringRef entry = train::entryKind(func);
    halfCopy.clear();
    if (stage > 3) {
      func.emitError("ZeRO stage ") << unsigned(stage) << " does not exist: "
                                    << "stages are 0, 1, 2 and 3";
      return signalPassFailure();
    }
    // Stage 3: every entry holds its parameters in shards and gathers them
    // for each use; the training step also reduces and updates shards.
    // Stages 1 and 2 shard the f32 masters of half working copies, gathered
    // once per step (see shardsParameter).
    if (stage != 0 && stage <= 3 && !entry.empty() && entry != "train_step") {
      if (worldSize == 1)
        return;
      if (failed(gatherParameters(func, {}, /*halfCopies=*/false)))
        return signalPassFailure();
      markStep(func);
      return;
    }
    if (!entry.empty() && entry != "train_step")
      return;
    if (worldSize < 1) {
      func.emitError("world-size must be at least 1, got ")
          << int64_t(worldSize);
      return signalPassFailure();
    }
    if (!commDtype.empty() && commDtype != "fp32" && commDtype != "fp16" &&
        commDtype != "bf16") {
      func.emitError("comm-dtype '")
          << commDtype << "': expected fp32, fp16 or bf16";
      return signalPassFailure();
    }
    if (reduceBucketBytes < 1) {
      func.emitError("reduce-bucket-bytes must be positive, got ")
          << int64_t(reduceBucketBytes);
      return signalPassFailure();
    }
    if ((stage == 0 || stage == 3) && worldSize == 1)
      return;
    markStep(func);

    Block &block = func.getBody().front();
    llvm::DenseMap<Operation *, int64_t> position;
    for (auto [i, op] : llvm::enumerate(block))
      position[&op] = int64_t(i) + 1;

    // The updates and the clip that feeds them.
    SmallVector<Update> updates;
    train::ClipByGlobalNormOp clip;
    for (Operation &op : block) {
      if (auto found = dyn_cast<train::ClipByGlobalNormOp>(op)) {
        if (clip) {
          found.emitError("ztc-zero expects one global-norm clip per step");
          return signalPassFailure();
        }
        clip = found;
        continue;
      }
      if (!isa<train::SgdOp, train::AdamOp, train::Adam8bitOp>(op))
        continue;
      auto param = dyn_cast<BlockArgument>(op.getOperand(0));
      if (!param) {
        op.emitError("ztc-zero updates parameters that are step arguments");
        return signalPassFailure();
      }
      OpOperand *use = &op.getOpOperand(1);
      if (clip && use->get().getDefiningOp() == clip)
        use = &clip->getOpOperand(cast<OpResult>(use->get()).getResultNumber() -
                                  1);
      Value grad = use->get();
      Operation *def = grad.getDefiningOp();
      updates.push_back(
          {&op, param, use,
           cast<RankedTensorType>(grad.getType()).getNumElements(),
           def ? position.lookup(def) : 0});
      findHalfGradient(updates.back());
    }
    if (updates.empty()) {
      func.emitError("ztc-zero found no optimizer update: run ztc-optimizer "
                     "first");
      return signalPassFailure();
    }

    // Buckets, in the order the backward completes the gradients.
    llvm::stable_sort(updates, [](const Update &a, const Update &b) {
      return a.readyAt < b.readyAt;
    });
    SmallVector<SmallVector<Update *>> buckets =
        bucketsOf(llvm::map_to_vector(updates, [](Update &u) { return &u; }));

    if (stage == 0) {
      reduceBuckets(func, buckets);
    } else if (failed(shardParameters(func, updates, clip))) {
      return signalPassFailure();
    }
    averageBuffers(func);
    // The half gradients' widening was redone after their collectives.
    for (Update &u : updates)
      for (Operation *op : llvm::reverse(u.widening))
        if (op->use_empty())
          op->erase();
  }

  /// The element type gradients are reduced in: comm-dtype, or null for
  /// the gradients' own.
  Type commType(MLIRContext *context) {
    if (commDtype == "bf16")
      return BFloat16Type::get(context);
    if (commDtype == "fp16")
      return Float16Type::get(context);
    if (commDtype == "fp32")
      return Float32Type::get(context);
    return nullptr;
  }

  /// `value` cast to the communication type (when there is one).
  Value toComm(Build &m, Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    Type comm = commType(value.getContext());
    if (!comm || comm == type.getElementType())
      return value;
    return nn::CastOp::create(m.b, m.loc, type.clone(comm), value);
  }

  /// A reduced `value` back in `element`, the gradients' type.
  Value fromComm(Build &m, Value value, Type element) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getElementType() == element)
      return value;
    return nn::CastOp::create(m.b, m.loc, type.clone(element), value);
  }

  /// `part`, `u`'s share of a reduced bucket (the sum over the ranks), as
  /// the mean gradient the update reads: a half gradient is widened (and
  /// unscaled) as ztc-autodiff did, then divided by the world size; those
  /// ops stay marked, so ztc-half-gradients moves them to the readers and
  /// the reduced half gradient is what waits for the update.
  Value meanOf(Build &m, Update *u, Value part) {
    if (!u->half)
      return m.scale(part, 1.0 / double(worldSize));
    auto mark = u->widening.front()->getAttr(train::kHalfGradientOfAttr);
    for (Operation *op : u->widening) {
      // On a shard's block, or on a bucket's slice: the shape of `part`.
      Operation *copy = m.b.clone(*op);
      copy->setOperand(0, part);
      Type element = Build::elementOf(copy->getResult(0));
      part = copy->getResult(0);
      part.setType(
          cast<RankedTensorType>(copy->getOperand(0).getType()).clone(element));
    }
    Value mean = m.scale(part, 1.0 / double(worldSize));
    mean.getDefiningOp()->setAttr(train::kHalfGradientOfAttr, mark);
    return mean;
  }

  /// Stage 3, the training step: each sharded parameter whose half working
  /// copy is gathered, and its persistent half block (halfCopyOf).
  DenseMap<Value, Value> halfCopy;

  /// Records the world size and stage on the step (the manifest's).
  void markStep(func::FuncOp func) {
    Builder attrs(func.getContext());
    func->setAttr(dist::DistDialect::kWorldSizeAttr,
                  attrs.getI64IntegerAttr(worldSize));
    func->setAttr(dist::DistDialect::kZeroStageAttr,
                  attrs.getI64IntegerAttr(stage));
  }

  /// Groups `updates` (in backward order) into buckets of at most
  /// reduce-bucket-bytes (or reduce-bucket-elements) of gradient, each of
  /// one element type (as
  /// DeepSpeed groups by dtype): under mixed precision the half gradients
  /// and the f32 ones (normalization weights) fill buckets of their own.
  SmallVector<SmallVector<Update *>> bucketsOf(ArrayRef<Update *> updates) {
    SmallVector<SmallVector<Update *>> buckets;
    // The bucket each element type fills, and its bytes so far.
    DenseMap<Type, std::pair<size_t, int64_t>> open;
    for (Update *u : updates) {
      auto type = cast<RankedTensorType>(u->reduced().getType());
      // DeepSpeed's reduce_bucket_size counts elements; bytes otherwise.
      int64_t bytes = reduceBucketElements > 0 ? type.getNumElements()
                                               : nn::storageBytes(type);
      int64_t limit = reduceBucketElements > 0 ? int64_t(reduceBucketElements)
                                               : int64_t(reduceBucketBytes);
      auto [it, fresh] =
          open.try_emplace(Build::elementOf(u->reduced()), buckets.size(), 0);
      auto &[index, bucketBytes] = it->second;
      if (fresh || bucketBytes + bytes > limit) {
        index = buckets.size();
        bucketBytes = 0;
        buckets.emplace_back();
      }
      buckets[index].push_back(u);
      bucketBytes += bytes;
    }
    return buckets;
  }

  /// Stage 3 shards a parameter with at least param-persistence-threshold
  /// elements; smaller ones stay whole on every rank. Stages 1 and 2, under
  /// mixed precision, shard the f32 master of a parameter the step reads
  /// only as its half working copy: each step gathers that copy in half,
  /// once, and it lives until the backward's last use (as the copy cast
  /// from a whole master did), so the master costs 4/N bytes per element
  /// instead of 4, the ZeRO paper's 2 + 2 + 12/N at stage 1.
  bool shardsParameter(func::FuncOp func, unsigned index) {
    auto type = dyn_cast<RankedTensorType>(func.getArgument(index).getType());
    if (!type || !train::hasRole(func, index, train::BindingRole::Param))
      return false;
    if (stage == 3)
      return type.getNumElements() >= int64_t(paramPersistenceThreshold);
    return (stage == 1 || stage == 2) && worldSize > 1 &&
           onlyNarrowed(func.getArgument(index));
  }

  /// Whether every read of `param` other than its update is a cast to a
  /// narrower float, perhaps after transposes and reshapes (and there is
  /// one): the parameter is read only as its half working copy.
  static bool onlyNarrowed(Value param) {
    bool narrowed = false;
    std::function<bool(Value)> walk = [&](Value value) {
      for (Operation *user : value.getUsers()) {
        if (isa<train::SgdOp, train::AdamOp, train::Adam8bitOp>(user) &&
            user->getOperand(0) == param)
          continue;
        if (isa<nn::TransposeOp, nn::ReshapeOp>(user)) {
          if (!walk(user->getResult(0)))
            return false;
          continue;
        }
        auto narrow = dyn_cast<nn::CastOp>(user);
        if (!narrow)
          return false;
        auto from = dyn_cast<FloatType>(
            cast<RankedTensorType>(value.getType()).getElementType());
        auto to = dyn_cast<FloatType>(narrow.getType().getElementType());
        if (!from || !to || to.getWidth() >= from.getWidth())
          return false;
        narrowed = true;
      }
      return true;
    };
    return walk(param) && narrowed;
  }

  /// The block of each rank: ceil(n / world-size) elements, rounded up to
  /// a multiple of shard-alignment.
  int64_t blockOf(int64_t elements) {
    int64_t block = (elements + worldSize - 1) / worldSize;
    int64_t align = std::max<int64_t>(shardAlignment, 1);
    return (block + align - 1) / align * align;
  }

  /// Stage 3, every entry: each sharded parameter argument becomes this
  /// rank's block of it (`dist.full_shape` keeps its shape), and every use
  /// other than `updates` reads a copy gathered right before it. What is
  /// computed from parameters alone (a transpose, a cast to half) is
  /// recomputed at each use from its own gather, so no whole parameter,
  /// nor anything made of one, outlives the op that reads it: the forward
  /// and the backward gather separately. A half working copy (a cast to
  /// half, perhaps after a transpose or reshape) is gathered in half: with
  /// `halfCopies` (the training step) from the rank's persistent half
  /// block, a `state` argument `<param>.bf16` (or `.fp16`) that is a
  /// `train.copy_of` the parameter (recorded in `halfCopy`; the step
  /// returns its new value after the update), as DeepSpeed keeps a half
  /// partition beside the f32 master's; otherwise cast on the block.
  LogicalResult gatherParameters(func::FuncOp func,
                                 ArrayRef<Operation *> updates,
                                 bool halfCopies) {
    // Stages 1 and 2 gather once per step: every reader shares the copy the
    // first one gathered.
    const bool once = stage < 3;
    IRMapping shared;
    Block &body = func.getBody().front();
    // The whole type of each sharded argument.
    DenseMap<Value, RankedTensorType> wholeType;
    OpBuilder b(func.getContext());
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      if (!shardsParameter(func, i))
        continue;
      BlockArgument arg = func.getArgument(i);
      auto full = cast<RankedTensorType>(arg.getType());
      wholeType[arg] = full;
      arg.setType(
          flatType(blockOf(full.getNumElements()), full.getElementType()));
      func.setArgAttr(i, dist::DistDialect::kFullShapeAttr,
                      b.getDenseI64ArrayAttr(full.getShape()));
    }
    if (wholeType.empty())
      return success();

    // Ops computed from sharded parameters (and constants) alone.
    llvm::SetVector<Operation *> derived;
    for (Operation &op : body) {
      if (op.getNumRegions() != 0 || op.getNumResults() == 0 ||
          llvm::is_contained(updates, &op) ||
          !isa_and_nonnull<nn::NNDialect>(op.getDialect()))
        continue;
      bool fromParams = false, only = true;
      for (Value operand : op.getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (wholeType.count(operand) || (def && derived.contains(def)))
          fromParams = true;
        else if (!def || !isa<arith::ConstantOp>(def))
          only = false;
      }
      if (fromParams && only)
        derived.insert(&op);
    }

    int64_t useCount = 0;
    SmallVector<Operation *> users;
    for (Operation &op : body)
      if (!derived.contains(&op) && !llvm::is_contained(updates, &op))
        users.push_back(&op);
    for (Operation *user : users) {
      // This user's own copies: one gather per parameter, one clone per
      // derived op (at stages 1 and 2, the step's).
      IRMapping own;
      IRMapping &copies = once ? shared : own;
      Build m{b, NameLoc::get(b.getStringAttr("zero.gather"), user->getLoc())};
      // The whole parameter `full` from this rank's `block` (its element
      // type: a half copy gathers half the bytes).
      auto gatherWhole = [&](Value block, RankedTensorType full) -> Value {
        auto gather = dist::AllGatherOp::create(
            b, m.loc,
            flatType(blockOf(full.getNumElements()) * worldSize,
                     full.getElementType()),
            block, worldSize);
        // Gathers of one parameter for different uses stay apart (CSE
        // would merge them and keep the whole parameter alive between).
        gather->setAttr(dist::DistDialect::kUseAttr,
                        b.getI64IntegerAttr(useCount++));
        return m.reshape(m.slice(gather, 0, full.getNumElements()), full);
      };
      std::function<Value(Value)> materialize = [&](Value value) -> Value {
        if (Value done = copies.lookupOrNull(value))
          return done;
        if (auto it = wholeType.find(value); it != wholeType.end()) {
          Value whole = gatherWhole(value, it->second);
          copies.map(value, whole);
          return whole;
        }
        Operation *def = value.getDefiningOp();
        if (!def || !derived.contains(def))
          return value;
        // Mixed precision: a parameter's half working copy (perhaps
        // transposed or reshaped first) is cast on the block and gathered
        // in half, then laid out.
        if (auto narrow = dyn_cast<nn::CastOp>(def)) {
          SmallVector<Operation *> layout;
          Value source = narrow.getX();
          while (isa_and_nonnull<nn::TransposeOp, nn::ReshapeOp>(
                     source.getDefiningOp()) &&
                 derived.contains(source.getDefiningOp())) {
            layout.push_back(source.getDefiningOp());
            source = layout.back()->getOperand(0);
          }
          Type half = narrow.getType().getElementType();
          auto it = wholeType.find(source);
          if (it != wholeType.end() && isa<FloatType>(half) &&
              half.getIntOrFloatBitWidth() <
                  it->second.getElementType().getIntOrFloatBitWidth()) {
            auto blockType = cast<RankedTensorType>(source.getType());
            Value halfBlock =
                halfCopies ? halfCopyOf(func, cast<BlockArgument>(source),
                                        it->second, half)
                           : nn::CastOp::create(b, m.loc, blockType.clone(half),
                                                source)
                                 .getResult();
            Value gathered = gatherWhole(halfBlock, it->second.clone(half));
            Value whole = m.relayout(layout, gathered);
            copies.map(value, whole);
            return whole;
          }
        }
        for (Value operand : def->getOperands())
          materialize(operand);
        Operation *clone = b.clone(*def, copies);
        return clone->getResult(cast<OpResult>(value).getResultNumber());
      };
      for (OpOperand &use : user->getOpOperands()) {
        Value value = use.get();
        Operation *def = value.getDefiningOp();
        if (!wholeType.count(value) && !(def && derived.contains(def)))
          continue;
        if (isa<func::ReturnOp>(user) && wholeType.count(value))
          return user->emitError(
              "ZeRO stage 3 cannot return a sharded parameter as it is");
        b.setInsertionPoint(user);
        use.set(materialize(value));
      }
    }
    for (Operation *op : llvm::reverse(derived)) {
      if (!op->use_empty())
        return op->emitOpError("computes from sharded parameters alone and is "
                               "still read by ")
               << (*op->user_begin())->getName()
               << " after ZeRO stage 3 gave every reader its own copy";
      op->erase();
    }
    func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                   func.getResultTypes()));
    return success();
  }

  /// The persistent half block of the sharded parameter `param` (whole:
  /// `full`) in `half`: a `state` argument made on first use.
  Value halfCopyOf(func::FuncOp func, BlockArgument param,
                   RankedTensorType full, Type half) {
    Value &copy = halfCopy[param];
    if (copy)
      return copy;
    StringRef name = train::bindingName(func, param.getArgNumber());
    std::string suffix = half.isBF16() ? ".bf16" : ".fp16";
    auto blockType = cast<RankedTensorType>(param.getType()).clone(half);
    copy = train::appendBoundArgument(func, blockType, (name + suffix).str(),
                                      train::BindingRole::State);
    Builder b(func.getContext());
    unsigned index = cast<BlockArgument>(copy).getArgNumber();
    func.setArgAttr(index, dist::DistDialect::kFullShapeAttr,
                    b.getDenseI64ArrayAttr(full.getShape()));
    func.setArgAttr(index, train::kCopyOfAttr, b.getStringAttr(name));
    return copy;
  }

  /// Stage 3, the training step: sharded parameters' gradients are
  /// reduce-scattered in buckets (each parameter's block of the mean
  /// gradient), their states are blocks, and their updates run on blocks;
  /// whole (persistent) parameters are updated as in stage 0.
  LogicalResult shardParameters(func::FuncOp func,
                                MutableArrayRef<Update> updates,
                                train::ClipByGlobalNormOp clip) {
    int64_t n = worldSize;
    // Stages 1 and 2 shard every updated parameter's gradient and state
    // (the parameter itself stays whole); stage 3 those above the
    // persistence threshold, parameters included.
    SmallVector<Update *> sharded, whole;
    for (Update &u : updates)
      (stage < 3 || shardsParameter(func, u.param.getArgNumber()) ? sharded
                                                                  : whole)
          .push_back(&u);
    for (Update *u : sharded)
      if (cast<RankedTensorType>(u->param.getType()).getElementType() !=
          cast<RankedTensorType>(sharded.front()->param.getType())
              .getElementType())
        return u->op->emitError("ZeRO stage ")
               << unsigned(stage)
               << " needs the parameters of a step in one element type";

    // The update point: where the first update (or the clip) was.
    Operation *first = updates.front().op;
    for (Update &u : updates)
      if (u.op->isBeforeInBlock(first))
        first = u.op;
    Operation *updateStart = clip ? clip.getOperation() : first;

    // Whole parameters: the mean gradient, as in stage 0.
    reduceBuckets(func, bucketsOf(whole));

    // Sharded ones: a bucket is each gradient padded to n blocks and laid
    // out as [n, block], joined along the blocks, so that the
    // reduce-scatter hands rank r block r of every gradient in the bucket.
    OpBuilder b(func.getContext());
    Location loc = NameLoc::get(b.getStringAttr("zero"), func.getLoc());
    DenseMap<Operation *, Value> gradBlock;
    SmallVector<SmallVector<Update *>> buckets = bucketsOf(sharded);
    for (ArrayRef<Update *> bucket : buckets) {
      // Stage 1 keeps the whole gradients until the backward is done;
      // stages 2 and 3 free them as the backward goes.
      if (stage == 1)
        b.setInsertionPoint(updateStart);
      else
        setAfterBucket(b, func.getBody().front(), bucket);
      Build m{b, loc};
      Type element = Build::elementOf(bucket.front()->reduced());
      SmallVector<Value> rows;
      int64_t width = 0;
      for (Update *u : bucket) {
        int64_t block = blockOf(u->elements);
        Value flat = m.concat({u->reduced()}, block * n - u->elements);
        rows.push_back(
            m.reshape(flat, RankedTensorType::get({n, block}, element)));
        width += block;
      }
      Value joined =
          rows.size() == 1
              ? rows.front()
              : Value(nn::ConcatOp::create(b, loc, rows, uint64_t(1)));
      Value flat = toComm(m, m.reshape(joined, flatType(n * width, element)));
      Value mine = fromComm(
          m,
          dist::ReduceScatterOp::create(
              b, loc,
              flatType(width,
                       cast<RankedTensorType>(flat.getType()).getElementType()),
              flat, n),
          element);
      int64_t offset = 0;
      for (Update *u : bucket) {
        int64_t block = blockOf(u->elements);
        Value part = m.slice(mine, offset, block);
        gradBlock[u->op] = meanOf(m, u, part);
        offset += block;
      }
    }

    b.setInsertionPoint(updateStart);
    Build m{b, loc};
    auto gradOf = [&](Update *u) {
      return gradBlock.count(u->op) ? gradBlock[u->op] : u->gradUse->get();
    };
    if (clip) {
      // The squares of the blocks summed over ranks, plus the whole
      // gradients' (equal on every rank).
      Type element = cast<RankedTensorType>(updates.front().param.getType())
                         .getElementType();
      Value shardTotal, wholeTotal;
      for (Update *u : sharded) {
        Value squares = m.sumOfSquares(gradOf(u));
        shardTotal = shardTotal ? m.add(shardTotal, squares) : squares;
      }
      for (Update *u : whole) {
        Value squares = m.sumOfSquares(gradOf(u));
        wholeTotal = wholeTotal ? m.add(wholeTotal, squares) : squares;
      }
      Value total;
      if (shardTotal)
        total = dist::AllReduceOp::create(b, loc, shardTotal.getType(),
                                          shardTotal, n);
      if (wholeTotal)
        total = total ? m.add(total, wholeTotal) : wholeTotal;
      double maxNorm = clip.getMaxNorm().convertToDouble();
      Value norm = nn::SqrtOp::create(b, loc, total);
      // The trainer's grad_norm reads the norm over every rank's blocks.
      clip.getNorm().replaceAllUsesWith(norm);
      Value factor = nn::DivOp::create(b, loc, m.scalar(maxNorm, element),
                                       m.add(norm, m.scalar(1e-6, element)));
      factor = nn::MinOp::create(b, loc, factor, m.scalar(1.0, element));
      for (Update &u : updates) {
        Value clipped = m.mul(gradOf(&u), factor);
        if (gradBlock.count(u.op))
          gradBlock[u.op] = clipped;
        else
          u.op->setOperand(1, clipped);
      }
    } else {
      for (Update *u : whole)
        u->op->setOperand(1, u->gradUse->get());
    }

    // Stage 3: the parameters become blocks and their other uses read
    // gathered copies. Stages 1 and 2: so do the masters of half working
    // copies (gathered once); each other update reads this rank's block of
    // its whole parameter.
    // From here on the sharded updates read their gradient blocks, and the
    // clip (folded into those blocks and the whole gradients) is gone:
    // nothing reads the whole gradients any more, so stage 3 may drop what
    // computed them from parameters alone.
    for (Update *u : sharded)
      u->op->setOperand(1, gradBlock[u->op]);
    if (clip) {
      clip.erase();
      clip = {};
    }
    SmallVector<Operation *> shardedOps =
        llvm::map_to_vector(sharded, [](Update *u) { return u->op; });
    if (failed(gatherParameters(func, shardedOps, /*halfCopies=*/stage == 3)))
      return failure();
    auto isBlock = [&](Update *u) {
      return bool(func.getArgAttr(u->param.getArgNumber(),
                                  dist::DistDialect::kFullShapeAttr));
    };
    for (Update *u : sharded) {
      Operation *op = u->op;
      auto full = cast<RankedTensorType>(op->getOperand(0).getType());
      auto blockType =
          isBlock(u) ? cast<RankedTensorType>(u->param.getType())
                     : flatType(blockOf(u->elements), full.getElementType());
      if (!isBlock(u)) {
        b.setInsertionPoint(op);
        Build m{b, loc};
        Value padded =
            m.concat({u->param}, blockOf(u->elements) * n - u->elements);
        op->setOperand(0, dist::ShardOp::create(b, loc, blockType, padded, n));
      }
      // The states: those of the parameter's size become blocks like it
      // (8-bit codes keep their element type); an 8-bit state's scales,
      // one per 256 elements, the scales of this rank's block (its blocks
      // start at multiples of 256: shard-alignment).
      int64_t block = blockType.getNumElements();
      for (unsigned i = 2, e = op->getNumOperands(); i < e; ++i) {
        auto arg = dyn_cast<BlockArgument>(op->getOperand(i));
        if (!arg || !train::hasRole(func, arg.getArgNumber(),
                                    train::BindingRole::State))
          continue;
        auto type = cast<RankedTensorType>(arg.getType());
        func.setArgAttr(arg.getArgNumber(), dist::DistDialect::kFullShapeAttr,
                        b.getDenseI64ArrayAttr(type.getShape()));
        arg.setType(
            type.getNumElements() == u->elements
                ? flatType(block, type.getElementType())
                : flatType(train::scalesOf8bit(block), type.getElementType()));
      }
      if (auto adam = dyn_cast<train::Adam8bitOp>(op)) {
        if (block % train::k8bitBlock != 0)
          return op->emitError("ztc-zero: a block of ")
                 << block << " elements splits the 8-bit state's blocks of "
                 << train::k8bitBlock
                 << "; run with shard-alignment=" << train::k8bitBlock;
        for (auto [result, operand] : adam.replacedOperands())
          result.setType(operand == adam.getParam() ? blockType
                                                    : operand.getType());
      } else {
        for (Value result : op->getResults())
          result.setType(blockType);
      }
    }

    // Stage 3: each persistent half block is the updated block, rounded.
    SmallVector<std::pair<Value, Value>> newCopies;
    for (Update *u : sharded) {
      Value copy = halfCopy.lookup(u->param);
      if (!copy)
        continue;
      b.setInsertionPointAfter(u->op);
      newCopies.push_back({copy, nn::CastOp::create(b, loc, copy.getType(),
                                                    u->op->getResult(0))});
    }
    if (failed(train::returnUpdates(func, newCopies)))
      return func.emitError("cannot return the half parameter blocks");

    // Stages 1 and 2: every bucket's updated blocks of whole parameters
    // gathered, laid out as [n, block] per parameter like the
    // reduce-scatter's, and each parameter written back whole. (A sharded
    // master stays a block: the next step gathers its half copy.)
    if (stage < 3) {
      auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
      b.setInsertionPoint(ret);
      Build m{b, loc};
      for (ArrayRef<Update *> reduced : buckets) {
        SmallVector<Update *> bucket = llvm::to_vector(llvm::make_filter_range(
            reduced, [&](Update *u) { return !isBlock(u); }));
        if (bucket.empty())
          continue;
        SmallVector<Value> blocks = llvm::map_to_vector(
            bucket, [](Update *u) -> Value { return u->op->getResult(0); });
        Value joined = m.concat(blocks, 0);
        int64_t width = cast<RankedTensorType>(joined.getType()).getDimSize(0);
        Type element =
            cast<RankedTensorType>(joined.getType()).getElementType();
        Value all = dist::AllGatherOp::create(
            b, loc, flatType(n * width, element), joined, n);
        Value rows = m.reshape(all, RankedTensorType::get({n, width}, element));
        int64_t offset = 0;
        for (Update *u : bucket) {
          int64_t block = blockOf(u->elements);
          Value columns =
              bucket.size() == 1
                  ? rows
                  : Value(nn::SliceOp::create(
                        b, loc, rows, ArrayRef<int64_t>{0, offset},
                        ArrayRef<int64_t>{n, block}, ArrayRef<int64_t>{1, 1}));
          offset += block;
          Value flat = m.reshape(columns, flatType(n * block, element));
          Value whole = m.reshape(m.slice(flat, 0, u->elements),
                                  cast<RankedTensorType>(u->param.getType()));
          u->op->getResult(0).replaceUsesWithIf(whole, [&](OpOperand &use) {
            return isa<func::ReturnOp>(use.getOwner());
          });
        }
      }
    }
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    func.setType(FunctionType::get(func.getContext(),
                                   func.getBody().front().getArgumentTypes(),
                                   ret.getOperandTypes()));
    return success();
  }

  /// Where a bucket's collective goes: after its last gradient.
  static void setAfterBucket(OpBuilder &b, Block &block,
                             ArrayRef<Update *> bucket) {
    Operation *last = nullptr;
    for (Update *u : bucket)
      if (Operation *def = u->reduced().getDefiningOp())
        if (!last || last->isBeforeInBlock(def))
          last = def;
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&block);
  }

  /// Stage 0: every gradient becomes the mean over ranks.
  void reduceBuckets(func::FuncOp func,
                     ArrayRef<SmallVector<Update *>> buckets) {
    OpBuilder b(func.getContext());
    for (ArrayRef<Update *> bucket : buckets) {
      setAfterBucket(b, func.getBody().front(), bucket);
      Build m{b, NameLoc::get(b.getStringAttr("zero.bucket"), func.getLoc())};
      Type element = Build::elementOf(bucket.front()->reduced());
      SmallVector<Value> grads =
          llvm::map_to_vector(bucket, [](Update *u) { return u->reduced(); });
      Value joined = toComm(m, m.concat(grads, 0));
      Value reduced = dist::AllReduceOp::create(b, m.loc, joined.getType(),
                                                joined, worldSize);
      Value sum = fromComm(m, reduced, element);
      int64_t offset = 0;
      for (Update *u : bucket) {
        auto type = cast<RankedTensorType>(u->reduced().getType());
        Value part =
            bucket.size() == 1 ? sum : m.slice(sum, offset, u->elements);
        Value whole = m.reshape(part, type.clone(element));
        u->gradUse->set(meanOf(m, u, whole));
        offset += u->elements;
      }
    }
  }

  /// Every rank's new BatchNorm statistics become their mean, so the ranks'
  /// buffers stay equal.
  void averageBuffers(func::FuncOp func) {
    if (worldSize == 1)
      return;
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    llvm::StringMap<unsigned> argByName;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      argByName[train::bindingName(func, i)] = i;
    OpBuilder b(ret);
    Build m{b, NameLoc::get(b.getStringAttr("zero.buffers"), ret.getLoc())};
    for (unsigned i = 0, e = ret.getNumOperands(); i < e; ++i) {
      auto of = func.getResultAttrOfType<StringAttr>(i, train::kUpdateOfAttr);
      if (!of || !argByName.count(of.getValue()) ||
          !train::hasRole(func, argByName[of.getValue()],
                          train::BindingRole::Buffer))
        continue;
      Value value = ret.getOperand(i);
      Value sum = dist::AllReduceOp::create(b, m.loc, value.getType(), value,
                                            worldSize);
      ret.setOperand(i, m.scale(sum, 1.0 / double(worldSize)));
    }
  }
};

} // namespace
