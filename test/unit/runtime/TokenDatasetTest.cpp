//===- TokenDatasetTest.cpp - variable-length token documents -------------===//
//
// The datasets the real libraries wrote (test/fixtures/datasets, made by
// test/models/make_datasets.py: megatron-core's IndexedDatasetBuilder in
// uint16 and int32, and tools/ztc_dataset.py from a Hugging Face `datasets`
// Dataset) read back as the documents they hold; and every malformed file,
// one error each, naming the file and the document.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TokenDataset.h"

#include "TestUtil.h"
#include "runtime/Error.h"
#include "runtime/io/Npy.h"
#include "runtime/train/DataLoader.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

using namespace ztc::rt;
using ztc::rt::test::TempDir;
using ztc::rt::test::writeText;

namespace {

std::string fixture(const std::string &name) {
  return std::string(ZTC_TEST_FIXTURES_DIR) + "/datasets/" + name;
}

std::vector<std::vector<int64_t>> documentsOf(const TokenDataset &dataset) {
  std::vector<std::vector<int64_t>> documents;
  for (uint64_t d = 0; d < dataset.numDocuments(); ++d) {
    std::vector<int64_t> tokens(dataset.length(d));
    dataset.read(d, 0, tokens.size(), tokens.data());
    documents.push_back(tokens);
  }
  return documents;
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void writeInt64s(const std::string &path, std::vector<int64_t> values) {
  Tensor tensor(DType::Int64, {int64_t(values.size())});
  std::memcpy(tensor.bytes.data(), values.data(), values.size() * 8);
  writeNpy(path, tensor);
}

void writeInt32s(const std::string &path, std::vector<int32_t> values) {
  Tensor tensor(DType::Int32, {int64_t(values.size())});
  std::memcpy(tensor.bytes.data(), values.data(), values.size() * 4);
  writeNpy(path, tensor);
}

} // namespace

TEST(TokenDatasetTest, ReadsWhatTheLibrariesWrote) {
  nlohmann::json expected =
      nlohmann::json::parse(readBytes(fixture("documents.json")));
  std::vector<std::vector<int64_t>> documents =
      expected.at("documents").get<std::vector<std::vector<int64_t>>>();
  ASSERT_EQ(documents.size(), 5u);
  for (const char *name : {"megatron_uint16", "megatron_int32", "hf"}) {
    TokenDataset dataset = TokenDataset::open(fixture(name));
    EXPECT_EQ(documentsOf(dataset), documents) << name;
    EXPECT_EQ(dataset.numTokens(), 13u) << name;
    EXPECT_EQ(dataset.length(2), 0u) << name;
  }
  // The .bin or .idx path names the pair too; the description says what.
  TokenDataset byIdx = TokenDataset::open(fixture("megatron_uint16.idx"));
  EXPECT_EQ(documentsOf(byIdx), documents);
  EXPECT_NE(byIdx.describe().find("Megatron indexed dataset: 5 documents, 13 "
                                  "tokens of uint16"),
            std::string::npos)
      << byIdx.describe();
  // A piece of a document: the second sequence of document 3 (65535 as
  // uint16, not -1).
  std::vector<int64_t> piece(3);
  byIdx.read(3, 2, 3, piece.data());
  EXPECT_EQ(piece, (std::vector<int64_t>{7, 6, 65535}));
  EXPECT_EQ(ZTC_ERROR_MESSAGE(byIdx.read(3, 4, 2, piece.data())),
            byIdx.describe() + ": tokens [4, 6) of document 3, which has 5");
  EXPECT_EQ(ZTC_ERROR_MESSAGE(byIdx.length(5)),
            byIdx.describe() + ": no document 5");
}

TEST(TokenDatasetTest, MalformedZtcLayouts) {
  TempDir dir;
  auto open = [&]() {
    return ZTC_ERROR_MESSAGE(TokenDataset::open(dir.path()));
  };
  std::string tokens = dir / "tokens.npy", offsets = dir / "offsets.npy";
  EXPECT_EQ(open(), dir.path() + ": no tokens.npy (a token dataset holds "
                                 "tokens.npy and offsets.npy; "
                                 "tools/ztc_dataset.py writes them)");
  writeInt32s(tokens, {1, 2, 3, 4, 5});
  EXPECT_EQ(open(), dir.path() + ": no offsets.npy (a token dataset holds "
                                 "tokens.npy and offsets.npy; "
                                 "tools/ztc_dataset.py writes them)");
  writeInt64s(offsets, {0, 2, 5});
  EXPECT_EQ(open(), "");
  writeInt64s(offsets, {1, 2, 5});
  EXPECT_EQ(open(), offsets + ": the first offset is 1; documents start at 0");
  writeInt64s(offsets, {0, 3, 2, 5});
  EXPECT_EQ(open(), offsets + ": document 1 ends at 2, before it starts at 3");
  writeInt64s(offsets, {0, 2, 7});
  EXPECT_EQ(open(), offsets + ": document 1 ends at token 7, past the end of " +
                        tokens + " (5 tokens)");
  writeInt64s(offsets, {0, 2, 4});
  EXPECT_EQ(open(), offsets + ": the documents end at token 4, but " + tokens +
                        " holds 5 tokens");
  writeInt32s(offsets, {0, 2, 5});
  EXPECT_EQ(open(),
            offsets + ": expected int64 offsets [documents + 1], got int32[3]");
  writeInt64s(offsets, {0, 2, 5});
  Tensor floats(DType::Float32, {5});
  writeNpy(tokens, floats);
  EXPECT_EQ(open(), tokens + ": expected int32 or int64 tokens of one "
                             "dimension, got float32[5]");
  // A truncated tokens.npy: the .npy reader's own message.
  writeInt32s(tokens, {1, 2, 3, 4, 5});
  std::string bytes = readBytes(tokens);
  writeText(tokens, bytes.substr(0, bytes.size() - 3));
  EXPECT_NE(open().find(tokens + ": truncated data: int32[5] needs 20 bytes"),
            std::string::npos)
      << open();
}

TEST(TokenDatasetTest, MalformedMegatronIndexes) {
  TempDir dir;
  std::string idx = readBytes(fixture("megatron_int32.idx"));
  std::string bin = readBytes(fixture("megatron_int32.bin"));
  std::string prefix = dir / "d";
  auto open = [&](const std::string &index, const std::string &data) {
    writeText(prefix + ".idx", index);
    writeText(prefix + ".bin", data);
    return ZTC_ERROR_MESSAGE(TokenDataset::open(prefix));
  };
  auto patched = [&](size_t at, const void *value, size_t size) {
    std::string copy = idx;
    std::memcpy(copy.data() + at, value, size);
    return copy;
  };
  EXPECT_EQ(open(idx, bin), "");
  EXPECT_EQ(open("MMIDIDY" + idx.substr(7), bin),
            prefix + ".idx: not a Megatron indexed dataset (no MMIDIDX magic)");
  EXPECT_EQ(open(idx.substr(0, 20), bin),
            prefix + ".idx: truncated header (20 bytes)");
  uint64_t two = 2;
  EXPECT_EQ(open(patched(9, &two, 8), bin),
            prefix + ".idx: index version 2; ztc reads version 1");
  unsigned char floats = 7;
  EXPECT_EQ(open(patched(17, &floats, 1), bin),
            prefix + ".idx: token type code 7 is not an integer type (1 uint8, "
                     "2 int8, 3 int16, 4 int32, 5 int64, 8 uint16)");
  uint64_t huge = uint64_t(1) << 62;
  EXPECT_EQ(open(patched(18, &huge, 8), bin),
            prefix + ".idx: 142 bytes, but its header promises "
                     "4611686018427387904 sequences and a document index of 6 "
                     "(a multimodal index, or a truncated file?)");
  EXPECT_EQ(open(idx + "x", bin),
            prefix + ".idx: 143 bytes, but its header promises 5 sequences "
                     "and a document index of 6 (a multimodal index, or a "
                     "truncated file?)");
  // Sequence lengths at 34, pointers at 54, the document index at 94.
  int32_t negative = -1;
  EXPECT_EQ(open(patched(34 + 4, &negative, 4), bin),
            prefix + ".idx: sequence 1 has length -1");
  int64_t elsewhere = 8;
  EXPECT_EQ(open(patched(54 + 8, &elsewhere, 8), bin),
            prefix + ".idx: sequence 1 starts at byte 8 of " + prefix +
                ".bin, not at 12 where the one before it ends");
  EXPECT_EQ(open(idx, bin.substr(0, 40)),
            prefix + ".idx: sequence 4 lies at bytes [36, 52) of " + prefix +
                ".bin, which has 40");
  EXPECT_EQ(open(idx, bin + "xxxx"), prefix + ".bin: 56 bytes, but " + prefix +
                                         ".idx's sequences cover 52");
  int64_t backwards = 0;
  EXPECT_EQ(open(patched(94 + 16, &backwards, 8), bin),
            prefix + ".idx: document 1 ends at sequence 0 (the index must "
                     "start at 0, not decrease, and end at 5)");
  int64_t short_end = 4;
  EXPECT_EQ(open(patched(94 + 40, &short_end, 8), bin),
            prefix + ".idx: the document index ends at sequence 4, not at the "
                     "last (5)");
  EXPECT_EQ(ZTC_ERROR_MESSAGE(TokenDataset::open(dir / "none")),
            dir / "none" +
                ": not a token dataset (a directory with tokens.npy and "
                "offsets.npy, or PREFIX of PREFIX.bin and PREFIX.idx): " +
                dir / "none.idx" + " does not exist");
}

//===----------------------------------------------------------------------===//
// Token datasets in the DataLoader: pack and pad.
//===----------------------------------------------------------------------===//

namespace {

/// A language model's data: tokens int64[2,4] and labels int64[2,4].
Manifest languageModel() {
  Manifest manifest;
  manifest.kind = ArtifactKind::Train;
  manifest.bindings = {
      {BindingRole::Input, "tokens", "tokens", DType::Int64, {2, 4}},
      {BindingRole::Param, "w", "", DType::Float32, {3}},
      {BindingRole::Label, "labels", "labels", DType::Int64, {2, 4}},
  };
  return manifest;
}

/// Documents d of length lengths[d] whose tokens are 100 * (d + 1) + i.
std::vector<std::vector<int64_t>>
writeCorpus(const std::string &dir, const std::vector<int64_t> &lengths) {
  std::filesystem::create_directories(dir);
  std::vector<std::vector<int64_t>> documents;
  std::vector<int64_t> tokens, offsets{0};
  for (size_t d = 0; d < lengths.size(); ++d) {
    documents.emplace_back();
    for (int64_t i = 0; i < lengths[d]; ++i)
      documents.back().push_back(100 * int64_t(d + 1) + i);
    tokens.insert(tokens.end(), documents.back().begin(),
                  documents.back().end());
    offsets.push_back(int64_t(tokens.size()));
  }
  writeInt64s(dir + "/tokens.npy", tokens);
  writeInt64s(dir + "/offsets.npy", offsets);
  return documents;
}

/// Rows of a batch as (input, labels) pairs.
std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
rowsOf(const std::vector<Tensor> &batch) {
  EXPECT_EQ(batch.size(), 2u);
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> rows;
  for (int k = 0; k < 2; ++k) {
    const int64_t *in = batch[0].data<int64_t>() + 4 * k;
    const int64_t *out = batch[1].data<int64_t>() + 4 * k;
    rows.push_back({{in, in + 4}, {out, out + 4}});
  }
  return rows;
}

} // namespace

TEST(TokenDatasetTest, PackCutsTheShuffledStreamIntoOverlappingRows) {
  TempDir dir;
  auto documents = writeCorpus(dir.path(), {3, 1, 0, 6, 2, 5});
  TokenBatching pack;
  pack.eos = 7;
  DataLoader loader(languageModel(), dir.path(), /*seed=*/3, false, pack);
  // 17 tokens + 6 end-of-document tokens: a stream of 23, rows of 5
  // overlapping by one: (23 - 1) / 4 = 5 rows, 2 batches of 2.
  ASSERT_EQ(loader.numSamples(), 5u);
  ASSERT_EQ(loader.batchesPerEpoch(), 2u);
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> stream;
    for (uint64_t d : epochPermutation(documents.size(), 3, epoch)) {
      stream.insert(stream.end(), documents[d].begin(), documents[d].end());
      stream.push_back(7);
    }
    for (uint64_t b = 0; b < 2; ++b) {
      auto rows = rowsOf(loader.next());
      for (uint64_t k = 0; k < 2; ++k) {
        uint64_t start = (b * 2 + k) * 4;
        EXPECT_EQ(rows[k].first,
                  std::vector<int64_t>(stream.begin() + start,
                                       stream.begin() + start + 4))
            << "epoch " << epoch << " row " << b * 2 + k;
        EXPECT_EQ(rows[k].second,
                  std::vector<int64_t>(stream.begin() + start + 1,
                                       stream.begin() + start + 5));
      }
    }
  }
  // Two epochs shuffle differently; a seek gives the same batch again.
  DataLoader again(languageModel(), dir.path(), 3, false, pack);
  again.seek({1, 1});
  loader.seek({1, 1});
  EXPECT_EQ(rowsOf(again.next()), rowsOf(loader.next()));
  again.seek({0, 0});
  DataLoader other(languageModel(), dir.path(), 3, false, pack);
  other.seek({1, 0});
  EXPECT_NE(rowsOf(again.next()), rowsOf(other.next()));
}

