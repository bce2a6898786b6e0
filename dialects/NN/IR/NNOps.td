//===- NNOps.td - nn dialect ops ---------------------------*- tablegen -*-===//
//
// The operators of the nn dialect: elementwise arithmetic, linear algebra,
// convolution and pooling, normalizations, reductions, data movement,
// losses, and the backward ops that gradients need. Each op's result type
// is inferred from its operands and attributes (InferTypeOpInterface)
// except where the result shape is the op's input (reshape, cast);
// inference doubles as the verifier of shapes and attributes, so a
// malformed op is rejected with a message naming the offending value.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_NN_IR_NNOPS_TD
#define ZTC_DIALECTS_NN_IR_NNOPS_TD

include "dialects/NN/IR/NNBase.td"

//===----------------------------------------------------------------------===//
// Op classes
//===----------------------------------------------------------------------===//

/// An elementwise op on two operands with numpy broadcasting. The result has
/// the broadcast shape and `lhs`'s element type, or i1 for comparisons
/// (`boolResult`). Inference, shared by all of them, lives in
/// `inferBroadcastBinary` in NNOps.cpp. Each costs one FLOP per element;
/// `traits` name its autocast class.
class NN_BinaryOp<string mnemonic, Type operandType, Type resultType,
                  list<Trait> traits, bit boolResult = 0>
    : NN_Op<mnemonic, !listconcat(traits, NN_InferredResult,
                                  [NN_FlopsPerElement<1>])> {
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs resultType:$result);
  // Every binary op infers the same way; only the result element differs.
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context,
        ::std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferredReturnTypes) {
      return inferBroadcastBinary(location, getOperationName(),
                                  adaptor.getLhs(), adaptor.getRhs(),
                                  /*boolResult=*/}] # !if(boolResult, "true", "false") # [{,
                                  inferredReturnTypes);
    }
  }];
}

/// An elementwise op on one operand; the result has the operand's type, which
/// ODS infers from `SameOperandsAndResultType`. Each costs one FLOP per
/// element; `traits` name its autocast class.
class NN_UnaryOp<string mnemonic, Type tensorType, list<Trait> traits>
    : NN_Op<mnemonic, !listconcat(traits, [SameOperandsAndResultType,
                                           NN_FlopsPerElement<1>])> {
  let arguments = (ins tensorType:$x);
  let results = (outs tensorType:$result);
}

//===----------------------------------------------------------------------===//
// Elementwise binary arithmetic
//===----------------------------------------------------------------------===//

def NN_AddOp : NN_BinaryOp<"add", NN_NumericTensor, NN_NumericTensor,
                           [NN_FollowCompute]> {
  let summary = "elementwise addition with broadcasting";
  let description = [{
    `lhs + rhs`, broadcasting the operands numpy-style. Integers wrap.

    Example:

    ```mlir
    %r = nn.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    ```
  }];
  // Folds constant operands (shape arithmetic).
  let hasFolder = 1;
  // Gradients of a tensor's pieces, each written into zeros and summed,
  // become a concat of the pieces (Canonicalize.cpp).
  let hasCanonicalizer = 1;
}

def NN_SubOp : NN_BinaryOp<"sub", NN_NumericTensor, NN_NumericTensor,
                           [NN_FollowCompute]> {
  let summary = "elementwise subtraction with broadcasting";
  let description = [{
    `lhs - rhs`, broadcasting the operands numpy-style. Integers wrap.

    Example:

    ```mlir
    %r = nn.sub %a, %b : tensor<4x1xi64>, tensor<3xi64> -> tensor<4x3xi64>
    ```
  }];
  // Folds constant operands (shape arithmetic).
  let hasFolder = 1;
}

def NN_MulOp : NN_BinaryOp<"mul", NN_NumericTensor, NN_NumericTensor,
                           [NN_FollowCompute]> {
  let summary = "elementwise multiplication with broadcasting";
  let description = [{
    `lhs * rhs`, broadcasting the operands numpy-style. Integers wrap.

    Example:

    ```mlir
    %r = nn.mul %a, %b : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
    ```
  }];
  // Folds constant operands (shape arithmetic).
  let hasFolder = 1;
  // GELU written out as arithmetic becomes nn.gelu, an RMSNorm and its
  // weight nn.layer_norm with `rms` (Canonicalize.cpp).
  let hasCanonicalizer = 1;
}

def NN_DivOp : NN_BinaryOp<"div", NN_NumericTensor, NN_NumericTensor,
                           [NN_FollowCompute]> {
  let summary = "elementwise division with broadcasting";
  let description = [{
    `lhs / rhs`, broadcasting the operands numpy-style. Integer division
    truncates toward zero, like ONNX `Div`; dividing by zero is undefined
    (and never folded).

    Example:

    ```mlir
    %r = nn.div %a, %b : tensor<2xi64>, tensor<i64> -> tensor<2xi64>
    ```
  }];
  // Folds constant operands (shape arithmetic).
  let hasFolder = 1;
  // x / sqrt(mean(x^2) + epsilon) becomes nn.layer_norm with `rms`
  // (Canonicalize.cpp).
  let hasCanonicalizer = 1;
}

def NN_PowOp : NN_BinaryOp<"pow", NN_NumericTensor, NN_NumericTensor,
                           [NN_WideCompute]> {
  let summary = "elementwise power with broadcasting";
  let description = [{
    `lhs ^ rhs`, broadcasting the operands numpy-style. Both operands have
    the same element type; the conversion casts ONNX's mixed-type exponents.

    Example:

    ```mlir
    %r = nn.pow %x, %e : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
    ```
  }];
}

def NN_MaxOp : NN_BinaryOp<"max", NN_NumericTensor, NN_NumericTensor,
                           [NN_FollowCompute]> {
  let summary = "elementwise maximum with broadcasting";
  let description = [{
    The larger of `lhs` and `rhs`, broadcasting numpy-style. A NaN operand
    gives NaN.

    Example:

    ```mlir
    %r = nn.max %a, %b : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
    ```
  }];
  // Folds constant operands (shape arithmetic clamps).
  let hasFolder = 1;
}

