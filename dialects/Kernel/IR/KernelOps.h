//===- KernelOps.h - kernel dialect -------------------------------*- C++
//-*-===//
//
// The kernel dialect: arena buffers, fused elementwise kernels and calls into
// the runtime's kernel library.
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

#include "dialects/Kernel/IR/KernelOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/Kernel/IR/KernelOps.h.inc"

namespace mlir::ztc::kernel {

/// Inputs and outputs a library kernel takes.
struct LibraryKernel {
  llvm::StringRef name;
  unsigned minInputs, maxInputs, outputs;
};

/// The library kernel named `name`, or null when the runtime has none.
const LibraryKernel *lookupLibraryKernel(llvm::StringRef name);

} // namespace mlir::ztc::kernel

#endif // ZTC_DIALECTS_KERNEL_IR_KERNELOPS_H
