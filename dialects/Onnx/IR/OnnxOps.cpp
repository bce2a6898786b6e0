//===- OnnxOps.cpp - onnx dialect -----------------------------------------===//
//
// Registration and verifiers of the onnx dialect. The ops are deliberately
// generic: node semantics live in the conversion to `nn`.
//
//===----------------------------------------------------------------------===//

#include "dialects/Onnx/IR/OnnxOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::ztc::onnx;

#include "dialects/Onnx/IR/OnnxOpsDialect.cpp.inc"

void OnnxDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Onnx/IR/OnnxOps.cpp.inc"
      >();
}

LogicalResult NodeOp::verify() {
  if (getOpType().empty())
    return emitOpError("needs a non-empty op_type");
  if (getOpset() < 1)
    return emitOpError("opset must be at least 1, got ") << getOpset();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

#define GET_OP_CLASSES
#include "dialects/Onnx/IR/OnnxOps.cpp.inc"
