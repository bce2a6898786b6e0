//===- Manifest.h - what a compiled step expects ----------------*- C++ -*-===//
//
// The schema of an artifact's manifest.json, in one place: the compiler
// fills these structs and prints them with printManifest, the runtime reads
// them with parseManifest, so the two cannot disagree. A manifest holds
//   - "format" (kManifestFormat) and "abi" (the step ABI version,
//     runtime/kernels/StepAbi.h);
//   - "target" ("cpu" or "cuda"), "source" (the step's file), "arena_bytes",
//     "streams" and "events" (how many the entries use);
//   - "dist" when the step spans ranks: world size, ZeRO stage, and the
//     collectives of every entry in order (Distribution);
//   - "bindings": the pointers every entry receives, in order, each with a
//     role (input, param, constant, state, hyper), ONNX name, dtype, shape;
//   - "entries": a list of {name, purpose, outputs, arena_bytes}; the first
//     is the main entry (forward, train_step or loss); outputs are arena
//     offsets; arena_bytes is how far into the arena the entry's buffers
//     reach (the top-level arena_bytes is the largest);
//   - training artifacts (`"kind": "train"`): a "train" object
//     (TrainConfig), a train_step whose outputs include "loss"
//     (float32[]), optionally accumulate and loss_and_grads entries; hypers
//     are "lr", "step" and "rng" (the int64 key of the step's random
//     numbers); states are zero-initialized unless init.safetensors has a
//     value.
// Parsing is strict about what the runtime uses (a wrong field is a
// compiler bug better caught here than as a crash in generated code).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_MANIFEST_H
#define ZTC_RUNTIME_MANIFEST_H

#include "runtime/Tensor.h"
#include "runtime/backend/Compile.h"
#include "runtime/kernels/StepAbi.h"
#include "runtime/train/Schedule.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ztc::rt {

/// The manifest format this runtime reads (2: entries as a list, the step
/// ABI version).
constexpr int kManifestFormat = 2;

/// What a binding of the entry's `bindings` array holds.
/// The roles of the IR's train.binding (dialects/Train), plus constants.
enum class BindingRole {
  /// Read from a data file (`ztc run`) or a batch (`ztc train`).
  Input,
  /// Like an input, read only by the loss (the labels ztc-attach-loss adds).
  Label,
  /// A trainable parameter: initial value from init.safetensors; a training
  /// step updates it in place.
  Param,
  /// A weight the step updates but does not train (BatchNorm's running
  /// statistics): initial value from init.safetensors, checkpointed and
  /// exported like a param, no gradient.
  Buffer,
  /// Read-only, from init.safetensors.
  Constant,
  /// Persistent optimizer state, updated in place by a training step.
  State,
  /// A scalar hyper-parameter written by the host before every call.
  Hyper,
};

/// The manifest name: "input", "label", "param", "buffer", "constant",
/// "state", "hyper".
const char *roleName(BindingRole role);
/// The role named `name` (roleName's inverse), or nothing.
std::optional<BindingRole> parseRole(const std::string &name);

/// Data given with every call (read from .npy files): inputs and labels.
inline bool isData(BindingRole role) {
  return role == BindingRole::Input || role == BindingRole::Label;
}

/// What the host sets for every call: the data and the hyperparameters
/// (the bindings an asynchronous backend double-buffers).
inline bool isPerCall(BindingRole role) {
  return isData(role) || role == BindingRole::Hyper;
}

/// Weights from the model (init.safetensors, checkpoints, export): params
/// and buffers.
inline bool isWeight(BindingRole role) {
  return role == BindingRole::Param || role == BindingRole::Buffer;
}

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
  /// A shard (ZeRO stage 3: "full_shape"): the whole tensor's shape. The
  /// binding, 1-D, holds one rank's block: the tensor flattened, padded
  /// with zeros to world_size equal blocks, block `rank`.
  std::vector<int64_t> fullShape;
  /// A copy ("copy_of", a state: ZeRO stage 3's half parameter block): the
  /// named param, each element rounded to this binding's float type, in
  /// the param's shard layout. The runner writes it whenever the param is
  /// set; the step that updates the param updates it too. Not
  /// checkpointed.
  std::string copyOf;

  bool sharded() const { return !fullShape.empty(); }
  size_t byteSize() const;
  std::string describe() const { return describeType(dtype, shape); }
};

/// The state a step with --clip-grad-norm writes its gradients' global
/// norm to, for the trainer's log: an observation of the last step, not
/// training state.
inline constexpr const char *kGradNormState = "grad_norm";

/// What a checkpoint holds: weights and optimizer state, not the step's
/// observations (kGradNormState), so a run may resume with clipping turned
/// on or off, nor copies of params (Binding::copyOf), so a run may resume
/// at another ZeRO stage.
inline bool isCheckpointed(const Binding &binding) {
  return isWeight(binding.role) ||
         (binding.role == BindingRole::State &&
          binding.name != kGradNormState && binding.copyOf.empty());
}

