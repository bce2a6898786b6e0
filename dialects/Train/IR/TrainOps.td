//===- TrainOps.td - train dialect -------------------------*- tablegen -*-===//
//
// What makes a function a training step: optimizer updates, global-norm
// clipping, and the roles of arguments and results (parameter state,
// host-written hyperparameters, gradients, in-place updates).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_TRAIN_IR_TRAINOPS_TD
#define ZTC_DIALECTS_TRAIN_IR_TRAINOPS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Train_Dialect : Dialect {
  let name = "train";
  let cppNamespace = "::mlir::ztc::train";
  let summary = "Optimizer updates and the roles of a training step's values";
  let description = [{
    The `train` dialect states what turns a forward function into a training
    step. Its ops are whole optimizer steps and gradient transformations with
    PyTorch's semantics, kept as single ops so that later passes see them
    whole: ZeRO partitions an update by slicing its operands, mixed precision
    runs it on fp32 master weights. `ztc-lower-train` expands them into `nn`
    arithmetic before bufferization.

    The dialect also owns the `train.*` attributes that give function
    arguments and results their roles, and verifies them:

    - on arguments: `train.binding = #train.binding<ROLE "NAME">`, the one
      statement of what an argument is, from import to the manifest: its
      ONNX name and its role (input, label, param, buffer, state, hyper);
      the element type and shape are the argument's type, and must be ones
      the runtime has;
    - on results: `train.grad_of = "<parameter>"` (a gradient),
      `train.update_of = "<argument>"` (the new value of that argument, of
      its type, written into its buffer);
    - on functions: `train.loss` (the loss kind attached), `train.buffers`
      and `train.no_grad` (parameters that get no gradient, and why).
  }];
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

/// What a step argument holds.
def Train_BindingRole : I32EnumAttr<"BindingRole", "what a step argument holds", [
  // Data given with every call (a batch of a graph input).
  I32EnumAttrCase<"Input", 0, "input">,
  // Data given with every call that only the loss reads (ztc-attach-loss).
  I32EnumAttrCase<"Label", 1, "label">,
  // A trainable weight, initialized from the model.
  I32EnumAttrCase<"Param", 2, "param">,
  // A weight the step updates but does not train (BatchNorm's running
  // statistics), initialized from the model.
  I32EnumAttrCase<"Buffer", 3, "buffer">,
  // Optimizer or accumulation state, zero at the start.
  I32EnumAttrCase<"State", 4, "state">,
  // A rank-0 value the runtime writes before every call (lr, step, rng).
  I32EnumAttrCase<"Hyper", 5, "hyper">,
]> {
  let cppNamespace = "::mlir::ztc::train";
  let genSpecializedAttr = 0;
}

/// The identity and role of a step argument.
def Train_BindingAttr : AttrDef<Train_Dialect, "Binding"> {
  let mnemonic = "binding";
  let summary = "an argument's ONNX name and role";
  let description = [{
    Carried by every argument of a step function as `train.binding`: the
    name the runtime binds it by (the ONNX name of an input or initializer,
    or the one a pass gave it: `labels`, `lr`, `<param>.exp_avg`) and its
    role. Its element type and shape are the argument's type.

    Example: `%w: tensor<10x64xf32> {train.binding = #train.binding<param "fc.weight">}`
  }];
  let parameters = (ins EnumParameter<Train_BindingRole>:$role,
                        "::mlir::StringAttr":$name);
  let assemblyFormat = "`<` $role $name `>`";
}

/// Parameters, gradients and optimizer states: static float tensors.
def Train_FloatTensor : StaticShapeTensorOf<[F32, F64, F16, BF16]>;
/// Host-written hyperparameters (learning rate, step count): rank-0 f32.
def Train_Hyper : 0DTensorOf<[F32]>;
/// Float32 parameters and the scales of 8-bit optimizer states.
def Train_F32Tensor : StaticShapeTensorOf<[F32]>;
/// The codes of an 8-bit optimizer state: flat, one byte per element.
def Train_CodeTensor : 1DTensorOf<[I8]>;

