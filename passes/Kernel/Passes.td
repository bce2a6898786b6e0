//===- Passes.td - kernel passes ---------------------------*- tablegen -*-===//
//
// The kernel level: transposes read in place, fusion, the kernels' scratch,
// the memory plan.
// Included by passes/Passes.td, in the order the training pipeline runs
// them.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_KERNEL_PASSES_TD
#define ZTC_PASSES_KERNEL_PASSES_TD

include "mlir/Pass/PassBase.td"

def FoldTransposesPass : Pass<"ztc-fold-transposes", "func::FuncOp"> {
  let summary = "Let matmul and attention read transposed operands in place";
  let description = [{
    A `kernel.call "transpose"` that swaps only the last two dimensions and
    whose result only matmuls read (weights in a backward step: dx = dy W^T;
    keys in attention: q k^T) is removed: each matmul reads the transpose's
    input instead, with `transpose_a` or `transpose_b` set in its config, and
    the runtime's GEMM reads the operand as stored. Nothing is folded when
    another kernel writes the input between the transpose and a matmul (an
    in-place parameter update), so every matmul still reads what the
    transpose would have copied. The copy and its arena buffer go. A matmul
    that already reads the result transposed reads the input as stored (a
    weight transposed for the forward product and back for the backward
    one: both copies go).

    A transpose whose input is a matmul's product that nothing else reads
    (a weight gradient x^T dy transposed into the weight's layout) goes
    too: the matmul writes the transposed product, (A B)^T = B^T A^T, into
    the transpose's buffer, its operands swapped and their flags flipped.

    Attention's head splits go the same two ways: a transpose of a rank-4
    tensor that swaps dimensions 1 and 2 ([B, T, H, D] <-> [B, H, T, D])
    whose result only attention calls read (as q, k, v, the forward's
    result or its gradient) and whose input nothing overwrites before
    them: each reads the input as stored, the bit of that operand's role
    flipped in the call's `bthd` (runtime/kernels/AttentionShape.h). And
    one whose input an attention call wrote (the result; dq, dk or dv) and
    only attention calls read after it (the backward reading the
    forward's result): the call writes the transpose's buffer, its role's
    bit flipped, and those readers read that buffer so.
    The pass repeats until nothing folds.

    Example:

    ```mlir
    %t = kernel.alloc : memref<64x32xf32>
    kernel.call "transpose" ins(%w : memref<32x64xf32>) outs(%t : memref<64x32xf32>)
        {config = {perm = array<i64: 1, 0>}}
    kernel.call "matmul" ins(%dy, %t : memref<8x64xf32>, memref<64x32xf32>)
        outs(%dx : memref<8x32xf32>) {config = {}}
    // becomes
    kernel.call "matmul" ins(%dy, %w : memref<8x64xf32>, memref<32x64xf32>)
        outs(%dx : memref<8x32xf32>) {config = {transpose_b = true}}
    ```
  }];
}

def FoldHeadWindowsPass : Pass<"ztc-fold-head-windows", "func::FuncOp"> {
  let summary = "Let attention read and write its heads inside a fused projection";
  let description = [{
    A model that projects q, k and v with one product (GPT-2's `c_attn`)
    cuts its [B, T, 3C] result into three [B, T, C] slices, and its
    backward joins their gradients with `copy_into`s (the concat
    canonicalization builds from the slices' gradients). Attention whose
    operands are stored [B, T, H, D] (their `bthd` bits, which
    ztc-fold-transposes sets) can instead reach each one as a window of
    heads of the fused tensor seen as [B, T, W / D, D]: its role's first
    head goes in the call's `head_starts` (one entry per role,
    runtime/kernels/AttentionShape.h) and the logical head count in
    `heads`.

    1. A `kernel.call "slice"` of a [B, T, W] buffer that cuts only the
       last dimension, at unit steps and whole heads, whose result only
       views as [B, T, H, D] read, and those only as attention operands
       stored bthd, goes when nothing writes the fused tensor before those
       calls: each reads its window instead. The slice's buffer goes.
    2. A `copy_into` along the last dimension of a [B, T, W] concat whose
       input is a view of an attention call's output stored bthd (dq, dk,
       dv) that nothing else reads goes when only copies into other columns
       (or calls already writing theirs) touch the concat before it: the
       call writes its window of the concat, allocated before the call.
       The output's buffer goes.

    Nothing else changes: the kernels read and write the same elements,
    so results are those of the step with the copies. Grouped-query calls
    (k with fewer heads than q) take no windows: the windows share one
    logical head count.

    Example:

    ```mlir
    %q = kernel.alloc : memref<2x8x32xf32>
    kernel.call "slice" ins(%qkv : memref<2x8x96xf32>) outs(%q : memref<2x8x32xf32>)
        {config = {starts = array<i64: 0, 0, 0>, sizes = array<i64: 2, 8, 32>,
                   steps = array<i64: 1, 1, 1>}}
    %qh = kernel.view %q : memref<2x8x32xf32> to memref<2x8x2x16xf32>
    kernel.call "attention" ins(%qh, ...) outs(%o : ...) {config = {bthd = 15 : i64, ...}}
    // becomes (with k's and v's slices, columns 32 and 64, folded alike)
    %w = kernel.view %qkv : memref<2x8x96xf32> to memref<2x8x6x16xf32>
    kernel.call "attention" ins(%w, ...) outs(%o : ...)
        {config = {bthd = 15 : i64, heads = 2 : i64,
                   head_starts = array<i64: 0, 2, 4, 0, 0, 0, 0, 0>, ...}}
    ```
  }];
}

def FusePass : Pass<"ztc-fuse", "func::FuncOp"> {
  let summary = "Fuse chains of elementwise kernels, and their reductions, "
                "into one loop";
  let description = [{
    1. Visits kernel.elementwise ops once, in program order. A producer
       fuses into a consumer when the producer's output is an alloc that
       only the producer writes and only that consumer reads, both iterate
       over the same shape (so no element is computed twice), and no op
       between them writes what the producer reads (an in-place update of
       an argument it read would otherwise be read fused).
    2. Fusing moves the producer's body into a new kernel, followed by the
       consumer's ops reading the producer's value in place of the
       consumer's scalar argument; the consumer's other inputs come first
       (those the producer already reads reuse its argument), then the
       producer's. The producer, consumer and buffer are erased.
       Nothing is cloned, so a chain of n kernels fuses in time linear in
       n.
    3. Multi-output fusion: a producer whose output is a step argument the
       consumer reads whole (an optimizer state written in place) moves
       into the consumer, which then writes that argument too, when no op
       between them reads what the producer writes or writes what it
       reads or writes. A producer with several outputs fuses as in 1
       under the same check. AdamW's moment updates thus run inside the
       parameter's update: one loop over the four buffers.
    4. The fused kernel absorbs fusible producers until none is left (a
       fusion may expose the producer's own producers); producers come
       before their consumers, so one pass finds every fusion. Locations
       merge so every fused kernel still names the ONNX nodes it computes.
    5. Then reductions: a float `reduce_sum` or `reduce_mean` call and the
       single-output elementwise kernel whose output only it reads become
       one `kernel.reduce` with the kernel's body, when the kernel can run
       where the call is (as in 3), reads nothing the call writes, and
       the space groups as [reduced, kept, reduced] with every input
       broadcast over whole groups (the emitter's loops). BatchNorm's
       variance then reads its input and mean instead of stored squares,
       and its gradient's sums read dy and the normalized input.
    6. Last, shared values: a producer whose output (an alloc) its
       consumer reads whole and other ops read after the consumer (an
       activation the backward keeps) runs inside the consumer's loop and
       still stores its values, when both loops cover the same elements,
       it can run where the consumer is (as in 3), and every buffer it
       reads is live there anyway (read there or later, an argument or a
       constant), so the planned peak never rises. Nothing is computed
       twice and every value is what it was; GELU's steps, each kept for
       its gradient, become one kernel. It comes after step 5 because a
       reduction takes single-output kernels only.
    7. Then sibling reductions: a `kernel.reduce` or float `reduce_sum` /
       `reduce_mean` call takes in the nearest one among the 24 ops before
       it that reduces the same space along the same axes, with the same
       kind and element type, and reads a buffer it reads too, when that
       one can run where it is (as in 3), it reads nothing that one
       writes and writes nothing that one reads, and what that one reads
       is live there anyway (as in 6). The two become one `kernel.reduce`
       with both's outputs, its body computing both's values (a call's
       value is its input's element), so the shared buffer is read once:
       BatchNorm's backward sums the gradient and its product with the
       centered input in one pass. Each output's terms and the order they
       add in are as they would be alone.

    Example: `relu(add(a, b))` becomes one kernel whose body adds and takes
    the maximum with zero, and the buffer of the sum disappears.
  }];
}

def MatmulEpiloguesPass : Pass<"ztc-matmul-epilogues", "func::FuncOp"> {
  let summary = "Fold bias and residual sums into products and norms";
  let description = [{
    A linear layer is a `matmul` call and a loop adding the bias to its
    product, and a residual block's output a loop adding that to the
    block's input as well: each loop reads and writes the whole product
    again. For each `kernel.elementwise` with one output whose body is
    only `p + bias` or `(p + bias) + r` (each sum either way round, both
    rounded to the element type, as any loop's sums are), where

    1. `p` is a buffer of the output's type that a `matmul` call without
       a bias writes and only this loop reads;
    2. `bias` is a row vector of the element type (the last dimension's
       size, ones before it) and `r` a buffer of the output's type other
       than the output (the library adds it after the product is stored);
    3. nothing between the call and the loop writes what the call reads,
       and the call does not read the loop's output;

    the call and the loop become one call at the loop, writing the loop's
    output: `matmul` with the bias as a third input, or `matmul_add` (a,
    b, the addend r, the bias), whose libraries add the bias and then the
    addend to each element as it is stored, each sum rounded to the
    element type as the loop rounded it. The CPU's result is the same
    bits; CUDA's runs in the product's epilogue (cuBLASLt's bias
    epilogue, the addend as its C), one kernel instead of two.

    Example:

    ```mlir
    kernel.call "matmul" ins(%x, %w : ...) outs(%p : memref<8x64xf32>)
    kernel.elementwise ins(%p, %b, %r : memref<8x64xf32>, memref<64xf32>,
        memref<8x64xf32>) outs(%y : memref<8x64xf32>) {
    ^bb0(%v: f32, %c: f32, %s: f32):
      %0 = arith.addf %v, %c : f32
      %1 = arith.addf %0, %s : f32
      kernel.yield %1 : f32
    }
    // becomes
    kernel.call "matmul_add" ins(%x, %w, %r, %b : ...)
        outs(%y : memref<8x64xf32>)
    ```

    A linear layer's backward also reads its output's gradient `g`
    ([rows, n]) twice beside the product for its input's gradient: once
    for the weight's gradient, `matmul(g, x)` with g transposed, and once
    for the bias's, a `reduce_sum` of g over every dimension but the last.
    Before the loops above, each such sum, in the step's block, whose
    input is a view of (or is) the first operand of a transposed `matmul`
    without a bias, [rows, n], on the same stream, becomes one
    `matmul_bias_grad` call with the product's inputs and both outputs,
    at the later of the two calls, when nothing between them writes what
    the earlier reads, nor reads or writes the earlier's output, and the
    later does not read that output. The CPU's library sums the rows as
    `reduce_sum` does (the same bits); CUDA's in cuBLASLt's bias-gradient
    epilogue (`CUBLASLT_EPILOGUE_BGRADB`), one kernel instead of two. A
    layer computing `x W` (GPT-2's Conv1D) has the weight gradient `xᵀ g`,
    g the second operand and not transposed: its sum becomes
    `matmul_bias_grad_b`, which sums b's rows (`CUBLASLT_EPILOGUE_BGRADA`).

    ```mlir
    kernel.call "reduce_sum" ins(%g : memref<8x16x64xf32>)
        outs(%db : memref<64xf32>) {config = {axes = array<i64: 0, 1>,
        keepdims = false}}
    %gv = kernel.view %g : memref<8x16x64xf32> to memref<128x64xf32>
    kernel.call "matmul" ins(%gv, %x : ...) outs(%dw : memref<64x32xf32>)
        {config = {transpose_a = true}}
    // becomes
    kernel.call "matmul_bias_grad" ins(%gv, %x : ...)
        outs(%dw, %db : memref<64x32xf32>, memref<64xf32>)
        {config = {transpose_a = true}}
    ```

    A residual block's input gradient is the sum of the residual's
    gradient and the layer norm's input gradient: a loop reading both and
    writing the sum. After the bias gradients, each `kernel.elementwise` in
    the step's block whose one output is only the float sum of two inputs
    of its type, one of them the input gradient (first output) of a
    `layer_norm_backward` call without an addend, written into a buffer of
    its own that only the call and the loop use, becomes that call with the
    other input as its addend, at the loop, writing the loop's output,
    when nothing between them writes what the call reads or uses its other
    outputs, and the loop's output is not a buffer the call reads (it may
    be the addend itself). Both libraries add the addend as they store the
    gradient, rounding as the loop rounded (the same bits); the call may
    then write over the addend (ztc-write-in-place).

    ```mlir
    kernel.call "layer_norm_backward" ins(%x, %s, %dy : ...)
        outs(%g, %ds, %db : ...) {config = {axis = 1 : i64, epsilon = ...}}
    kernel.elementwise ins(%r, %g : memref<8x64xf32>, memref<8x64xf32>)
        outs(%y : memref<8x64xf32>) {
    ^bb0(%a: f32, %b: f32):
      %0 = arith.addf %a, %b : f32
      kernel.yield %0 : f32
    }
    // becomes
    kernel.call "layer_norm_backward" ins(%x, %s, %dy, %r : ...)
        outs(%y, %ds, %db : ...) {config = {axis = 1 : i64, epsilon = ...}}
    ```

    Under mixed precision a layer norm runs in f32 and a loop casts its
    result to the products' type. Last, each `kernel.elementwise` in the
    step's block whose body is only an `arith.truncf` of its one input,
    of the same shape, from the output's compute type (f32 for bf16 and
    f16), where that input is the result of a `layer_norm` call written
    into a buffer of its own that only the call and the loop use, becomes
    `layer_norm_narrow` (the same inputs and configuration) at the loop,
    writing the loop's output, when nothing between them writes what the
    call reads. Both libraries round each result once, to the output's
    type, as the cast did (the same bits).

    Its backward, in f32 as well, reads the products' gradient through a
    loop widening it to f32, and a loop narrows its input's gradient for
    the products. Then each such narrowing loop (only an `arith.truncf` of
    its one input) whose input is the first output of a
    `layer_norm_backward` call, the last op before the loop writing that
    buffer, where the call's result gradient is written by a loop that
    only widens (`arith.extf`) one input of the loop's output type into a
    buffer of its own that only the two use, becomes
    `layer_norm_backward_narrow`: the call's inputs with the narrow
    gradient in place of the wide one, and its outputs with the loop's
    output last, at the loop, when nothing between the call and the loop
    writes what the call reads or uses what it writes, nothing between
    the widening and the loop writes the narrow gradient, and the loop's
    output is none of those buffers. Both libraries widen the gradient as
    the loop did and round the narrow copy from the stored f32 gradient
    (the same bits); two loops and the f32 gradient's buffer go. Where
    the result gradient is no such widening (a sum of several products'
    gradients in f32, Llama's q, k and v; or a widening that cannot go),
    the narrowing alone folds under the same conditions:
    `layer_norm_backward_narrow_out`, the call's inputs as they are and
    the loop's output last.

    ```mlir
    kernel.elementwise ins(%dy : memref<8x64xbf16>)
        outs(%w : memref<8x64xf32>) { ... arith.extf ... }
    kernel.call "layer_norm_backward" ins(%x, %s, %w, %r : ...)
        outs(%g, %ds, %db : ...) {config = {axis = 1 : i64, ...}}
    kernel.elementwise ins(%g : memref<8x64xf32>)
        outs(%n : memref<8x64xbf16>) { ... arith.truncf ... }
    // becomes
    kernel.call "layer_norm_backward_narrow" ins(%x, %s, %dy, %r : ...)
        outs(%g, %ds, %db, %n : ...) {config = {axis = 1 : i64, ...}}
    ```

    After the bias epilogues, sums of products without a bias: a
    residual after a bias-less layer (Llama's), and the input gradient of
    layers that share their input, which autodiff sums from each layer's
    product. Each `kernel.elementwise` in the step's block whose one
    output is the float sum of two inputs of its type, one a product as
    in 1 and 3 above, the other not the loop's output's buffer, becomes
    `matmul_add` with the other as its addend, at the loop (the same
    bits: the product rounded as stored, then the sum). One whose output
    is `(x + y) + z`, three distinct inputs of its type, z and one of x
    and y products so, and the inner sum rounded (or the element type its
    own compute type: f32's unrounded sums round nothing), becomes two
    `matmul_add` calls at the loop: the inner product's call adding the
    third input into its own buffer, then z's call adding that into the
    loop's output, the loop's sums in its order. Llama's layer: q, k and
    v's input gradient, and the gate's and up's, each one loop fewer.

    ```mlir
    kernel.call "matmul" ins(%a, %wa : ...) outs(%pa : memref<8x64xf32>)
    kernel.call "matmul" ins(%b, %wb : ...) outs(%pb : memref<8x64xf32>)
    kernel.call "matmul" ins(%c, %wc : ...) outs(%pc : memref<8x64xf32>)
    kernel.elementwise ins(%pa, %pb, %pc : ...) outs(%y : ...) {
      ... (pa + pb) + pc ... }
    // becomes
    kernel.call "matmul" ins(%a, %wa : ...) outs(%pa : ...)
    kernel.call "matmul_add" ins(%b, %wb, %pa : ...) outs(%pb : ...)
    kernel.call "matmul_add" ins(%c, %wc, %pb : ...) outs(%y : ...)
    ```

    A product the loop reads through a `kernel.view` that nothing else
    reads (GPT-2's [B*T, C] products in [B, T, C] sums) folds as if read
    directly, in the sums above (with its bias already in its call, and
    a bias fold only where the view keeps the last dimension), in the
    layer-norm narrowing and in a widening before a layer norm's
    backward: the fused call writes the loop's output, and reads the
    addend, viewed with the product's shape.

    Last, under mixed precision, sums in f32 of half products. A loop
    whose one output, of a half type's compute type, is `r + extf(p)` (a
    residual stream in f32) becomes `matmul_add_wide` (a, b, r, the bias
    p's call adds) at the loop; `r + extf(p + bias)`, the bias a row
    vector of p's type that the loop adds rounded and p's call adds none
    (a linear layer under autocast), the same with the loop's bias. One that yields `extf(s)`, `s` a chain of
    unrounded sums of half products (one input's gradient from q, k and
    v's products), becomes `matmul_wide` of the first product into a
    new f32 buffer and a `matmul_add_wide` per further product adding it
    to the sum so far, the last into the loop's output, in the loop's
    order; `extf(p)` alone folds only when just buffers and views come
    between p's call and the loop. The CPU's results are the loop's bits
    (the product rounded to T, then widened and added); CUDA's single
    product adds in f32 before rounding (cuBLASLt, f32 C and D).

    ```mlir
    kernel.call "matmul" ins(%x, %w : ...) outs(%p : memref<8x64xbf16>)
    kernel.elementwise ins(%r, %p : memref<8x64xf32>, memref<8x64xbf16>)
        outs(%y : memref<8x64xf32>) { ... %r + arith.extf %p ... }
    // becomes
    kernel.call "matmul_add_wide" ins(%x, %w, %r : ...) outs(%y : ...)
    ```
  }];
}

def WriteInPlacePass : Pass<"ztc-write-in-place", "func::FuncOp"> {
  let summary = "Write a kernel's result over an input nothing reads after it";
  let description = [{
    A kernel whose input dies at it need not take memory for its result
    beside that input: the result can overwrite it. For each
    `kernel.elementwise` (which reads every input element before it writes
    an output, so an output may be an input) and each `kernel.call` whose
    kernel has a ZTC_IN_PLACE row in runtime/kernels/Library.def (each row
    of the input read before any of it is written: softmax, log-softmax),
    in program order, an output takes the place of an input when (a
    loop's inputs tried from the one whose buffer was last used furthest
    back, so that the loop depends on no more of the ops just before it
    than it did, and ztc-group-launches can still launch it with them):

    1. they have the same type (shape and element type);
    2. the output is an arena buffer (`kernel.alloc`) that only this
       kernel and later ops use;
    3. the input is, or is a view of, an arena buffer (no argument, no
       constant) that no op uses after this kernel, none on another
       stream, and the kernel reads it through that input alone (an
       elementwise kernel may also read it through others of the output's
       type, which read the element being written).

    The output's uses then use the input and its alloc goes: one buffer
    holds the input until the kernel and the result after it, so the
    planned peak drops wherever both were live. It runs after
    ztc-schedule-collectives, which puts collectives on their own streams,
    and before ztc-plan-memory. Values are unchanged, bit for bit.

    Example: the logits of a cross-entropy, whose log-softmax is their
    only reader:

    ```mlir
    %l = kernel.alloc : memref<8x50257xf32>
    kernel.call "matmul" ins(%h, %w : ...) outs(%l : memref<8x50257xf32>)
    %p = kernel.alloc : memref<8x50257xf32>
    kernel.call "log_softmax" ins(%l : memref<8x50257xf32>)
        outs(%p : memref<8x50257xf32>) {config = {axis = 1 : i64}}
    // becomes
    kernel.call "log_softmax" ins(%l : memref<8x50257xf32>)
        outs(%l : memref<8x50257xf32>) {config = {axis = 1 : i64}}
    ```
  }];
}

def PlanScratchPass : Pass<"ztc-plan-scratch", "func::FuncOp"> {
  let summary = "Give library calls and fused reductions the scratch their "
                "CUDA kernels work in";
  let description = [{
    The CUDA library's convolutions, long reductions and NF4 products, and
    the fused reductions (`kernel.reduce`) whose outputs it splits over
    several blocks, need device memory besides their operands (a
    convolution's columns, partial sums, a dequantized tile). Instead of allocating it while the step runs,
    where the planned peak could not see it, the kernel is given a buffer
    of the plan:

    1. For every `kernel.call` whose kernel has a ZTC_SCRATCH row in
       runtime/kernels/Library.def, computes the bytes its CUDA kernel will
       use from the call's element type, shapes and configuration, with
       the row's function of runtime/kernels/cuda/Scratch.h (the function
       the kernel itself lays its scratch out with).
       For every `kernel.reduce`, the bytes of its blocks' partial sums
       (Scratch.h's groupReducePlan, which the emitted code runs by).
    2. When that is more than zero, creates a `kernel.alloc` of that many
       `i8` right before the op and makes it the op's `scratch` operand,
       so ztc-plan-memory places it like any buffer, live for the op alone.

    3. Records on the function what the target holds besides the plan,
       which the footprint and `ztc inspect` count with the arena:
       `kernel.reserved_bytes` (`reserved-bytes`: the library's memory,
       once per process, cuBLAS's workspace) and `kernel.input_sets`
       (`input-sets`: how many sets of the per-call bindings the runtime
       keeps, two where it uploads the next call's while one runs).

    The training and forward pipelines run it for targets whose library
    takes planned scratch (CUDA); the CPU's kernels keep theirs.

    Example:

    ```mlir
    kernel.call "reduce_sum" ins(%x : memref<64x4096xf32>)
        outs(%y : memref<4096xf32>) {config = {axes = [0], keepdims = false}}
    // becomes (4096 outputs, one segment each: no partial sums) nothing;
    // over [4096, 64] reduced to 64 outputs, 16 segments each:
    %s = kernel.alloc : memref<8192xi8>
    kernel.call "reduce_sum" ins(%x : memref<4096x64xf32>)
        outs(%y : memref<64xf32>) scratch(%s : memref<8192xi8>)
        {config = {axes = [0], keepdims = false}}
    ```
  }];
  let options = [
    Option<"reservedBytes", "reserved-bytes", "int64_t", /*default=*/"0",
           "Device memory the target's library holds besides the plan">,
    Option<"inputSets", "input-sets", "int64_t", /*default=*/"1",
           "Sets of the per-call bindings the target's runtime keeps">,
  ];
}

def PlanMemoryPass : Pass<"ztc-plan-memory", "func::FuncOp"> {
  let summary = "Place every arena buffer at a byte offset";
  let description = [{
    1. Numbers the ops of the step and computes each alloc's live range:
       from the alloc to the last op that uses it or a view of it; returned
       buffers live to the end. With several streams (`kernel.stream`), a
       use ends only where every stream that runs later work is ordered
       after it: at the latest of the first covering waits (a
       `kernel.wait` on that stream for a `kernel.signal` on the user's
       stream after the use), or at the end when a stream has none. A step
       whose stream other than 0 is not waited for by stream 0 before the
       end is an error (the next call would race with it).
    2. Places buffers largest first, each at the lowest aligned offset whose
       bytes no already-placed buffer with an overlapping live range uses
       (best-fit offset assignment).
    3. Records `offset` on every alloc, and on the function
       `kernel.arena_bytes` (the peak: the highest end of a buffer, the
       exact size the runtime allocates and, once every entry ran, its
       measured high-water mark) and `kernel.unplanned_bytes` (the sum of
       all buffer sizes, each rounded up to the alignment, for comparison).
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Byte alignment of every buffer (256 suits CUDA and AVX-512)">,
  ];
}

def GroupLaunchesPass : Pass<"ztc-group-launches", "func::FuncOp"> {
  let summary = "Launch runs of independent fused loops as one kernel";
  let description = [{
    After planning, on a target whose fused loops are device launches
    (CUDA): consecutive `kernel.elementwise` ops of one stream, with only
    allocations, views and constants between them, whose buffers are
    independent get the same `kernel.launch_group`, and the emitter prints
    each group as one kernel whose blocks are split among its loops (a
    multi-tensor launch: an optimizer's update of every parameter is one
    launch instead of one per parameter).

    Independent means, for any two members, that neither writes bytes the
    other reads or writes: the same argument, or arena buffers whose
    planned bytes (`offset`) overlap, are a conflict; constants are only
    read. The plan was made for the loops in order; members run in any
    order, so they may share no byte one of them writes. A group is also
    limited to `max-params` pointer parameters (the kernel's parameter
    space). Nothing moves and no buffer changes, so the results and the
    planned peak are those of the ungrouped step.
  }];
  let options = [
    Option<"maxParams", "max-params", "int64_t", /*default=*/"480",
           "Most pointer parameters of one grouped kernel (CUDA's kernel "
           "parameters hold 4 KiB)">,
  ];
}

#endif // ZTC_PASSES_KERNEL_PASSES_TD
