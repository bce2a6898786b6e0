//===- ZeroShardUpdates.cpp - ztc-zero's sharded training step ------------===//
//
// Stages 1 to 3 on the training step: sharded gradients reduce-scattered
// in buckets, global-norm clipping over every rank's blocks, updates and
// optimizer states on this rank's blocks, and at stages 1 and 2 the
// updated parameters gathered back whole.
//
//===----------------------------------------------------------------------===//

#include "passes/Dist/ZeroInternal.h"

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::zero;

LogicalResult Rewriter::shardParameters(func::FuncOp func,
                                        MutableArrayRef<Update> updates,
                                        train::ClipByGlobalNormOp clip) {
  int64_t n = worldSize;
  // Stages 1 and 2 shard every updated parameter's gradient and state
  // (the parameter itself stays whole); stage 3 those above the
  // persistence threshold, parameters included.
  SmallVector<Update *> sharded, whole;
  for (Update &u : updates)
    (stage < ZeroStage::Parameters ||
             shardsParameter(func, u.param.getArgNumber())
         ? sharded
         : whole)
        .push_back(&u);
  for (Update *u : sharded)
    if (cast<RankedTensorType>(u->param.getType()).getElementType() !=
        cast<RankedTensorType>(sharded.front()->param.getType())
            .getElementType())
      return u->op->emitError("ZeRO stage ")
             << stageNumber(stage)
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
    if (stage == ZeroStage::OptimizerStates)
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
    Value joined = rows.size() == 1
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
  if (failed(gatherParameters(func, shardedOps,
                              /*halfCopies=*/stage == ZeroStage::Parameters)))
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
      if (!arg ||
          !train::hasRole(func, arg.getArgNumber(), train::BindingRole::State))
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
  if (stage < ZeroStage::Parameters) {
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
      Type element = cast<RankedTensorType>(joined.getType()).getElementType();
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
