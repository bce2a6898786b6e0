//===- Passes.td - layout passes ---------------------------*- tablegen -*-===//
//
// Activation layouts: channels-last convolutions.
// Included by passes/Passes.td, in the order the training pipeline runs
// them.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_LAYOUT_PASSES_TD
#define ZTC_PASSES_LAYOUT_PASSES_TD

include "mlir/Pass/PassBase.td"

def ChannelsLastPass : Pass<"ztc-channels-last", "func::FuncOp"> {
  let summary = "Store the activations of f32 (and half) convolutions NHWC";
  let description = [{
    ONNX convolutions are NCHW; oneDNN's fast f32 convolutions want their
    channels innermost (blocked or NHWC), and reordering every input and
    output into and out of that layout was a quarter of a small CNN's step
    on the CPU. Runs on the training step's nn ops, after
    `ztc-lower-train` and `ztc-half-gradients`.

    1. Every f32 `nn.conv2d`, `nn.conv2d_backward_data` and
       `nn.conv2d_backward_filter` (and f16 and bf16 ones with
       `half-types`) gets `channels_last`: its activations
       (input, output, output gradient, input gradient) are NHWC, read
       through an NCHW-to-NHWC transpose and written through the inverse.
       Weights stay [O, C / group, kH, kW].
    2. An NHWC-to-NCHW transpose moves past an elementwise op that reads
       it when the op's other operands cost no large transpose (another
       such transpose, a single element, a broadcast operand at most an
       eighth of the result, or a broadcast_to of one): the op is rebuilt
       on NHWC values. It moves past a reduction too, whose axes follow
       (BatchNorm's statistics and gradient sums over N, H, W become sums
       over the NHWC N, H, W). It moves past a max or average pooling,
       their gradients and an inference `nn.batch_norm` (a model
       exported in eval mode) too, which get `channels_last`
       (`nn.max_pool2d_backward` moves for its input and transposes an
       output gradient that is not NHWC already: the pooled size). An
       NCHW-to-NHWC transpose of its inverse's result is that value.
       Repeated until nothing moves.
    3. Transposes, reshapes and broadcasts nothing reads go, and a layout
       transpose left that moves only dimensions of 1 (a global average
       pool's [N, 1, 1, C]) becomes a reshape (a view).

    Between convolutions a BatchNorm (either form), ReLU, residual add and
    pooling thus run on NHWC data with no transpose left; what remains
    transposes the input image and the pooled features before a flatten
    (small), and their gradients. Other element types keep NCHW.
    The CUDA target runs the pass only with `--conv-layout nhwc`, and with
    `half-types`: cuDNN's channels-last convolutions take f16 and bf16
    (its tensor cores' layout), where the CPU's fast ones (oneDNN's) are
    f32.

    Example:

    ```mlir
    %y = nn.conv2d %x, %w ... : tensor<8x3x32x32xf32>, ... -> tensor<8x16x32x32xf32>
    %r = nn.relu %y
    // becomes
    %t = nn.transpose %x {perm = array<i64: 0, 2, 3, 1>}
    %y = nn.conv2d %t, %w {channels_last, ...} -> tensor<8x32x32x16xf32>
    %r = nn.relu %y : tensor<8x32x32x16xf32>
    %n = nn.transpose %r {perm = array<i64: 0, 3, 1, 2>}
    ```
  }];
  let options = [
    Option<"halfTypes", "half-types", "bool", /*default=*/"false",
           "Also f16 and bf16 convolutions (the CUDA target's: cuDNN takes "
           "them channels-last)">,
  ];
}

#endif // ZTC_PASSES_LAYOUT_PASSES_TD
