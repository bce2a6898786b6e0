//===- Attention.cuh - fused attention on CUDA ------------------*- C++ -*-===//
//
// attention and attentionBackward (nn.attention, nn.attention_backward),
// FlashAttention's algorithm in its plainest form: one thread block per
// query (the forward and dq) or per key (dk and dv), which walks the keys
// (queries) once, computing each score as a block reduction of a dot
// product. The forward keeps the online softmax's running maximum and sum
// and rescales its accumulator when the maximum grows; the backward first
// recomputes each query's log-sum-exp and delta = rowsum(gradOut * out),
// which its second kernel reads back. Every accumulator is f32 (f64 for
// f64) in the call's planned scratch (Scratch.h), each element owned by one
// thread,
// so no atomics and no order that depends on scheduling: a query tile of
// one row per block, chosen over a faster shared-memory tiling because it
// runs in the host emulation (test/unit/runtime/CudaKernelsTest.cpp) and
// is plainly correct.
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

/// The forward for one query (row = b * tq + i): the online softmax over
/// its keys, the accumulator in `acc` (dv per row).
template <typename T> struct AttentionBody {
  AttentionInputs<T> in;
  ComputeT<T> *acc;
  T *out;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    int64_t b = row / shape.tq, i = row % shape.tq;
    Acc *a = acc + row * shape.dv;
    for (int64_t c = team.rank(); c < shape.dv; c += team.size())
      a[c] = 0;
    Acc maximum = in.lowest, sum = 0;
    int64_t keys = shape.keyEnd(i, in.causal);
    for (int64_t j = 0; j < keys; ++j) {
      Acc s = in.score(b, i, j, team);
      Acc newMax = s > maximum ? s : maximum;
      // Every score so far is -inf (masked): nothing to add yet. The same
      // decision on every thread, as they all hold the score.
      if (newMax == in.lowest)
        continue;
      Acc rescale = mathExp(maximum - newMax), p = mathExp(s - newMax);
      maximum = newMax;
      sum = sum * rescale + p;
      const T *vj = in.v + shape.role[kAttentionV].at(b, j);
      for (int64_t c = team.rank(); c < shape.dv; c += team.size())
        a[c] = a[c] * rescale + p * load(vj[c]);
    }
    // A query whose every key is masked is 0 / 0, NaN, as softmax gives.
    T *o = out + shape.role[kAttentionOut].at(b, i);
    for (int64_t c = team.rank(); c < shape.dv; c += team.size())
      o[c] = store<T>(a[c] / sum);
  }
};

/// The backward's first kernel, one query per row: its log-sum-exp and
/// delta (kept in `stats`, two per row, for the second kernel) and its
/// gradient dq, accumulated in `acc` (d per row).
template <typename T> struct AttentionGradQueryBody {
  AttentionInputs<T> in;
  const T *out, *gradOut;
  ComputeT<T> *stats, *acc;
  T *gradQ;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    int64_t b = row / shape.tq, i = row % shape.tq;
    int64_t keys = shape.keyEnd(i, in.causal);
    Acc maximum = in.lowest, sum = 0;
    for (int64_t j = 0; j < keys; ++j) {
      Acc s = in.score(b, i, j, team);
      Acc newMax = s > maximum ? s : maximum;
      if (newMax == in.lowest)
        continue;
      sum = sum * mathExp(maximum - newMax) + mathExp(s - newMax);
      maximum = newMax;
    }
    Acc logSumExp = maximum + mathLog(sum);
    const T *gi = gradOut + shape.role[kAttentionGradOut].at(b, i),
            *oi = out + shape.role[kAttentionOut].at(b, i);
    Acc partial = 0;
    for (int64_t c = team.rank(); c < shape.dv; c += team.size())
      partial += load(gi[c]) * load(oi[c]);
    Acc delta = team.reduce(partial, SumOp());
    if (team.rank() == 0) {
      stats[2 * row] = logSumExp;
      stats[2 * row + 1] = delta;
    }
    Acc *a = acc + row * shape.d;
    for (int64_t c = team.rank(); c < shape.d; c += team.size())
      a[c] = 0;
    for (int64_t j = 0; j < keys; ++j) {
      Acc p = mathExp(in.score(b, i, j, team) - logSumExp);
      const T *vj = in.v + shape.role[kAttentionV].at(b, j);
      Acc dotPart = 0;
      for (int64_t c = team.rank(); c < shape.dv; c += team.size())
        dotPart += load(gi[c]) * load(vj[c]);
      Acc ds = p * (team.reduce(dotPart, SumOp()) - delta) * in.scale;
      const T *kj = in.k + shape.role[kAttentionK].at(b, j);
      for (int64_t c = team.rank(); c < shape.d; c += team.size())
        a[c] += ds * load(kj[c]);
    }
    T *gq = gradQ + shape.role[kAttentionGradQ].at(b, i);
    for (int64_t c = team.rank(); c < shape.d; c += team.size())
      gq[c] = store<T>(a[c]);
  }
};

