//===- Attention.cuh - fused attention on CUDA ------------------*- C++ -*-===//
//
// attention and attentionBackward (nn.attention, nn.attention_backward),
// FlashAttention's algorithm: the forward keeps the online softmax's
// running maximum and sum and rescales its accumulator when the maximum
// grows; the backward first computes each query's log-sum-exp and delta =
// rowsum(gradOut * out), kept in the call's planned scratch (Scratch.h),
// and dq, then in a second kernel dk and dv, which read the statistics
// back. No atomics, and no order that depends on scheduling.
//
// Two forms of each kernel:
//  - On tiles (heads of up to kTileSliceCols elements, a 4-byte compute
//    type): a block per tile of 64 queries (the forward, dq) or keys (dk,
//    dv) walks tiles of 32 keys (queries) loaded into shared memory, so
//    each is read once per tile rather than once per row (Tiles.cuh). GPT-2
//    small at 1,024 tokens read every key and value once per query before.
//  - A warp per row otherwise (double, larger heads, or a device without
//    the shared memory): the scores are warp shuffles, with no barrier;
//    heads of up to kAttentionRegisterHead elements keep each lane's
//    elements of the accumulators in registers, larger ones in the call's
//    scratch, each element owned by one lane.
// For bf16 and f16 with heads of multiples of 16 the tiles' products run
// on the tensor cores. ZTC_CUDA_ATTENTION=tiles or warp limits the paths
// (attentionPath), for comparisons on a GPU. All of them run in the host
// emulation (test/unit/runtime/CudaKernelsTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_ATTENTION_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_ATTENTION_CUH

#include "Common.cuh"
#include "Scratch.h"
#include "Tiles.cuh"

#include "../AttentionShape.h"
#include "../Dims.h"
#include "../Library.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ztc::cuda {

namespace detail {

/// What every attention body reads: the operands, their shapes, the scale,
/// the softcap (0: none), the causal flag and -infinity (lowestValue is
/// host only).
template <typename T> struct AttentionInputs {
  const T *q, *k, *v, *mask;
  AttentionShape shape;
  ComputeT<T> scale, softcap;
  bool causal;
  ComputeT<T> lowest;

  /// The dot product of query `i` and key `j` of batch entry `b`, reduced
  /// over the team (every thread gets it).
  template <typename Team>
  ZTC_HOST_DEVICE ComputeT<T> dot(int64_t b, int64_t i, int64_t j,
                                  const Team &team) const {
    using Acc = ComputeT<T>;
    const T *qi = q + shape.role[kAttentionQ].at(b, i);
    const T *kj = k + shape.role[kAttentionK].at(b, j);
    Acc partial = 0;
    for (int64_t c = team.rank(); c < shape.d; c += team.size())
      partial += load(qi[c]) * load(kj[c]);
    return team.reduce(partial, SumOp());
  }

  /// The score of query `i` and key `j` of batch entry `b` from their dot
  /// product: scaled, capped, masked.
  ZTC_HOST_DEVICE ComputeT<T> scoreOf(int64_t b, int64_t i, int64_t j,
                                      ComputeT<T> dot) const {
    ComputeT<T> s = dot * scale;
    if (softcap > 0)
      s = softcap * mathTanh(s / softcap);
    if (mask)
      s += maskAt(b, i, j);
    return s;
  }

  /// What a score's gradient is multiplied by to give the dot product's:
  /// the scale, times the cap's slope 1 - tanh^2 with a softcap.
  ZTC_HOST_DEVICE ComputeT<T> dotGradient(ComputeT<T> dot) const {
    if (!(softcap > 0))
      return scale;
    const ComputeT<T> t = mathTanh(dot * scale / softcap);
    return (1 - t * t) * scale;
  }

  /// The score of query `i` and key `j` of batch entry `b`, reduced over
  /// the team (every thread gets it).
  template <typename Team>
  ZTC_HOST_DEVICE ComputeT<T> score(int64_t b, int64_t i, int64_t j,
                                    const Team &team) const {
    return scoreOf(b, i, j, dot(b, i, j, team));
  }

  /// The mask's value for query `i` and key `j` of batch entry `b`.
  ZTC_HOST_DEVICE ComputeT<T> maskAt(int64_t b, int64_t i, int64_t j) const {
    return load(mask[shape.maskBase(b) + i * shape.maskRowStride +
                     j * shape.maskColStride]);
  }

  /// Query i's probability p of key j, from their dot product and the
  /// query's log-sum-exp, and their dot product's gradient ds = p (dO . v
  /// - delta) scale (times the cap's slope with a softcap), from dO . v and
  /// the query's delta; both 0 where the query does not see the key.
  struct PairGradient {
    ComputeT<T> p, ds;
  };
  ZTC_HOST_DEVICE PairGradient pairGradient(int64_t b, int64_t i, int64_t j,
                                            ComputeT<T> dot,
                                            ComputeT<T> gradDot,
                                            ComputeT<T> lse,
                                            ComputeT<T> delta) const {
    if (!sees(i, j))
      return {0, 0};
    const ComputeT<T> p = mathExp(tileScore(b, i, j, dot) - lse);
    return {p, p * (gradDot - delta) * dotGradient(dot)};
  }

  /// Whether query `i` sees key `j`, both within their operands.
  ZTC_HOST_DEVICE bool sees(int64_t i, int64_t j) const {
    return i < shape.tq && j < shape.keyEnd(i, causal);
  }

  /// The score of query `i` and key `j` of batch entry `b` from their dot
  /// product, as score() computes it; `lowest` where the query does not
  /// see the key, or either is past its end (the tile kernels' edges).
  ZTC_HOST_DEVICE ComputeT<T> tileScore(int64_t b, int64_t i, int64_t j,
                                        ComputeT<T> dot) const {
    if (!sees(i, j))
      return lowest;
    return scoreOf(b, i, j, dot);
  }
};

template <typename T>
AttentionInputs<T> attentionInputs(const T *q, const T *k, const T *v,
                                   const T *mask, const AttentionShape &shape,
                                   const AttentionParams &params) {
  AttentionInputs<T> in{q, k, v, mask, shape};
  in.scale = static_cast<ComputeT<T>>(params.scale);
  in.softcap = static_cast<ComputeT<T>>(params.softcap);
  in.causal = params.causal;
  in.lowest = lowestValue<ComputeT<T>>();
  return in;
}

/// Where a row's accumulators live. In registers (kInRegisters, heads of up
/// to kAttentionRegisterHead): lane r keeps elements r, r + lanes, ... in
/// slots 0, 1, ...; else in the row `at` of the call's scratch.
template <typename Acc, bool kInRegisters> struct RowAccumulators {
  Acc slots[scratch::kAttentionRegisterHead / rowLanes()];
  ZTC_HOST_DEVICE explicit RowAccumulators(Acc *) {}
  ZTC_HOST_DEVICE Acc &operator()(int slot, int64_t) { return slots[slot]; }
};
template <typename Acc> struct RowAccumulators<Acc, false> {
  Acc *at;
  ZTC_HOST_DEVICE explicit RowAccumulators(Acc *row) : at(row) {}
  ZTC_HOST_DEVICE Acc &operator()(int, int64_t c) { return at[c]; }
};

/// Row `offset` of the scratch accumulators `acc`; none in registers.
template <bool kInRegisters, typename Acc>
ZTC_HOST_DEVICE Acc *scratchRow(Acc *acc, int64_t offset) {
  if constexpr (kInRegisters)
    return nullptr;
  else
    return acc + offset;
}

/// Calls f(slot, c) for each element c < length of a row that lane `lane`
/// owns (c = lane + slot * lanes). In registers the loop has a fixed trip
/// count that nvcc unrolls, so the slots stay registers.
template <bool kInRegisters, typename F>
ZTC_HOST_DEVICE void forOwned(int64_t lane, int64_t length, F f) {
  if constexpr (kInRegisters) {
    constexpr int kSlots = scratch::kAttentionRegisterHead / rowLanes();
    ZTC_UNROLL
    for (int slot = 0; slot < kSlots; ++slot) {
      const int64_t c = lane + slot * rowLanes();
      if (c < length)
        f(slot, c);
    }
  } else {
    int slot = 0;
    for (int64_t c = lane; c < length; c += rowLanes(), ++slot)
      f(slot, c);
  }
}

/// The forward for one query (row = b * tq + i), a warp per row: the online
/// softmax over its keys; the accumulator (dv) in registers, or the rows
/// of `acc`.
template <typename T, bool kInRegisters> struct AttentionBody {
  AttentionInputs<T> in;
  ComputeT<T> *acc;
  T *out;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    const int64_t b = row / shape.tq, i = row % shape.tq, lane = team.rank();
    RowAccumulators<Acc, kInRegisters> a(
        scratchRow<kInRegisters>(acc, row * shape.dv));
    forOwned<kInRegisters>(lane, shape.dv,
                           [&](int slot, int64_t c) { a(slot, c) = 0; });
    Acc maximum = in.lowest, sum = 0;
    const int64_t keys = shape.keyEnd(i, in.causal);
    for (int64_t j = 0; j < keys; ++j) {
      Acc s = in.score(b, i, j, team);
      Acc newMax = s > maximum ? s : maximum;
      // Every score so far is -inf (masked): nothing to add yet. The same
      // decision on every lane, as they all hold the score.
      if (newMax == in.lowest)
        continue;
      Acc rescale = mathExp(maximum - newMax), p = mathExp(s - newMax);
      maximum = newMax;
      sum = sum * rescale + p;
      const T *vj = in.v + shape.role[kAttentionV].at(b, j);
      forOwned<kInRegisters>(lane, shape.dv, [&](int slot, int64_t c) {
        a(slot, c) = a(slot, c) * rescale + p * load(vj[c]);
      });
    }
    // A query whose every key is masked is 0 / 0, NaN, as softmax gives.
    T *o = out + shape.role[kAttentionOut].at(b, i);
    forOwned<kInRegisters>(lane, shape.dv, [&](int slot, int64_t c) {
      o[c] = store<T>(a(slot, c) / sum);
    });
  }
};

