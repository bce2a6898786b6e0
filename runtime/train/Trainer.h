//===- Trainer.h - the training loop of `ztc train` -------------*- C++ -*-===//
//
// Runs a training artifact (Artifact.h, kind "train") on the backend of its
// target:
//
//   load artifact, data (DataLoader.h), optionally a checkpoint to resume
//   for each optimizer step t = first..last:
//     lr = schedule(t) (Schedule.h); write hypers "lr" and "step" (= t)
//     for each of the grad_accum micro-batches m: upload the next batch,
//       write hyper "rng" = randomKey(seed, t, m) (Runner.h: new dropout
//       masks every call, the same ones again on resume), call
//       accum_entry (all but the last) or entry (the last); each call adds
//       its loss to the device-side training state (StepAbi.h)
//     when a report or a checkpoint is due: read the state (the mean loss
//     since the last read; the first non-finite loss names its step),
//     reset it, log; save a checkpoint every saveEvery steps
//     every evalEvery steps and after the last (--eval-data): run the
//     evaluate entry over the held-out samples, in order, each rank its
//     share of every global batch (the last batch padded with ignored
//     labels for a cross entropy, so every sample counts once), and log
//     the loss and accuracy summed over ranks
//   save a checkpoint at the end
//
// Between reports the host never waits for the device: it reads nothing
// back, so on CUDA consecutive steps run back to back. A failure a CUDA
// call reports asynchronously surfaces at the next read, naming the steps
// since the previous one.
//
// Params and states live in the Runner's binding buffers for the whole run:
// the step updates them in place and nothing re-uploads them. A run with
// `steps` = N ends at optimizer step N counted from the start of training,
// so resuming a checkpoint of step 10 with steps = 20 runs steps 11..20 on
// the batches an uninterrupted run would have used, and ends with the same
// params bit for bit. (When the manifest's total_steps is 0, a decaying lr
// schedule spans the run's last step: give a resumed run the same steps.)
//
// Logging goes through TrainOptions::log, one message per call. With
// progressBar, the report is a single line on stderr redrawn in place at
// most every 0.1 s; otherwise every logEvery steps (and at the last) a line
// like
//   step 10/100  loss 2.301234  lr 1.000e-03  1234.5 samples/s
// where the loss is the mean over the steps since the previous line (as the
// Hugging Face Trainer logs it).
//
// Errors are ztc::rt::Error; besides those of the parts:
//   ARTIFACT: not a training artifact (manifest kind 'forward')
//   training diverged at step 7: the loss is nan (its batch: samples 3, 17,
//     22, 9)   (the first step whose loss was not finite, found at the
//     report after it; with accumulation, the micro-batch's samples)
//   data check: labels.npy: sample 17 has label 12, outside [0, 10)
//     (ignore_index -100)      (--check-data)
//   train.grad_accum is 4, but gradient accumulation needs an accum_entry
//     the artifact lacks
//   --dump-grads needs a grad_entry the artifact lacks
//   --eval-data needs an evaluate entry, which ART lacks (compiled by an
//     older ztc or with --entries): recompile it
//   --eval-data DIR: 5 samples do not fill one global batch of 8 (4 x 2
//     ranks); a loss other than cross entropy cannot pad one
//   --save-every needs --save DIR
//   the checkpoint in DIR was written with seed 1; this run has seed 0
//   DIR is being written by another trainer (pid 1234); give this run its
//     own --save directory          (CheckpointLock, Checkpoint.h)
//   ranks run different artifacts: rank(s) 2 differ from rank 0 in the
//     manifest (the step, its training configuration, collectives or world
//     size); give every rank the same artifact
//   the checkpoint in DIR was written with a global batch of 32
//     (batch_size x world_size); this run has 16 (8 x 2)
//   (a checkpoint of another world size or ZeRO stage is resharded:
//     ShardedCheckpoint.h, reshardCheckpoint)
//
// With several ranks (mpirun -np N ztc-train ...; TrainOptions::comm), each
// rank reads its share of every global batch (DataLoader::setShard), the
// ranks agree on the artifact before the first collective, the reported
// loss is the mean over ranks, and only rank 0 logs and writes metrics.
// Rank 0 saves for all when every rank holds the same state (one rank, or
// ZeRO stage 0); from stage 1 on every rank saves its part of one sharded
// checkpoint (ShardedCheckpoint.h). An error on one rank prints "error: rank R
// of N: ..." and ends every rank (the others would wait for it in their next
// collective).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_TRAINER_H
#define ZTC_RUNTIME_TRAINER_H

#include "runtime/train/DataLoader.h"
#include "runtime/train/DeepSpeedConfig.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ztc::rt {

/// Whether stderr is a terminal (the progress bar's default).
bool stderrIsTerminal();

