//===- Attention.h - fused attention on the CPU -----------------*- C++ -*-===//
//
// attention and attentionBackward (nn.attention, nn.attention_backward):
// softmax(q kᵀ * scale + mask) v without the scores or the probabilities in
// memory. The forward walks the keys in blocks with the online softmax (a
// running maximum and sum per query, the accumulator rescaled when the
// maximum grows), a block of queries at a time so that a block of keys is
// read from cache by each of them. The backward recomputes each row's
// statistics, then the probabilities, as FlashAttention's does. One thread
// owns a batch entry (and, forward, a block of queries), so every sum runs
// in an order the code fixes, whatever the thread count.
//
// The keys (and, backward, the values) are transposed once per block,
// [head][key], so that a row's scores are `omp simd` loops across the keys,
// each lane adding its products in the head's order, as a scalar dot
// product would: vector instructions, the same bits (the steps build with
// -ffp-contract=off). The exponentials and the updates along the head are
// `omp simd` loops too; the sums over keys stay scalar, in key order.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_ATTENTION_H
#define ZTC_RUNTIME_KERNELS_CPU_ATTENTION_H

#include "Common.h"
#include "Norm.h"

#include "../AttentionShape.h"
#include "../Dims.h"
#include "../Library.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ztc::cpu {

namespace detail {

/// Queries and keys per block of the forward.
constexpr int64_t kAttentionQueryBlock = 16;
constexpr int64_t kAttentionKeyBlock = 64;

/// Rows [j0, j1) of an operand's batch entry `b`, each `d` long, as the
/// columns of `out` ([d][stride], f32 or wider).
template <typename T, typename Acc>
void transposeRows(const T *x, const AttentionRows &rows, int64_t b, int64_t j0,
                   int64_t j1, int64_t d, Acc *out, int64_t stride) {
  for (int64_t j = j0; j < j1; ++j) {
    const T *xj = x + rows.at(b, j);
    for (int64_t c = 0; c < d; ++c)
      out[c * stride + (j - j0)] = load(xj[c]);
  }
}

/// attentionScore of query row `qi` against `n` keys stored transposed
/// (`keysT`, [d][stride]): the same products and sums in the same order,
/// one key per lane. `maskRow` is the mask's element of the first key, the
/// next ones `maskStride` apart.
template <typename T, typename Acc>
void attentionScores(const T *qi, const Acc *keysT, int64_t stride, int64_t d,
                     int64_t n, Acc scale, const T *maskRow, int64_t maskStride,
                     Acc *scores) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    scores[j] = 0;
  for (int64_t c = 0; c < d; ++c) {
    const Acc qc = load(qi[c]);
    const Acc *kc = keysT + c * stride;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      scores[j] += qc * kc[j];
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    scores[j] *= scale;
  if (maskRow)
    for (int64_t j = 0; j < n; ++j)
      scores[j] += load(maskRow[j * maskStride]);
}

} // namespace detail

