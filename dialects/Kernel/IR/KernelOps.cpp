//===- KernelOps.cpp - kernel dialect -----------------------------*- C++
//-*-===//
//
// Registration and verifiers of the kernel dialect.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kernel/IR/KernelOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::ztc::kernel;

#include "dialects/Kernel/IR/KernelOpsDialect.cpp.inc"

void KernelDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Kernel/IR/KernelOps.cpp.inc"
      >();
}

const LibraryKernel *mlir::ztc::kernel::lookupLibraryKernel(StringRef name) {
  // Keep in sync with runtime/kernels/CpuKernels.h and the emitter.
  static const LibraryKernel kernels[] = {
      {"matmul", 2, 2, 1},
      {"conv2d", 2, 3, 1},
      {"max_pool2d", 1, 1, 1},
      {"avg_pool2d", 1, 1, 1},
      {"softmax", 1, 1, 1},
      {"log_softmax", 1, 1, 1},
      {"layer_norm", 2, 3, 1},
      {"batch_norm", 5, 5, 1},
      {"reduce_sum", 1, 1, 1},
      {"reduce_mean", 1, 1, 1},
      {"reduce_max", 1, 1, 1},
      {"transpose", 1, 1, 1},
      {"slice", 1, 1, 1},
      {"gather", 2, 2, 1},
      {"trilu", 1, 1, 1},
      {"copy_into", 1, 1, 1},
      {"nll_loss", 2, 3, 1},
      {"random_uniform", 1, 1, 1},
      // Gradients.
      {"conv2d_backward_data", 2, 2, 1},
      {"conv2d_backward_filter", 2, 2, 1},
      {"max_pool2d_backward", 2, 2, 1},
      {"avg_pool2d_backward", 1, 1, 1},
      {"scatter_add", 3, 3, 1},
      {"insert_slice", 2, 2, 1},
  };
  for (const LibraryKernel &kernel : kernels)
    if (kernel.name == name)
      return &kernel;
  return nullptr;
}

/// Whether `from` broadcasts to `to` numpy-style.
static bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t lead = to.size() - from.size();
  for (auto [i, dim] : llvm::enumerate(from))
    if (dim != 1 && dim != to[lead + i])
      return false;
  return true;
}

LogicalResult ConstantOp::verify() {
  auto type = cast<MemRefType>(getBuffer().getType());
  auto valueType = cast<ShapedType>(getValue().getType());
  if (valueType.getShape() != type.getShape() ||
      valueType.getElementType() != type.getElementType())
    return emitOpError("value of type ")
           << valueType << " does not fit buffer " << type;
  return success();
}

LogicalResult ViewOp::verify() {
  auto from = cast<MemRefType>(getSource().getType());
  auto to = cast<MemRefType>(getResult().getType());
  if (from.getElementType() != to.getElementType() ||
      from.getNumElements() != to.getNumElements())
    return emitOpError("cannot view ")
           << from << " as " << to << ": element type and count must match";
  return success();
}

Value ElementwiseOp::getYielded() {
  return cast<YieldOp>(getBody().front().getTerminator()).getValue();
}

LogicalResult ElementwiseOp::verify() {
  Block &block = getBody().front();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("body takes ")
           << block.getNumArguments() << " scalars for " << getInputs().size()
           << " inputs";
  auto outType = cast<MemRefType>(getOutput().getType());
  for (auto [i, input, arg] :
       llvm::enumerate(getInputs(), block.getArguments())) {
    auto type = cast<MemRefType>(input.getType());
    if (arg.getType() != type.getElementType())
      return emitOpError("body argument ")
             << i << " has type " << arg.getType() << ", input has "
             << type.getElementType();
    if (!broadcastsTo(type.getShape(), outType.getShape()))
      return emitOpError("input ") << i << " of type " << type
                                   << " does not broadcast to " << outType;
  }
  if (!isa<YieldOp>(block.getTerminator()))
    return emitOpError("body must end in kernel.yield");
  if (getYielded().getType() != outType.getElementType())
    return emitOpError("body yields ")
           << getYielded().getType() << " for output elements of type "
           << outType.getElementType();
  return success();
}

LogicalResult CallOp::verify() {
  const LibraryKernel *kernel = lookupLibraryKernel(getCallee());
  if (!kernel)
    return emitOpError("unknown library kernel '") << getCallee() << "'";
  unsigned inputs = getInputs().size();
  if (inputs < kernel->minInputs || inputs > kernel->maxInputs ||
      getOutputs().size() != kernel->outputs)
    return emitOpError("'")
           << getCallee() << "' takes " << kernel->minInputs << " to "
           << kernel->maxInputs << " inputs and " << kernel->outputs
           << " outputs, got " << inputs << " and " << getOutputs().size();
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Kernel/IR/KernelOps.cpp.inc"
