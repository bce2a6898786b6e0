//===- Checkpoint.h - training state on disk --------------------*- C++ -*-===//
//
// A checkpoint directory holds `checkpoint.safetensors`: every param and
// optimizer-state tensor of a training artifact by its manifest name, and
// string metadata:
//
//   format   "ztc-checkpoint-2" ("ztc-checkpoint-1", without sha256, is
//            still read)
//   sha256   the SHA-256 of the rest: every other metadata entry and every
//            tensor's name, dtype, shape and bytes, so that a changed or
//            damaged byte anywhere is an error at load, not a silent resume
//   step     optimizer steps completed
//   epoch    data position of the next batch: epoch ...
//   batch    ... and batch index within it
//   seed     the data-order seed
//   ...      anything else the writer adds (the trainer: batch_size,
//            num_samples)
//
// The file is written to a temporary name, fsynced and renamed over the
// previous one (File.h), so a process killed at any moment (SIGKILL, power
// loss) leaves either the previous checkpoint or the new one, complete and
// loadable. A temporary file left by a killed writer is removed by the next
// save.
//
// Errors (ztc::rt::Error):
//   no checkpoint in DIR (DIR/checkpoint.safetensors: cannot open: ...)
//   DIR/checkpoint.safetensors: not a ztc checkpoint (metadata 'format' is
//     missing; expected 'ztc-checkpoint-1')
//   DIR/checkpoint.safetensors: its contents do not match the SHA-256 it
//     records: the file was changed or damaged after it was written
//   DIR/checkpoint.safetensors: metadata 'step' is not a non-negative
//     integer: 'x'
//   DIR/checkpoint.safetensors does not match the artifact: missing param
//     'w' (float32[3]); state 'm': expected float32[3], got float32[4];
//     unexpected tensor 'v' (float32[2])
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_CHECKPOINT_H
#define ZTC_RUNTIME_CHECKPOINT_H

#include "runtime/Artifact.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <string>

namespace ztc::rt {

/// The value of the `format` metadata this runtime writes and reads.
constexpr char kCheckpointFormat[] = "ztc-checkpoint-2";
/// The format before the hash, which this runtime still reads.
constexpr char kCheckpointFormatWithoutHash[] = "ztc-checkpoint-1";

/// One checkpoint.
struct Checkpoint {
  /// Optimizer steps completed.
  uint64_t step = 0;
  /// Data position of the next batch.
  uint64_t epoch = 0;
  uint64_t batch = 0;
  uint64_t seed = 0;
  /// Params and states by manifest name.
  std::map<std::string, Tensor> tensors;
  /// Further metadata; keys must not collide with the fields above.
  std::map<std::string, std::string> metadata;
};

/// `dir/checkpoint.safetensors`.
std::string checkpointPath(const std::string &dir);

/// Writes `checkpoint` to `dir` (created if missing) atomically.
void saveCheckpoint(const std::string &dir, const Checkpoint &checkpoint);

/// Reads the checkpoint in `dir` and checks its metadata.
Checkpoint loadCheckpoint(const std::string &dir);

/// The same without the tensors: only the file's header is read.
Checkpoint loadCheckpointMetadata(const std::string &dir);

/// Reads the checkpoint in `dir` and checks that its tensors are exactly the
/// param and state bindings of `manifest` (names, dtypes, shapes); every
/// mismatch is named in one error.
Checkpoint loadCheckpoint(const std::string &dir, const Manifest &manifest);

/// The check of loadCheckpoint(dir, manifest) on a loaded checkpoint; `path`
/// names it in the error.
void checkCheckpointMatches(const Checkpoint &checkpoint,
                            const Manifest &manifest, const std::string &path);

/// Range checks of the counters a resume trusts, for data of
/// `batchesPerEpoch` batches per epoch (at least 1): the batch lies inside
/// an epoch, and the data position in batches (epoch * batchesPerEpoch +
/// batch) and the step are at most 2^53 (they count exactly in a double,
/// which the schedules use; no run comes near). Throws Error naming `path`:
///   DIR/checkpoint.safetensors: batch 12 is outside an epoch of this data
///   (10 batches)
void checkDataPosition(const Checkpoint &checkpoint, uint64_t batchesPerEpoch,
                       const std::string &path);

/// Exclusive use of a checkpoint directory for one trainer: a lock on
/// DIR/.ztc-lock (flock, so it goes with its process, however that ends),
/// which holds the owner's pid for the message another trainer gets:
///   DIR is being written by another trainer (pid 1234); give this run its
///   own --save directory
class CheckpointLock {
public:
  /// Creates DIR if needed and takes the lock; throws Error when another
  /// process holds it.
  explicit CheckpointLock(const std::string &directory);
  ~CheckpointLock();
  CheckpointLock(const CheckpointLock &) = delete;
  CheckpointLock &operator=(const CheckpointLock &) = delete;

private:
  int fd_ = -1;
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_CHECKPOINT_H
