//===- Passes.td - precision passes ------------------------*- tablegen -*-===//
//
// Numerics: what each op computes in (autocast, f64 for gradient checks),
// loss scaling, half gradients, NF4 storage, the finite checks and TF32
// products.
// Included by passes/Passes.td, in the order the training pipeline runs
// them.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_PRECISION_PASSES_TD
#define ZTC_PASSES_PRECISION_PASSES_TD

include "mlir/Pass/PassBase.td"

def PromoteF64Pass : Pass<"ztc-promote-f64", "func::FuncOp"> {
  let summary = "Compute a function in f64: every f32, f16 and bf16 tensor";
  let description = [{
    Rewrites a function of `nn` ops so that all its floating-point work
    happens in double precision, for numerical checks (`ztc gradcheck`
    compares gradients with finite differences, which f32 rounding would
    drown). Integer and boolean tensors are untouched, and so is a function
    declaration (its callers' types depend on its signature).

    1. Checks that every op carrying an f32, f16 or bf16 tensor is an `nn`
       op, an `arith.constant` with a dense value, or the `func.return`;
       anything else is an error naming the op, and nothing is rewritten.
    2. Promotes the float tensor arguments (their attributes stay).
    3. Visits the ops in order. A float `arith.constant` is re-created with
       its values converted to f64 (exactly: every f32, f16 and bf16 value
       is a double). An `nn` op is re-created on its promoted operands with
       the same attributes; its result types come from its own type
       inference, or, for `nn.reshape`, `nn.cast` and `nn.random_uniform`
       whose result type is given, from promoting the old one (random
       numbers keep their values: 24-bit fractions are exact in f64, and
       the i64 key is untouched). A cast between two float types
       becomes a cast from f64 to f64 and disappears.
    4. Sets the function type from the promoted arguments and returned
       values.

    Example:

    ```mlir
    func.func @f(%x: tensor<4xf32>, %i: tensor<4xi64>) -> tensor<4xf16> {
      %c = arith.constant dense<0.5> : tensor<4xf32>
      %0 = nn.mul %x, %c : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
      %1 = nn.cast %0 : tensor<4xf32> -> tensor<4xf16>
      return %1 : tensor<4xf16>
    }
    // becomes
    func.func @f(%x: tensor<4xf64>, %i: tensor<4xi64>) -> tensor<4xf64> {
      %c = arith.constant dense<5.000000e-01> : tensor<4xf64>
      %0 = nn.mul %x, %c : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
      return %0 : tensor<4xf64>
    }
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::arith::ArithDialect"];
}

def AutocastPass : Pass<"ztc-autocast", "func::FuncOp"> {
  let summary = "Mixed precision: give every nn op a compute type, cast between them";
  let description = [{
    The precision slot's pass for `--precision bf16` (and `fp16`), on the
    model's function before the loss is attached. Each `nn` op gets a
    compute type from the autocast class it declares
    (dialects/NN/IR/OpFacts.td), PyTorch's autocast lists being the anchor:
    - half (`NN_HalfCompute`): `nn.matmul` and `nn.conv2d`;
    - f32, the model's own type (`NN_WideCompute`): exp, log, pow,
      reciprocal, softplus, sin, cos, softmax, log-softmax, layer and batch
      normalization (their statistics), sums and means, the loss (attached
      after this pass, on the model's f32 outputs);
    - the rest (`NN_FollowCompute`): the widest type among its activation
      operands (values that depend on the step's data); weights and
      constants follow it, as PyTorch's type promotion ignores scalars, so
      a bias added to a half product is cast to half. An op of weights
      alone keeps the widest of its operands;
    - `nn.cast` and `nn.random_uniform` (`NN_OwnCompute`) state their
      result types and stay as they are.
    `keep-fp32` (a regular expression) moves the half ops whose op name
    (`nn.matmul`) or ONNX node name it matches to f32.

    Casts are inserted where an operand's type differs from its op's
    compute type, one per value and type, right after the value is
    defined: each weight is cast to half once per step, whatever its uses.
    The function's results are cast back to their declared types. Parameters
    stay f32 (the master weights); their gradients come back through the
    casts' VJPs in f32. Kernels compute half ops in f32 and round the
    result once, to nearest even.

    `half-weights` holds the whole model in half, as DeepSpeed's fp16 and
    bf16 modes and FSDP's `param_dtype` do: each parameter is cast to half
    once, at the entry, and every op reads that copy; an op that computes
    in f32 (a normalization's weight, an embedding gathered into the f32
    residual stream) reads the copy widened. Compute types are the same as
    without it. Each parameter's gradient then comes back through one
    widening of a half gradient, so it waits for the optimizer in half
    (ztc-half-gradients), and the f32 masters are read by the optimizer
    alone, which lets ZeRO stages 1 and 2 shard every one of them.

    Example (`precision=bf16`):

    ```mlir
    %h = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %t = nn.tanh %h : ...
    // becomes
    %xb = nn.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
    %wb = nn.cast %w : tensor<8x8xf32> -> tensor<8x8xbf16>
    %h = nn.matmul %xb, %wb : ... -> tensor<4x8xbf16>
    %t = nn.tanh %h : tensor<4x8xbf16> -> tensor<4x8xbf16>
    ```
  }];
  let options = [
    Option<"precision", "precision", "::mlir::ztc::HalfType",
           /*default=*/"::mlir::ztc::HalfType::Bf16",
           "The half type: bf16 or fp16",
           "::mlir::ztc::closedSet(::mlir::ztc::kHalfTypes)">,
    Option<"keepFp32", "keep-fp32", "std::string", /*default=*/"\"\"",
           "A regular expression: half ops whose op name or ONNX node name "
           "it matches compute in f32">,
    Option<"halfWeights", "half-weights", "bool", /*default=*/"false",
           "Every parameter is read through its half working copy; ops "
           "that compute in f32 read the copy widened">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect"];
}

def LossScalePass : Pass<"ztc-loss-scale", "func::FuncOp"> {
  let summary = "Dynamic loss scaling: finite check, skipped steps, scale rule";
  let description = [{
    Runs on the training step (`train.entry = "train_step"`) when it has
    the `loss_scale` state `ztc-autodiff` adds for dynamic scaling (`loss-
    scale` 0); after `ztc-zero`, before `ztc-lower-train`, so it sees the
    gradients (or gradient shards) the updates read. Everything happens on
    the device: the trainer reads the states only when it logs.

    1. The finite check (DeepSpeed's): the sum of every gradient the
       `train.sgd`/`train.adam` updates read, in f32; with ZeRO stages 1-3
       the shard sums are all-reduced, so every rank decides alike. The
       step applies when the total minus itself is 0 (not inf or NaN) and
       the scale has not failed.
    2. A skipped step keeps everything the updates would write: each
       result becomes `nn.where(apply, new, old)`. Adam's step count is the
       state `optimizer.step`, advanced only by applied steps.
    3. DeepSpeed's `DynamicLossScaler.update_scale` on the states
       `loss_scale`, `loss_scale.good_steps` (finite steps since the last
       overflow or growth), `loss_scale.hysteresis_used` (overflows forgiven
       since the hysteresis was restored), `loss_scale.skipped_steps` and
       `loss_scale.failed_at`. An overflow with hysteresis left spends one;
       else it halves the scale, not below `min-loss-scale`; an overflow
       with the scale already at the minimum records the `step` hyper in
       `failed_at`, after which nothing changes and the trainer stops.
       `loss-scale-window` consecutive finite steps double the scale and
       restore the hysteresis; with `consecutive-hysteresis` every finite
       step restores it.
  }];
  let options = [
    Option<"window", "loss-scale-window", "int64_t", /*default=*/"1000",
           "Finite steps before the scale doubles">,
    Option<"hysteresis", "hysteresis", "int64_t", /*default=*/"2",
           "Overflows tolerated before the scale halves">,
    Option<"consecutiveHysteresis", "consecutive-hysteresis", "bool",
           /*default=*/"false",
           "Restore the hysteresis after every finite step">,
    Option<"minScale", "min-loss-scale", "double", /*default=*/"1.0",
           "The scale never goes below this; an overflow there fails">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::dist::DistDialect",
                           "::mlir::arith::ArithDialect"];
}

def Nf4WeightsPass : Pass<"ztc-nf4-weights", "func::FuncOp"> {
  let summary = "Hold tagged frozen weights in 4-bit NormalFloat (QLoRA)";
  let description = [{
    Each param tagged `train.nf4 = array<i64: rows, cols>` (ztc-lora with
    `base-dtype=nf4`) becomes bitsandbytes' NF4 with double quantization
    (`runtime/kernels/Nf4.h`): the argument itself turns into the packed
    4-bit codes (i8 `[ceil(n / 2)]`, n = rows * cols), and three frozen
    params follow, `<name>.absmax` (i8 `[ceil(n / 64)]`, the block scales'
    8-bit codes), `<name>.nested_absmax` (f32 `[ceil(n / 16384)]`) and
    `<name>.offset` (f32 `[1]`): the names of bitsandbytes' `Linear4bit`
    state dict. `ztc compile` quantizes the model's values into them.

    Every read of the weight must be a matrix product's right operand,
    through any chain of `nn.transpose {perm = [1, 0]}` and widening or
    narrowing `nn.cast`s (autocast's working copy, the backward's
    transposed read); each product `nn.matmul %x, op(W)` becomes
    `nn.matmul_nf4 %x, <parts> {weight_shape, transpose_b}` computing in
    the product's element type, and the chain goes. A chain that rounds W
    to a narrower type than its product computes in (`--half-weights`), or
    any other read (a ZeRO stage-3 gather), is an error naming the param.
    Runs after the gradients and the optimizer are built, so neither sees
    anything but a frozen float weight.

    Example:

    ```mlir
    // %W: tensor<32x64xf32> {train.nf4 = array<i64: 32, 64>}
    %c = nn.cast %W : tensor<32x64xf32> -> tensor<32x64xbf16>
    %t = nn.transpose %c {perm = array<i64: 1, 0>}
    %y = nn.matmul %x, %t : tensor<8x64xbf16>, tensor<64x32xbf16> -> ...
    // becomes, with %W: tensor<1024xi8>
    %y = nn.matmul_nf4 %x, %W, %absmax, %nested, %offset
           {weight_shape = array<i64: 32, 64>, transpose_b = true}
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect"];
}

def HalfGradientsPass : Pass<"ztc-half-gradients", "func::FuncOp"> {
  let summary = "Keep half-precision gradients in half until their readers";
  let description = [{
    Mixed precision: the backward computes the gradient of a parameter
    that the forward reads in bf16 or f16 in that half type, and
    `ztc-autodiff` widens it to the f32 master's type (fp16: and unscales
    it) as soon as it is complete, marking those ops
    `train.half_gradient_of`. Left there, every f32 gradient would be live
    from the backward to the optimizer: 4 bytes per parameter where the
    half gradient needs 2.

    Runs after `ztc-lower-train`, when the optimizer, the clip, the loss
    scale's finite check and ZeRO's collectives are all plain readers. Each
    marked op (a chain, latest first) is cloned right before each op that
    reads it and then erased, so the half gradient is what waits, and each
    f32 copy lives only for its reader (and fuses into it where the reader
    is elementwise). The values are unchanged, bit for bit. The parameters
    whose gradients stay half are listed in the function attribute
    `train.half_gradients`, which the memory report counts at 2 bytes.

    Example:

    ```mlir
    %g = nn.cast %gh {train.half_gradient_of = "w"}
        : tensor<4xbf16> -> tensor<4xf32>
    ... the rest of the backward ...
    %m = nn.add %m0, %g ...
    %v = nn.mul %g, %g ...
    // becomes
    ... the rest of the backward ...
    %g0 = nn.cast %gh : tensor<4xbf16> -> tensor<4xf32>
    %m = nn.add %m0, %g0 ...
    %g1 = nn.cast %gh : tensor<4xbf16> -> tensor<4xf32>
    %v = nn.mul %g1, %g1 ...
    ```
  }];
}

def CheckFinitePass : Pass<"ztc-check-finite", "func::FuncOp"> {
  let summary = "Mark every op with a float result for a finite check";
  let description = [{
    `--check-finite`: runs on the nn entries after `ztc-lower-train`, so
    the optimizer's arithmetic is checked too. Every `nn` or `dist` op with
    a float tensor result (a reshape excepted: it is a view) gets
    `train.finite_check = {node, op, pass}`: the first ONNX node its
    location names ("" for ztc's own arithmetic: the optimizer, ZeRO, the
    loss scale), the op's name without `nn.`, and `forward` (the loss
    depends on it; every op of a forward entry), `recomputed forward`
    (a clone `ztc-recompute` placed in the backward), `update` (ztc's own
    arithmetic after the loss) or `backward`. `ztc-convert-nn-to-kernel`
    places a `kernel.check_finite` of the result right after the op's
    kernels; at run time the first check that finds a NaN or an infinity
    is noted in the training state, and the trainer names it.
  }];
}

def Tf32Pass : Pass<"ztc-tf32", "func::FuncOp"> {
  let summary = "Let f32 products and convolutions run on TF32 tensor cores";
  let description = [{
    TF32 multiplies f32 operands rounded to 10 mantissa bits and sums in
    f32: about eight times the f32 throughput of a Hopper GPU's tensor
    cores, with products as precise as bf16's inputs. PyTorch leaves it off
    for matrix products (`torch.backends.cuda.matmul.allow_tf32 = False`)
    and on for cuDNN's convolutions (`torch.backends.cudnn.allow_tf32 =
    True`); ztc's `--allow-tf32` and `--conv-tf32` follow the same defaults.

    Sets `tf32` in the config of every f32 `kernel.call "matmul"` when
    `products`, and of every f32 `conv2d`, `conv2d_backward_data` and
    `conv2d_backward_filter` when `convolutions`. The CUDA library then asks
    cuBLAS for CUBLAS_COMPUTE_32F_FAST_TF32; the CPU's kernels ignore the
    flag, and the training pipeline runs this pass for CUDA only. Other
    element types are untouched (f64 never rounds; bf16 and f16 are
    already narrower).

    Example (`products`):

    ```mlir
    kernel.call "matmul" ins(%a, %b : memref<8x64xf32>, memref<64x10xf32>)
        outs(%c : memref<8x10xf32>) {config = {}}
    // becomes
    kernel.call "matmul" ins(%a, %b : memref<8x64xf32>, memref<64x10xf32>)
        outs(%c : memref<8x10xf32>) {config = {tf32 = true}}
    ```
  }];
  let options = [
    Option<"products", "products", "bool", /*default=*/"false",
           "f32 matrix products (kernel.call \"matmul\") may use TF32">,
    Option<"convolutions", "convolutions", "bool", /*default=*/"false",
           "f32 convolutions and their gradients may use TF32">,
  ];
}

#endif // ZTC_PASSES_PRECISION_PASSES_TD
