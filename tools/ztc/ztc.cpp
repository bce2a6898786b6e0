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
//===----------------------------------------------------------------------===//

#include "dialects/Onnx/Import/Importer.h"
#include "passes/Conversion/OnnxToNN/NodeConverter.h"
#include "passes/Passes.h"
#include "passes/Transforms/Footprint.h"
#include "tools/ztc/Compile.h"
#include "tools/ztc/GradCheck.h"
#include "tools/ztc/MemoryReport.h"
#include "tools/ztc/Plot.h"
#include "tools/ztc/RuntimeBridge.h"
#include "tools/ztc/UpToDate.h"

#include "runtime/train/Consolidate.h"
#include "runtime/train/DeepSpeedConfig.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <unistd.h>

using namespace mlir;
namespace cl = llvm::cl;
namespace mz = mlir::ztc;

namespace {

enum class EmitKind { Onnx, NN };

cl::SubCommand importCommand("import", "Import an ONNX model and print its IR");
cl::SubCommand listOpsCommand("list-ops",
                              "List the ONNX operators ztc converts");
cl::opt<bool> listOpsOpsets(
    "opsets",
    cl::desc("After each operator, the ONNX since-versions ztc converts (an "
             "opset uses the newest since-version not above it)"),
    cl::sub(listOpsCommand));
cl::SubCommand
    runCommand("run",
               "Compile the forward step of an ONNX model and run it on .npy "
               "inputs");
cl::SubCommand compileCommand(
    "compile", "Compile the training step of an ONNX model into an artifact");
cl::SubCommand
    exportCommand("export",
                  "Write the ONNX model with the weights of a checkpoint");
cl::SubCommand
    gradcheckCommand("gradcheck",
                     "Compare compiled gradients with finite differences in "
                     "float64 on random inputs");
cl::SubCommand
    inspectCommand("inspect",
                   "Show what a training step needs before it runs: its "
                   "memory per rank, by role and over time");
cl::SubCommand
    emitCommand("emit",
                "Print the C++ or CUDA source ztc generates for a model's "
                "forward step");

cl::SubCommand consolidateCommand(
    "consolidate",
    "Write the whole weights of a sharded checkpoint (ZeRO stages 1-3 on "
    "several ranks) as one safetensors file, streaming tensor by tensor");
cl::opt<std::string> consolidateInput(cl::Positional,
                                      cl::desc("CHECKPOINT_DIR"), cl::Required,
                                      cl::sub(consolidateCommand));
cl::opt<std::string> consolidateOutput("o",
                                       cl::desc("Write the weights to FILE"),
                                       cl::value_desc("model.safetensors"),
                                       cl::Required,
                                       cl::sub(consolidateCommand));
cl::opt<std::string> consolidateDtype(
    "dtype",
    cl::desc("Element type of the floating-point weights written: fp32, "
             "fp16 or bf16 (default: as trained)"),
    cl::value_desc("TYPE"), cl::sub(consolidateCommand));

cl::SubCommand plotCommand("plot",
                           "Draw a run's loss, learning rate, gradient norm "
                           "and loss scale "
                           "against the step (ztc-train --metrics) as an SVG");
cl::opt<std::string> plotInput(cl::Positional, cl::desc("METRICS.jsonl"),
                               cl::Required, cl::sub(plotCommand));
cl::opt<std::string> plotOutput("o", cl::desc("Write the SVG to FILE"),
                                cl::value_desc("FILE"), cl::Required,
                                cl::sub(plotCommand));

cl::opt<std::string> modelPath(cl::Positional, cl::desc("MODEL.onnx"),
                               cl::Required, cl::sub(importCommand),
                               cl::sub(runCommand), cl::sub(emitCommand),
                               cl::sub(compileCommand));
cl::opt<std::string> inspectPath(cl::Positional,
                                 cl::desc("ART.ztc | MODEL.onnx"), cl::Required,
                                 cl::sub(inspectCommand));
cl::opt<bool> inspectMemory(
    "memory",
    cl::desc("The memory report (the default): parameters, optimizer "
             "state, data and the arena, the arena at its fullest by role "
             "(saved activations, recomputation, gradients, workspace) and "
             "the tensors live then with their ONNX nodes"),
    cl::init(true), cl::sub(inspectCommand));
cl::opt<bool> inspectJson("json", cl::desc("Print the report as JSON"),
                          cl::sub(inspectCommand));
cl::opt<bool> inspectComm(
    "comm",
    cl::desc("Also list each entry's collectives (op, element type, calls, "
             "elements) and the elements each rank sends and receives per "
             "call of the entry (the JSON always has them)"),
    cl::sub(inspectCommand));
cl::opt<bool> inspectWeights(
    "weights",
    cl::desc("Also list the weights the step binds: each parameter, trained "
             "or frozen, and each buffer, with its element type and shape "
             "(the JSON always has them)"),
    cl::sub(inspectCommand));
cl::opt<std::string> inspectSvg(
    "svg",
    cl::desc("Also draw the arena's live bytes over the step's ops, by "
             "role, as an SVG"),
    cl::value_desc("FILE"), cl::sub(inspectCommand));
cl::opt<std::string> artifactPath(cl::Positional, cl::desc("ART.ztc"),
                                  cl::Required, cl::sub(exportCommand));
cl::opt<std::string> checkpointDir("checkpoint",
                                   cl::desc("Checkpoint directory (ztc train "
                                            "--save)"),
                                   cl::value_desc("DIR"), cl::Required,
                                   cl::sub(exportCommand));
cl::opt<std::string> exportOutput("o", cl::desc("Write the model to FILE"),
                                  cl::value_desc("trained.onnx"),
                                  cl::sub(exportCommand));
cl::opt<std::string> exportStateDict(
    "state-dict",
    cl::desc("Write the trained parameters and buffers to FILE as "
             "safetensors, under the model's state-dict names (a model "
             "exported with python/ztc_export.py; tied parameters under "
             "each of their names), for PyTorch's load_state_dict"),
    cl::value_desc("FILE.safetensors"), cl::sub(exportCommand));
cl::opt<bool> exportMerge(
    "merge",
    cl::desc("A LoRA step (--lora): fold the trained adapters into their "
             "base weights (W + scale * B A) for -o and --state-dict"),
    cl::sub(exportCommand));
cl::opt<std::string> exportAdapter(
    "adapter",
    cl::desc("A LoRA step (--lora): write the trained adapters to DIR as "
             "Hugging Face peft saves them (adapter_model.safetensors, "
             "adapter_config.json), for PeftModel.from_pretrained"),
    cl::value_desc("DIR"), cl::sub(exportCommand));
cl::opt<bool> exportInference(
    "inference",
    cl::desc("Switch training-mode BatchNormalization (running statistics "
             "normalize) and Dropout (identity) to inference"),
    cl::sub(exportCommand));
cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("Bind a graph input's shape: NAME=D0xD1x... "
                         "(repeatable); binds its symbolic dimensions"),
                cl::sub(importCommand), cl::sub(runCommand),
                cl::sub(emitCommand), cl::sub(compileCommand),
                cl::sub(inspectCommand));
cl::opt<std::string> dataDir("data",
                             cl::desc("Directory with <input>.npy per graph "
                                      "input"),
                             cl::value_desc("DIR"), cl::Required,
                             cl::sub(runCommand));
cl::opt<std::string> outputDir("output-dir",
                               cl::desc("Directory for <output>.npy"),
                               cl::value_desc("DIR"), cl::Required,
                               cl::sub(runCommand));
