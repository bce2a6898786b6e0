//===- DistOps.cpp - dist dialect -----------------------------------------===//
//
// Registration and the shape checks of the collectives.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/IR/DistOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::ztc::dist;

#include "dialects/Dist/IR/DistOpsDialect.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Dist/IR/DistOps.cpp.inc"
      >();
}

LogicalResult DistDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto value = dyn_cast<IntegerAttr>(attr.getValue());
  if (name == kWorldSizeAttr) {
    if (!value || value.getInt() < 1)
      return op->emitError("'") << name << "' must be an integer >= 1";
    return success();
  }
  if (name == kZeroStageAttr) {
    if (!value || value.getInt() < 0 || value.getInt() > 3)
      return op->emitError("'") << name << "' must be an integer in 0-3";
    return success();
  }
  if (name == kUseAttr) {
    if (!value || value.getInt() < 0 || !isa<AllGatherOp>(op))
      return op->emitError("'") << name
                                << "' must be a non-negative integer on a "
                                   "dist.all_gather";
    return success();
  }
  return op->emitError("unknown dist attribute '") << name << "'";
}

LogicalResult DistDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned index,
                                                    NamedAttribute attr) {
  if (attr.getName() != kFullShapeAttr)
    return op->emitError("unknown dist argument attribute '")
           << attr.getName().getValue() << "'";
  auto shape = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
  if (!shape ||
      llvm::any_of(shape.asArrayRef(), [](int64_t d) { return d < 0; }))
    return op->emitError("'") << kFullShapeAttr << "' of argument " << index
                              << " must be an array of sizes";
  return success();
}

namespace {

LogicalResult verifyWorld(Operation *op, int64_t worldSize) {
  if (worldSize < 1)
    return op->emitOpError("world_size must be at least 1, got ") << worldSize;
  return success();
}

/// `whole` = world_size blocks of `block`: the shapes of a reduce-scatter,
/// a shard (whole -> block) and an all-gather (block -> whole).
LogicalResult verifyBlocks(Operation *op, Value whole, Value block,
                           int64_t worldSize) {
  if (failed(verifyWorld(op, worldSize)))
    return failure();
  auto wholeType = cast<RankedTensorType>(whole.getType());
  auto blockType = cast<RankedTensorType>(block.getType());
  if (wholeType.getElementType() != blockType.getElementType())
    return op->emitOpError("changes the element type from ")
           << cast<RankedTensorType>(op->getOperand(0).getType())
                  .getElementType()
           << " to "
           << cast<RankedTensorType>(op->getResult(0).getType())
                  .getElementType();
  if (wholeType.getDimSize(0) != blockType.getDimSize(0) * worldSize)
    return op->emitOpError("needs ")
           << worldSize << " blocks of " << blockType.getDimSize(0)
           << " elements (" << blockType.getDimSize(0) * worldSize
           << "), but the whole has " << wholeType.getDimSize(0);
  return success();
}

} // namespace

LogicalResult AllReduceOp::verify() {
  return verifyWorld(*this, getWorldSize());
}

LogicalResult ReduceScatterOp::verify() {
  return verifyBlocks(*this, getX(), getResult(), getWorldSize());
}

LogicalResult AllGatherOp::verify() {
  return verifyBlocks(*this, getResult(), getX(), getWorldSize());
}

LogicalResult ShardOp::verify() {
  return verifyBlocks(*this, getX(), getResult(), getWorldSize());
}

#define GET_OP_CLASSES
#include "dialects/Dist/IR/DistOps.cpp.inc"
