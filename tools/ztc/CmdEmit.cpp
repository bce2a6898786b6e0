//===- CmdEmit.cpp - `ztc emit` -------------------------------------------===//
//
// `ztc emit MODEL.onnx`: the C++ or CUDA source of the model's forward step,
// as `ztc run` builds it, on stdout.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "tools/ztc/Compile.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;
namespace mz = mlir::ztc;

namespace ztc::driver {

cl::SubCommand &emitCommand() {
  static cl::SubCommand command(
      "emit", "Print the C++ or CUDA source ztc generates for a model's "
              "forward step");
  return command;
}

int runEmit() {
  std::unique_ptr<MLIRContext> context = makeContext();
  std::optional<mz::onnx::ImportOptions> options = importOptions();
  if (!options)
    return 1;
  mz::ArtifactContents artifact;
  if (failed(
          mz::compileForward(*context, modelPath, *options, target, artifact)))
    return 1;
  if (std::string error = writeOutput("-", artifact.source); !error.empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  return 0;
}

} // namespace ztc::driver
