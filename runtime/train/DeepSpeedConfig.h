//===- DeepSpeedConfig.h - a DeepSpeed config, read for ztc -----*- C++ -*-===//
//
// `ztc compile --config ds_config.json` and `ztc-train --config` take the
// config people already train with under DeepSpeed (and Hugging Face's
// Trainer and Accelerate), in DeepSpeed's schema. Reading one gives:
//
//  - the ztc compile flags it sets (`settings`), each with the key it comes
//    from, and whether the file gives the value, says "auto" (ztc's flags
//    decide, as the Trainer fills "auto" from its arguments), or leaves it to
//    DeepSpeed's default for a section it turns on;
//  - the batch identity's three terms, resolved with the flags and the world
//    size by resolveBatchSizes;
//  - what the trainer takes (steps_per_print, the 16-bit weights on save);
//  - a notice for every key ztc does not implement, naming it and saying
//    what to use instead: an error for what would change the mathematics
//    (another optimizer, offloading, quantized communication), a warning for
//    tuning knobs (bucket and prefetch sizes ztc does not use), every notice
//    an error under --strict.
//
// Plain C++ (the runtime's nlohmann JSON): ztc-train, which links no
// compiler, reads the same file the same way.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_TRAIN_DEEPSPEEDCONFIG_H
#define ZTC_RUNTIME_TRAIN_DEEPSPEEDCONFIG_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ztc::rt {

/// Where a setting's value comes from.
enum class ConfigSource {
  /// The file gives the value; a flag that says otherwise is an error.
  Explicit,
  /// The file says "auto": the flag decides (value is empty).
  Auto,
  /// DeepSpeed's default for a key the file leaves out of a section it
  /// gives; a flag given on the command line wins.
  Default,
};

/// One `ztc compile` flag a config sets.
struct ConfigSetting {
  /// The flag, without "--": "lr".
  std::string flag;
  /// The value as the flag takes it; empty when Auto.
  std::string value;
  /// The key it comes from: "optimizer.params.lr".
  std::string key;
  /// The value as the file writes it, for messages.
  std::string shown;
  ConfigSource source = ConfigSource::Explicit;
  /// "fp16": applies only when the step computes in fp16 (the loss-scale
  /// keys, when fp16.enabled is "auto"); "grad-accum": only with more than
  /// one micro-batch; empty: always.
  std::string appliesWith;
};

/// A key ztc reads but does not implement, or accepts with a word.
struct ConfigNotice {
  /// An error (changes what is computed) or a warning (a tuning knob).
  bool error = false;
  std::string key;
  std::string message;
  /// A note: accepted, and what is computed is the same (offloading on the
  /// CPU backend); never an error, --strict included.
  bool note = false;
};

/// An offload section DeepSpeed would act on.
struct ConfigOffload {
  /// "zero_optimization.offload_optimizer" (also for the legacy
  /// cpu_offload), "zero_optimization.offload_param".
  std::string key;
  /// "cpu" or "nvme".
  std::string device;
};

/// One term of DeepSpeed's batch identity as the file gives it.
struct BatchTerm {
  bool given = false;
  bool isAuto = false;
  uint64_t value = 0;
};

struct DeepSpeedConfig {
  std::string path;
  std::vector<ConfigSetting> settings;
  BatchTerm trainBatchSize, microBatchSize, gradAccumSteps;
  /// steps_per_print: ztc-train's --log-every.
  std::optional<uint64_t> stepsPerPrint;
  /// zero_optimization.stage3_gather_16bit_weights_on_model_save.
  bool gather16BitWeightsOnSave = false;
  std::vector<ConfigNotice> notices;
  /// The offload sections that ask to move state (device cpu or nvme).
  std::vector<ConfigOffload> offloads;

  /// The setting of `flag`, or null.
  const ConfigSetting *find(const std::string &flag) const;
};

/// Reads `text`, the config at `path`. Throws Error naming the file and the
/// key for what cannot be read: malformed JSON, a key given twice (as
/// DeepSpeed refuses), a value of the wrong type or out of range, a
/// combination DeepSpeed refuses (fp16 and bf16 both on).
DeepSpeedConfig parseDeepSpeedConfig(const std::string &path,
                                     const std::string &text);
/// parseDeepSpeedConfig of the file at `path`.
DeepSpeedConfig readDeepSpeedConfig(const std::string &path);
/// readDeepSpeedConfig for callers built without exceptions: the message,
/// or "" and `config` filled.
std::string readDeepSpeedConfigNoThrow(const std::string &path,
                                       DeepSpeedConfig &config);

/// Adds the notices of the config's offload sections for a step that runs
/// on the CPU (`deviceMemory` false: a note, the state is in host memory
/// already) or on a device with memory of its own (CUDA: a warning, the
/// state stays on the device and the plan is checked against its memory).
/// NVMe offload is an error either way (the reader adds that).
void addOffloadNotices(DeepSpeedConfig &config, bool deviceMemory);

/// The config's notices as one-line messages ("FILE: KEY: ..."): errors go
/// to the returned message (every warning too under `strict`), warnings to
/// `warnings`, notes to `notes` (dropped when null). Returns "" when
/// nothing stops the run.
std::string checkNotices(const DeepSpeedConfig &config, bool strict,
                         std::vector<std::string> &warnings,
                         std::vector<std::string> *notes = nullptr);

/// A run's batch sizes: per rank, micro-batches per step, and in all.
struct BatchSizes {
  uint64_t micro = 0;
  uint64_t accum = 1;
  uint64_t global = 0;
};

/// DeepSpeed's batch identity, train_batch_size = micro-batch x
/// accumulation x world size, with the terms the config leaves out or sets
/// "auto" taken from the flags (`microFlag`, `accumFlag`; 0: not given) or
/// derived as DeepSpeed derives them. Returns the message naming every
/// value involved when they do not agree or do not divide; "" and `sizes`
/// filled otherwise.
std::string resolveBatchSizes(const DeepSpeedConfig &config, uint64_t microFlag,
                              uint64_t accumFlag, uint64_t worldSize,
                              BatchSizes &sizes);

/// Whether two values of one flag are the same: numbers compare as numbers
/// ("3e-4" is "0.0003"), comma-separated lists element by element,
/// anything else as text (surrounding spaces ignored).
bool sameFlagValue(const std::string &a, const std::string &b);

/// Checks an artifact against the config it runs with: what it was
/// compiled with (`compiled`: flag and value, for "batch-size",
/// "grad-accum", "precision", "zero", "optimizer", "lr", "lr-schedule",
/// and the manifest's recorded flags: weight decay, betas, eps, clipping,
/// the loss-scale flags, ...) must be what `config` gives explicitly
/// (numbers compared as numbers), and the batch identity must hold on
/// `worldSize` ranks. Returns the message naming the key, the artifact and
/// the flag; "" when they agree.
std::string checkCompiledAgainst(
    const DeepSpeedConfig &config,
    const std::vector<std::pair<std::string, std::string>> &compiled,
    uint64_t worldSize, const std::string &artifact);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_TRAIN_DEEPSPEEDCONFIG_H
