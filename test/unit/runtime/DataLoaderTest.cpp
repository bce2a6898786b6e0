//===- DataLoaderTest.cpp - shuffled batches from .npy arrays -------------===//
//
// The PRNG against splitmix64's published outputs, the epoch permutation
// against values from an independent implementation of the documented
// algorithm (so the order is pinned across machines), batching with the
// last incomplete batch dropped, resuming at a position, and every error.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/DataLoader.h"

#include "TestUtil.h"
#include "runtime/Error.h"
#include "runtime/io/Npy.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <numeric>

using namespace ztc::rt;
using ztc::rt::test::TempDir;
using ztc::rt::test::writeText;

namespace {

/// Inputs x float32[4,3] and labels int64[4]: batches of 4.
Manifest batchManifest() {
  Manifest manifest;
  manifest.kind = ArtifactKind::Train;
  manifest.bindings = {
      {BindingRole::Input, "x", "x", DType::Float32, {4, 3}},
      {BindingRole::Param, "w", "", DType::Float32, {3}},
      {BindingRole::Input, "labels", "labels", DType::Int64, {4}},
  };
  return manifest;
}

/// `count` samples: x[i] = (i, i + 0.25, i + 0.5), labels[i] = i.
void writeSamples(const std::string &dir, int64_t count) {
  std::filesystem::create_directories(dir);
  Tensor x(DType::Float32, {count, 3});
  Tensor labels(DType::Int64, {count});
  for (int64_t i = 0; i < count; ++i) {
    for (int j = 0; j < 3; ++j)
      x.data<float>()[i * 3 + j] = static_cast<float>(i) + 0.25f * j;
    labels.data<int64_t>()[i] = i;
  }
  writeNpy(dir + "/x.npy", x);
  writeNpy(dir + "/labels.npy", labels);
}

/// The sample indices of a batch, checking that x and labels agree.
std::vector<int64_t> samplesOf(const std::vector<Tensor> &batch) {
  EXPECT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].describe(), "float32[4,3]");
  EXPECT_EQ(batch[1].describe(), "int64[4]");
  std::vector<int64_t> samples;
  for (int k = 0; k < 4; ++k) {
    int64_t label = batch[1].data<int64_t>()[k];
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(batch[0].data<float>()[k * 3 + j],
                static_cast<float>(label) + 0.25f * j);
    samples.push_back(label);
  }
  return samples;
}

std::vector<int64_t> slice(const std::vector<uint64_t> &order, size_t begin,
                           size_t count) {
  return std::vector<int64_t>(order.begin() + begin,
                              order.begin() + begin + count);
}

} // namespace

TEST(DataLoaderTest, SplitMix64MatchesTheReference) {
  // The first outputs of splitmix64 seeded with 0 (Vigna's splitmix64.c).
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(rng.next(), 0x06C45D188009454Full);
  SplitMix64 small(7);
  for (int i = 0; i < 1000; ++i)
    EXPECT_LT(small.below(3), 3u);
}

TEST(DataLoaderTest, PermutationIsPinned) {
  // From an independent (Python) implementation of the documented
  // algorithm: splitmix64 seeded with next(seed) ^ next(~epoch), a
  // Fisher-Yates shuffle from the end, bounded draws by rejection.
  EXPECT_EQ(epochPermutation(10, 42, 0),
            (std::vector<uint64_t>{3, 4, 2, 1, 7, 8, 9, 5, 6, 0}));
  EXPECT_EQ(epochPermutation(10, 42, 1),
            (std::vector<uint64_t>{8, 0, 6, 9, 3, 1, 5, 7, 4, 2}));
  EXPECT_EQ(epochPermutation(10, 0, 0),
            (std::vector<uint64_t>{2, 3, 9, 0, 4, 1, 6, 5, 7, 8}));

  std::vector<uint64_t> order = epochPermutation(1000, 5, 3);
  std::vector<uint64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<uint64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), uint64_t(0));
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(order, identity);
  EXPECT_NE(order, epochPermutation(1000, 5, 4));
  EXPECT_NE(order, epochPermutation(1000, 6, 3));
  EXPECT_EQ(order, epochPermutation(1000, 5, 3));
  EXPECT_TRUE(epochPermutation(0, 1, 1).empty());
}