TEST(TokenDatasetTest, PadGivesEachDocumentARow) {
  TempDir dir;
  auto documents = writeCorpus(dir.path(), {3, 1, 0, 6, 2, 5});
  TokenBatching pad;
  pad.mode = "pad";
  pad.pad = 9;
  DataLoader loader(languageModel(), dir.path(), 11, false, pad);
  // Documents 1 and 2 have no label (under 2 tokens): 4 rows.
  ASSERT_EQ(loader.numSamples(), 4u);
  std::vector<uint64_t> kept{0, 3, 4, 5};
  std::vector<uint64_t> order = epochPermutation(4, 11, 0);
  for (uint64_t b = 0; b < 2; ++b) {
    auto rows = rowsOf(loader.next());
    for (uint64_t k = 0; k < 2; ++k) {
      const std::vector<int64_t> &doc = documents[kept[order[b * 2 + k]]];
      std::vector<int64_t> input(4, 9), labels(4, -100);
      for (size_t t = 0; t < 4 && t < doc.size(); ++t)
        input[t] = doc[t];
      for (size_t t = 0; t < 4 && t + 1 < doc.size(); ++t)
        labels[t] = doc[t + 1];
      EXPECT_EQ(rows[k].first, input);
      EXPECT_EQ(rows[k].second, labels);
    }
  }
  // Held-out data keeps the documents in order (evaluation's gather).
  DataLoader held(languageModel(), dir.path(), 11, true, pad);
  auto rows = rowsOf(held.gather({0, 1}, -100));
  EXPECT_EQ(rows[0].first, (std::vector<int64_t>{100, 101, 102, 9}));
  EXPECT_EQ(rows[1].second, (std::vector<int64_t>{401, 402, 403, 404}));
}

