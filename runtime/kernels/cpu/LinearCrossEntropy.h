//===- LinearCrossEntropy.h - the fused loss on the CPU ---------*- C++ -*-===//
//
// linearCrossEntropy and its gradient: a classifier's product and the mean
// cross entropy of its softmax, worked through in chunks of rows
// (LinearCrossEntropy.h), so the [N, V] logits are never held. The
// forward keeps one chunk of logits; the gradient recomputes each chunk,
// takes its rows' losses (the forward's, to the bit), turns it into the
// logits' gradient in place and takes both products from it before the
// next. A target out of range is recorded in the error
// slot (Common.h), never read; it counts as ignored, as nllLoss counts it.
//
// x and w are f32, f64, f16 or bf16; the loss is in ComputeT. A half
// chunk holds the product's logits rounded to the half type, as the
// unfused product stores them, and the loss reads them widened; each row's
// gradient is computed in f32 and rounded once. dw then sums the chunks in
// f32 and is rounded once at the end.
//
// The chunk's buffer (and a half dw's f32 sums) are the kernel's own, as
// the CPU's convolution columns are (the CUDA library's are planned:
// cuda/Scratch.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_LINEARCROSSENTROPY_H
#define ZTC_RUNTIME_KERNELS_CPU_LINEARCROSSENTROPY_H

#include "Common.h"
#include "Linalg.h"
#include "Norm.h"

#include "../Dims.h"
#include "../Library.h"
#include "../LinearCrossEntropy.h"
#include "../StepAbi.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace ztc::cpu {

namespace detail {

/// The CPU's chunks: the shape's rule, at least 128 rows. Smaller chunks
/// cost more in products too thin for the BLAS and in dw's read and write
/// per chunk than they save (a 2-layer GPT of width 256 and 8,192 classes
/// at 1,024 tokens: with 32-row chunks a step took 1.1 times the unfused
/// one's time, with 128 rows 0.9 times).
constexpr int64_t kLinearCrossEntropyFloorRows = 128;

/// Which rows count (their class is in range and not ignored); records the
/// first out-of-range class. Both kernels check: an entry with the
/// gradient runs no forward (ztc-merge-cross-entropy).
template <typename I>
std::vector<char> countedRows(const I *target, const LinearCrossEntropyShape &s,
                              const LinearCrossEntropyParams &p) {
  std::vector<char> counted(s.rows, 0);
  for (int64_t n = 0; n < s.rows; ++n) {
    auto t = static_cast<int64_t>(target[n]);
    if (p.ignore_index.present && t == p.ignore_index.value)
      continue;
    if (t < 0 || t >= s.classes) {
      recordRangeError(ZTC_ERROR_LOSS_TARGET, t, 0, s.classes,
                       p.ignore_index.present, p.ignore_index.value);
      continue;
    }
    counted[n] = 1;
  }
  return counted;
}

/// The chunk's logits, rows [begin, begin + rows) of x times w.
template <typename T>
void chunkLogits(const T *x, const T *w, const LinearCrossEntropyShape &s,
                 int64_t begin, int64_t rows, T *logits) {
  gemm<T>(rows, s.classes, s.width, x + begin * s.width, s.width, false, w,
          s.weightStride(), s.transposed, logits, s.classes, nullptr);
}

/// A counted row's loss, logsumexp(z) - z[t], and whether z[t] is the
/// largest logit (a tie counts: argmax would pick the first); returns
/// logsumexp(z). The forward and the gradient compute it alike, so the
/// gradient's loss is the forward's, bit for bit.
template <typename Acc, typename T>
Acc rowLoss(const T *z, int64_t classes, int64_t t, Acc &loss, char &hit) {
  Acc largest = -std::numeric_limits<Acc>::infinity();
#pragma omp simd reduction(max : largest)
  for (int64_t j = 0; j < classes; ++j)
    largest = std::max(largest, load(z[j]));
  Acc sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < classes; ++j)
    sum += exp(load(z[j]) - largest);
  Acc shift = largest + std::log(sum), picked = load(z[t]);
  loss = shift - picked;
  hit = picked == largest;
  return shift;
}

/// The mean of the counted rows' losses, summed in row order (so the
/// result does not depend on the threads); 0 / 0 is NaN when no row
/// counts, as in PyTorch.
template <typename Acc>
Acc meanLoss(const std::vector<Acc> &losses, const std::vector<char> &counted) {
  SumT<Acc> total = 0, count = 0;
  for (size_t n = 0; n < losses.size(); ++n) {
    total += losses[n];
    count += counted[n];
  }
  return static_cast<Acc>(total / count);
}

} // namespace detail

template <typename T, typename I>
void linearCrossEntropy(const T *x, const Dims &xDims, const T *w,
                        const Dims &wDims, const I *target, const Dims &,
                        detail::ComputeT<T> *loss, const Dims &,
                        detail::ComputeT<T> *correct, const Dims &,
                        const LinearCrossEntropyParams &params) {
  using Acc = detail::ComputeT<T>;
  LinearCrossEntropyShape s(xDims, wDims, params);
  std::vector<char> counted = detail::countedRows(target, s, params);
  int64_t chunk = s.chunkRows(detail::kLinearCrossEntropyFloorRows);
  std::vector<T> logits(size_t(chunk) * size_t(s.classes));
  std::vector<Acc> losses(s.rows, Acc(0));
  std::vector<char> hits(s.rows, 0);
  for (int64_t begin = 0; begin < s.rows; begin += chunk) {
    int64_t rows = std::min(chunk, s.rows - begin);
    detail::chunkLogits(x, w, s, begin, rows, logits.data());
#pragma omp parallel for if (rows * s.classes > detail::kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t n = begin + r;
      if (counted[n])
        detail::rowLoss(logits.data() + r * s.classes, s.classes,
                        static_cast<int64_t>(target[n]), losses[n], hits[n]);
    }
  }
  loss[0] = detail::meanLoss(losses, counted);
  int64_t correctRows = 0;
  for (char hit : hits)
    correctRows += hit;
  correct[0] = static_cast<Acc>(correctRows);
}

