//===- Commands.h - what the ztc subcommands share --------------*- C++ -*-===//
//
// Private to the ztc driver. Each subcommand is a file, Cmd<Name>.cpp, that
// owns its cl::SubCommand, the flags only it takes and its entry, run<Name>;
// ztc.cpp parses the command line and calls the entry of the subcommand
// given. This header declares the subcommands and their entries, the flags
// several subcommands take, the flags for training pipeline options, and the
// helpers the commands share (Commands.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TOOLS_ZTC_COMMANDS_H
#define ZTC_TOOLS_ZTC_COMMANDS_H

#include "codegen/Emit.h"
#include "dialects/Onnx/Import/Importer.h"
#include "passes/Pipelines/Pipelines.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ztc::driver {

//===----------------------------------------------------------------------===//
// Subcommands and their entries
//===----------------------------------------------------------------------===//

// Each subcommand is a function-local static in its file: flags in other
// files name it while globals are initialized, in an order across files
// that C++ leaves unspecified, so it is built on first use. An entry runs
// after the command line is parsed and returns the exit status.

/// `ztc import` (CmdImport.cpp).
llvm::cl::SubCommand &importCommand();
int runImport();

/// `ztc list-ops` (CmdListOps.cpp).
llvm::cl::SubCommand &listOpsCommand();
int runListOps();

/// `ztc run` (CmdRun.cpp).
llvm::cl::SubCommand &runCommand();
int runRun();

/// `ztc emit` (CmdEmit.cpp).
llvm::cl::SubCommand &emitCommand();
int runEmit();

/// `ztc compile` (CmdCompile.cpp); `args`: the command line after `ztc
/// compile`, for the compile key.
llvm::cl::SubCommand &compileCommand();
int runCompile(const std::vector<std::string> &args);

/// `ztc export` (CmdExport.cpp).
llvm::cl::SubCommand &exportCommand();
int runExport();

/// `ztc gradcheck` (CmdGradCheck.cpp).
llvm::cl::SubCommand &gradcheckCommand();
int runGradCheck();

/// `ztc inspect` (CmdInspect.cpp).
llvm::cl::SubCommand &inspectCommand();
int runInspect();

/// `ztc consolidate` (CmdConsolidate.cpp).
llvm::cl::SubCommand &consolidateCommand();
int runConsolidate();

/// `ztc plot` (CmdPlot.cpp).
llvm::cl::SubCommand &plotCommand();
int runPlot();

/// `ztc train ...` is `ztc-train ...` (CmdTrain.cpp): no subcommand here,
/// the whole command line goes to the trainer before any parsing. Returns
/// only when it cannot be started.
int runTrain(int argc, char **argv);

//===----------------------------------------------------------------------===//
// Flags several subcommands take (Commands.cpp)
//===----------------------------------------------------------------------===//

/// MODEL.onnx of import, run, emit and compile.
extern llvm::cl::opt<std::string> modelPath;
/// --input-shape of import, run, emit, compile and inspect.
extern llvm::cl::list<std::string> inputShapes;
/// --target of run, emit and compile.
extern llvm::cl::opt<mlir::ztc::codegen::Target> target;
/// --constant-input of import, run, emit, compile and inspect.
extern llvm::cl::list<std::string> constantInputs;
/// --batch-size of compile, inspect, import and emit.
extern llvm::cl::opt<int64_t> batchSize;
/// --config and --strict of compile and inspect.
extern llvm::cl::opt<std::string> configFile;
extern llvm::cl::opt<bool> strictConfig;

//===----------------------------------------------------------------------===//
// Flags for training pipeline options
//===----------------------------------------------------------------------===//

/// The flags of `ztc compile` and `ztc inspect` that set training pipeline
/// options: each flag is the option of the same name, with its help, type
/// and default (passes/Pipelines/Pipelines.h declares each option once).
// clang-format off
inline constexpr const char *kCompilePipelineFlags[] = {
    "loss",                    "loss-input",
    "labels",                  "ignore-index",
    "freeze",                  "optimizer",
    "lr",                      "momentum",
    "nesterov",                "weight-decay",
    "betas",                   "eps",
    "clip-grad-norm",          "grad-accum",
    "lr-schedule",             "lr-scheduler-type",
    "warmup-steps",            "warmup-ratio",
    "warmup-type",             "total-steps",
    "min-lr",                  "warmup-min-ratio",
    "cos-min-ratio",           "cycle-first-step-size",
    "cycle-second-step-size",  "decay-lr-rate",
    "decay-step-size",         "cycle-first-stair-count",
    "cycle-second-stair-count", "lr-range-test-step-size",
    "lr-range-test-step-rate", "lr-range-test-staircase",
    "recompute",               "recompute-blocks",
    "recompute-search-nodes",  "precision",
    "keep-fp32",               "zero",
    "world-size",              "reduce-bucket-bytes",
    "reduce-bucket-elements",  "param-persistence-threshold",
    "comm-dtype",              "overlap-comm",
    "prefetch-bytes",          "prefetch-elements",
    "max-live-bytes",          "max-live-elements",
    "allgather-bucket-bytes",  "allgather-bucket-elements",
    "loss-scale",
    "initial-scale-power",     "loss-scale-window",
    "hysteresis",              "consecutive-hysteresis",
    "min-loss-scale",          "check-finite",
    "grad-accum-dtype",        "half-weights",
    "conv-layout",             "lora",
    "base-dtype",              "fuse-attention",
    "fuse-cross-entropy",      "token-weighted-loss",
    "allow-tf32",              "conv-tf32"};
