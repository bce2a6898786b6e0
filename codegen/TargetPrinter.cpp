//===- TargetPrinter.cpp - each target's printer --------------------------===//
//
// The one place that maps a target (runtime/backend/Target.h) to its
// printer.
//
//===----------------------------------------------------------------------===//

#include "codegen/TargetPrinter.h"

using namespace mlir::ztc::codegen;

TargetPrinter::~TargetPrinter() = default;

void TargetPrinter::printElementwiseGroup(
    EntryText &entry, llvm::ArrayRef<ElementwiseLoop> loops) {
  for (const ElementwiseLoop &loop : loops)
    printElementwise(entry, loop);
}

std::unique_ptr<TargetPrinter>
mlir::ztc::codegen::createTargetPrinter(::ztc::rt::Target target) {
  switch (target) {
  case ::ztc::rt::Target::Cpu:
    return createCpuPrinter();
  case ::ztc::rt::Target::Cuda:
    return createCudaPrinter();
  }
  return nullptr;
}