/// The backward's first kernel, a warp per query: its log-sum-exp and
/// delta (kept in `stats`, two per row, for the second kernel) and its
/// gradient dq, accumulated in registers or the rows of `acc` (d per row).
template <typename T, bool kInRegisters> struct AttentionGradQueryBody {
  AttentionInputs<T> in;
  const T *out, *gradOut;
  ComputeT<T> *stats, *acc;
  T *gradQ;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    const int64_t b = row / shape.tq, i = row % shape.tq, lane = team.rank();
    const int64_t keys = shape.keyEnd(i, in.causal);
    Acc maximum = in.lowest, sum = 0;
    for (int64_t j = 0; j < keys; ++j) {
      Acc s = in.score(b, i, j, team);
      Acc newMax = s > maximum ? s : maximum;
      if (newMax == in.lowest)
        continue;
      sum = sum * mathExp(maximum - newMax) + mathExp(s - newMax);
      maximum = newMax;
    }
    const Acc logSumExp = maximum + mathLog(sum);
    const T *gi = gradOut + shape.role[kAttentionGradOut].at(b, i),
            *oi = out + shape.role[kAttentionOut].at(b, i);
    Acc partial = 0;
    for (int64_t c = lane; c < shape.dv; c += team.size())
      partial += load(gi[c]) * load(oi[c]);
    const Acc delta = team.reduce(partial, SumOp());
    if (lane == 0) {
      stats[2 * row] = logSumExp;
      stats[2 * row + 1] = delta;
    }
    RowAccumulators<Acc, kInRegisters> dq(
        scratchRow<kInRegisters>(acc, row * shape.d));
    forOwned<kInRegisters>(lane, shape.d,
                           [&](int slot, int64_t c) { dq(slot, c) = 0; });
    for (int64_t j = 0; j < keys; ++j) {
      const Acc qk = in.dot(b, i, j, team);
      Acc p = mathExp(in.scoreOf(b, i, j, qk) - logSumExp);
      const T *vj = in.v + shape.role[kAttentionV].at(b, j);
      Acc dotPart = 0;
      for (int64_t c = lane; c < shape.dv; c += team.size())
        dotPart += load(gi[c]) * load(vj[c]);
      Acc ds = p * (team.reduce(dotPart, SumOp()) - delta) * in.dotGradient(qk);
      const T *kj = in.k + shape.role[kAttentionK].at(b, j);
      forOwned<kInRegisters>(lane, shape.d, [&](int slot, int64_t c) {
        dq(slot, c) += ds * load(kj[c]);
      });
    }
    T *gq = gradQ + shape.role[kAttentionGradQ].at(b, i);
    forOwned<kInRegisters>(lane, shape.d, [&](int slot, int64_t c) {
      gq[c] = store<T>(dq(slot, c));
    });
  }
};

/// The backward's second kernel, a warp per key (row = kb * tk + j, kb a
/// key/value entry): dk and dv over the queries that see the key, of each
/// query head that reads it in turn, from the first kernel's statistics;
/// accumulators in registers or the rows of `acc` (d + dv per row).
template <typename T, bool kInRegisters> struct AttentionGradKeyBody {
  AttentionInputs<T> in;
  const T *gradOut;
  const ComputeT<T> *stats;
  ComputeT<T> *acc;
  T *gradK, *gradV;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    const int64_t kb = row / shape.tk, j = row % shape.tk, lane = team.rank();
    const int64_t b0 = shape.queryEntry(kb, 0);
    const int64_t first = row * (shape.d + shape.dv);
    RowAccumulators<Acc, kInRegisters> dk(scratchRow<kInRegisters>(acc, first)),
        dv(scratchRow<kInRegisters>(acc, first + shape.d));
    forOwned<kInRegisters>(lane, shape.d,
                           [&](int slot, int64_t c) { dk(slot, c) = 0; });
    forOwned<kInRegisters>(lane, shape.dv,
                           [&](int slot, int64_t c) { dv(slot, c) = 0; });
    const T *vj = in.v + shape.role[kAttentionV].at(b0, j);
    for (int64_t g = 0; g < shape.group; ++g) {
      const int64_t b = shape.queryEntry(kb, g);
      // Causal: queries i >= j see key j.
      for (int64_t i = in.causal ? j : 0; i < shape.tq; ++i) {
        const int64_t queryRow = b * shape.tq + i;
        const Acc qk = in.dot(b, i, j, team);
        Acc p = mathExp(in.scoreOf(b, i, j, qk) - stats[2 * queryRow]);
        const T *gi = gradOut + shape.role[kAttentionGradOut].at(b, i);
        Acc dotPart = 0;
        forOwned<kInRegisters>(lane, shape.dv, [&](int slot, int64_t c) {
          Acc g = load(gi[c]);
          dotPart += g * load(vj[c]);
          dv(slot, c) += p * g;
        });
        Acc ds = p * (team.reduce(dotPart, SumOp()) - stats[2 * queryRow + 1]) *
                 in.dotGradient(qk);
        const T *qi = in.q + shape.role[kAttentionQ].at(b, i);
        forOwned<kInRegisters>(lane, shape.d, [&](int slot, int64_t c) {
          dk(slot, c) += ds * load(qi[c]);
        });
      }
    }
    T *gk = gradK + shape.role[kAttentionGradK].at(b0, j);
    T *gv = gradV + shape.role[kAttentionGradV].at(b0, j);
    forOwned<kInRegisters>(lane, shape.d, [&](int slot, int64_t c) {
      gk[c] = store<T>(dk(slot, c));
    });
    forOwned<kInRegisters>(lane, shape.dv, [&](int slot, int64_t c) {
      gv[c] = store<T>(dv(slot, c));
    });
  }
};

//===----------------------------------------------------------------------===//
// Tiles of queries and keys in shared memory
//===----------------------------------------------------------------------===//
//
// With heads of up to kTileSliceCols elements and a 4-byte compute type
// (f32, f16, bf16), the kernels run a block of kTileThreads threads per
// tile of kTileRows queries (the forward and dq) or keys (dk and dv), which
// loads the tile and then, one after another, tiles of kTileCols keys
// (queries) into shared memory: each key is read from global memory once
// per tile of queries rather than once per query. The scores of a pair of
// tiles are TileDots, their products with v (and dO, q, k) TileSlice
// accumulators in registers (Tiles.cuh). The forward's online softmax
// rescales once per tile of keys; a row's statistics live in shared memory,
// updated by one thread per row.

/// The padded row lengths of the tiles, and their offsets in a block's
/// shared memory, for one of the three kernels.
struct AttentionTiles {
  int64_t ld = 0, ldv = 0; // rows of q and k; of v and dO
  int64_t q = 0, k = 0, v = 0, g = 0, probs = 0, grads = 0;
  int64_t rowA = 0, rowB = 0, rowC = 0, rowD = 0;
  /// On the tensor cores: the 16-bit copies of the probabilities and the
  /// scores' gradients, and the f32 rows (`ldo` elements each) of the
  /// forward's accumulator, or where a backward's accumulators are staged
  /// to be stored (offset 0: over the tiles, once they are done with).
  int64_t probsHalf = 0, gradsHalf = 0, o = 0, ldo = 0;
  int64_t bytes = 0;
};

