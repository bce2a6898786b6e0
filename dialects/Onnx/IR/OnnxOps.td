//===- OnnxOps.td - onnx dialect ops -----------------------*- tablegen -*-===//
//
// The three ops an imported ONNX graph is made of: generic nodes, constants
// (non-float initializers and the "absent optional input" marker).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_ONNX_IR_ONNXOPS_TD
#define ZTC_DIALECTS_ONNX_IR_ONNXOPS_TD

include "dialects/Onnx/IR/OnnxBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// NodeOp
//===----------------------------------------------------------------------===//

def Onnx_NodeOp : Onnx_Op<"node", [Pure]> {
  let summary = "one ONNX node, as imported";
  let description = [{
    A node of the ONNX graph. `op_type` and `domain` name the operator,
    `opset` is the model's opset version for that domain (the conversion
    resolves it to the operator's since-version), and `attrs` holds the ONNX
    attributes: ints as i64, floats as f32, strings, dense tensors, and
    arrays of those. An absent optional input is an `onnx.none` operand.

    Example:

    ```mlir
    %0 = onnx.node "Gemm"(%x, %w, %b) {opset = 17 : i64,
           attrs = {transB = 1 : i64}}
           : (tensor<8x64xf32>, tensor<10x64xf32>, tensor<10xf32>) -> none
    ```
  }];
  // The ONNX operator and where it comes from.
  let arguments = (ins Variadic<AnyType>:$inputs, StrAttr:$op_type,
                   DefaultValuedStrAttr<StrAttr, "">:$domain,
                   I64Attr:$opset,
                   DefaultValuedAttr<DictionaryAttr, "{}">:$attrs);
  let results = (outs Variadic<AnyType>:$outputs);
  let assemblyFormat = [{
    $op_type `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

def Onnx_ConstantOp : Onnx_Op<"constant", [Pure, ConstantLike,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a non-float initializer";
  let description = [{
    An initializer that is not a trainable float weight (shape tensors,
    indices, masks). Float initializers become function arguments instead, so
    weights never pass through attributes.

    Example:

    ```mlir
    %shape = onnx.constant dense<[8, 64]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict $value";
  // The result type is the value's type.
  let builders = [OpBuilder<(ins "::mlir::ElementsAttr":$value), [{
    build($_builder, $_state, value.getType(), value);
  }]>];
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// NoneOp
//===----------------------------------------------------------------------===//

def Onnx_NoneOp : Onnx_Op<"none", [Pure]> {
  let summary = "an absent optional input";
  let description = [{
    ONNX marks a skipped optional input with an empty name; the importer
    passes the result of `onnx.none` in its place, so operand positions keep
    their meaning.

    Example:

    ```mlir
    %none = onnx.none
    ```
  }];
  let results = (outs NoneType:$result);
  let assemblyFormat = "attr-dict";
  let builders = [OpBuilder<(ins), [{
    build($_builder, $_state, $_builder.getNoneType());
  }]>];
}

#endif // ZTC_DIALECTS_ONNX_IR_ONNXOPS_TD