/// Block `rank` of `whole` as `binding` (a shard) holds it.
Tensor shardBlock(const Tensor &whole, const Binding &binding, uint64_t rank);

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

/// What the compiler's recomputation (gradient checkpointing) chose: the
/// "recompute" object of "train". Informational: the step implements it.
struct RecomputeReport {
  /// "none", "selective", "full" or "sqrt".
  std::string policy = "none";
  /// Activation bytes the backward keeps from the forward, with this
  /// policy and with none.
  uint64_t savedBytes = 0;
  uint64_t baselineSavedBytes = 0;
  /// FLOPs the backward spends recomputing; the forward and backward's
  /// FLOPs without recomputation.
  uint64_t recomputeFlops = 0;
  uint64_t stepFlops = 0;
};

/// One low-rank adapter (ztc-lora): the base weight it adapts, its A and B
/// params, and the base weight's layout ("out_in": a Linear's [out, in];
/// "in_out": a Conv1D's [in, out]).
struct LoraAdapter {
  std::string base, a, b, layout;
};

/// The "lora" object of "train": what `ztc compile --lora` added, for
/// `ztc export --adapter` and `--merge`. The update of a base weight is
/// scale * B A (transposed for "in_out").
struct LoraConfig {
  int64_t r = 0;
  double alpha = 0, scale = 0, dropout = 0;
  bool rslora = false;
  /// Which biases train: "none", "all" or "lora_only" (peft's bias).
  std::string bias = "none";
  std::vector<LoraAdapter> adapters;
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
  /// Informational: "fp32", "bf16", ... (--precision); sharded
  /// checkpoints record it.
  std::string precision = "fp32";
  /// cross_entropy: the classes the labels index (0: unknown) and the
  /// label that contributes nothing ("classes", "ignore_index"), for
  /// checking data before training.
  uint64_t classes = 0;
  std::optional<int64_t> ignoreIndex;
  /// Absent in manifests of older compilers.
  std::optional<RecomputeReport> recompute;
  /// Absent without --lora.
  std::optional<LoraConfig> lora;
  /// --seq-buckets: the sequence lengths compiled, ascending ("seq_buckets";
  /// empty without). This artifact is the longest's; each shorter one's
  /// step is the artifact in bucketDirectory(), sharing this one's params,
  /// states and arena at run time.
  std::vector<uint64_t> seqBuckets;
  /// "flags": the values the step compiles in of the flags a DeepSpeed
  /// config can also set (weight-decay, betas, eps, momentum,
  /// clip-grad-norm, the loss-scale flags), as the flags take them, so
  /// that `ztc-train --config` can check a config against what was
  /// compiled. Empty in manifests of older compilers.
  std::map<std::string, std::string> compiledFlags;
};

/// What an entry computes: the IR's `train.entry` (dialects/Train).
enum class EntryPurpose {
  /// The model's outputs; state left as it was (`ztc run`).
  Forward,
  /// Loss, gradients and the optimizer's in-place update.
  TrainStep,
  /// All but the last micro-batch of an accumulated optimizer step.
  Accumulate,
  /// Loss and gradients, nothing updated (--dump-grads, gradient checks);
  /// one output per gradient, named after its param.
  LossAndGrads,
  /// The loss alone (gradient checks).
  Loss,
  /// The loss in evaluation mode, and for a cross entropy the float32
  /// counts "correct" and "counted" (--eval-data).
  Evaluate,
};

/// "forward", "train_step", "accumulate", "loss_and_grads", "loss",
/// "evaluate".
const char *purposeName(EntryPurpose purpose);
std::optional<EntryPurpose> parsePurpose(const std::string &name);

/// One entry of the compiled step: its C symbol, what it computes, and the
/// outputs it leaves in the arena.
struct Entry {
  /// The C symbol, `ztc_<purpose>` as the compiler names it.
  std::string name;
  EntryPurpose purpose = EntryPurpose::Forward;
  std::vector<Output> outputs;
  /// How far into the arena this entry's buffers reach: what a run that
  /// calls only it writes (the manifest's arenaBytes is the largest over
  /// the entries; a manifest without the field gives that).
  uint64_t arenaBytes = 0;

  /// The index of the output named `name` in `outputs`, or -1.
  int outputIndex(const std::string &name) const;
};

/// A collective that moves data, by its step-ABI code (StepAbi.h).
enum class CollectiveOp : int32_t {
  AllReduce = ZTC_COLLECTIVE_ALL_REDUCE,
  ReduceScatter = ZTC_COLLECTIVE_REDUCE_SCATTER,
  AllGather = ZTC_COLLECTIVE_ALL_GATHER,
};

/// Its name in manifests, as kernel.collective spells its kind:
/// "all_reduce", "reduce_scatter" or "all_gather".
const char *collectiveOpName(CollectiveOp op);
std::optional<CollectiveOp> parseCollectiveOp(const std::string &name);

