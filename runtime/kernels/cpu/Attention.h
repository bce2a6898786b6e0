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
// product would, its sum in a register: vector instructions, the same bits
// (the steps build with -ffp-contract=off). The exponentials and the
// updates along the head are `omp simd` loops too; the sums over keys stay
// scalar, in key order. Four queries share each read of a value (forward)
// and each update of a key's gradients (backward), adding in query order
// as one query at a time would.
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
/// Queries whose gradients the backward adds to a key's rows together.
constexpr int64_t kAttentionRowsTogether = 4;

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

/// out[j] = Σ_c x[c] · columns[c][j] for j < n, `columns` stored [d][stride]:
/// each sum in the order of c, as a scalar dot product adds it, one j per
/// lane. Full chunks of kDotChunk sums stay in registers over the whole
/// walk along c.
constexpr int64_t kDotChunk = 32;
template <typename T, typename Acc>
void dotsChunk(const T *x, const Acc *columns, int64_t stride, int64_t d,
               Acc *out) {
  Acc part[kDotChunk];
#pragma omp simd
  for (int64_t j = 0; j < kDotChunk; ++j)
    part[j] = 0;
  for (int64_t c = 0; c < d; ++c) {
    const Acc xc = load(x[c]);
    const Acc *column = columns + c * stride;
#pragma omp simd
    for (int64_t j = 0; j < kDotChunk; ++j)
      part[j] += xc * column[j];
  }
  for (int64_t j = 0; j < kDotChunk; ++j)
    out[j] = part[j];
}
template <typename T, typename Acc>
void dotsAcross(const T *x, const Acc *columns, int64_t stride, int64_t d,
                int64_t n, Acc *out) {
  int64_t j0 = 0;
  for (; j0 + kDotChunk <= n; j0 += kDotChunk)
    dotsChunk(x, columns + j0, stride, d, out + j0);
  if (j0 < n) {
    Acc rest[kDotChunk];
    for (int64_t j = 0; j < n - j0; ++j)
      rest[j] = 0;
    for (int64_t c = 0; c < d; ++c) {
      const Acc xc = load(x[c]);
      const Acc *column = columns + c * stride + j0;
#pragma omp simd
      for (int64_t j = 0; j < n - j0; ++j)
        rest[j] += xc * column[j];
    }
    for (int64_t j = 0; j < n - j0; ++j)
      out[j0 + j] = rest[j];
  }
}

/// dotsAcross for four rows x[r] at once: each column read once for the
/// four, the same sums in the same order.
template <typename T, typename Acc>
void dotsAcross4(const T *const x[4], const Acc *columns, int64_t stride,
                 int64_t d, int64_t n, Acc *const out[4]) {
  int64_t j0 = 0;
  for (; j0 + kDotChunk <= n; j0 += kDotChunk) {
    Acc p0[kDotChunk], p1[kDotChunk], p2[kDotChunk], p3[kDotChunk];
#pragma omp simd
    for (int64_t j = 0; j < kDotChunk; ++j)
      p0[j] = p1[j] = p2[j] = p3[j] = 0;
    for (int64_t c = 0; c < d; ++c) {
      const Acc x0 = load(x[0][c]), x1 = load(x[1][c]), x2 = load(x[2][c]),
                x3 = load(x[3][c]);
      const Acc *column = columns + c * stride + j0;
#pragma omp simd
      for (int64_t j = 0; j < kDotChunk; ++j) {
        const Acc y = column[j];
        p0[j] += x0 * y;
        p1[j] += x1 * y;
        p2[j] += x2 * y;
        p3[j] += x3 * y;
      }
    }
#pragma omp simd
    for (int64_t j = 0; j < kDotChunk; ++j) {
      out[0][j0 + j] = p0[j];
      out[1][j0 + j] = p1[j];
      out[2][j0 + j] = p2[j];
      out[3][j0 + j] = p3[j];
    }
  }
  if (j0 < n)
    for (int64_t r = 0; r < 4; ++r)
      dotsAcross(x[r], columns + j0, stride, d, n - j0, out[r] + j0);
}

