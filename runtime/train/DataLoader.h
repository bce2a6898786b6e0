//===- DataLoader.h - shuffled batches from .npy arrays ---------*- C++ -*-===//
//
// Training data for `ztc train`: one `DIR/<file>.npy` per input binding of a
// training artifact, each holding every sample along its first dimension
// (x.npy float32[N,64] and labels.npy int64[N] for inputs float32[32,64] and
// int64[32]). All arrays must have the same sample count N, and each
// binding's shape is one batch: shape[0] is the batch size, the rest the
// per-sample shape.
//
// Every epoch visits the samples in a fresh permutation drawn from a PRNG
// implemented here (splitmix64 seeding a Fisher-Yates shuffle), so the order
// depends only on (seed, epoch, N) and is identical on every machine and
// standard library. An epoch yields floor(N / batch) batches: the incomplete
// last batch is dropped (the compiled step has a static batch size), and
// the dropped samples differ from epoch to epoch.
//
// A token dataset at the data path (TokenDataset.h: variable-length
// documents) is served instead as rows of a language model's token ids and
// labels, packed or padded (TokenBatching below), in an order that is
// likewise a function of (seed, epoch).
//
// The position is (epoch, batch index within the epoch); a checkpoint
// stores it and seek() restores it, so a resumed run sees the same batches
// an uninterrupted run would have.
//
// Errors (ztc::rt::Error):
//   data directory DIR does not exist
//   missing input file(s) in DIR: x.npy (input 'x', batches of float32[32,64])
//   input 'x' (DIR/x.npy): expected float32[N,64] (samples of float32[64]),
//     got float64[100,64]
//   inputs disagree on the number of samples: x.npy has 100, labels.npy has 90
//   DIR has 20 samples, fewer than one batch of 32
//   DIR has 40 samples, fewer than one global batch of 32 x 2 ranks
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_DATALOADER_H
#define ZTC_RUNTIME_DATALOADER_H

#include "runtime/Artifact.h"
#include "runtime/Tensor.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ztc::rt {

/// splitmix64 (Steele, Lea, Flood 2014): a 64-bit PRNG whose output is a
/// fixed function of its seed on every platform.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  /// Uniform in [0, bound) without modulo bias; bound > 0.
  uint64_t below(uint64_t bound);

private:
  uint64_t state_;
};

/// The order in which epoch `epoch` visits samples 0..count-1 for `seed`.
std::vector<uint64_t> epochPermutation(uint64_t count, uint64_t seed,
                                       uint64_t epoch);

/// Where the next batch comes from.
struct DataPosition {
  uint64_t epoch = 0;
  /// Index of the next batch within the epoch, < batchesPerEpoch().
  uint64_t batch = 0;

  bool operator==(const DataPosition &other) const {
    return epoch == other.epoch && batch == other.batch;
  }
};

/// What DataLoader::check scans for (`ztc-train --check-data`).
struct DataCheck {
  /// Integer labels must lie in [0, classes) (0: not checked) or equal the
  /// ignore index.
  uint64_t classes = 0;
  bool hasIgnore = false;
  int64_t ignoreIndex = -100;
};

/// How a token dataset (TokenDataset.h: variable-length documents) becomes
/// the batches of a language model whose inputs are token ids [B, S] and
/// labels [B, S] (the next token at each position; `ignoreIndex` counts for
/// nothing):
///   pack  the epoch's documents (in a seeded order) end to end, each
///         followed by `eos` when it is >= 0, cut into rows of S + 1 tokens
///         that overlap by one (Megatron's GPT samples): the input is a
///         row's first S tokens, the labels its last S. Every token but
///         the stream's last one is a label once per epoch, and only the
///         stream's tail (under one row) is dropped.
///   pad   one document per row (documents of under 2 tokens have no label
///         and are skipped), in a seeded order: the input its first S
///         tokens then `pad`, the labels its tokens 1 to S then
///         `ignoreIndex`; a longer document is truncated to S + 1 tokens.
///   group as pad, in the order of the Hugging Face Trainer's
///         group_by_length (lengthGroupedOrder of the epoch's seeded
///         permutation, batches of `groupBatch`); each rank's batches are
///         then consecutive as always, so each holds similar lengths.
/// With sequence buckets (setSequenceBuckets), pad and group rows are as
/// long as the shortest bucket that holds the global batch's longest row
/// (its labels: its document's length less one), not S.
struct TokenBatching {
  std::string mode = "pack";
  int64_t eos = -1;
  int64_t pad = 0;
  int64_t ignoreIndex = -100;
  /// group: the batch megabatches count in (the Trainer's per-device batch
  /// times its accumulation steps; ztc-train gives the optimizer step's
  /// rows on every rank; 0: the loader's batch size).
  uint64_t groupBatch = 0;
};