TEST(DataLoaderTest, BatchesFollowThePermutationAndDropTheRemainder) {
  TempDir dir;
  writeSamples(dir / "data", 10);
  DataLoader loader(batchManifest(), dir / "data", 42);
  EXPECT_EQ(loader.numSamples(), 10u);
  EXPECT_EQ(loader.batchSize(), 4u);
  EXPECT_EQ(loader.batchesPerEpoch(), 2u);
  EXPECT_EQ(loader.bindingIndices(), (std::vector<size_t>{0, 2}));

  // 10 samples in batches of 4: each epoch uses 8 and drops the last 2 of
  // its permutation.
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<uint64_t> order = epochPermutation(10, 42, epoch);
    EXPECT_EQ(loader.position(), (DataPosition{epoch, 0}));
    EXPECT_EQ(samplesOf(loader.next()), slice(order, 0, 4)) << epoch;
    EXPECT_EQ(loader.position(), (DataPosition{epoch, 1}));
    EXPECT_EQ(samplesOf(loader.next()), slice(order, 4, 4)) << epoch;
  }
  EXPECT_EQ(loader.position(), (DataPosition{3, 0}));
}

TEST(DataLoaderTest, SeekResumesTheSameBatches) {
  TempDir dir;
  writeSamples(dir / "data", 13);
  DataLoader straight(batchManifest(), dir / "data", 9);
  std::vector<std::vector<int64_t>> expected;
  for (int i = 0; i < 7; ++i)
    expected.push_back(samplesOf(straight.next()));

  DataLoader resumed(batchManifest(), dir / "data", 9);
  resumed.seek({1, 1}); // batch 4 overall: 3 batches per epoch
  for (int i = 4; i < 7; ++i)
    EXPECT_EQ(samplesOf(resumed.next()), expected[i]) << i;

  EXPECT_EQ(ZTC_ERROR_MESSAGE(resumed.seek({0, 3})),
            "data position: batch 3 of an epoch that has 3 batches (13 "
            "samples, batches of 4)");

  // Every epoch number is a position, the largest too (it once stood for
  // "no permutation yet", and its batches read an empty one).
  const uint64_t last = std::numeric_limits<uint64_t>::max();
  resumed.seek({last, 2});
  std::vector<uint64_t> order = epochPermutation(13, 9, last);
  EXPECT_EQ(samplesOf(resumed.next()), slice(order, 8, 4));
  EXPECT_EQ(resumed.position(), (DataPosition{0, 0}));
}

TEST(DataLoaderTest, Errors) {
  TempDir dir;
  std::string data = dir / "data";
  auto error = [&](const Manifest &manifest = batchManifest()) {
    return ZTC_ERROR_MESSAGE(DataLoader(manifest, data, 0));
  };
  EXPECT_EQ(error(), "data directory " + data + " does not exist");

  writeSamples(data, 10);
  std::filesystem::remove(data + "/labels.npy");
  EXPECT_EQ(error(), "missing input file(s) in " + data +
                         ": labels.npy (input 'labels', batches of int64[4])");

  // Sample counts disagree.
  writeNpy(data + "/labels.npy", Tensor(DType::Int64, {9}));
  EXPECT_EQ(error(), "inputs disagree on the number of samples: x.npy has 10, "
                     "labels.npy has 9");

  // Wrong dtype, wrong per-sample shape, no sample dimension.
  writeNpy(data + "/labels.npy", Tensor(DType::Int32, {10}));
  EXPECT_EQ(error(), "input 'labels' (" + data +
                         "/labels.npy): expected int64[N] (samples of "
                         "int64[]), got int32[10]");
  writeNpy(data + "/labels.npy", Tensor(DType::Int64, {10}));
  writeNpy(data + "/x.npy", Tensor(DType::Float32, {10, 4}));
  EXPECT_EQ(error(), "input 'x' (" + data +
                         "/x.npy): expected float32[N,3] (samples of "
                         "float32[3]), got float32[10,4]");
  writeNpy(data + "/x.npy", Tensor(DType::Float32, {}));
  EXPECT_EQ(error(), "input 'x' (" + data +
                         "/x.npy): expected float32[N,3] (samples of "
                         "float32[3]), got float32[]");

  // A corrupt file names the input and the file.
  writeText(data + "/x.npy", "garbage");
  EXPECT_EQ(error(),
            "input 'x': " + data + "/x.npy: not a .npy file (bad magic)");

  // Fewer samples than one batch.
  writeSamples(data, 3);
  EXPECT_EQ(error(), data + " has 3 samples, fewer than one batch of 4");

  // Inputs must have a batch dimension, the same one.
  Manifest scalar = batchManifest();
  scalar.bindings[0].shape = {};
  EXPECT_EQ(error(scalar),
            "the artifact input 'x' (float32[]) has no batch dimension");
  Manifest uneven = batchManifest();
  uneven.bindings[2].shape = {2};
  EXPECT_EQ(error(uneven),
            "the artifact inputs disagree on the batch size: 'x' has 4, "
            "'labels' has 2");
  Manifest none = batchManifest();
  none.bindings = {none.bindings[1]};
  EXPECT_EQ(error(none), "the artifact has no input binding");
}
