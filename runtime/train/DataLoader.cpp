//===- DataLoader.cpp - shuffled batches from .npy arrays -----------------===//
//
// Arrays are read whole and kept in host memory; a batch is gathered by
// copying one contiguous row of bytes per sample.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/DataLoader.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/io/Npy.h"
#include "runtime/train/TokenDataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>

namespace ztc::rt {

namespace {

std::vector<int64_t> withoutFirst(const std::vector<int64_t> &shape) {
  return std::vector<int64_t>(shape.begin() + 1, shape.end());
}

/// "float32[N,64]": the shape of a whole data array for `binding`.
std::string describeArray(const Binding &binding) {
  std::string text = describeType(binding.dtype, binding.shape);
  size_t open = text.find('[');
  size_t end = text.find_first_of(",]", open);
  return text.substr(0, open + 1) + "N" + text.substr(end);
}

} // namespace

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::below(uint64_t bound) {
  // Reject the first 2^64 mod bound values so every residue is equally
  // likely.
  uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    uint64_t value = next();
    if (value >= threshold)
      return value % bound;
  }
}

std::vector<uint64_t> epochPermutation(uint64_t count, uint64_t seed,
                                       uint64_t epoch) {
  // One independent stream per (seed, epoch): both are hashed by splitmix64
  // before they are combined, so neighbouring seeds or epochs do not give
  // overlapping streams.
  SplitMix64 rng(SplitMix64(seed).next() ^ SplitMix64(~epoch).next());
  std::vector<uint64_t> order(count);
  std::iota(order.begin(), order.end(), uint64_t(0));
  for (uint64_t i = count; i > 1; --i)
    std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

bool isTokenDataset(const std::string &path) {
  std::error_code error;
  namespace fs = std::filesystem;
  // A directory of samples has labels.npy; a token dataset has none.
  if (fs::is_directory(path, error))
    return fs::exists(joinPath(path, "offsets.npy"), error) &&
           fs::exists(joinPath(path, "tokens.npy"), error) &&
           !fs::exists(joinPath(path, "labels.npy"), error);
  std::string prefix = megatronPrefix(path);
  return fs::exists(prefix + ".idx", error) &&
         fs::exists(prefix + ".bin", error);
}

DataLoader::DataLoader(const Manifest &manifest, const std::string &dataDir,
                       uint64_t seed, bool partialBatches,
                       const TokenBatching &tokens)
    : seed_(seed), dataDir_(dataDir) {
  std::error_code error;
  bool tokenData = isTokenDataset(dataDir);
  if (!tokenData && !std::filesystem::is_directory(dataDir, error))
    throw Error("data directory " + dataDir + " does not exist");

  try {
    batchSize_ = inputBatchSize(manifest);
  } catch (const Error &problem) {
    throw Error(std::string("the artifact ") + problem.what());
  }
  if (tokenData) {
    openTokens(manifest, partialBatches, tokens);
    return;
  }

  std::string missing;
  for (size_t i = 0; i < manifest.bindings.size(); ++i) {
    const Binding &binding = manifest.bindings[i];
    if (!isData(binding.role))
      continue;
    bindings_.push_back(i);
    std::string file = binding.file + ".npy";
    files_.push_back(file);
    roles_.push_back(binding.role);
    if (!std::filesystem::is_regular_file(joinPath(dataDir, file), error))
      missing += (missing.empty() ? "" : ", ") + file + " (input '" +
                 binding.name + "', batches of " + binding.describe() + ")";
  }
  if (!missing.empty())
    throw Error("missing input file(s) in " + dataDir + ": " + missing);

  std::string counts;
  bool agree = true;
  for (size_t index : bindings_) {
    const Binding &binding = manifest.bindings[index];
    std::string path = joinPath(dataDir, binding.file + ".npy");
    Tensor array;
    try {
      array = readNpy(path);
    } catch (const Error &failure) {
      throw Error("input '" + binding.name + "': " + failure.what());
    }
    std::vector<int64_t> sample = withoutFirst(binding.shape);
    if (array.dtype != binding.dtype || array.shape.empty() ||
        withoutFirst(array.shape) != sample)
      throw Error("input '" + binding.name + "' (" + path + "): expected " +
                  describeArray(binding) + " (samples of " +
                  describeType(binding.dtype, sample) + "), got " +
                  array.describe());
    uint64_t count = static_cast<uint64_t>(array.shape[0]);
    if (arrays_.empty())
      numSamples_ = count;
    agree &= count == numSamples_;
    counts += (counts.empty() ? "" : ", ") + binding.file + ".npy has " +
              std::to_string(count);
    arrays_.push_back(std::move(array));
    batchShapes_.push_back(binding.shape);
    batchDTypes_.push_back(binding.dtype);
  }
  if (!agree)
    throw Error("inputs disagree on the number of samples: " + counts);
  if (numSamples_ == 0 || (numSamples_ < batchSize_ && !partialBatches))
    throw Error(dataDir + " has " + std::to_string(numSamples_) +
                " samples, fewer than one batch of " +
                std::to_string(batchSize_));
}

void DataLoader::openTokens(const Manifest &manifest, bool partialBatches,
                            const TokenBatching &tokens) {
  batching_ = tokens;
  shuffleDocuments_ = !partialBatches;
  if (tokens.mode != "pack" && tokens.mode != "pad" && tokens.mode != "group")
    throw Error("--batching '" + tokens.mode +
                "': expected pack, pad or group");
  // Integer token ids [B, S] and, by name, an attention mask, token type
  // ids and position ids [B, S] beside them; labels [B, S] (a language
  // model's next tokens) or [B] (a sequence classifier's).
  const Binding *input = nullptr, *labels = nullptr;
  bool fits = true;
  std::string seen;
  for (size_t i = 0; i < manifest.bindings.size(); ++i) {
    const Binding &binding = manifest.bindings[i];
    if (!isData(binding.role))
      continue;
    seen +=
        (seen.empty() ? "" : ", ") + binding.name + " " + binding.describe();
    bool integer =
        binding.dtype == DType::Int64 || binding.dtype == DType::Int32;
    TokenInput kind = TokenInput::Ids;
    std::string name = binding.name;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (binding.role == BindingRole::Label) {
      kind = TokenInput::Labels;
      fits &= !labels && integer &&
              (binding.shape.size() == 2 || binding.shape.size() == 1);
      labels = &binding;
    } else if (name.find("mask") != std::string::npos) {
      kind = TokenInput::Mask;
    } else if (name.find("token_type") != std::string::npos) {
      kind = TokenInput::TokenTypes;
    } else if (name.find("position") != std::string::npos) {
      kind = TokenInput::Positions;
    } else {
      fits &= !input && integer;
      input = &binding;
    }
    if (kind != TokenInput::Labels)
      fits &= binding.shape.size() == 2 &&
              (binding.dtype == DType::Int64 || binding.dtype == DType::Int32 ||
               binding.dtype == DType::Float32);
    kinds_.push_back(kind);
    bindings_.push_back(i);
    files_.push_back(binding.name);
    roles_.push_back(binding.role);
    batchShapes_.push_back(binding.shape);
    batchDTypes_.push_back(binding.dtype);
  }
  if (fits && input && labels)
    for (size_t k = 0; k < bindings_.size(); ++k)
      fits &= kinds_[k] == TokenInput::Labels
                  ? batchShapes_[k][0] == input->shape[0] &&
                        (batchShapes_[k].size() == 1 ||
                         batchShapes_[k] == input->shape)
                  : batchShapes_[k] == input->shape;
  if (!fits || !input || !labels)
    throw Error(dataDir_ +
                " is a token dataset, which feeds token ids [B, S] (one "
                "integer input, beside which an attention mask, token type "
                "ids and position ids [B, S] may be named) and labels [B, "
                "S] (a language model's) or [B] (a sequence classifier's); "
                "the artifact takes " +
                seen);
  classify_ = labels->shape.size() == 1;
  sequence_ = uint64_t(input->shape[1]);
  tokens_ = std::make_shared<TokenDataset>(TokenDataset::open(dataDir_));
  const TokenDataset &data = *tokens_;
  if (classify_ && !data.hasLabels())
    throw Error(data.describe() +
                " has no document_labels.npy, which the artifact's labels " +
                labels->describe() +
                " (one per row: a sequence classifier's) need; "
                "tools/ztc_dataset.py --label-column writes it");
  if (classify_ && tokens.mode == "pack")
    throw Error("--batching pack joins documents, but the artifact "
                "classifies each (labels " +
                labels->describe() + "): use --batching pad or group");
  if (tokens.mode == "pack") {
    uint64_t stream =
        data.numTokens() + (tokens.eos >= 0 ? data.numDocuments() : 0);
    numSamples_ = stream > sequence_ ? (stream - 1) / sequence_ : 0;
  } else {
    // A language model needs 2 tokens for a label, a classifier 1.
    for (uint64_t d = 0; d < data.numDocuments(); ++d)
      if (data.length(d) >= (classify_ ? 1 : 2))
        padDocuments_.push_back(d);
    numSamples_ = padDocuments_.size();
  }
  if (numSamples_ == 0 || (numSamples_ < batchSize_ && !partialBatches))
    throw Error(data.describe() + " makes " + std::to_string(numSamples_) +
                (tokens.mode == "pack"
                     ? " rows of " + std::to_string(sequence_ + 1) +
                           " tokens (--batching pack)"
                     : " rows (documents of " +
                           std::string(classify_ ? "1 token" : "2 tokens") +
                           " or more, --batching " + tokens.mode + ")") +
                ", fewer than one batch of " + std::to_string(batchSize_));
}

std::string DataLoader::tokenDescription() const {
  return tokens_ ? tokens_->describe() : "";
}

void DataLoader::streamOf(uint64_t epoch) const {
  if (streamEpoch_ == epoch)
    return;
  const TokenDataset &data = *tokens_;
  if (shuffleDocuments_) {
    streamOrder_ = epochPermutation(data.numDocuments(), seed_, epoch);
  } else {
    streamOrder_.resize(data.numDocuments());
    std::iota(streamOrder_.begin(), streamOrder_.end(), uint64_t(0));
  }
  streamStarts_.resize(streamOrder_.size() + 1);
  uint64_t at = 0;
  for (size_t j = 0; j < streamOrder_.size(); ++j) {
    streamStarts_[j] = at;
    at += data.length(streamOrder_[j]) + (batching_.eos >= 0 ? 1 : 0);
  }
  streamStarts_.back() = at;
  streamEpoch_ = epoch;
}

uint64_t DataLoader::rowLength(uint64_t sample) const {
  uint64_t length = tokens_->length(padDocuments_[sample]);
  return classify_ ? std::min(length, sequence_)
                   : std::min(length, sequence_ + 1) - 1;
}

void DataLoader::setSequenceBuckets(const std::vector<uint64_t> &lengths) {
  if (!tokens_ || batching_.mode == "pack")
    return;
  if (lengths.empty() || lengths.back() != sequence_ ||
      !std::is_sorted(lengths.begin(), lengths.end()))
    throw Error("sequence buckets must ascend to the artifact's length " +
                std::to_string(sequence_));
  buckets_ = lengths;
}

std::vector<uint64_t>
lengthGroupedOrder(std::vector<uint64_t> order,
                   const std::function<uint64_t(uint64_t)> &length,
                   uint64_t batch) {
  if (order.empty() || batch == 0)
    return order;
  uint64_t multiple =
      std::max<uint64_t>(std::min<uint64_t>(order.size() / (batch * 4), 50), 1);
  uint64_t mega = multiple * batch;
  std::vector<uint64_t> lengths(order.size());
  for (uint64_t sample : order)
    lengths.at(sample) = length(sample);
  auto longer = [&](uint64_t a, uint64_t b) { return lengths[a] > lengths[b]; };
  std::vector<uint64_t> firsts;
  for (uint64_t at = 0; at < order.size(); at += mega) {
    auto end = order.begin() + std::min<uint64_t>(at + mega, order.size());
    std::stable_sort(order.begin() + at, end, longer);
    firsts.push_back(at);
  }
  // The megabatch with the longest first element leads (the first such).
  uint64_t longest = firsts.front();
  for (uint64_t at : firsts)
    if (lengths[order[at]] > lengths[order[longest]])
      longest = at;
  std::swap(order[0], order[longest]);
  return order;
}

std::vector<uint64_t> DataLoader::groupedOrder(uint64_t epoch) const {
  return lengthGroupedOrder(
      epochPermutation(numSamples_, seed_, epoch),
      // The Trainer's lengths: each document's, untruncated.
      [this](uint64_t sample) {
        return tokens_->length(padDocuments_[sample]);
      },
      batching_.groupBatch ? batching_.groupBatch : batchSize_);
}

void DataLoader::tokenRow(uint64_t sample, uint64_t epoch, uint64_t sequence,
                          TokenRow &out) const {
  const TokenDataset &data = *tokens_;
  uint64_t S = sequence_;
  std::vector<int64_t> row(S + 1, 0);
  uint64_t filled = 0;
  if (batching_.mode == "pack") {
    streamOf(epoch);
    uint64_t position = sample * S;
    size_t j = size_t(std::upper_bound(streamStarts_.begin(),
                                       streamStarts_.end(), position) -
                      streamStarts_.begin()) -
               1;
    // Where each token lies in its document (EOS the document's last), for
    // position ids that restart at every document.
    std::vector<int64_t> within(S + 1, 0);
    while (filled < S + 1 && j < streamOrder_.size()) {
      uint64_t doc = streamOrder_[j];
      uint64_t offset = position + filled - streamStarts_[j];
      uint64_t length = data.length(doc);
      if (offset < length) {
        uint64_t count = std::min(length - offset, S + 1 - filled);
        data.read(doc, offset, count, row.data() + filled);
        for (uint64_t k = 0; k < count; ++k)
          within[filled + k] = int64_t(offset + k);
        filled += count;
        offset += count;
      }
      if (filled < S + 1 && offset == length && batching_.eos >= 0) {
        within[filled] = int64_t(offset);
        row[filled++] = batching_.eos;
        ++offset;
      }
      ++j;
    }
    for (uint64_t t = 0; t < S; ++t) {
      out.ids[t] = row[t];
      out.labels[t] = row[t + 1];
      out.mask[t] = 1;
      out.positions[t] = within[t];
    }
    return;
  }
  uint64_t doc = padDocuments_[sample];
  filled = std::min(data.length(doc), S + 1);
  data.read(doc, 0, filled, row.data());
  // The document's first S tokens (a shorter bucket cuts a language
  // model's last, which has no label).
  uint64_t inputs = std::min(filled, S);
  for (uint64_t t = 0; t < sequence; ++t) {
    out.ids[t] = t < inputs ? row[t] : batching_.pad;
    out.mask[t] = t < inputs ? 1 : 0;
    out.positions[t] = int64_t(t);
    if (!classify_)
      out.labels[t] = t + 1 < filled ? row[t + 1] : batching_.ignoreIndex;
  }
  if (classify_)
    out.labels[0] = data.label(doc);
}

void DataLoader::setShard(uint64_t rank, uint64_t worldSize,
                          uint64_t maxBatches) {
  if (numSamples_ < batchSize_ * worldSize)
    throw Error(dataDir_ + " has " + std::to_string(numSamples_) +
                " samples, fewer than one global batch of " +
                std::to_string(batchSize_) + " x " + std::to_string(worldSize) +
                " ranks");
  rank_ = rank;
  worldSize_ = worldSize;
  maxBatches_ = maxBatches;
}

void DataLoader::seek(const DataPosition &position) {
  if (position.batch >= batchesPerEpoch())
    throw Error("data position: batch " + std::to_string(position.batch) +
                " of an epoch that has " + std::to_string(batchesPerEpoch()) +
                " batches (" + std::to_string(numSamples_) +
                " samples, batches of " + std::to_string(batchSize_) + ")");
  position_ = position;
}

void DataLoader::setSequential() {
  if (tokens_ && batching_.mode == "group")
    throw Error("--sampler sequential keeps the data's order, which "
                "--batching group changes: give one of them");
  sequential_ = true;
  shuffleDocuments_ = false;
  permutationEpoch_.reset();
  streamEpoch_.reset();
}

std::vector<uint64_t> DataLoader::orderOf(uint64_t epoch) const {
  // pack: rows in stream order (the documents are what is shuffled); a
  // held-out token dataset in order.
  if (sequential_ ||
      (tokens_ && (batching_.mode == "pack" || !shuffleDocuments_))) {
    std::vector<uint64_t> order(numSamples_);
    std::iota(order.begin(), order.end(), uint64_t(0));
    return order;
  }
  if (tokens_ && batching_.mode == "group")
    return groupedOrder(epoch);
  return epochPermutation(numSamples_, seed_, epoch);
}

const std::vector<uint64_t> &DataLoader::permutation() {
  if (permutationEpoch_ != position_.epoch) {
    permutation_ = orderOf(position_.epoch);
    permutationEpoch_ = position_.epoch;
  }
  return permutation_;
}

std::vector<Tensor> DataLoader::next(BatchTokens *tokens) {
  const std::vector<uint64_t> &order = permutation();
  const uint64_t *samples =
      order.data() + (position_.batch * worldSize_ + rank_) * batchSize_;
  // pad and group: the global batch's labels pick the row length.
  BatchTokens counts;
  counts.sequence = sequence_;
  if (tokens_ && batching_.mode != "pack") {
    const uint64_t *global =
        order.data() + position_.batch * worldSize_ * batchSize_;
    uint64_t longest = 0;
    for (uint64_t k = 0; k < batchSize_ * worldSize_; ++k) {
      uint64_t labels = rowLength(global[k]);
      counts.real += labels;
      longest = std::max(longest, labels);
    }
    if (!buckets_.empty())
      counts.sequence =
          *std::lower_bound(buckets_.begin(), buckets_.end(), longest);
  } else if (tokens_) {
    counts.real = batchSize_ * worldSize_ * sequence_;
  }
  counts.total = batchSize_ * worldSize_ * counts.sequence;
  if (tokens)
    *tokens = counts;
  std::vector<Tensor> batch =
      rows(samples, batchSize_, 0, position_.epoch, counts.sequence);
  if (++position_.batch == batchesPerEpoch()) {
    ++position_.epoch;
    position_.batch = 0;
  }
  return batch;
}

std::vector<Tensor> DataLoader::gather(const std::vector<uint64_t> &samples,
                                       int64_t padLabel) const {
  return rows(samples.data(), samples.size(), padLabel, 0);
}

std::vector<Tensor> DataLoader::rows(const uint64_t *samples, size_t count,
                                     int64_t padLabel, uint64_t epoch,
                                     uint64_t sequence) const {
  std::vector<Tensor> batch;
  if (tokens_) {
    uint64_t S = sequence ? sequence : sequence_;
    uint64_t perRow = classify_ ? 1 : S;
    // Rows past `count` (evaluation's padding) have no labels.
    std::vector<int64_t> ids(batchSize_ * S, batching_.pad),
        labels(batchSize_ * perRow, padLabel), mask(batchSize_ * S, 0),
        positions(batchSize_ * S, 0), types(batchSize_ * S, 0);
    for (uint64_t k = 0; k < batchSize_; ++k) {
      if (k >= count)
        continue;
      TokenRow row{ids.data() + k * S, labels.data() + k * perRow,
                   mask.data() + k * S, positions.data() + k * S};
      tokenRow(samples[k], epoch, S, row);
    }
    for (size_t i = 0; i < bindings_.size(); ++i) {
      const std::vector<int64_t> &values =
          kinds_[i] == TokenInput::Labels       ? labels
          : kinds_[i] == TokenInput::Mask       ? mask
          : kinds_[i] == TokenInput::Positions  ? positions
          : kinds_[i] == TokenInput::TokenTypes ? types
                                                : ids;
      std::vector<int64_t> shape = {int64_t(batchSize_)};
      if (kinds_[i] != TokenInput::Labels || !classify_)
        shape.push_back(int64_t(S));
      Tensor tensor(batchDTypes_[i], shape);
      for (size_t e = 0; e < values.size(); ++e) {
        if (batchDTypes_[i] == DType::Int64)
          tensor.data<int64_t>()[e] = values[e];
        else if (batchDTypes_[i] == DType::Int32)
          tensor.data<int32_t>()[e] = int32_t(values[e]);
        else
          tensor.data<float>()[e] = float(values[e]);
      }
      batch.push_back(std::move(tensor));
    }
    return batch;
  }
  for (size_t i = 0; i < arrays_.size(); ++i) {
    Tensor tensor(arrays_[i].dtype, batchShapes_[i]);
    size_t row = tensor.byteSize() / batchSize_;
    for (uint64_t k = 0; k < batchSize_ && row; ++k) {
      uint64_t sample = k < count ? samples[k] : count ? samples[0] : 0;
      std::memcpy(tensor.bytes.data() + k * row,
                  arrays_[i].bytes.data() + sample * row, row);
      if (k < count || roles_[i] != BindingRole::Label)
        continue;
      auto *labels = tensor.bytes.data() + k * row;
      size_t width = dtypeSize(tensor.dtype);
      for (size_t at = 0; at + width <= row; at += width) {
        if (tensor.dtype == DType::Int64)
          std::memcpy(labels + at, &padLabel, width);
        else if (tensor.dtype == DType::Int32) {
          int32_t narrow = int32_t(padLabel);
          std::memcpy(labels + at, &narrow, width);
        }
      }
    }
    batch.push_back(std::move(tensor));
  }
  return batch;
}

std::vector<uint64_t>
DataLoader::samplesAt(const DataPosition &position) const {
  std::vector<uint64_t> order = orderOf(position.epoch);
  auto first =
      order.begin() + (position.batch * worldSize_ + rank_) * batchSize_;
  return {first, first + batchSize_};
}

namespace {

/// "NaN" or "infinity" when element `i` of a float array is one, else null
/// (16-bit floats by their bits).
const char *nonFinite(const Tensor &array, int64_t i) {
  auto classify = [](double value) -> const char * {
    return std::isnan(value) ? "NaN" : std::isinf(value) ? "infinity" : nullptr;
  };
  auto classifyBits = [](uint16_t bits, uint16_t exponent,
                         uint16_t mantissa) -> const char * {
    if ((bits & exponent) != exponent)
      return nullptr;
    return bits & mantissa ? "NaN" : "infinity";
  };
  switch (array.dtype) {
  case DType::Float32:
    return classify(array.data<float>()[i]);
  case DType::Float64:
    return classify(array.data<double>()[i]);
  case DType::Float16:
    return classifyBits(array.data<uint16_t>()[i], 0x7C00, 0x03FF);
  case DType::BFloat16:
    return classifyBits(array.data<uint16_t>()[i], 0x7F80, 0x007F);
  default:
    return nullptr;
  }
}

/// Element `i` of an integer array of `dtype`.
int64_t integerElement(const Tensor &array, int64_t i) {
  switch (array.dtype) {
  case DType::Int64:
    return array.data<int64_t>()[i];
  case DType::Int32:
    return array.data<int32_t>()[i];
  case DType::Int8:
    return array.data<int8_t>()[i];
  default:
    return 0;
  }
}

} // namespace

std::string DataLoader::check(const DataCheck &check) const {
  if (tokens_) {
    const TokenDataset &data = *tokens_;
    if (classify_) {
      // A classifier's labels are the documents'.
      for (uint64_t d = 0; d < data.numDocuments(); ++d)
        if (check.classes &&
            (data.label(d) < 0 || uint64_t(data.label(d)) >= check.classes) &&
            !(check.hasIgnore && data.label(d) == check.ignoreIndex))
          return data.describe() + ": document " + std::to_string(d) +
                 " has label " + std::to_string(data.label(d)) +
                 ", outside the model's [0, " + std::to_string(check.classes) +
                 ")";
      return "";
    }
    // Every token is a label somewhere: each must index a class.
    std::vector<int64_t> document;
    for (uint64_t d = 0; d < data.numDocuments(); ++d) {
      document.resize(data.length(d));
      data.read(d, 0, document.size(), document.data());
      for (size_t t = 0; t < document.size(); ++t)
        if (check.classes &&
            (document[t] < 0 || uint64_t(document[t]) >= check.classes))
          return data.describe() + ": document " + std::to_string(d) +
                 " has token " + std::to_string(document[t]) + " at " +
                 std::to_string(t) + ", outside the model's [0, " +
                 std::to_string(check.classes) + ")";
    }
    return "";
  }
  for (size_t a = 0; a < arrays_.size(); ++a) {
    const Tensor &array = arrays_[a];
    int64_t perSample = numSamples_ ? array.numElements() / numSamples_ : 0;
    bool labels = roles_[a] == BindingRole::Label &&
                  (array.dtype == DType::Int64 || array.dtype == DType::Int32 ||
                   array.dtype == DType::Int8);
    auto where = [&](int64_t i) {
      return files_[a] + ": sample " +
             std::to_string(perSample ? i / perSample : 0);
    };
    for (int64_t i = 0; i < array.numElements(); ++i) {
      if (const char *what = nonFinite(array, i))
        return where(i) + (what[0] == 'N' ? " has a " : " has an ") + what +
               " (element " +
               std::to_string(i % std::max<int64_t>(perSample, 1)) + ")";
      if (!labels || check.classes == 0)
        continue;
      int64_t label = integerElement(array, i);
      if (check.hasIgnore && label == check.ignoreIndex)
        continue;
      if (label < 0 || static_cast<uint64_t>(label) >= check.classes)
        return where(i) + " has label " + std::to_string(label) +
               ", outside [0, " + std::to_string(check.classes) + ")" +
               (check.hasIgnore ? " (ignore_index " +
                                      std::to_string(check.ignoreIndex) + ")"
                                : "");
    }
  }
  return "";
}

} // namespace ztc::rt