struct TrainOptions {
  std::string artifactDir;
  std::string dataDir;
  /// How a token dataset at dataDir (and evalDataDir) becomes batches.
  TokenBatching tokens;
  /// The optimizer step to stop after, counted from the start of training
  /// (a resumed run continues to it); 0: `epochs` decides.
  uint64_t steps = 0;
  /// Epochs from the start of training, when steps is 0: epochs *
  /// floor(batchesPerEpoch / grad_accum) optimizer steps.
  uint64_t epochs = 1;
  /// Seeds the data order (DataLoader.h) and the random keys (Runner.h).
  uint64_t seed = 0;
  /// --sampler sequential: the data in its own order every epoch
  /// (DataLoader::setSequential).
  bool sequential = false;
  /// Plain log line every logEvery steps (0: only the last step).
  uint64_t logEvery = 10;
  /// --metrics: a JSON line per logged step (every logEvery steps and the
  /// last) in this file; empty: none.
  std::string metricsFile;
  /// Gather the next batch on a background thread while the step runs
  /// (the batches are the same either way), when a batch has at least
  /// prefetchMinBytes: handing a smaller one over costs more than
  /// gathering it (the MLP on digits: 8 KiB batches, 0.4 ms steps).
  bool prefetch = true;
  uint64_t prefetchMinBytes = 256 * 1024;
  /// Where checkpoints go; empty: none.
  std::string saveDir;
  /// Also save every saveEvery steps (0: only at the end).
  uint64_t saveEvery = 0;
  /// Sharded checkpoints (ShardedCheckpoint.h): how many step directories
  /// to keep, the newest (at least 1).
  uint64_t saveTotalLimit = 1;
  /// Sharded checkpoints: also write the whole weights of each one as
  /// DIR/step-N/model.safetensors in this type ("fp16", "bf16", "fp32";
  /// empty: no), streamed by rank 0 (DeepSpeed's
  /// stage3_gather_16bit_weights_on_model_save).
  std::string saveConsolidated;
  /// A checkpoint directory to continue from; empty: start from
  /// init.safetensors.
  std::string resumeDir;
  /// Before the first update, run grad_entry on the first batch (with the
  /// random key of the first micro-batch) and write DIR/loss.npy and
  /// DIR/grad/<file>.npy per grad output; empty: don't.
  std::string dumpGradsDir;
  /// --eval-data: held-out samples the evaluate entry runs on (loss as in
  /// model.eval(), and accuracy for a cross entropy) every evalEvery steps
  /// and after the last; empty: no evaluation.
  std::string evalDataDir;
  /// Evaluate every evalEvery optimizer steps (0: after the last only).
  uint64_t evalEvery = 0;
  /// Before training, scan every sample: labels within the classes the
  /// loss indexes (or its ignore index), no NaN or infinity in float data;
  /// the first bad sample is an error naming its file and index.
  bool checkData = false;
  /// Redraw one progress line on stderr instead of plain log lines.
  bool progressBar = stderrIsTerminal();
  /// The communicator: "auto" (when an MPI launcher started this process
  /// with several ranks, NCCL for a CUDA artifact and MPI for a CPU one;
  /// else one local rank), "local", "mpi" or "nccl" (Communicator.h). Only rank
  /// 0 logs, writes metrics and checkpoints.
  std::string comm = "auto";
  /// Seconds a collective may wait for the other ranks before this rank
  /// exits with an error naming it (0: forever).
  double collectiveTimeout = 60;
  /// CUDA: replay each entry as a CUDA graph, captured at its second call
  /// with each set of buffers (Runner::setGraphs); off: every call direct.
  bool cudaGraphs = true;
  /// CPU: run the step's collectives on a thread of their own, overlapping
  /// compute (BackendOptions::streamThreads).
  bool commThread = false;
  /// --config: the DeepSpeed config the artifact was compiled with; the
  /// trainer checks the artifact and the world size against it, and its
  /// stage3_gather_16bit_weights_on_model_save turns saveConsolidated on
  /// (in the artifact's precision) when it is not given.
  std::optional<DeepSpeedConfig> config;
  /// Receives each message (no trailing newline); empty: print to stderr.
  std::function<void(const std::string &)> log;
};

/// One evaluation on the held-out data, the same on every rank.
struct EvalReport {
  /// The optimizer step it followed.
  uint64_t step = 0;
  /// The mean loss over the samples (for a cross entropy, over the rows
  /// whose label is not ignored).
  double loss = 0;
  /// The share of counted rows whose label scored highest; NaN when the
  /// loss is not a cross entropy.
  double accuracy = 0;
  /// Samples evaluated (all of them for a cross entropy; otherwise the
  /// whole global batches they fill).
  uint64_t samples = 0;
};

struct TrainResult {
  /// Every evaluation (--eval-data), in order.
  std::vector<EvalReport> evaluations;
  /// The reported losses, one per report (log line, progress-bar redraw or
  /// checkpoint): the mean over the steps and micro-batches since the
  /// previous report. With logEvery 1, one per step.
  std::vector<float> losses;
  /// The optimizer step of each entry of `losses`.
  std::vector<uint64_t> loggedSteps;
  /// How many times the trainer read the device-side state: the only
  /// host synchronizations of the run besides checkpoints' parameter reads.
  uint64_t stateReads = 0;
  uint64_t firstStep = 0;
  /// The last optimizer step completed (the resumed step if none ran).
  uint64_t finalStep = 0;
  /// The arena's measured high-water mark after the run
  /// (Runner::touchedArenaBytes); 0 when no step ran.
  uint64_t arenaTouched = 0;
};

/// Trains; see the file comment.
TrainResult train(const TrainOptions &options);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_TRAINER_H
