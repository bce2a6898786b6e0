//===- Runner.h - run a compiled forward step -------------------*- C++ -*-===//
//
// Binds an artifact to a backend and runs its entry once: `ztc run`. The
// Runner allocates the arena with exactly the manifest's arena_bytes, one
// device buffer per binding, uploads parameters and constants from
// init.safetensors, reads and checks the inputs, calls the entry, and reads
// the outputs back from their arena offsets.
//
// On an asynchronous backend (CUDA) the bindings the host sets per call
// (inputs, labels, hypers) are double-buffered: two device sets and two
// host staging buffers, alternated per call, so that a call's upload runs
// on the backend's upload stream while the previous call computes and no
// call waits for the host (Backend::upload). Entries are replayed as
// recorded graphs (Backend::replay) unless setGraphs(false) or the step
// has collectives whose communicator cannot be recorded.
//
// Every error is a ztc::rt::Error with a one-line message:
//   missing input file(s) in DIR: x.npy (input 'x', float32[8,64])
//   unexpected file(s) in DIR match no input: z.npy (expected: x.npy)
//   input 'x' (DIR/x.npy): expected float32[8,64], got float32[8,32]
//   input 'x': DIR/x.npy: truncated data: ...      (a corrupt .npy)
//   generated code wrote past the end of the N-byte arena
//   gather: index 70 is outside [-64, 64)   (bad data a kernel found: the
//     first the step's kernels recorded in the context's error slot, read
//     after the call on the CPU and when the host next waits on CUDA)
//   hyper 'rng' was not set                 (run() before setRandomKey)
//   the step was compiled for 2 ranks (--world-size 2), but runs on 4:
//     start it with mpirun -np 2 (srun -n 2 in a Slurm step)
//                                       (setCommunicator, or run() with none)
//   all_reduce: the communicator failed (error 5): <the communicator's
//     message>
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_RUNNER_H
#define ZTC_RUNTIME_RUNNER_H

#include "runtime/Artifact.h"
#include "runtime/Tensor.h"
#include "runtime/backend/Backend.h"
#include "runtime/comm/Communicator.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ztc::rt {

/// The name of the hyper binding that holds the key of a step's random
/// numbers (nn.random_uniform: training-mode Dropout's masks), an int64.
constexpr const char *kRandomKeyHyper = "rng";

/// The random key for a run seeded `seed` at optimizer step `step` and
/// micro-batch `microBatch` (`ztc run` and gradient checks: step 0,
/// micro-batch 0). A pure function of the three, so a resumed run draws the
/// masks an uninterrupted one would, and every step and micro-batch gets
/// its own. Computed in integers throughout: a key never passes through a
/// double.
int64_t randomKey(uint64_t seed, uint64_t step, uint64_t microBatch);

/// An artifact bound to a backend, ready to run.
class Runner {
public:
  /// Allocates the arena and binding buffers on `backend` and uploads the
  /// parameters and constants. `artifact` must outlive the Runner, and so
  /// must `variants`: the steps of the artifact's shorter sequence lengths
  /// (--seq-buckets; TrainConfig::seqBuckets, in its order), which run on
  /// the same params, states, hypers and input buffers, each with its own
  /// constants; the arena is the largest plan's.
  Runner(const Artifact &artifact, std::unique_ptr<Backend> backend,
         const std::vector<const Artifact *> &variants = {});
  ~Runner();

  /// Reads every input from `dataDir/<file>.npy`; see the file comment for
  /// the checks and their messages.
  void loadInputs(const std::string &dataDir);
  /// Uploads `value` as the input named `name` (dtype and shape must match).
  void setInput(const std::string &name, const Tensor &value);
  /// Calls the entry; every input must have been set.
  void run();
  /// Calls `entry` (another entry of the same artifact, such as its
  /// grad_entry) with the same bindings, arena and training state; every
  /// input and hyper must have been set. On an asynchronous backend (CUDA)
  /// it returns once the call is enqueued; reads wait for it.
  void run(EntryFn entry);
  /// Waits for every call so far; throws the first failure among them, or
  /// an overrun of the arena.
  void synchronize() const;
  /// The device-side training state the calls since the last reset
  /// accumulated (StepAbi.h), after waiting for them.
  ztc_train_state trainState() const;
  /// Zeroes the training state.
  void resetTrainState();
  /// Output `index` of the manifest, copied from the arena.
  Tensor output(size_t index) const;
  /// The tensor `spec` describes, copied from the arena.
  Tensor readArena(const Output &spec) const;

  /// Uploads `value` into binding `index` of the manifest, any role (dtype
  /// and shape must match; an input or label, the selected variant's
  /// shape), and the param's copies (Binding::copyOf) made of it. Buffers
  /// persist across run() calls: a training step updates params and states
  /// in place.
  void setBinding(size_t index, const Tensor &value);
  /// Makes run() and setBinding() use variant `variant` (1 to the number
  /// of variants, in the constructor's order), or the artifact itself (0).
  void selectVariant(size_t variant);
  /// The current contents of binding `index`.
  Tensor binding(size_t index) const;
  /// Writes `key` into the random-key hyper (kRandomKeyHyper) when the
  /// artifact has one; its dtype must be int64.
  void setRandomKey(int64_t key);
  /// Runs the entries' collectives on `comm` (which must outlive the
  /// Runner): its world size must be the one the step was compiled for.
  /// Without one, only a step compiled for one rank runs.
  void setCommunicator(Communicator *comm);
  /// Whether run() may replay entries as recorded graphs (CUDA graphs;
  /// Backend::replay): by default it may, when the step has no collectives
  /// or its communicator can be recorded (Communicator::graphCapturable).
  void setGraphs(bool enabled) { graphs_ = enabled; }
  /// Where the backend's notices go (why graphs are off); by default to
  /// stderr.
  void setNotice(std::function<void(const std::string &)> notice) {
    notice_ = std::move(notice);
  }
  /// Writes every output to `outputDir/<file>.npy`, creating the directory.
  void writeOutputs(const std::string &outputDir) const;

