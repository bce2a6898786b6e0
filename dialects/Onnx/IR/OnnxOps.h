//===- OnnxOps.h - onnx dialect ---------------------------------*- C++ -*-===//
//
// The onnx dialect: an ONNX graph as imported, one generic op per node.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_ONNX_IR_ONNXOPS_H
#define ZTC_DIALECTS_ONNX_IR_ONNXOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Onnx/IR/OnnxOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/Onnx/IR/OnnxOps.h.inc"

#endif // ZTC_DIALECTS_ONNX_IR_ONNXOPS_H