TEST(TokenDatasetTest, LoaderErrors) {
  TempDir dir;
  writeCorpus(dir.path(), {3, 1});
  TokenBatching pack;
  EXPECT_EQ(ZTC_ERROR_MESSAGE(
                DataLoader(languageModel(), dir.path(), 0, false, pack)),
            dir.path() +
                " (ztc tokens: 2 documents, 4 tokens of int64) makes 0 rows "
                "of 5 tokens (--batching pack), fewer than one batch of 2");
  Manifest images = languageModel();
  images.bindings[0].dtype = DType::Float32;
  EXPECT_EQ(ZTC_ERROR_MESSAGE(DataLoader(images, dir.path(), 0, false, pack)),
            dir.path() +
                " is a token dataset, which feeds token ids [B, S] (one "
                "integer input, beside which an attention mask, token type "
                "ids and position ids [B, S] may be named) and labels [B, S] "
                "(a language model's) or [B] (a sequence classifier's); the "
                "artifact takes tokens float32[2,4], labels int64[2,4]");
  // Labels [B] classify each document: they need document_labels.npy.
  Manifest classifier = languageModel();
  classifier.bindings[2].shape = {2};
  EXPECT_EQ(
      ZTC_ERROR_MESSAGE(DataLoader(classifier, dir.path(), 0, false, pack)),
      dir.path() + " (ztc tokens: 2 documents, 4 tokens of int64) has no "
                   "document_labels.npy, which the artifact's labels int64[2] "
                   "(one per row: a sequence classifier's) need; "
                   "tools/ztc_dataset.py --label-column writes it");
  TokenBatching unknown;
  unknown.mode = "sorted";
  EXPECT_EQ(ZTC_ERROR_MESSAGE(
                DataLoader(languageModel(), dir.path(), 0, false, unknown)),
            "--batching 'sorted': expected pack, pad or group");
}