cl::opt<mz::codegen::Target>
    target("target", cl::desc("Where the step runs"),
           cl::init(mz::codegen::Target::Cpu),
           cl::values(clEnumValN(mz::codegen::Target::Cpu, "cpu",
                                 "C++ with OpenMP and OpenBLAS"),
                      clEnumValN(mz::codegen::Target::Cuda, "cuda",
                                 "CUDA (cuBLAS and own kernels)")),
           cl::sub(runCommand), cl::sub(emitCommand), cl::sub(compileCommand));
cl::opt<unsigned> repeat(
    "repeat",
    cl::desc("After the run, time N more forward steps on the same inputs "
             "and print the median and minimum"),
    cl::value_desc("N"), cl::init(0), cl::sub(runCommand));
cl::opt<uint64_t> runSeed("seed",
                          cl::desc("Seed of the random numbers (the masks of "
                                   "training-mode Dropout)"),
                          cl::init(0), cl::sub(runCommand));
cl::opt<std::string> artifactDir(
    "artifact-dir",
    cl::desc("Keep the compiled artifact (manifest, source, step.so, "
             "init.safetensors) in DIR"),
    cl::value_desc("DIR"), cl::sub(runCommand));
cl::list<std::string> constantInputs(
    "constant-input",
    cl::desc("Specialize a graph input to the value in a serialized ONNX "
             "TensorProto: NAME=FILE.pb (repeatable)"),
    cl::sub(importCommand), cl::sub(runCommand), cl::sub(emitCommand),
    cl::sub(compileCommand), cl::sub(inspectCommand));
// ztc compile.
cl::opt<std::string> compileOutput("o",
                                   cl::desc("Write the artifact (a "
                                            "directory) to ART.ztc"),
                                   cl::value_desc("ART.ztc"), cl::Required,
                                   cl::sub(compileCommand));
cl::opt<int64_t>
    batchSize("batch-size",
              cl::desc("Bind the batch (first) dimension of every input"),
              cl::init(0), cl::sub(compileCommand), cl::sub(inspectCommand),
              cl::sub(importCommand), cl::sub(emitCommand));
cl::opt<std::string> seqBuckets(
    "seq-buckets",
    cl::desc("Compile one step per sequence length L1 < L2 < ... (the "
             "dynamic second dimension of the token inputs) into one "
             "artifact, so that ztc-train --batching pad or group runs each "
             "batch at the shortest that holds it; the steps share the "
             "parameters, optimizer state and arena, whose size is the "
             "largest plan's. auto=DATA[,MAX]: the 50th, 75th, 90th and "
             "100th percentiles of the document lengths of the token dataset "
             "DATA, rounded up to multiples of 8, at most MAX (the model's "
             "longest sequence)"),
    cl::value_desc("L1,L2,... | auto=DATA[,MAX]"), cl::sub(compileCommand));
cl::opt<bool> noBuild(
    "no-build",
    cl::desc("Write the step's source and build command but do not compile "
             "it: the runtime that loads the artifact builds it with its "
             "own compiler (a GPU node)"),
    cl::sub(compileCommand));
cl::opt<std::string>
    kernelIRPath("emit-kernel-ir",
                 cl::desc("Also write the planned kernel IR (what `ztc-opt "
                          "--ztc-training-pipeline` prints) to FILE"),
                 cl::value_desc("FILE"), cl::sub(compileCommand));
cl::opt<std::string> loraInit(
    "lora-init",
    cl::desc("With --lora: start the adapters from a Hugging Face peft "
             "adapter (a directory save_pretrained wrote, or its "
             "adapter_model.safetensors) instead of peft's initialization "
             "drawn by ztc"),
    cl::value_desc("DIR"), cl::sub(compileCommand));

/// The flags of `ztc compile` and `ztc gradcheck` that set training pipeline
/// options: each flag is the option of the same name, with its help, type
/// and default (passes/Pipelines/Pipelines.h declares each option once).
// clang-format off
const char *const kCompilePipelineFlags[] = {
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
    "base-dtype",
    "token-weighted-loss"};
// clang-format on
const char *const kGradCheckPipelineFlags[] = {
    "loss",   "loss-input", "labels",           "ignore-index",
    "freeze", "recompute",  "recompute-blocks", "recompute-search-nodes"};

/// A command's flags for pipeline options: one repeatable flag per option,
/// whose occurrences are handed to the option's own parser.
class PipelineFlags {
public:
  /// `more`: text a command adds to a flag's help.
  PipelineFlags(cl::SubCommand &command, llvm::ArrayRef<const char *> names,
                const std::map<std::string, std::string> &more = {}) {
    std::map<std::string, std::string> initial = printedValues(defaults);
    for (const char *name : names) {
      cl::Option *option = defaults.findOption(name);
      assert(option && "a pipeline flag names no pipeline option");
      // The help says the default, as the pipeline prints it.
      std::string help = option->HelpStr.str();
      if (auto extra = more.find(name); extra != more.end())
        help += "; " + extra->second;
      auto value = initial.find(name);
      if (value != initial.end() && !value->second.empty() &&
          help.find("default") == std::string::npos)
        help += " (default " + value->second + ")";
      helps.push_back(std::move(help));
      auto flag = std::make_unique<cl::list<std::string>>(
          StringRef(name), cl::desc(helps.back()), cl::sub(command),
          cl::value_desc(option->getValueExpectedFlag() == cl::ValueOptional
                             ? "true|false"
                             : "VALUE"));
      flag->setValueExpectedFlag(option->getValueExpectedFlag());
      flags.push_back(std::move(flag));
    }
  }

  /// Sets every given flag on `options`; prints why and fails on a value the
  /// option's parser rejects.
  LogicalResult
  apply(mz::TrainingPipelineOptions &options,
        const std::map<std::string, std::string> &overrides = {}) {
    for (const auto &flag : flags) {
      cl::Option *option = options.findOption(flag->ArgStr);
      auto override = overrides.find(flag->ArgStr.str());
      if (override != overrides.end()) {
        if (option->addOccurrence(0, flag->ArgStr, override->second))
          return failure();
        continue;
      }
      for (const std::string &value : *flag)
        if (option->addOccurrence(0, flag->ArgStr, value))
          return failure();
    }
    return success();
  }

  /// The values given for flag `name`, in order.
  std::vector<std::string> values(llvm::StringRef name) const {
    for (const auto &flag : flags)
      if (flag->ArgStr == name)
        return {flag->begin(), flag->end()};
    return {};
  }

  /// Whether any of the flags was given.
  bool any() const {
    return llvm::any_of(
        flags, [](const auto &flag) { return flag->getNumOccurrences() > 0; });
  }

private:
  /// Each option's value as `options.print` writes it: "{a=1 b={x y}
  /// c={p,q}}", where a value holding spaces, and a list, is itself in
  /// braces. Entries split at the spaces outside every brace; a braced value
  /// is given without its braces.
  static std::map<std::string, std::string>
  printedValues(const mz::TrainingPipelineOptions &options) {
    std::string text;
    llvm::raw_string_ostream os(text);
    options.print(os);
    StringRef all = StringRef(text).trim();
    if (all.consume_front("{"))
      all.consume_back("}");
    std::map<std::string, std::string> values;
    auto add = [&](StringRef entry) {
      entry = entry.trim();
      if (entry.empty())
        return;
      auto [key, value] = entry.split('=');
      if (value.size() >= 2 && value.front() == '{' && value.back() == '}')
        value = value.drop_front().drop_back();
      values[key.str()] = value.str();
    };
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i] == '{')
        ++depth;
      else if (all[i] == '}')
        --depth;
      else if (all[i] == ' ' && depth == 0) {
        add(all.slice(start, i));
        start = i + 1;
      }
    }
    add(all.substr(start));
    return values;
  }

  mz::TrainingPipelineOptions defaults;
  /// The flags' help texts (cl::desc keeps a reference).
  std::deque<std::string> helps;
  std::vector<std::unique_ptr<cl::list<std::string>>> flags;
};

