//===- Zero.cpp - the ztc-zero pass ---------------------------------------===//
//
// Data parallelism (stage 0) and ZeRO stages 1 to 3 on the training step:
// gradient buckets, their collectives, sharded optimizer states, the
// all-gather of the updated parameters, and at stage 3 parameters held in
// shards and gathered where each entry reads them. See the pass
// description in Passes.td.
//
// This file holds the pass: it checks the options, finds the step's
// updates and dispatches by stage to the rewrites in ZeroBuckets.cpp,
// ZeroDataParallel.cpp, ZeroShardUpdates.cpp and ZeroGatherParameters.cpp,
// which share ZeroInternal.h.
//
//===----------------------------------------------------------------------===//

#include "passes/Dist/ZeroInternal.h"
#include "passes/Passes.h"

#include "llvm/ADT/DenseMap.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_ZEROPASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::zero;

namespace {

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

struct ZeroPass : public ztc::impl::ZeroPassBase<ZeroPass> {
  using ZeroPassBase::ZeroPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    StringRef entry = train::entryKind(func);
    zero::Rewriter rewriter(options());
    // Stage 3: every entry holds its parameters in shards and gathers them
    // for each use; the training step also reduces and updates shards.
    // Stages 1 and 2 shard the f32 masters of half working copies, gathered
    // once per step (see shardsParameter).
    if (stage != ZeroStage::DataParallel && !entry.empty() &&
        entry != "train_step") {
      if (worldSize == 1)
        return;
      if (failed(rewriter.gatherParameters(func, {}, /*halfCopies=*/false)))
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
    if (reduceBucketBytes < 1) {
      func.emitError("reduce-bucket-bytes must be positive, got ")
          << int64_t(reduceBucketBytes);
      return signalPassFailure();
    }
    if ((stage == ZeroStage::DataParallel || stage == ZeroStage::Parameters) &&
        worldSize == 1)
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
    SmallVector<SmallVector<Update *>> buckets = rewriter.bucketsOf(
        llvm::map_to_vector(updates, [](Update &u) { return &u; }));

    if (stage == ZeroStage::DataParallel) {
      rewriter.reduceBuckets(func, buckets);
    } else if (failed(rewriter.shardParameters(func, updates, clip))) {
      return signalPassFailure();
    }
    rewriter.averageBuffers(func);
    // The half gradients' widening was redone after their collectives.
    for (Update &u : updates)
      for (Operation *op : llvm::reverse(u.widening))
        if (op->use_empty())
          op->erase();
  }

  /// The options, for the rewrites of one run.
  ZeroPassOptions options() const {
    ZeroPassOptions result;
    result.stage = stage;
    result.worldSize = worldSize;
    result.reduceBucketBytes = reduceBucketBytes;
    result.reduceBucketElements = reduceBucketElements;
    result.commDtype = commDtype;
    result.paramPersistenceThreshold = paramPersistenceThreshold;
    result.shardAlignment = shardAlignment;
    return result;
  }

  /// Records the world size and stage on the step (the manifest's).
  void markStep(func::FuncOp func) {
    Builder attrs(func.getContext());
    func->setAttr(dist::DistDialect::kWorldSizeAttr,
                  attrs.getI64IntegerAttr(worldSize));
    func->setAttr(dist::DistDialect::kZeroStageAttr,
                  attrs.getI64IntegerAttr(stageNumber(stage)));
  }
};

} // namespace
