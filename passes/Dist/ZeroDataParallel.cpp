//===- ZeroDataParallel.cpp - ztc-zero's stage 0 and buffers --------------===//
//
// Data parallelism: every gradient bucket all-reduced into the mean over
// ranks (stage 0, and the parameters that stay whole at stage 3), and the
// BatchNorm statistics averaged so that the ranks' buffers stay equal.
//
//===----------------------------------------------------------------------===//

#include "passes/Dist/ZeroInternal.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::zero;

void Rewriter::reduceBuckets(func::FuncOp func,
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
      Value part = bucket.size() == 1 ? sum : m.slice(sum, offset, u->elements);
      Value whole = m.reshape(part, type.clone(element));
      u->gradUse->set(meanOf(m, u, whole));
      offset += u->elements;
    }
  }
}

void Rewriter::averageBuffers(func::FuncOp func) {
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
    Value sum =
        dist::AllReduceOp::create(b, m.loc, value.getType(), value, worldSize);
    ret.setOperand(i, m.scale(sum, 1.0 / double(worldSize)));
  }
}
