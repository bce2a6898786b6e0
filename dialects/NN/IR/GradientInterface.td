//===- GradientInterface.td - vector-Jacobian products -----*- tablegen -*-===//
//
// The interface through which every nn op states its derivative, for the
// reverse-mode autodiff pass (ztc-autodiff). An op builds its
// vector-Jacobian product out of nn ops (and arith.constant), so the
// backward step lowers and runs through the same pipeline as the forward.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_NN_IR_GRADIENTINTERFACE_TD
#define ZTC_DIALECTS_NN_IR_GRADIENTINTERFACE_TD

include "mlir/IR/OpBase.td"

def NN_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::ztc::nn";
  let description = [{
    An op that knows its vector-Jacobian product (VJP): given the gradient
    of a scalar loss with respect to each of its results, it builds the
    gradient with respect to each of its operands.

    Ops that are not differentiable (comparisons, logic) implement it too and
    give no gradient, as do integer operands of differentiable ops (indices,
    targets, masks): an op never propagates a gradient into a value that is
    not floating point.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the operand gradients at the builder's insertion point, at the
        op's location, from nn ops and arith.constant only.

        `resultGrads` has one entry per result: the gradient of the loss
        with respect to that result, of the result's type, or a null Value
        where it is zero. At least one entry is non-null.

        On success `operandGrads` holds one entry per operand: a value of the
        operand's type, or a null Value where the operand receives no
        gradient (integer and boolean operands, and operands whose gradient
        the op does not define). On failure the op has emitted an error.
      }],
      "::llvm::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // ZTC_DIALECTS_NN_IR_GRADIENTINTERFACE_TD
