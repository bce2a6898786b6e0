//===- Compile.h - ONNX model to a ztc artifact -------------------*- C++ -*-===//
//
// The compiler half of `ztc run` and `ztc emit`: import, lower through the
// nn and kernel dialects, plan memory and print the step's source, then
// gather what the runtime needs to execute it (manifest, initial values).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TOOLS_ZTC_COMPILE_H
#define ZTC_TOOLS_ZTC_COMPILE_H

#include "codegen/Emit.h"
#include "dialects/Onnx/Import/Importer.h"

#include "runtime/Artifact.h"
#include "runtime/Tensor.h"

#include <map>
#include <string>

namespace mlir::ztc {

/// Everything an artifact directory holds, in memory.
struct ArtifactContents {
  ::ztc::rt::Manifest manifest;
  std::string source;
  std::map<std::string, ::ztc::rt::Tensor> initialValues;
};

/// Compiles the forward step of the model at `modelPath` for `target`.
/// Diagnostics go to `context`; fails after reporting.
LogicalResult compileForward(MLIRContext &context, llvm::StringRef modelPath,
                             const onnx::ImportOptions &options,
                             codegen::Target target,
                             ArtifactContents &artifact);

} // namespace mlir::ztc

#endif // ZTC_TOOLS_ZTC_COMPILE_H