/// The scores' rows in shared memory: kTileCols, padded (f32). On the
/// tensor cores they must be a multiple of 4, and 16-bit rows one of 8.
constexpr int64_t kScoreRow = kTileCols + 1;
constexpr int64_t kMmaScoreRow = kTileCols + 4, kMmaHalfRow = kTileCols + 8;

enum class AttentionTileKernel { Forward, GradQuery, GradKey };

/// The shared memory of `kernel`'s block, on the tensor cores or not. The
/// forward and dq's kernel tile kTileRows queries (q, and dO) against
/// kTileCols keys (k and v); dk and dv's kernel kTileRows keys against
/// kTileCols queries.
template <typename T>
AttentionTiles attentionTiles(const AttentionShape &s,
                              AttentionTileKernel kernel, bool tensorCores) {
  using Acc = ComputeT<T>;
  AttentionTiles t;
  SharedLayout layout;
  t.ld = tensorCores ? s.d + 8 : sharedRowLength<T>(s.d);
  t.ldv = tensorCores ? s.dv + 8 : sharedRowLength<T>(s.dv);
  const bool byKeys = kernel == AttentionTileKernel::GradKey;
  const int64_t queries = byKeys ? kTileCols : kTileRows;
  const int64_t keys = byKeys ? kTileRows : kTileCols;
  const int64_t scoreRow = tensorCores ? kMmaScoreRow : kScoreRow;
  t.q = layout.take<T>(queries * t.ld);
  if (kernel != AttentionTileKernel::Forward)
    t.g = layout.take<T>(queries * t.ldv);
  t.k = layout.take<T>(keys * t.ld);
  t.v = layout.take<T>(keys * t.ldv);
  t.probs = layout.take<Acc>(kTileRows * scoreRow);
  // The gradients of the scores (SIMT, dk and dv), or the product of dO
  // and v (tensor cores, both backward kernels).
  if (byKeys || (tensorCores && kernel != AttentionTileKernel::Forward))
    t.grads = layout.take<Acc>(kTileRows * scoreRow);
  t.rowA = layout.take<Acc>(queries);
  t.rowB = layout.take<Acc>(queries);
  t.rowC = layout.take<Acc>(queries);
  t.rowD = layout.take<Acc>(queries);
  if (tensorCores) {
    if (kernel != AttentionTileKernel::GradQuery)
      t.probsHalf = layout.take<T>(kTileRows * kMmaHalfRow);
    if (kernel != AttentionTileKernel::Forward)
      t.gradsHalf = layout.take<T>(kTileRows * kMmaHalfRow);
    const int64_t width = kernel == AttentionTileKernel::Forward ? s.dv
                          : kernel == AttentionTileKernel::GradQuery
                              ? s.d
                              : (s.d > s.dv ? s.d : s.dv);
    t.ldo = width + 4;
    if (kernel == AttentionTileKernel::Forward)
      t.o = layout.take<Acc>(kTileRows * t.ldo);
    else if (layout.bytes < kTileRows * t.ldo * int64_t(sizeof(Acc)))
      layout.bytes = kTileRows * t.ldo * int64_t(sizeof(Acc));
  }
  t.bytes = layout.bytes;
  return t;
}

/// How a kernel runs: a warp per row, on tiles with products of their
/// rows by each thread, or on tiles with products on the tensor cores.
enum class AttentionPath { Warp, Tiles, TensorCores };

/// Copies rows [first, first + count) of batch entry `b` of an operand
/// (`rows`) into a shared tile with rows of `ld` elements; rows past the
/// operand's end are zeros.
template <typename T>
ZTC_HOST_DEVICE void loadTileRows(const TileThreads &threads, T *tile,
                                  int64_t ld, const T *src,
                                  const AttentionRows &rows, int64_t b,
                                  int64_t first, int64_t count) {
  const int64_t n = rows.length;
  threads.each([&](int t) {
    for (int64_t x = t; x < count * n; x += kTileThreads) {
      const int64_t r = x / n, e = x % n, row = first + r;
      tile[r * ld + e] =
          row < rows.rows ? src[rows.at(b, row) + e] : store<T>(0);
    }
  });
}

/// Loads `count` keys from `j0` of batch entry `b` into their tiles: k,
/// and with `values` v.
template <typename T>
ZTC_HOST_DEVICE void
loadKeyTile(const TileThreads &threads, const AttentionInputs<T> &in,
            const AttentionTiles &tiles, unsigned char *shared, int64_t b,
            int64_t j0, int64_t count, bool values) {
  loadTileRows(threads, sharedAt<T>(shared, tiles.k), tiles.ld, in.k,
               in.shape.role[kAttentionK], b, j0, count);
  if (values)
    loadTileRows(threads, sharedAt<T>(shared, tiles.v), tiles.ldv, in.v,
                 in.shape.role[kAttentionV], b, j0, count);
}

/// A block's tile of queries: batch entry `b`, the queries from `i0`, and
/// the keys any of them sees. The tiles with the most keys (the last, when
/// causal) come first.
struct QueryTile {
  int64_t b, i0, keys;
};
ZTC_HOST_DEVICE inline QueryTile queryTile(int64_t block, int64_t queryTiles,
                                           const AttentionShape &shape,
                                           bool causal) {
  QueryTile tile;
  tile.b = block / queryTiles;
  tile.i0 = (queryTiles - 1 - block % queryTiles) * kTileRows;
  const int64_t end =
      tile.i0 + kTileRows < shape.tq ? tile.i0 + kTileRows : shape.tq;
  tile.keys = shape.keyEnd(end - 1, causal);
  return tile;
}

/// Thread t's scores (AttentionInputs::tileScore) of the queries from
/// `i0` (the rows of qs) and the keys from `j0` (the rows of ks) into
/// `probs`, rows of kScoreRow.
template <typename T>
ZTC_HOST_DEVICE void tileScores(int t, const AttentionInputs<T> &in, int64_t b,
                                int64_t i0, int64_t j0, const T *qs,
                                const T *ks, int64_t ld, ComputeT<T> *probs) {
  ComputeT<T> dots[TileDots::kRows][TileDots::kCols];
  TileDots::compute(t, qs, ld, ks, ld, in.shape.d, dots);
  ZTC_UNROLL
  for (int a = 0; a < TileDots::kRows; ++a)
    ZTC_UNROLL
  for (int m = 0; m < TileDots::kCols; ++m) {
    const int r = TileDots::row(t, a), c = TileDots::col(t, m);
    probs[r * kScoreRow + c] = in.tileScore(b, i0 + r, j0 + c, dots[a][m]);
  }
}

/// One step of a query's online softmax, over a tile of its scores (`row`):
/// updates the running maximum and sum and returns the factor that
/// rescales what was added before; with `toProbabilities` the scores
/// become exp(score - maximum).
template <typename Acc>
ZTC_HOST_DEVICE Acc onlineSoftmaxRow(Acc *row, Acc &maximum, Acc &sum,
                                     Acc lowest, bool toProbabilities) {
  Acc tileMax = lowest;
  for (int c = 0; c < kTileCols; ++c)
    tileMax = row[c] > tileMax ? row[c] : tileMax;
  const Acc newMax = tileMax > maximum ? tileMax : maximum;
  // Every score so far is -inf (masked): nothing to add yet.
  if (newMax == lowest) {
    if (toProbabilities)
      for (int c = 0; c < kTileCols; ++c)
        row[c] = 0;
    return 1;
  }
  const Acc rescale = mathExp(maximum - newMax);
  Acc tileSum = 0;
  for (int c = 0; c < kTileCols; ++c) {
    const Acc p = mathExp(row[c] - newMax);
    if (toProbabilities)
      row[c] = p;
    tileSum += p;
  }
  sum = sum * rescale + tileSum;
  maximum = newMax;
  return rescale;
}

