//===- TrainOps.h - train dialect -------------------------------*- C++ -*-===//
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
#include "dialects/Train/IR/TrainOpsEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Train/IR/TrainOpsAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/Train/IR/TrainOps.h.inc"

namespace mlir::ztc::train {

/// Argument attribute: the argument's BindingAttr (name and role).
inline constexpr llvm::StringLiteral kBindingAttr = "train.binding";
/// Argument attribute: a `state`'s value before the first step (a splat
/// DenseElementsAttr), where zero is not it: the dynamic loss scale.
inline constexpr llvm::StringLiteral kInitialAttr = "train.initial";
/// Argument attribute: a `param` that starts from uniform random values in
/// [-bound, bound] rather than from an ONNX initializer (a LoRA adapter):
/// {bound = f64, seed = i64}. Element i of the whole tensor is
/// -bound + 2 * bound * uniformAt(streamBase(seed, 0), i)
/// (runtime/kernels/Random.h), whatever the shard layout; a bound of 0
/// gives zeros.
inline constexpr llvm::StringLiteral kInitialUniformAttr =
    "train.initial_uniform";
/// Argument attribute (unit): a `param` the step does not train, although
/// no --freeze pattern names it (ztc-lora freezes the base model).
inline constexpr llvm::StringLiteral kFrozenAttr = "train.frozen";
/// Argument attribute (QLoRA): a frozen `param` held in 4-bit NormalFloat,
/// array<i64: rows, cols> the shape of the model's weight. ztc-lora tags
/// the float weight; ztc-nf4-weights makes the argument its packed codes
/// (i8) and adds `<name>.absmax`, `<name>.nested_absmax` and
/// `<name>.offset`; `ztc compile` quantizes the model's value into them.
inline constexpr llvm::StringLiteral kNf4Attr = "train.nf4";
/// Argument attribute (ZeRO stage 3, mixed precision): the `state` is a
/// rounded copy of the named `param`, in its own element type and with the
/// param's shard layout. The runtime writes it whenever the param is set
/// (initial values, a resumed checkpoint); the step that updates the param
/// returns its new copy. Checkpoints leave it out.
inline constexpr llvm::StringLiteral kCopyOfAttr = "train.copy_of";
/// The binding of the dynamic loss scale (a rank-0 f32 `state`) and of the
/// states ztc-loss-scale keeps beside it.
inline constexpr llvm::StringLiteral kLossScaleName = "loss_scale";
/// Result attributes: the parameter a gradient belongs to; the argument a
/// result is the new value of.
inline constexpr llvm::StringLiteral kGradOfAttr = "train.grad_of";
inline constexpr llvm::StringLiteral kUpdateOfAttr = "train.update_of";
/// Function attributes.
inline constexpr llvm::StringLiteral kLossAttr = "train.loss";
inline constexpr llvm::StringLiteral kBuffersAttr = "train.buffers";
inline constexpr llvm::StringLiteral kNoGradAttr = "train.no_grad";
/// Function attribute (ztc-attach-loss, cross_entropy): how many classes
/// the labels index, for checking data before a run.
inline constexpr llvm::StringLiteral kClassesAttr = "train.classes";
/// Function attribute (`ztc-recompute`): the recomputation policy and what
/// it buys, a dictionary of `policy` (string) and the integers
/// `saved_bytes`, `baseline_saved_bytes` (under `none`), `recompute_flops`,
/// `recomputed_ops` and `step_flops` (forward and backward, before
/// recomputation).
inline constexpr llvm::StringLiteral kRecomputeAttr = "train.recompute";
/// Function attribute (`ztc-lora`): the adapters it added, a dictionary of
/// `r` (integer), `alpha` and `scale` (floats), the options `dropout`,
/// `rslora` and `bias` (optional) and `adapters`, an array of
/// [base weight, lora_A, lora_B, layout] (strings; layout "out_in" for a
/// Linear's [out, in] weight, "in_out" for a Conv1D's [in, out]).
inline constexpr llvm::StringLiteral kLoraAttr = "train.lora";
/// Function attribute (`ztc-autocast`): the half type the function's
/// matrix products compute in, "bf16" or "fp16" (absent: as the model is
/// written).
inline constexpr llvm::StringLiteral kPrecisionAttr = "train.precision";
/// Location metadata: an op whose location is a FusedLoc tagged with this
/// string is one `ztc-autodiff` made, part of the backward (gradientLoc).
/// Its elementwise work may keep half-precision intermediates in float
/// (kernel.unrounded): no forward value, and so no recomputed one, depends
/// on that. A location, not an attribute: it survives rewrites that keep
/// the op's location and prints only with debug info.
inline constexpr llvm::StringLiteral kGradientLocTag = "train.gradient";
/// Op attribute (unit): the op is a clone `ztc-recompute` placed in the
/// backward. It also keeps CSE from merging the clone back into the op it
/// recomputes.
inline constexpr llvm::StringLiteral kRecomputedAttr = "train.recomputed";
/// Op attribute (`ztc-check-finite`): the dictionary {node, op, pass} of a
/// finite check on the op's result, which ztc-convert-nn-to-kernel turns
/// into a `kernel.check_finite` after the op's kernels.
inline constexpr llvm::StringLiteral kFiniteCheckAttr = "train.finite_check";
/// Op attribute (`ztc-autodiff`, mixed precision): the op is part of the
/// widening of a parameter's half-precision gradient to its f32 master's
/// type (the cast, and fp16's unscaling); the string names the parameter.
/// `ztc-half-gradients` redoes the marked ops right before each reader, so
/// the gradient waits for its update in half precision.
inline constexpr llvm::StringLiteral kHalfGradientOfAttr =
    "train.half_gradient_of";
/// Function attribute (`ztc-half-gradients`): the parameters whose
/// gradients the step keeps in half precision until their update.
inline constexpr llvm::StringLiteral kHalfGradientsAttr =
    "train.half_gradients";
/// Function attribute: which entry of the compiled step a function is
/// (`ztc-build-entries`): one of kEntryKinds.
inline constexpr llvm::StringLiteral kEntryAttr = "train.entry";

/// The entries a step can have, as `train.entry` spells them; the emitted C
/// symbol is `ztc_<entry>`.
///   forward        the model's outputs, state left as it was (ztc run)
///   train_step     loss, gradients and the optimizer's in-place update
///   accumulate     loss, gradients added to accumulators (all but the last
///                  micro-batch of an accumulated optimizer step)
///   loss_and_grads loss and gradients, nothing updated (--dump-grads,
///                  gradcheck)
///   loss           the loss alone, nothing updated (gradcheck)
///   evaluate       the loss in evaluation mode (BatchNorm's running
///                  statistics, no dropout) and, for a cross entropy, the
///                  rows predicted right and counted; nothing updated
///                  (ztc-train --eval-data)
inline constexpr llvm::StringLiteral kEntryKinds[] = {
    "forward",        "train_step", "accumulate",
    "loss_and_grads", "loss",       "evaluate"};

/// The binding of argument `index` of `func`, or null.
BindingAttr getBinding(func::FuncOp func, unsigned index);
/// The name of argument `index` (its binding's), or "".
llvm::StringRef bindingName(func::FuncOp func, unsigned index);
/// Whether argument `index` has a binding of `role`.
bool hasRole(func::FuncOp func, unsigned index, BindingRole role);
/// The argument whose binding is named `name`, or null.
BlockArgument findBinding(func::FuncOp func, llvm::StringRef name);

/// For a part of an NF4 weight (`<name>.absmax`, ...: runtime/kernels/Nf4.h's
/// kPartSuffixes), the packed weight's argument; null for any other argument.
BlockArgument nf4WeightOf(func::FuncOp func, unsigned index);
/// The argument attributes of a new binding: {train.binding = ...}.
DictionaryAttr bindingAttrs(MLIRContext *context, llvm::StringRef name,
                            BindingRole role);
/// Appends an argument of `type` bound as `name` with `role`; returns it.
Value appendBoundArgument(func::FuncOp func, Type type, llvm::StringRef name,
                          BindingRole role);
/// Sets argument `index`'s binding to `name` and `role`.
void setBinding(func::FuncOp func, unsigned index, llvm::StringRef name,
                BindingRole role);
/// Returns each `(argument, value)`'s value as the new value of that bound
/// argument: a result tagged `train.update_of` after the existing ones.
LogicalResult returnUpdates(func::FuncOp func,
                            ArrayRef<std::pair<Value, Value>> updates);

/// The ONNX node names `loc` carries (a NameLoc, or those inside fused and
/// call-site locations), each once, in order: what reports and generated
/// code name an op by.
void collectNodeNames(Location loc, SmallVectorImpl<std::string> &names);

/// `loc`, tagged as the backward's (kGradientLocTag); whether `loc` is.
Location gradientLoc(Location loc);
bool isGradientLoc(Location loc);

/// Whether `type` can be a loss: a rank-0 float tensor.
bool isLossType(Type type);

/// The `train.entry` of `func`, or "" when it has none.
llvm::StringRef entryKind(func::FuncOp func);

/// Drops the results of `func` tagged `train.update_of` (state updates such
/// as running statistics) and the ops only they used: a function that must
/// leave every argument as it was (loss and gradients, forward inference).
void eraseUpdateResults(func::FuncOp func);

/// The weight decay of `optimizer` (a canonical name) when none is given:
/// 0.01 for AdamW and bitsandbytes' AdamW8bit, as in PyTorch and
/// bitsandbytes; 0 otherwise.
double defaultWeightDecay(llvm::StringRef optimizer);

/// Parameters with fewer elements keep float32 states under adam8bit and
/// adamw8bit (bitsandbytes' min_8bit_size).
inline constexpr int64_t kMin8bitStateElements = 4096;

/// Elements per scale of an 8-bit optimizer state (bitsandbytes' block;
/// runtime/kernels/Blockwise8bit.h's kBlock).
inline constexpr int64_t k8bitBlock = 256;

/// The scales of an 8-bit state of `elements` elements.
inline constexpr int64_t scalesOf8bit(int64_t elements) {
  return (elements + k8bitBlock - 1) / k8bitBlock;
}

} // namespace mlir::ztc::train

#endif // ZTC_DIALECTS_TRAIN_IR_TRAINOPS_H
