//===- OpFacts.td - what passes read off an nn op ----------*- tablegen -*-===//
//
// The facts every nn op declares besides its semantics and its derivative:
// what it costs (ztc-recompute), in which precision it computes under mixed
// precision (ztc-autocast) and which runtime library kernel it lowers to
// (ztc-convert-nn-to-kernel). Each is stated once, on the op in NNOps.td;
// the passes read it through the traits and interfaces below instead of
// keeping tables with a default for the ops they do not list. `NN_Op`
// (NNBase.td) rejects an op that declares no autocast class or no cost, as
// it makes the derivative mandatory, and test/unit/OpFactsTest.cpp checks
// every registered op and every library call against Library.def.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_NN_IR_OPFACTS_TD
#define ZTC_DIALECTS_NN_IR_OPFACTS_TD

include "mlir/IR/OpBase.td"

//===----------------------------------------------------------------------===//
// Cost: NN_CostOpInterface
//===----------------------------------------------------------------------===//

def NN_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::ztc::nn";
  let description = [{
    The floating-point operations an op costs, counted as PyTorch's profiler
    and the papers on recomputation count them: a multiply-add is two, an
    elementwise op one per element, normalizations and softmax a few per
    element, data movement none. ztc-recompute weighs what it recomputes
    with it, and reports the step's total.

    An op states its cost with exactly one of the cost traits below, which
    implement this interface; the method has no default.
  }];
  let methods = [
    InterfaceMethod<"The op's floating-point operations.", "int64_t",
                    "estimateFlops">,
  ];
}

/// Marks the cost traits, so that `NN_Op` can count them.
class NN_CostTrait;

/// A C++ trait of the nn namespace (OpFacts.h).
class NN_NativeTrait<string name> : NativeOpTrait<name> {
  let cppNamespace = "::mlir::ztc::nn";
}
class NN_ParamNativeTrait<string name, string params>
    : ParamNativeOpTrait<name, params> {
  let cppNamespace = "::mlir::ztc::nn";
}
/// A C++ trait of the nn namespace that adds `declarations` to the op.
class NN_NativeTraitWith<string name, code declarations>
    : NativeOpTrait<name, [], declarations> {
  let cppNamespace = "::mlir::ztc::nn";
}

/// `n` FLOPs per element of the result.
class NN_FlopsPerElement<int n>
    : TraitList<[NN_CostOpInterface,
                 NN_ParamNativeTrait<"FlopsPerElement", !cast<string>(n)>]>,
      NN_CostTrait;

/// One FLOP per element of the first operand: reductions, pooling and the
/// loss, which combine each element they read once.
def NN_FlopsPerInputElement
    : TraitList<[NN_CostOpInterface,
                 NN_NativeTrait<"FlopsPerInputElement">]>,
      NN_CostTrait;

/// No FLOPs: the op moves data.
def NN_NoFlops
    : TraitList<[NN_CostOpInterface, NN_NativeTrait<"NoFlops">]>,
      NN_CostTrait;

/// The op counts its FLOPs itself (`estimateFlops` in OpFacts.cpp): the
/// matrix products and convolutions, two per multiply-add.
def NN_CustomFlops
    : TraitList<[DeclareOpInterfaceMethods<NN_CostOpInterface>]>,
      NN_CostTrait;

//===----------------------------------------------------------------------===//
// Autocast class
//===----------------------------------------------------------------------===//

/// How an op chooses its compute type under mixed precision: PyTorch's
/// autocast lists (aten/src/ATen/autocast_mode.cpp), one class per op.
class NN_ComputeClass<string name> : NN_NativeTrait<name>;

/// Half precision: matrix products and convolutions.
def NN_HalfCompute : NN_ComputeClass<"HalfCompute">;
/// f32 (or wider, as the model has it): what half precision ruins — exp,
/// log, pow, reciprocal, softplus, sin and cos (rotary tables of large
/// angles), softmax and log-softmax, normalizations (their statistics),
/// sums and means, the loss.
def NN_WideCompute : NN_ComputeClass<"WideCompute">;
/// The widest type among its activation operands; weights and constants
/// follow it (as PyTorch's type promotion ignores scalars).
def NN_FollowCompute : NN_ComputeClass<"FollowCompute">;
/// The op states its result's element type itself (a cast's target, the
/// numbers random_uniform draws): autocast leaves it as it is.
def NN_OwnCompute : NN_ComputeClass<"OwnCompute">;

//===----------------------------------------------------------------------===//
// Library call: NN_LibraryCallOpInterface
//===----------------------------------------------------------------------===//

def NN_LibraryCallOpInterface : OpInterface<"LibraryCallOpInterface"> {
  let cppNamespace = "::mlir::ztc::nn";
  let description = [{
    An op that ztc-convert-nn-to-kernel lowers to one `kernel.call` of a
    runtime library kernel (runtime/kernels/Library.def), its operands the
    call's inputs and the listed attributes the call's configuration. Ops
    lowered otherwise (elementwise loops, views, copies) do not implement
    it. Declared with `NN_LibraryCall`.
  }];
  let methods = [
    StaticInterfaceMethod<"The kernel's name in `kernel.call`.",
                          "::llvm::StringRef", "getLibraryCallee">,
    StaticInterfaceMethod<[{
        The op's attributes that configure the kernel, passed on under their
        names (a unit attribute as the flag true; an absent optional one is
        left out).
      }],
      "::llvm::ArrayRef<::llvm::StringRef>", "getLibraryConfig">,
    StaticInterfaceMethod<[{
        The kernel's configuration fields that passes after the lowering set
        on the call, not taken from the op (matmul's transposes:
        ztc-fold-transposes). With `getLibraryConfig` they are exactly the
        kernel's fields.
      }],
      "::llvm::ArrayRef<::llvm::StringRef>", "getLibraryConfigSetLater">,
  ];
}

/// A C++ string array of `names`, as the body of a function returning an
/// ArrayRef<StringRef>.
class NN_StringArrayBody<list<string> names> {
  code body = !if(!empty(names), "return {};",
      "static const ::llvm::StringRef names[] = {"
      # !interleave(!foreach(name, names, "\"" # name # "\""), ", ")
      # "}; return names;");
}

/// Lowers to library kernel `callee`, configured by the op's attributes
/// `config`; `setLater` are the kernel's fields later passes set.
class NN_LibraryCall<string callee, list<string> config,
                     list<string> setLater = []>
    : TraitList<[NN_LibraryCallOpInterface,
                 NN_NativeTraitWith<"LibraryCall", [{
    static ::llvm::StringRef getLibraryCallee() { return "}] # callee # [{"; }
    static ::llvm::ArrayRef<::llvm::StringRef> getLibraryConfig() {
      }] # NN_StringArrayBody<config>.body # [{
    }
    static ::llvm::ArrayRef<::llvm::StringRef> getLibraryConfigSetLater() {
      }] # NN_StringArrayBody<setLater>.body # [{
    }
  }]>]>;

#endif // ZTC_DIALECTS_NN_IR_OPFACTS_TD