/// One collective of an entry, in program order (the dist dialect).
struct Collective {
  /// The entry that runs it.
  std::string entry;
  CollectiveOp op = CollectiveOp::AllReduce;
  DType dtype = DType::Float32;
  /// Elements of the larger side: what an all-reduce reduces, what a
  /// reduce-scatter reads, what an all-gather writes.
  uint64_t elements = 0;

  /// The elements one rank sends for it in a bandwidth-optimal ring of
  /// `worldSize` ranks (Communicator.h counts the same).
  uint64_t ringElements(uint64_t worldSize) const;
};

/// How the step spans ranks ("dist"; absent: one rank).
struct Distribution {
  uint64_t worldSize = 1;
  /// The ZeRO stage ztc-zero applied (0: data parallelism).
  unsigned zeroStage = 0;
  /// Every entry's collectives in order; ranks compare their hash before
  /// the first one runs.
  std::vector<Collective> collectives;

  /// FNV-1a of the collective sequence and the world size.
  uint64_t hash() const;
  /// The elements one rank sends in `entry`'s collectives.
  uint64_t ringElements(const std::string &entry) const;
};

/// One check of --check-finite (kernel.check_finite): the kernel whose
/// output it scans. The step notes the 1-based index of the first check
/// that found a NaN or an infinity (ztc_train_state).
struct FiniteCheck {
  /// The ONNX node the kernel computes ("" for ztc's own arithmetic).
  std::string node;
  /// The nn op ("pow", "matmul", "cast", ...).
  std::string op;
  /// "forward", "backward", "recomputed forward" or "update".
  std::string pass;

  /// "the backward of ONNX node '/h.0/Pow' (pow)".
  std::string describe() const;
};

/// manifest.json.
struct Manifest {
  int format = kManifestFormat;
  /// The step ABI the entries were compiled for (runtime/kernels/StepAbi.h).
  int abi = ZTC_STEP_ABI_VERSION;
  Target target = Target::Cpu;
  std::string source = "step.cpp";
  uint64_t arenaBytes = 0;
  /// Streams and events the entries use (ztc_step_context); the runtime
  /// creates them once.
  uint64_t streams = 1;
  uint64_t events = 0;
  /// Every entry's bindings: entries share the array and the arena.
  std::vector<Binding> bindings;
  /// The first is the main entry (forward, train_step, or loss); at most
  /// one per purpose.
  std::vector<Entry> entries;

  Distribution dist;
  /// --check-finite: every check of every entry, numbered from 1 in order
  /// ("finite_checks"; absent: none).
  std::vector<FiniteCheck> finiteChecks;

  // Training artifacts only (see the file comment).
  ArtifactKind kind = ArtifactKind::Forward;
  TrainConfig train;

  /// The entry for `purpose`, or null.
  const Entry *find(EntryPurpose purpose) const;
  /// The main entry (entries.front()); throws when there is none.
  const Entry &main() const;
};

/// The directory of the step compiled for sequence length `seq` of the
/// artifact at `artifactDir` (TrainConfig::seqBuckets): buckets/seq-<seq>.
std::string bucketDirectory(const std::string &artifactDir, uint64_t seq);

/// Parses manifest JSON text; `path` names it in errors. Checks field types,
/// dtypes, shapes, unique file stems, and that outputs lie in the arena;
/// for a training manifest also the "train" object, a float32[] "loss"
/// output, one batch size across inputs, scalar hypers, and that each grad
/// output matches a param.
Manifest parseManifest(const std::string &text, const std::string &path);

/// Serializes `manifest` (the compiler's side; also used by tests).
std::string printManifest(const Manifest &manifest);

/// The name of the symbol by which a compiled step states the interface
/// it was compiled for: `extern "C" const unsigned long long
/// ztc_interface_hash`.
constexpr char kInterfaceHashSymbol[] = "ztc_interface_hash";

/// A 64-bit hash (FNV-1a) of everything a compiled step assumes about its
/// manifest: the ABI version, arena size, streams and events, every
/// binding's role, name, dtype and shape in order, and every entry's name,
/// purpose and outputs (dtype, shape, arena offset). The compiler writes it
/// into the step; the loader recomputes it from manifest.json and refuses a
/// manifest that differs (reordered bindings, a shrunk shape).
uint64_t interfaceHash(const Manifest &manifest);

/// `hash` as 16 lowercase hexadecimal digits (how manifests and checkpoint
/// indexes write hashes).
std::string hexHash(uint64_t hash);

/// FNV-1a of the whole manifest as printManifest writes it: the step, its
/// training configuration, collectives and world size. Ranks compare it
/// before the first collective; a sharded checkpoint records it.
uint64_t manifestHash(const Manifest &manifest);

/// The batch size of a training manifest: shape[0] of its input bindings.
/// Throws Error when there is no input, an input has no batch dimension, or
/// two inputs disagree.
uint64_t inputBatchSize(const Manifest &manifest);

/// The file stem for an ONNX name: every character outside [A-Za-z0-9._-]
/// becomes '_'.
std::string fileStemFor(const std::string &name);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_MANIFEST_H