/// Stores thread t's part of a [kTileRows, n] accumulator as the rows from
/// `first` of an operand (those it has), each divided by divisors[row]
/// when given.
template <typename T>
ZTC_HOST_DEVICE void
storeSlice(int t, const TileSlice::Values<ComputeT<T>> &acc, T *dst,
           const AttentionRows &rows, int64_t b, int64_t first,
           const ComputeT<T> *divisors = nullptr) {
  ZTC_UNROLL
  for (int a = 0; a < TileSlice::kRows; ++a) {
    const int r = TileSlice::row(t, a);
    if (first + r >= rows.rows)
      continue;
    T *o = dst + rows.at(b, first + r);
    ZTC_UNROLL
    for (int m = 0; m < TileSlice::kCols; ++m) {
      const int c = TileSlice::col(t, m);
      if (c < rows.length)
        o[c] = store<T>(divisors ? acc[a][m] / divisors[r] : acc[a][m]);
    }
  }
}

/// The forward on a tile of queries: the online softmax over tiles of
/// keys. Shared rows: rowA the running maximum, rowB the sum, rowC the
/// last tile's rescaling.
template <typename T> struct AttentionTileBody {
  AttentionInputs<T> in;
  AttentionTiles tiles;
  int64_t queryTiles;
  T *out;
  ZTC_HOST_DEVICE void operator()(int64_t block, unsigned char *shared,
                                  const TileThreads &threads) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    const QueryTile tile = queryTile(block, queryTiles, shape, in.causal);
    const int64_t b = tile.b, i0 = tile.i0, keys = tile.keys;
    T *qs = sharedAt<T>(shared, tiles.q), *ks = sharedAt<T>(shared, tiles.k),
      *vs = sharedAt<T>(shared, tiles.v);
    Acc *probs = sharedAt<Acc>(shared, tiles.probs),
        *rowMax = sharedAt<Acc>(shared, tiles.rowA),
        *rowSum = sharedAt<Acc>(shared, tiles.rowB),
        *rowScale = sharedAt<Acc>(shared, tiles.rowC);
    loadTileRows(threads, qs, tiles.ld, in.q, shape.role[kAttentionQ], b, i0,
                 kTileRows);
    PerThread<TileSlice::Values<Acc>> acc;
    threads.each([&](int t) {
      TileSlice::zero(acc[t]);
      if (t < kTileRows) {
        rowMax[t] = in.lowest;
        rowSum[t] = 0;
      }
    });
    for (int64_t j0 = 0; j0 < keys; j0 += kTileCols) {
      threads.sync();
      loadKeyTile(threads, in, tiles, shared, b, j0, kTileCols, true);
      threads.sync();
      threads.each([&](int t) {
        tileScores(t, in, b, i0, j0, qs, ks, tiles.ld, probs);
      });
      threads.sync();
      threads.each([&](int t) {
        if (t < kTileRows)
          rowScale[t] = onlineSoftmaxRow(probs + t * kScoreRow, rowMax[t],
                                         rowSum[t], in.lowest, true);
      });
      threads.sync();
      threads.each([&](int t) {
        TileSlice::Values<Acc> &o = acc[t];
        ZTC_UNROLL
        for (int a = 0; a < TileSlice::kRows; ++a) {
          const Acc rescale = rowScale[TileSlice::row(t, a)];
          ZTC_UNROLL
          for (int m = 0; m < TileSlice::kCols; ++m)
            o[a][m] *= rescale;
        }
        TileSlice::add(t, probs, kScoreRow, vs, tiles.ldv, shape.dv, o);
      });
    }
    threads.sync();
    // A query whose every key is masked is 0 / 0, NaN, as softmax gives.
    threads.each([&](int t) {
      storeSlice(t, acc[t], out, shape.role[kAttentionOut], b, i0, rowSum);
    });
  }
};

/// The first part of dq's kernel on a tile of queries (from `i0` of batch
/// entry `b`), on tiles or the tensor cores: loads q and dO into their
/// tiles, computes each query's delta (rowD) and, over the tiles of keys,
/// its log-sum-exp (rowC; rowA and rowB the running maximum and sum), and
/// writes both into `stats`. `scores(t, j0)` writes thread t's part of the
/// scores of the keys from j0 into `probs` (rows of `scoreRow`): finished,
/// or (`dots`) their dot products, which each row's thread finishes.
template <typename T, typename Scores>
ZTC_HOST_DEVICE void
queryStatistics(const TileThreads &threads, const AttentionInputs<T> &in,
                const AttentionTiles &tiles, unsigned char *shared, int64_t b,
                int64_t i0, int64_t keys, const T *out, const T *gradOut,
                ComputeT<T> *stats, int64_t scoreRow, bool dots,
                Scores scores) {
  using Acc = ComputeT<T>;
  const AttentionShape &shape = in.shape;
  T *qs = sharedAt<T>(shared, tiles.q), *gs = sharedAt<T>(shared, tiles.g),
    *ks = sharedAt<T>(shared, tiles.k);
  Acc *probs = sharedAt<Acc>(shared, tiles.probs),
      *rowMax = sharedAt<Acc>(shared, tiles.rowA),
      *rowSum = sharedAt<Acc>(shared, tiles.rowB),
      *rowLse = sharedAt<Acc>(shared, tiles.rowC),
      *rowDelta = sharedAt<Acc>(shared, tiles.rowD);
  loadTileRows(threads, qs, tiles.ld, in.q, shape.role[kAttentionQ], b, i0,
               kTileRows);
  loadTileRows(threads, gs, tiles.ldv, gradOut, shape.role[kAttentionGradOut],
               b, i0, kTileRows);
  threads.sync();
  threads.each([&](int t) {
    if (t >= kTileRows)
      return;
    rowMax[t] = in.lowest;
    rowSum[t] = 0;
    Acc delta = 0;
    if (i0 + t < shape.tq) {
      const T *o = out + shape.role[kAttentionOut].at(b, i0 + t);
      for (int64_t c = 0; c < shape.dv; ++c)
        delta += load(gs[t * tiles.ldv + c]) * load(o[c]);
    }
    rowDelta[t] = delta;
  });
  for (int64_t j0 = 0; j0 < keys; j0 += kTileCols) {
    threads.sync();
    loadKeyTile(threads, in, tiles, shared, b, j0, kTileCols, false);
    threads.sync();
    threads.each([&](int t) { scores(t, j0); });
    threads.sync();
    threads.each([&](int t) {
      if (t >= kTileRows)
        return;
      Acc *row = probs + t * scoreRow;
      if (dots)
        for (int c = 0; c < kTileCols; ++c)
          row[c] = in.tileScore(b, i0 + t, j0 + c, row[c]);
      onlineSoftmaxRow(row, rowMax[t], rowSum[t], in.lowest, false);
    });
  }
  threads.sync();
  threads.each([&](int t) {
    if (t >= kTileRows)
      return;
    rowLse[t] = rowMax[t] + mathLog(rowSum[t]);
    if (i0 + t < shape.tq) {
      const int64_t row = b * shape.tq + i0 + t;
      stats[2 * row] = rowLse[t];
      stats[2 * row + 1] = rowDelta[t];
    }
  });
}

/// Loads dk and dv's kernel's tile of queries from `i0` of batch entry
/// `b`: q, dO, and (rowA, rowB) their log-sum-exp and delta from `stats`.
template <typename T>
ZTC_HOST_DEVICE void
loadQueryTile(const TileThreads &threads, const AttentionInputs<T> &in,
              const AttentionTiles &tiles, unsigned char *shared, int64_t b,
              int64_t i0, const T *gradOut, const ComputeT<T> *stats) {
  using Acc = ComputeT<T>;
  const AttentionShape &shape = in.shape;
  loadTileRows(threads, sharedAt<T>(shared, tiles.q), tiles.ld, in.q,
               shape.role[kAttentionQ], b, i0, kTileCols);
  loadTileRows(threads, sharedAt<T>(shared, tiles.g), tiles.ldv, gradOut,
               shape.role[kAttentionGradOut], b, i0, kTileCols);
  Acc *lse = sharedAt<Acc>(shared, tiles.rowA),
      *delta = sharedAt<Acc>(shared, tiles.rowB);
  threads.each([&](int t) {
    if (t >= kTileCols)
      return;
    const int64_t row = b * shape.tq + i0 + t;
    const bool inside = i0 + t < shape.tq;
    lse[t] = inside ? stats[2 * row] : Acc(0);
    delta[t] = inside ? stats[2 * row + 1] : Acc(0);
  });
}

