//===- DistOps.h - dist dialect ---------------------------------*- C++ -*-===//
//
// The dist dialect: collectives between the ranks of one SPMD step.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_DIST_IR_DISTOPS_H
#define ZTC_DIALECTS_DIST_IR_DISTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Dist/IR/DistOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/Dist/IR/DistOps.h.inc"

#endif // ZTC_DIALECTS_DIST_IR_DISTOPS_H
