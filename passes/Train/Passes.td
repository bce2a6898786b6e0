//===- Passes.td - train passes ----------------------------*- tablegen -*-===//
//
// The training step in nn: adapters, the loss, gradients, recomputation,
// the entries, accumulation, the optimizer and its lowering.
// Included by passes/Passes.td, in the order the training pipeline runs
// them.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_TRAIN_PASSES_TD
#define ZTC_PASSES_TRAIN_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseAttentionPass : Pass<"ztc-fuse-attention", "func::FuncOp"> {
  let summary = "Replace scaled-dot-product attention with nn.attention";
  let description = [{
    Runs on the model in `nn`, before the precision slot and the gradients,
    so that the forward and (through its VJP, `nn.attention_backward`) the
    backward each become one kernel that never holds the `[.., Tq, Tk]`
    scores or probabilities. The pattern is PyTorch's attention as the
    importer leaves it (`examples/onnx/make_gpt.py`, and the exports of
    Hugging Face models in `test/fixtures/modern`):

    1. A matrix product `nn.matmul %p, %v` whose `%p` is an `nn.softmax`
       over the last axis, read by nothing else; or the NaN guard PyTorch's
       dynamo exporter puts after it, `nn.where (nn.not (nn.equal %sm,
       %sm)), 0, %sm`, each of whose ops (and `%sm`) only the next reads.
       The fused op has no guard: its probabilities are NaN only where the
       scores are, which a causal or constant finite mask never makes.
    2. The softmax's input, read by nothing else, is either
       `nn.where %future, %fill, %s` (or `nn.where %past, %s, %fill`) with
       `%future` a constant i1 that is true exactly where key j > query i
       (leading dimensions 1) and `%fill` a constant splat of at most
       -1e30 (-inf, or the float minimum): the fused op is `causal`; or
       `nn.add` of `%s` and a constant additive mask of at most the
       scores' rank: `causal` when it is 0 where j <= i and at most -1e30
       elsewhere (leading dimensions 1: ONNX Attention's `is_causal`),
       else the fused op's `mask` (a constant: nn.attention gives a mask
       no gradient; reshaped with leading 1s to the scores' rank); or `%s`
       itself. Then `%s` may be capped: `nn.mul (nn.tanh (nn.div %c, %k)),
       %k` with `%k` a positive constant splat (the division also as a
       product by 1 / k; each read by nothing else): the fused op's
       `softcap` is k (Gemma 2's attention logit softcapping, ONNX
       Attention's `softcap`), and `%c` goes on to step 3 in its place.
    3. `%s`, read by nothing else, is `nn.mul` of `%t` and a constant splat
       (either side) or `nn.div` of `%t` by one: the `scale` (1 / divisor);
       or `%t` itself (scale 1).
    4. `%t`, read by nothing else, is `nn.matmul %q, %kt`. Either operand
       may be `nn.mul` of the tensor and a constant splat, read by nothing
       else (the dynamo exporter's split scale, D^-1/4 on each side): the
       splats multiply the scale. k is `%kt` with its last two dimensions
       swapped: the `k` of the dynamo exporter's `nn.reshape (nn.transpose
       (nn.reshape %k))` that merges the batch dimensions, swaps the last
       two and splits them again; the transpose that made `%kt`, composed
       with the swap; or a new `nn.transpose`.
    5. q, k and v have one rank and the same batch dimensions, and
       nn.attention's type is the product's; otherwise nothing changes.
    6. Grouped-query heads: when k and v ([B, H, T, D]) each repeat the
       heads of a [B, Hkv, T, D] tensor of one type, H / Hkv times in
       place (Hugging Face's `repeat_kv`, ONNX Attention's
       `kv_num_heads`: `nn.reshape` to [B, Hkv, 1, T, D], `nn.broadcast_to`
       along the unit dimension, `nn.reshape` merging it), the fused op
       reads those tensors: its kernels map query head h to key/value head
       h / (H / Hkv), and its backward sums each group's gradients, where
       the repeats were two copies forward, two reductions backward and
       H / Hkv times the keys and values kept for the backward. A constant
       splat multiplying the repeated k, or the k before its repeat, read
       by nothing else (the ONNX Attention conversion's scale on K), joins
       the scale.
    7. The final product's uses read `nn.attention %q, %k, %v[, %mask]
       {scale, causal, softcap}`; the chain is erased, and what made `%kt` from k
       (and the repeats) once nothing else reads it.
    8. A q or k that is a rotary embedding of a head split,
       `nn.rotary (nn.transpose %x {perm = [0, 2, 1, 3]}), %cos, %sin`,
       each read only by the next (Llama's `apply_rotary_pos_emb` after
       its `transpose(1, 2)`), becomes the split of the rotary of `%x`,
       its tables' dimensions 1 and 2 swapped (a reshape when one is 1):
       the split then meets attention, which ztc-fold-transposes lets read
       `%x`'s layout, and so does its gradient's split in the backward.
    9. Last, the reshapes, transposes and slices that make each fused
       op's q, k and v: timm's head split of a fused projection,
       `nn.slice`s of `nn.transpose (nn.reshape %qkv to [B, T, 3, H, D])
       {perm = [2, 0, 3, 1, 4]}` at index 0, 1 and 2, each squeezed by a
       reshape, becomes for each a slice of `%qkv` ([B, T, 3C]) at whole
       heads, seen as [B, T, H, D] by one reshape and transposed to [B,
       H, T, D], as nanoGPT's split is: ztc-fold-transposes and
       ztc-fold-head-windows then let the attention kernels read q, k
       and v inside the projection and write their gradients into its
       gradient, where the permuted tensor and its three slices were
       copies forward and their gradients' concat and transpose copies
       backward. Three rewrites make it: a slice of a transpose that only
       slices read, cutting one dimension the transpose moved, is the
       transpose of a slice; a slice of a reshape that splits one
       dimension, cutting only the split's first dimension (unit steps),
       is the reshape of a slice of that dimension; a reshape that drops
       the dimensions of 1 of a transpose moving one of them, read by
       reshapes alone, is the transpose without them. Only here, where
       attention fuses: a CPU step of unfused attention reads the
       transposes as copies either way, three smaller ones for one.

    Anything else stays as it is: probabilities another op reads (they
    would have to be materialized), a softmax over another axis, a scale
    or mask that is not a constant, dropout between the softmax and the
    product, a non-causal `nn.where` mask.

    Example (`%future`: the constant upper triangle of a 16x16 i1):

    ```mlir
    %kt = nn.transpose %kr {perm = array<i64: 0, 2, 3, 1>}
    %t = nn.matmul %q, %kt
    %s = nn.mul %t, %cst            // 0.25
    %m = nn.where %future, %ninf, %s
    %p = nn.softmax %m {axis = 3 : i64}
    %o = nn.matmul %p, %v
    // becomes
    %k = nn.transpose %kr {perm = array<i64: 0, 2, 1, 3>}
    %o = nn.attention %q, %k, %v {scale = 2.500000e-01 : f64, causal}
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect"];
}

def LoraPass : Pass<"ztc-lora", "func::FuncOp"> {
  let summary = "Add low-rank adapters (LoRA) to matrix products; freeze the "
                "rest";
  let description = [{
    Parameter-efficient fine-tuning as Hugging Face `peft` does it with a
    `LoraConfig`, on a function of `nn` ops before its loss and gradients.

    1. A module is a `param`'s binding name without its last `.weight`
       (`model.layers.0.self_attn.q_proj` for
       `model.layers.0.self_attn.q_proj.weight`). A param is a target when
       `targets` matches its module's whole name or a tail of it that
       starts after a `.` (`q_proj|v_proj` matches every `...q_proj`, as
       `peft`'s list of module names does); a `targets` starting with `^`
       must match the whole name (`peft`'s regular-expression form).
    2. Each target must be the weight of a matrix product: a rank-2 float
       param read as `nn.matmul %x, %W` (W is [in, out], GPT-2's Conv1D) or
       as `nn.matmul %x, (nn.transpose %W {perm = [1, 0]})` (W is
       [out, in], a Linear); other uses keep W alone. A target that no
       matrix product reads is an error naming it; so is a `targets` that
       matches nothing.
    3. For each target, two new float params: `<module>.lora_A.weight`
       ([r, in], from uniform values in [-1/sqrt(in), 1/sqrt(in)], which
       is `peft`'s Kaiming-uniform with a = sqrt(5)) and
       `<module>.lora_B.weight` ([out, r], zeros), both tagged
       `train.initial_uniform` with a seed from `seed` and the name.
       Every matrix product y = x W becomes
       y + s * ((dropout(x) A^T) B^T), with s = alpha / r (alpha / sqrt(r)
       with `rslora`). With `dropout` p > 0, dropout(x) is training-mode
       dropout (the function's `rng` key, a stream per module); the
       evaluate entry drops nothing.
    4. Freezes every other float param (`train.frozen`, which
       ztc-autodiff honours), but: with `bias` = `all` every param whose
       name contains `bias`, with `lora_only` each target module's
       `<module>.bias`; and every param of a module that
       `modules-to-save` matches (as `targets` does).
    5. Records the adapters on the function, for the manifest and
       `ztc export --adapter`: `train.lora = {r, alpha, scale, dropout,
       rslora, bias, adapters = [[base, A, B, layout], ...]}` with layout
       `out_in` or `in_out`.
    6. With `base-dtype` = `nf4` (QLoRA), tags every frozen rank-2 float
       param that only matrix products read (as step 2 finds them) with
       `train.nf4 = array<i64: rows, cols>`, for `ztc-nf4-weights` to hold
       in 4 bits after the gradients are built; but the output layer's (a
       product whose result reaches the function's results through
       reshapes, transposes and additions alone), which stays as it is, as
       Hugging Face's 4-bit loading keeps `lm_head`.

    Example (r = 2, alpha = 4, targets = `q`):

    ```mlir
    %t = nn.transpose %W {perm = array<i64: 1, 0>}
    %y = nn.matmul %x, %t      // x: [4, 8], W: [16, 8] (out, in)
    // becomes
    %y  = nn.matmul %x, %t
    %xa = nn.matmul %x, (nn.transpose %A)        // A: [2, 8]
    %xb = nn.matmul %xa, (nn.transpose %B)       // B: [16, 2]
    %y2 = nn.add %y, (nn.mul %xb, 2.0)
    ```
  }];
  let options = [
    Option<"rank", "r", "int64_t", /*default=*/"8",
           "The adapters' rank (peft's r)">,
    Option<"alpha", "alpha", "double", /*default=*/"8.0",
           "Scale numerator (peft's lora_alpha): the update is scaled by "
           "alpha / r">,
    Option<"dropout", "dropout", "double", /*default=*/"0.0",
           "Dropout probability on the adapters' input, in [0, 1)">,
    Option<"targets", "targets", "std::string", /*default=*/"\"\"",
           "Modules to adapt: an extended regular expression matched "
           "against a module's name or a tail of it after a '.' ('^' "
           "first: the whole name only)">,
    Option<"rslora", "rslora", "bool", /*default=*/"false",
           "Scale by alpha / sqrt(r) (rank-stabilized LoRA)">,
    Option<"bias", "bias", "::mlir::ztc::LoraBias",
           /*default=*/"::mlir::ztc::LoraBias::None",
           "Biases that train: none, all, or lora_only",
           "::mlir::ztc::closedSet(::mlir::ztc::kLoraBiases)">,
    Option<"modulesToSave", "modules-to-save", "std::string",
           /*default=*/"\"\"",
           "Modules trained whole (peft's modules_to_save), matched as "
           "targets are">,
    Option<"seed", "seed", "int64_t", /*default=*/"0",
           "Seed of the lora_A initial values">,
    Option<"baseDtype", "base-dtype", "::mlir::ztc::BaseType",
           /*default=*/"::mlir::ztc::BaseType::Model",
           "nf4: mark the frozen base weights of the matrix products for "
           "ztc-nf4-weights (QLoRA); model: as the model has them",
           "::mlir::ztc::closedSet(::mlir::ztc::kBaseTypes)">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect",
                           "::mlir::arith::ArithDialect"];
}

def AttachLossPass : Pass<"ztc-attach-loss", "func::FuncOp"> {
  let summary = "Turn the model's function into one returning a scalar loss";
  let description = [{
    1. Picks the model output the loss reads (`loss-input`, an ONNX output
       name; default: the first output).
    2. `cross_entropy`: adds an integer labels argument (`labels`, after the
       graph inputs, shaped like the output without its last dimension),
       flattens the output to [rows, classes], and returns the mean of
       -log_softmax at the label over rows whose label is not
       `ignore-index`, exactly as torch.nn.functional.cross_entropy, and
       records the class count on the function (`train.classes`).
       `mse`: adds a labels argument shaped like the output and returns the
       mean squared error. `none`: the output itself is the loss and must be
       a scalar float.
    3. `token-weighted` (cross_entropy only): the mean is multiplied by a
       scalar hyper `loss_weight` the trainer writes before each call: the
       call's share of the optimizer step's real tokens (labels that are
       not `ignore-index`, over every micro-batch and rank) times the
       calls that average into the step, so that the step's gradient is
       that of the mean over all its real tokens (the Hugging Face
       Trainer's normalization since transformers 4.46).
    4. The function then returns the loss (tagged `onnx.name = "loss"`)
       and the state updates (results tagged `train.update_of`, such as
       training-mode running statistics); the other outputs are dropped, so
       their computation dies.

    Example: `(x, W) -> logits` becomes `(x, labels, W) -> loss`.
  }];
  let options = [
    Option<"loss", "loss", "::mlir::ztc::LossKind",
           /*default=*/"::mlir::ztc::LossKind::Auto",
           "cross_entropy, mse, none, or auto (none for a model returning "
           "one scalar float; an error otherwise, naming the choices)",
           "::mlir::ztc::closedSet(::mlir::ztc::kLossKinds)">,
    Option<"lossInput", "loss-input", "std::string", /*default=*/"\"\"",
           "The ONNX output the loss reads (default: the first)">,
    Option<"labels", "labels", "std::string", /*default=*/"\"labels\"",
           "Name of the labels input the loss adds">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "Label value that contributes nothing (cross_entropy)">,
    Option<"tokenWeighted", "token-weighted", "bool", /*default=*/"false",
           "cross_entropy: weight the loss by a `loss_weight` hyper (each "
           "call's share of the optimizer step's real tokens)">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect",
                           "::mlir::arith::ArithDialect"];
}

def FuseCrossEntropyPass : Pass<"ztc-fuse-cross-entropy", "func::FuncOp"> {
  let summary = "Replace the classifier's product and its cross entropy with "
                "nn.linear_cross_entropy";
  let description = [{
    Runs after `ztc-attach-loss` and before the gradients, so that the
    forward and (through its VJP, `nn.linear_cross_entropy_backward`) the
    backward each become one kernel that works through chunks of rows and
    never holds the `[N, V]` logits, the step's largest buffer in a
    language model (GPT-2 small at 8 x 1024 tokens: 1.5 GiB in f32). The
    pattern is the loss `--loss cross_entropy` builds on a model whose
    output is a product with the classifier's weight:

    1. An `nn.nll_loss` with reduction "mean" and no class weights, whose
       log-probabilities are an `nn.log_softmax` along axis 1 of a rank-2
       `%z`, read by nothing else.
    2. `%z`, read by nothing else, is `nn.matmul %h, %b`, behind at most
       an `nn.reshape` to `[N, V]` (the model's output flattened) and an
       `nn.cast` widening a half-precision product to f32 (mixed
       precision's classifier), in either order, where `%b` is `[D, V]`
       and `%h` is `[..., D]` (its leading dimensions flatten to N); each
       value of the chain is read by nothing else.
    3. `%h` and `%b` have one element type, f32, f64, f16 or bf16, and the
       loss is its compute type: f32 or f64 as they are, or f32 through
       the widening cast of a half product (whose rounding of each logit
       the fused kernels keep). A half-precision loss stays as it is, as
       does a classifier with a bias.
    4. `%b` is `nn.transpose %w {perm = [1, 0]}` (a head tied to the token
       embedding, `[V, D]`): the fused op reads `%w` with `transpose_b`;
       otherwise it reads `%b`.
    5. The loss's uses read `nn.linear_cross_entropy` of `%h` reshaped to
       `[N, D]`, the weight and the flattened target, with the loss's
       `ignore_index`; the chain is erased, and the transpose once nothing
       else reads it.

    Example (a head tied to the embedding `%wte`):

    ```mlir
    %wt = nn.transpose %wte {perm = array<i64: 1, 0>}
    %o = nn.matmul %h, %wt          // [2, 16, 32] x [32, 64]
    %z = nn.reshape %o              // [32, 64]
    %lp = nn.log_softmax %z {axis = 1 : i64}
    %l = nn.nll_loss %lp, %t {reduction = "mean", ignore_index = -100 : i64}
    // becomes
    %x = nn.reshape %h              // [32, 32]
    %l, %correct = nn.linear_cross_entropy %x, %wte, %t
                     {transpose_b, ignore_index = -100 : i64}
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect"];
}

def AutodiffPass : Pass<"ztc-autodiff", "func::FuncOp"> {
  let summary = "Append the gradient of the loss w.r.t. every trainable param";
  let description = [{
    Reverse-mode automatic differentiation of a step function whose first
    result is a scalar float loss (a rank-0 tensor). Every `nn` op states
    its vector-Jacobian product (the `GradientOpInterface`), built from `nn`
    ops, so the backward step lowers and runs like the forward one.

    1. Checks the function: one block, and a first result that is a rank-0
       float tensor (the loss).
    2. Selects the trainable parameters: arguments bound as `param`
       with a float element type whose binding name matches none of the
       `frozen` regular expressions (each must match the whole name) and
       that carry no `train.frozen` attribute (ztc-lora's frozen base).
       Batch-norm running statistics (buffers PyTorch exports as
       initializers: parameters whose only uses are the `mean` and `var`
       operands of `nn.batch_norm`, or that the step itself updates, named
       by a result tagged `train.update_of`) are not trained, as in PyTorch;
       their bindings become `buffer`s and they are listed in the function
       attribute `train.buffers`.
    3. Prunes: a value needs a gradient when it depends on a selected
       parameter (forward, through float values) and the loss depends on it
       (backward, through float values). Nothing else gets gradient work.
    4. Seeds the loss's gradient with 1 (with `loss-scale`: the scale; see
       below) and visits the ops in reverse
       program order. An op with a result that needs a gradient builds its
       VJP from its results' gradients (null where zero); an operand
       gradient is kept when the operand needs one, and gradients of a value
       with several uses are summed with `nn.add`. An op on the path without
       the interface is an error naming the op.
    5. Returns the parameter gradients after the original results, in
       argument order, each tagged `train.grad_of = "<onnx name>"`.
       Selected parameters that get no gradient (the loss does not depend on
       them) are listed in the function attribute `train.no_grad`.
    6. Erases the backward ops nothing uses (operand gradients that were
       built but not needed).

    Loss scaling (mixed precision in fp16): with `loss-scale` S > 0 the
    seed is the constant S; with `loss-scale` 0 it is a new rank-0 f32
    `state` argument `loss_scale` whose `train.initial` is
    2^`initial-scale-power` (`ztc-loss-scale` updates it). Either way each
    parameter gradient is multiplied by 1/scale right after the backward
    completes it, so gradients leave the backward unscaled and an overflow
    inside it stays inf or NaN.

    Mixed precision: a gradient that is the widening cast of a half-
    precision one (the VJP of the forward's cast of an f32 parameter to
    bf16 or f16) has that cast, and its unscaling, marked
    `train.half_gradient_of = "<onnx name>"`; `ztc-half-gradients` redoes
    them at each reader.

    Backward ops carry the location of the forward op they differentiate,
    so reports about them name the ONNX node, tagged `train.gradient` (a
    FusedLoc's metadata; `train::isGradientLoc`): their elementwise work
    keeps half-precision intermediates in float (see
    `ztc-convert-nn-to-kernel`).

    Example:

    ```mlir
    func.func @step(%x: tensor<4xf32>,
                    %w: tensor<4xf32> {train.binding = #train.binding<param "w">})
        -> tensor<f32> {
      %y = nn.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
      %l = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false}
             : tensor<4xf32> -> tensor<f32>
      return %l : tensor<f32>
    }
    // becomes
    func.func @step(...) -> (tensor<f32>,
                             tensor<4xf32> {train.grad_of = "w"}) {
      ...
      %one = arith.constant dense<1.0> : tensor<f32>
      %g = nn.reshape %one : tensor<f32> -> tensor<1xf32>
      %gy = nn.broadcast_to %g {shape = array<i64: 4>}
              : tensor<1xf32> -> tensor<4xf32>
      %gw = nn.mul %gy, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
      return %l, %gw : tensor<f32>, tensor<4xf32>
    }
    ```
  }];
  let options = [
    ListOption<"frozen", "frozen", "std::string",
               "Parameters to keep fixed: comma-separated regular "
               "expressions (llvm::Regex, extended POSIX), each matched "
               "against the whole binding name">,
    Option<"lossScaleValue", "loss-scale", "double", /*default=*/"1.0",
           "Seed the backward with this scale and unscale the gradients: "
           "1 (no scaling), a positive static scale, or 0 (dynamic: the "
           "`loss_scale` state, which ztc-loss-scale updates)">,
    Option<"initialScalePower", "initial-scale-power", "unsigned",
           /*default=*/"16",
           "Dynamic scaling: the first scale is 2^this">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect",
                           "::mlir::arith::ArithDialect"];
}

def RecomputePass : Pass<"ztc-recompute", "ModuleOp"> {
  let summary = "Recompute activations in the backward instead of keeping them";
  let description = [{
    Gradient checkpointing on the function `ztc-autodiff` built (loss first,
    then gradients). The forward is what the loss depends on; the backward
    is every op after the loss that computes gradients; an activation is a
    forward op's result, and the backward keeps it alive (a saved
    activation) unless the policy recomputes it.

    1. The policy chooses the activations to recompute:
       - `none`: nothing (the pass only reports);
       - `selective`: the results of cheap ops (elementwise, normalization,
         softmax, reshapes, and matrix products of two activations, as in
         attention), as in Megatron's selective recomputation. Kept: the
         products with a weight operand and convolutions, values several
         forward ops read (a residual stream), and values whose replay
         would clone more than 32 ops;
       - `full`: per block, as `gradient_checkpointing_enable()` does per
         layer: only values that cross a block's boundary are kept. Blocks
         are the numbered scope of each node name (`/h.3/...`,
         `/blocks.0/...`, `/layer1/...`), or the text `blocks` (a regular
         expression) matches in it; ops in no block keep their results;
       - `sqrt`: Chen et al.'s √n checkpoints: the forward ops cut into
         ⌈√n⌉ segments, each cut where the fewest bytes cross it within
         half a segment of its even position, then as `full`;
       - `budget`, with `budget=BYTES` or `budget=FRACTION` (of the peak
         with `none`; `--recompute budget=...` in the pipeline):
         the least recomputation (in FLOPs) whose planned peak — the
         bytes per rank `ztc inspect` reports — fits. Plans are weighed
         by planning the rest of the step on a copy of the module, with
         the planner the training pipeline hands the pass (run alone, the
         pass refuses budgets). The candidates are the fixed policies and
         the plans of a 0-1 integer program, solved by COIN-OR CBC within
         `search-nodes` branch-and-bound nodes each: one column per decided value (keep
         it) and per forward op (recompute it); rows say that what the
         backward reads is kept or recomputed, that a recomputed op's
         operands are kept or recomputed in its own segment (a block of
         the node names' scopes, else a √n segment), and that the bytes
         alive in each interval of the backward — kept values until
         their last read, a segment's clones in the span of its backward
         uses, everything else as it lives in nn — stay under a capacity;
         the objective is the recompute FLOPs. Its capacities are 24
         steps between the smallest reachable (a solve of its own, whose
         plan is a candidate too) and that of keeping everything; the
         scan starts at the largest one predicted to fit (none's planned
         bytes less the modelled bytes it saves) and moves up while the
         plans fit, each search starting from the plan below, or down
         until a plan proven optimal fits (the optimum only falls as the
         capacity grows, so no smaller one is cheaper). The cheapest
         candidate that fits wins; when none does, the error states the
         smallest planned peak.
    2. Every backward use of a recomputed value reads a clone built right
       before the first backward op that needs it (its recomputed operands
       cloned first), so its buffer lives from there to its last backward
       use; the forward value dies after its last forward use. Clones are
       tagged `train.recomputed`, which also keeps CSE from merging them
       back. Recomputing is exact: ops are pure, random numbers are a
       function of the key and the stream, and running statistics are
       updated by the forward's ops alone.
    3. Tags the function with `train.recompute`: the policy, the saved
       activation bytes with it and with `none` (each buffer once; a
       reshape is a view), the FLOPs of the clones and of the step (the
       cost each nn op declares, NN_CostOpInterface); with a
       budget also the budget, the plan's planned bytes and how it was
       chosen (which candidate, the integer program's size and its gap).

    Example (`policy=selective`): the backward's use of `%t` reads a clone.

    ```mlir
    %h = nn.matmul %x, %wt : ...
    %t = nn.tanh %h : ...
    ... loss ...
    %g = nn.mul %dy, %t : ...      // the tanh's VJP
    // becomes
    %t2 = nn.tanh %h {train.recomputed} : ...
    %g = nn.mul %dy, %t2 : ...
    ```
  }];
  let options = [
    Option<"policy", "policy", "::mlir::ztc::RecomputePolicy",
           /*default=*/"::mlir::ztc::RecomputePolicy::None",
           "none, selective, full, sqrt, or budget (with `budget`)",
           "::mlir::ztc::closedSet(::mlir::ztc::kRecomputePolicies)">,
    Option<"budget", "budget", "std::string", /*default=*/"\"\"",
           "For policy budget: BYTES (8GiB, 6e9) or FRACTION (0.6, 60%) of "
           "the planned peak with none">,
    Option<"blocks", "blocks", "std::string", /*default=*/"\"\"",
           "For full: a regular expression whose first match in a node name "
           "names the node's block (default: its numbered scope)">,
    Option<"searchNodes", "search-nodes", "int64_t", /*default=*/"10000",
           "For budget: branch-and-bound nodes each integer program may "
           "explore (a bound on work, not time: the same inputs give the "
           "same plan on any machine)">,
  ];
  let dependentDialects = ["::mlir::ztc::train::TrainDialect"];
}

def BuildEntriesPass : Pass<"ztc-build-entries", "ModuleOp"> {
  let summary = "Make the compiled step's entry functions from the model's";
  let description = [{
    Input: a module holding one function, the model's step (after
    `ztc-attach-loss` and `ztc-autodiff` for every entry but `forward`).
    Output: one function per requested entry, in the order of `entries`,
    each named after its kind and tagged `train.entry`; the model's function
    is gone. The emitter prints each as the C entry `ztc_<kind>`.

    1. Checks the module: exactly one function; for the training entries,
       a first result that is a scalar float loss.
    2. Per entry kind:
       - `forward`: the model's outputs; results tagged `train.update_of`
         (running statistics) are dropped, so a forward run leaves the model
         as it was;
       - `train_step`: the function as it is: loss, gradients (for
         `ztc-optimizer` to consume) and state updates, plus a
         `train.record_loss` of the loss for the trainer's logs;
       - `loss_and_grads`: loss and gradients, state updates dropped; each
         gradient result is named (`onnx.name`) after its parameter, the
         name the runtime writes it under;
       - `loss`: the loss alone; every gradient op dies in the next cleanup;
       - `evaluate`: the loss as `model.eval()` computes it, and for a
         cross entropy the f32 counts `correct` (rows whose label has the
         highest score; a tie counts) and `counted` (rows whose label is
         not `ignore-index`); state updates dropped.
       Every `nn.mode_select` becomes its `inference` operand in
       `evaluate` and its `training` operand elsewhere.
    3. Erases the model's function.

    Example (`entries=train_step,loss_and_grads`):

    ```mlir
    func.func @main(%w: tensor<4xf32> {train.binding = #train.binding<param "w">}, ...)
        -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"})
    // becomes
    func.func @train_step(...) -> (tensor<f32>,
                                    tensor<4xf32> {train.grad_of = "w"})
        attributes {train.entry = "train_step"} {
      ...
      train.record_loss %loss : tensor<f32>
      return ...
    }
    func.func @loss_and_grads(...) -> (tensor<f32>,
        tensor<4xf32> {onnx.name = "w", train.grad_of = "w"})
        attributes {train.entry = "loss_and_grads"}
    ```
  }];
  let options = [
    ListOption<"entries", "entries", "std::string",
               "Entries to build, in order: forward, train_step, "
               "loss_and_grads, loss">,
  ];
  let dependentDialects = ["::mlir::ztc::train::TrainDialect"];
}

def MergeCrossEntropyPass : Pass<"ztc-merge-cross-entropy", "func::FuncOp"> {
  let summary = "Take a fused cross entropy's loss from its backward op";
  let description = [{
    Runs on each entry after `ztc-build-entries`. An entry that computes
    the gradients of an `nn.linear_cross_entropy` runs its product twice:
    the forward op for the loss, its backward op (which recomputes the
    logits chunk by chunk) for the gradients. The backward op has every
    row's log-sum-exp too and gives the same loss as its third result, so
    the forward op can go:

    1. For each `nn.linear_cross_entropy` whose `correct` result nothing
       reads, finds an `nn.linear_cross_entropy_backward` in the same block
       with the same attributes and the same `x`, `w` and `target`: the
       values themselves, or their recomputation (`ztc-recompute`'s clones,
       marked `train.recomputed`, of the ops that computed them, reading
       the same values or their recomputations), which a policy such as
       `selective` gives the backward.
    2. When every reader of the forward's loss comes after that backward
       op (so the backward does not depend on the loss, and its loss is
       defined where the readers are), the readers read the backward's loss
       and the forward op is erased.

    Entries without the backward (`evaluate`, `loss`) keep the forward op,
    as does an entry whose backward depends on the loss.

    Example:

    ```mlir
    %loss, %correct = nn.linear_cross_entropy %x, %w, %t {transpose_b}
    %dx, %dw, %l2 = nn.linear_cross_entropy_backward %x, %w, %t, %g
                      {transpose_b}
    train.record_loss %loss
    // becomes
    %dx, %dw, %l2 = nn.linear_cross_entropy_backward %x, %w, %t, %g
                      {transpose_b}
    train.record_loss %l2
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect"];
}

def AccumulatePass : Pass<"ztc-accumulate", "ModuleOp"> {
  let summary = "Gradient accumulation: an accumulate entry and a mean step";
  let description = [{
    With `micro-batches` K > 1, one optimizer step spans K calls: K - 1 of
    `@accumulate`, then one of `@train_step`. Input: a module with
    `@train_step` returning the loss, gradients (`train.grad_of`) and state
    updates (`train.update_of`), before `ztc-optimizer`. With K = 1 nothing
    changes.

    1. Per gradient of `@train_step`, adds a state argument
       `<param>.grad_accum` (bound as a `state`; the runtime zeroes it).
    2. Clones `@train_step` into `@accumulate` (`train.entry =
       "accumulate"`), which returns the loss, its state updates (running
       statistics change every micro-batch) and accumulator + gradient as
       the update of each accumulator.
    3. Rewrites `@train_step` to hand the optimizer (accumulator + gradient)
       / K in place of each gradient, and to reset every accumulator to
       zero (updates after the others), so the next optimizer step starts
       from nothing.

    A result of `@train_step` that is neither the loss, a gradient nor an
    update is an error naming its index.

    Accumulators of f32 gradients have the element type `accum-dtype`
    (default fp32, whatever the training precision: DeepSpeed's bf16 mode
    accumulates in bf16, which loses precision); a narrower one is cast to
    f32, added to the gradient and rounded back once per micro-batch.

    Example (K = 2):

    ```mlir
    func.func @train_step(%w: ...) -> (tensor<f32>,
                                       tensor<4xf32> {train.grad_of = "w"})
    // becomes
    func.func @train_step(%w: ..., %acc: tensor<4xf32>
                          {train.binding = #train.binding<state "w.grad_accum">})
        -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"},
            tensor<4xf32> {train.update_of = "w.grad_accum"})
    func.func @accumulate(%w: ..., %acc: ...)
        -> (tensor<f32>, tensor<4xf32> {train.update_of = "w.grad_accum"})
    ```
  }];
  let options = [
    Option<"microBatches", "micro-batches", "unsigned", /*default=*/"1",
           "Micro-batches per optimizer step (1: no accumulation)">,
    Option<"accumDtype", "accum-dtype", "::mlir::ztc::AccumType",
           /*default=*/"::mlir::ztc::AccumType::Fp32",
           "Element type of the accumulators of f32 gradients: fp32, bf16 "
           "or fp16 (each micro-batch's sum is computed in f32 and rounded "
           "once)",
           "::mlir::ztc::closedSet(::mlir::ztc::kAccumTypes)">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect",
                           "::mlir::arith::ArithDialect"];
}

def OptimizerPass : Pass<"ztc-optimizer", "func::FuncOp"> {
  let summary = "Append the optimizer update to a loss-and-gradients function";
  let description = [{
    Input: a function returning the scalar loss followed by gradients, each
    result tagged `train.grad_of = "<parameter name>"` (what ztc-autodiff
    produces). Output: the training step, written with `train` ops. In a
    module of entries (`ztc-build-entries`) only `train.entry =
    "train_step"` is updated; the other entries keep their gradients.

    1. Adds the hyperparameter arguments `lr` and `step` (rank-0 f32, the
       1-based optimizer step; bound as `hyper`s), written by the runtime
       before every call, so learning-rate schedules cost no recompilation.
    2. Clips gradients by their global L2 norm when `clip-grad-norm` > 0:
       one `train.clip_by_global_norm` over every gradient.
    3. Per parameter, adds its state arguments (bound as `state`s, named
       `<param>.momentum_buffer`, `<param>.exp_avg`, `<param>.exp_avg_sq`,
       zero-initialized by the runtime) and one `train.sgd` or `train.adam`
       (AdamW: `decoupled`) with PyTorch's defaults: weight decay 0.01 for
       AdamW, 0 otherwise. `adam8bit` and `adamw8bit` (bitsandbytes'
       Adam8bit and AdamW8bit; the Hugging Face Trainer's `adamw_bnb_8bit`
       and `adamw_8bit` name the latter) give each float32 parameter of at
       least 4096 elements 8-bit moments: `<param>.exp_avg` and
       `<param>.exp_avg_sq` as one i8 code per element, and
       `<param>.exp_avg_absmax` and `<param>.exp_avg_sq_absmax`, one f32
       scale per 256 elements, updated by one `train.adam8bit`; smaller
       parameters keep f32 moments and `train.adam`, with decoupled weight
       decay as bitsandbytes applies it in both optimizers.
    4. Returns the loss, then the new value of every updated parameter and
       state, tagged `train.update_of = "<argument name>"`; bufferization
       writes them into the argument's own buffer (an in-place update).
       Results already tagged `train.update_of` (gradient accumulators,
       BatchNorm running statistics) pass through after them.

    Example (SGD, no momentum):

    ```mlir
    func.func @step(%w: tensor<4xf32> {train.binding = #train.binding<param "w">})
        -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"})
    // becomes
    func.func @step(%w: ..., %lr: tensor<f32> {train.binding = #train.binding<hyper "lr">},
                    %step: tensor<f32> {train.binding = #train.binding<hyper "step">})
        -> (tensor<f32> {onnx.name = "loss"},
            tensor<4xf32> {train.update_of = "w"}) {
      %new = train.sgd %w, %g, %lr
          : tensor<4xf32>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
      ...
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "::mlir::ztc::OptimizerKind",
           /*default=*/"::mlir::ztc::OptimizerKind::Adamw",
           "sgd, adam, adamw, adam8bit or adamw8bit (bitsandbytes' 8-bit "
           "states; also adamw_bnb_8bit and adamw_8bit)",
           "::mlir::ztc::closedSet(::mlir::ztc::kOptimizerKinds)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD with Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay (negative: the optimizer's default, 0.01 for "
           "adamw and adamw8bit, 0 otherwise)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "Adam epsilon">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"0.0",
           "Clip gradients to this global L2 norm (0: no clipping)">,
  ];
  let dependentDialects = ["::mlir::ztc::train::TrainDialect"];
}

def ExpandBatchNormPass : Pass<"ztc-expand-batch-norm", "func::FuncOp"> {
  let summary = "Write training batch norms and their gradients as reductions "
                "and elementwise ops";
  let description = [{
    `nn.batch_norm_training` and `nn.batch_norm_training_backward` stay
    whole through autodiff and recomputation, so the step keeps `x` and
    two per-channel statistics for the backward; they have no kernel of
    their own. After them, this pass writes them out:

    1. A forward as the channel means of `x` and of `x^2`, both in f64
       (a cast of `x` for each, so each fuses into its reduction), the
       variance `E[x^2] - E[x]^2` in f64 (0 where rounding leaves it
       below), both rounded to x's type, and `(x - mean) * rstd * scale +
       bias` with `rstd = 1 / sqrt(var + epsilon)`. The square of a float
       of 24 significant bits is exact in f64 and the sums keep 53, so the
       cancellation costs the variance about `2^-53 * (mean /
       deviation)^2`, relatively: below f32's rounding unless a channel's
       mean lies some 10^4 standard deviations from zero. The two means
       read `x` alone, so `ztc-fuse` sums them in one reduction; the
       result subtracts the mean itself and is one loop with what follows
       it (a ReLU, a residual): no centered input is stored. f64 inputs,
       with no wider type, take the mean and then the mean of `(x -
       mean)^2`.
    2. A backward as `sum(g)` and `sum(g * (x - mean))` over each channel,
       and `scale * rstd * (g - sum(g) / M - (x - mean) * rstd^2 *
       sum(g * (x - mean)) / M)` (PyTorch's formula, M the elements of a
       channel): one reduction with both sums once `ztc-fuse` merges them,
       and one loop, reading `g` and `x`. The scale's gradient is the
       second sum times `rstd`, the bias's the first.

    Runs after the optimizer's expansion and CSE (which would merge the
    repeated subtractions) and before `ztc-channels-last`, which moves its
    transposes through the reductions and loops as through any.

    Example:

    ```mlir
    %y, %m, %v = nn.batch_norm_training %x, %s, %b {epsilon = 1.0e-05 : f64}
        : tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>
        -> tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>
    // becomes
    %m64 = nn.reduce_mean (nn.cast %x to f64) {axes = array<i64: 0, 2, 3>,
                                               keepdims = true}
    %w = nn.cast %x to f64
    %q64 = nn.reduce_mean (nn.mul %w, %w) {axes = ..., keepdims = true}
    %mean = nn.cast %m64 to f32
    %var = nn.cast (max(%q64 - %m64 * %m64, 0)) to f32
    %y = nn.add (nn.mul (nn.mul (nn.sub %x, %mean), rstd(%var)), %s) %b
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::arith::ArithDialect"];
}

def LowerTrainPass : Pass<"ztc-lower-train", "func::FuncOp"> {
  let summary = "Expand train ops into nn arithmetic";
  let description = [{
    Rewrites `train.sgd`, `train.adam` and `train.clip_by_global_norm` into
    elementwise `nn` ops and reductions with the formulas of torch.optim's
    single-tensor implementations (see each op), so that the update fuses
    and bufferizes like the rest of the step. Scalars are f32 constants.
    Runs first in the lowering to kernels; passes that need whole updates
    (ZeRO sharding, loss scaling) run before it.

    Example:

    ```mlir
    %new = train.sgd %w, %g, %lr
        : tensor<4xf32>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
    // becomes
    %0 = nn.mul %g, %lr : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
    %new = nn.sub %w, %0 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // ZTC_PASSES_TRAIN_PASSES_TD