namespace detail {

/// linearCrossEntropyBackward, and without w's gradient when `gradW` is
/// null (linearCrossEntropyBackwardX): the chunk's dw product is skipped.
template <typename T, typename I>
void crossEntropyGradients(const T *x, const LinearCrossEntropyShape &s,
                           const T *w, const I *target, const ComputeT<T> *grad,
                           T *gradX, T *gradW, ComputeT<T> *loss,
                           const LinearCrossEntropyParams &params) {
  using Acc = ComputeT<T>;
  // A half dw sums the chunks in f32 (dwSums), rounded once at the end.
  constexpr bool kHalf = !std::is_same_v<T, Acc>;
  std::vector<char> counted = countedRows(target, s, params);
  int64_t count = 0;
  for (char c : counted)
    count += c;
  // d loss / d z[n, j] = g / count * (softmax(z[n])[j] - [j == t[n]]);
  // rows that do not count get exactly 0 (with no row counted too).
  const Acc scale = grad[0] / static_cast<Acc>(count);
  int64_t chunk = s.chunkRows(kLinearCrossEntropyFloorRows);
  std::vector<T> dz(size_t(chunk) * size_t(s.classes));
  std::vector<Acc> losses(s.rows, Acc(0));
  std::vector<float> dwSums(kHalf && gradW ? size_t(s.width) * size_t(s.classes)
                                           : 0);
  if (gradW && (s.rows == 0 || s.classes == 0))
    std::fill(gradW, gradW + s.width * s.classes, T(0));
  for (int64_t begin = 0; begin < s.rows; begin += chunk) {
    int64_t rows = std::min(chunk, s.rows - begin);
    chunkLogits(x, w, s, begin, rows, dz.data());
#pragma omp parallel for if (rows * s.classes > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t n = begin + r;
      T *z = dz.data() + r * s.classes;
      if (!counted[n]) {
        std::fill(z, z + s.classes, T(0));
        continue;
      }
      auto t = static_cast<int64_t>(target[n]);
      char hit;
      Acc shift = rowLoss(z, s.classes, t, losses[n], hit);
      // Rounded once: the target's entry subtracts before it is stored.
#pragma omp simd
      for (int64_t j = 0; j < s.classes; ++j) {
        Acc value = exp(load(z[j]) - shift) * scale;
        z[j] = store<T>(j == t ? value - scale : value);
      }
    }
    // dx = dz w as [V, D]; dw (+)= dzᵀ x ([V, D]) or xᵀ dz ([D, V]).
    const T *xChunk = x + begin * s.width;
    gemm<T>(rows, s.width, s.classes, dz.data(), s.classes, false, w,
            s.weightStride(), !s.transposed, gradX + begin * s.width, s.width,
            nullptr);
    if (!gradW)
      continue;
    bool accumulate = begin > 0;
    if constexpr (kHalf) {
      if (s.transposed)
        gemmWidened(s.classes, s.width, rows, dz.data(), s.classes, true,
                    xChunk, s.width, false, dwSums.data(), s.width, accumulate);
      else
        gemmWidened(s.width, s.classes, rows, xChunk, s.width, true, dz.data(),
                    s.classes, false, dwSums.data(), s.classes, accumulate);
    } else if (s.transposed) {
      gemm<T>(s.classes, s.width, rows, dz.data(), s.classes, true, xChunk,
              s.width, false, gradW, s.width, nullptr, accumulate);
    } else {
      gemm<T>(s.width, s.classes, rows, xChunk, s.width, true, dz.data(),
              s.classes, false, gradW, s.classes, nullptr, accumulate);
    }
  }
  if constexpr (kHalf)
    if (gradW && s.rows > 0) {
      int64_t size = s.width * s.classes;
#pragma omp parallel for if (size > kParallelGrain)
      for (int64_t i = 0; i < size; ++i)
        gradW[i] = store<T>(dwSums[i]);
    }
  loss[0] = meanLoss(losses, counted);
}

} // namespace detail

template <typename T, typename I>
void linearCrossEntropyBackward(const T *x, const Dims &xDims, const T *w,
                                const Dims &wDims, const I *target,
                                const Dims &, const detail::ComputeT<T> *grad,
                                const Dims &, T *gradX, const Dims &, T *gradW,
                                const Dims &, detail::ComputeT<T> *loss,
                                const Dims &,
                                const LinearCrossEntropyParams &params) {
  detail::crossEntropyGradients(x,
                                LinearCrossEntropyShape(xDims, wDims, params),
                                w, target, grad, gradX, gradW, loss, params);
}

template <typename T, typename I>
void linearCrossEntropyBackwardX(const T *x, const Dims &xDims, const T *w,
                                 const Dims &wDims, const I *target,
                                 const Dims &, const detail::ComputeT<T> *grad,
                                 const Dims &, T *gradX, const Dims &,
                                 detail::ComputeT<T> *loss, const Dims &,
                                 const LinearCrossEntropyParams &params) {
  detail::crossEntropyGradients(
      x, LinearCrossEntropyShape(xDims, wDims, params), w, target, grad, gradX,
      static_cast<T *>(nullptr), loss, params);
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_LINEARCROSSENTROPY_H
