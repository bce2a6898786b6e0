//===- ShardedCheckpoint.h - one checkpoint written by every rank ---------===//
//
// A run whose ranks hold different state (ZeRO stages 1-3 on several ranks)
// checkpoints as one file per rank plus an index, published atomically:
//
//   DIR/latest                               "step-00000050"
//   DIR/step-00000050/index.json             rank 0's index (below)
//   DIR/step-00000050/rank-00003/checkpoint.safetensors
//                                            rank 3's bindings (Checkpoint.h)
//
// Saving: every rank writes its file (temporary name, fsync, rename), then
// the ranks agree (an all-gather of each rank's outcome and the file's
// SHA-256); only when every rank succeeded does rank 0 write the index and
// then replace DIR/latest, each atomically. A rank killed or failing at any
// point leaves DIR/latest naming the previous checkpoint, which stays
// complete: a checkpoint is wholly there or not at all. After publishing,
// rank 0 removes all but the `keep` newest step directories.
//
// The index records the format, step, world size, ZeRO stage, precision,
// the data position and seed (the random keys derive from seed and step),
// the hash of the manifest that wrote it, every rank's file with its SHA-256,
// and every binding of a rank with its shape and, for a block of a sharded
// tensor, the whole tensor's shape (rank r holds block r of the flattened
// tensor, zero-padded to world-size equal blocks).
//
// Loading with the manifest, world size and stage that wrote it reads the
// rank's own file (checked against its SHA-256) like a one-rank
// checkpoint. Any other run reshards (reshardCheckpoint): each binding is
// rebuilt from its whole tensor, so a run resumes at another world size or
// stage, or from a one-rank checkpoint, and one rank resumes a sharded one.
//
// Errors (ztc::rt::Error):
//   checkpoint at step 50 not saved: rank 1: DIR/...: No space left on
//     device (the previous checkpoint in DIR stays)
//   DIR/latest names 'step-x', not a step directory
//   DIR/step-00000050/rank-00001/checkpoint.safetensors: SHA-256 differs
//     from the index (the file is corrupt or truncated)
//   DIR/step-00000050/rank-00001/checkpoint.safetensors: holds rank 0's
//     shard, but the index lists it as rank 1's
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_SHARDEDCHECKPOINT_H
#define ZTC_RUNTIME_SHARDEDCHECKPOINT_H

#include "runtime/comm/Communicator.h"
#include "runtime/io/Manifest.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/train/Checkpoint.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ztc::rt {

/// The index's `format`. Format 2 adds each shard's identity to the rank
/// file's own metadata (covered by its SHA-256): kShardRankKey,
/// kShardWorldSizeKey and kShardStageKey. Format 1 (no identity) is still
/// read; its files are identified by their index entries alone.
constexpr char kShardedCheckpointFormat[] = "ztc-sharded-checkpoint-2";
constexpr char kShardedCheckpointFormat1[] = "ztc-sharded-checkpoint-1";
constexpr char kShardRankKey[] = "shard_rank";
constexpr char kShardWorldSizeKey[] = "shard_world_size";
constexpr char kShardStageKey[] = "shard_zero_stage";

/// The index of the latest step of a sharded checkpoint.
struct ShardedIndex {
  std::string stepDir, indexPath;
  uint64_t step = 0, worldSize = 0, zeroStage = 0;
  std::string manifestHash, precision;
  /// Format 2: every rank file states its identity.
  bool identified = false;
  /// Per rank: its file's path and SHA-256.
  std::vector<std::pair<std::string, std::string>> files;
  /// Every binding a rank file holds (shape: a rank's; fullShape: the
  /// whole tensor's when the binding is a block of it).
  std::vector<Binding> tensors;
};

/// Reads DIR/latest and the index it names, checking its fields: the step
/// is the step directory's and at most 2^53, the stage 0 to 3, file r is
/// rank r's (`rank-0000r/checkpoint.safetensors`), no tensor is listed
/// twice.
ShardedIndex readShardedIndex(const std::string &dir);

/// Checks rank `rank`'s file of `index` against its SHA-256 in the index
/// and (format 2) against the identity it records: rank, world size,
/// stage and step. Throws an Error naming the file and the field.
void verifyShard(const ShardedIndex &index, size_t rank);

/// Every rank's file of `index`, verified (verifyShard) and open, after
/// checking that each holds every tensor of the index with its type and
/// shape, and that each block is its whole tensor's share.
std::vector<std::unique_ptr<SafeTensorsReader>>
openShards(const ShardedIndex &index);

/// Whether DIR holds a sharded checkpoint (DIR/latest exists).
bool isShardedCheckpoint(const std::string &dir);

/// Every rank calls it with its own bindings in `mine`; see the file
/// comment. Throws the same Error on every rank when any rank failed.
void saveShardedCheckpoint(const std::string &dir, const Checkpoint &mine,
                           const Manifest &manifest, Communicator &comm,
                           uint64_t keep);

/// This rank's state for `manifest` from the checkpoint in DIR, whatever
/// world size and ZeRO stage wrote it (sharded, or whole: one rank or
/// stage 0): every persistent binding is rebuilt from its whole tensor,
/// one tensor at a time (a sharded one reassembled from every rank's
/// block, after each rank file's SHA-256 is checked), then cut into this
/// rank's block where the binding is one. The checkpoint must hold every
/// param, buffer and state of `manifest`, with the same element types and
/// whole shapes; everything that differs is named in one error:
///   DIR: the checkpoint does not match this run: missing state
///     'w.momentum_buffer' (float32[2,3]); param 'b': float32[4] whole,
///     the checkpoint has float32[3]
Checkpoint reshardCheckpoint(const std::string &dir, const Manifest &manifest,
                             int rank);

/// This rank's checkpoint from the latest step in DIR, which the same
/// manifest, world size and stage wrote (an Error says what differs;
/// reshardCheckpoint loads any other).
Checkpoint loadShardedCheckpoint(const std::string &dir,
                                 const Manifest &manifest, Communicator &comm);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_SHARDEDCHECKPOINT_H