// --batching group orders samples as the Hugging Face Trainer's
// group_by_length: transformers' get_length_grouped_indices, recorded for
// given permutations (test/models/make_datasets.py), element for element.
TEST(TokenDatasetTest, LengthGroupedOrderIsTheTrainers) {
  std::ifstream in(fixture("length_grouped.json"));
  nlohmann::json recorded = nlohmann::json::parse(in);
  ASSERT_EQ(recorded["cases"].size(), 4u);
  for (const nlohmann::json &item : recorded["cases"]) {
    std::vector<uint64_t> lengths = item["lengths"];
    std::vector<uint64_t> order = lengthGroupedOrder(
        item["permutation"].get<std::vector<uint64_t>>(),
        [&](uint64_t sample) { return lengths[sample]; },
        item["batch_size"].get<uint64_t>());
    EXPECT_EQ(order, item["order"].get<std::vector<uint64_t>>())
        << lengths.size() << " samples, batches of " << item["batch_size"];
  }
}

// Inputs beside the token ids, by name: the attention mask is 1 on tokens
// and 0 on padding, token type ids 0, position ids count from each
// document's start (under pack too, where EOS ends its document); labels
// [B] take each document's label from document_labels.npy.
TEST(TokenDatasetTest, MaskPositionsAndDocumentLabels) {
  TempDir dir;
  auto documents = writeCorpus(dir.path(), {3, 1, 0, 6, 2, 5});
  Manifest manifest = languageModel();
  manifest.bindings.push_back({BindingRole::Input,
                               "attention_mask",
                               "attention_mask",
                               DType::Float32,
                               {2, 4}});
  manifest.bindings.push_back({BindingRole::Input,
                               "position_ids",
                               "position_ids",
                               DType::Int64,
                               {2, 4}});
  manifest.bindings.push_back({BindingRole::Input,
                               "token_type_ids",
                               "token_type_ids",
                               DType::Int32,
                               {2, 4}});
  auto column = [](const Tensor &t, int k) {
    std::vector<int64_t> values;
    for (int i = 0; i < 4; ++i)
      values.push_back(
          t.dtype == DType::Float32 ? int64_t(t.data<float>()[4 * k + i])
          : t.dtype == DType::Int32 ? t.data<int32_t>()[4 * k + i]
                                    : t.data<int64_t>()[4 * k + i]);
    return values;
  };
  // Data inputs come in manifest order: ids, labels, mask, positions, types.
  TokenBatching pack;
  pack.eos = 7;
  DataLoader packed(manifest, dir.path(), 3, false, pack);
  std::vector<int64_t> stream, within;
  for (uint64_t d : epochPermutation(documents.size(), 3, 0)) {
    for (size_t t = 0; t <= documents[d].size(); ++t) {
      stream.push_back(t < documents[d].size() ? documents[d][t] : 7);
      within.push_back(int64_t(t));
    }
  }
  std::vector<Tensor> batch = packed.next();
  ASSERT_EQ(batch.size(), 5u);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(column(batch[0], k),
              std::vector<int64_t>(stream.begin() + 4 * k,
                                   stream.begin() + 4 * k + 4));
    EXPECT_EQ(column(batch[2], k), (std::vector<int64_t>{1, 1, 1, 1}));
    EXPECT_EQ(column(batch[3], k),
              std::vector<int64_t>(within.begin() + 4 * k,
                                   within.begin() + 4 * k + 4));
    EXPECT_EQ(column(batch[4], k), (std::vector<int64_t>{0, 0, 0, 0}));
  }
  // pad: the mask covers the document, positions count from 0.
  TokenBatching pad;
  pad.mode = "pad";
  DataLoader padded(manifest, dir.path(), 3, true, pad);
  batch = padded.gather({0, 1}, -100); // documents 0 (3 tokens) and 3 (6)
  EXPECT_EQ(column(batch[2], 0), (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(column(batch[2], 1), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(column(batch[3], 0), (std::vector<int64_t>{0, 1, 2, 3}));
  // A classifier: one label per row, the document's; documents of one
  // token count.
  Tensor labels(DType::Int64, {6});
  for (int64_t d = 0; d < 6; ++d)
    labels.data<int64_t>()[d] = 10 + d;
  writeNpy(dir.path() + "/document_labels.npy", labels);
  manifest.bindings[2].shape = {2};
  DataLoader classifier(manifest, dir.path(), 3, true, pad);
  EXPECT_EQ(classifier.numSamples(), 5u);  // all but the empty document
  batch = classifier.gather({1, 2}, -100); // documents 1 (1 token) and 3
  ASSERT_EQ(batch[1].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(batch[1].data<int64_t>()[0], 11);
  EXPECT_EQ(batch[1].data<int64_t>()[1], 13);
  EXPECT_EQ(column(batch[2], 0), (std::vector<int64_t>{1, 0, 0, 0}));
  // pack cannot classify; a labels file of another length is refused.
  EXPECT_EQ(ZTC_ERROR_MESSAGE(DataLoader(manifest, dir.path(), 3, false, pack)),
            "--batching pack joins documents, but the artifact classifies "
            "each (labels int64[2]): use --batching pad or group");
  writeNpy(dir.path() + "/document_labels.npy", Tensor(DType::Int64, {5}));
  EXPECT_EQ(ZTC_ERROR_MESSAGE(DataLoader(manifest, dir.path(), 3, true, pad)),
            dir.path() + "/document_labels.npy: expected int32 or int64 "
                         "labels [6] (one per document), got int64[5]");
}
