//===- NNBase.td - nn dialect definition -------------------*- tablegen -*-===//
//
// The nn dialect is ztc's own vocabulary of deep-learning operators: the
// ONNX graph after conversion, with every node's semantics fixed (one op per
// operator variant, attributes normalized, shapes static). Passes and code
// generation work on this dialect only, so every op states exactly which
// element types, ranks and attribute ranges it accepts.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_NN_IR_NNBASE_TD
#define ZTC_DIALECTS_NN_IR_NNBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialects/NN/IR/GradientInterface.td"
include "dialects/NN/IR/OpFacts.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let cppNamespace = "::mlir::ztc::nn";
  let summary = "Value-semantics deep-learning operators on static tensors";
  let description = [{
    Every op of the `nn` dialect takes and returns ranked tensors of static
    shape (rank 0 included) with one of the element types f32, f64, f16,
    bf16, i64, i32, i8 or i1. Ops have no side effects; results are new
    values. Attributes are normalized by the conversion from `onnx`: axes are
    non-negative, padding is explicit, optional behaviour is spelled out, so
    an op's verifier can check every attribute against the operand shapes.

    Folding evaluates small constant computations (at most 65536 result
    elements), which is how PyTorch's shape arithmetic (Shape, Gather,
    Unsqueeze, Concat, ...) collapses into constants; folded values are
    materialized as `arith.constant`.
  }];
  // Folded constants become arith.constant ops.
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let hasConstantMaterializer = 1;
  // Attributes stay in the attribute dictionary, so the conversion from
  // `onnx` can run an op's type inference on a plain DictionaryAttr before
  // building it, and report shape errors at the ONNX node instead of crashing.
  let usePropertiesForAttributes = 0;
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

// Element types the dialect supports, grouped by what ops accept.
defvar NN_FloatTypes = [F32, F64, F16, BF16];
defvar NN_IntegerTypes = [I64, I32, I8];
defvar NN_NumericTypes = !listconcat(NN_FloatTypes, NN_IntegerTypes);
defvar NN_AllTypes = !listconcat(NN_NumericTypes, [I1]);

/// Any supported tensor.
def NN_Tensor : StaticShapeTensorOf<NN_AllTypes>;
/// Tensors ops do arithmetic on (no i1).
def NN_NumericTensor : StaticShapeTensorOf<NN_NumericTypes>;
/// Floating-point tensors, for transcendental ops and normalizations.
def NN_FloatTensor : StaticShapeTensorOf<NN_FloatTypes>;
/// Boolean tensors: masks and comparison results.
def NN_BoolTensor : StaticShapeTensorOf<[I1]>;
/// Index tensors (gather indices, loss targets).
def NN_IndexTensor : StaticShapeTensorOf<[I32, I64]>;

//===----------------------------------------------------------------------===//
// Traits
//===----------------------------------------------------------------------===//

/// Runs an op's result-type inference as its verifier, with diagnostics (see
/// NNOps.h), so a malformed op reports what is wrong rather than InferType's
/// generic "failed to infer returned types".
def NN_VerifiedByInference : NativeOpTrait<"VerifiedByInference"> {
  let cppNamespace = "::mlir::ztc::nn";
}

/// Traits of an op whose result type is inferred in C++ (`inferReturnTypes`
/// taking an adaptor) and whose inference checks shapes and attributes.
defvar NN_InferredResult = [InferTypeOpAdaptor, NN_VerifiedByInference];

//===----------------------------------------------------------------------===//
// Op base class
//===----------------------------------------------------------------------===//

/// Base class of nn ops. Dialect-wide invariants live here once: every op is
/// side-effect free, every op states its vector-Jacobian product (the
/// gradient interface: an op cannot be added without deciding its
/// derivative), and every op prints as
/// `nn.op %a, %b {attrs} : type(%a), type(%b) -> type(%result)`, so the
/// operand and result types are always visible.
///
/// Every op also declares, among `traits`, exactly one autocast class and
/// exactly one cost (OpFacts.td); tablegen stops at an op that does not, so
/// no pass falls back on a default for an op nobody thought about. An op
/// lowered to a library kernel says which (`NN_LibraryCall`).
class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic,
         !listconcat(traits,
                     [Pure, DeclareOpInterfaceMethods<NN_GradientOpInterface>])> {
  assert !eq(!size(!filter(trait, traits, !isa<NN_ComputeClass>(trait))), 1),
         "nn." # mnemonic # " must declare exactly one autocast class: "
         # "NN_HalfCompute, NN_WideCompute, NN_FollowCompute or NN_OwnCompute";
  assert !eq(!size(!filter(trait, traits, !isa<NN_CostTrait>(trait))), 1),
         "nn." # mnemonic # " must declare exactly one cost: "
         # "NN_FlopsPerElement<n>, NN_FlopsPerInputElement, NN_NoFlops or "
         # "NN_CustomFlops";
  let assemblyFormat = [{
    operands attr-dict `:` type(operands) `->` type(results)
  }];
}

#endif // ZTC_DIALECTS_NN_IR_NNBASE_TD
