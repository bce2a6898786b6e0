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

#endif // ZTC_PASSES_PASSES_TD
