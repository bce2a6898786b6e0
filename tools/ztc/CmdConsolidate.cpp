//===- CmdConsolidate.cpp - `ztc consolidate` -----------------------------===//
//
// `ztc consolidate CHECKPOINT_DIR -o model.safetensors`: the whole weights of
// a sharded checkpoint as one safetensors file, tensor by tensor.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "runtime/train/Consolidate.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace ztc::driver {

cl::SubCommand &consolidateCommand() {
  static cl::SubCommand command(
      "consolidate",
      "Write the whole weights of a sharded checkpoint (ZeRO stages 1-3 on "
      "several ranks) as one safetensors file, streaming tensor by tensor");
  return command;
}

namespace {

cl::opt<std::string> consolidateInput(cl::Positional,
                                      cl::desc("CHECKPOINT_DIR"), cl::Required,
                                      cl::sub(consolidateCommand()));
cl::opt<std::string> consolidateOutput("o",
                                       cl::desc("Write the weights to FILE"),
                                       cl::value_desc("model.safetensors"),
                                       cl::Required,
                                       cl::sub(consolidateCommand()));
cl::opt<std::string> consolidateDtype(
    "dtype",
    cl::desc("Element type of the floating-point weights written: fp32, "
             "fp16 or bf16 (default: as trained)"),
    cl::value_desc("TYPE"), cl::sub(consolidateCommand()));

} // namespace

int runConsolidate() {
  ::ztc::rt::ConsolidateResult result;
  if (std::string error = ::ztc::rt::consolidateNoThrow(
          consolidateInput, consolidateOutput, consolidateDtype, result);
      !error.empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  llvm::errs() << llvm::formatv(
      "ztc: wrote {0}: {1} tensors, {2} bytes, from the checkpoint of step "
      "{3} on {4} ranks (at most {5} bytes read at once)\n",
      consolidateOutput, result.tensors, result.bytes, result.step,
      result.worldSize, result.largestPiece);
  return 0;
}

} // namespace ztc::driver
