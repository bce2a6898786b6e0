//===- CmdListOps.cpp - `ztc list-ops` ------------------------------------===//
//
// `ztc list-ops`: the ONNX operators ztc converts, one a line, with --opsets
// the since-versions of each.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "passes/Conversion/OnnxToNN/NodeConverter.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;
namespace mz = mlir::ztc;

namespace ztc::driver {

cl::SubCommand &listOpsCommand() {
  static cl::SubCommand command("list-ops",
                                "List the ONNX operators ztc converts");
  return command;
}

namespace {

cl::opt<bool> listOpsOpsets(
    "opsets",
    cl::desc("After each operator, the ONNX since-versions ztc converts (an "
             "opset uses the newest since-version not above it)"),
    cl::sub(listOpsCommand()));

} // namespace

int runListOps() {
  const auto &registry = mz::onnx_to_nn::ConverterRegistry::get();
  for (StringRef name : registry.opTypes()) {
    llvm::outs() << name;
    if (listOpsOpsets)
      for (int64_t version : registry.sinceVersions(name))
        llvm::outs() << " " << version;
    llvm::outs() << "\n";
  }
  return 0;
}

} // namespace ztc::driver