def NN_MinOp : NN_BinaryOp<"min", NN_NumericTensor, NN_NumericTensor,
                           [NN_FollowCompute]> {
  let summary = "elementwise minimum with broadcasting";
  let description = [{
    The smaller of `lhs` and `rhs`, broadcasting numpy-style. A NaN operand
    gives NaN.

    Example:

    ```mlir
    %r = nn.min %a, %b : tensor<3xi64>, tensor<3xi64> -> tensor<3xi64>
    ```
  }];
  // Folds constant operands (shape arithmetic clamps).
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Comparisons and logic
//===----------------------------------------------------------------------===//

def NN_EqualOp : NN_BinaryOp<"equal", NN_Tensor, NN_BoolTensor,
                             [NN_FollowCompute], /*boolResult=*/1> {
  let summary = "elementwise equality with broadcasting";
  let description = [{
    `lhs == rhs` as an i1 tensor, broadcasting numpy-style. Operands have the
    same element type, which may be i1.

    Example:

    ```mlir
    %r = nn.equal %a, %b : tensor<4xi64>, tensor<i64> -> tensor<4xi1>
    ```
  }];
  // Folds constant operands (masks computed from shapes).
  let hasFolder = 1;
}

def NN_LessOp : NN_BinaryOp<"less", NN_NumericTensor, NN_BoolTensor,
                            [NN_FollowCompute], /*boolResult=*/1> {
  let summary = "elementwise less-than with broadcasting";
  let description = [{
    `lhs < rhs` as an i1 tensor, broadcasting numpy-style; integers compare
    signed.

    Example:

    ```mlir
    %r = nn.less %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
    ```
  }];
  // Folds constant operands (masks computed from shapes).
  let hasFolder = 1;
}

def NN_GreaterOp : NN_BinaryOp<"greater", NN_NumericTensor, NN_BoolTensor,
                               [NN_FollowCompute], /*boolResult=*/1> {
  let summary = "elementwise greater-than with broadcasting";
  let description = [{
    `lhs > rhs` as an i1 tensor, broadcasting numpy-style; integers compare
    signed.

    Example:

    ```mlir
    %r = nn.greater %a, %b : tensor<2x3xi32>, tensor<i32> -> tensor<2x3xi1>
    ```
  }];
  // Folds constant operands (masks computed from shapes).
  let hasFolder = 1;
}

def NN_AndOp : NN_BinaryOp<"and", NN_BoolTensor, NN_BoolTensor,
                           [NN_FollowCompute]> {
  let summary = "elementwise logical and with broadcasting";
  let description = [{
    `lhs && rhs` on i1 tensors, broadcasting numpy-style.

    Example:

    ```mlir
    %r = nn.and %a, %b : tensor<2x3xi1>, tensor<3xi1> -> tensor<2x3xi1>
    ```
  }];
  // Folds constant operands (masks computed from shapes).
  let hasFolder = 1;
}

def NN_OrOp : NN_BinaryOp<"or", NN_BoolTensor, NN_BoolTensor,
                          [NN_FollowCompute]> {
  let summary = "elementwise logical or with broadcasting";
  let description = [{
    `lhs || rhs` on i1 tensors, broadcasting numpy-style.

    Example:

    ```mlir
    %r = nn.or %a, %b : tensor<2x3xi1>, tensor<2x3xi1> -> tensor<2x3xi1>
    ```
  }];
  // Folds constant operands (masks computed from shapes).
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

def NN_NegOp : NN_UnaryOp<"neg", NN_NumericTensor, [NN_FollowCompute]> {
  let summary = "elementwise negation";
  let description = [{
    `-x`. Integers wrap.

    Example:

    ```mlir
    %r = nn.neg %x : tensor<2x3xf32> -> tensor<2x3xf32>
    ```
  }];
  // Folds a constant operand.
  let hasFolder = 1;
}

def NN_ExpOp : NN_UnaryOp<"exp", NN_FloatTensor, [NN_WideCompute]> {
  let summary = "elementwise exponential";
  let description = [{
    `e^x`.

    Example:

    ```mlir
    %r = nn.exp %x : tensor<2x3xf32> -> tensor<2x3xf32>
    ```
  }];
}

def NN_LogOp : NN_UnaryOp<"log", NN_FloatTensor, [NN_WideCompute]> {
  let summary = "elementwise natural logarithm";
  let description = [{
    `ln(x)`; negative inputs give NaN, zero gives -inf.

    Example:

    ```mlir
    %r = nn.log %x : tensor<2x3xf32> -> tensor<2x3xf32>
    ```
  }];
}

def NN_TanhOp : NN_UnaryOp<"tanh", NN_FloatTensor, [NN_FollowCompute]> {
  let summary = "elementwise hyperbolic tangent";
  let description = [{
    `tanh(x)`.

    Example:

    ```mlir
    %r = nn.tanh %x : tensor<16xbf16> -> tensor<16xbf16>
    ```
  }];
}

def NN_SigmoidOp : NN_UnaryOp<"sigmoid", NN_FloatTensor, [NN_FollowCompute]> {
  let summary = "elementwise logistic sigmoid";
  let description = [{
    `1 / (1 + e^-x)`.

    Example:

    ```mlir
    %r = nn.sigmoid %x : tensor<2x3xf32> -> tensor<2x3xf32>
    ```
  }];
}

def NN_SiluOp : NN_UnaryOp<"silu", NN_FloatTensor, [NN_FollowCompute]> {
  let summary = "elementwise sigmoid linear unit (swish)";
  let description = [{
    `x / (1 + e^-x)`, `x * sigmoid(x)`: PyTorch's `silu`, the activation of
    Llama's SwiGLU. Exporters write it as `Sigmoid` and `Mul`, which
    canonicalization makes one `nn.silu`: its backward needs only x, where
    the two steps' keep the sigmoid as well.

    Example:

    ```mlir
    %r = nn.silu %x : tensor<2x3xf32> -> tensor<2x3xf32>
    ```
  }];
}

def NN_ReluOp : NN_UnaryOp<"relu", NN_NumericTensor, [NN_FollowCompute]> {
  let summary = "elementwise rectified linear unit";
  let description = [{
    `max(x, 0)`.

    Example:

    ```mlir
    %r = nn.relu %x : tensor<8x16xf16> -> tensor<8x16xf16>
    ```
  }];
}

def NN_SqrtOp : NN_UnaryOp<"sqrt", NN_FloatTensor, [NN_FollowCompute]> {
  let summary = "elementwise square root";
  let description = [{
    `sqrt(x)`; negative inputs give NaN.

    Example:

    ```mlir
    %r = nn.sqrt %x : tensor<4xf64> -> tensor<4xf64>
    ```
  }];
}

def NN_ReciprocalOp : NN_UnaryOp<"reciprocal", NN_FloatTensor,
                                 [NN_WideCompute]> {
  let summary = "elementwise reciprocal";
  let description = [{
    `1 / x`.

    Example:

    ```mlir
    %r = nn.reciprocal %x : tensor<4xf32> -> tensor<4xf32>
    ```
  }];
}

def NN_ErfOp : NN_UnaryOp<"erf", NN_FloatTensor, [NN_FollowCompute]> {
  let summary = "elementwise Gauss error function";
  let description = [{
    `erf(x)`.

    Example:

    ```mlir
    %r = nn.erf %x : tensor<4xf32> -> tensor<4xf32>
    ```
  }];
}

def NN_SinOp : NN_UnaryOp<"sin", NN_FloatTensor, [NN_WideCompute]> {
  let summary = "elementwise sine";
  let description = [{
    `sin(x)`, `x` in radians (rotary position tables).

    Example:

    ```mlir
    %r = nn.sin %x : tensor<16x8xf32> -> tensor<16x8xf32>
    ```
  }];
}

def NN_CosOp : NN_UnaryOp<"cos", NN_FloatTensor, [NN_WideCompute]> {
  let summary = "elementwise cosine";
  let description = [{
    `cos(x)`, `x` in radians.

    Example:

    ```mlir
    %r = nn.cos %x : tensor<16x8xf32> -> tensor<16x8xf32>
    ```
  }];
}

def NN_AbsOp : NN_UnaryOp<"abs", NN_NumericTensor, [NN_FollowCompute]> {
  let summary = "elementwise absolute value";
  let description = [{
    `|x|`. The most negative integer maps to itself.

    Example:

    ```mlir
    %r = nn.abs %x : tensor<4xi32> -> tensor<4xi32>
    ```
  }];
}

def NN_SoftplusOp : NN_UnaryOp<"softplus", NN_FloatTensor, [NN_WideCompute]> {
  let summary = "elementwise softplus";
  let description = [{
    `ln(1 + e^x)`.

    Example:

    ```mlir
    %r = nn.softplus %x : tensor<4xf32> -> tensor<4xf32>
    ```
  }];
}

def NN_NotOp : NN_UnaryOp<"not", NN_BoolTensor, [NN_FollowCompute]> {
  let summary = "elementwise logical not";
  let description = [{
    `!x` on an i1 tensor.

    Example:

    ```mlir
    %r = nn.not %m : tensor<4xi1> -> tensor<4xi1>
    ```
  }];
  // Folds a constant operand (masks computed from shapes).
  let hasFolder = 1;
}

def NN_LeakyReluOp : NN_UnaryOp<"leaky_relu", NN_FloatTensor,
                                [NN_FollowCompute]> {
  let summary = "elementwise leaky rectified linear unit";
  let description = [{
    `x` where `x >= 0`, `alpha * x` elsewhere. `alpha` defaults to ONNX's
    0.01.

    Example:

    ```mlir
    %r = nn.leaky_relu %x {alpha = 2.000000e-01 : f64}
           : tensor<4xf32> -> tensor<4xf32>
    ```
  }];
  // f64 keeps the ONNX f32 value exactly.
  let arguments = (ins NN_FloatTensor:$x,
                   DefaultValuedAttr<F64Attr, "0.01">:$alpha);
  // Conversions hold alpha as a double.
  let builders = [OpBuilder<(ins "Value":$x, "double":$alpha), [{
    build($_builder, $_state, x, $_builder.getF64FloatAttr(alpha));
  }]>];
}

def NN_HardSigmoidOp : NN_UnaryOp<"hard_sigmoid", NN_FloatTensor,
                                  [NN_FollowCompute]> {
  let summary = "elementwise hard sigmoid";
  let description = [{
    `max(0, min(1, alpha * x + beta))`, ONNX's `HardSigmoid` (alpha 0.2
    and beta 0.5 by default; PyTorch's `hardsigmoid` is alpha 1/6). Its
    gradient is `alpha` times the result's strictly inside (0, 1), as
    PyTorch's `hardsigmoid_backward`, and needs x alone.

    Example:

    ```mlir
    %r = nn.hard_sigmoid %x {alpha = 0.16666666666666666 : f64, beta = 5.000000e-01 : f64}
           : tensor<4xf32> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x,
                   DefaultValuedAttr<F64Attr, "0.2">:$alpha,
                   DefaultValuedAttr<F64Attr, "0.5">:$beta);
}

def NN_HardSwishOp : NN_UnaryOp<"hard_swish", NN_FloatTensor,
                                [NN_FollowCompute]> {
  let summary = "elementwise hard swish";
  let description = [{
    `x * min(max(x + 3, 0), 6) / 6`, as PyTorch computes `hardswish`
    (ONNX's `HardSwish`, MobileNetV3's activation): 0 at x <= -3, x at
    x >= 3. Its gradient, PyTorch's `hardswish_backward`, is 0 up to -3,
    `x / 3 + 1/2` below 3 and 1 from 3 on, and needs x alone.

    Example:

    ```mlir
    %r = nn.hard_swish %x : tensor<4xf32> -> tensor<4xf32>
    ```
  }];
}

def NN_GeluOp : NN_UnaryOp<"gelu", NN_FloatTensor, [NN_FollowCompute]> {
  let summary = "elementwise Gaussian error linear unit";
  let description = [{
    `x * Phi(x)`, with `Phi` the standard normal CDF computed exactly
    (`approximate = "none"`, the default) or with the tanh approximation
    (`approximate = "tanh"`), as in ONNX `Gelu` and PyTorch.

    Example:

    ```mlir
    %r = nn.gelu %x {approximate = "tanh"} : tensor<4xf32> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  // Checks that `approximate` is "none" or "tanh".
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

def NN_CastOp : NN_Op<"cast", [SameOperandsAndResultShape, NN_OwnCompute,
                              NN_FlopsPerElement<1>]> {
  let summary = "elementwise conversion to another element type";
  let description = [{
    Converts every element to the result's element type, like ONNX `Cast`:
    floats round to nearest even, floats to integers truncate toward zero,
    integers are signed (i1 is 0 or 1), and conversion to i1 tests for
    non-zero.

    Example:

    ```mlir
    %r = nn.cast %x : tensor<2x3xi64> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$x);
  // The target element type is the op's input, so the result type is given.
  let results = (outs NN_Tensor:$result);
  // Folds constants and casts to the operand's own type.
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// WhereOp
//===----------------------------------------------------------------------===//

def NN_WhereOp : NN_Op<"where", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_FlopsPerElement<1>])> {
  let summary = "elementwise selection with broadcasting";
  let description = [{
    `cond ? a : b`, broadcasting all three operands numpy-style. `a` and `b`
    have the same element type, which is the result's.

    Example:

    ```mlir
    %r = nn.where %c, %a, %b : tensor<2x3xi1>, tensor<3xf32>, tensor<f32>
           -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins NN_BoolTensor:$cond, NN_Tensor:$a, NN_Tensor:$b);
  let results = (outs NN_Tensor:$result);
  // Folds constant operands and constant conditions.
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// ModeSelectOp
//===----------------------------------------------------------------------===//

def NN_ModeSelectOp : NN_Op<"mode_select",
    [AllTypesMatch<["training", "inference", "result"]>, NN_FollowCompute,
     NN_FlopsPerElement<1>]> {
  let summary = "a value that differs between training and evaluation";
  let description = [{
    `training` in the entries that train or run the model as exported
    (forward, train_step, loss_and_grads, loss), `inference` in `evaluate`,
    which runs the model as PyTorch's `model.eval()` does. The importer
    builds it for a training-mode BatchNormalization (inference: the
    running statistics normalize) and Dropout (inference: the identity).
    `ztc-build-entries` replaces every one by the operand of its entry, so
    no pass after it sees one. The gradient flows to `training` alone.

    Example:

    ```mlir
    %y = nn.mode_select %batch_normalized, %running_normalized
           : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$training, NN_Tensor:$inference);
  let results = (outs NN_Tensor:$result);
}

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

def NN_MatMulOp : NN_Op<"matmul", !listconcat(NN_InferredResult,
    [NN_HalfCompute, NN_CustomFlops,
     // ztc-fold-transposes sets the transposes on the call.
     NN_LibraryCall<"matmul", [], ["transpose_a", "transpose_b", "tf32"]>])> {
  let summary = "batched matrix product";
  let description = [{
    Multiplies `a` of shape `[..., M, K]` by `b` of shape `[..., K, N]`,
    giving `[..., M, N]`; the batch dimensions `...` broadcast numpy-style.
    Both operands have rank at least 2 (the conversion reshapes ONNX's
    vector cases) and the same element type.

    Example:

    ```mlir
    %r = nn.matmul %a, %b : tensor<4x8x16xf32>, tensor<16x32xf32>
           -> tensor<4x8x32xf32>
    ```
  }];
  let arguments = (ins NN_NumericTensor:$a, NN_NumericTensor:$b);
  let results = (outs NN_NumericTensor:$result);
}

//===----------------------------------------------------------------------===//
// MatMulNf4Op
//===----------------------------------------------------------------------===//

def NN_MatMulNf4Op : NN_Op<"matmul_nf4", !listconcat(NN_InferredResult,
    [NN_FollowCompute,
     // As the rule for ops without a figure of their own counted it before
     // each op declared its cost (one per result element).
     NN_FlopsPerElement<1>,
     NN_LibraryCall<"matmul_nf4", ["weight_shape", "transpose_b"]>])> {
  let summary = "matrix product with a 4-bit NormalFloat weight";
  let description = [{
    `x` of shape `[..., K]` times a frozen weight W held in bitsandbytes'
    NF4 with double quantization (`runtime/kernels/Nf4.h`): `packed`
    (i8 `[ceil(n / 2)]`, two 4-bit codes per byte, W flat and row-major),
    `absmax` (i8 `[ceil(n / 64)]`, the 8-bit codes of the block scales),
    `nested_absmax` (f32 `[ceil(n / 16384)]`) and `offset` (f32 `[1]`),
    for W of shape `weight_shape` = `[rows, cols]` (n = rows * cols).
    The result is `x W` (`[..., cols]`, K = rows) or, with `transpose_b`,
    `x Wᵀ` (`[..., rows]`, K = cols), in x's element type: W is
    dequantized in float32 and rounded to that type, in tiles, inside the
    kernel. `ztc-nf4-weights` builds it from `nn.matmul`s of a frozen
    weight; the gradient reaches `x` only (another `nn.matmul_nf4`, with
    `transpose_b` flipped).

    Example:

    ```mlir
    %y = nn.matmul_nf4 %x, %packed, %absmax, %nested, %offset
           {weight_shape = array<i64: 32, 64>, transpose_b = true}
           : tensor<8x64xbf16>, tensor<1024xi8>, tensor<32xi8>,
             tensor<1xf32>, tensor<1xf32> -> tensor<8x32xbf16>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, StaticShapeTensorOf<[I8]>:$packed,
                   StaticShapeTensorOf<[I8]>:$absmax,
                   StaticShapeTensorOf<[F32]>:$nested_absmax,
                   StaticShapeTensorOf<[F32]>:$offset,
                   DenseI64ArrayAttr:$weight_shape, BoolAttr:$transpose_b);
  let results = (outs NN_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Conv2dOp
//===----------------------------------------------------------------------===//

def NN_Conv2dOp : NN_Op<"conv2d", !listconcat(NN_InferredResult,
    [NN_HalfCompute, NN_CustomFlops,
     NN_LibraryCall<"conv2d", ["strides", "pads", "dilations", "group",
                               "channels_last"], ["tf32"]>])> {
  let summary = "2-D grouped convolution (cross-correlation)";
  let description = [{
    Convolves `input` of shape `[N, C, H, W]` with `weight` of shape
    `[O, C / group, kH, kW]` and adds the optional `bias` of shape `[O]`.
    With `channels_last` the input and output are stored NHWC
    (`[N, H, W, C]`, `[N, Ho, Wo, O]`; `ztc-channels-last`), the weight
    still `[O, C / group, kH, kW]`.
    `strides` and `dilations` are `[h, w]`, `pads` is
    `[top, left, bottom, right]` (explicit, never "auto"). The output is
    `[N, O, Ho, Wo]` with
    `Ho = (H + top + bottom - dh * (kH - 1) - 1) / sh + 1` (floor), and
    likewise `Wo`. `group` divides both `C` and `O`.

    Example:

    ```mlir
    %r = nn.conv2d %x, %w, %b {strides = array<i64: 1, 1>,
           pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>,
           group = 1 : i64}
           : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>
           -> tensor<1x16x32x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                   Optional<NN_FloatTensor>:$bias,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$group,
                   UnitAttr:$channels_last);
  let results = (outs NN_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// BatchNormOp
//===----------------------------------------------------------------------===//

def NN_BatchNormOp : NN_Op<"batch_norm", !listconcat(NN_InferredResult,
    [NN_WideCompute, NN_FlopsPerElement<4>,
     NN_LibraryCall<"batch_norm", ["epsilon", "channels_last"]>])> {
  let summary = "batch normalization with given statistics (inference)";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * scale + bias` along the channel
    dimension 1 of `x` (`[N, C, ...]`, rank at least 2), or its last one
    with `channels_last` (`ztc-channels-last`'s NHWC); `scale`, `bias`,
    `mean` and `var` have shape `[C]`. The result has `x`'s type.

    Example:

    ```mlir
    %r = nn.batch_norm %x, %s, %b, %m, %v {epsilon = 1.000000e-05 : f64}
           : tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>,
             tensor<4xf32>, tensor<4xf32> -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, NN_FloatTensor:$scale,
                   NN_FloatTensor:$bias, NN_FloatTensor:$mean,
                   NN_FloatTensor:$var, F64Attr:$epsilon,
                   UnitAttr:$channels_last);
  let results = (outs NN_FloatTensor:$result);
  // Conversions hold epsilon as a double.
  let builders = [OpBuilder<(ins "Value":$x, "Value":$scale, "Value":$bias,
                                 "Value":$mean, "Value":$var,
                                 "double":$epsilon), [{
    build($_builder, $_state, x, scale, bias, mean, var,
          $_builder.getF64FloatAttr(epsilon));
  }]>];
}

//===----------------------------------------------------------------------===//
// BatchNormTrainingOp
//===----------------------------------------------------------------------===//

def NN_BatchNormTrainingOp : NN_Op<"batch_norm_training",
    !listconcat(NN_InferredResult, [NN_WideCompute, NN_FlopsPerElement<8>])> {
  let summary = "batch normalization with the batch's own statistics";
  let description = [{
    Training-mode BatchNormalization of `x` (`[N, C, ...]`, rank at least
    2): `mean` and `var` are the mean and the biased variance of each
    channel over every dimension but 1, and the result is `(x - mean) /
    sqrt(var + epsilon) * scale + bias`; `scale` and `bias` have shape
    `[C]`, as do the `mean` and `var` results (the running statistics'
    update reads them). Its gradient is one `nn.batch_norm_training_backward`,
    which keeps `x` and the two statistics, where the same formulas written
    in nn ops keep the centered input and take six passes over the
    activations' size (PyTorch's native kernels take two).

    It has no kernel of its own: `ztc-expand-batch-norm` writes it, after
    autodiff and recomputation, as the two means and one elementwise
    expression, which `ztc-fuse` makes two reductions reading `x` and one
    loop (with the activation after it).

    Example:

    ```mlir
    %y, %m, %v = nn.batch_norm_training %x, %s, %b {epsilon = 1.000000e-05 : f64}
                   : tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>
                   -> tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, NN_FloatTensor:$scale,
                   NN_FloatTensor:$bias, F64Attr:$epsilon);
  let results = (outs NN_FloatTensor:$result, NN_FloatTensor:$mean,
                 NN_FloatTensor:$var);
  // Conversions hold epsilon as a double.
  let builders = [OpBuilder<(ins "Value":$x, "Value":$scale, "Value":$bias,
                                 "double":$epsilon), [{
    build($_builder, $_state, x, scale, bias,
          $_builder.getF64FloatAttr(epsilon));
  }]>];
}

def NN_BatchNormTrainingBackwardOp
    : NN_Op<"batch_norm_training_backward", !listconcat(NN_InferredResult,
    [NN_WideCompute, NN_FlopsPerElement<10>])> {
  let summary = "gradients of nn.batch_norm_training: its input, scale and bias";
  let description = [{
    For the forward `nn.batch_norm_training` of `x` with `scale` and
    `epsilon`, whose batch statistics were `mean` and `var`, given
    `grad_output`: with `rstd = 1 / sqrt(var + epsilon)`, `M` the number of
    elements a channel has, and the sums over every dimension but 1, the
    bias's gradient `sum(grad_output)`, the scale's `sum(grad_output * (x -
    mean)) * rstd`, and the input's

        scale * rstd * (grad_output - sum(grad_output) / M
                        - (x - mean) * rstd^2 * sum(grad_output * (x - mean)) / M)

    (PyTorch's `batch_norm_backward` in training mode). `ztc-expand-batch-norm`
    writes it as the two sums and one elementwise expression: three passes
    over `x` and `grad_output`. `grad_output` and the input's gradient have
    `x`'s type; the other operands and results have shape `[C]`.

    Example:

    ```mlir
    %g:3 = nn.batch_norm_training_backward %x, %s, %m, %v, %dy
             {epsilon = 1.000000e-05 : f64}
             : tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>,
               tensor<4xf32>, tensor<2x4x8x8xf32>
             -> tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, NN_FloatTensor:$scale,
                   NN_FloatTensor:$mean, NN_FloatTensor:$var,
                   NN_FloatTensor:$grad_output, F64Attr:$epsilon);
  let results = (outs NN_FloatTensor:$grad_x, NN_FloatTensor:$grad_scale,
                 NN_FloatTensor:$grad_bias);
}

//===----------------------------------------------------------------------===//
// LayerNormOp
//===----------------------------------------------------------------------===//

def NN_LayerNormOp : NN_Op<"layer_norm", !listconcat(NN_InferredResult,
    [NN_WideCompute, NN_FlopsPerElement<8>,
     NN_LibraryCall<"layer_norm", ["axis", "epsilon", "rms"]>])> {
  let summary = "layer normalization, or root-mean-square normalization";
  let description = [{
    Normalizes `x` over dimensions `axis` to `rank - 1` (mean 0, variance 1,
    with `epsilon` added to the variance), then multiplies by `scale` and
    adds the optional `bias`, both of shape `x.shape[axis:]`. `axis` is
    non-negative (the conversion normalizes ONNX's negative axes). The
    result has `x`'s type.

    With `rms`, no mean is subtracted: `x / sqrt(mean(x^2) + epsilon) *
    scale (+ bias)`, the RMSNorm of Llama-family models (ONNX's
    RMSNormalization, PyTorch's `rms_norm`). The nn canonicalization finds
    it written out as a mean of squares, a square root and a quotient.

    Example:

    ```mlir
    %r = nn.layer_norm %x, %s, %b {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
           : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
           -> tensor<2x8x64xf32>
    %n = nn.layer_norm %x, %s {axis = 2 : i64, epsilon = 1.000000e-06 : f64, rms}
           : tensor<2x8x64xf32>, tensor<64xf32> -> tensor<2x8x64xf32>
    ```
  }];
  // `rms` is a unit attribute: plain layer norms, most of them, print
  // as before.
  let arguments = (ins NN_FloatTensor:$x, NN_FloatTensor:$scale,
                   Optional<NN_FloatTensor>:$bias, I64Attr:$axis,
                   F64Attr:$epsilon, UnitAttr:$rms);
  let results = (outs NN_FloatTensor:$result);
  // Conversions hold epsilon as a double; `bias` may be null.
  let builders = [OpBuilder<(ins "Value":$x, "Value":$scale, "Value":$bias,
                                 "int64_t":$axis, "double":$epsilon,
                                 CArg<"bool", "false">:$rms), [{
    build($_builder, $_state, x, scale, bias,
          $_builder.getI64IntegerAttr(axis),
          $_builder.getF64FloatAttr(epsilon),
          rms ? $_builder.getUnitAttr() : ::mlir::UnitAttr());
  }]>];
}

def NN_LayerNormBackwardOp
    : NN_Op<"layer_norm_backward", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_FlopsPerElement<17>,
     NN_LibraryCall<"layer_norm_backward", ["axis", "epsilon", "rms"]>])> {
  let summary = "gradients of nn.layer_norm: its input, scale and bias";
  let description = [{
    For the forward `nn.layer_norm` of `x` with `scale`, `axis`, `epsilon`
    and `rms`, given `grad_output` (the result's gradient): per normalized
    row, with `xhat` the normalized input, `rstd` one over the standard
    deviation (the root mean square under `rms`) and `dn = grad_output *
    scale`, the input's gradient

        rstd * (dn - mean(dn) - xhat * mean(dn * xhat))

    (without the `mean(dn)` term under `rms`: no mean was subtracted),
    and, summed over the rows, the scale's gradient `sum(grad_output *
    xhat)` and the bias's `sum(grad_output)` (of use when the forward has a
    bias). One kernel that reads each row once from memory, where the
    formulas written in nn ops take four row reductions, a recomputed
    normalization and two sums over the rows. `grad_output` and the input's
    gradient have `x`'s type; `scale` and the other two gradients have the
    shape `x.shape[axis:]`.

    Example:

    ```mlir
    %g:3 = nn.layer_norm_backward %x, %s, %dy
             {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
             : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8x64xf32>
             -> tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, NN_FloatTensor:$scale,
                   NN_FloatTensor:$grad_output, I64Attr:$axis,
                   F64Attr:$epsilon, UnitAttr:$rms);
  let results = (outs NN_FloatTensor:$grad_x, NN_FloatTensor:$grad_scale,
                 NN_FloatTensor:$grad_bias);
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

def NN_MaxPool2dOp : NN_Op<"max_pool2d", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_FlopsPerInputElement,
     NN_LibraryCall<"max_pool2d", ["kernel", "strides", "pads", "dilations",
                                   "ceil_mode", "channels_last"]>])> {
  let summary = "2-D max pooling";
  let description = [{
    The maximum over each `kernel` window of `x` (`[N, C, H, W]`), with
    `strides`, `dilations` (`[h, w]`) and `pads` (`[top, left, bottom,
    right]`; padding never wins the maximum). Each pad is smaller than the
    dilated kernel, so every window overlaps the input. The output height is
    `(H + top + bottom - dh * (kH - 1) - 1) / sh + 1`, rounding down, or up
    when `ceil_mode` is set; in ceil mode a last window that would start
    past the input and the left padding is dropped (the ONNX and PyTorch
    rule). Likewise for the width. With `channels_last` (`ztc-channels-last`)
    `x` and the result are stored NHWC (`[N, H, W, C]`).

    Example:

    ```mlir
    %r = nn.max_pool2d %x {kernel = array<i64: 3, 3>,
           strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>,
           dilations = array<i64: 1, 1>, ceil_mode = false}
           : tensor<1x64x112x112xf32> -> tensor<1x64x56x56xf32>
    ```
  }];
  let arguments = (ins NN_NumericTensor:$x, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, BoolAttr:$ceil_mode,
                   UnitAttr:$channels_last);
  let results = (outs NN_NumericTensor:$result);
}

def NN_AvgPool2dOp : NN_Op<"avg_pool2d", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_FlopsPerInputElement,
     NN_LibraryCall<"avg_pool2d", ["kernel", "strides", "pads", "ceil_mode",
                                   "count_include_pad", "channels_last"]>])> {
  let summary = "2-D average pooling";
  let description = [{
    The mean over each `kernel` window of `x` (`[N, C, H, W]`), with
    `strides` (`[h, w]`) and `pads` (`[top, left, bottom, right]`, each
    smaller than the kernel). With `count_include_pad` the divisor is the
    window size including padding, otherwise only the input elements count.
    Output sizes follow max_pool2d without dilation. With `channels_last`
    `x` and the result are stored NHWC.

    Example:

    ```mlir
    %r = nn.avg_pool2d %x {kernel = array<i64: 2, 2>,
           strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
           ceil_mode = false, count_include_pad = false}
           : tensor<1x8x7x7xf32> -> tensor<1x8x3x3xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   BoolAttr:$ceil_mode, BoolAttr:$count_include_pad,
                   UnitAttr:$channels_last);
  let results = (outs NN_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

def NN_SoftmaxOp : NN_Op<"softmax", !listconcat(NN_InferredResult,
    [NN_WideCompute, NN_FlopsPerElement<5>,
     NN_LibraryCall<"softmax", ["axis"]>])> {
  let summary = "softmax along one axis";
  let description = [{
    `exp(x) / sum(exp(x))` along the non-negative `axis`; the result has
    `x`'s type.

    Example:

    ```mlir
    %r = nn.softmax %x {axis = 1 : i64} : tensor<8x10xf32> -> tensor<8x10xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
}

def NN_LogSoftmaxOp : NN_Op<"log_softmax", !listconcat(NN_InferredResult,
    [NN_WideCompute, NN_FlopsPerElement<5>,
     NN_LibraryCall<"log_softmax", ["axis"]>])> {
  let summary = "log-softmax along one axis";
  let description = [{
    `x - log(sum(exp(x)))` along the non-negative `axis`; the result has
    `x`'s type.

    Example:

    ```mlir
    %r = nn.log_softmax %x {axis = 1 : i64}
           : tensor<8x10xf32> -> tensor<8x10xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def NN_AttentionOp : NN_Op<"attention", !listconcat(NN_InferredResult,
    [NN_HalfCompute, NN_CustomFlops,
     NN_LibraryCall<"attention", ["scale", "causal", "softcap"],
                    ["bthd", "heads", "head_starts"]>])> {
  let summary = "scaled-dot-product attention in one op";
  let description = [{
    `softmax(q kᵀ * scale + mask) v` along the keys, without materializing
    the scores or the probabilities: `q` is `[..., Tq, D]`, `k`
    `[..., Tk, D]` and `v` `[..., Tk, Dv]` with the same batch dimensions
    `...` (batch and heads); the result is `[..., Tq, Dv]`. Rank-4 `k` and
    `v` may have fewer heads than `q`, `[B, Hkv, Tk, D]` with `Hkv`
    dividing `q`'s `H`: grouped-query attention, query head `h` reading
    key/value head `h / (H / Hkv)` (what Hugging Face's `repeat_kv` and
    ONNX's `kv_num_heads` mean; `ztc-fuse-attention` reads the repeated
    heads unrepeated). With `causal`,
    query `i` attends to keys `j <= i` only (PyTorch's `is_causal`, its
    top-left alignment). With `softcap` (c > 0), each scaled score s
    becomes `c * tanh(s / c)` before the mask is added (Gemma 2's capped
    attention logits, ONNX Attention's `softcap`). The optional additive
    `mask` has the scores' rank
    and each of its dimensions is 1 or the scores' (`[..., Tq, Tk]`); it
    receives no gradient, so `ztc-fuse-attention`, which builds this op
    from the matrix products and softmax of a model, only fuses constant
    masks. All operands have one element type; the kernels accumulate in
    f32 (f64 for f64).

    Example:

    ```mlir
    %o = nn.attention %q, %k, %v {scale = 2.500000e-01 : f64, causal}
           : tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>,
             tensor<2x4x16x16xf32> -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$q, NN_FloatTensor:$k,
                   NN_FloatTensor:$v, Optional<NN_FloatTensor>:$mask,
                   F64Attr:$scale, UnitAttr:$causal,
                   OptionalAttr<F64Attr>:$softcap);
  let results = (outs NN_FloatTensor:$result);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// A reduction over `axes` (non-negative, strictly increasing; empty reduces
/// nothing). Inference is shared (`inferReduction` in NNOps.cpp). Each costs
/// one FLOP per element it reads and is the library kernel of its name;
/// `traits` name its autocast class.
class NN_ReduceOp<string mnemonic, list<Trait> traits>
    : NN_Op<mnemonic, !listconcat(traits, NN_InferredResult,
                                  [NN_FlopsPerInputElement,
                                   NN_LibraryCall<mnemonic,
                                                  ["axes", "keepdims"]>])> {
  let arguments = (ins NN_NumericTensor:$x, DenseI64ArrayAttr:$axes,
                   BoolAttr:$keepdims);
  let results = (outs NN_NumericTensor:$result);
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context,
        ::std::optional<::mlir::Location> location, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferredReturnTypes) {
      return inferReduction(location, getOperationName(), adaptor.getX(),
                            adaptor.getAxes(), adaptor.getKeepdims(),
                            inferredReturnTypes);
    }
  }];
}

def NN_ReduceSumOp : NN_ReduceOp<"reduce_sum", [NN_WideCompute]> {
  let summary = "sum over axes";
  let description = [{
    Sums `x` over `axes`. With `keepdims` the reduced dimensions stay as
    size 1, otherwise they are dropped. Empty `axes` reduces nothing (the
    conversion resolves ONNX's "empty means all" rule).

    Example:

    ```mlir
    %r = nn.reduce_sum %x {axes = array<i64: 1>, keepdims = true}
           : tensor<4x8xf32> -> tensor<4x1xf32>
    ```
  }];
  // Folds small integer constants.
  let hasFolder = 1;
  // A sum of a one-hot selection is the selected value (Canonicalize.cpp).
  let hasCanonicalizer = 1;
}

def NN_ReduceMeanOp : NN_ReduceOp<"reduce_mean", [NN_WideCompute]> {
  let summary = "mean over axes";
  let description = [{
    The mean of `x` over `axes`, with `keepdims` as for `nn.reduce_sum`.

    Example:

    ```mlir
    %r = nn.reduce_mean %x {axes = array<i64: 0, 2>, keepdims = false}
           : tensor<4x8x16xf32> -> tensor<8xf32>
    ```
  }];
}

def NN_ReduceMaxOp : NN_ReduceOp<"reduce_max", [NN_FollowCompute]> {
  let summary = "maximum over axes";
  let description = [{
    The maximum of `x` over `axes`, with `keepdims` as for `nn.reduce_sum`.

    Example:

    ```mlir
    %r = nn.reduce_max %x {axes = array<i64: 1>, keepdims = false}
           : tensor<4x8xi64> -> tensor<4xi64>
    ```
  }];
  // Folds small integer constants.
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

def NN_ReshapeOp : NN_Op<"reshape", [NN_FollowCompute, NN_NoFlops]> {
  let summary = "reinterpret a tensor with another shape";
  let description = [{
    The elements of `x` in row-major order, with the result's shape. The
    element count and type are unchanged. Also expresses ONNX `Flatten`,
    `Squeeze` and `Unsqueeze`.

    Example:

    ```mlir
    %r = nn.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$x);
  // The new shape is the op's input, so the result type is given.
  let results = (outs NN_Tensor:$result);
  // Checks element count and type.
  let hasVerifier = 1;
  // Folds constants and no-op reshapes.
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

def NN_TransposeOp : NN_Op<"transpose", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_NoFlops,
     NN_LibraryCall<"transpose", ["perm"]>])> {
  let summary = "permute dimensions";
  let description = [{
    Result dimension `i` is dimension `perm[i]` of `x`; `perm` is a
    permutation of `0 .. rank - 1`.

    Example:

    ```mlir
    %r = nn.transpose %x {perm = array<i64: 0, 2, 1>}
           : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$x, DenseI64ArrayAttr:$perm);
  let results = (outs NN_Tensor:$result);
  // Folds constants and identity permutations.
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// ConcatOp
//===----------------------------------------------------------------------===//

def NN_ConcatOp : NN_Op<"concat", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_NoFlops])> {
  let summary = "join tensors along an axis";
  let description = [{
    Concatenates one or more tensors along the non-negative `axis`. All
    operands have the same rank and element type, and the same sizes in every
    other dimension.

    Example:

    ```mlir
    %r = nn.concat %a, %b {axis = 0 : i64}
           : tensor<2xi64>, tensor<1xi64> -> tensor<3xi64>
    ```
  }];
  let arguments = (ins Variadic<NN_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs NN_Tensor:$result);
  // Folds constants (shape vectors) and single operands.
  let hasFolder = 1;
  // Makes Llama's rotate_half (two slices, a negation) nn.rotate_half.
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// SliceOp
//===----------------------------------------------------------------------===//

def NN_SliceOp : NN_Op<"slice", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_NoFlops,
     NN_LibraryCall<"slice", ["starts", "sizes", "steps"]>])> {
  let summary = "strided slice with normalized bounds";
  let description = [{
    Result element `i` (per dimension `d`) is `x[starts[d] + i * steps[d]]`,
    and the result shape is `sizes`. There is one entry per dimension in
    each attribute, already resolved by the conversion (no clamping, no
    negative starts): every step is non-zero (negative walks backwards),
    and every accessed index lies in `[0, dim)`. A dimension of size 0
    accepts any start.

    Example:

    ```mlir
    %r = nn.slice %x {starts = array<i64: 0, 7>, sizes = array<i64: 4, 4>,
           steps = array<i64: 1, -2>} : tensor<4x8xf32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$x, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$steps);
  let results = (outs NN_Tensor:$result);
  // Folds constants and full slices.
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// GatherOp
//===----------------------------------------------------------------------===//

def NN_GatherOp : NN_Op<"gather", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_NoFlops,
     NN_LibraryCall<"gather", ["axis"]>])> {
  let summary = "take slices along an axis";
  let description = [{
    numpy `take`: the result is
    `data.shape[:axis] + indices.shape + data.shape[axis+1:]`, where each
    index selects a slice of `data` along the non-negative `axis`. Negative
    indices count from the end; out-of-range indices are undefined at run
    time (and never folded).

    Example:

    ```mlir
    %r = nn.gather %data, %idx {axis = 0 : i64}
           : tensor<4xi64>, tensor<i64> -> tensor<i64>
    ```
  }];
  let arguments = (ins NN_Tensor:$data, NN_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs NN_Tensor:$result);
  // Folds constants (Shape -> Gather chains).
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// BroadcastToOp
//===----------------------------------------------------------------------===//

def NN_BroadcastToOp : NN_Op<"broadcast_to", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_NoFlops])> {
  let summary = "broadcast to a given shape";
  let description = [{
    numpy `broadcast_to`: aligns `x`'s dimensions with the trailing ones of
    `shape` and repeats size-1 dimensions. `shape` has at least `x`'s rank
    and every dimension of `x` is 1 or equal to its counterpart.

    Example:

    ```mlir
    %r = nn.broadcast_to %x {shape = array<i64: 2, 3>}
           : tensor<3xf32> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$x, DenseI64ArrayAttr:$shape);
  let results = (outs NN_Tensor:$result);
  // Folds constants and no-op broadcasts.
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// RotateHalfOp
//===----------------------------------------------------------------------===//

def NN_RotateHalfOp : NN_Op<"rotate_half", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_NoFlops,
     NN_LibraryCall<"rotate_half", ["inverse"]>])> {
  let summary = "turn pairs of the last dimension's halves a quarter turn";
  let description = [{
    The last dimension of `x` (of even size `2h`) as two halves, `x1` (the
    first `h`) and `x2`: the result is `[-x2, x1]`, Hugging Face's
    `rotate_half` of Llama's rotary embedding (`x * cos + rotate_half(x) *
    sin`), which exporters write as two slices, a negation and a concat
    (the nn canonicalization folds those into this op). With `inverse`
    the result is `[x2, -x1]`: the inverse turn, which is also the
    transpose, so each direction's gradient is the other. The result has
    `x`'s type; it only moves and negates elements, so it is exact.

    Example:

    ```mlir
    %r = nn.rotate_half %x {inverse = false}
           : tensor<2x4x8x64xf32> -> tensor<2x4x8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, BoolAttr:$inverse);
  let results = (outs NN_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// RotaryOp
//===----------------------------------------------------------------------===//

def NN_RotaryOp : NN_Op<"rotary", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_FlopsPerElement<3>,
     NN_LibraryCall<"rotary", ["inverse"]>])> {
  let summary = "rotary position embedding: x * cos + rotate_half(x) * sin";
  let description = [{
    Llama's rotary embedding as one op: `x * cos + rotate_half(x) * sin`,
    with `rotate_half` as `nn.rotate_half` turns the last dimension's halves
    (`[-x2, x1]`). `cos` and `sin` have one type, which broadcasts to `x`'s
    shape (NumPy's rules; the tables of Hugging Face's
    `apply_rotary_pos_emb`, [1, 1, T, D] for x of [B, H, T, D]). With
    `inverse` the result is `x * cos` plus the inverse turn of `x * sin`
    (`nn.rotate_half {inverse = true}`), the transpose of the map without it, so each form's gradient with respect
    to `x` is the other. The nn canonicalization folds the sum of the two
    products into this op; one kernel reads x once, where the steps were a
    turn and a loop over both. The result has `x`'s type.

    Example:

    ```mlir
    %r = nn.rotary %x, %cos, %sin {inverse = false}
           : tensor<2x4x8x64xf32>, tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32>
             -> tensor<2x4x8x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, NN_FloatTensor:$cos,
                       NN_FloatTensor:$sin, BoolAttr:$inverse);
  let results = (outs NN_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// TriluOp
//===----------------------------------------------------------------------===//

def NN_TriluOp : NN_Op<"trilu", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_FlopsPerElement<1>,
     NN_LibraryCall<"trilu", ["upper", "diagonal"]>])> {
  let summary = "keep the upper or lower triangle of matrices";
  let description = [{
    Like ONNX `Trilu`, on the last two dimensions of `x` (rank at least 2):
    with `upper`, element `[i, j]` is kept when `j - i >= diagonal`,
    otherwise when `j - i <= diagonal`; the others become zero. The result
    has `x`'s type.

    Example:

    ```mlir
    %r = nn.trilu %x {upper = false, diagonal = 0 : i64}
           : tensor<8x8xi1> -> tensor<8x8xi1>
    ```
  }];
  let arguments = (ins NN_Tensor:$x, BoolAttr:$upper, I64Attr:$diagonal);
  let results = (outs NN_Tensor:$result);
}

//===----------------------------------------------------------------------===//
// NllLossOp
//===----------------------------------------------------------------------===//

def NN_NllLossOp : NN_Op<"nll_loss", !listconcat(NN_InferredResult,
    [NN_WideCompute, NN_FlopsPerInputElement,
     NN_LibraryCall<"nll_loss", ["reduction", "ignore_index"]>])> {
  let summary = "negative log-likelihood loss";
  let description = [{
    Like ONNX `NegativeLogLikelihoodLoss`: for log-probabilities of shape
    `[N, C, d1, ...]` and class indices `target` of shape `[N, d1, ...]`,
    the loss of an element is `-weight[t] * log_probs[n, t, d...]` with
    `t = target[n, d...]` (`weight` is optional, of shape `[C]`). Elements
    whose target is `ignore_index` contribute 0 and no weight. `reduction`
    is "none" (the result has `target`'s shape), "sum" or "mean" (weighted
    mean; both give a rank-0 result). The result element type is
    `log_probs`'s.

    Example:

    ```mlir
    %r = nn.nll_loss %lp, %t {reduction = "mean", ignore_index = -100 : i64}
           : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$log_probs, NN_IndexTensor:$target,
                   Optional<NN_FloatTensor>:$weight,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// LinearCrossEntropyOp
//===----------------------------------------------------------------------===//

def NN_LinearCrossEntropyOp : NN_Op<"linear_cross_entropy",
    !listconcat(NN_InferredResult,
    [NN_HalfCompute, NN_CustomFlops,
     NN_LibraryCall<"linear_cross_entropy", ["transpose_b", "ignore_index"]>])> {
  let summary = "a classifier's product and its mean cross entropy in one op";
  let description = [{
    The mean cross entropy of the classes scored by `x w`, without the
    `[N, V]` scores ever being held: `x` is `[N, D]`, `w` is `[D, V]` or,
    with `transpose_b`, stored `[V, D]` (an output layer tied to the token
    embedding); `target` holds N class indices. With `z = x w`, the loss
    is the mean over the rows whose target is not `ignore_index` of
    `logsumexp(z[n]) - z[n, target[n]]`: what `nn.log_softmax` along the
    classes followed by a mean `nn.nll_loss` computes (0/0 is NaN when no
    row counts). `correct` is how many of those rows score their target
    highest (a tie counts), for evaluation. `x` and `w` have one element
    type, f32, f64, f16 or bf16; both results are rank 0 of its compute
    type (f32 for the half types). A half-precision product rounds each
    score to that type before the loss reads it widened, as `nn.matmul`
    followed by `nn.cast` to f32 does: mixed precision's classifier
    (`--precision bf16` puts the product in half precision, the op's class,
    and the loss in f32). The kernels work through chunks of rows;
    `ztc-fuse-cross-entropy` builds this op from the product, log-softmax
    and loss of a model.

    Example:

    ```mlir
    %loss, %correct = nn.linear_cross_entropy %x, %w, %t
           {transpose_b, ignore_index = -100 : i64}
           : tensor<64x32xf32>, tensor<1000x32xf32>, tensor<64xi64>
           -> tensor<f32>, tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, NN_FloatTensor:$w,
                   NN_IndexTensor:$target, UnitAttr:$transpose_b,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$loss, NN_FloatTensor:$correct);
}

//===----------------------------------------------------------------------===//
// RandomUniformOp
//===----------------------------------------------------------------------===//

def NN_RandomUniformOp : NN_Op<"random_uniform", [NN_OwnCompute,
    NN_FlopsPerElement<1>, NN_LibraryCall<"random_uniform", ["stream"]>]> {
  let summary = "counter-based uniform random numbers in [0, 1)";
  let description = [{
    A tensor of numbers uniform in `[0, 1)`, each a multiple of `2^-24`:
    element `i` (row-major) is a pure function of the rank-0 `key`, the
    `stream` attribute and `i`, computed by the runtime's kernel libraries
    (runtime/kernels/Random.h, splitmix64), bit for bit the same on the CPU
    and on CUDA. The op is pure: the same key and stream give the same
    numbers, so a step run again with the same key repeats its draws, and
    different streams under one key are unrelated. Training-mode Dropout
    draws its masks from it, the key being the step's `rng` argument (a
    `hyper` binding the runtime writes before every call) and the stream a
    per-node constant. The key is an integer, so the op has no gradient.

    Example:

    ```mlir
    %u = nn.random_uniform %key {stream = 7 : i64}
           : tensor<i64> -> tensor<8x16xf32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$key, I64Attr:$stream);
  // The shape is the op's input, so the result type is given; f32 or f64
  // (ztc-promote-f64), both of which hold the 24-bit values exactly.
  let results = (outs StaticShapeTensorOf<[F32, F64]>:$result);
}

//===----------------------------------------------------------------------===//
// Backward ops
//
// Derivatives that no cheap, exact composition of the ops above expresses.
// ztc-autodiff builds them; each maps to one runtime kernel of the same name
// (NN_LibraryCall: a kernel.call configured by the op's attributes).
//===----------------------------------------------------------------------===//

def NN_Conv2dBackwardDataOp
    : NN_Op<"conv2d_backward_data", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_CustomFlops,
     NN_LibraryCall<"conv2d_backward_data",
                    ["input_size", "strides", "pads", "dilations", "group",
                     "channels_last"], ["tf32"]>])> {
  let summary = "gradient of nn.conv2d with respect to its input";
  let description = [{
    The transposed convolution that takes the gradient `grad_output`
    (`[N, O, Ho, Wo]`) of an `nn.conv2d` with `weight` (`[O, C / group, kH,
    kW]`) back to its input: `dx[n, c, h, w]` is the sum, over every output
    position and kernel tap that read input element `[n, c, h, w]`, of
    `grad_output * weight`. Taps that read padding contribute nothing.
    `strides`, `pads`, `dilations` and `group` are the forward conv's;
    `input_size` (`[H, W]`) is the forward input's spatial size, which the
    output size alone does not determine when a stride exceeds 1. The
    result is `[N, C, H, W]` with `C = weight.shape[1] * group`, and a
    forward conv of that shape must produce `grad_output`'s shape. With
    `channels_last`, `grad_output` and the result are NHWC.

    Example:

    ```mlir
    %dx = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 32, 32>,
            strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>,
            dilations = array<i64: 1, 1>, group = 1 : i64}
            : tensor<1x16x32x32xf32>, tensor<16x3x3x3xf32>
            -> tensor<1x3x32x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad_output, NN_FloatTensor:$weight,
                   DenseI64ArrayAttr:$input_size, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   I64Attr:$group, UnitAttr:$channels_last);
  let results = (outs NN_FloatTensor:$result);
}

def NN_Conv2dBackwardFilterOp
    : NN_Op<"conv2d_backward_filter", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_CustomFlops,
     NN_LibraryCall<"conv2d_backward_filter",
                    ["kernel", "strides", "pads", "dilations", "group",
                     "channels_last"], ["tf32"]>])> {
  let summary = "gradient of nn.conv2d with respect to its weight";
  let description = [{
    The gradient of an `nn.conv2d`'s weight: `dw[o, c, kh, kw]` is the sum
    over the batch and every output position of
    `grad_output[n, o, oh, ow] * input[n, g * C/group + c, ih, iw]`, where
    `(ih, iw)` is the input element tap `(kh, kw)` of that output position
    reads (zero in the padding) and `g` the group of `o`. `input` is the
    forward input (`[N, C, H, W]`), `grad_output` the gradient of the
    forward result (`[N, O, Ho, Wo]`); `strides`, `pads`, `dilations` and
    `group` are the forward conv's and `kernel` (`[kH, kW]`) its kernel
    size. The result is `[O, C / group, kH, kW]`. The bias gradient needs
    no op of its own (a reduce_sum of `grad_output`). With `channels_last`,
    `input` and `grad_output` are NHWC.

    Example:

    ```mlir
    %dw = nn.conv2d_backward_filter %x, %dy {kernel = array<i64: 3, 3>,
            strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>,
            dilations = array<i64: 1, 1>, group = 1 : i64}
            : tensor<1x3x32x32xf32>, tensor<1x16x32x32xf32>
            -> tensor<16x3x3x3xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$grad_output,
                   DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   I64Attr:$group, UnitAttr:$channels_last);
  let results = (outs NN_FloatTensor:$result);
}

def NN_MaxPool2dBackwardOp
    : NN_Op<"max_pool2d_backward", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_FlopsPerInputElement,
     NN_LibraryCall<"max_pool2d_backward", ["kernel", "strides", "pads",
                                            "dilations", "ceil_mode",
                                            "channels_last"]>])> {
  let summary = "gradient of nn.max_pool2d with respect to its input";
  let description = [{
    Routes each element of `grad_output` to the input element that won its
    window in the forward `nn.max_pool2d` of `x` with the same attributes,
    summing where windows overlap; every other element's gradient is 0. The
    winner is the element the forward kernel picks, as PyTorch's max_pool2d
    indices: the first maximum in row-major window order (or the last NaN),
    never padding. `grad_output` has the forward result's shape; the
    result has `x`'s type. With `channels_last` all three are stored NHWC.

    Example:

    ```mlir
    %dx = nn.max_pool2d_backward %x, %dy {kernel = array<i64: 2, 2>,
            strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
            dilations = array<i64: 1, 1>, ceil_mode = false}
            : tensor<1x8x8x8xf32>, tensor<1x8x4x4xf32> -> tensor<1x8x8x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, NN_FloatTensor:$grad_output,
                   DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   BoolAttr:$ceil_mode, UnitAttr:$channels_last);
  let results = (outs NN_FloatTensor:$result);
}

def NN_AvgPool2dBackwardOp
    : NN_Op<"avg_pool2d_backward", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_FlopsPerInputElement,
     NN_LibraryCall<"avg_pool2d_backward",
                    ["input_size", "kernel", "strides", "pads", "ceil_mode",
                     "count_include_pad", "channels_last"]>])> {
  let summary = "gradient of nn.avg_pool2d with respect to its input";
  let description = [{
    Spreads each element of `grad_output`, divided by its window's divisor,
    over the input elements of that window of the forward `nn.avg_pool2d`
    with the same attributes, summing where windows overlap. The divisor is
    the forward one: the full kernel size with `count_include_pad`,
    otherwise the number of input elements in the window. `input_size`
    (`[H, W]`) is the forward input's spatial size; the result is
    `[N, C, H, W]`, and a forward pooling of that shape must produce
    `grad_output`'s shape. With `channels_last` `grad_output` and the
    result are stored NHWC.

    Example:

    ```mlir
    %dx = nn.avg_pool2d_backward %dy {input_size = array<i64: 7, 7>,
            kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
            pads = array<i64: 0, 0, 0, 0>, ceil_mode = false,
            count_include_pad = false}
            : tensor<1x8x3x3xf32> -> tensor<1x8x7x7xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad_output,
                   DenseI64ArrayAttr:$input_size, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   BoolAttr:$ceil_mode, BoolAttr:$count_include_pad,
                   UnitAttr:$channels_last);
  let results = (outs NN_FloatTensor:$result);
}

def NN_AttentionBackwardOp
    : NN_Op<"attention_backward", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_CustomFlops,
     NN_LibraryCall<"attention_backward", ["scale", "causal", "softcap"],
                    ["bthd", "heads", "head_starts"]>])> {
  let summary = "gradients of nn.attention with respect to q, k and v";
  let description = [{
    For the forward `nn.attention` of `q`, `k`, `v` (and `mask`) with
    `scale`, `causal` and `softcap`, whose result was `out`, the gradients
    of its three inputs given `grad_output` (the result's gradient). With P
    the probabilities, which the kernels recompute per row from the scores
    (FlashAttention's backward), and `delta = rowsum(grad_output * out)`:

        dv = Pᵀ grad_output
        dS = P * (grad_output vᵀ - delta)
        dq = dS k * scale,   dk = dSᵀ q * scale

    With `softcap`, dS is also multiplied by the cap's slope, `1 - t²`
    where t = tanh(scale * q·k / softcap).

    `out` and `grad_output` have the forward result's type; the results
    have the types of `q`, `k` and `v`. With grouped-query heads, a key or
    value head's gradient sums those of the query heads that read it. It
    has no second-order gradient.

    Example:

    ```mlir
    %dq, %dk, %dv = nn.attention_backward %q, %k, %v, %o, %do
           {scale = 2.500000e-01 : f64, causal}
           : tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>,
             tensor<2x16x8xf32>, tensor<2x16x8xf32>
           -> tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$q, NN_FloatTensor:$k,
                   NN_FloatTensor:$v, NN_FloatTensor:$out,
                   NN_FloatTensor:$grad_output, Optional<NN_FloatTensor>:$mask,
                   F64Attr:$scale, UnitAttr:$causal,
                   OptionalAttr<F64Attr>:$softcap);
  let results = (outs NN_FloatTensor:$grad_q, NN_FloatTensor:$grad_k,
                      NN_FloatTensor:$grad_v);
  let hasVerifier = 1;
}

def NN_LinearCrossEntropyBackwardOp
    : NN_Op<"linear_cross_entropy_backward", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_CustomFlops,
     NN_LibraryCall<"linear_cross_entropy_backward",
                    ["transpose_b", "ignore_index"]>])> {
  let summary = "gradients of nn.linear_cross_entropy with respect to x and w";
  let description = [{
    For the forward `nn.linear_cross_entropy` of `x`, `w` and `target`
    (with the same `transpose_b` and `ignore_index`), the gradients of `x`
    and `w` given `grad` (the loss's gradient, rank 0). With `z = x w`
    recomputed chunk by chunk and `count` the rows that count:

        dz[n] = grad / count * (softmax(z[n]) - onehot(target[n]))
        dx = dz wᵀ (w as [D, V]),   dw = xᵀ dz (stored as w is)

    A row that does not count gets 0. The gradients have the types of
    `x` and `w`; `grad` and `loss` have the forward loss's. For half
    precision, each row of dz is computed in f32 and rounded once to the
    half type, as the unfused step's cast rounds it, and dw sums the
    chunks in f32 before its one rounding. Having every row's
    log-sum-exp, the op also gives the forward's `loss` (the same value,
    from the same arithmetic), so that `ztc-merge-cross-entropy` can drop
    the forward op from an entry that has both. When nothing reads
    `grad_w` (a frozen classifier: LoRA's base, `--freeze`), the op lowers
    to a kernel that skips dw's product
    (`linear_cross_entropy_backward_x`). It has no second-order gradient.

    Example:

    ```mlir
    %dx, %dw, %loss = nn.linear_cross_entropy_backward %x, %w, %t, %g
           {transpose_b}
           : tensor<64x32xf32>, tensor<1000x32xf32>, tensor<64xi64>,
             tensor<f32> -> tensor<64x32xf32>, tensor<1000x32xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$x, NN_FloatTensor:$w,
                   NN_IndexTensor:$target, NN_FloatTensor:$grad,
                   UnitAttr:$transpose_b, OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$grad_x, NN_FloatTensor:$grad_w,
                      NN_FloatTensor:$loss);
}

def NN_ScatterAddOp : NN_Op<"scatter_add", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_FlopsPerElement<1>,
     NN_LibraryCall<"scatter_add", ["axis"]>])> {
  let summary = "add slices into a tensor at indices along an axis";
  let description = [{
    The adjoint of `nn.gather`: numpy's
    `np.add.at(data, (slice(None),) * axis + (indices,), updates)` on a copy
    of `data`. For every position of
    `indices`, the slice of `updates` at that position is added to the
    slice of `data` the index selects along the non-negative `axis`;
    repeated indices accumulate. `updates` has the shape
    `data.shape[:axis] + indices.shape + data.shape[axis+1:]` (gather's
    result shape) and `data`'s element type; negative indices count from
    the end. The result has `data`'s type. An out-of-range index is a
    run-time error, as in gather.

    Example:

    ```mlir
    %r = nn.scatter_add %zeros, %ids, %dy {axis = 0 : i64}
           : tensor<100x16xf32>, tensor<4x8xi64>, tensor<4x8x16xf32>
           -> tensor<100x16xf32>
    ```
  }];
  let arguments = (ins NN_NumericTensor:$data, NN_IndexTensor:$indices,
                   NN_NumericTensor:$updates, I64Attr:$axis);
  let results = (outs NN_NumericTensor:$result);
}

def NN_InsertSliceOp : NN_Op<"insert_slice", !listconcat(NN_InferredResult,
    [NN_FollowCompute, NN_NoFlops,
     NN_LibraryCall<"insert_slice", ["starts", "steps"]>])> {
  let summary = "write a tensor into a strided slice of another";
  let description = [{
    The adjoint of `nn.slice`: a copy of `dest` in which the elements
    `nn.slice` with the same `starts` and `steps` (and `sizes` =
    `source.shape`) would read are replaced by `source`. Both have the same
    rank and element type; every step is non-zero (negative walks
    backwards) and every written index lies in `[0, dim)`. Writing
    `source` into zeros is the gradient of a slice.

    Example:

    ```mlir
    %r = nn.insert_slice %zeros, %dy {starts = array<i64: 0, 7>,
           steps = array<i64: 1, -2>}
           : tensor<4x8xf32>, tensor<4x4xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins NN_Tensor:$dest, NN_Tensor:$source,
                   DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$steps);
  let results = (outs NN_Tensor:$result);
}

#endif // ZTC_DIALECTS_NN_IR_NNOPS_TD
