//===- CmdCompile.cpp - `ztc compile` -------------------------------------===//
//
// `ztc compile MODEL.onnx -o ART.ztc`: the training step compiled into an
// artifact, with the flags of the training pipeline, a DeepSpeed --config,
// --seq-buckets, a LoRA start (--lora-init) and --device-memory; an artifact
// compiled from the same inputs by this ztc is kept (the compile key).
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/Commands.h"

#include "passes/Kernel/Footprint.h"
#include "tools/ztc/Compile.h"
#include "tools/ztc/RuntimeBridge.h"
#include "tools/ztc/UpToDate.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>

using namespace mlir;
namespace cl = llvm::cl;
namespace mz = mlir::ztc;

namespace ztc::driver {

cl::SubCommand &compileCommand() {
  static cl::SubCommand command(
      "compile", "Compile the training step of an ONNX model into an artifact");
  return command;
}

namespace {

cl::opt<std::string> compileOutput("o",
                                   cl::desc("Write the artifact (a "
                                            "directory) to ART.ztc"),
                                   cl::value_desc("ART.ztc"), cl::Required,
                                   cl::sub(compileCommand()));
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
    cl::value_desc("L1,L2,... | auto=DATA[,MAX]"), cl::sub(compileCommand()));
cl::opt<bool> noBuild(
    "no-build",
    cl::desc("Write the step's source and build command but do not compile "
             "it: the runtime that loads the artifact builds it with its "
             "own compiler (a GPU node)"),
    cl::sub(compileCommand()));
cl::opt<std::string>
    kernelIRPath("emit-kernel-ir",
                 cl::desc("Also write the planned kernel IR (what `ztc-opt "
                          "--ztc-training-pipeline` prints) to FILE"),
                 cl::value_desc("FILE"), cl::sub(compileCommand()));
cl::opt<std::string> loraInit(
    "lora-init",
    cl::desc("With --lora: start the adapters from a Hugging Face peft "
             "adapter (a directory save_pretrained wrote, or its "
             "adapter_model.safetensors) instead of peft's initialization "
             "drawn by ztc"),
    cl::value_desc("DIR"), cl::sub(compileCommand()));

PipelineFlags compileFlags(
    compileCommand(), kCompilePipelineFlags,
    {{"lora", "or FILE: peft's adapter_config.json (or the directory "
              "save_pretrained wrote), read as peft reads it"}});

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

/// The compile key of this `ztc compile` (tools/ztc/UpToDate.h); none when
/// the compile writes more than the artifact (--emit-kernel-ir) or an input
/// cannot be read (the compile then reports it).
std::optional<std::string>
currentCompileKey(MLIRContext &context,
                  const std::vector<std::string> &compileArgs) {
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

} // namespace

int runCompile(const std::vector<std::string> &args) {
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
  training.target = target;
  if (!(error = resolveLoraConfig(training)).empty())
    return fail(error);
  if (failed(training.verify(error)))
    return fail(error);
  if (!loraInit.empty() && training.lora.empty())
    return fail("--lora-init " + loraInit +
                " gives the adapters' first values; give --lora too");
  std::optional<std::string> key = currentCompileKey(*context, args);
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

} // namespace ztc::driver