/// Base class of train ops: side-effect free, and printed like nn ops, with
/// every operand and result type visible.
class Train_Op<string mnemonic, list<Trait> traits = []>
    : Op<Train_Dialect, mnemonic, !listconcat(traits, [Pure])> {
  let assemblyFormat = [{
    operands attr-dict `:` type(operands) `->` type(results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// SgdOp
//===----------------------------------------------------------------------===//

def Train_SgdOp : Train_Op<"sgd"> {
  let summary = "one SGD step of one parameter (torch.optim.SGD)";
  let description = [{
    With `g = grad + weight_decay * param`: without momentum,
    `new_param = param - lr * g`. With `momentum` > 0 the op takes and
    returns the momentum buffer: `new_buffer = momentum * buffer + g`, and
    `new_param = param - lr * d` where `d = g + momentum * new_buffer` with
    `nesterov`, else `d = new_buffer` (dampening 0). The buffer starts at
    zero, which matches PyTorch's first step (it copies `g`).

    Example:

    ```mlir
    %p1, %b1 = train.sgd %p, %g, %lr, %b {momentum = 9.0e-01 : f64}
        : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>
        -> tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                   Train_Hyper:$lr,
                   Optional<Train_FloatTensor>:$momentum_buffer,
                   DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                   UnitAttr:$nesterov,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  let results = (outs Train_FloatTensor:$new_param,
                  Optional<Train_FloatTensor>:$new_momentum_buffer);
}

//===----------------------------------------------------------------------===//
// AdamOp
//===----------------------------------------------------------------------===//

def Train_AdamOp : Train_Op<"adam"> {
  let summary = "one Adam or AdamW step of one parameter";
  let description = [{
    torch.optim.Adam (L2 `weight_decay` added to the gradient) or, with
    `decoupled`, torch.optim.AdamW (`param *= 1 - lr * weight_decay` first).
    With `t = step` (1-based, a host-written hyper):

    ```
    m' = beta1 * m + (1 - beta1) * g
    v' = beta2 * v + (1 - beta2) * g * g
    param' = param - (lr / (1 - beta1^t)) * m' / (sqrt(v') / sqrt(1 - beta2^t) + eps)
    ```

    Example:

    ```mlir
    %p1, %m1, %v1 = train.adam %p, %g, %m, %v, %lr, %step
        {decoupled, weight_decay = 1.0e-02 : f64}
        : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
          tensor<f32>, tensor<f32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                   Train_FloatTensor:$exp_avg, Train_FloatTensor:$exp_avg_sq,
                   Train_Hyper:$lr, Train_Hyper:$step,
                   DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                   DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                   DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                   UnitAttr:$decoupled);
  let results = (outs Train_FloatTensor:$new_param,
                  Train_FloatTensor:$new_exp_avg,
                  Train_FloatTensor:$new_exp_avg_sq);
}

//===----------------------------------------------------------------------===//
// Adam8bitOp
//===----------------------------------------------------------------------===//

def Train_Adam8bitOp : Train_Op<"adam8bit"> {
  let summary = "one Adam step of one parameter on 8-bit moments (bitsandbytes)";
  let description = [{
    bitsandbytes' Adam8bit and AdamW8bit (block-wise, 0.50): the moments
    are held as one 8-bit code per element (`exp_avg`: the signed dynamic
    code book, `exp_avg_sq`: the unsigned one, stored as i8 bit patterns)
    and one f32 scale per block of 256 elements of the flattened parameter
    (`*_absmax`: ceil(n / 256) each). Each block is dequantized, stepped as
    in `train.adam` with decoupled weight decay (bitsandbytes applies
    `param *= 1 - lr * weight_decay` for both optimizers), and quantized
    again; runtime/kernels/Blockwise8bit.h gives the exact roundings. A
    block never depends on another, so a shard of whole blocks steps as the
    whole tensor does.

    Example:

    ```mlir
    %p1, %m1, %ms1, %v1, %vs1 = train.adam8bit %p, %g, %m, %ms, %v, %vs,
        %lr, %step {weight_decay = 1.0e-02 : f64}
        : tensor<64x80xf32>, tensor<64x80xf32>, tensor<5120xi8>,
          tensor<20xf32>, tensor<5120xi8>, tensor<20xf32>, tensor<f32>,
          tensor<f32> -> tensor<64x80xf32>, tensor<5120xi8>, tensor<20xf32>,
          tensor<5120xi8>, tensor<20xf32>
    ```
  }];
  let arguments = (ins Train_F32Tensor:$param, Train_F32Tensor:$grad,
                   Train_CodeTensor:$exp_avg, Train_F32Tensor:$exp_avg_absmax,
                   Train_CodeTensor:$exp_avg_sq,
                   Train_F32Tensor:$exp_avg_sq_absmax,
                   Train_Hyper:$lr, Train_Hyper:$step,
                   DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                   DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                   DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  let results = (outs Train_F32Tensor:$new_param,
                  Train_CodeTensor:$new_exp_avg,
                  Train_F32Tensor:$new_exp_avg_absmax,
                  Train_CodeTensor:$new_exp_avg_sq,
                  Train_F32Tensor:$new_exp_avg_sq_absmax);
  let extraClassDeclaration = [{
    /// Each result with the operand whose value it replaces.
    SmallVector<std::pair<Value, Value>> replacedOperands();
  }];
}

//===----------------------------------------------------------------------===//
// ClipByGlobalNormOp
//===----------------------------------------------------------------------===//

def Train_ClipByGlobalNormOp : Train_Op<"clip_by_global_norm"> {
  let summary = "scale gradients so that their global L2 norm is at most max_norm";
  let description = [{
    torch.nn.utils.clip_grad_norm_: with `norm` the L2 norm of all elements
    of all operands, every operand is multiplied by
    `min(1, max_norm / (norm + 1e-6))`. The norm spans every operand, so
    the op takes all the step's gradients at once (a sharded step reduces
    the partial sums across ranks). The first result is the norm before
    clipping (what clip_grad_norm_ returns, and the Trainer logs as
    grad_norm).

    Example:

    ```mlir
    %norm, %a1, %b1 = train.clip_by_global_norm %a, %b {max_norm = 1.0 : f64}
        : tensor<4xf32>, tensor<2x2xf32>
        -> tensor<f32>, tensor<4xf32>, tensor<2x2xf32>
    ```
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$grads, F64Attr:$max_norm);
  let results = (outs Train_FloatTensor:$norm,
                      Variadic<Train_FloatTensor>:$clipped);
}

//===----------------------------------------------------------------------===//
// RecordLossOp
//===----------------------------------------------------------------------===//

// Not a Train_Op: it has an effect (on the device-side training state), so
// no cleanup may drop it although it has no result.
def Train_RecordLossOp : Op<Train_Dialect, "record_loss",
                            [MemoryEffects<[MemWrite]>]> {
  let summary = "add the step's loss to the device-side training state";
  let description = [{
    Records one call's loss in the training state the step context points
    to (runtime/kernels/StepAbi.h): adds it to the loss sum, counts the
    call, and remembers the first call whose loss was not finite. The
    trainer reads the state only when it logs, so recording costs no host
    synchronization. `ztc-build-entries` puts one at the end of the
    training step (and so of the accumulate entry cloned from it).

    Example:

    ```mlir
    train.record_loss %loss : tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32, F64]>:$loss);
  let assemblyFormat = "$loss attr-dict `:` type($loss)";
}

#endif // ZTC_DIALECTS_TRAIN_IR_TRAINOPS_TD
