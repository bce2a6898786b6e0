//===- KernelOps.td - kernel dialect ops -------------------*- tablegen -*-===//
//
// Buffers, fused elementwise kernels and library calls: everything the
// emitter needs to print a step as C++ or CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_KERNEL_IR_KERNELOPS_TD
#define ZTC_DIALECTS_KERNEL_IR_KERNELOPS_TD

include "dialects/Kernel/IR/KernelBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/RegionKindInterface.td"

//===----------------------------------------------------------------------===//
// CollectiveOpInterface
//===----------------------------------------------------------------------===//

def Kernel_CollectiveKind : I32EnumAttr<"CollectiveKind",
    "what a kernel.collective computes across ranks", [
      I32EnumAttrCase<"all_reduce", 0>,
      I32EnumAttrCase<"reduce_scatter", 1>,
      I32EnumAttrCase<"all_gather", 2>,
      I32EnumAttrCase<"shard", 3>
    ]> {
  // The values of the communicating kinds are the step ABI's
  // ZTC_COLLECTIVE_* codes (runtime/kernels/StepAbi.h), which rt::CollectiveOp
  // and the error slot use; KernelOps.cpp checks them at compile time.
  // `shard` stays on its rank and has no code.
  let cppNamespace = "::mlir::ztc::kernel";
}

def Kernel_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::mlir::ztc::kernel";
  let description = [{
    An op that exchanges a buffer between the ranks of the SPMD step (or, for
    `shard`, takes this rank's block of one): what stream scheduling, the
    emitter and the memory report ask of a collective. Every rank issues the
    same collectives in the same order.
  }];
  let methods = [
    InterfaceMethod<"What the collective computes.",
      "::mlir::ztc::kernel::CollectiveKind", "getKind">,
    InterfaceMethod<"The buffer it reads.", "::mlir::Value", "getInput">,
    InterfaceMethod<"The buffer it writes.", "::mlir::Value", "getOutput">,
    InterfaceMethod<"The ranks it spans.", "int64_t", "getWorldSize">,
    InterfaceMethod<[{
        The elements of the larger side: what an all-reduce reduces, what a
        reduce-scatter reads, what an all-gather writes (rt::Collective's
        `elements`).
      }], "int64_t", "getElements", (ins), [{}], [{
        return std::max(
            ::llvm::cast<::mlir::MemRefType>($_op.getInput().getType())
                .getNumElements(),
            ::llvm::cast<::mlir::MemRefType>($_op.getOutput().getType())
                .getNumElements());
      }]>,
    InterfaceMethod<[{
        Whether it moves data between ranks through the step context's
        communicator: every kind but `shard`.
      }], "bool", "communicates", (ins), [{}], [{
        return $_op.getKind() != ::mlir::ztc::kernel::CollectiveKind::shard;
      }]>,
  ];
}

//===----------------------------------------------------------------------===//
// AllocOp
//===----------------------------------------------------------------------===//

