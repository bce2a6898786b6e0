//===- Artifact.h - a compiled model on disk --------------------*- C++ -*-===//
//
// An artifact directory (model.ztc/) holds manifest.json (what the compiled
// step expects: bindings in entry order, outputs as arena offsets, the arena
// size), step.so (the compiled step) and init.safetensors (parameter and
// constant values, by name). This file parses the manifest, loads the shared
// object and resolves its entries, and reads the initial values. Errors throw
// ztc::rt::Error naming the file.
//
// A forward artifact (`"kind"` absent or "forward") has one entry. A
// training artifact (`"kind": "train"`) adds:
//   - bindings of role "state" (optimizer state, zero-initialized unless
//     init.safetensors has a value) and "hyper" (scalars the host writes
//     before every call: "lr", "step", and "rng", the int64 key of the
//     step's random numbers);
//   - "grad_entry" (optional): loss and gradients without an update, its
//     results listed in "grad_outputs" (one float32 output per param, the
//     param's shape, named after it);
//   - "accum_entry" (optional): the step for all but the last micro-batch
//     of an accumulated optimizer step;
//   - "train": the training configuration (TrainConfig below);
//   - an output "loss" (float32[]), which every entry writes.
// All entries share the bindings array and the arena (arena_bytes is the
// maximum over them).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_ARTIFACT_H
#define ZTC_RUNTIME_ARTIFACT_H

#include "runtime/Backend.h"
#include "runtime/Compile.h"
#include "runtime/Schedule.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ztc::rt {

/// The manifest format this runtime reads.
constexpr int kManifestFormat = 1;

/// What a binding of the entry's `bindings` array holds.
enum class BindingRole {
  /// Read from a data file (`ztc run`) or a batch (`ztc train`).
  Input,
  /// A trainable parameter: initial value from init.safetensors; a training
  /// step updates it in place.
  Param,
  /// Read-only, from init.safetensors.
  Constant,
  /// Persistent optimizer state, updated in place by a training step.
  State,
  /// A scalar hyper-parameter written by the host before every call.
  Hyper,
};

/// The manifest name: "input", "param", "constant", "state", "hyper".
const char *roleName(BindingRole role);

/// What the artifact computes (the manifest's "kind").
enum class ArtifactKind { Forward, Train };

/// One pointer of the entry's `bindings` array.
struct Binding {
  BindingRole role = BindingRole::Input;
  /// The ONNX name (params and constants: the key in init.safetensors).
  std::string name;
  /// Inputs only: the data file stem, `<dataDir>/<file>.npy`.
  std::string file;
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;

  size_t byteSize() const;
  std::string describe() const { return describeType(dtype, shape); }
};

/// A result, read from the arena after the call.
struct Output {
  std::string name;
  /// The output file stem, `<outputDir>/<file>.npy`.
  std::string file;
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  /// Byte offset into the arena.
  uint64_t offset = 0;

  size_t byteSize() const;
  std::string describe() const { return describeType(dtype, shape); }
};

/// The "train" object of a training manifest.
struct TrainConfig {
  /// Informational (the compiled step implements it): "sgd", "adamw", ...
  std::string optimizer;
  /// Informational: "cross_entropy", "mse", ...
  std::string loss;
  /// "lr", "lr_schedule", "min_lr", "warmup_steps", "total_steps" (0: the
  /// length of the run), "warmup_type", "warmup_min_ratio".
  ScheduleConfig schedule;
  /// Samples per micro-batch; 0 when absent (the inputs' shape[0] rules).
  uint64_t batchSize = 0;
  /// Micro-batches per optimizer step.
  uint64_t gradAccum = 1;
};

/// manifest.json.
struct Manifest {
  int format = kManifestFormat;
  Target target = Target::Cpu;
  std::string entry = "ztc_forward";
  std::string source = "step.cpp";
  uint64_t arenaBytes = 0;
  std::vector<Binding> bindings;
  std::vector<Output> outputs;

  // Training artifacts only (see the file comment).
  ArtifactKind kind = ArtifactKind::Forward;
  std::string gradEntry;
  std::string accumEntry;
  std::vector<Output> gradOutputs;
  /// accum_entry's own outputs ("loss"), when its arena places them
  /// elsewhere than `entry` does.
  std::vector<Output> accumOutputs;
  TrainConfig train;

  /// The index of the output named `name` in `outputs`, or -1.
  int outputIndex(const std::string &name) const;
};

/// Parses manifest JSON text; `path` names it in errors. Checks field types,
/// dtypes, shapes, unique file stems, and that outputs lie in the arena;
/// for a training manifest also the "train" object, a float32[] "loss"
/// output, one batch size across inputs, scalar hypers, and that each grad
/// output matches a param.
Manifest parseManifest(const std::string &text, const std::string &path);

/// Serializes `manifest` (the compiler's side; also used by tests).
std::string printManifest(const Manifest &manifest);

/// The batch size of a training manifest: shape[0] of its input bindings.
/// Throws Error when there is no input, an input has no batch dimension, or
/// two inputs disagree.
uint64_t inputBatchSize(const Manifest &manifest);

/// The file stem for an ONNX name: every character outside [A-Za-z0-9._-]
/// becomes '_'.
std::string fileStemFor(const std::string &name);

/// A loaded artifact: manifest parsed, step.so opened, entry resolved.
class Artifact {
public:
  /// Loads `directory`/manifest.json and `directory`/step.so, resolving
  /// entry, grad_entry and accum_entry.
  static Artifact load(const std::string &directory);

  Artifact(Artifact &&other) noexcept;
  Artifact &operator=(Artifact &&other) noexcept;
  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;
  ~Artifact();

  const std::string &directory() const { return directory_; }
  const Manifest &manifest() const { return manifest_; }
  EntryFn entry() const { return entry_; }
  /// The grad_entry / accum_entry, null when the manifest names none.
  EntryFn gradEntry() const { return gradEntry_; }
  EntryFn accumEntry() const { return accumEntry_; }
  std::string initPath() const { return directory_ + "/init.safetensors"; }

  /// Reads init.safetensors and returns the value of every param and
  /// constant binding, and of each state binding it has a value for,
  /// checked against the manifest's dtype and shape.
  std::map<std::string, Tensor> loadInitialValues() const;

private:
  Artifact() = default;

  std::string directory_;
  Manifest manifest_;
  void *handle_ = nullptr;
  EntryFn entry_ = nullptr;
  EntryFn gradEntry_ = nullptr;
  EntryFn accumEntry_ = nullptr;
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_ARTIFACT_H
