//===- DistOps.td - dist dialect ---------------------------*- tablegen -*-===//
//
// Collectives on tensors: what ranks of one SPMD program exchange.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_DIST_IR_DISTOPS_TD
#define ZTC_DIALECTS_DIST_IR_DISTOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::mlir::ztc::dist";
  let summary = "Collectives between the ranks of one SPMD training step";
  let description = [{
    Every rank runs the same program, so every rank reaches the same
    collectives in the same order; `ztc-zero` inserts them. Each op states
    the number of ranks it spans (`world_size`), which its shapes are
    verified against. Values have value semantics: a collective is pure
    within one rank's program, since every rank transforms the same program
    the same way. `ztc-convert-nn-to-kernel` lowers each op to a
    `kernel.collective` of its kind, which runs on the step context's
    communicator (runtime/kernels/StepAbi.h).

    On a training step `ztc-zero` records what it did as function
    attributes: `dist.world_size` (the ranks, >= 1) and `dist.zero_stage`
    (0-3); the manifest carries both. A sharded argument (ZeRO stage 3: a
    parameter or its optimizer state) holds this rank's block of the
    flattened tensor, zero-padded to world_size equal blocks, and carries
    `dist.full_shape`, the whole tensor's shape. A stage-3 gather carries
    `dist.use`, a number unique in its function, so gathers of one
    parameter for different uses stay apart.
  }];
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    static constexpr ::llvm::StringLiteral kWorldSizeAttr = "dist.world_size";
    static constexpr ::llvm::StringLiteral kZeroStageAttr = "dist.zero_stage";
    static constexpr ::llvm::StringLiteral kFullShapeAttr = "dist.full_shape";
    static constexpr ::llvm::StringLiteral kUseAttr = "dist.use";
  }];
}

/// Tensors a collective moves: static floating-point tensors.
def Dist_FloatTensor : StaticShapeTensorOf<[F32, F64, F16, BF16]>;
def Dist_FlatTensor : 1DTensorOf<[F32, F64, F16, BF16]>;

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, !listconcat(traits, [Pure])> {
  let assemblyFormat = [{
    $x attr-dict `:` type($x) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_AllReduceOp : Dist_Op<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "the sum over ranks";
  let description = [{
    Every rank receives the element-wise sum of every rank's `x`.

    Example:

    ```mlir
    %sum = dist.all_reduce %g {world_size = 4 : i64} : tensor<1024xf32> -> tensor<1024xf32>
    ```
  }];
  let arguments = (ins Dist_FloatTensor:$x, I64Attr:$world_size);
  let results = (outs Dist_FloatTensor:$result);
}

def Dist_ReduceScatterOp : Dist_Op<"reduce_scatter"> {
  let summary = "this rank's block of the sum over ranks";
  let description = [{
    `x` is world_size blocks of equal length; rank r receives block r of the
    element-wise sum of every rank's `x`.

    Example:

    ```mlir
    %mine = dist.reduce_scatter %g {world_size = 4 : i64} : tensor<1024xf32> -> tensor<256xf32>
    ```
  }];
  let arguments = (ins Dist_FlatTensor:$x, I64Attr:$world_size);
  let results = (outs Dist_FlatTensor:$result);
}

def Dist_AllGatherOp : Dist_Op<"all_gather"> {
  let summary = "every rank's block, in rank order";
  let description = [{
    Every rank receives the concatenation of every rank's `x`, rank 0
    first.

    Example:

    ```mlir
    %all = dist.all_gather %p {world_size = 4 : i64} : tensor<256xf32> -> tensor<1024xf32>
    ```
  }];
  let arguments = (ins Dist_FlatTensor:$x, I64Attr:$world_size);
  let results = (outs Dist_FlatTensor:$result);
}

def Dist_ShardOp : Dist_Op<"shard"> {
  let summary = "this rank's block, without communication";
  let description = [{
    `x` is world_size blocks of equal length; rank r takes block r. The
    slice of a value every rank holds whole (a replicated parameter's shard
    that this rank updates).

    Example:

    ```mlir
    %mine = dist.shard %p {world_size = 4 : i64} : tensor<1024xf32> -> tensor<256xf32>
    ```
  }];
  let arguments = (ins Dist_FlatTensor:$x, I64Attr:$world_size);
  let results = (outs Dist_FlatTensor:$result);
}

#endif // ZTC_DIALECTS_DIST_IR_DISTOPS_TD