// clang-format on

/// A command's flags for pipeline options: one repeatable flag per option,
/// whose occurrences are handed to the option's own parser.
class PipelineFlags {
public:
  /// `more`: text a command adds to a flag's help.
  PipelineFlags(llvm::cl::SubCommand &command,
                llvm::ArrayRef<const char *> names,
                const std::map<std::string, std::string> &more = {});

  /// Sets every given flag on `options`; prints why and fails on a value the
  /// option's parser rejects (for a closed set: the values it takes, and
  /// what the command adds to the flag's help).
  mlir::LogicalResult
  apply(mlir::ztc::TrainingPipelineOptions &options,
        const std::map<std::string, std::string> &overrides = {});

  /// The values given for flag `name`, in order.
  std::vector<std::string> values(llvm::StringRef name) const;

  /// Whether any of the flags was given.
  bool any() const;

private:
  /// Each option's value as `options.print` writes it: "{a=1 b={x y}
  /// c={p,q}}", where a value holding spaces, and a list, is itself in
  /// braces. Entries split at the spaces outside every brace; a braced value
  /// is given without its braces.
  static std::map<std::string, std::string>
  printedValues(const mlir::ztc::TrainingPipelineOptions &options);

  mlir::ztc::TrainingPipelineOptions defaults;
  /// The flags' help texts (cl::desc keeps a reference).
  std::deque<std::string> helps;
  /// What the command adds to a flag's help (`more`).
  std::map<std::string, std::string> extras;
  std::vector<std::unique_ptr<llvm::cl::list<std::string>>> flags;
};

//===----------------------------------------------------------------------===//
// Helpers the commands share (Commands.cpp)
//===----------------------------------------------------------------------===//

/// Writes `text` to `path` ("-": stdout) and keeps the file only when every
/// byte reached it; returns the error ("cannot write FILE: REASON") or "".
/// A full disk or a failed write never ends in LLVM's fatal stream error.
std::string writeOutput(llvm::StringRef path, llvm::StringRef text);

/// A diagnostic as one terminal line: names from a model are any bytes of
/// any length, so control characters are escaped (UTF-8 passes) and a
/// message past 2000 characters keeps its start and end.
std::string oneLine(const std::string &message);

/// Human-readable byte count.
std::string formatBytes(uint64_t bytes);

/// Reads the import flags shared by import, emit and run.
std::optional<mlir::ztc::onnx::ImportOptions> importOptions();

/// The import options of a training compile: importOptions() with the batch
/// size (--batch-size, or --config's micro-batch) binding the first
/// dimensions.
std::optional<mlir::ztc::onnx::ImportOptions>
trainingImportOptions(int64_t batch);

/// What --config adds to the command line: pipeline flag values and the
/// batch size.
struct ConfigFlags {
  std::map<std::string, std::string> overrides;
  int64_t batchSize = 0;
};

/// Reads --config FILE against the flags given (`flags`, --batch-size):
/// an explicit value that contradicts a flag, a batch identity that does
/// not hold and a key ztc refuses are one-line errors; the keys it ignores
/// are warnings. Without --config: the flags as given.
std::optional<ConfigFlags> readConfigFlags(const PipelineFlags &flags);

/// --device-memory in bytes: none when not given, and false when it does
/// not read (the error printed).
std::optional<std::optional<uint64_t>> deviceMemoryBytes();

/// The line that says a plan of `planned` bytes per rank does not fit in
/// `device` bytes, with what would: the fixed part (parameters, optimizer
/// state, data) and the arena a recompute budget can shrink.
std::string deviceMemoryShortfall(uint64_t planned, uint64_t fixed,
                                  uint64_t device);

/// A context with every ztc dialect and the one-line diagnostic printer.
std::unique_ptr<mlir::MLIRContext> makeContext();

/// --lora FILE (or a directory holding adapter_config.json): peft's
/// LoraConfig, replaced by the spec it stands for. An error message, or "".
std::string resolveLoraConfig(mlir::ztc::TrainingPipelineOptions &training);

} // namespace ztc::driver

#endif // ZTC_TOOLS_ZTC_COMMANDS_H