/// Runs `body(b, i0)` for each tile of queries that sees the keys from
/// `j0` of key/value entry `kb`, once it is in shared memory
/// (loadQueryTile): the tiles of each query head that reads those keys in
/// turn (grouped-query attention), `b` its batch entry, from `j0` on when
/// causal (queries i >= j see key j). dk and dv's tile kernels add over
/// them.
template <typename T, typename Body>
ZTC_HOST_DEVICE void
forQueryTiles(const TileThreads &threads, const AttentionInputs<T> &in,
              const AttentionTiles &tiles, unsigned char *shared, int64_t kb,
              int64_t j0, const T *gradOut, const ComputeT<T> *stats,
              const Body &body) {
  const AttentionShape &shape = in.shape;
  for (int64_t g = 0; g < shape.group; ++g) {
    const int64_t b = shape.queryEntry(kb, g);
    for (int64_t i0 = in.causal ? j0 : 0; i0 < shape.tq; i0 += kTileCols) {
      threads.sync();
      loadQueryTile(threads, in, tiles, shared, b, i0, gradOut, stats);
      threads.sync();
      body(b, i0);
    }
  }
}

/// The backward's first kernel on a tile of queries: their log-sum-exp
/// and delta (into `stats`, as AttentionGradQueryBody), then dq over tiles
/// of keys. Shared rows: rowA the running maximum, rowB the sum, rowC the
/// log-sum-exp, rowD delta.
template <typename T> struct AttentionGradQueryTileBody {
  AttentionInputs<T> in;
  AttentionTiles tiles;
  int64_t queryTiles;
  const T *out, *gradOut;
  ComputeT<T> *stats;
  T *gradQ;
  ZTC_HOST_DEVICE void operator()(int64_t block, unsigned char *shared,
                                  const TileThreads &threads) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    const QueryTile tile = queryTile(block, queryTiles, shape, in.causal);
    const int64_t b = tile.b, i0 = tile.i0, keys = tile.keys;
    T *qs = sharedAt<T>(shared, tiles.q), *gs = sharedAt<T>(shared, tiles.g),
      *ks = sharedAt<T>(shared, tiles.k), *vs = sharedAt<T>(shared, tiles.v);
    Acc *probs = sharedAt<Acc>(shared, tiles.probs),
        *rowLse = sharedAt<Acc>(shared, tiles.rowC),
        *rowDelta = sharedAt<Acc>(shared, tiles.rowD);
    queryStatistics(threads, in, tiles, shared, b, i0, keys, out, gradOut,
                    stats, kScoreRow, false, [&](int t, int64_t j0) {
                      tileScores(t, in, b, i0, j0, qs, ks, tiles.ld, probs);
                    });
    PerThread<TileSlice::Values<Acc>> dq;
    threads.each([&](int t) { TileSlice::zero(dq[t]); });
    for (int64_t j0 = 0; j0 < keys; j0 += kTileCols) {
      threads.sync();
      loadKeyTile(threads, in, tiles, shared, b, j0, kTileCols, true);
      threads.sync();
      // ds = p (dO . v - delta) scale, into `probs`.
      threads.each([&](int t) {
        Acc dots[TileDots::kRows][TileDots::kCols];
        Acc gradDots[TileDots::kRows][TileDots::kCols];
        TileDots::compute(t, qs, tiles.ld, ks, tiles.ld, shape.d, dots);
        TileDots::compute(t, gs, tiles.ldv, vs, tiles.ldv, shape.dv, gradDots);
        ZTC_UNROLL
        for (int a = 0; a < TileDots::kRows; ++a)
          ZTC_UNROLL
        for (int m = 0; m < TileDots::kCols; ++m) {
          const int r = TileDots::row(t, a), c = TileDots::col(t, m);
          const int64_t i = i0 + r, j = j0 + c;
          probs[r * kScoreRow + c] =
              in.pairGradient(b, i, j, dots[a][m], gradDots[a][m], rowLse[r],
                              rowDelta[r])
                  .ds;
        }
      });
      threads.sync();
      threads.each([&](int t) {
        TileSlice::add(t, probs, kScoreRow, ks, tiles.ld, shape.d, dq[t]);
      });
    }
    threads.sync();
    threads.each([&](int t) {
      storeSlice(t, dq[t], gradQ, shape.role[kAttentionGradQ], b, i0);
    });
  }
};

/// The backward's second kernel on a tile of keys: dk and dv over tiles of
/// the queries that see them, from the first kernel's statistics. Shared
/// rows: rowA the queries' log-sum-exp, rowB their delta; `probs` holds p
/// and `grads` ds, a row per key.
template <typename T> struct AttentionGradKeyTileBody {
  AttentionInputs<T> in;
  AttentionTiles tiles;
  int64_t keyTiles;
  const T *gradOut;
  const ComputeT<T> *stats;
  T *gradK, *gradV;
  ZTC_HOST_DEVICE void operator()(int64_t block, unsigned char *shared,
                                  const TileThreads &threads) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    const int64_t kb = block / keyTiles, j0 = block % keyTiles * kTileRows;
    const int64_t b0 = shape.queryEntry(kb, 0);
    T *qs = sharedAt<T>(shared, tiles.q), *gs = sharedAt<T>(shared, tiles.g),
      *ks = sharedAt<T>(shared, tiles.k), *vs = sharedAt<T>(shared, tiles.v);
    Acc *probs = sharedAt<Acc>(shared, tiles.probs),
        *grads = sharedAt<Acc>(shared, tiles.grads),
        *lse = sharedAt<Acc>(shared, tiles.rowA),
        *delta = sharedAt<Acc>(shared, tiles.rowB);
    loadKeyTile(threads, in, tiles, shared, b0, j0, kTileRows, true);
    PerThread<TileSlice::Values<Acc>> dk, dv;
    threads.each([&](int t) {
      TileSlice::zero(dk[t]);
      TileSlice::zero(dv[t]);
    });
    forQueryTiles(
        threads, in, tiles, shared, kb, j0, gradOut, stats,
        [&](int64_t b, int64_t i0) {
          threads.each([&](int t) {
            Acc dots[TileDots::kRows][TileDots::kCols];
            Acc gradDots[TileDots::kRows][TileDots::kCols];
            TileDots::compute(t, ks, tiles.ld, qs, tiles.ld, shape.d, dots);
            TileDots::compute(t, vs, tiles.ldv, gs, tiles.ldv, shape.dv,
                              gradDots);
            ZTC_UNROLL
            for (int a = 0; a < TileDots::kRows; ++a)
              ZTC_UNROLL
            for (int m = 0; m < TileDots::kCols; ++m) {
              const int r = TileDots::row(t, a), c = TileDots::col(t, m);
              const int64_t i = i0 + c, j = j0 + r;
              const auto pair = in.pairGradient(
                  b, i, j, dots[a][m], gradDots[a][m], lse[c], delta[c]);
              probs[r * kScoreRow + c] = pair.p;
              grads[r * kScoreRow + c] = pair.ds;
            }
          });
          threads.sync();
          threads.each([&](int t) {
            TileSlice::add(t, probs, kScoreRow, gs, tiles.ldv, shape.dv, dv[t]);
            TileSlice::add(t, grads, kScoreRow, qs, tiles.ld, shape.d, dk[t]);
          });
        });
    threads.sync();
    threads.each([&](int t) {
      storeSlice(t, dk[t], gradK, shape.role[kAttentionGradK], b0, j0);
      storeSlice(t, dv[t], gradV, shape.role[kAttentionGradV], b0, j0);
    });
  }
};

//===----------------------------------------------------------------------===//
// The same tiles on the tensor cores
//===----------------------------------------------------------------------===//
//
// For 16-bit T with heads of multiples of 16, the products of tiles run on
// the tensor cores (WarpAccumulator, Tiles.cuh): each of the 8 warps one
// 16 x 16 piece of a [64, 32] tile of scores (and of dO v^T), and pieces of
// the [64, head] accumulators. As in FlashAttention, the probabilities and
// the scores' gradients are rounded to T before their products with v, k,
// q and dO; the sums are f32. The forward's accumulator lives in shared
// memory (f32), since the softmax rescales its rows, which a fragment's
// opaque layout does not allow; the backward's accumulators stay in the
// warps' fragments and are staged through shared memory to be stored.

/// Warp w's piece (fr, fc) of a [64, 32] tile of scores: 4 by 2 pieces.
ZTC_HOST_DEVICE inline int scorePieceRow(int w) { return w / 2; }
ZTC_HOST_DEVICE inline int scorePieceCol(int w) { return w % 2; }

/// The most 16 x 16 pieces of a [64, head] accumulator a warp holds.
constexpr int kWarpPieces =
    kTileRows / 16 * (kTileSliceCols / 16) / (kTileThreads / 32);

