//===- Passes.h - every ztc pass --------------------------------*- C++ -*-===//
//
// Declarations and registration of all ztc passes and pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_PASSES_H
#define ZTC_PASSES_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Kernel/IR/KernelOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "dialects/Train/IR/TrainOps.h"
#include "passes/OptionEnums.h"

namespace mlir::ztc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Registers every ztc pass and pipeline with the global registry.
void registerAllPasses();

/// Registers every dialect ztc tools parse or produce.
void registerAllDialects(DialectRegistry &registry);

} // namespace mlir::ztc

#endif // ZTC_PASSES_PASSES_H
