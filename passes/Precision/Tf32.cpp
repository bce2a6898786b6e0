//===- Tf32.cpp - the ztc-tf32 pass ---------------------------------------===//
//
// Marks the f32 products and convolutions that may run on TF32 tensor
// cores, as PyTorch's allow_tf32 switches do. See the pass description in
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Kernel/IR/KernelOps.h"

namespace mlir::ztc {
#define GEN_PASS_DEF_TF32PASS
#include "passes/Passes.h.inc"
} // namespace mlir::ztc

using namespace mlir;
using namespace mlir::ztc;

namespace {

struct Tf32Pass : public ztc::impl::Tf32PassBase<Tf32Pass> {
  using Tf32PassBase::Tf32PassBase;

  /// Whether the options let `id`'s f32 calls use TF32.
  bool allows(kernel::LibraryKernelId id) const {
    switch (id) {
    case kernel::LibraryKernelId::matmul:
      return products;
    case kernel::LibraryKernelId::conv2d:
    case kernel::LibraryKernelId::conv2d_backward_data:
    case kernel::LibraryKernelId::conv2d_backward_filter:
      return convolutions;
    default:
      return false;
    }
  }

  void runOnOperation() override {
    if (!products && !convolutions)
      return;
    getOperation().walk([&](kernel::CallOp call) {
      auto output = cast<MemRefType>(call.getOutputs().front().getType());
      if (!output.getElementType().isF32() ||
          !allows(kernel::libraryKernelOf(call).id))
        return;
      NamedAttrList config(call.getConfig());
      config.set("tf32", BoolAttr::get(call.getContext(), true));
      call.setConfigAttr(config.getDictionary(call.getContext()));
    });
  }
};

} // namespace
