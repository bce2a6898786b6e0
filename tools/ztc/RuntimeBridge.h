//===- RuntimeBridge.h - the driver's door into the runtime -----*- C++ -*-===//
//
// The runtime reports errors with exceptions; the MLIR side of the driver is
// built without them. These functions (compiled with exceptions) run runtime
// work and turn any error into a message: empty means success.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TOOLS_ZTC_RUNTIMEBRIDGE_H
#define ZTC_TOOLS_ZTC_RUNTIMEBRIDGE_H

#include "tools/ztc/Compile.h"

#include "runtime/train/Schedule.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ztc::bridge {

/// The directory compiled steps are cached in: $ZTC_CACHE_DIR, else
/// $XDG_CACHE_HOME/ztc, else $HOME/.cache/ztc.
std::string cacheDirectory();

/// Writes manifest.json, the step source, its build command (step.build)
/// and init.safetensors into `dir` (created if needed); with `build`, also
/// compiles the source (cached by content) into `dir`/step.so. Without it,
/// the runtime that loads the artifact builds the step with its own
/// compiler (a GPU node with nvcc but no MLIR).
std::string writeAndBuildArtifact(const std::string &dir,
                                  const mlir::ztc::ArtifactContents &artifact,
                                  bool build = true);

/// Timings of repeated steps, in milliseconds.
struct StepTimes {
  double median = 0, min = 0;
  unsigned runs = 0;
};

/// "" when an artifact may be written at `dir`: nothing is there, an empty
/// directory, or a ztc artifact (a directory with a manifest.json) that
/// the new one replaces. Anything else (a file, a link, a directory of
/// other things) is the user's, and the message says so.
std::string checkArtifactOutput(const std::string &dir);

/// Writes and builds the artifact at `dir` through a temporary sibling
/// directory renamed into place, so a failure leaves no half-written
/// artifact (and an existing one stays intact until the new one is ready).
/// Refuses, writing nothing, what checkArtifactOutput refuses. `buckets`
/// (--seq-buckets) are the steps of the shorter sequence lengths, each
/// written with its constants only into rt::bucketDirectory(dir, length):
/// their params and states are the main artifact's.
std::string writeArtifactAtomically(
    const std::string &dir, const mlir::ztc::ArtifactContents &artifact,
    bool build = true,
    const std::map<uint64_t, mlir::ztc::ArtifactContents> &buckets = {});

/// "" when the step compiled for sequence length `length` can run on the
/// bindings of the main (longest, `longest`) one, `main`: the same params,
/// states, buffers and hypers (name, dtype and shape), inputs and labels of
/// the same name and dtype that fit in the main's, the same entries. Else
/// an error naming the binding.
std::string checkBucketBindings(const rt::Manifest &bucket,
                                const rt::Manifest &main, uint64_t length,
                                uint64_t longest);

/// `--seq-buckets auto=DATA[,MAX]`: up to four lengths from the histogram
/// of the document lengths of the token dataset at `data` (TokenDataset.h),
/// each at most `longest` (0: no bound; the model's longest sequence): the
/// 50th, 75th, 90th and 100th percentiles, each rounded up to a multiple of
/// 8 (at least 8) but not past `longest`, each once, ascending. An error
/// message, or "".
std::string autoSeqBuckets(const std::string &data, uint64_t longest,
                           std::vector<uint64_t> &lengths);

/// The file that holds the token dataset's document boundaries
/// (rt::documentIndexFile), for the compile key of --seq-buckets auto.
std::string documentIndexFile(const std::string &data);

/// One step of an artifact compiled with --seq-buckets, for `ztc inspect`.
struct BucketPlan {
  uint64_t length = 0;
  uint64_t arenaBytes = 0;
  /// Its constants (masks, positions): buffers of its own at run time.
  uint64_t constantBytes = 0;
};

/// The steps of the artifact at `dir`, shortest first (empty without
/// --seq-buckets); an error message, or "".
std::string readBucketPlans(const std::string &dir,
                            std::vector<BucketPlan> &plans);

/// `ztc compile --lora FILE`: the ztc-lora spec (r=...,alpha=...,...) of a
/// peft LoraConfig saved as JSON (adapter_config.json, or a directory
/// holding it). List target_modules become a name alternation (each name
/// matches a module's last components, as in peft); a string is a regular
/// expression over the whole name. Options ztc does not implement (DoRA,
/// rank and alpha patterns, layers_to_transform, other initializations,
/// ...) are refused, naming the key.
std::string loraSpecFromConfig(const std::string &path, std::string &spec);