/// Writes rows [0, 64) of a staged f32 accumulator (`ld` per row, `n`
/// columns) as the rows from `first` of an operand (those it has), each
/// divided by divisors[row] when given.
template <typename T>
ZTC_HOST_DEVICE void
storeStaged(const TileThreads &threads, const ComputeT<T> *staged, int64_t ld,
            T *dst, const AttentionRows &rows, int64_t b, int64_t first,
            const ComputeT<T> *divisors = nullptr) {
  const int64_t n = rows.length;
  threads.each([&](int t) {
    for (int64_t x = t; x < kTileRows * n; x += kTileThreads) {
      const int64_t r = x / n, c = x % n;
      if (first + r < rows.rows)
        dst[rows.at(b, first + r) + c] = store<T>(
            divisors ? staged[r * ld + c] / divisors[r] : staged[r * ld + c]);
    }
  });
}

/// Stages a warp's pieces of a [64, n] accumulator (piece w + 8 p held in
/// acc[p]) into rows of `ld` floats.
template <int kPieces>
ZTC_HOST_DEVICE void stagePieces(int t, const WarpAccumulator (&acc)[kPieces],
                                 int64_t n, float *staged, int64_t ld) {
  const int w = t / 32, lane = t % 32, across = static_cast<int>(n / 16);
  ZTC_UNROLL
  for (int p = 0; p < kPieces; ++p) {
    const int f = w + p * (kTileThreads / 32);
    if (f < 4 * across)
      acc[p].store(lane, staged + (f / across) * 16 * ld + (f % across) * 16,
                   ld);
  }
}

/// The forward on the tensor cores. Shared rows: rowA the running maximum,
/// rowB the sum.
template <typename T> struct AttentionMmaBody {
  AttentionInputs<T> in;
  AttentionTiles tiles;
  int64_t queryTiles;
  T *out;
  ZTC_HOST_DEVICE void operator()(int64_t block, unsigned char *shared,
                                  const TileThreads &threads) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    const QueryTile tile = queryTile(block, queryTiles, shape, in.causal);
    const int64_t b = tile.b, i0 = tile.i0, keys = tile.keys;
    const int64_t ld = tiles.ld, ldv = tiles.ldv, ldo = tiles.ldo;
    T *qs = sharedAt<T>(shared, tiles.q), *ks = sharedAt<T>(shared, tiles.k),
      *vs = sharedAt<T>(shared, tiles.v),
      *probsHalf = sharedAt<T>(shared, tiles.probsHalf);
    Acc *scores = sharedAt<Acc>(shared, tiles.probs),
        *o = sharedAt<Acc>(shared, tiles.o),
        *rowMax = sharedAt<Acc>(shared, tiles.rowA),
        *rowSum = sharedAt<Acc>(shared, tiles.rowB);
    loadTileRows(threads, qs, ld, in.q, shape.role[kAttentionQ], b, i0,
                 kTileRows);
    threads.each([&](int t) {
      for (int64_t x = t; x < kTileRows * shape.dv; x += kTileThreads)
        o[x / shape.dv * ldo + x % shape.dv] = 0;
      if (t < kTileRows) {
        rowMax[t] = in.lowest;
        rowSum[t] = 0;
      }
    });
    const int across = static_cast<int>(shape.dv / 16);
    for (int64_t j0 = 0; j0 < keys; j0 += kTileCols) {
      threads.sync();
      loadKeyTile(threads, in, tiles, shared, b, j0, kTileCols, true);
      threads.sync();
      threads.each([&](int t) {
        const int w = t / 32, lane = t % 32;
        const int fr = scorePieceRow(w), fc = scorePieceCol(w);
        WarpAccumulator s;
        s.zero(lane);
        s.add<FragmentLayout::ColMajor>(lane, qs + fr * 16 * ld, ld,
                                        ks + fc * 16 * ld, ld, shape.d);
        s.store(lane, scores + fr * 16 * kMmaScoreRow + fc * 16, kMmaScoreRow);
      });
      threads.sync();
      threads.each([&](int t) {
        if (t >= kTileRows)
          return;
        Acc *row = scores + t * kMmaScoreRow;
        for (int c = 0; c < kTileCols; ++c)
          row[c] = in.tileScore(b, i0 + t, j0 + c, row[c]);
        const Acc rescale =
            onlineSoftmaxRow(row, rowMax[t], rowSum[t], in.lowest, true);
        for (int c = 0; c < kTileCols; ++c)
          probsHalf[t * kMmaHalfRow + c] = store<T>(row[c]);
        for (int64_t c = 0; c < shape.dv; ++c)
          o[t * ldo + c] *= rescale;
      });
      threads.sync();
      threads.each([&](int t) {
        const int w = t / 32, lane = t % 32;
        ZTC_UNROLL
        for (int p = 0; p < kWarpPieces; ++p) {
          const int f = w + p * (kTileThreads / 32);
          if (f >= 4 * across)
            continue;
          Acc *piece = o + (f / across) * 16 * ldo + (f % across) * 16;
          WarpAccumulator acc;
          acc.load(lane, piece, ldo);
          acc.add<FragmentLayout::RowMajor>(
              lane, probsHalf + (f / across) * 16 * kMmaHalfRow, kMmaHalfRow,
              vs + (f % across) * 16, ldv, kTileCols);
          acc.store(lane, piece, ldo);
        }
      });
    }
    threads.sync();
    // A query whose every key is masked is 0 / 0, NaN, as softmax gives.
    storeStaged(threads, o, ldo, out, shape.role[kAttentionOut], b, i0, rowSum);
  }
};

/// The backward's first kernel on the tensor cores (as
/// AttentionGradQueryTileBody). Shared rows: rowA the running maximum,
/// rowB the sum, rowC the log-sum-exp, rowD delta; `grads` dO v^T.
template <typename T> struct AttentionMmaGradQueryBody {
  AttentionInputs<T> in;
  AttentionTiles tiles;
  int64_t queryTiles;
  const T *out, *gradOut;
  ComputeT<T> *stats;
  T *gradQ;
  ZTC_HOST_DEVICE void operator()(int64_t block, unsigned char *shared,
                                  const TileThreads &threads) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    const QueryTile tile = queryTile(block, queryTiles, shape, in.causal);
    const int64_t b = tile.b, i0 = tile.i0, keys = tile.keys;
    const int64_t ld = tiles.ld, ldv = tiles.ldv;
    T *qs = sharedAt<T>(shared, tiles.q), *gs = sharedAt<T>(shared, tiles.g),
      *ks = sharedAt<T>(shared, tiles.k), *vs = sharedAt<T>(shared, tiles.v),
      *gradsHalf = sharedAt<T>(shared, tiles.gradsHalf);
    Acc *scores = sharedAt<Acc>(shared, tiles.probs),
        *gradDots = sharedAt<Acc>(shared, tiles.grads),
        *rowLse = sharedAt<Acc>(shared, tiles.rowC),
        *rowDelta = sharedAt<Acc>(shared, tiles.rowD);
    // Warp w's piece of the scores (and, `withGrad`, of dO v^T).
    auto products = [&](int t, bool withGrad) {
      const int w = t / 32, lane = t % 32;
      const int fr = scorePieceRow(w), fc = scorePieceCol(w);
      const int64_t at = fr * 16 * kMmaScoreRow + fc * 16;
      WarpAccumulator s;
      s.zero(lane);
      s.add<FragmentLayout::ColMajor>(lane, qs + fr * 16 * ld, ld,
                                      ks + fc * 16 * ld, ld, shape.d);
      s.store(lane, scores + at, kMmaScoreRow);
      if (!withGrad)
        return;
      WarpAccumulator dp;
      dp.zero(lane);
      dp.add<FragmentLayout::ColMajor>(lane, gs + fr * 16 * ldv, ldv,
                                       vs + fc * 16 * ldv, ldv, shape.dv);
      dp.store(lane, gradDots + at, kMmaScoreRow);
    };
    queryStatistics(threads, in, tiles, shared, b, i0, keys, out, gradOut,
                    stats, kMmaScoreRow, true,
                    [&](int t, int64_t) { products(t, false); });
    const int across = static_cast<int>(shape.d / 16);
    PerWarp<WarpAccumulator[kWarpPieces]> dq;
    threads.each([&](int t) {
      ZTC_UNROLL
      for (int p = 0; p < kWarpPieces; ++p)
        dq[t][p].zero(t % 32);
    });
    for (int64_t j0 = 0; j0 < keys; j0 += kTileCols) {
      threads.sync();
      loadKeyTile(threads, in, tiles, shared, b, j0, kTileCols, true);
      threads.sync();
      threads.each([&](int t) { products(t, true); });
      threads.sync();
      // ds = p (dO . v - delta) scale, rounded to T.
      threads.each([&](int t) {
        for (int x = t; x < kTileRows * kTileCols; x += kTileThreads) {
          const int r = x / kTileCols, c = x % kTileCols;
          const int64_t i = i0 + r, j = j0 + c, at = r * kMmaScoreRow + c;
          gradsHalf[r * kMmaHalfRow + c] =
              store<T>(in.pairGradient(b, i, j, scores[at], gradDots[at],
                                       rowLse[r], rowDelta[r])
                           .ds);
        }
      });
      threads.sync();
      threads.each([&](int t) {
        const int w = t / 32, lane = t % 32;
        ZTC_UNROLL
        for (int p = 0; p < kWarpPieces; ++p) {
          const int f = w + p * (kTileThreads / 32);
          if (f < 4 * across)
            dq[t][p].add<FragmentLayout::RowMajor>(
                lane, gradsHalf + (f / across) * 16 * kMmaHalfRow, kMmaHalfRow,
                ks + (f % across) * 16, ld, kTileCols);
        }
      });
    }
    threads.sync();
    Acc *staged = sharedAt<Acc>(shared, tiles.o);
    threads.each(
        [&](int t) { stagePieces(t, dq[t], shape.d, staged, tiles.ldo); });
    threads.sync();
    storeStaged(threads, staged, tiles.ldo, gradQ, shape.role[kAttentionGradQ],
                b, i0);
  }
};