def Kernel_AllocOp : Kernel_Op<"alloc"> {
  let summary = "a buffer in the arena";
  let description = [{
    A buffer for one intermediate or output value. `ztc-plan-memory` sets
    `offset`, its byte offset in the arena; buffers whose lifetimes do not
    overlap share bytes.

    Example:

    ```mlir
    %0 = kernel.alloc {offset = 4096 : i64} : memref<8x64xf32>
    ```
  }];
  // Set by the memory planner.
  let arguments = (ins OptionalAttr<I64Attr>:$offset);
  // An allocation and nothing more: an alloc no kernel uses is dead.
  let results = (outs Res<Kernel_Buffer, "", [MemAlloc]>:$buffer);
  let assemblyFormat = "attr-dict `:` type($buffer)";
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

def Kernel_ConstantOp : Kernel_Op<"constant", [Pure]> {
  let summary = "a constant buffer";
  let description = [{
    A buffer holding a compile-time value. The emitter stores the value with
    the parameters and binds it like one; it never lives in the arena.

    Example:

    ```mlir
    %mask = kernel.constant dense<true> : tensor<1x1x4x4xi1> : memref<1x1x4x4xi1>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Kernel_Buffer:$buffer);
  let assemblyFormat = "$value attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ViewOp
//===----------------------------------------------------------------------===//

def Kernel_ViewOp : Kernel_Op<"view", [Pure]> {
  let summary = "the same bytes with another shape";
  let description = [{
    Reinterprets a buffer with another static shape of the same element
    count and type: a reshape costs nothing. The view keeps its source alive.

    Example:

    ```mlir
    %1 = kernel.view %0 : memref<8x64xf32> to memref<512xf32>
    ```
  }];
  let arguments = (ins Kernel_Buffer:$source);
  let results = (outs Kernel_Buffer:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ElementwiseOp
//===----------------------------------------------------------------------===//

def Kernel_ElementwiseOp : Kernel_Op<"elementwise",
    [SingleBlock, AttrSizedOperandSegments]> {
  let summary = "a fused elementwise kernel";
  let description = [{
    Computes `outputs` element by element: the body receives one scalar per
    input and yields one scalar per output. Inputs broadcast numpy-style
    (right-aligned, size-1 or missing dimensions repeat) to the outputs'
    shape, which is the iteration space; every output has it. The body
    holds `arith` and `math` ops; `ztc-fuse` merges producer kernels into
    their consumers so a chain of elementwise ops runs as one loop with no
    intermediate buffer. A kernel with several outputs reads every input
    element before it writes any, so an output may be one of its inputs
    (an optimizer state updated in place).

    Example:

    ```mlir
    kernel.elementwise ins(%a, %b : memref<8x64xf32>, memref<64xf32>)
                       outs(%c : memref<8x64xf32>) {
    ^bb0(%x: f32, %y: f32):
      %s = arith.addf %x, %y : f32
      kernel.yield %s : f32
    }
    ```
  }];
  // The kernel's effects are its operands': it reads every input and
  // writes the outputs, so cleanups never drop or merge it. The body is
  // scalar arith/math and has none of its own.
  let arguments = (ins Arg<Variadic<Kernel_Buffer>, "", [MemRead]>:$inputs,
                   Arg<Variadic<Kernel_Buffer>, "", [MemWrite]>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `ins` `(` $inputs `:` type($inputs) `)` `outs` `(` $outputs `:`
    type($outputs) `)` attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scalars the body yields, one per output.
    ::mlir::OperandRange getYielded();
    /// The first output, whose shape is the iteration space.
    ::mlir::Value getOutput() { return getOutputs().front(); }
  }];
}

//===----------------------------------------------------------------------===//
// ReduceOp
//===----------------------------------------------------------------------===//

def Kernel_ReduceKind : I32EnumAttr<"ReduceKind",
    "what kernel.reduce computes over the reduced axes", [
      I32EnumAttrCase<"sum", 0>,
      I32EnumAttrCase<"mean", 1>
    ]> {
  let cppNamespace = "::mlir::ztc::kernel";
}

def Kernel_ReduceOp : Kernel_Op<"reduce",
    [SingleBlock, AttrSizedOperandSegments]> {
  let summary = "sums or means of elementwise expressions";
  let description = [{
    Sums (`kind` sum) or averages (mean) what the body computes over
    the iteration space `space`, along `axes`, into `outputs`. The body is
    an elementwise body (see `kernel.elementwise`): inputs broadcast to
    `space`, it receives one scalar per input and yields one value per
    output, the term that output adds. The outputs have the space's shape
    with the reduced dimensions removed or kept as 1, and one element type.
    The sums accumulate in f32 (f64 for f64 values), one output's terms
    always in the same order, whatever the threads; the terms are the
    body's values as computed, not rounded to a half output type first.

    `ztc-fuse` makes one from an elementwise kernel and the `reduce_sum` or
    `reduce_mean` call that alone reads its output, so the values are never
    stored: BatchNorm's variance reads its input and mean, not the squared
    differences. It then merges reductions of one space and axes into one
    with several outputs, so inputs they share are read once: BatchNorm's
    backward sums the gradient and its product with the centered input in
    one pass. Spaces whose dimensions group as [reduced, kept, reduced]
    (either reduced group may be empty) are the ones the emitter takes.

    `scratch`, given by `ztc-plan-scratch` where the CUDA kernel splits an
    output's terms over several blocks, holds their partial sums
    (runtime/kernels/cuda/Scratch.h's groupReducePlan); its contents after
    the op are undefined.

    Example:

    ```mlir
    kernel.reduce sum ins(%dy, %x, %mean : memref<16x64x8x8xf32>,
                          memref<16x64x8x8xf32>, memref<1x64x1x1xf32>)
                      outs(%g, %gx : memref<64xf32>, memref<64xf32>)
        attributes {axes = array<i64: 0, 2, 3>,
                    space = array<i64: 16, 64, 8, 8>} {
    ^bb0(%a: f32, %b: f32, %m: f32):
      %c = arith.subf %b, %m : f32
      %p = arith.mulf %a, %c : f32
      kernel.yield %a, %p : f32, f32
    }
    ```
  }];
  // Reads its inputs and writes its outputs (see ElementwiseOp) and its
  // scratch, which it leaves undefined.
  let arguments = (ins Kernel_ReduceKind:$kind,
                   Arg<Variadic<Kernel_Buffer>, "", [MemRead]>:$inputs,
                   Arg<Variadic<Kernel_Buffer>, "", [MemWrite]>:$outputs,
                   Arg<Optional<Kernel_ScratchBuffer>, "", [MemWrite]>:$scratch,
                   DenseI64ArrayAttr:$axes, DenseI64ArrayAttr:$space);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind `ins` `(` $inputs `:` type($inputs) `)` `outs` `(` $outputs `:`
    type($outputs) `)` (`scratch` `(` $scratch^ `:` type($scratch) `)`)?
    attr-dict-with-keyword $body
  }];
  // Reductions are made without scratch; ztc-plan-scratch adds it.
  let builders = [
    OpBuilder<(ins "::mlir::ztc::kernel::ReduceKind":$kind,
                   "::mlir::ValueRange":$inputs, "::mlir::ValueRange":$outputs,
                   "::llvm::ArrayRef<int64_t>":$axes,
                   "::llvm::ArrayRef<int64_t>":$space), [{
      build($_builder, $_state, kind, inputs, outputs, ::mlir::Value(), axes,
            space);
    }]>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scalars the body yields, one per output.
    ::mlir::ValueRange getYielded();
    /// The number of terms each output element sums.
    int64_t getCount();
  }];
}

def Kernel_YieldOp : Kernel_Op<"yield",
    [Pure, Terminator, ParentOneOf<["ElementwiseOp", "ReduceOp"]>]> {
  let summary = "the scalars an elementwise or reduction body produces";
  let description = [{
    Ends an elementwise body with one element per output, or a reduction
    body with the value each output adds.

    Example:

    ```mlir
    kernel.yield %s : f32
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

//===----------------------------------------------------------------------===//
// CallOp
//===----------------------------------------------------------------------===//

def Kernel_CallOp : Kernel_Op<"call", [AttrSizedOperandSegments]> {
  let summary = "a call into the runtime's kernel library";
  let description = [{
    Runs a structured kernel of the runtime library (matmul, conv2d,
    pooling, normalization, softmax, reductions, data movement, losses)
    reading `inputs` and writing `outputs`. `config` carries the kernel's
    attributes (axes, strides, ...). The verifier checks the callee and its
    arity; shapes were verified on the `nn` op it came from.

    `scratch`, given by `ztc-plan-scratch` to the kernels that declare it
    (the ZTC_SCRATCH rows of runtime/kernels/Library.def), is device memory
    of the plan the CUDA kernel works in (a convolution's columns, a long
    reduction's partial sums); its contents after the call are undefined.

    Example:

    ```mlir
    kernel.call "matmul" ins(%a, %b : memref<8x64xf32>, memref<64x10xf32>)
                         outs(%c : memref<8x10xf32>) {config = {}}
    kernel.call "reduce_sum" ins(%x : memref<4096x64xf32>)
                             outs(%y : memref<64xf32>)
                             scratch(%s : memref<8192xi8>)
                             {config = {axes = [0], keepdims = false}}
    ```
  }];
  // Reads its inputs, writes its outputs (see ElementwiseOp) and its
  // scratch, which it leaves undefined.
  let arguments = (ins StrAttr:$callee,
                   Arg<Variadic<Kernel_Buffer>, "", [MemRead]>:$inputs,
                   Arg<Variadic<Kernel_Buffer>, "", [MemWrite]>:$outputs,
                   Arg<Optional<Kernel_ScratchBuffer>, "", [MemWrite]>:$scratch,
                   DefaultValuedAttr<DictionaryAttr, "{}">:$config);
  let assemblyFormat = [{
    $callee `ins` `(` $inputs `:` type($inputs) `)` `outs` `(` $outputs `:`
    type($outputs) `)` (`scratch` `(` $scratch^ `:` type($scratch) `)`)?
    attr-dict
  }];
  // Calls are made without scratch; ztc-plan-scratch adds it.
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$callee, "::mlir::ValueRange":$inputs,
                   "::mlir::ValueRange":$outputs,
                   "::mlir::DictionaryAttr":$config), [{
      build($_builder, $_state, callee, inputs, outputs, ::mlir::Value(),
            config);
    }]>
  ];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// CollectiveOp
//===----------------------------------------------------------------------===//

/// What collectives move: the ztc_comm element types (StepAbi.h).
def Kernel_FloatBuffer : StaticShapeMemRefOf<[F32, F64, F16, BF16]>;

def Kernel_CollectiveOp : Kernel_Op<"collective",
    [Kernel_CollectiveOpInterface]> {
  let summary = "a collective on the step context's communicator";
  let description = [{
    Runs collective `kind` across `world_size` ranks, reading `input` and
    writing `output` (`ztc-convert-nn-to-kernel` makes one per `dist` op):

    - `all_reduce`: output = the element-wise sum over ranks of input, of the
      same element count;
    - `reduce_scatter`: input is world_size blocks of the output's count;
      output = block `rank` of the sum over ranks;
    - `all_gather`: output = every rank's input, in rank order (world_size
      blocks);
    - `shard`: output = block `rank` of input, without communication.

    The kind's value is the step ABI's collective code
    (`ZTC_COLLECTIVE_*`, runtime/kernels/StepAbi.h), which the manifest and
    the runtime's error slot use; `runtime/kernels/Library.def` names the
    library function each kind calls, with the step context and the smaller
    side's element count. Half types are summed in f32 and rounded once.

    Example:

    ```mlir
    kernel.collective reduce_scatter ins(%g : memref<1024xbf16>)
                                     outs(%mine : memref<256xbf16>)
                                     {world_size = 4 : i64}
    ```
  }];
  // Reads its input and writes its output (see ElementwiseOp), so cleanups
  // never drop a collective every rank must issue.
  let arguments = (ins Kernel_CollectiveKind:$kind,
                   Arg<Kernel_FloatBuffer, "", [MemRead]>:$input,
                   Arg<Kernel_FloatBuffer, "", [MemWrite]>:$output,
                   I64Attr:$world_size);
  let assemblyFormat = [{
    $kind `ins` `(` $input `:` type($input) `)` `outs` `(` $output `:`
    type($output) `)` attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// RecordLossOp
//===----------------------------------------------------------------------===//

def Kernel_RecordLossOp : Kernel_Op<"record_loss", [MemoryEffects<[MemWrite]>]> {
  let summary = "add a loss to the context's training state";
  let description = [{
    Reads the rank-0 `loss` buffer and updates the step context's training
    state on the device (`ztc_train_state` in runtime/kernels/StepAbi.h):
    adds the loss to the sum, counts the call, and keeps the first
    non-finite loss and the call it came from. Writes no buffer; its write
    is to the state, so it is never dropped.

    Example:

    ```mlir
    kernel.record_loss %loss : memref<f32>
    ```
  }];
  let arguments = (ins Arg<MemRefRankOf<[F32, F64], [0]>, "", [MemRead]>:$loss);
  let assemblyFormat = "$loss attr-dict `:` type($loss)";
}

//===----------------------------------------------------------------------===//
// CheckFiniteOp
//===----------------------------------------------------------------------===//

def Kernel_FinitePass : I32EnumAttr<"FinitePass",
    "the part of the step a finite check's kernel belongs to", [
      I32EnumAttrCase<"forward", 0>,
      I32EnumAttrCase<"backward", 1>,
      I32EnumAttrCase<"recomputed_forward", 2, "recomputed forward">,
      I32EnumAttrCase<"update", 3>
    ]> {
  let cppNamespace = "::mlir::ztc::kernel";
  // The spelling is the manifest's (finite_checks[].pass), which has a
  // space: printed quoted where it is no keyword.
  let parameterPrinter =
      "$_printer.printKeywordOrString(stringifyFinitePass($_self))";
}

def Kernel_CheckFiniteOp : Kernel_Op<"check_finite", [MemoryEffects<[MemWrite]>]> {
  let summary = "note the first non-finite value a kernel wrote (--check-finite)";
  let description = [{
    Scans `buffer` right after the kernel that wrote it; if it holds a NaN or
    an infinity and the step context's training state has no such note yet,
    it notes this check (the emitter numbers the checks of an artifact and
    lists `node`, `op` and `pass` in the manifest's `finite_checks`). `pass`
    is forward, backward, "recomputed forward" or update. Writes no buffer;
    its write is to the state, so it is never dropped.

    Example:

    ```mlir
    kernel.check_finite forward %h {node = "/h.0/Pow", op = "pow"}
        : memref<4x8xf16>
    ```
  }];
  let arguments = (ins Kernel_FinitePass:$pass,
                       Arg<AnyMemRef, "", [MemRead]>:$buffer,
                       StrAttr:$node, StrAttr:$op);
  let assemblyFormat = "$pass $buffer attr-dict `:` type($buffer)";
}

//===----------------------------------------------------------------------===//
// SignalOp, WaitOp
//===----------------------------------------------------------------------===//

def Kernel_SignalOp : Kernel_Op<"signal", [MemoryEffects<[MemWrite]>]> {
  let summary = "mark the work enqueued so far on this op's stream";
  let description = [{
    The event completes when every op before it on its stream
    (`kernel.stream`) has finished. On CUDA it is a cudaEventRecord on the
    stream, with an event the runtime created; on the CPU a flag the
    runtime's stream sets (`ztc_host_stream`), or nothing when program
    order runs every stream. Its effect (on the stream's state) keeps
    cleanups from moving or dropping it.

    Example:

    ```mlir
    %e = kernel.signal {kernel.stream = 1 : i64} : !kernel.event
    ```
  }];
  let results = (outs Kernel_EventType:$event);
  let assemblyFormat = "attr-dict `:` type($event)";
}

def Kernel_WaitOp : Kernel_Op<"wait", [MemoryEffects<[MemWrite]>]> {
  let summary = "make this op's stream wait for an event of another stream";
  let description = [{
    Ops after it on its stream start only after the event's work has
    finished (cudaStreamWaitEvent: the host does not wait). Waiting for an
    event of the same stream would order nothing and is an error.

    Example:

    ```mlir
    kernel.wait %e
    ```
  }];
  let arguments = (ins Kernel_EventType:$event);
  let assemblyFormat = "$event attr-dict";
  let hasVerifier = 1;
}

#endif // ZTC_DIALECTS_KERNEL_IR_KERNELOPS_TD