PipelineFlags compileFlags(
    compileCommand, kCompilePipelineFlags,
    {{"lora", "or FILE: peft's adapter_config.json (or the directory "
              "save_pretrained wrote), read as peft reads it"}});
PipelineFlags
    inspectFlags(inspectCommand, kCompilePipelineFlags,
                 {{"recompute", "or all, to compare every policy"},
                  {"precision", "or all, to compare fp32, bf16 and fp16"}});
PipelineFlags gradcheckFlags(gradcheckCommand, kGradCheckPipelineFlags);

cl::opt<std::string> configFile(
    "config",
    cl::desc("A DeepSpeed config (ds_config.json, as Hugging Face's Trainer "
             "and Accelerate take it): its batch sizes, gradient_clipping, "
             "optimizer, scheduler, fp16, bf16, communication_data_type, "
             "data_types, zero_optimization and activation_checkpointing set "
             "the flags of the same meaning; \"auto\" leaves a value to the "
             "flags; a value that contradicts a flag given is an error; keys "
             "ztc does not implement are named, an error where they change "
             "what is computed, else a warning (docs/config.md)"),
    cl::value_desc("FILE"), cl::sub(compileCommand), cl::sub(inspectCommand));
cl::opt<bool> strictConfig(
    "strict",
    cl::desc("With --config: every key ztc does not implement is an error"),
    cl::sub(compileCommand), cl::sub(inspectCommand));
cl::opt<std::string> deviceMemory(
    "device-memory",
    cl::desc("The memory of one rank's device (8GiB, 80GB, 85899345920): "
             "`ztc compile` refuses a step whose planned bytes per rank "
             "exceed it, `ztc inspect` says whether each plan fits"),
    cl::value_desc("BYTES"), cl::sub(compileCommand), cl::sub(inspectCommand));

// ztc train.

// ztc gradcheck.
cl::opt<std::string> gradcheckModel(cl::Positional, cl::desc("MODEL.onnx"),
                                    cl::Required, cl::sub(gradcheckCommand));
cl::opt<int64_t> gradcheckBatchSize(
    "batch-size", cl::desc("Bind the batch (first) dimension of every input"),
    cl::init(0), cl::sub(gradcheckCommand));
cl::list<std::string> gradcheckInputShapes(
    "input-shape",
    cl::desc("Bind a graph input's shape: NAME=D0xD1x... (repeatable)"),
    cl::sub(gradcheckCommand));
cl::opt<uint64_t> gradcheckSeed("seed",
                                cl::desc("Seed of the random inputs, of "
                                         "the sampled elements and of the "
                                         "dropout masks"),
                                cl::init(0), cl::sub(gradcheckCommand));
cl::opt<double> gradcheckTolerance("tolerance",
                                   cl::desc("Largest relative error allowed"),
                                   cl::init(1e-6), cl::sub(gradcheckCommand));

cl::opt<EmitKind>
    emitKind("emit", cl::desc("IR to print"), cl::init(EmitKind::NN),
             cl::values(clEnumValN(EmitKind::Onnx, "onnx",
                                   "the onnx dialect, as imported"),
                        clEnumValN(EmitKind::NN, "nn",
                                   "the nn dialect, with static types")),
             cl::sub(importCommand));
cl::opt<std::string> outputPath("o", cl::desc("Write the IR to FILE"),
                                cl::value_desc("FILE"), cl::init("-"),
                                cl::sub(importCommand));
cl::opt<bool> printLocations(
    "locations",
    cl::desc("Print each op's location: the ONNX node name and the file, "
             "which `ztc-opt` then reads back (for --recompute full's "
             "blocks, and errors that name the node)"),
    cl::sub(importCommand));
cl::opt<bool> printSummary(
    "summary",
    cl::desc("Print a summary (inputs, outputs, parameters, ops) to stderr"),
    cl::sub(importCommand));

/// Prints diagnostics as `FILE: error: MESSAGE`, one line each: users read
/// them, so MLIR's location syntax stays out of the way.
/// Writes `text` to `path` ("-": stdout) and keeps the file only when every
/// byte reached it; returns the error ("cannot write FILE: REASON") or "".
/// A full disk or a failed write never ends in LLVM's fatal stream error.
std::string writeOutput(StringRef path, StringRef text) {
  std::string error;
  auto output = openOutputFile(path, &error);
  if (!output)
    return error;
  output->os() << text;
  output->os().flush();
  if (std::error_code failed = output->os().error()) {
    output->os().clear_error();
    return ("cannot write " +
            (path == "-" ? StringRef("standard output") : path) + ": " +
            failed.message())
        .str();
  }
  output->keep();
  return "";
}

/// A diagnostic as one terminal line: names from a model are any bytes of
/// any length, so control characters are escaped (UTF-8 passes) and a
/// message past 2000 characters keeps its start and end.
std::string oneLine(const std::string &message) {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (char c : message) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7F)
      os << c;
    else
      os << "\\x" << llvm::hexdigit(byte >> 4) << llvm::hexdigit(byte & 0xF);
  }
  constexpr size_t kLimit = 2000;
  if (text.size() > kLimit)
    text =
        text.substr(0, kLimit - 200) + " ... " + text.substr(text.size() - 195);
  return text;
}

void installDiagnosticPrinter(MLIRContext &context) {
  context.getDiagEngine().registerHandler([](Diagnostic &diag) {
    std::string file;
    diag.getLocation()->walk([&](Location loc) {
      if (auto fileLoc = dyn_cast<FileLineColLoc>(loc)) {
        file = fileLoc.getFilename().str();
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    const char *severity =
        diag.getSeverity() == DiagnosticSeverity::Error     ? "error"
        : diag.getSeverity() == DiagnosticSeverity::Warning ? "warning"
                                                            : "note";
    llvm::errs() << (file.empty() ? "ztc" : file) << ": " << severity << ": "
                 << oneLine(diag.str()) << "\n";
    for (const Diagnostic &note : diag.getNotes())
      llvm::errs() << "  note: " << oneLine(note.str()) << "\n";
    return success();
  });
}

/// Human-readable byte count.
std::string formatBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  double value = bytes;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return llvm::formatv("{0:F1} {1}", value, units[unit]).str();
}

void summarize(ModuleOp module, llvm::raw_ostream &os) {
  module.walk([&](func::FuncOp func) {
    uint64_t paramCount = 0, paramBytes = 0;
    unsigned params = 0;
    os << "function @" << func.getName() << "\n";
    for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
      StringRef name = mz::train::bindingName(func, i);
      if (name.empty())
        name = "?";
      auto type = cast<ShapedType>(arg.getType());
      if (mz::train::hasRole(func, i, mz::train::BindingRole::Param)) {
        ++params;
        paramCount += type.getNumElements();
        paramBytes += type.getNumElements() * type.getElementTypeBitWidth() / 8;
        continue;
      }
      if (mz::train::hasRole(func, i, mz::train::BindingRole::Hyper)) {
        os << "  hyper  " << name << ": " << type << "\n";
        continue;
      }
      os << "  input  " << name << ": " << type << "\n";
    }
    for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
      auto name = func.getResultAttrOfType<StringAttr>(i, "onnx.name");
      os << "  output " << (name ? name.getValue() : "?") << ": " << type
         << "\n";
    }
    os << "  parameters: " << params << " tensors, " << paramCount
       << " elements, " << formatBytes(paramBytes) << "\n";
    llvm::MapVector<StringRef, unsigned> counts;
    func.walk([&](Operation *op) {
      if (op != func.getOperation() && !isa<func::ReturnOp>(op))
        ++counts[op->getName().getStringRef()];
    });
    os << "  ops:";
    for (auto &[name, count] : counts)
      os << " " << name << "=" << count;
    os << "\n";
  });
}

