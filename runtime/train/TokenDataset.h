//===- TokenDataset.h - variable-length token documents ---------*- C++ -*-===//
//
// A tokenized corpus as language-model pipelines keep it: documents of any
// length, end to end in one flat token array, with where each starts. Two
// layouts are read, in place (memory-mapped, never loaded whole):
//
//   DIR/tokens.npy + DIR/offsets.npy (ztc's; tools/ztc_dataset.py writes
//     it from a Hugging Face `datasets` tokenized dataset): tokens int32 or
//     int64 [T]; offsets int64 [D + 1], offsets[0] = 0, non-decreasing,
//     offsets[D] = T; document d is tokens[offsets[d] .. offsets[d + 1]).
//     Optionally DIR/document_labels.npy, int32 or int64 [D]: one label
//     per document (a sequence classifier's; read whole).
//   PREFIX.bin + PREFIX.idx (Megatron-LM's and DeepSpeed's indexed dataset,
//     "MMIDIDX"): the .idx holds the magic b"MMIDIDX\0\0", version 1 (u64),
//     the token type's code (u8: 1 uint8, 2 int8, 3 int16, 4 int32,
//     5 int64, 8 uint16), the sequence count N (u64) and the document
//     index's length M (u64), then the sequences' lengths (int32 [N]),
//     their byte offsets in the .bin (int64 [N]) and the document index
//     (int64 [M], the first sequence of each document, then N). Document d
//     is sequences [index[d], index[d + 1]), which lie end to end.
//
// Opening checks everything that costs no more than a pass over the index
// (not the tokens): a malformed file is one Error naming the file and,
// where one is at fault, the document, e.g.
//   DIR/offsets.npy: document 3 ends at 10, before it starts at 12
//   P.idx: sequence 7 lies at bytes [96, 112) of P.bin, which has 100
//   P.idx: not a Megatron indexed dataset (magic 'abc...')
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_TOKENDATASET_H
#define ZTC_RUNTIME_TOKENDATASET_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ztc::rt {

/// A read-only memory mapping of a whole file (empty files map nothing).
class MappedFile {
public:
  /// Maps the regular file at `path`; throws Error naming it.
  explicit MappedFile(const std::string &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const unsigned char *data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string &path() const { return path_; }

private:
  std::string path_;
  const unsigned char *data_ = nullptr;
  uint64_t size_ = 0;
};

/// The prefix of a Megatron pair named by `path`: the path itself, or
/// without its .bin or .idx.
std::string megatronPrefix(const std::string &path);

/// The file of a token dataset that holds its documents' boundaries (what
/// their lengths come from): DIR/offsets.npy for a directory, else the
/// Megatron pair's PREFIX.idx.
std::string documentIndexFile(const std::string &path);

class TokenDataset {
public:
  /// Opens `path`: a directory holding tokens.npy and offsets.npy, or the
  /// prefix of a .bin/.idx pair (`path` may also name either file).
  static TokenDataset open(const std::string &path);

  uint64_t numDocuments() const { return documents_; }
  uint64_t numTokens() const { return tokens_; }
  /// The tokens of document `doc` (< numDocuments()).
  uint64_t length(uint64_t doc) const;
  /// Copies `count` tokens of document `doc` from its token `from` into
  /// `out` as int64 (from + count <= length(doc)).
  void read(uint64_t doc, uint64_t from, uint64_t count, int64_t *out) const;
  /// "DIR (ztc tokens: 3 documents, 17 tokens of int32)", for messages.
  const std::string &describe() const { return description_; }
  /// Whether the dataset has document_labels.npy, and document `doc`'s.
  bool hasLabels() const { return !labels_.empty(); }
  int64_t label(uint64_t doc) const { return labels_[doc]; }

private:
  TokenDataset() = default;
  /// Token i of the flat array.
  int64_t token(uint64_t i) const;

  std::shared_ptr<MappedFile> tokensFile_, indexFile_;
  /// Where the flat token array starts in tokensFile_, and its element
  /// type as a Megatron code (4 int32, 5 int64, ...).
  uint64_t tokensStart_ = 0;
  unsigned tokenCode_ = 5;
  uint64_t documents_ = 0, tokens_ = 0;
  /// Document d spans tokens [starts_[d], starts_[d + 1]).
  std::vector<uint64_t> starts_;
  std::vector<int64_t> labels_;
  std::string description_;
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_TOKENDATASET_H