/// rows[r][c] += Σ_j p[r][j] · v_(j0+j)[c] for four consecutive rows
/// (`rows`, [4][dv]) and their probabilities (`p`, [4][kAttentionKeyBlock]),
/// j ascending as one row at a time would add them: a vector of each row
/// stays in registers over the keys, and each value is read once.
constexpr int64_t kValueLanes = 16;
template <typename T, typename Acc>
void accumulateValues4(Acc *rows, const Acc (*p)[kAttentionKeyBlock],
                       const T *v, const AttentionRows &vRows, int64_t b,
                       int64_t j0, int64_t n, int64_t dv) {
  Acc *row0 = rows, *row1 = rows + dv, *row2 = rows + 2 * dv,
      *row3 = rows + 3 * dv;
  int64_t c0 = 0;
  for (; c0 + kValueLanes <= dv; c0 += kValueLanes) {
    Acc a0[kValueLanes], a1[kValueLanes], a2[kValueLanes], a3[kValueLanes];
#pragma omp simd
    for (int64_t l = 0; l < kValueLanes; ++l) {
      a0[l] = row0[c0 + l];
      a1[l] = row1[c0 + l];
      a2[l] = row2[c0 + l];
      a3[l] = row3[c0 + l];
    }
    for (int64_t j = 0; j < n; ++j) {
      const T *vj = v + vRows.at(b, j0 + j) + c0;
      const Acc p0 = p[0][j], p1 = p[1][j], p2 = p[2][j], p3 = p[3][j];
#pragma omp simd
      for (int64_t l = 0; l < kValueLanes; ++l) {
        const Acc x = load(vj[l]);
        a0[l] += p0 * x;
        a1[l] += p1 * x;
        a2[l] += p2 * x;
        a3[l] += p3 * x;
      }
    }
#pragma omp simd
    for (int64_t l = 0; l < kValueLanes; ++l) {
      row0[c0 + l] = a0[l];
      row1[c0 + l] = a1[l];
      row2[c0 + l] = a2[l];
      row3[c0 + l] = a3[l];
    }
  }
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const T *vj = v + vRows.at(b, j0 + j);
      for (int64_t c = c0; c < dv; ++c)
        rows[r * dv + c] += p[r][j] * load(vj[c]);
    }
}

/// The largest of x[0..n) and `lowest`, NaNs passed over, as a scalar
/// walk with std::max finds it: kMaxLanes running maxima side by side.
/// (Of a +0 and a -0 it may keep the other one: nothing here tells them
/// apart, as both are subtracted from scores before an exponential.)
constexpr int64_t kMaxLanes = 16;
template <typename Acc> Acc largest(const Acc *x, int64_t n, Acc lowest) {
  Acc lane[kMaxLanes];
  for (int64_t l = 0; l < kMaxLanes; ++l)
    lane[l] = lowest;
  int64_t j = 0;
  for (; j + kMaxLanes <= n; j += kMaxLanes)
#pragma omp simd
    for (int64_t l = 0; l < kMaxLanes; ++l)
      lane[l] = lane[l] < x[j + l] ? x[j + l] : lane[l];
  Acc most = lowest;
  for (int64_t l = 0; l < kMaxLanes; ++l)
    most = std::max(most, lane[l]);
  for (; j < n; ++j)
    most = std::max(most, x[j]);
  return most;
}

