//===- Passes.td - every ztc pass --------------------------*- tablegen -*-===//
//
// The records of all ztc passes, grouped by stage of the flow in
// docs/architecture.md. Each pass has one .cpp and one lit file named after
// its flag.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_PASSES_TD
#define ZTC_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

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
       built.
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
                           "::mlir::arith::ArithDialect"];
}

def ConvertNNToKernelPass : Pass<"ztc-convert-nn-to-kernel", "func::FuncOp"> {
  let summary = "Bufferize a step: nn ops become kernels on arena buffers";
  let description = [{
    1. Function arguments (inputs, parameters) become memref buffers.
    2. Every `nn` op writes a new `kernel.alloc`: elementwise ops become a
       one-op `kernel.elementwise` whose body is the op's scalar formula,
       structured ops a `kernel.call` into the runtime library (the op's
       attributes are its config), concat one `copy_into` call per input.
    3. Reshapes become `kernel.view` (no copy); tensor constants become
       `kernel.constant`.
    4. Returned values that are not arena buffers (inputs, parameters,
       constants) are copied into one, so outputs are read at arena offsets.

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

//===----------------------------------------------------------------------===//
// Kernel-level transforms
//===----------------------------------------------------------------------===//

def FusePass : Pass<"ztc-fuse", "func::FuncOp"> {
  let summary = "Fuse chains of elementwise kernels into one loop";
  let description = [{
    1. Walks kernel.elementwise ops in order. A producer fuses into a
       consumer when the producer's output is an alloc that only the
       producer writes and only that consumer reads, and both iterate over
       the same shape (so no element is computed twice).
    2. Fusing clones the producer's body into the consumer in place of the
       consumer's scalar argument, adds the producer's inputs to the
       consumer's, and erases the producer and its buffer.
    3. Repeats until nothing fuses; locations merge so every fused kernel
       still names the ONNX nodes it computes.

    Example: `relu(add(a, b))` becomes one kernel whose body adds and takes
    the maximum with zero, and the buffer of the sum disappears.
  }];
}

def PlanMemoryPass : Pass<"ztc-plan-memory", "func::FuncOp"> {
  let summary = "Place every arena buffer at a byte offset";
  let description = [{
    1. Numbers the ops of the step and computes each alloc's live range:
       from the op that first writes it to the last op that reads it or a
       view of it; returned buffers live to the end.
    2. Places buffers largest first, each at the lowest aligned offset whose
       bytes no already-placed buffer with an overlapping live range uses
       (best-fit offset assignment).
    3. Records `offset` on every alloc, and on the function
       `kernel.arena_bytes` (the peak: the exact size the runtime allocates)
       and `kernel.unplanned_bytes` (the sum of all buffer sizes, for
       comparison).
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Byte alignment of every buffer (256 suits CUDA and AVX-512)">,
  ];
}

#endif // ZTC_PASSES_PASSES_TD
