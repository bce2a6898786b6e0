//===- ZeroBuckets.cpp - ztc-zero's buckets and blocks --------------------===//
//
// What every ZeRO stage reduces gradients with: buckets of gradients in
// the order the backward completes them and where their collective goes,
// each rank's block of a sharded tensor (its size and alignment), the
// communication type, and the mean gradient an update reads.
//
//===----------------------------------------------------------------------===//

#include "passes/Dist/ZeroInternal.h"

#include "dialects/NN/IR/ShapeLimits.h"

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::zero;

RankedTensorType mlir::ztc::zero::flatType(int64_t n, Type element) {
  return RankedTensorType::get({n}, element);
}

SmallVector<SmallVector<Update *>>
Rewriter::bucketsOf(ArrayRef<Update *> updates) {
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

int64_t Rewriter::blockOf(int64_t elements) {
  int64_t block = (elements + worldSize - 1) / worldSize;
  int64_t align = std::max<int64_t>(shardAlignment, 1);
  return (block + align - 1) / align * align;
}

void Rewriter::setAfterBucket(OpBuilder &b, Block &block,
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

Type Rewriter::commType(MLIRContext *context) {
  switch (commDtype) {
  case CommType::Bf16:
    return BFloat16Type::get(context);
  case CommType::Fp16:
    return Float16Type::get(context);
  case CommType::Fp32:
    return Float32Type::get(context);
  case CommType::Auto:
    return nullptr;
  }
  llvm_unreachable("a communication type");
}

Value Rewriter::toComm(Build &m, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  Type comm = commType(value.getContext());
  if (!comm || comm == type.getElementType())
    return value;
  return nn::CastOp::create(m.b, m.loc, type.clone(comm), value);
}

Value Rewriter::fromComm(Build &m, Value value, Type element) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == element)
    return value;
  return nn::CastOp::create(m.b, m.loc, type.clone(element), value);
}

Value Rewriter::meanOf(Build &m, Update *u, Value part) {
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
