//===- TrainOps.h - train dialect ---------------------------------*- C++
//-*-===//
//
// The train dialect: optimizer updates, gradient clipping and the roles of a
// training step's arguments and results.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_TRAIN_IR_TRAINOPS_H
#define ZTC_DIALECTS_TRAIN_IR_TRAINOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Train/IR/TrainOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/Train/IR/TrainOps.h.inc"

namespace mlir::ztc::train {

/// Argument attributes: optimizer state, host-written hyperparameter.
inline constexpr llvm::StringLiteral kStateAttr = "train.state";
inline constexpr llvm::StringLiteral kHyperAttr = "train.hyper";
/// Result attributes: the parameter a gradient belongs to; the argument a
/// result is the new value of.
inline constexpr llvm::StringLiteral kGradOfAttr = "train.grad_of";
inline constexpr llvm::StringLiteral kUpdateOfAttr = "train.update_of";
/// Function attributes.
inline constexpr llvm::StringLiteral kLossAttr = "train.loss";
inline constexpr llvm::StringLiteral kBuffersAttr = "train.buffers";
inline constexpr llvm::StringLiteral kNoGradAttr = "train.no_grad";

/// Drops the results of `func` tagged `train.update_of` (state updates such
/// as running statistics) and the ops only they used: a function that must
/// leave every argument as it was (loss and gradients, forward inference).
void eraseUpdateResults(func::FuncOp func);

} // namespace mlir::ztc::train

#endif // ZTC_DIALECTS_TRAIN_IR_TRAINOPS_H
