//===- ZeroInternal.h - what ztc-zero's parts share -------------*- C++ -*-===//
//
// ztc-zero in five files: the pass, which finds the step's updates and
// dispatches by stage (Zero.cpp); gradient buckets, shard blocks and the
// communication type (ZeroBuckets.cpp); stage 0's all-reduce and buffer
// averaging (ZeroDataParallel.cpp); the sharded training step of stages 1
// to 3 (ZeroShardUpdates.cpp); and sharded parameters gathered where they
// are read (ZeroGatherParameters.cpp). This private header is what they
// share.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_DIST_ZEROINTERNAL_H
#define ZTC_PASSES_DIST_ZEROINTERNAL_H

#include "passes/Arithmetic.h"
#include "passes/Passes.h"

#include "llvm/ADT/DenseMap.h"

#include <cstdint>

namespace mlir::ztc::zero {

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
  /// (marked `train.half_gradient_of`); null and empty otherwise (the
  /// initializers let the pass list only the fields before them).
  Value half = {};
  SmallVector<Operation *> widening = {};

  /// What the collectives reduce: the half gradient when there is one.
  Value reduced() const { return half ? half : gradUse->get(); }
};

/// Builders at one insertion point.
using Build = Arithmetic;

/// A flat tensor of `n` elements of `element`.
RankedTensorType flatType(int64_t n, Type element);

/// The rewrites of one ztc-zero run on one function. They read the pass's
/// options under the pass's names (hence the base) and record the half
/// blocks they add, which live no longer than the run.
struct Rewriter : public ZeroPassOptions {
  explicit Rewriter(ZeroPassOptions options)
      : ZeroPassOptions(std::move(options)) {}

  // Buckets, shard blocks and the communication type (ZeroBuckets.cpp).

  /// Groups `updates` (in backward order) into buckets of at most
  /// reduce-bucket-bytes (or reduce-bucket-elements) of gradient, each of
  /// one element type (as
  /// DeepSpeed groups by dtype): under mixed precision the half gradients
  /// and the f32 ones (normalization weights) fill buckets of their own.
  SmallVector<SmallVector<Update *>> bucketsOf(ArrayRef<Update *> updates);

  /// The block of each rank: ceil(n / world-size) elements, rounded up to
  /// a multiple of shard-alignment.
  int64_t blockOf(int64_t elements);

  /// Where a bucket's collective goes: after its last gradient.
  static void setAfterBucket(OpBuilder &b, Block &block,
                             ArrayRef<Update *> bucket);

  /// The element type gradients are reduced in: comm-dtype, or null for
  /// the gradients' own.
  Type commType(MLIRContext *context);

  /// `value` cast to the communication type (when there is one).
  Value toComm(Build &m, Value value);

  /// A reduced `value` back in `element`, the gradients' type.
  Value fromComm(Build &m, Value value, Type element);

  /// `part`, `u`'s share of a reduced bucket (the sum over the ranks), as
  /// the mean gradient the update reads: a half gradient is widened (and
  /// unscaled) as ztc-autodiff did, then divided by the world size; those
  /// ops stay marked, so ztc-half-gradients moves them to the readers and
  /// the reduced half gradient is what waits for the update.
  Value meanOf(Build &m, Update *u, Value part);

  // Stage 0 and buffers (ZeroDataParallel.cpp).

  /// Stage 0: every gradient becomes the mean over ranks.
  void reduceBuckets(func::FuncOp func,
                     ArrayRef<SmallVector<Update *>> buckets);

  /// Every rank's new BatchNorm statistics become their mean, so the ranks'
  /// buffers stay equal.
  void averageBuffers(func::FuncOp func);

  // The sharded training step of stages 1 to 3 (ZeroShardUpdates.cpp).

  /// Stage 3, the training step: sharded parameters' gradients are
  /// reduce-scattered in buckets (each parameter's block of the mean
  /// gradient), their states are blocks, and their updates run on blocks;
  /// whole (persistent) parameters are updated as in stage 0.
  LogicalResult shardParameters(func::FuncOp func,
                                MutableArrayRef<Update> updates,
                                train::ClipByGlobalNormOp clip);

  // Sharded parameters and their gathers (ZeroGatherParameters.cpp).

  /// Stage 3 shards a parameter with at least param-persistence-threshold
  /// elements; smaller ones stay whole on every rank. Stages 1 and 2, under
  /// mixed precision, shard the f32 master of a parameter the step reads
  /// only as its half working copy: each step gathers that copy in half,
  /// once, and it lives until the backward's last use (as the copy cast
  /// from a whole master did), so the master costs 4/N bytes per element
  /// instead of 4, the ZeRO paper's 2 + 2 + 12/N at stage 1.
  bool shardsParameter(func::FuncOp func, unsigned index);

  /// Whether every read of `param` other than its update is a cast to a
  /// narrower float, perhaps after transposes and reshapes (and there is
  /// one): the parameter is read only as its half working copy.
  static bool onlyNarrowed(Value param);

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
                                 bool halfCopies);

  /// The persistent half block of the sharded parameter `param` (whole:
  /// `full`) in `half`: a `state` argument made on first use.
  Value halfCopyOf(func::FuncOp func, BlockArgument param,
                   RankedTensorType full, Type half);

  /// Stage 3, the training step: each sharded parameter whose half working
  /// copy is gathered, and its persistent half block (halfCopyOf).
  DenseMap<Value, Value> halfCopy;
};

} // namespace mlir::ztc::zero

#endif // ZTC_PASSES_DIST_ZEROINTERNAL_H
