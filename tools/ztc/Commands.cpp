//===- Commands.cpp - what the ztc subcommands share ----------------------===//
//
// The flags several subcommands take, the flags for training pipeline options
// (PipelineFlags), and the helpers the commands share: one-line diagnostics,
// writing output, the import options, --config and --device-memory.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "passes/Kernel/Footprint.h"
#include "passes/Passes.h"
#include "tools/ztc/RuntimeBridge.h"

#include "runtime/train/DeepSpeedConfig.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;
namespace cl = llvm::cl;
namespace mz = mlir::ztc;

namespace ztc::driver {

cl::opt<std::string> modelPath(cl::Positional, cl::desc("MODEL.onnx"),
                               cl::Required, cl::sub(importCommand()),
                               cl::sub(runCommand()), cl::sub(emitCommand()),
                               cl::sub(compileCommand()));
cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("Bind a graph input's shape: NAME=D0xD1x... "
                         "(repeatable); binds its symbolic dimensions"),
                cl::sub(importCommand()), cl::sub(runCommand()),
                cl::sub(emitCommand()), cl::sub(compileCommand()),
                cl::sub(inspectCommand()));
cl::opt<mz::codegen::Target> target(
    "target", cl::desc("Where the step runs"),
    cl::init(mz::codegen::Target::Cpu),
    cl::values(
        clEnumValN(mz::codegen::Target::Cpu, "cpu",
                   ::ztc::rt::targetInfo(mz::codegen::Target::Cpu).description),
        clEnumValN(
            mz::codegen::Target::Cuda, "cuda",
            ::ztc::rt::targetInfo(mz::codegen::Target::Cuda).description)),
    cl::sub(runCommand()), cl::sub(emitCommand()), cl::sub(compileCommand()),
    cl::sub(inspectCommand()));
cl::list<std::string> constantInputs(
    "constant-input",
    cl::desc("Specialize a graph input to the value in a serialized ONNX "
             "TensorProto: NAME=FILE.pb (repeatable)"),
    cl::sub(importCommand()), cl::sub(runCommand()), cl::sub(emitCommand()),
    cl::sub(compileCommand()), cl::sub(inspectCommand()));
cl::opt<int64_t>
    batchSize("batch-size",
              cl::desc("Bind the batch (first) dimension of every input"),
              cl::init(0), cl::sub(compileCommand()), cl::sub(inspectCommand()),
              cl::sub(importCommand()), cl::sub(emitCommand()));

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
    cl::value_desc("FILE"), cl::sub(compileCommand()),
    cl::sub(inspectCommand()));
cl::opt<bool> strictConfig(
    "strict",
    cl::desc("With --config: every key ztc does not implement is an error"),
    cl::sub(compileCommand()), cl::sub(inspectCommand()));

namespace {

cl::opt<std::string> deviceMemory(
    "device-memory",
    cl::desc("The memory of one rank's device (8GiB, 80GB, 85899345920): "
             "`ztc compile` refuses a step whose planned bytes per rank "
             "exceed it, `ztc inspect` says whether each plan fits"),
    cl::value_desc("BYTES"), cl::sub(compileCommand()),
    cl::sub(inspectCommand()));

/// Prints diagnostics as `FILE: error: MESSAGE`, one line each: users read
/// them, so MLIR's location syntax stays out of the way.
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

} // namespace

//===----------------------------------------------------------------------===//
// PipelineFlags
//===----------------------------------------------------------------------===//

PipelineFlags::PipelineFlags(cl::SubCommand &command,
                             llvm::ArrayRef<const char *> names,
                             const std::map<std::string, std::string> &more)
    : extras(more) {
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

LogicalResult
PipelineFlags::apply(mz::TrainingPipelineOptions &options,
                     const std::map<std::string, std::string> &overrides) {
  for (const auto &flag : flags) {
    StringRef name = flag->ArgStr;
    cl::Option *option = options.findOption(name);
    auto set = options.closedSets.find(name);
    auto add = [&](const std::string &value) {
      if (set != options.closedSets.end() &&
          !llvm::is_contained(set->second, value)) {
        auto extra = extras.find(name.str());
        llvm::errs() << "ztc: error: --" << name << " '" << value
                     << "': expected " << mz::listOfChoices(set->second)
                     << (extra == extras.end() ? ""
                                               : " (" + extra->second + ")")
                     << "\n";
        return failure();
      }
      return failure(option->addOccurrence(0, name, value));
    };
    auto override = overrides.find(name.str());
    if (override != overrides.end()) {
      if (failed(add(override->second)))
        return failure();
      continue;
    }
    for (const std::string &value : *flag)
      if (failed(add(value)))
        return failure();
  }
  return success();
}

std::vector<std::string> PipelineFlags::values(llvm::StringRef name) const {
  for (const auto &flag : flags)
    if (flag->ArgStr == name)
      return {flag->begin(), flag->end()};
  return {};
}

bool PipelineFlags::any() const {
  return llvm::any_of(
      flags, [](const auto &flag) { return flag->getNumOccurrences() > 0; });
}

std::map<std::string, std::string>
PipelineFlags::printedValues(const mz::TrainingPipelineOptions &options) {
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

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

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
  if (!runCommand()) {
    options.batchSize = batchSize;
    options.bindHint = "--batch-size B (a first dimension) or --input-shape";
  }
  return options;
}

std::optional<mz::onnx::ImportOptions> trainingImportOptions(int64_t batch) {
  std::optional<mz::onnx::ImportOptions> options = importOptions();
  if (options) {
    options->batchSize = batch;
    options->bindHint = "--batch-size B (a first dimension) or --input-shape";
  }
  return options;
}

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

std::string resolveLoraConfig(mz::TrainingPipelineOptions &training) {
  if (training.lora.empty() || !llvm::sys::fs::exists(training.lora.getValue()))
    return "";
  std::string spec;
  std::string error = ::ztc::bridge::loraSpecFromConfig(training.lora, spec);
  if (error.empty())
    training.lora = spec;
  return error;
}

} // namespace ztc::driver