  /// Bytes allocated for the arena: the manifest's arena_bytes.
  uint64_t arenaBytes() const { return arenaBytes_; }
  /// The arena's high-water mark so far: one past the highest byte any call
  /// wrote (the arena starts filled with a pattern; a byte written with the
  /// pattern's own value reads as untouched). After waiting for the calls.
  /// The memory plan's arena_bytes is the highest end of a buffer, so once
  /// every entry has run this equals it.
  uint64_t touchedArenaBytes() const;

private:
  const Manifest &manifest() const { return artifact_.manifest(); }
  void uploadInput(size_t binding, const Tensor &value);
  /// Asynchronous backends: the second device set and the staging buffers
  /// of the bindings the host sets per call.
  void allocateStaging();
  /// Binding `index`'s device buffer in upload slot `slot`.
  void *bufferFor(size_t index, unsigned slot) const;
  /// Uploads the latest value of every staged binding into the next slot's
  /// device set; returns the slot.
  unsigned uploadStaged();
  /// Writes the copies (Binding::copyOf) of param `source`, which holds
  /// `value`: each rounded to its copy's type.
  void writeCopies(size_t source, const Tensor &value);
  /// writeCopies for every param with copies, from what it holds now.
  void writeAllCopies();
  /// Throws, naming the bytes, when the device (CUDA) has less memory free
  /// than the plan allocates; before anything is allocated.
  void checkDeviceMemory() const;
  /// Throws when the guard band after the arena was overwritten.
  void checkGuard() const;
  /// Throws (and clears) the data error in the context's error slot.
  void checkStepError() const;

  const Artifact &artifact_;
  std::unique_ptr<Backend> backend_;
  Communicator *comm_ = nullptr;
  bool graphs_ = true;
  /// The elements each entry's collectives moved the last time its host
  /// code ran, counted again for each replay of its record.
  std::map<EntryFn, uint64_t> movedPerCall_;
  std::function<void(const std::string &)> notice_;
  /// Initial values of sharded bindings, until setCommunicator takes this
  /// rank's blocks of them.
  std::map<std::string, Tensor> wholeValues_;
  uint64_t arenaBytes_ = 0;
  /// The arena plus a guard band that detects writes past its end.
  DeviceBuffer arena_;
  /// The context's streams and events, the backend's.
  std::vector<void *> streams_, events_;
  /// The context's ztc_train_state and ztc_step_error, in device memory.
  DeviceBuffer trainState_, errorSlot_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<void *> pointers_;
  std::vector<bool> inputSet_;
  /// Double-buffered uploads (asynchronous backends, staged_): per staged
  /// binding (an input, label or hyper) its index, its latest value, its
  /// offset in the staging buffers and its device buffer in slot 1 (slot
  /// 0 uses buffers_); per binding its position among the staged (-1:
  /// not staged); slot 1's bindings array; the slot the next call uses.
  bool staged_ = false;
  std::vector<size_t> stagedIndices_;
  std::vector<std::vector<uint8_t>> latest_;
  std::vector<size_t> stagingOffsets_;
  std::vector<DeviceBuffer> secondSet_;
  std::vector<int> stagedOf_;
  HostBuffer staging_[2];
  std::vector<void *> secondPointers_;
  unsigned nextSlot_ = 0, lastSlot_ = 0;
  /// Per binding, the bindings that are copies of it (Binding::copyOf).
  std::vector<std::vector<size_t>> copies_;
  /// A step of a shorter sequence length: its bindings array (the main's
  /// buffers but for its constants) and, per main binding that is an input
  /// or label, its own (shorter) binding.
  struct Variant {
    const Artifact *artifact = nullptr;
    std::vector<DeviceBuffer> constants;
    std::vector<void *> pointers;
    /// The bindings array of upload slot 1 (staged_).
    std::vector<void *> secondPointers;
    std::map<size_t, const Binding *> inputs;
  };
  std::vector<Variant> variants_;
  size_t selected_ = 0;
  void addVariant(const Artifact &variant);
};

/// `ztc run`: loads the artifact in `artifactDir`, runs it on the backend
/// for its manifest's target with inputs from `dataDir` and the random key
/// of `seed`, writes outputs to `outputDir`.
void runForward(const std::string &artifactDir, const std::string &dataDir,
                const std::string &outputDir, uint64_t seed = 0);

/// runForward for callers built without exceptions: returns false and sets
/// `error` instead of throwing.
bool tryRunForward(const std::string &artifactDir, const std::string &dataDir,
                   const std::string &outputDir, std::string &error,
                   uint64_t seed = 0) noexcept;

} // namespace ztc::rt

#endif // ZTC_RUNTIME_RUNNER_H
