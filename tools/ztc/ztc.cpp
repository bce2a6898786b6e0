//===- ztc.cpp - the ztc command ------------------------------------------===//
//
// The user-facing driver, one subcommand per job: `import` (an ONNX model
// into MLIR, printed), `list-ops`, `run` (a forward step on .npy inputs),
// `compile` (a training step into an artifact), `train` (the runtime's
// trainer, ztc-train), `inspect` (memory before anything runs), `export`
// (weights back into the model, a state dict or a peft adapter),
// `gradcheck`, `emit`, `consolidate` and `plot`. Every error is one line
// naming the file (and, where it applies, the ONNX node or the flag), and
// the exit status is 1.
//
// Each subcommand is Cmd<Name>.cpp, with its flags (Commands.h); this file
// parses the command line and calls the subcommand given.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace cl = llvm::cl;
using llvm::StringRef;
using namespace ::ztc::driver;

int main(int argc, char **argv) {
  if (argc >= 2 && StringRef(argv[1]) == "train")
    return runTrain(argc, argv);
  llvm::InitLLVM init(argc, argv);
  // A flag that was replaced says by what, not just that it is unknown.
  for (int i = 1; i < argc; ++i) {
    StringRef arg(argv[i]);
    if (arg == "--recompute-time-limit" ||
        arg.starts_with("--recompute-time-limit=")) {
      llvm::errs() << "ztc: error: --recompute-time-limit was replaced by "
                      "--recompute-search-nodes N (branch-and-bound nodes "
                      "per integer program, default 10000): a bound on "
                      "work rather than seconds, so a compile gives the "
                      "same artifact on any machine at any load\n";
      return 1;
    }
  }
  // The command line after `ztc compile`, for the compile key.
  std::vector<std::string> compileArgs;
  if (argc >= 2 && StringRef(argv[1]) == "compile")
    compileArgs.assign(argv + 2, argv + argc);
  // `ztc --help` lists ztc's commands, not the options LLVM's libraries
  // register for their own tools.
  for (auto &entry : cl::getRegisteredOptions(cl::SubCommand::getTopLevel()))
    if (entry.first != "help" && entry.first != "version")
      entry.second->setHiddenFlag(cl::ReallyHidden);
  cl::ParseCommandLineOptions(
      argc, argv,
      "ztc: compile the training step of an ONNX model\n\n"
      "  ztc import MODEL.onnx [--input-shape NAME=D0xD1...] [--emit "
      "onnx|nn]\n"
      "  ztc run MODEL.onnx --data DIR --output-dir OUT [--target cpu|cuda] "
      "[--seed N]\n"
      "  ztc emit MODEL.onnx [--target cpu|cuda]\n"
      "  ztc compile MODEL.onnx -o ART.ztc [--batch-size B] [--loss ...] "
      "[--optimizer ...] [--config ds_config.json [--strict]]\n"
      "  ztc train ART.ztc --data DIR [--steps N | --epochs E] [--save DIR] "
      "[--config ds_config.json]\n"
      "    (runs ztc-train, which links no compiler; see ztc train --help)\n"
      "  ztc export ART.ztc --checkpoint DIR [-o trained.onnx [--inference]] "
      "[--state-dict weights.safetensors]\n"
      "  ztc gradcheck MODEL.onnx [--loss ...] [--batch-size B] [--seed S] "
      "[--tolerance T]\n"
      "  ztc inspect ART.ztc | MODEL.onnx [compile flags] [--recompute "
      "all | --precision all] [--weights] [--json] [--svg FILE]\n"
      "  ztc consolidate CHECKPOINT_DIR -o model.safetensors [--dtype "
      "fp32|fp16|bf16]\n"
      "  ztc plot METRICS.jsonl -o curves.svg\n"
      "  ztc list-ops\n");
  if (importCommand())
    return runImport();
  if (listOpsCommand())
    return runListOps();
  if (runCommand())
    return runRun();
  if (emitCommand())
    return runEmit();
  if (compileCommand())
    return runCompile(compileArgs);
  if (exportCommand())
    return runExport();
  if (gradcheckCommand())
    return runGradCheck();
  if (inspectCommand())
    return runInspect();
  if (plotCommand())
    return runPlot();
  if (consolidateCommand())
    return runConsolidate();
  llvm::errs() << "ztc: error: no command given; see `ztc --help`\n";
  return 1;
}