/// The backward's second kernel on the tensor cores (as
/// AttentionGradKeyTileBody): `probs` holds the scores of a tile of keys
/// (rows) by queries, `grads` v dO^T. Shared rows: rowA the queries'
/// log-sum-exp, rowB their delta. Each warp holds kPieces pieces of dk
/// and of dv: 2 for heads of up to 64, so that the kernel needs fewer
/// registers (AttentionMmaGradKeyNarrowBody).
template <typename T, int kPieces = kWarpPieces>
struct AttentionMmaGradKeyBody {
  AttentionInputs<T> in;
  AttentionTiles tiles;
  int64_t keyTiles;
  const T *gradOut;
  const ComputeT<T> *stats;
  T *gradK, *gradV;
  ZTC_HOST_DEVICE void operator()(int64_t block, unsigned char *shared,
                                  const TileThreads &threads) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    const int64_t kb = block / keyTiles, j0 = block % keyTiles * kTileRows;
    const int64_t b0 = shape.queryEntry(kb, 0);
    const int64_t ld = tiles.ld, ldv = tiles.ldv;
    T *qs = sharedAt<T>(shared, tiles.q), *gs = sharedAt<T>(shared, tiles.g),
      *ks = sharedAt<T>(shared, tiles.k), *vs = sharedAt<T>(shared, tiles.v),
      *probsHalf = sharedAt<T>(shared, tiles.probsHalf),
      *gradsHalf = sharedAt<T>(shared, tiles.gradsHalf);
    Acc *scores = sharedAt<Acc>(shared, tiles.probs),
        *gradDots = sharedAt<Acc>(shared, tiles.grads),
        *lse = sharedAt<Acc>(shared, tiles.rowA),
        *delta = sharedAt<Acc>(shared, tiles.rowB);
    loadKeyTile(threads, in, tiles, shared, b0, j0, kTileRows, true);
    const int acrossK = static_cast<int>(shape.d / 16),
              acrossV = static_cast<int>(shape.dv / 16);
    PerWarp<WarpAccumulator[kPieces]> dk, dv;
    threads.each([&](int t) {
      ZTC_UNROLL
      for (int p = 0; p < kPieces; ++p) {
        dk[t][p].zero(t % 32);
        dv[t][p].zero(t % 32);
      }
    });
    forQueryTiles(
        threads, in, tiles, shared, kb, j0, gradOut, stats,
        [&](int64_t b, int64_t i0) {
          threads.each([&](int t) {
            const int w = t / 32, lane = t % 32;
            const int fr = scorePieceRow(w), fc = scorePieceCol(w);
            const int64_t at = fr * 16 * kMmaScoreRow + fc * 16;
            WarpAccumulator s, dp;
            s.zero(lane);
            s.add<FragmentLayout::ColMajor>(lane, ks + fr * 16 * ld, ld,
                                            qs + fc * 16 * ld, ld, shape.d);
            s.store(lane, scores + at, kMmaScoreRow);
            dp.zero(lane);
            dp.add<FragmentLayout::ColMajor>(lane, vs + fr * 16 * ldv, ldv,
                                             gs + fc * 16 * ldv, ldv, shape.dv);
            dp.store(lane, gradDots + at, kMmaScoreRow);
          });
          threads.sync();
          threads.each([&](int t) {
            for (int x = t; x < kTileRows * kTileCols; x += kTileThreads) {
              const int r = x / kTileCols, c = x % kTileCols;
              const int64_t i = i0 + c, j = j0 + r, at = r * kMmaScoreRow + c;
              const auto pair = in.pairGradient(b, i, j, scores[at],
                                                gradDots[at], lse[c], delta[c]);
              probsHalf[r * kMmaHalfRow + c] = store<T>(pair.p);
              gradsHalf[r * kMmaHalfRow + c] = store<T>(pair.ds);
            }
          });
          threads.sync();
          threads.each([&](int t) {
            const int w = t / 32, lane = t % 32;
            ZTC_UNROLL
            for (int p = 0; p < kPieces; ++p) {
              const int f = w + p * (kTileThreads / 32);
              if (f < 4 * acrossV)
                dv[t][p].template add<FragmentLayout::RowMajor>(
                    lane, probsHalf + (f / acrossV) * 16 * kMmaHalfRow,
                    kMmaHalfRow, gs + (f % acrossV) * 16, ldv, kTileCols);
              if (f < 4 * acrossK)
                dk[t][p].template add<FragmentLayout::RowMajor>(
                    lane, gradsHalf + (f / acrossK) * 16 * kMmaHalfRow,
                    kMmaHalfRow, qs + (f % acrossK) * 16, ld, kTileCols);
            }
          });
        });
    Acc *staged = sharedAt<Acc>(shared, tiles.o);
    threads.sync();
    threads.each(
        [&](int t) { stagePieces(t, dk[t], shape.d, staged, tiles.ldo); });
    threads.sync();
    storeStaged(threads, staged, tiles.ldo, gradK, shape.role[kAttentionGradK],
                b0, j0);
    threads.sync();
    threads.each(
        [&](int t) { stagePieces(t, dv[t], shape.dv, staged, tiles.ldo); });
    threads.sync();
    storeStaged(threads, staged, tiles.ldo, gradV, shape.role[kAttentionGradV],
                b0, j0);
  }
};

/// dk and dv's tensor-core kernel for heads of up to 64.
template <typename T>
using AttentionMmaGradKeyNarrowBody = AttentionMmaGradKeyBody<T, 2>;
template <typename T>
using AttentionMmaGradKeyWideBody = AttentionMmaGradKeyBody<T, kWarpPieces>;

/// The paths ZTC_CUDA_ATTENTION allows, for comparisons on a GPU: `warp`
/// the warp kernels alone, `tiles` no tensor cores, `auto` (or unset) any.
/// Another value is the call's error (lastError), which then runs as
/// `auto`.
inline AttentionPath attentionPathLimit() {
  const char *value = std::getenv("ZTC_CUDA_ATTENTION");
  if (!value || !*value || std::strcmp(value, "auto") == 0)
    return AttentionPath::TensorCores;
  if (std::strcmp(value, "tiles") == 0)
    return AttentionPath::Tiles;
  if (std::strcmp(value, "warp") == 0)
    return AttentionPath::Warp;
  recordError(std::string("ZTC_CUDA_ATTENTION='") + value +
              "': expected auto, tiles or warp");
  return AttentionPath::TensorCores;
}