template <typename T>
void attention(const T *q, const Dims &qDims, const T *k, const Dims &kDims,
               const T *v, const Dims &vDims, const T *mask,
               const Dims &maskDims, T *out, const Dims &outDims,
               const AttentionParams &params) {
  using Acc = detail::ComputeT<T>;
  // Plain variables, not structured bindings: clang's OpenMP cannot
  // capture those.
  AttentionShape shape(qDims, kDims, vDims, maskDims, mask != nullptr, params);
  shape.stored(kAttentionOut, outDims);
  const int64_t tq = shape.tq, tk = shape.tk, d = shape.d, dv = shape.dv;
  const AttentionRows qRows = shape.role[kAttentionQ],
                      kRows = shape.role[kAttentionK],
                      vRows = shape.role[kAttentionV],
                      outRows = shape.role[kAttentionOut];
  const int64_t queryBlocks =
      (tq + detail::kAttentionQueryBlock - 1) / detail::kAttentionQueryBlock;
  const Acc scale = static_cast<Acc>(params.scale);
  const bool causal = params.causal;
  const Acc lowest = -std::numeric_limits<Acc>::infinity();
#pragma omp parallel for if (shape.batch * tq * tk * (d + dv) >                \
                             detail::kParallelGrain)
  for (int64_t task = 0; task < shape.batch * queryBlocks; ++task) {
    const int64_t b = task / queryBlocks;
    const int64_t i0 = (task % queryBlocks) * detail::kAttentionQueryBlock;
    const int64_t i1 = std::min(tq, i0 + detail::kAttentionQueryBlock);
    const T *mb = mask ? mask + shape.maskBase(b) : nullptr;
    // Per query of the block: the running maximum and sum, the accumulator.
    Acc maximum[detail::kAttentionQueryBlock],
        sum[detail::kAttentionQueryBlock];
    std::vector<Acc> acc((i1 - i0) * dv, Acc(0));
    Acc scores[detail::kAttentionKeyBlock];
    for (int64_t i = i0; i < i1; ++i) {
      maximum[i - i0] = lowest;
      sum[i - i0] = 0;
    }
    const int64_t keysEnd = shape.keyEnd(i1 - 1, causal);
    // The block's keys transposed, [d][key]: each query's scores are then
    // sums over the head that run side by side across the keys, each in the
    // head's order, as attentionScore adds them.
    std::vector<Acc> keysT(d * detail::kAttentionKeyBlock);
    for (int64_t j0 = 0; j0 < keysEnd; j0 += detail::kAttentionKeyBlock) {
      const int64_t jn = std::min(keysEnd, j0 + detail::kAttentionKeyBlock);
      detail::transposeRows(k, kRows, b, j0, jn, d, keysT.data(),
                            detail::kAttentionKeyBlock);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t j1 =
            std::min(shape.keyEnd(i, causal), j0 + detail::kAttentionKeyBlock);
        if (j1 <= j0)
          continue;
        detail::attentionScores(q + qRows.at(b, i), keysT.data(),
                                detail::kAttentionKeyBlock, d, j1 - j0, scale,
                                mb ? mb + i * shape.maskRowStride +
                                         j0 * shape.maskColStride
                                   : nullptr,
                                shape.maskColStride, scores);
        Acc blockMax = lowest;
        for (int64_t j = j0; j < j1; ++j)
          blockMax = std::max(blockMax, scores[j - j0]);
        Acc &m = maximum[i - i0];
        const Acc newMax = std::max(m, blockMax);
        // Every score so far is -inf (masked): nothing to add yet.
        if (newMax == lowest)
          continue;
        const Acc rescale = detail::exp(m - newMax);
        m = newMax;
        Acc *row = acc.data() + (i - i0) * dv;
        Acc blockSum = 0;
#pragma omp simd
        for (int64_t c = 0; c < dv; ++c)
          row[c] *= rescale;
#pragma omp simd
        for (int64_t j = 0; j < j1 - j0; ++j)
          scores[j] = detail::exp(scores[j] - newMax);
        for (int64_t j = j0; j < j1; ++j) {
          const Acc p = scores[j - j0];
          blockSum += p;
          const T *vj = v + vRows.at(b, j);
#pragma omp simd
          for (int64_t c = 0; c < dv; ++c)
            row[c] += p * detail::load(vj[c]);
        }
        sum[i - i0] = sum[i - i0] * rescale + blockSum;
      }
    }
    for (int64_t i = i0; i < i1; ++i) {
      const Acc *row = acc.data() + (i - i0) * dv;
      T *o = out + outRows.at(b, i);
      // A row whose every key is masked is 0 / 0, NaN, as softmax gives.
      for (int64_t c = 0; c < dv; ++c)
        o[c] = detail::store<T>(row[c] / sum[i - i0]);
    }
  }
}