/// A row's dot products with the keys made scores: times `scale`, capped
/// (softcap * tanh(s / softcap)) when `softcap` is positive, plus the
/// mask's elements (`maskRow` the first key's, the next ones `maskStride`
/// apart) when there is a mask.
template <typename T, typename Acc>
void scaleAndMask(Acc *scores, int64_t n, Acc scale, Acc softcap,
                  const T *maskRow, int64_t maskStride) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    scores[j] *= scale;
  if (softcap > 0)
    for (int64_t j = 0; j < n; ++j)
      scores[j] = softcap * std::tanh(scores[j] / softcap);
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
  const Acc softcap = static_cast<Acc>(params.softcap);
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
    // Per query of the block and key of the key block: the scores, then
    // their exponentials; how many keys the query takes (0: none yet).
    Acc scores[detail::kAttentionQueryBlock][detail::kAttentionKeyBlock];
    int64_t taken[detail::kAttentionQueryBlock];
    for (int64_t i = i0; i < i1; ++i) {
      maximum[i - i0] = lowest;
      sum[i - i0] = 0;
    }
    const int64_t keysEnd = shape.keyEnd(i1 - 1, causal);
    // The block's keys transposed, [d][key]: each query's scores are then
    // sums over the head that run side by side across the keys, each in the
    // head's order, as a scalar dot product adds them.
    std::vector<Acc> keysT(d * detail::kAttentionKeyBlock);
    for (int64_t j0 = 0; j0 < keysEnd; j0 += detail::kAttentionKeyBlock) {
      const int64_t jn = std::min(keysEnd, j0 + detail::kAttentionKeyBlock);
      detail::transposeRows(k, kRows, b, j0, jn, d, keysT.data(),
                            detail::kAttentionKeyBlock);
      auto keysOf = [&](int64_t i) {
        return std::max<int64_t>(0, std::min(shape.keyEnd(i, causal),
                                             j0 + detail::kAttentionKeyBlock) -
                                        j0);
      };
      // The dot products, four queries at a time while four are left (to
      // the furthest key of the four), then one by one.
      for (int64_t i = i0; i < i1;) {
        if (i + 4 <= i1 && keysOf(i + 3) > 0) {
          const T *rowsOfQ[4] = {q + qRows.at(b, i), q + qRows.at(b, i + 1),
                                 q + qRows.at(b, i + 2),
                                 q + qRows.at(b, i + 3)};
          Acc *const into[4] = {scores[i - i0], scores[i - i0 + 1],
                                scores[i - i0 + 2], scores[i - i0 + 3]};
          const int64_t n = std::max(
              {keysOf(i), keysOf(i + 1), keysOf(i + 2), keysOf(i + 3)});
          detail::dotsAcross4(rowsOfQ, keysT.data(), detail::kAttentionKeyBlock,
                              d, n, into);
          i += 4;
          continue;
        }
        detail::dotsAcross(q + qRows.at(b, i), keysT.data(),
                           detail::kAttentionKeyBlock, d, keysOf(i),
                           scores[i - i0]);
        ++i;
      }
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t j1 = j0 + keysOf(i);
        Acc *p = scores[i - i0];
        taken[i - i0] = 0;
        if (j1 <= j0)
          continue;
        detail::scaleAndMask(p, j1 - j0, scale, softcap,
                             mb ? mb + i * shape.maskRowStride +
                                      j0 * shape.maskColStride
                                : nullptr,
                             shape.maskColStride);
        const Acc blockMax = detail::largest(p, j1 - j0, lowest);
        Acc &m = maximum[i - i0];
        const Acc newMax = std::max(m, blockMax);
        // Every score so far is -inf (masked): nothing to add yet.
        if (newMax == lowest)
          continue;
        const Acc rescale = detail::exp(m - newMax);
        m = newMax;
        Acc *row = acc.data() + (i - i0) * dv;
#pragma omp simd
        for (int64_t c = 0; c < dv; ++c)
          row[c] *= rescale;
#pragma omp simd
        for (int64_t j = 0; j < j1 - j0; ++j)
          p[j] = detail::exp(p[j] - newMax);
        Acc blockSum = 0;
        for (int64_t j = 0; j < j1 - j0; ++j)
          blockSum += p[j];
        sum[i - i0] = sum[i - i0] * rescale + blockSum;
        taken[i - i0] = j1 - j0;
      }
      // row_i += p_ij v_j in key order, four queries that take the same
      // keys at a time (each value read once for the four), the others
      // one by one.
      for (int64_t r = 0; r < i1 - i0;) {
        const int64_t n = taken[r];
        if (r + 4 <= i1 - i0 && n > 0 && taken[r + 1] == n &&
            taken[r + 2] == n && taken[r + 3] == n) {
          detail::accumulateValues4(acc.data() + r * dv, scores + r, v, vRows,
                                    b, j0, n, dv);
          r += 4;
          continue;
        }
        Acc *row = acc.data() + r * dv;
        for (int64_t j = 0; j < n; ++j) {
          const Acc p = scores[r][j];
          const T *vj = v + vRows.at(b, j0 + j);
#pragma omp simd
          for (int64_t c = 0; c < dv; ++c)
            row[c] += p * detail::load(vj[c]);
        }
        ++r;
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
/// that adds each pair's share to dq, dk and dv. A thread owns a key/value
/// entry and walks the query heads that read it one after another, so dk
/// and dv sum a group's heads in head order.
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
  const Acc softcap = static_cast<Acc>(params.softcap);
  const bool causal = params.causal;
  const Acc lowest = -std::numeric_limits<Acc>::infinity();
#pragma omp parallel for if (shape.batch * tq * tk * (d + dv) >                \
                             detail::kParallelGrain)
  for (int64_t kb = 0; kb < shape.kvBatch; ++kb) {
    // Every query head of the group reads the same key and value rows.
    const int64_t b0 = shape.queryEntry(kb, 0);
    std::vector<Acc> dk(tk * d, Acc(0)), dvAcc(tk * dv, Acc(0));
    // Per row of a block of kRowsTogether queries: the probabilities, and
    // the products with the values, then the score gradients in their place.
    const int64_t together = detail::kAttentionRowsTogether;
    std::vector<Acc> scores(together * tk), probabilities(together * tk),
        gradScores(together * tk), dq(together * d);
    // With a softcap, the cap's slope at each score of a row.
    std::vector<Acc> slopes(softcap > 0 ? tk : 0);
    // k and v transposed, [d][key]: a row's scores and the products of its
    // result's gradient with every value run side by side across the keys.
    std::vector<Acc> keysT(d * tk), valuesT(dv * tk);
    detail::transposeRows(k, rows[kAttentionK], b0, 0, tk, d, keysT.data(), tk);
    detail::transposeRows(v, rows[kAttentionV], b0, 0, tk, dv, valuesT.data(),
                          tk);
    for (int64_t g = 0; g < shape.group; ++g) {
      const int64_t b = shape.queryEntry(kb, g);
      const T *mb = mask ? mask + shape.maskBase(b) : nullptr;
      for (int64_t i0 = 0; i0 < tq; i0 += together) {
        const int64_t rowsHere = std::min(together, tq - i0);
        const T *qRow[detail::kAttentionRowsTogether],
            *gRow[detail::kAttentionRowsTogether];
        int64_t keysEnd[detail::kAttentionRowsTogether];
        Acc *scoreRow[detail::kAttentionRowsTogether],
            *gradRow[detail::kAttentionRowsTogether];
        int64_t keysTo = 0;
        for (int64_t r = 0; r < rowsHere; ++r) {
          keysEnd[r] = shape.keyEnd(i0 + r, causal);
          keysTo = std::max(keysTo, keysEnd[r]);
          qRow[r] = q + rows[kAttentionQ].at(b, i0 + r);
          gRow[r] = gradOut + rows[kAttentionGradOut].at(b, i0 + r);
          scoreRow[r] = scores.data() + r * tk;
          gradRow[r] = gradScores.data() + r * tk;
        }
        // The rows' dot products with the keys, and of their result's
        // gradients with the values (dp_j = gradOut_i · v_j): four rows at a
        // time when the block is whole, to the furthest key any of them sees.
        if (rowsHere == detail::kAttentionRowsTogether) {
          detail::dotsAcross4(qRow, keysT.data(), tk, d, keysTo, scoreRow);
          detail::dotsAcross4(gRow, valuesT.data(), tk, dv, keysTo, gradRow);
        } else {
          for (int64_t r = 0; r < rowsHere; ++r) {
            detail::dotsAcross(qRow[r], keysT.data(), tk, d, keysEnd[r],
                               scoreRow[r]);
            detail::dotsAcross(gRow[r], valuesT.data(), tk, dv, keysEnd[r],
                               gradRow[r]);
          }
        }
        for (int64_t r = 0; r < rowsHere; ++r) {
          const int64_t i = i0 + r, n = keysEnd[r];
          const T *oi = out + rows[kAttentionOut].at(b, i);
          Acc *s = scoreRow[r], *p = probabilities.data() + r * tk,
              *ds = gradRow[r];
          // The cap's slope, 1 - tanh^2, at the scaled products.
          if (softcap > 0)
            for (int64_t j = 0; j < n; ++j) {
              const Acc t = std::tanh(s[j] * scale / softcap);
              slopes[j] = (1 - t * t) * scale;
            }
          // The row's scores and their log-sum-exp, as the forward saw them.
          detail::scaleAndMask(s, n, scale, softcap,
                               mb ? mb + i * shape.maskRowStride : nullptr,
                               shape.maskColStride);
          const Acc maximum = detail::largest(s, n, lowest);
          // The exponentials, kept for the sum: probabilities after.
#pragma omp simd
        for (int64_t j = 0; j < n; ++j)
          p[j] = detail::exp(s[j] - maximum);
        Acc sum = 0;
        for (int64_t j = 0; j < n; ++j)
          sum += p[j];
        const Acc logSumExp = maximum + std::log(sum);
#pragma omp simd
        for (int64_t j = 0; j < n; ++j)
          p[j] = detail::exp(s[j] - logSumExp);
        Acc delta = 0;
        for (int64_t c = 0; c < dv; ++c)
          delta += detail::load(gRow[r][c]) * detail::load(oi[c]);
          // The score's gradient.
        if (softcap > 0) {
#pragma omp simd
          for (int64_t j = 0; j < n; ++j)
            ds[j] = p[j] * (ds[j] - delta) * slopes[j];
        } else {
#pragma omp simd
          for (int64_t j = 0; j < n; ++j)
            ds[j] = p[j] * (ds[j] - delta) * scale;
        }
        }
      std::fill(dq.begin(), dq.end(), Acc(0));
      // Each key's rows of dk and dv take the block's rows in query order,
      // as they would one query at a time.
      for (int64_t j = 0; j < keysTo; ++j) {
        int64_t first = 0;
        while (first < rowsHere && keysEnd[first] <= j)
          ++first;
        const T *kj = k + rows[kAttentionK].at(b, j);
        Acc *dvj = dvAcc.data() + j * dv, *dkj = dk.data() + j * d;
        Acc p[detail::kAttentionRowsTogether],
            ds[detail::kAttentionRowsTogether];
        for (int64_t r = first; r < rowsHere; ++r) {
          p[r] = probabilities[r * tk + j];
          ds[r] = gradScores[r * tk + j];
        }
        if (first == 0 && rowsHere == 4) {
          // The whole block: the four additions to an element in registers.
          const T *g0 = gRow[0], *g1 = gRow[1], *g2 = gRow[2], *g3 = gRow[3];
          const T *q0 = qRow[0], *q1 = qRow[1], *q2 = qRow[2], *q3 = qRow[3];
          Acc *dq0 = dq.data(), *dq1 = dq0 + d, *dq2 = dq1 + d, *dq3 = dq2 + d;
#pragma omp simd
          for (int64_t c = 0; c < d; ++c) {
            const Acc kc = detail::load(kj[c]);
            dq0[c] += ds[0] * kc;
            dq1[c] += ds[1] * kc;
            dq2[c] += ds[2] * kc;
            dq3[c] += ds[3] * kc;
          }
#pragma omp simd
          for (int64_t c = 0; c < dv; ++c) {
            Acc sum = dvj[c];
            sum += p[0] * detail::load(g0[c]);
            sum += p[1] * detail::load(g1[c]);
            sum += p[2] * detail::load(g2[c]);
            sum += p[3] * detail::load(g3[c]);
            dvj[c] = sum;
          }
#pragma omp simd
          for (int64_t c = 0; c < d; ++c) {
            Acc sum = dkj[c];
            sum += ds[0] * detail::load(q0[c]);
            sum += ds[1] * detail::load(q1[c]);
            sum += ds[2] * detail::load(q2[c]);
            sum += ds[3] * detail::load(q3[c]);
            dkj[c] = sum;
          }
          continue;
        }
        for (int64_t r = first; r < rowsHere; ++r) {
          const T *gi = gRow[r], *qi = qRow[r];
          Acc *dqr = dq.data() + r * d;
#pragma omp simd
          for (int64_t c = 0; c < d; ++c)
            dqr[c] += ds[r] * detail::load(kj[c]);
#pragma omp simd
          for (int64_t c = 0; c < dv; ++c)
            dvj[c] += p[r] * detail::load(gi[c]);
#pragma omp simd
          for (int64_t c = 0; c < d; ++c)
            dkj[c] += ds[r] * detail::load(qi[c]);
        }
      }
      for (int64_t r = 0; r < rowsHere; ++r) {
        T *gq = gradQ + rows[kAttentionGradQ].at(b, i0 + r);
        for (int64_t c = 0; c < d; ++c)
          gq[c] = detail::store<T>(dq[r * d + c]);
      }
      }
    }
    for (int64_t j = 0; j < tk; ++j) {
      T *gk = gradK + rows[kAttentionGradK].at(b0, j);
      T *gv = gradV + rows[kAttentionGradV].at(b0, j);
      for (int64_t c = 0; c < d; ++c)
        gk[c] = detail::store<T>(dk[j * d + c]);
      for (int64_t c = 0; c < dv; ++c)
        gv[c] = detail::store<T>(dvAcc[j * dv + c]);
    }
  }
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_ATTENTION_H
