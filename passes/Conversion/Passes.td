//===- Passes.td - conversion passes -----------------------*- tablegen -*-===//
//
// The conversions between the dialects: onnx to nn, nn to kernel.
// Included by passes/Passes.td, in the order the training pipeline runs
// them.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_CONVERSION_PASSES_TD
#define ZTC_PASSES_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertOnnxToNNPass : Pass<"ztc-convert-onnx-to-nn", "func::FuncOp"> {
  let summary = "Give imported ONNX nodes their meaning as typed nn ops";
  let description = [{
    1. Resolves every `onnx.node` to its operator's since-version (from the
       model opset and the ONNX operator history) and finds the converter
       registered for that (op type, since-version). Every node without one
       is listed in a single error, grouped by op type.
    2. Converts nodes in graph order. Operands are already `nn` values with
       static shapes, so each converter computes exact types; shape
       subgraphs (Shape, Gather, Concat, ...) fold to constants as they are
       built. A training-mode Dropout draws its mask with
       `nn.random_uniform` from the function's random key, an argument
       `rng` (rank-0 i64, bound as a `hyper`) added on first use.
    3. Rewrites the function type to the inferred result types.

    Example:

    ```mlir
    %0 = onnx.node "Relu"(%x) {opset = 17 : i64}
           : (tensor<8x64xf32>) -> none
    // becomes
    %0 = nn.relu %x : tensor<8x64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect",
                           "::mlir::arith::ArithDialect"];
}

def ConvertNNToKernelPass : Pass<"ztc-convert-nn-to-kernel", "func::FuncOp"> {
  let summary = "Bufferize a step: nn ops become kernels on arena buffers";
  let description = [{
    1. Function arguments (inputs, parameters) become memref buffers.
    2. Every `nn` op writes a new `kernel.alloc`: elementwise ops become a
       one-op `kernel.elementwise` whose body is the op's scalar formula,
       structured ops a `kernel.call` into the runtime library (the op's
       attributes are its config), concat one `copy_into` call per input,
       `dist` collectives a `kernel.collective` of their kind.
    3. Reshapes become `kernel.view` (no copy); tensor constants become
       `kernel.constant`; `train.record_loss` becomes `kernel.record_loss`
       of the loss's buffer.
    4. Returned values that are not arena buffers (inputs, parameters,
       constants) are copied into one, so outputs are read at arena offsets.
    5. Records on the function `kernel.tensor_bytes`, the bytes of every
       intermediate nn value as its own buffer: the baseline the memory
       plan is measured against.
    6. The scalar ops of an op `ztc-autodiff` made (its location tagged
       `train.gradient`) are marked `kernel.unrounded`: the emitter leaves
       their half-precision results in float, so a fused gradient formula
       rounds only where it stores or casts. A forward op's results round
       as the op alone would, so recomputing it gives the saved bits.

    Example:

    ```mlir
    %0 = nn.relu %x : tensor<8xf32> -> tensor<8xf32>
    // becomes
    %0 = kernel.alloc : memref<8xf32>
    kernel.elementwise ins(%x : memref<8xf32>) outs(%0 : memref<8xf32>) {
    ^bb0(%a: f32):
      %c0 = arith.constant 0.0 : f32
      %r = arith.maximumf %a, %c0 : f32
      kernel.yield %r : f32
    }
    ```
  }];
  let dependentDialects = ["::mlir::ztc::kernel::KernelDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

#endif // ZTC_PASSES_CONVERSION_PASSES_TD