/// The gradients of attention's q, k and v (nn.attention_backward has the
/// formulas). Per batch entry: each query's log-sum-exp from its scores,
/// delta = rowsum(gradOut * out), then one walk over the (query, key) pairs
/// that adds each pair's share to dq, dk and dv.
template <typename T>
void attentionBackward(const T *q, const Dims &qDims, const T *k,
                       const Dims &kDims, const T *v, const Dims &vDims,
                       const T *out, const Dims &outDims, const T *gradOut,
                       const Dims &gradOutDims, const T *mask,
                       const Dims &maskDims, T *gradQ, const Dims &gradQDims,
                       T *gradK, const Dims &gradKDims, T *gradV,
                       const Dims &gradVDims, const AttentionParams &params) {
  using Acc = detail::ComputeT<T>;
  AttentionShape shape(qDims, kDims, vDims, maskDims, mask != nullptr, params);
  shape.storedBackward(outDims, gradOutDims, gradQDims, gradKDims, gradVDims);
  const int64_t tq = shape.tq, tk = shape.tk, d = shape.d, dv = shape.dv;
  const AttentionRows *rows = shape.role;
  const Acc scale = static_cast<Acc>(params.scale);
  const bool causal = params.causal;
  const Acc lowest = -std::numeric_limits<Acc>::infinity();
#pragma omp parallel for if (shape.batch * tq * tk * (d + dv) >                \
                             detail::kParallelGrain)
  for (int64_t b = 0; b < shape.batch; ++b) {
    const T *mb = mask ? mask + shape.maskBase(b) : nullptr;
    std::vector<Acc> dq(d), dk(tk * d, Acc(0)), dvAcc(tk * dv, Acc(0));
    std::vector<Acc> scores(tk), probabilities(tk), products(tk);
    // k and v transposed, [d][key]: a row's scores and the products of its
    // result's gradient with every value run side by side across the keys.
    std::vector<Acc> keysT(d * tk), valuesT(dv * tk);
    detail::transposeRows(k, rows[kAttentionK], b, 0, tk, d, keysT.data(), tk);
    detail::transposeRows(v, rows[kAttentionV], b, 0, tk, dv, valuesT.data(),
                          tk);
    for (int64_t i = 0; i < tq; ++i) {
      const int64_t keysEnd = shape.keyEnd(i, causal);
      const T *qi = q + rows[kAttentionQ].at(b, i),
              *gi = gradOut + rows[kAttentionGradOut].at(b, i),
              *oi = out + rows[kAttentionOut].at(b, i);
      // The row's scores and their log-sum-exp, as the forward saw them.
      detail::attentionScores(qi, keysT.data(), tk, d, keysEnd, scale,
                              mb ? mb + i * shape.maskRowStride : nullptr,
                              shape.maskColStride, scores.data());
      Acc maximum = lowest;
      for (int64_t j = 0; j < keysEnd; ++j)
        maximum = std::max(maximum, scores[j]);
        // The exponentials, kept for the sum: probabilities later.
#pragma omp simd
      for (int64_t j = 0; j < keysEnd; ++j)
        probabilities[j] = detail::exp(scores[j] - maximum);
      Acc sum = 0;
      for (int64_t j = 0; j < keysEnd; ++j)
        sum += probabilities[j];
      const Acc logSumExp = maximum + std::log(sum);
#pragma omp simd
      for (int64_t j = 0; j < keysEnd; ++j)
        probabilities[j] = detail::exp(scores[j] - logSumExp);
      Acc delta = 0;
      for (int64_t c = 0; c < dv; ++c)
        delta += detail::load(gi[c]) * detail::load(oi[c]);
      // dp_j = gradOut_i · v_j, each summed in the head's order.
      std::fill(products.begin(), products.begin() + keysEnd, Acc(0));
      for (int64_t c = 0; c < dv; ++c) {
        const Acc gc = detail::load(gi[c]);
        const Acc *vc = valuesT.data() + c * tk;
#pragma omp simd
        for (int64_t j = 0; j < keysEnd; ++j)
          products[j] += gc * vc[j];
      }
      std::fill(dq.begin(), dq.end(), Acc(0));
      for (int64_t j = 0; j < keysEnd; ++j) {
        const Acc p = probabilities[j];
        const T *kj = k + rows[kAttentionK].at(b, j);
#pragma omp simd
        for (int64_t c = 0; c < dv; ++c)
          dvAcc[j * dv + c] += p * detail::load(gi[c]);
        const Acc ds = p * (products[j] - delta) * scale;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) {
          dq[c] += ds * detail::load(kj[c]);
          dk[j * d + c] += ds * detail::load(qi[c]);
        }
      }
      T *gq = gradQ + rows[kAttentionGradQ].at(b, i);
      for (int64_t c = 0; c < d; ++c)
        gq[c] = detail::store<T>(dq[c]);
    }
    for (int64_t j = 0; j < tk; ++j) {
      T *gk = gradK + rows[kAttentionGradK].at(b, j);
      T *gv = gradV + rows[kAttentionGradV].at(b, j);
      for (int64_t c = 0; c < d; ++c)
        gk[c] = detail::store<T>(dk[j * d + c]);
      for (int64_t c = 0; c < dv; ++c)
        gv[c] = detail::store<T>(dvAcc[j * dv + c]);
    }
  }
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_ATTENTION_H