/// Reads the import flags shared by import, emit and run.
std::optional<mz::onnx::ImportOptions> importOptions() {
  mz::onnx::ImportOptions options;
  for (const std::string &text : inputShapes) {
    if (llvm::Error err = mz::onnx::parseInputShape(text, options)) {
      llvm::errs() << "ztc: error: " << llvm::toString(std::move(err)) << "\n";
      return std::nullopt;
    }
  }
  for (const std::string &text : constantInputs) {
    if (llvm::Error err = mz::onnx::parseConstantInput(text, options)) {
      llvm::errs() << "ztc: error: " << llvm::toString(std::move(err)) << "\n";
      return std::nullopt;
    }
  }
  if (batchSize.getNumOccurrences() && batchSize <= 0) {
    llvm::errs() << "ztc: error: --batch-size must be positive, got "
                 << batchSize << "\n";
    return std::nullopt;
  }
  // `ztc run` binds what is left from its data, and has no --batch-size.
  if (!runCommand) {
    options.batchSize = batchSize;
    options.bindHint = "--batch-size B (a first dimension) or --input-shape";
  }
  return options;
}

/// The import options of a training compile: importOptions() with the batch
/// size (--batch-size, or --config's micro-batch) binding the first
/// dimensions.
std::optional<mz::onnx::ImportOptions> trainingImportOptions(int64_t batch) {
  std::optional<mz::onnx::ImportOptions> options = importOptions();
  if (options) {
    options->batchSize = batch;
    options->bindHint = "--batch-size B (a first dimension) or --input-shape";
  }
  return options;
}

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
std::optional<ConfigFlags> readConfigFlags(const PipelineFlags &flags) {
  ConfigFlags result;
  result.batchSize = batchSize;
  auto fail = [](const Twine &message) -> std::optional<ConfigFlags> {
    llvm::errs() << "ztc: error: " << oneLine(message.str()) << "\n";
    return std::nullopt;
  };
  if (batchSize.getNumOccurrences() && batchSize <= 0)
    return fail("--batch-size must be positive, got " +
                Twine(int64_t(batchSize)));
  if (configFile.empty()) {
    if (strictConfig)
      return fail("--strict applies to --config FILE");
    return result;
  }
  ::ztc::rt::DeepSpeedConfig config;
  if (std::string error =
          ::ztc::rt::readDeepSpeedConfigNoThrow(configFile, config);
      !error.empty())
    return fail(error);
  // `ztc inspect` plans for the CPU, whose memory is the host's.
  ::ztc::rt::addOffloadNotices(config, target == mz::codegen::Target::Cuda);
  std::vector<std::string> warnings, notes;
  std::string refused =
      ::ztc::rt::checkNotices(config, strictConfig, warnings, &notes);
  for (const std::string &note : notes)
    llvm::errs() << "ztc: note: " << oneLine(note) << "\n";
  for (const std::string &warning : warnings)
    llvm::errs() << "ztc: warning: " << oneLine(warning) << "\n";
  if (!refused.empty())
    return fail(refused);
  // The last value a flag was given on the command line.
  auto given = [&](StringRef flag) -> std::optional<std::string> {
    std::vector<std::string> values = flags.values(flag);
    if (values.empty())
      return std::nullopt;
    return values.back();
  };
  auto take = [&](const ::ztc::rt::ConfigSetting &setting) -> bool {
    assert(llvm::is_contained(kCompilePipelineFlags, setting.flag) &&
           "a config setting names no compile flag");
    if (setting.source == ::ztc::rt::ConfigSource::Auto)
      return true;
    if (std::optional<std::string> value = given(setting.flag)) {
      // A flag beats DeepSpeed's default, and must agree with the file.
      if (setting.source == ::ztc::rt::ConfigSource::Explicit &&
          // A bare boolean flag is "true".
          !::ztc::rt::sameFlagValue(value->empty() ? "true" : *value,
                                    setting.value)) {
        fail(configFile + ": " + setting.key + " is " + setting.shown +
             ", but --" + setting.flag + " is " +
             (value->empty() ? "given" : *value) +
             ": give one, or set it \"auto\"");
        return false;
      }
      return true;
    }
    result.overrides[setting.flag] = setting.value;
    return true;
  };
  for (const ::ztc::rt::ConfigSetting &setting : config.settings)
    if (setting.appliesWith.empty() && !take(setting))
      return std::nullopt;
  // DeepSpeed's batch identity, over the world size of the flags, when the
  // config speaks of the batch (a model with a fixed batch needs none).
  auto number = [&](StringRef flag) -> uint64_t {
    uint64_t value = 0;
    if (std::optional<std::string> text = given(flag))
      StringRef(*text).getAsInteger(10, value);
    return value;
  };
  uint64_t world = std::max<uint64_t>(1, number("world-size"));
  ::ztc::rt::BatchSizes sizes;
  sizes.accum = std::max<uint64_t>(1, number("grad-accum"));
  if (config.trainBatchSize.given || config.microBatchSize.given ||
      config.gradAccumSteps.given) {
    if (std::string error = ::ztc::rt::resolveBatchSizes(
            config, batchSize > 0 ? uint64_t(batchSize) : 0,
            number("grad-accum"), world, sizes);
        !error.empty())
      return fail(error);
    result.batchSize = int64_t(sizes.micro);
    if (!given("grad-accum"))
      result.overrides["grad-accum"] = std::to_string(sizes.accum);
  }
  // The loss-scale keys under fp16.enabled "auto", and the accumulation
  // type, apply where their flags do.
  std::string precision = result.overrides.count("precision")
                              ? result.overrides["precision"]
                              : given("precision").value_or("fp32");
  for (const ::ztc::rt::ConfigSetting &setting : config.settings) {
    if (setting.appliesWith.empty() ||
        (setting.appliesWith == "fp16" && precision != "fp16") ||
        (setting.appliesWith == "grad-accum" && sizes.accum <= 1))
      continue;
    if (!take(setting))
      return std::nullopt;
  }
  return result;
}

/// --device-memory in bytes: none when not given, and false when it does
/// not read (the error printed).
std::optional<std::optional<uint64_t>> deviceMemoryBytes() {
  if (deviceMemory.empty())
    return std::optional<uint64_t>();
  std::string error;
  std::optional<uint64_t> bytes = mz::parseByteCount(deviceMemory, error);
  if (!bytes || *bytes == 0) {
    llvm::errs() << "ztc: error: --device-memory '" << deviceMemory
                 << "': " << (bytes ? "expected more than 0 bytes" : error)
                 << " (such as 8GiB, 80GB or 85899345920)\n";
    return std::nullopt;
  }
  return bytes;
}

