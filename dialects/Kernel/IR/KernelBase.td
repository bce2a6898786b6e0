//===- KernelBase.td - kernel dialect definition -----------*- tablegen -*-===//
//
// The kernel dialect is the program the emitter prints: buffers placed in
// one arena, fused elementwise kernels with scalar bodies, and calls into
// the runtime's kernel library. Buffers are builtin memrefs with static
// shapes and the identity layout.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_KERNEL_IR_KERNELBASE_TD
#define ZTC_DIALECTS_KERNEL_IR_KERNELBASE_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"

def Kernel_Dialect : Dialect {
  let name = "kernel";
  let cppNamespace = "::mlir::ztc::kernel";
  let summary = "Buffers in one arena, fused kernels and library calls";
  let description = [{
    A step function in the kernel dialect is a `func.func` whose arguments
    are the bound buffers (inputs, parameters, constants) and whose body is
    a straight-line sequence of kernels writing into `kernel.alloc`
    buffers. After `ztc-plan-memory` every alloc carries its byte offset in
    the arena and the function carries the arena size, so the peak memory
    of the step is known before it runs.

    Kernels run on streams: the discardable attribute `kernel.stream = N`
    (a non-negative i64; absent means 0) says on which. Ops of one stream
    run in program order; across streams only `kernel.signal` and
    `kernel.wait` order them. Program order is always one valid schedule
    (the CPU runs it, unless the runtime gives it a thread per stream); the
    memory planner gives a buffer's bytes to another only once every stream
    that touches the other is ordered after the buffer's last use.

    After planning, `kernel.launch_group = N` (a non-negative i64, from
    `ztc-group-launches`) on consecutive `kernel.elementwise` ops of one
    stream says they share no byte one of them writes, and a target that
    launches its loops (CUDA) launches them as one kernel.
  }];
  let hasOperationAttrVerify = 1;
  let useDefaultTypePrinterParser = 1;
  let extraClassDeclaration = [{
    /// The attribute naming an op's stream.
    static constexpr ::llvm::StringLiteral kStreamAttr = "kernel.stream";
    void registerTypes();
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

/// An ordering point between streams: `kernel.signal` makes one,
/// `kernel.wait` consumes it.
def Kernel_EventType : TypeDef<Kernel_Dialect, "Event"> {
  let mnemonic = "event";
  let summary = "a point in one stream's work that other streams can wait for";
}

/// Base class of kernel ops.
class Kernel_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kernel_Dialect, mnemonic, traits>;

/// A buffer: a statically shaped memref with the identity layout.
def Kernel_Buffer : StaticShapeMemRefOf<[AnyType]>;

/// A library kernel's scratch memory: bytes.
def Kernel_ScratchBuffer :
    AllOfType<[StaticShapeMemRefOf<[I8]>, MemRefRankOf<[I8], [1]>],
              "1-D static memref of i8", "::mlir::MemRefType">;

#endif // ZTC_DIALECTS_KERNEL_IR_KERNELBASE_TD
