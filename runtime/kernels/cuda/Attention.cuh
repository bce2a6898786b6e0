//===- Attention.cuh - fused attention on CUDA ------------------*- C++ -*-===//
//
// attention and attentionBackward (nn.attention, nn.attention_backward),
// FlashAttention's algorithm in a plain form: a team of threads per query
// (the forward and dq) or per key (dk and dv), which walks the keys
// (queries) once, computing each score as the team's reduction of a dot
// product. The forward keeps the online softmax's running maximum and sum
// and rescales its accumulator when the maximum grows; the backward first
// recomputes each query's log-sum-exp and delta = rowsum(gradOut * out),
// kept in the call's planned scratch (Scratch.h), which its second kernel
// reads back.
//
// A warp runs each row, eight rows a block: the scores are warp shuffles,
// with no barrier. With heads of up to kAttentionRegisterHead elements
// (every model here) each lane keeps its elements of the accumulators in
// registers; larger heads keep them in the call's scratch, each element
// owned by one lane. Either way no atomics and no order that depends on
// scheduling. Both run in the host emulation
// (test/unit/runtime/CudaKernelsTest.cpp), a team of one thread; K and V
// tiles shared across a block's queries are the next step.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_ATTENTION_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_ATTENTION_CUH

#include "Common.cuh"
#include "Scratch.h"

#include "../AttentionShape.h"
#include "../Dims.h"
#include "../Library.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ztc::cuda {

namespace detail {

/// What every attention body reads: the operands, their shapes, the scale,
/// the causal flag and -infinity (lowestValue is host only).
template <typename T> struct AttentionInputs {
  const T *q, *k, *v, *mask;
  AttentionShape shape;
  ComputeT<T> scale;
  bool causal;
  ComputeT<T> lowest;

  /// The score of query `i` and key `j` of batch entry `b`, reduced over
  /// the team (every thread gets it).
  template <typename Team>
  ZTC_HOST_DEVICE ComputeT<T> score(int64_t b, int64_t i, int64_t j,
                                    const Team &team) const {
    using Acc = ComputeT<T>;
    const T *qi = q + shape.role[kAttentionQ].at(b, i);
    const T *kj = k + shape.role[kAttentionK].at(b, j);
    Acc dot = 0;
    for (int64_t c = team.rank(); c < shape.d; c += team.size())
      dot += load(qi[c]) * load(kj[c]);
    Acc s = team.reduce(dot, SumOp()) * scale;
    if (mask)
      s += load(mask[shape.maskBase(b) + i * shape.maskRowStride +
                     j * shape.maskColStride]);
    return s;
  }
};

template <typename T>
AttentionInputs<T> attentionInputs(const T *q, const T *k, const T *v,
                                   const T *mask, const AttentionShape &shape,
                                   const AttentionParams &params) {
  AttentionInputs<T> in{q, k, v, mask, shape};
  in.scale = static_cast<ComputeT<T>>(params.scale);
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
      Acc p = mathExp(in.score(b, i, j, team) - logSumExp);
      const T *vj = in.v + shape.role[kAttentionV].at(b, j);
      Acc dotPart = 0;
      for (int64_t c = lane; c < shape.dv; c += team.size())
        dotPart += load(gi[c]) * load(vj[c]);
      Acc ds = p * (team.reduce(dotPart, SumOp()) - delta) * in.scale;
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

/// The backward's second kernel, a warp per key (row = b * tk + j): dk and
/// dv over the queries that see the key, from the first kernel's
/// statistics; accumulators in registers or the rows of `acc` (d + dv per
/// row).
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
    const int64_t b = row / shape.tk, j = row % shape.tk, lane = team.rank();
    const int64_t first = row * (shape.d + shape.dv);
    RowAccumulators<Acc, kInRegisters> dk(scratchRow<kInRegisters>(acc, first)),
        dv(scratchRow<kInRegisters>(acc, first + shape.d));
    forOwned<kInRegisters>(lane, shape.d,
                           [&](int slot, int64_t c) { dk(slot, c) = 0; });
    forOwned<kInRegisters>(lane, shape.dv,
                           [&](int slot, int64_t c) { dv(slot, c) = 0; });
    const T *vj = in.v + shape.role[kAttentionV].at(b, j);
    // Causal: queries i >= j see key j.
    for (int64_t i = in.causal ? j : 0; i < shape.tq; ++i) {
      const int64_t queryRow = b * shape.tq + i;
      Acc p = mathExp(in.score(b, i, j, team) - stats[2 * queryRow]);
      const T *gi = gradOut + shape.role[kAttentionGradOut].at(b, i);
      Acc dotPart = 0;
      forOwned<kInRegisters>(lane, shape.dv, [&](int slot, int64_t c) {
        Acc g = load(gi[c]);
        dotPart += g * load(vj[c]);
        dv(slot, c) += p * g;
      });
      Acc ds = p * (team.reduce(dotPart, SumOp()) - stats[2 * queryRow + 1]) *
               in.scale;
      const T *qi = in.q + shape.role[kAttentionQ].at(b, i);
      forOwned<kInRegisters>(lane, shape.d, [&](int slot, int64_t c) {
        dk(slot, c) += ds * load(qi[c]);
      });
    }
    T *gk = gradK + shape.role[kAttentionGradK].at(b, j);
    T *gv = gradV + shape.role[kAttentionGradV].at(b, j);
    forOwned<kInRegisters>(lane, shape.d, [&](int slot, int64_t c) {
      gk[c] = store<T>(dk(slot, c));
    });
    forOwned<kInRegisters>(lane, shape.dv, [&](int slot, int64_t c) {
      gv[c] = store<T>(dv(slot, c));
    });
  }
};

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
  const bool inRegisters = scratch::attentionInRegisters(shape);
  Acc *acc = nullptr;
  if (!inRegisters) {
    acc = detail::scratchPart<Acc>(
        scratch, 0, scratch::attentionAccumulatorBytes<T>(shape), "attention");
    if (!acc)
      return;
  }
  detail::AttentionInputs<T> in =
      detail::attentionInputs(q, k, v, mask, shape, params);
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
  int64_t queries = shape.batch * shape.tq, keys = shape.batch * shape.tk;
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
  detail::launchAttention<detail::AttentionGradQueryBody, T>(
      inRegisters, queries, "attentionBackward", stream, in, out, gradOut,
      stats, queryAcc, gradQ);
  detail::launchAttention<detail::AttentionGradKeyBody, T>(
      inRegisters, keys, "attentionBackward", stream, in, gradOut,
      static_cast<const Acc *>(stats), keyAcc, gradK, gradV);
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_ATTENTION_CUH