/// The line that says a plan of `planned` bytes per rank does not fit in
/// `device` bytes, with what would: the fixed part (parameters, optimizer
/// state, data) and the arena a recompute budget can shrink.
/// "trains 21 parameters (22688 elements); holds fixed 1 buffer, 2
/// frozen": what a training artifact trains, for `ztc compile`'s report.
/// Frozen parameters are those the step never writes (--freeze, --lora).
std::string weightRoles(const ::ztc::rt::Manifest &manifest,
                        const std::set<std::string> &frozenParams) {
  int64_t trained = 0, elements = 0, frozen = 0, buffers = 0;
  for (const ::ztc::rt::Binding &binding : manifest.bindings) {
    if (binding.role == ::ztc::rt::BindingRole::Buffer) {
      ++buffers;
      continue;
    }
    if (binding.role != ::ztc::rt::BindingRole::Param)
      continue;
    if (frozenParams.count(binding.name)) {
      ++frozen;
      continue;
    }
    ++trained;
    int64_t count = 1;
    for (int64_t dim :
         binding.fullShape.empty() ? binding.shape : binding.fullShape)
      count *= dim;
    elements += count;
  }
  std::string text = llvm::formatv("trains {0} parameter{1} ({2} elements)",
                                   trained, trained == 1 ? "" : "s", elements)
                         .str();
  if (buffers || frozen) {
    text += "; holds fixed";
    if (buffers)
      text += llvm::formatv(" {0} buffer{1}", buffers, buffers == 1 ? "" : "s")
                  .str();
    if (frozen)
      text += llvm::formatv("{0} {1} frozen", buffers ? "," : "", frozen).str();
  }
  return text;
}

std::string deviceMemoryShortfall(uint64_t planned, uint64_t fixed,
                                  uint64_t device) {
  std::string line = llvm::formatv("the step plans {0} bytes per rank ({1}), "
                                   "more than --device-memory {2} bytes ({3})",
                                   planned, mz::bytesText(planned), device,
                                   mz::bytesText(device))
                         .str();
  if (fixed < device)
    return line + llvm::formatv(": parameters, optimizer state and data take "
                                "{0} bytes, so --recompute budget={1} would "
                                "fit if it can be met; or a higher --zero "
                                "stage, or more ranks",
                                fixed, device)
                      .str();
  return line + llvm::formatv(": parameters, optimizer state and data alone "
                              "take {0} bytes; use a higher --zero stage or "
                              "more ranks",
                              fixed)
                    .str();
}

/// A context with every ztc dialect and the one-line diagnostic printer.
std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  mz::registerAllDialects(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  // Diagnostics are one line each: no IR dump after them.
  context->printOpOnDiagnostic(false);
  installDiagnosticPrinter(*context);
  return context;
}