/// `ztc compile --lora-init PATH`: the adapters' initial values from a
/// Hugging Face peft adapter (a directory holding adapter_model.safetensors,
/// or that file), replacing ztc's own in `artifact`. Each of the file's
/// lora_A / lora_B tensors (peft's `base_model.model.` prefix and adapter
/// name dropped) must name exactly one adapter of the artifact, whose name
/// ends with it, with its shape; every adapter must get a value. `loaded`
/// is how many tensors were taken.
std::string loadLoraInit(const std::string &path,
                         mlir::ztc::ArtifactContents &artifact, size_t &loaded);

/// `ztc export`: the model an artifact was compiled from, and the parameter
/// values of a checkpoint, checked against the artifact's manifest. A LoRA
/// step's adapters are an error, unless `merge` folds them into their base
/// weights (W + scale * B A) and drops them.
std::string readCheckpointForExport(
    const std::string &artifactDir, const std::string &checkpointDir,
    std::string &sourceModel,
    std::map<std::string, std::vector<uint8_t>> &params, bool merge = false);

/// `ztc export --adapter DIR`: a LoRA step's trained adapters (and the
/// biases and modules that train with them) as Hugging Face peft saves
/// them, DIR/adapter_model.safetensors under peft's names
/// (base_model.model.<module>.lora_A.weight, ...) and DIR/adapter_config.json,
/// for PeftModel.from_pretrained. DIR is created, or must hold only such
/// files. `tensors` is how many were written.
std::string writeLoraAdapter(const std::string &artifactDir,
                             const std::string &checkpointDir,
                             const std::string &dir, size_t &tensors);

/// `ztc export --state-dict`: the weights of a checkpoint as a safetensors
/// file at `path`, each under its initializer name and, for a tied
/// parameter, under every name in `tied` too; `tensors` is how many. LoRA
/// adapters as readCheckpointForExport treats them.
std::string
writeStateDict(const std::string &artifactDir, const std::string &checkpointDir,
               const std::map<std::string, std::vector<std::string>> &tied,
               const std::string &path, size_t &tensors, bool merge = false);

/// Runs the forward step of the artifact in `dir` on `dataDir`/*.npy, with
/// the random key of `seed` (dropout masks), and writes `outputDir`/*.npy;
/// then, when `repeat` > 0, runs it `repeat` more times on the same inputs
/// and fills `times`.
std::string runArtifact(const std::string &dir, const std::string &dataDir,
                        const std::string &outputDir, uint64_t seed,
                        unsigned repeat, StepTimes &times);

/// The shape stored in the .npy file at `path`, or nothing and `error` (the
/// file is missing, truncated or not a .npy file).
std::optional<std::vector<int64_t>> npyShape(const std::string &path,
                                             std::string &error);

/// The data-file stem of an ONNX name (characters outside [A-Za-z0-9._-]
/// become '_').
std::string fileStem(const std::string &name);

/// A fresh, empty directory under the cache; empty on failure.
std::string makeTemporaryDirectory(std::string &error);

/// Removes `dir` and everything in it (best effort).
void removeDirectory(const std::string &dir);

/// `ztc gradcheck`: an artifact loaded once and run many times while the
/// caller changes its bindings. Each method returns an error message, empty
/// on success.
class StepSession {
public:
  StepSession();
  ~StepSession();

  /// Loads the artifact in `dir` and binds it to its target's backend
  /// (parameters and constants from init.safetensors).
  std::string open(const std::string &dir);
  /// The loaded manifest; `open` must have succeeded.
  const ::ztc::rt::Manifest &manifest() const;
  /// Uploads `value` into binding `index` of the manifest (any role).
  std::string setBinding(size_t index, const ::ztc::rt::Tensor &value);
  /// Writes the random key of `seed` (the one `ztc run --seed` writes) into
  /// the artifact's random-key hyper, when it has one.
  std::string setRandomKey(uint64_t seed);
  /// Runs the manifest's entry, or its grad_entry when `gradEntry`.
  std::string run(bool gradEntry);
  /// Copies the result `spec` describes out of the arena into `value`.
  std::string read(const ::ztc::rt::Output &spec,
                   ::ztc::rt::Tensor &value) const;

private:
  struct State;
  std::unique_ptr<State> state_;
};

} // namespace ztc::bridge

#endif // ZTC_TOOLS_ZTC_RUNTIMEBRIDGE_H