class TokenDataset;

/// The tokens of one global batch (every rank's rows): the labels that
/// count (not the ignore index) and all positions, and the row length.
struct BatchTokens {
  uint64_t real = 0;
  uint64_t total = 0;
  uint64_t sequence = 0;
};

/// The Hugging Face Trainer's length-grouped order (its
/// get_length_grouped_indices) of `permutation`, a permutation of the
/// samples, for batches of `batch` (the Trainer's per-device batch times
/// its accumulation steps): megabatches of min(N / (4 batch), 50) batches
/// (at least one), each sorted by `length`, longest first (stable), and the
/// first element of the megabatch whose first is longest (the first such)
/// swapped with the very first.
std::vector<uint64_t>
lengthGroupedOrder(std::vector<uint64_t> permutation,
                   const std::function<uint64_t(uint64_t)> &length,
                   uint64_t batch);

/// Whether `path` is a token dataset: a directory holding tokens.npy and
/// offsets.npy but no labels.npy (which samples would have), or the prefix
/// (or .bin, .idx) of a Megatron .bin/.idx pair.
bool isTokenDataset(const std::string &path);

/// All samples of a training run in host memory, served as batches; or
/// the rows of a token dataset, read in place.
class DataLoader {
public:
  /// Reads `dataDir/<file>.npy` for every input binding of `manifest`
  /// (see the file comment for the checks). With `partialBatches` (held-out
  /// data, read by gather()), fewer samples than one batch are allowed.
  /// When `dataDir` is a token dataset, the artifact must take one integer
  /// input and integer labels, both [B, S], which `tokens` fills; a
  /// held-out one (`partialBatches`) keeps the documents in order.
  DataLoader(const Manifest &manifest, const std::string &dataDir,
             uint64_t seed, bool partialBatches = false,
             const TokenBatching &tokens = {});

  /// Makes this loader rank `rank` of `worldSize`: a global batch is
  /// worldSize consecutive batches of the epoch's permutation, and this
  /// rank takes the rank-th (a distributed sampler's split: every rank
  /// shuffles alike from the seed). At most `maxBatches` global batches
  /// per epoch (0: as many as the samples fill), so ranks with different
  /// amounts of data run the same steps. Throws when the samples do not
  /// fill one global batch.
  void setShard(uint64_t rank, uint64_t worldSize, uint64_t maxBatches = 0);

  uint64_t numSamples() const { return numSamples_; }
  uint64_t batchSize() const { return batchSize_; }
  /// Batches of this rank per epoch: floor(numSamples / (batchSize *
  /// worldSize)) >= 1, at most maxBatches.
  uint64_t batchesPerEpoch() const {
    uint64_t batches = numSamples_ / (batchSize_ * worldSize_);
    return maxBatches_ ? std::min(batches, maxBatches_) : batches;
  }
  uint64_t seed() const { return seed_; }

  /// The manifest binding index of each input, in manifest order; next()
  /// returns one tensor per entry.
  const std::vector<size_t> &bindingIndices() const { return bindings_; }

  const DataPosition &position() const { return position_; }
  /// Moves to `position`; throws Error when its batch is out of range.
  void seek(const DataPosition &position);

  /// The batch at the current position (one tensor per input, shaped like
  /// its binding, but for the row length of a sequence bucket), then
  /// advances to the next batch, moving to the next epoch after the last
  /// full batch. With `tokens`, a token dataset's counts for the global
  /// batch.
  std::vector<Tensor> next(BatchTokens *tokens = nullptr);

  /// Every epoch in the data's own order (samples, or a token dataset's
  /// documents), unshuffled: the Hugging Face Trainer's
  /// train_sampling_strategy "sequential". Throws under --batching group.
  void setSequential();

  /// Token datasets, pad and group: serve rows of the shortest of
  /// `lengths` (ascending, the last the artifact's S) that holds each
  /// global batch (TokenBatching). Throws on lengths that do not end at S.
  void setSequenceBuckets(const std::vector<uint64_t> &lengths);