/// The backward's second kernel, one key per row (row = b * tk + j): dk
/// and dv over the queries that see the key, from the first kernel's
/// statistics; accumulators in `acc` (d + dv per row).
template <typename T> struct AttentionGradKeyBody {
  AttentionInputs<T> in;
  const T *gradOut;
  const ComputeT<T> *stats;
  ComputeT<T> *acc;
  T *gradK, *gradV;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    const AttentionShape &shape = in.shape;
    int64_t b = row / shape.tk, j = row % shape.tk;
    Acc *dk = acc + row * (shape.d + shape.dv), *dv = dk + shape.d;
    for (int64_t c = team.rank(); c < shape.d + shape.dv; c += team.size())
      dk[c] = 0;
    const T *vj = in.v + shape.role[kAttentionV].at(b, j);
    // Causal: queries i >= j see key j.
    for (int64_t i = in.causal ? j : 0; i < shape.tq; ++i) {
      int64_t queryRow = b * shape.tq + i;
      Acc p = mathExp(in.score(b, i, j, team) - stats[2 * queryRow]);
      const T *gi = gradOut + shape.role[kAttentionGradOut].at(b, i);
      Acc dotPart = 0;
      for (int64_t c = team.rank(); c < shape.dv; c += team.size()) {
        dotPart += load(gi[c]) * load(vj[c]);
        dv[c] += p * load(gi[c]);
      }
      Acc ds = p * (team.reduce(dotPart, SumOp()) - stats[2 * queryRow + 1]) *
               in.scale;
      const T *qi = in.q + shape.role[kAttentionQ].at(b, i);
      for (int64_t c = team.rank(); c < shape.d; c += team.size())
        dk[c] += ds * load(qi[c]);
    }
    T *gk = gradK + shape.role[kAttentionGradK].at(b, j);
    T *gv = gradV + shape.role[kAttentionGradV].at(b, j);
    for (int64_t c = team.rank(); c < shape.d; c += team.size())
      gk[c] = store<T>(dk[c]);
    for (int64_t c = team.rank(); c < shape.dv; c += team.size())
      gv[c] = store<T>(dv[c]);
  }
};

} // namespace detail

template <typename T>
void attention(const T *q, const Dims &qDims, const T *k, const Dims &kDims,
               const T *v, const Dims &vDims, const T *mask,
               const Dims &maskDims, T *out, const Dims &,
               const AttentionParams &params, const Scratch &scratch,
               cudaStream_t stream) {
  using Acc = detail::ComputeT<T>;
  AttentionShape shape(qDims, kDims, vDims, maskDims, mask != nullptr,
                       params.bthd);
  int64_t rows = shape.batch * shape.tq;
  if (rows == 0 || shape.dv == 0)
    return;
  Acc *acc = detail::scratchPart<Acc>(
      scratch, 0, scratch::attentionAccumulatorBytes<T>(shape), "attention");
  if (!acc)
    return;
  detail::AttentionInputs<T> in =
      detail::attentionInputs(q, k, v, mask, shape, params);
  detail::launchRows(rows, shape.d > shape.dv ? shape.d : shape.dv,
                     detail::AttentionBody<T>{in, acc, out}, stream,
                     "attention");
}

template <typename T>
void attentionBackward(const T *q, const Dims &qDims, const T *k,
                       const Dims &kDims, const T *v, const Dims &vDims,
                       const T *out, const Dims &, const T *gradOut,
                       const Dims &, const T *mask, const Dims &maskDims,
                       T *gradQ, const Dims &, T *gradK, const Dims &, T *gradV,
                       const Dims &, const AttentionParams &params,
                       const Scratch &scratch, cudaStream_t stream) {
  using Acc = detail::ComputeT<T>;
  AttentionShape shape(qDims, kDims, vDims, maskDims, mask != nullptr,
                       params.bthd);
  int64_t queries = shape.batch * shape.tq, keys = shape.batch * shape.tk;
  // Two statistics per query, then dq's accumulators, then dk's and dv's.
  int64_t count = queries * (2 + shape.d) + keys * (shape.d + shape.dv);
  if (count == 0)
    return;
  Acc *stats = detail::scratchPart<Acc>(
      scratch, 0, scratch::attentionBackwardAccumulatorBytes<T>(shape),
      "attentionBackward");
  if (!stats)
    return;
  Acc *queryAcc = stats + 2 * queries;
  Acc *keyAcc = queryAcc + queries * shape.d;
  detail::AttentionInputs<T> in =
      detail::attentionInputs(q, k, v, mask, shape, params);
  int64_t width = shape.d > shape.dv ? shape.d : shape.dv;
  detail::launchRows(queries, width,
                     detail::AttentionGradQueryBody<T>{in, out, gradOut, stats,
                                                       queryAcc, gradQ},
                     stream, "attentionBackward");
  detail::launchRows(
      keys, width,
      detail::AttentionGradKeyBody<T>{in, gradOut, stats, keyAcc, gradK, gradV},
      stream, "attentionBackward");
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_ATTENTION_CUH
