//===- TokenDataset.cpp - variable-length token documents -----------------===//

#include "runtime/train/TokenDataset.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/io/Npy.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ztc::rt {

MappedFile::MappedFile(const std::string &path) : path_(path) {
  int fd = ::open(requireRegularFile(path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int error = errno;
    ::close(fd);
    throw Error(path + ": cannot stat: " + std::strerror(error));
  }
  size_ = uint64_t(info.st_size);
  if (size_ > 0) {
    void *mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      int error = errno;
      ::close(fd);
      throw Error(path + ": cannot map: " + std::strerror(error));
    }
    data_ = static_cast<const unsigned char *>(mapped);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_)
    ::munmap(const_cast<unsigned char *>(data_), size_);
}

namespace {

/// Bytes per token of a Megatron type code (integers only), or 0.
unsigned tokenBytes(unsigned code) {
  switch (code) {
  case 1: // uint8
  case 2: // int8
    return 1;
  case 3: // int16
  case 8: // uint16
    return 2;
  case 4: // int32
    return 4;
  case 5: // int64
    return 8;
  default:
    return 0;
  }
}

const char *tokenTypeName(unsigned code) {
  switch (code) {
  case 1:
    return "uint8";
  case 2:
    return "int8";
  case 3:
    return "int16";
  case 4:
    return "int32";
  case 5:
    return "int64";
  case 8:
    return "uint16";
  default:
    return "?";
  }
}

template <typename T> T load(const unsigned char *at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

bool endsWith(const std::string &text, const std::string &tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

} // namespace

std::string megatronPrefix(const std::string &path) {
  if (endsWith(path, ".bin") || endsWith(path, ".idx"))
    return path.substr(0, path.size() - 4);
  return path;
}

std::string documentIndexFile(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return joinPath(path, "offsets.npy");
  return megatronPrefix(path) + ".idx";
}

TokenDataset TokenDataset::open(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  TokenDataset dataset;
  if (fs::is_directory(path, ec)) {
    // ztc's layout: tokens.npy + offsets.npy.
    std::string tokensPath = joinPath(path, "tokens.npy");
    std::string offsetsPath = joinPath(path, "offsets.npy");
    for (const std::string &file : {tokensPath, offsetsPath})
      if (!fs::exists(file, ec))
        throw Error(path + ": no " + fs::path(file).filename().string() +
                    " (a token dataset holds tokens.npy and offsets.npy; "
                    "tools/ztc_dataset.py writes them)");
    NpyHeader tokens = readNpyHeader(tokensPath);
    if (tokens.shape.size() != 1 ||
        (tokens.dtype != DType::Int32 && tokens.dtype != DType::Int64))
      throw Error(tokensPath +
                  ": expected int32 or int64 tokens of one "
                  "dimension, got " +
                  describeType(tokens.dtype, tokens.shape));
    NpyHeader offsets = readNpyHeader(offsetsPath);
    if (offsets.shape.size() != 1 || offsets.dtype != DType::Int64 ||
        offsets.shape[0] < 1)
      throw Error(offsetsPath +
                  ": expected int64 offsets [documents + 1], "
                  "got " +
                  describeType(offsets.dtype, offsets.shape));
    dataset.tokensFile_ = std::make_shared<MappedFile>(tokensPath);
    dataset.indexFile_ = std::make_shared<MappedFile>(offsetsPath);
    dataset.tokensStart_ = tokens.dataOffset;
    dataset.tokenCode_ = tokens.dtype == DType::Int32 ? 4 : 5;
    dataset.tokens_ = uint64_t(tokens.shape[0]);
    dataset.documents_ = uint64_t(offsets.shape[0] - 1);
    const unsigned char *at = dataset.indexFile_->data() + offsets.dataOffset;
    dataset.starts_.resize(dataset.documents_ + 1);
    for (uint64_t d = 0; d <= dataset.documents_; ++d) {
      int64_t start = load<int64_t>(at + 8 * d);
      if (d == 0 && start != 0)
        throw Error(offsetsPath + ": the first offset is " +
                    std::to_string(start) + "; documents start at 0");
      if (d > 0 && start < int64_t(dataset.starts_[d - 1]))
        throw Error(offsetsPath + ": document " + std::to_string(d - 1) +
                    " ends at " + std::to_string(start) +
                    ", before it starts at " +
                    std::to_string(dataset.starts_[d - 1]));
      if (uint64_t(start) > dataset.tokens_)
        throw Error(offsetsPath + ": document " + std::to_string(d - 1) +
                    " ends at token " + std::to_string(start) +
                    ", past the end of " + tokensPath + " (" +
                    std::to_string(dataset.tokens_) + " tokens)");
      dataset.starts_[d] = uint64_t(start);
    }
    if (dataset.starts_.back() != dataset.tokens_)
      throw Error(offsetsPath + ": the documents end at token " +
                  std::to_string(dataset.starts_.back()) + ", but " +
                  tokensPath + " holds " + std::to_string(dataset.tokens_) +
                  " tokens");
    std::string labelsPath = joinPath(path, "document_labels.npy");
    if (fs::exists(labelsPath, ec)) {
      Tensor labels = readNpy(labelsPath);
      if (labels.shape != std::vector<int64_t>{int64_t(dataset.documents_)} ||
          (labels.dtype != DType::Int32 && labels.dtype != DType::Int64))
        throw Error(labelsPath + ": expected int32 or int64 labels [" +
                    std::to_string(dataset.documents_) +
                    "] (one per document), got " + labels.describe());
      for (int64_t d = 0; d < labels.numElements(); ++d)
        dataset.labels_.push_back(labels.dtype == DType::Int32
                                      ? labels.data<int32_t>()[d]
                                      : labels.data<int64_t>()[d]);
    }
    dataset.description_ =
        path + " (ztc tokens: " + std::to_string(dataset.documents_) +
        " documents" + (dataset.labels_.empty() ? "" : " with labels") + ", " +
        std::to_string(dataset.tokens_) + " tokens of " +
        tokenTypeName(dataset.tokenCode_) + ")";
    return dataset;
  }

  // Megatron's layout: PREFIX.bin + PREFIX.idx.
  std::string prefix = megatronPrefix(path);
  std::string idxPath = prefix + ".idx", binPath = prefix + ".bin";
  if (!fs::exists(idxPath, ec) || !fs::exists(binPath, ec))
    throw Error(path +
                ": not a token dataset (a directory with tokens.npy "
                "and offsets.npy, or PREFIX of PREFIX.bin and "
                "PREFIX.idx): " +
                (fs::exists(idxPath, ec) ? binPath : idxPath) +
                " does not exist");
  dataset.indexFile_ = std::make_shared<MappedFile>(idxPath);
  dataset.tokensFile_ = std::make_shared<MappedFile>(binPath);
  const MappedFile &idx = *dataset.indexFile_;
  const unsigned char *at = idx.data();
  constexpr uint64_t kHeader = 9 + 8 + 1 + 8 + 8;
  if (idx.size() < 9 || std::memcmp(at, "MMIDIDX\0\0", 9) != 0)
    throw Error(idxPath + ": not a Megatron indexed dataset (no MMIDIDX "
                          "magic)");
  if (idx.size() < kHeader)
    throw Error(idxPath + ": truncated header (" + std::to_string(idx.size()) +
                " bytes)");
  uint64_t version = load<uint64_t>(at + 9);
  if (version != 1)
    throw Error(idxPath + ": index version " + std::to_string(version) +
                "; ztc reads version 1");
  unsigned code = at[17];
  if (!tokenBytes(code))
    throw Error(idxPath + ": token type code " + std::to_string(code) +
                " is not an integer type (1 uint8, 2 int8, 3 int16, 4 int32, "
                "5 int64, 8 uint16)");
  uint64_t sequences = load<uint64_t>(at + 18);
  uint64_t documents = load<uint64_t>(at + 26);
  // Each count is bounded by the file before anything is multiplied.
  uint64_t room = idx.size() - kHeader;
  if (sequences > room / 12 || documents > room / 8 ||
      kHeader + 12 * sequences + 8 * documents != idx.size())
    throw Error(idxPath + ": " + std::to_string(idx.size()) +
                " bytes, but its header promises " + std::to_string(sequences) +
                " sequences and a document "
                "index of " +
                std::to_string(documents) +
                " (a multimodal index, or a truncated file?)");
  if (documents < 1)
    throw Error(idxPath + ": the document index is empty; it ends with the "
                          "sequence count");
  unsigned width = tokenBytes(code);
  const unsigned char *sizes = at + kHeader;
  const unsigned char *pointers = sizes + 4 * sequences;
  const unsigned char *index = pointers + 8 * sequences;
  // Sequences lie end to end from byte 0 of the .bin.
  uint64_t expected = 0;
  for (uint64_t s = 0; s < sequences; ++s) {
    int32_t size = load<int32_t>(sizes + 4 * s);
    int64_t pointer = load<int64_t>(pointers + 8 * s);
    if (size < 0)
      throw Error(idxPath + ": sequence " + std::to_string(s) + " has length " +
                  std::to_string(size));
    uint64_t end = expected + uint64_t(size) * width;
    if (pointer < 0 || uint64_t(pointer) != expected)
      throw Error(idxPath + ": sequence " + std::to_string(s) +
                  " starts at byte " + std::to_string(pointer) + " of " +
                  binPath + ", not at " + std::to_string(expected) +
                  " where the one before it ends");
    if (end > dataset.tokensFile_->size())
      throw Error(idxPath + ": sequence " + std::to_string(s) +
                  " lies at bytes [" + std::to_string(expected) + ", " +
                  std::to_string(end) + ") of " + binPath + ", which has " +
                  std::to_string(dataset.tokensFile_->size()));
    expected = end;
  }
  if (expected != dataset.tokensFile_->size())
    throw Error(binPath + ": " + std::to_string(dataset.tokensFile_->size()) +
                " bytes, but " + idxPath + "'s sequences cover " +
                std::to_string(expected));
  dataset.tokenCode_ = code;
  dataset.tokens_ = expected / width;
  dataset.documents_ = documents - 1;
  dataset.starts_.resize(documents);
  uint64_t previous = 0, tokenAt = 0, sequence = 0;
  for (uint64_t d = 0; d < documents; ++d) {
    int64_t first = load<int64_t>(index + 8 * d);
    if ((d == 0 && first != 0) || first < int64_t(previous) ||
        uint64_t(first) > sequences)
      throw Error(idxPath + ": document " + std::to_string(d == 0 ? 0 : d - 1) +
                  " ends at sequence " + std::to_string(first) +
                  " (the index must start at 0, not "
                  "decrease, and end at " +
                  std::to_string(sequences) + ")");
    // Tokens before sequence `first`.
    for (; sequence < uint64_t(first); ++sequence)
      tokenAt += uint64_t(load<int32_t>(sizes + 4 * sequence));
    dataset.starts_[d] = tokenAt;
    previous = uint64_t(first);
  }
  if (previous != sequences)
    throw Error(idxPath + ": the document index ends at sequence " +
                std::to_string(previous) + ", not at the last (" +
                std::to_string(sequences) + ")");
  dataset.description_ = prefix + " (Megatron indexed dataset: " +
                         std::to_string(dataset.documents_) + " documents, " +
                         std::to_string(dataset.tokens_) + " tokens of " +
                         tokenTypeName(code) + ")";
  return dataset;
}

uint64_t TokenDataset::length(uint64_t doc) const {
  if (doc >= documents_)
    throw Error(description_ + ": no document " + std::to_string(doc));
  return starts_[doc + 1] - starts_[doc];
}

int64_t TokenDataset::token(uint64_t i) const {
  const unsigned char *at =
      tokensFile_->data() + tokensStart_ + i * tokenBytes(tokenCode_);
  switch (tokenCode_) {
  case 1:
    return *at;
  case 2:
    return load<int8_t>(at);
  case 3:
    return load<int16_t>(at);
  case 4:
    return load<int32_t>(at);
  case 8:
    return load<uint16_t>(at);
  default:
    return load<int64_t>(at);
  }
}

void TokenDataset::read(uint64_t doc, uint64_t from, uint64_t count,
                        int64_t *out) const {
  uint64_t size = length(doc);
  if (from > size || count > size - from)
    throw Error(description_ + ": tokens [" + std::to_string(from) + ", " +
                std::to_string(from + count) + ") of document " +
                std::to_string(doc) + ", which has " + std::to_string(size));
  uint64_t start = starts_[doc] + from;
  for (uint64_t i = 0; i < count; ++i)
    out[i] = token(start + i);
}

} // namespace ztc::rt
