//===- Sort.cuh - sorting distinct 64-bit keys on CUDA ----------*- C++ -*-===//
//
// sortKeys sorts a power-of-two count of uint64_t keys in place, ascending,
// with a bitonic network. Sorted keys are one array (equal keys are the
// same bits), so the result does not depend on how the network is
// scheduled: it is the same on every run, on the device and in the host
// emulation. (scatterAdd's keys are distinct but for those it skips.) Stages whose
// pairs lie within a tile of kSortTile keys run in one block's shared
// memory (tile kernels, Tiles.cuh), a phase per step; the steps of larger
// strides are one launch each over all the pairs. n keys take one launch
// up to kSortTile, and 1 + sum over s of (s + 1) launches for the stages
// 2^s kSortTile up to n (n = 8192: 6).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_SORT_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_SORT_CUH

#include "Common.cuh"
#include "Scratch.h"
#include "Tiles.cuh"

#include <cstdint>

namespace ztc::cuda {
namespace detail {

/// Keys a block sorts in shared memory (16 KiB).
constexpr int64_t kSortTile = 2048;

/// One step of the network on the pair `pair` (of n / 2): the keys at i and
/// i + stride, where i has the stride's bit clear, ordered ascending where
/// i's bit `stage` is clear and descending where it is set.
ZTC_HOST_DEVICE inline void sortPair(uint64_t *keys, int64_t base, int64_t pair,
                                     int64_t stride, int64_t stage) {
  const int64_t i = 2 * stride * (pair / stride) + pair % stride;
  uint64_t &a = keys[i], &b = keys[i + stride];
  const bool ascending = ((base + i) & stage) == 0;
  if ((a > b) == ascending) {
    const uint64_t t = a;
    a = b;
    b = t;
  }
}

/// The steps with strides of at least a tile: each a launch over every pair.
struct SortStrideBody {
  uint64_t *keys;
  int64_t stride, stage;
  ZTC_HOST_DEVICE void operator()(int64_t pair) const {
    sortPair(keys, 0, pair, stride, stage);
  }
};

/// The steps within a tile of `tile` keys, on a block's shared copy of it:
/// the stages first to last, from stride `firstStride` in the first stage
/// and from half the stage in the others, down to 1.
struct SortTileBody {
  uint64_t *keys;
  int64_t tile, first, last, firstStride;

  template <typename Threads>
  ZTC_HOST_DEVICE void operator()(int64_t block, unsigned char *shared,
                                  const Threads &threads) const {
    uint64_t *tileKeys = sharedAt<uint64_t>(shared, 0);
    uint64_t *global = keys + block * tile;
    threads.each([&](int t) {
      for (int64_t e = t; e < tile; e += kTileThreads)
        tileKeys[e] = global[e];
    });
    threads.sync();
    for (int64_t stage = first; stage <= last; stage <<= 1)
      for (int64_t stride = stage == first ? firstStride : stage / 2;
           stride > 0; stride >>= 1) {
        threads.each([&](int t) {
          for (int64_t pair = t; pair < tile / 2; pair += kTileThreads)
            sortPair(tileKeys, block * tile, pair, stride, stage);
        });
        threads.sync();
      }
    threads.each([&](int t) {
      for (int64_t e = t; e < tile; e += kTileThreads)
        global[e] = tileKeys[e];
    });
  }
};

/// Sorts keys[0, n) ascending, n a power of two (scratch::sortKeyCount).
inline void sortKeys(uint64_t *keys, int64_t n, cudaStream_t stream,
                     const char *kernel) {
  if (n < 2)
    return;
  const int64_t tile = n < kSortTile ? n : kSortTile;
  const int64_t bytes = tile * int64_t(sizeof(uint64_t));
  launchTileBlocks(n / tile, bytes, SortTileBody{keys, tile, 2, tile, 1},
                   stream, kernel);
  for (int64_t stage = 2 * tile; stage <= n; stage <<= 1) {
    for (int64_t stride = stage / 2; stride >= tile; stride >>= 1)
      launchElements(n / 2, SortStrideBody{keys, stride, stage}, stream,
                     kernel);
    launchTileBlocks(n / tile, bytes,
                     SortTileBody{keys, tile, stage, stage, tile / 2}, stream,
                     kernel);
  }
}

} // namespace detail
} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_SORT_CUH