/// How `kernel` runs for this shape: on the tensor cores for 16-bit types
/// with heads of multiples of 16 (up to kTileSliceCols), on tiles for f32
/// and other heads up to kTileSliceCols, each where the device has the
/// shared memory (and the tensor cores) and ZTC_CUDA_ATTENTION allows it;
/// a warp per row otherwise.
template <typename T>
AttentionPath attentionPath(const AttentionShape &s,
                            AttentionTileKernel kernel) {
  const AttentionPath limit = attentionPathLimit();
  if constexpr (sizeof(ComputeT<T>) != 4) {
    return AttentionPath::Warp;
  } else {
    if (limit == AttentionPath::Warp || s.d > kTileSliceCols ||
        s.dv > kTileSliceCols)
      return AttentionPath::Warp;
    if constexpr (sizeof(T) == 2) {
      // The driver is asked only once the shape qualifies.
      auto compiled = [&] {
        return kernel == AttentionTileKernel::Forward
                   ? tileKernelHasTensorCores<AttentionMmaBody<T>>()
               : kernel == AttentionTileKernel::GradQuery
                   ? tileKernelHasTensorCores<AttentionMmaGradQueryBody<T>>()
                   : tileKernelHasTensorCores<AttentionMmaGradKeyBody<T>>();
      };
      if (limit == AttentionPath::TensorCores && s.d % 16 == 0 &&
          s.dv % 16 == 0 && compiled() &&
          tileSharedFits(attentionTiles<T>(s, kernel, true).bytes))
        return AttentionPath::TensorCores;
    }
    return tileSharedFits(attentionTiles<T>(s, kernel, false).bytes)
               ? AttentionPath::Tiles
               : AttentionPath::Warp;
  }
}

/// Launches `kernel` as `path` (not Warp) says: TileBody on tiles, MmaBody
/// on the tensor cores, a block per tile of kTileRows of the `rows`
/// (queries or keys) of every batch entry; the bodies' fields after the
/// inputs, the layout and the tile count are `fields`.
template <template <typename> class TileBody, template <typename> class MmaBody,
          typename T, typename... Fields>
void launchAttentionTiles(AttentionPath path, const AttentionShape &shape,
                          AttentionTileKernel kernel, int64_t rows,
                          const char *name, cudaStream_t stream,
                          const AttentionInputs<T> &in, Fields... fields) {
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  const bool tensorCores = path == AttentionPath::TensorCores;
  const AttentionTiles layout = attentionTiles<T>(shape, kernel, tensorCores);
  // dk and dv's kernel runs per key/value entry, the others per query
  // entry.
  const int64_t entries =
      kernel == AttentionTileKernel::GradKey ? shape.kvBatch : shape.batch;
  if (!tensorCores)
    launchTileBlocks(entries * tiles, layout.bytes,
                     TileBody<T>{in, layout, tiles, fields...}, stream, name);
  else if constexpr (sizeof(T) == 2)
    launchTileBlocks(entries * tiles, layout.bytes,
                     MmaBody<T>{in, layout, tiles, fields...}, stream, name);
}

/// Runs `Body<T, in registers>` a warp per row.
template <template <typename, bool> class Body, typename T, typename... Fields>
void launchAttention(bool inRegisters, int64_t rows, const char *kernel,
                     cudaStream_t stream, Fields... fields) {
  if (inRegisters)
    launchWarpRows(rows, Body<T, true>{fields...}, stream, kernel);
  else
    launchWarpRows(rows, Body<T, false>{fields...}, stream, kernel);
}

} // namespace detail

template <typename T>
void attention(const T *q, const Dims &qDims, const T *k, const Dims &kDims,
               const T *v, const Dims &vDims, const T *mask,
               const Dims &maskDims, T *out, const Dims &outDims,
               const AttentionParams &params, const Scratch &scratch,
               cudaStream_t stream) {
  using Acc = detail::ComputeT<T>;
  AttentionShape shape(qDims, kDims, vDims, maskDims, mask != nullptr, params);
  shape.stored(kAttentionOut, outDims);
  int64_t rows = shape.batch * shape.tq;
  if (rows == 0 || shape.dv == 0)
    return;
  detail::AttentionInputs<T> in =
      detail::attentionInputs(q, k, v, mask, shape, params);
  using detail::AttentionTileKernel;
  const detail::AttentionPath path =
      detail::attentionPath<T>(shape, AttentionTileKernel::Forward);
  if (path != detail::AttentionPath::Warp) {
    if constexpr (sizeof(Acc) == 4)
      detail::launchAttentionTiles<detail::AttentionTileBody,
                                   detail::AttentionMmaBody>(
          path, shape, AttentionTileKernel::Forward, shape.tq, "attention",
          stream, in, out);
    return;
  }
  const bool inRegisters = scratch::attentionInRegisters(shape);
  Acc *acc = nullptr;
  if (!inRegisters) {
    acc = detail::scratchPart<Acc>(
        scratch, 0, scratch::attentionAccumulatorBytes<T>(shape), "attention");
    if (!acc)
      return;
  }
  detail::launchAttention<detail::AttentionBody, T>(
      inRegisters, rows, "attention", stream, in, acc, out);
}

template <typename T>
void attentionBackward(const T *q, const Dims &qDims, const T *k,
                       const Dims &kDims, const T *v, const Dims &vDims,
                       const T *out, const Dims &outDims, const T *gradOut,
                       const Dims &gradOutDims, const T *mask,
                       const Dims &maskDims, T *gradQ, const Dims &gradQDims,
                       T *gradK, const Dims &gradKDims, T *gradV,
                       const Dims &gradVDims, const AttentionParams &params,
                       const Scratch &scratch, cudaStream_t stream) {
  using Acc = detail::ComputeT<T>;
  AttentionShape shape(qDims, kDims, vDims, maskDims, mask != nullptr, params);
  shape.storedBackward(outDims, gradOutDims, gradQDims, gradKDims, gradVDims);
  int64_t queries = shape.batch * shape.tq, keys = shape.kvBatch * shape.tk;
  if (queries == 0 || keys == 0)
    return;
  // Two statistics per query, then (unless in registers) dq's
  // accumulators, then dk's and dv's.
  Acc *stats = detail::scratchPart<Acc>(
      scratch, 0, scratch::attentionBackwardAccumulatorBytes<T>(shape),
      "attentionBackward");
  if (!stats)
    return;
  const bool inRegisters = scratch::attentionInRegisters(shape);
  Acc *queryAcc = inRegisters ? nullptr : stats + 2 * queries;
  Acc *keyAcc = inRegisters ? nullptr : queryAcc + queries * shape.d;
  detail::AttentionInputs<T> in =
      detail::attentionInputs(q, k, v, mask, shape, params);
  // Each kernel on tiles where the device has the shared memory, else a
  // warp per row; the statistics the first leaves the second are the same
  // either way.
  using detail::AttentionTileKernel;
  const detail::AttentionPath queryPath =
      detail::attentionPath<T>(shape, AttentionTileKernel::GradQuery);
  if (queryPath != detail::AttentionPath::Warp) {
    if constexpr (sizeof(Acc) == 4)
      detail::launchAttentionTiles<detail::AttentionGradQueryTileBody,
                                   detail::AttentionMmaGradQueryBody>(
          queryPath, shape, AttentionTileKernel::GradQuery, shape.tq,
          "attentionBackward", stream, in, out, gradOut, stats, gradQ);
  } else {
    detail::launchAttention<detail::AttentionGradQueryBody, T>(
        inRegisters, queries, "attentionBackward", stream, in, out, gradOut,
        stats, queryAcc, gradQ);
  }
  const detail::AttentionPath keyPath =
      detail::attentionPath<T>(shape, AttentionTileKernel::GradKey);
  if (keyPath != detail::AttentionPath::Warp) {
    if constexpr (sizeof(Acc) == 4) {
      if (shape.d <= 64 && shape.dv <= 64)
        detail::launchAttentionTiles<detail::AttentionGradKeyTileBody,
                                     detail::AttentionMmaGradKeyNarrowBody>(
            keyPath, shape, AttentionTileKernel::GradKey, shape.tk,
            "attentionBackward", stream, in, gradOut,
            static_cast<const Acc *>(stats), gradK, gradV);
      else
        detail::launchAttentionTiles<detail::AttentionGradKeyTileBody,
                                     detail::AttentionMmaGradKeyWideBody>(
            keyPath, shape, AttentionTileKernel::GradKey, shape.tk,
            "attentionBackward", stream, in, gradOut,
            static_cast<const Acc *>(stats), gradK, gradV);
    }
  } else {
    detail::launchAttention<detail::AttentionGradKeyBody, T>(
        inRegisters, keys, "attentionBackward", stream, in, gradOut,
        static_cast<const Acc *>(stats), keyAcc, gradK, gradV);
  }
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_ATTENTION_CUH