int runImport() {
  std::unique_ptr<MLIRContext> contextPtr = makeContext();
  MLIRContext &context = *contextPtr;
  std::optional<mz::onnx::ImportOptions> options = importOptions();
  if (!options)
    return 1;
  OwningOpRef<ModuleOp> module =
      mz::onnx::importOnnxFile(context, modelPath, *options);
  if (!module)
    return 1;
  if (emitKind == EmitKind::NN) {
    PassManager pm(&context);
    mz::buildOnnxToNNPipeline(pm);
    if (failed(pm.run(*module)))
      return 1;
  }
  std::string error;
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, OpPrintingFlags().enableDebugInfo(printLocations));
  os << "\n";
  if (!(error = writeOutput(outputPath, text)).empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  if (printSummary)
    summarize(*module, llvm::errs());
  return 0;
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

int runRun() {
  std::unique_ptr<MLIRContext> context = makeContext();
  std::optional<mz::onnx::ImportOptions> options = importOptions();
  if (!options)
    return 1;
  // Dynamic dimensions not bound by --input-shape take the shapes of the
  // data given; a missing or unreadable file says so, naming it.
  std::string data = dataDir;
  options->shapeFor =
      [data](StringRef name,
             std::string &why) -> std::optional<llvm::SmallVector<int64_t>> {
    auto shape = ::ztc::bridge::npyShape(
        data + "/" + ::ztc::bridge::fileStem(name.str()) + ".npy", why);
    if (!shape)
      return std::nullopt;
    return llvm::SmallVector<int64_t>(shape->begin(), shape->end());
  };
  mz::ArtifactContents artifact;
  if (failed(
          mz::compileForward(*context, modelPath, *options, target, artifact)))
    return 1;

  std::string error, dir = artifactDir;
  bool temporary = dir.empty();
  if (!temporary &&
      !(error = ::ztc::bridge::checkArtifactOutput(dir)).empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  if (temporary &&
      (dir = ::ztc::bridge::makeTemporaryDirectory(error)).empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  error = ::ztc::bridge::writeAndBuildArtifact(dir, artifact);
  ::ztc::bridge::StepTimes times;
  if (error.empty())
    error = ::ztc::bridge::runArtifact(dir, dataDir, outputDir, runSeed, repeat,
                                       times);
  if (temporary)
    ::ztc::bridge::removeDirectory(dir);
  if (!error.empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  if (times.runs)
    llvm::errs() << llvm::formatv(
        "ztc: forward step: median {0:F3} ms, min {1:F3} ms over {2} runs "
        "(arena {3} bytes)\n",
        times.median, times.min, times.runs, artifact.manifest.arenaBytes);
  return 0;
}

/// --lora FILE (or a directory holding adapter_config.json): peft's
/// LoraConfig, replaced by the spec it stands for. An error message, or "".
std::string resolveLoraConfig(mz::TrainingPipelineOptions &training) {
  if (training.lora.empty() || !llvm::sys::fs::exists(training.lora.getValue()))
    return "";
  std::string spec;
  std::string error = ::ztc::bridge::loraSpecFromConfig(training.lora, spec);
  if (error.empty())
    training.lora = spec;
  return error;
}

/// --seq-buckets auto=DATA[,MAX] (the text after "auto="): DATA, and MAX
/// (0 without).
std::pair<StringRef, uint64_t> autoBucketSource(StringRef text) {
  uint64_t longest = 0;
  auto [data, bound] = text.rsplit(',');
  if (!bound.empty() && !bound.getAsInteger(10, longest) && longest > 0)
    return {data, longest};
  return {text, 0};
}

/// --seq-buckets L1,L2,...: ascending positive lengths, and a batch size
/// to bind with them. An error message, or "".
std::string parseSeqBuckets(StringRef text, int64_t batch,
                            std::vector<uint64_t> &lengths) {
  if (text.empty())
    return "";
  if (text.consume_front("auto=")) {
    auto [data, longest] = autoBucketSource(text);
    text = data;
    std::string error =
        ::ztc::bridge::autoSeqBuckets(text.str(), longest, lengths);
    if (!error.empty())
      return error;
    std::string list;
    for (uint64_t length : lengths)
      list += (list.empty() ? "" : ",") + std::to_string(length);
    llvm::errs() << "ztc: --seq-buckets auto: " << list << " from the lengths "
                 << "of the documents in " << text << "\n";
    if (batch <= 0)
      return "--seq-buckets binds the sequence beside the batch: give "
             "--batch-size (or a --config with the batch sizes)";
    return "";
  }
  SmallVector<StringRef> items;
  text.split(items, ',');
  for (StringRef item : items) {
    uint64_t length = 0;
    if (item.trim().getAsInteger(10, length) || length == 0)
      return "--seq-buckets '" + text.str() +
             "': expected ascending positive lengths, e.g. 64,128,256";
    if (!lengths.empty() && length <= lengths.back())
      return "--seq-buckets '" + text.str() + "': " + std::to_string(length) +
             " follows " + std::to_string(lengths.back()) +
             "; give the lengths in ascending order, each once";
    lengths.push_back(length);
  }
  if (batch <= 0)
    return "--seq-buckets binds the sequence beside the batch: give "
           "--batch-size (or a --config with the batch sizes)";
  return "";
}

/// The command line after `ztc compile`, for the compile key.
std::vector<std::string> compileArgs;

/// The compile key of this `ztc compile` (tools/ztc/UpToDate.h); none when
/// the compile writes more than the artifact (--emit-kernel-ir) or an input
/// cannot be read (the compile then reports it).
std::optional<std::string> currentCompileKey(MLIRContext &context) {
  if (!kernelIRPath.empty())
    return std::nullopt;
  std::vector<std::string> inputs;
  if (!configFile.empty())
    inputs.push_back(configFile);
  // --seq-buckets auto=DATA: the documents' lengths choose the buckets.
  if (StringRef text = seqBuckets; text.consume_front("auto="))
    inputs.push_back(
        ::ztc::bridge::documentIndexFile(autoBucketSource(text).first.str()));
  for (const std::string &lora : compileFlags.values("lora"))
    if (llvm::sys::fs::exists(lora))
      inputs.push_back(llvm::sys::fs::is_directory(lora)
                           ? lora + "/adapter_config.json"
                           : lora);
  if (!loraInit.empty()) {
    std::string file = loraInit;
    if (llvm::sys::fs::is_directory(file))
      file += "/adapter_model.safetensors";
    inputs.push_back(file);
  }
  for (const std::string &input : constantInputs)
    inputs.push_back(StringRef(input).split('=').second.str());
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  return mz::compileKey(context, compileArgs, modelPath, inputs);
}

int runCompile() {
  std::optional<ConfigFlags> config = readConfigFlags(compileFlags);
  if (!config)
    return 1;
  std::optional<std::optional<uint64_t>> device = deviceMemoryBytes();
  if (!device)
    return 1;
  // Before any work: the user's own files are never replaced.
  if (std::string refused = ::ztc::bridge::checkArtifactOutput(compileOutput);
      !refused.empty()) {
    llvm::errs() << "ztc: error: " << refused << "\n";
    return 1;
  }
  std::unique_ptr<MLIRContext> context = makeContext();
  std::optional<mz::onnx::ImportOptions> options =
      trainingImportOptions(config->batchSize);
  if (!options)
    return 1;
  auto fail = [](const Twine &message) {
    llvm::errs() << "ztc: error: " << message << "\n";
    return 1;
  };
  mz::TrainingPipelineOptions training;
  std::string error;
  if (failed(compileFlags.apply(training, config->overrides)))
    return 1;
  // The CUDA kernels take NCHW convolutions.
  if (target == mz::codegen::Target::Cuda &&
      compileFlags.values("conv-layout").empty())
    training.convLayout = "nchw";
  if (!(error = resolveLoraConfig(training)).empty())
    return fail(error);
  if (failed(training.verify(error)))
    return fail(error);
  if (!loraInit.empty() && training.lora.empty())
    return fail("--lora-init " + loraInit +
                " gives the adapters' first values; give --lora too");
  std::optional<std::string> key = currentCompileKey(*context);
  if (key)
    if (std::optional<int64_t> arena = mz::upToDateArena(compileOutput, *key)) {
      llvm::errs() << "ztc: " << compileOutput << " is up to date (arena "
                   << *arena
                   << " bytes): this ztc compiled it from the same model, "
                      "flags and files; nothing was redone\n";
      return 0;
    }
  std::vector<uint64_t> lengths;
  if (!(error = parseSeqBuckets(seqBuckets, config->batchSize, lengths))
           .empty())
    return fail(error);
  std::string kernelIR;
  llvm::raw_string_ostream kernelIRStream(kernelIR);
  mz::ArtifactContents artifact;
  // --seq-buckets: the shorter lengths first, the longest is the artifact.
  std::map<uint64_t, mz::ArtifactContents> buckets;
  for (uint64_t length : lengths) {
    options->sequenceLength = int64_t(length);
    bool longest = length == lengths.back();
    mz::ArtifactContents &contents = longest ? artifact : buckets[length];
    if (failed(mz::compileTraining(
            *context, modelPath, *options, training, target, contents,
            longest && !kernelIRPath.empty() ? &kernelIRStream : nullptr)))
      return 1;
    if (*device && contents.plannedBytes > **device)
      return fail("--seq-buckets " + std::to_string(length) + ": " +
                  deviceMemoryShortfall(contents.plannedBytes,
                                        contents.plannedBytes -
                                            contents.manifest.arenaBytes,
                                        **device));
  }
  if (lengths.empty() &&
      failed(mz::compileTraining(
          *context, modelPath, *options, training, target, artifact,
          kernelIRPath.empty() ? nullptr : &kernelIRStream)))
    return 1;
  if (!lengths.empty()) {
    for (const auto &[length, bucket] : buckets)
      if (!(error = ::ztc::bridge::checkBucketBindings(
                bucket.manifest, artifact.manifest, length, lengths.back()))
               .empty())
        return fail(error);
    artifact.manifest.train.seqBuckets = lengths;
  }
  if (!loraInit.empty()) {
    size_t loaded = 0;
    if (!(error = ::ztc::bridge::loadLoraInit(loraInit, artifact, loaded))
             .empty())
      return fail(error);
    llvm::errs() << "ztc: " << loaded << " adapter tensors from " << loraInit
                 << "\n";
  }
  // Before anything is written: a plan that cannot fit is no artifact.
  if (*device && artifact.plannedBytes > **device)
    return fail(deviceMemoryShortfall(
        artifact.plannedBytes,
        artifact.plannedBytes - artifact.manifest.arenaBytes, **device));
  if (!kernelIRPath.empty()) {
    if (!(error = writeOutput(kernelIRPath, kernelIR)).empty())
      return fail(error);
  }
  error = ::ztc::bridge::writeArtifactAtomically(compileOutput, artifact,
                                                 /*build=*/!noBuild, buckets);
  if (!error.empty())
    return fail(error);
  llvm::errs() << "ztc: wrote " << compileOutput << " (arena "
               << artifact.manifest.arenaBytes << " bytes): "
               << weightRoles(artifact.manifest, artifact.frozenParams) << "\n";
  if (!buckets.empty()) {
    std::string list;
    for (const auto &[length, bucket] : buckets)
      list += std::to_string(length) + " (arena " +
              std::to_string(bucket.manifest.arenaBytes) + " bytes), ";
    llvm::errs() << "ztc: --seq-buckets: steps for sequence lengths " << list
                 << lengths.back() << " (arena " << artifact.manifest.arenaBytes
                 << " bytes); they share the parameters, optimizer state "
                    "and the largest arena\n";
  }
  // Without the key the next compile redoes everything: a warning, not a
  // failure.
  if (key)
    if (std::string failure = mz::recordCompileKey(
            compileOutput, *key, artifact.manifest.arenaBytes);
        !failure.empty())
      llvm::errs() << "ztc: warning: cannot record the compile key (the next "
                      "compile redoes everything): "
                   << failure << "\n";
  if (const auto &recompute = artifact.manifest.train.recompute;
      recompute && recompute->policy != "none")
    llvm::errs() << llvm::formatv(
        "ztc: --recompute {0}: saved activations {1} bytes (none: {2}); "
        "recomputation adds {3:F1}% to the step's FLOPs\n",
        recompute->policy, recompute->savedBytes, recompute->baselineSavedBytes,
        recompute->stepFlops
            ? 100.0 * recompute->recomputeFlops / recompute->stepFlops
            : 0.0);
  if (!artifact.recomputeBudget.empty())
    llvm::errs() << "ztc: --recompute "
                 << artifact.manifest.train.recompute->policy << ": "
                 << artifact.recomputeBudget << "\n";
  return 0;
}

/// `ztc export --state-dict`.
int writeStateDict(MLIRContext &context, const std::string &sourceModel) {
  bool hasRoles = false;
  std::map<std::string, std::vector<std::string>> tied;
  if (failed(
          mz::onnx::readTiedParameters(context, sourceModel, hasRoles, tied)))
    return 1;
  if (!hasRoles)
    llvm::errs() << "ztc: warning: " << sourceModel
                 << " has no 'ztc.initializers' metadata: the tensors are "
                    "named as its ONNX initializers, which may not be the "
                    "model's state-dict names (export it with "
                    "python/ztc_export.py)\n";
  size_t tensors = 0;
  std::string error = ::ztc::bridge::writeStateDict(
      artifactPath, checkpointDir, tied, exportStateDict, tensors, exportMerge);
  if (!error.empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  llvm::errs() << "ztc: wrote " << exportStateDict << " (" << tensors
               << " tensors under the model's state-dict names)\n";
  return 0;
}

int runExport() {
  if (exportOutput.empty() && exportStateDict.empty() &&
      exportAdapter.empty()) {
    llvm::errs() << "ztc: error: ztc export needs -o trained.onnx, "
                    "--state-dict weights.safetensors or --adapter DIR\n";
    return 1;
  }
  if (!exportAdapter.empty()) {
    size_t tensors = 0;
    std::string error = ::ztc::bridge::writeLoraAdapter(
        artifactPath, checkpointDir, exportAdapter, tensors);
    if (!error.empty()) {
      llvm::errs() << "ztc: error: " << error << "\n";
      return 1;
    }
    llvm::errs() << "ztc: wrote " << exportAdapter << " (" << tensors
                 << " adapter tensors under peft's names, and "
                    "adapter_config.json)\n";
    if (exportOutput.empty() && exportStateDict.empty())
      return 0;
  }
  std::string sourceModel;
  std::map<std::string, std::vector<uint8_t>> params;
  std::string error = ::ztc::bridge::readCheckpointForExport(
      artifactPath, checkpointDir, sourceModel, params, exportMerge);
  if (!error.empty()) {
    llvm::errs() << "ztc: error: " << error << "\n";
    return 1;
  }
  std::unique_ptr<MLIRContext> context = makeContext();
  if (!exportStateDict.empty() && writeStateDict(*context, sourceModel))
    return 1;
  if (exportOutput.empty())
    return 0;
  mz::onnx::ExportSummary summary;
  if (failed(mz::onnx::writeModelWithInitializers(*context, sourceModel,
                                                  exportOutput, params,
                                                  exportInference, &summary)))
    return 1;
  llvm::errs() << "ztc: wrote " << exportOutput << " (" << params.size()
               << " trained parameters";
  if (exportInference)
    llvm::errs() << "; inference mode: " << summary.batchNorms
                 << " BatchNormalization, " << summary.dropouts << " Dropout";
  llvm::errs() << ")\n";
  return 0;
}

int runGradCheck() {
  mz::GradCheckOptions options;
  for (const std::string &text : gradcheckInputShapes) {
    if (llvm::Error err = mz::onnx::parseInputShape(text, options.import)) {
      llvm::errs() << "ztc: error: " << llvm::toString(std::move(err)) << "\n";
      return 1;
    }
  }
  options.import.batchSize = gradcheckBatchSize;
  options.import.bindHint =
      "--batch-size B (a first dimension) or --input-shape";
  if (failed(gradcheckFlags.apply(options.training)))
    return 1;
  options.seed = gradcheckSeed;
  options.tolerance = gradcheckTolerance;
  std::unique_ptr<MLIRContext> context = makeContext();
  FailureOr<bool> passed =
      mz::gradCheck(*context, gradcheckModel, options, llvm::outs());
  return succeeded(passed) && *passed ? 0 : 1;
}

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

/// `ztc train ...` is `ztc-train ...`: the runtime-only trainer next to this
/// binary runs the training (one implementation; mpirun starts ztc-train
/// itself). Returns only when it cannot be started.
int forwardToTrainer(int argc, char **argv) {
  std::string self = llvm::sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&forwardToTrainer));
  SmallString<256> trainer(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(trainer, "ztc-train");
  std::vector<char *> args;
  // Messages then start with "ztc: error:", as every other command's.
  std::string name = "ztc";
  args.push_back(name.data());
  for (int i = 2; i < argc; ++i)
    args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(trainer.c_str(), args.data());
  llvm::errs() << "ztc: error: cannot start " << trainer << ": "
               << std::strerror(errno) << "\n";
  return 1;
}

} // namespace

/// Prints `reports` as `ztc inspect` was asked to: JSON, one report, or a
/// table of several; writes the SVG of the first.
int printInspection(llvm::ArrayRef<mz::MemoryReport> reports) {
  if (!inspectSvg.empty()) {
    std::string svg;
    llvm::raw_string_ostream os(svg);
    mz::writeMemorySvg(reports.front(), os);
    if (std::string error = writeOutput(inspectSvg, svg); !error.empty()) {
      llvm::errs() << "ztc: error: " << error << "\n";
      return 1;
    }
  }
  if (inspectJson) {
    llvm::json::Array array;
    for (const mz::MemoryReport &report : reports)
      array.push_back(mz::memoryReportToJson(report));
    llvm::outs() << llvm::formatv("{0:2}",
                                  reports.size() == 1
                                      ? std::move(array.front())
                                      : llvm::json::Value(std::move(array)))
                 << "\n";
  } else if (reports.size() == 1) {
    mz::printMemoryReport(reports.front(), llvm::outs());
  } else {
    mz::printMemoryComparison(reports, llvm::outs());
  }
  if (inspectWeights && !inspectJson)
    mz::printWeights(reports.front(), llvm::outs());
  if (inspectComm && !inspectJson)
    for (const mz::MemoryReport &report : reports) {
      if (reports.size() > 1)
        llvm::outs() << "recompute " << report.policy << ", "
                     << report.precision << ": ";
      mz::printCommunication(report, llvm::outs());
    }
  return 0;
}

/// `ztc inspect ART.ztc`: the report `ztc compile` stored.
int inspectArtifact() {
  auto fail = [](const Twine &message) {
    llvm::errs() << "ztc: error: " << message << "\n";
    return 1;
  };
  if (inspectFlags.any() || batchSize != 0 || !inputShapes.empty() ||
      !constantInputs.empty() || !configFile.empty())
    return fail("compile flags apply to a model (ztc inspect MODEL.onnx "
                "...); " +
                inspectPath + " is a compiled artifact");
  std::string path = inspectPath + "/memory.json";
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return fail(path + ": " + file.getError().message() +
                " (an artifact of a forward step, or of an older ztc: "
                "compile it again)");
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*file)->getBuffer());
  if (!json)
    return fail(path + ": " + llvm::toString(json.takeError()));
  std::string error;
  std::optional<mz::MemoryReport> report =
      mz::memoryReportFromJson(*json, error);
  if (!report)
    return fail(path + ": " + error);
  std::vector<::ztc::bridge::BucketPlan> buckets;
  if (!(error = ::ztc::bridge::readBucketPlans(inspectPath, buckets)).empty())
    return fail(error);
  // (--json prints the report alone: the longest step's.)
  if (int status = printInspection({*report});
      status != 0 || buckets.empty() || inspectJson)
    return status;
  // --seq-buckets: the report is the longest step's; each shorter one runs
  // in the same arena with constants of its own.
  uint64_t arena = 0, extra = 0;
  for (const auto &bucket : buckets) {
    arena = std::max(arena, bucket.arenaBytes);
    if (&bucket != &buckets.back())
      extra += bucket.constantBytes;
  }
  llvm::outs() << "sequence buckets: " << buckets.size()
               << " steps share the parameters, optimizer state and one "
                  "arena of "
               << formatBytes(arena) << "\n";
  for (const auto &bucket : buckets)
    llvm::outs() << llvm::formatv(
        "  length {0,-6} arena {1,12}  constants "
        "{2,12}{3}\n",
        bucket.length, formatBytes(bucket.arenaBytes),
        formatBytes(bucket.constantBytes),
        &bucket == &buckets.back() ? "  (the report above)" : "");
  llvm::outs() << "memory per rank with every bucket: "
               << formatBytes(report->total() - report->arena + arena + extra)
               << " (the shorter steps' constants add " << formatBytes(extra)
               << ")\n";
  return 0;
}

/// `ztc inspect MODEL.onnx [flags]`: plans the step (nothing is built) once,
/// or once per policy with `--recompute all`.
int inspectModel() {
  std::optional<ConfigFlags> config = readConfigFlags(inspectFlags);
  if (!config)
    return 1;
  std::optional<std::optional<uint64_t>> device = deviceMemoryBytes();
  if (!device)
    return 1;
  std::unique_ptr<MLIRContext> context = makeContext();
  std::optional<mz::onnx::ImportOptions> options =
      trainingImportOptions(config->batchSize);
  if (!options)
    return 1;
  std::vector<std::string> recompute = inspectFlags.values("recompute");
  std::vector<std::string> precision = inspectFlags.values("precision");
  bool all = !recompute.empty() && recompute.back() == "all";
  bool allPrecisions = !precision.empty() && precision.back() == "all";
  if (all && allPrecisions) {
    llvm::errs() << "ztc: error: --recompute all and --precision all: "
                    "compare one at a time\n";
    return 1;
  }
  // One row per policy or per precision, or the one plan asked for.
  std::vector<std::pair<std::string, std::string>> rows;
  if (all)
    for (const char *policy : {"none", "selective", "full", "sqrt"})
      rows.push_back({"recompute", policy});
  else if (allPrecisions)
    for (const char *name : {"fp32", "bf16", "fp16"})
      rows.push_back({"precision", name});
  else
    rows.push_back({"", ""});
  std::vector<mz::MemoryReport> reports;
  std::vector<std::string> skipped;
  for (const auto &[option, value] : rows) {
    mz::TrainingPipelineOptions training;
    std::map<std::string, std::string> overrides = config->overrides;
    if (!option.empty())
      overrides[option] = value;
    if (failed(inspectFlags.apply(training, overrides)))
      return 1;
    std::string error = resolveLoraConfig(training);
    if (!error.empty()) {
      llvm::errs() << "ztc: error: " << error << "\n";
      return 1;
    }
    if (failed(training.verify(error))) {
      // A precision not built yet gets a line after the table.
      if (allPrecisions) {
        skipped.push_back(value + ": not planned: " + error);
        continue;
      }
      // ztc inspect also takes `all`.
      if (StringRef(error).starts_with("--recompute '") ||
          StringRef(error).starts_with("--precision '"))
        error += " (or all, to compare them)";
      llvm::errs() << "ztc: error: " << error << "\n";
      return 1;
    }
    std::string policy = option == "recompute" ? value : "";
    // With --recompute all, a model with no blocks has no `full` row: its
    // reason follows the table instead of failing the comparison.
    std::vector<std::string> errors;
    std::optional<ScopedDiagnosticHandler> collect;
    if (all && policy == "full")
      collect.emplace(context.get(), [&](Diagnostic &diag) {
        errors.push_back(oneLine(diag.str()));
        return success();
      });
    OwningOpRef<ModuleOp> module =
        mz::planTraining(*context, inspectPath, *options, training);
    collect.reset();
    if (!module && !errors.empty()) {
      skipped.push_back(policy + ": not planned: " + errors.front());
      continue;
    }
    if (!module)
      return 1;
    FailureOr<mz::MemoryReport> report = mz::buildMemoryReport(*module);
    if (failed(report))
      return 1;
    reports.push_back(std::move(*report));
  }
  int status = printInspection(reports);
  for (const std::string &line : skipped)
    llvm::outs() << line << "\n";
  // One line per plan: whether it fits in --device-memory; under --json
  // the report stays one JSON document, and the verdict goes to stderr.
  llvm::raw_ostream &verdicts = inspectJson ? llvm::errs() : llvm::outs();
  if (std::optional<uint64_t> bytes = *device)
    for (const mz::MemoryReport &report : reports) {
      std::string row = all             ? "recompute " + report.policy
                        : allPrecisions ? "precision " + report.precision
                                        : std::string("device memory");
      std::string verdict =
          report.total() <= *bytes
              ? llvm::formatv("{0} bytes per rank fit in --device-memory {1} "
                              "bytes ({2} to spare)",
                              report.total(), *bytes,
                              mz::bytesText(*bytes - report.total()))
                    .str()
              : deviceMemoryShortfall(report.total(),
                                      report.total() - report.arena, *bytes);
      verdicts << row << ": " << verdict << "\n";
    }
  return status;
}

int runPlot() {
  auto fail = [](const Twine &message) {
    llvm::errs() << "ztc: error: " << message << "\n";
    return 1;
  };
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(plotInput);
  if (!file)
    return fail(plotInput + ": " + file.getError().message());
  std::string svg;
  llvm::raw_string_ostream os(svg);
  if (std::string error = mz::plotMetrics(plotInput, (*file)->getBuffer(), os);
      !error.empty())
    return fail(error);
  if (std::string error = writeOutput(plotOutput, svg); !error.empty())
    return fail(error);
  llvm::errs() << "ztc: wrote " << plotOutput << "\n";
  return 0;
}

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

int runInspect() {
  if (llvm::sys::fs::is_directory(inspectPath) &&
      llvm::sys::fs::exists(inspectPath + "/manifest.json"))
    return inspectArtifact();
  return inspectModel();
}

int main(int argc, char **argv) {
  if (argc >= 2 && StringRef(argv[1]) == "train")
    return forwardToTrainer(argc, argv);
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
  if (importCommand)
    return runImport();
  if (listOpsCommand)
    return runListOps();
  if (runCommand)
    return runRun();
  if (emitCommand)
    return runEmit();
  if (compileCommand)
    return runCompile();
  if (exportCommand)
    return runExport();
  if (gradcheckCommand)
    return runGradCheck();
  if (inspectCommand)
    return runInspect();
  if (plotCommand)
    return runPlot();
  if (consolidateCommand)
    return runConsolidate();
  llvm::errs() << "ztc: error: no command given; see `ztc --help`\n";
  return 1;
}