  /// A batch of `samples` in order (at most batchSize(); evaluation's). The
  /// rows past them repeat the first sample (sample 0 when there is none)
  /// with every label set to `padLabel`: cross entropy's ignore index, so
  /// that they count for nothing.
  std::vector<Tensor> gather(const std::vector<uint64_t> &samples,
                             int64_t padLabel) const;

  /// The samples (indices into the arrays) of the batch at `position`.
  std::vector<uint64_t> samplesAt(const DataPosition &position) const;

  /// Token datasets: the mode, and the tokens of the data (each once).
  bool tokenMode() const { return tokens_ != nullptr; }
  const TokenBatching &tokenBatching() const { return batching_; }
  /// The token dataset's description (TokenDataset::describe()).
  std::string tokenDescription() const;

  /// Scans every sample before training: integer labels in range (see
  /// DataCheck), no NaN or infinity in float data. The first problem, e.g.
  ///   labels.npy: sample 17 has label 12, outside [0, 10) (ignore_index -100)
  ///   x.npy: sample 3 has a NaN (element 5)
  /// or "" when the data is clean.
  std::string check(const DataCheck &check) const;

private:
  const std::vector<uint64_t> &permutation();
  /// A batch of samples[0..count) (count <= batchSize()); rows past them
  /// repeat the first sample with labels `padLabel` (see gather()). Token
  /// datasets: the rows of `epoch`'s stream or documents.
  std::vector<Tensor> rows(const uint64_t *samples, size_t count,
                           int64_t padLabel, uint64_t epoch,
                           uint64_t sequence = 0) const;
  /// Where tokenRow writes one row: `sequence` ids, labels (one for a
  /// classifier), mask (1: a real token) and position ids.
  struct TokenRow {
    int64_t *ids, *labels, *mask, *positions;
  };
  /// Token datasets: row `sample` of `epoch` at length `sequence` (pack:
  /// always S; its positions restart at every document).
  void tokenRow(uint64_t sample, uint64_t epoch, uint64_t sequence,
                TokenRow &out) const;
  /// pad and group: the length sample `sample`'s row needs (at most S):
  /// its labels (a language model), its tokens (a classifier).
  uint64_t rowLength(uint64_t sample) const;
  /// group: the Trainer's group_by_length order of `epoch`.
  std::vector<uint64_t> groupedOrder(uint64_t epoch) const;
  /// pack: the documents of `epoch` in order and where each starts in the
  /// stream (cached for the last epoch asked).
  void streamOf(uint64_t epoch) const;
  /// The samples of `epoch` in the order batches take them.
  std::vector<uint64_t> orderOf(uint64_t epoch) const;
  /// The constructor's part for a token dataset.
  void openTokens(const Manifest &manifest, bool partialBatches,
                  const TokenBatching &tokens);

  // Token datasets (TokenDataset.h).
  std::shared_ptr<const TokenDataset> tokens_;
  /// What each input of bindings_ is given.
  enum class TokenInput { Ids, Labels, Mask, TokenTypes, Positions };
  std::vector<TokenInput> kinds_;
  /// Labels [B]: a sequence classifier, one document label per row.
  bool classify_ = false;
  TokenBatching batching_;
  bool shuffleDocuments_ = true;
  bool sequential_ = false;
  uint64_t sequence_ = 0;
  /// pad: the documents with a label (2 tokens or more).
  std::vector<uint64_t> padDocuments_;
  /// setSequenceBuckets' lengths (empty: every row is S).
  std::vector<uint64_t> buckets_;
  mutable std::optional<uint64_t> streamEpoch_;
  mutable std::vector<uint64_t> streamOrder_, streamStarts_;

  uint64_t seed_ = 0;
  std::string dataDir_;
  uint64_t numSamples_ = 0;
  uint64_t batchSize_ = 0;
  uint64_t rank_ = 0, worldSize_ = 1, maxBatches_ = 0;
  std::vector<size_t> bindings_;
  /// Per input: its file name and role (for check()).
  std::vector<std::string> files_;
  std::vector<BindingRole> roles_;
  /// One array per input: every sample.
  std::vector<Tensor> arrays_;
  std::vector<std::vector<int64_t>> batchShapes_;
  std::vector<DType> batchDTypes_;
  DataPosition position_;
  /// The permutation of permutationEpoch_ (computed once per epoch).
  std::vector<uint64_t> permutation_;
  /// Empty until the first batch: every epoch number is a valid position.
  std::optional<uint64_t> permutationEpoch_;
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_DATALOADER_H
