//===- KernelOps.h - kernel dialect -----------------------------*- C++ -*-===//
//
// The kernel dialect: arena buffers, fused elementwise kernels and
// reductions, calls into the runtime's kernel library, and collectives.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_KERNEL_IR_KERNELOPS_H
#define ZTC_DIALECTS_KERNEL_IR_KERNELOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <algorithm>
#include <array>
#include <optional>

#include "dialects/Kernel/IR/KernelOpsDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/Kernel/IR/KernelOpsTypes.h.inc"

#include "dialects/Kernel/IR/KernelEnums.h.inc"

#include "dialects/Kernel/IR/KernelOpsInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/Kernel/IR/KernelOps.h.inc"

namespace mlir::ztc::kernel {

/// The kind of a library kernel's configuration field
/// (runtime/kernels/Library.def, which gives each its C++ type).
enum class ConfigKind {
  Int,
  Bool,
  Flag,
  Float,
  /// A float that may be absent, read as 0.
  MaybeFloat,
  Ints,
  MaybeInts,
  MaybeInt,
  Bits,
  Reduction
};

/// One configuration field of a library kernel.
struct ConfigField {
  llvm::StringLiteral name;
  ConfigKind kind;

  /// Whether the attribute must be present: an absent Flag reads false, an
  /// absent MaybeInt as absent, an absent MaybeFloat as 0, absent
  /// MaybeInts as empty, absent Bits as 0, an absent Reduction as "mean".
  bool required() const {
    return kind != ConfigKind::Flag && kind != ConfigKind::MaybeInt &&
           kind != ConfigKind::MaybeFloat && kind != ConfigKind::MaybeInts &&
           kind != ConfigKind::Bits && kind != ConfigKind::Reduction;
  }
};

/// The library kernels by name (runtime/kernels/Library.def).
enum class LibraryKernelId {
#define ZTC_KERNEL(name, cpp, inputs, outputs, Config) name,
#include "runtime/kernels/Library.def"
};

/// A kernel of the runtime library, as runtime/kernels/Library.def declares
/// it: the verifier checks every `kernel.call` against it, and the emitter
/// prints every call from it.
struct LibraryKernel {
  LibraryKernelId id;
  llvm::StringLiteral name;
  /// The function in ztc::cpu and ztc::cuda.
  llvm::StringLiteral cppName;
  /// One letter per input, then per output, in order (Library.def): `T`
  /// has the element type of the first output lettered T, else of the
  /// first such input (the template parameter), `C` its compute type (f32 for
  /// half), `I` is an integer tensor (one type for all of a kernel's), `K` i64,
  /// `B` i8, `F` f32. Lowercase: optional (only trailing inputs).
  llvm::StringLiteral inputs;
  llvm::StringLiteral outputs;
  /// The parameter struct's name in namespace ztc (Conv2dParams).
  llvm::StringLiteral paramsType;
  llvm::ArrayRef<ConfigField> config;

  unsigned minInputs() const;
  unsigned maxInputs() const { return inputs.size(); }
  /// Whether its CUDA kernel works in planned scratch (a ZTC_SCRATCH row):
  /// ztc-plan-scratch gives its calls a `scratch` operand.
  bool takesScratch() const;
  /// The input its first output may be (a ZTC_IN_PLACE row), if any:
  /// ztc-write-in-place may then write the result over that input.
  std::optional<unsigned> inPlaceInput() const;
  /// The field named `name`, or null.
  const ConfigField *field(llvm::StringRef name) const;
};

/// The library kernel named `name`, or null when the runtime has none.
const LibraryKernel *lookupLibraryKernel(llvm::StringRef name);
/// A verified call's kernel.
const LibraryKernel &libraryKernelOf(CallOp call);
/// The element type of `call`'s template parameter T (Library.def): that
/// of its first output lettered T, else of its first input lettered T or
/// t; the first output's when no letter is T. `call`'s callee must be a
/// library kernel.
mlir::Type templateElementType(CallOp call);
/// The kernel `id` names.
const LibraryKernel &libraryKernel(LibraryKernelId id);
/// Whether `op` is a kernel.call of `id`.
bool isCallOf(mlir::Operation *op, LibraryKernelId id);

/// The role (runtime/kernels/AttentionShape.h's AttentionRole) of operand
/// `index` of an attention or attention_backward call; -1 for the mask and
/// for other ops.
int attentionRole(mlir::Operation *op, unsigned index);

/// The heads of rank-4 operand `index` of an attention call as stored:
/// dimension 2 when its role's `bthd` bit is set ([B, T, H, D]), else 1.
int64_t attentionStoredHeads(CallOp call, unsigned index);

/// The function of ztc::cpu and ztc::cuda a collective of `kind` calls
/// (runtime/kernels/Library.def).
llvm::StringLiteral collectiveFunction(CollectiveKind kind);
/// The step-ABI code of a communicating `kind` (ZTC_COLLECTIVE_*,
/// runtime/kernels/StepAbi.h, which rt::CollectiveOp's values are); -1 for
/// shard.
int32_t collectiveCode(CollectiveKind kind);

/// A verified call's configuration attribute `name`, which its kernel must
/// declare with that kind (the emitter's accessors); absent optional ones
/// read as 0, false or empty (configString: Reduction fields, absent
/// "mean").
int64_t configInt(CallOp call, llvm::StringRef name);
bool configBool(CallOp call, llvm::StringRef name);
double configFloat(CallOp call, llvm::StringRef name);
llvm::ArrayRef<int64_t> configInts(CallOp call, llvm::StringRef name);
llvm::StringRef configString(CallOp call, llvm::StringRef name);

/// Attribute (unit) on a scalar op in a kernel.elementwise body: its
/// half-precision result stays in float where the loop goes on using it,
/// rounded only where it is stored or explicitly cast (a gradient formula's
/// intermediates; see ztc-convert-nn-to-kernel). Without it every
/// half-precision result is rounded, as its op alone would round it.
inline constexpr llvm::StringLiteral kUnroundedAttr = "kernel.unrounded";

/// On an entry (ztc-plan-scratch): the bytes of device memory the target's
/// kernel library holds besides the plan, once per process (cuBLAS's
/// workspace), which the step's footprint counts with the arena.
inline constexpr llvm::StringLiteral kReservedBytesAttr =
    "kernel.reserved_bytes";
/// On an entry (ztc-plan-scratch): how many sets of the per-call bindings
/// (inputs, labels, hyperparameters) the target's runtime keeps (CUDA: two,
/// the next call's uploaded while one runs), which the footprint counts.
inline constexpr llvm::StringLiteral kInputSetsAttr = "kernel.input_sets";

/// On a kernel.elementwise (ztc-group-launches): the number of the group of
/// consecutive, independent fused loops the emitter launches as one kernel
/// (CUDA), its blocks split among them.
inline constexpr llvm::StringLiteral kLaunchGroupAttr = "kernel.launch_group";

/// The launch group of `op` (kLaunchGroupAttr), or nullopt.
std::optional<int64_t> launchGroupOf(Operation *op);

/// A reduction's space (kernel.reduce) as three groups of dimensions, in
/// order: reduced, kept, reduced, each given by its element count (1 when
/// empty; dimensions of size 1 join any group). The emitter's loops run
/// over these three indices.
struct ReductionGroups {
  int64_t outer = 1, kept = 1, inner = 1;
};

/// The groups of `space` reduced along `axes` (increasing), or nullopt when
/// a kept dimension lies between reduced ones on both sides of another
/// reduced one ([kept, reduced, kept]).
std::optional<ReductionGroups> reductionGroups(llvm::ArrayRef<int64_t> space,
                                               llvm::ArrayRef<int64_t> axes);

/// The strides of an input of shape `input`, broadcast to `space`, along
/// the outer, kept and inner group indices (0 along a group it is
/// broadcast over); nullopt when it has only some of a group's dimensions.
std::optional<std::array<int64_t, 3>>
groupStrides(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> space,
             llvm::ArrayRef<int64_t> axes);

/// The stream `op` runs on: its `kernel.stream`, or 0.
int64_t streamOf(Operation *op);

/// The buffers `op` writes, from its memory effects (kernel ops declare
/// them; ops without effects write nothing). The one answer to "what does
/// this op write" for fusion, transpose folding, bufferization, planning
/// and emission.
llvm::SmallVector<Value> writtenBuffers(Operation *op);

/// The buffer `value` is a view of, through any number of kernel.view ops;
/// `value` itself when it is no view.
Value rootBuffer(Value value);

/// Appends the ops that use `buffer` or a view of it, through any number of
/// kernel.view ops, to `users`; the views themselves are left out (they
/// touch no memory).
void bufferUsers(Value buffer, llvm::SmallVectorImpl<Operation *> &users);

/// The numbers of the arguments of `function` (an entry) that some op in
/// it writes, directly or through views, ascending: the bindings the entry
/// updates (a trained parameter, an optimizer state).
llvm::SmallVector<unsigned> writtenArguments(Operation *function);

} // namespace mlir::ztc::kernel

#endif // ZTC_DIALECTS_KERNEL_IR_KERNELOPS_H
