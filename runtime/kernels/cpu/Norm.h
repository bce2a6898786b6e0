//===- Norm.h - softmax and normalization on the CPU ------------*- C++ -*-===//
//
// softmax, logSoftmax, layerNorm (or root-mean-square normalization) with
// its gradients, and batchNorm (inference form). A row's sums run in vector
// lanes, in an order the code fixes, so results do not depend on the thread
// count.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_NORM_H
#define ZTC_RUNTIME_KERNELS_CPU_NORM_H

#include "Common.h"
#include "Reduce.h"

#include "../Dims.h"
#include "../Library.h"
#include "../VecMath.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace ztc::cpu {

namespace detail {

/// softmax (log = false) or logSoftmax (log = true) along `axis`.
/// e^x: ztc::vecmath's in float (loops vectorize it), libm's in double.
inline float exp(float x) { return ztc::vecmath::exp(x); }
inline double exp(double x) { return std::exp(x); }

template <typename T>
void softmaxImpl(const T *x, const Dims &dims, int64_t axis, T *y, bool log) {
  using Acc = ComputeT<T>;
  if (axis < 0)
    axis += dims.rank;
  int64_t outer = product(dims, 0, axis), length = dims.d[axis];
  int64_t inner = product(dims, axis + 1, dims.rank);
#pragma omp parallel for if (outer * length * inner > kParallelGrain)
  for (int64_t row = 0; row < outer * inner; ++row) {
    int64_t base = (row / inner) * length * inner + row % inner;
    const T *in = x + base;
    T *out = y + base;
    // The maximum and the sum in vector lanes: the maximum is the same in
    // any order (a NaN makes every output NaN either way, through the sum),
    // and the sum's order is fixed by the code, not by the threads.
    Acc maximum = -std::numeric_limits<Acc>::infinity();
#pragma omp simd reduction(max : maximum)
    for (int64_t i = 0; i < length; ++i)
      maximum = std::max(maximum, load(in[i * inner]));
    Acc sum = 0;
    if (!log && std::is_same_v<T, Acc>) {
      // Each exponential once, kept in the output until the sum is known.
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < length; ++i) {
        Acc e = exp(load(in[i * inner]) - maximum);
        out[i * inner] = store<T>(e);
        sum += e;
      }
#pragma omp simd
      for (int64_t i = 0; i < length; ++i)
        out[i * inner] = store<T>(load(out[i * inner]) / sum);
      continue;
    }
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < length; ++i)
      sum += exp(load(in[i * inner]) - maximum);
    if (log) {
      Acc shift = maximum + std::log(sum);
      for (int64_t i = 0; i < length; ++i)
        out[i * inner] = store<T>(load(in[i * inner]) - shift);
    } else {
      for (int64_t i = 0; i < length; ++i)
        out[i * inner] = store<T>(exp(load(in[i * inner]) - maximum) / sum);
    }
  }
}

} // namespace detail

template <typename T>
void softmax(const T *x, const Dims &dims, T *y, const Dims &,
             const AxisParams &params) {
  detail::softmaxImpl(x, dims, params.axis, y, /*log=*/false);
}

template <typename T>
void logSoftmax(const T *x, const Dims &dims, T *y, const Dims &,
                const AxisParams &params) {
  detail::softmaxImpl(x, dims, params.axis, y, /*log=*/true);
}

namespace detail {

/// The mean of a row and one over its standard deviation (`epsilon` added
/// to the variance), both sums in vector lanes (an order fixed by the
/// code): layerNorm and its gradient compute them alike. With `rms` the
/// mean is 0 and the "variance" the mean square: root-mean-square
/// normalization.
template <typename T>
std::pair<ComputeT<T>, ComputeT<T>> rowStatistics(const T *in, int64_t length,
                                                  double epsilon, bool rms) {
  using Acc = ComputeT<T>;
  Acc mean = 0;
  if (!rms) {
    Acc sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < length; ++i)
      sum += load(in[i]);
    mean = sum / static_cast<Acc>(length);
  }
  Acc squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < length; ++i) {
    Acc centered = load(in[i]) - mean;
    squares += centered * centered;
  }
  Acc variance = squares / static_cast<Acc>(length);
  return {mean, Acc(1) / std::sqrt(variance + static_cast<Acc>(epsilon))};
}

} // namespace detail

namespace detail {

/// layerNorm over T, its result stored in Out.
template <typename T, typename Out>
void layerNormRows(const T *x, const Dims &dims, const T *scale, const T *bias,
                   Out *y, const LayerNormParams &params) {
  const int64_t axis = params.axis;
  const double epsilon = params.epsilon;
  using Acc = detail::ComputeT<T>;
  // Plain variables, not structured bindings: clang's OpenMP cannot
  // capture those (the sanitizer build compiles steps with clang).
  const NormalizedRows shape = normalizedRows(dims, axis);
  const int64_t rows = shape.rows, length = shape.length;
#pragma omp parallel for if (rows * length > detail::kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const T *in = x + r * length;
    Out *out = y + r * length;
    const std::pair<Acc, Acc> stats =
        detail::rowStatistics(in, length, epsilon, params.rms);
    const Acc mean = stats.first, inverse = stats.second;
    for (int64_t i = 0; i < length; ++i) {
      Acc value =
          (detail::load(in[i]) - mean) * inverse * detail::load(scale[i]);
      if (bias)
        value += detail::load(bias[i]);
      out[i] = detail::store<Out>(value);
    }
  }
}

} // namespace detail

template <typename T>
void layerNorm(const T *x, const Dims &dims, const T *scale, const Dims &,
               const T *bias, const Dims &, T *y, const Dims &,
               const LayerNormParams &params) {
  detail::layerNormRows(x, dims, scale, bias, y, params);
}

/// layerNorm in T's compute type, stored in T (Library.def).
template <typename T>
void layerNormNarrow(const detail::ComputeT<T> *x, const Dims &dims,
                     const detail::ComputeT<T> *scale, const Dims &,
                     const detail::ComputeT<T> *bias, const Dims &, T *y,
                     const Dims &, const LayerNormParams &params) {
  detail::layerNormRows(x, dims, scale, bias, y, params);
}

namespace detail {

/// The gradients of layerNorm's input, scale and bias. Per row of the
/// normalized dimensions, the input's is rstd * (dn - mean(dn) - xhat *
/// mean(dn * xhat)) with dn = gy * scale, xhat the normalized input and
/// rstd one over its standard deviation (the statistics recomputed as
/// layerNorm computes them), without the mean(dn) term under `rms`; the
/// scale's is the sum over the rows of gy *
/// xhat (each product rounded to ComputeT), the bias's the sum of gy, both
/// added in SumT. The rows go in reduceChunks(rows) chunks, a thread each,
/// every chunk's sums row by row; the chunks' sums are added in chunk
/// order, so the threads change no result. A row stays in cache between
/// its passes. gy may be of a narrower type G: each row is widened to T
/// first, so the sums vectorize as T's and give T's bits. With `narrow`,
/// the input's gradient is also stored there, in Narrow, rounded from its
/// value in T.
template <typename T, typename G, typename Narrow>
void layerNormBackwardRows(const T *x, const Dims &dims, const T *scale,
                           const G *gy, const T *addend, T *gx, T *gscale,
                           T *gbias, Narrow *narrow,
                           const LayerNormParams &params) {
  const int64_t axis = params.axis;
  const double epsilon = params.epsilon;
  using Acc = ComputeT<T>;
  using Sum = SumT<T>;
  const NormalizedRows shape = normalizedRows(dims, axis);
  const int64_t rows = shape.rows, length = shape.length;
  if (length == 0)
    return;
  const int64_t chunks = reduceChunks(rows);
  // Per chunk: the scale's sums, then the bias's.
  std::vector<Sum> partial(static_cast<size_t>(chunks * 2 * length), Sum(0));
#pragma omp parallel for if (rows * length > kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c) {
    Sum *scaleSums = partial.data() + c * 2 * length;
    Sum *biasSums = scaleSums + length;
    std::vector<T> widened(std::is_same_v<G, T> ? 0 : length);
    for (int64_t r = rows * c / chunks; r < rows * (c + 1) / chunks; ++r) {
      const T *in = x + r * length;
      const T *g;
      if constexpr (std::is_same_v<G, T>) {
        g = gy + r * length;
      } else {
        for (int64_t i = 0; i < length; ++i)
          widened[i] = static_cast<T>(load(gy[r * length + i]));
        g = widened.data();
      }
      T *out = gx + r * length;
      Narrow *narrowOut = narrow ? narrow + r * length : nullptr;
      const T *add = addend ? addend + r * length : nullptr;
      const std::pair<Acc, Acc> stats =
          rowStatistics(in, length, epsilon, params.rms);
      const Acc mean = stats.first, rstd = stats.second;
      Acc dnSum = 0, dnXhatSum = 0;
#pragma omp simd reduction(+ : dnSum, dnXhatSum)
      for (int64_t i = 0; i < length; ++i) {
        Acc dn = load(g[i]) * load(scale[i]);
        Acc xhat = (load(in[i]) - mean) * rstd;
        dnSum += dn;
        dnXhatSum += dn * xhat;
      }
      // Without a mean subtracted, dn's mean has no part in the gradient.
      Acc dnMean = params.rms ? Acc(0) : dnSum / static_cast<Acc>(length);
      Acc dnXhatMean = dnXhatSum / static_cast<Acc>(length);
#pragma omp simd
      for (int64_t i = 0; i < length; ++i) {
        Acc gi = load(g[i]);
        Acc dn = gi * load(scale[i]);
        Acc xhat = (load(in[i]) - mean) * rstd;
        out[i] = storePlus<T>(rstd * (dn - dnMean - xhat * dnXhatMean), add, i);
        if (narrowOut)
          narrowOut[i] = store<Narrow>(load(out[i]));
        Acc term = gi * xhat;
        scaleSums[i] += static_cast<Sum>(term);
        biasSums[i] += static_cast<Sum>(gi);
      }
    }
  }
  for (int64_t i = 0; i < length; ++i) {
    Sum scaleSum = 0, biasSum = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      scaleSum += partial[c * 2 * length + i];
      biasSum += partial[c * 2 * length + length + i];
    }
    gscale[i] = store<T>(scaleSum);
    gbias[i] = store<T>(biasSum);
  }
}

} // namespace detail

template <typename T>
void layerNormBackward(const T *x, const Dims &dims, const T *scale,
                       const Dims &, const T *gy, const Dims &, const T *addend,
                       const Dims &, T *gx, const Dims &, T *gscale,
                       const Dims &, T *gbias, const Dims &,
                       const LayerNormParams &params) {
  detail::layerNormBackwardRows(x, dims, scale, gy, addend, gx, gscale, gbias,
                                static_cast<T *>(nullptr), params);
}

/// layerNormBackward in T's compute type (f32) of the result's gradient in
/// T (bf16, f16), which also stores the input's gradient in T
/// (Library.def).
template <typename T>
void layerNormBackwardNarrow(const detail::ComputeT<T> *x, const Dims &dims,
                             const detail::ComputeT<T> *scale, const Dims &,
                             const T *gy, const Dims &,
                             const detail::ComputeT<T> *addend, const Dims &,
                             detail::ComputeT<T> *gx, const Dims &,
                             detail::ComputeT<T> *gscale, const Dims &,
                             detail::ComputeT<T> *gbias, const Dims &,
                             T *gxNarrow, const Dims &,
                             const LayerNormParams &params) {
  detail::layerNormBackwardRows(x, dims, scale, gy, addend, gx, gscale, gbias,
                                gxNarrow, params);
}

/// layerNormBackwardNarrow of the result's gradient in T's compute type
/// (Library.def): the input's gradient stored in the compute type and in T.
template <typename T>
void layerNormBackwardNarrowOut(const detail::ComputeT<T> *x, const Dims &dims,
                                const detail::ComputeT<T> *scale, const Dims &,
                                const detail::ComputeT<T> *gy, const Dims &,
                                const detail::ComputeT<T> *addend, const Dims &,
                                detail::ComputeT<T> *gx, const Dims &,
                                detail::ComputeT<T> *gscale, const Dims &,
                                detail::ComputeT<T> *gbias, const Dims &,
                                T *gxNarrow, const Dims &,
                                const LayerNormParams &params) {
  detail::layerNormBackwardRows(x, dims, scale, gy, addend, gx, gscale, gbias,
                                gxNarrow, params);
}

/// x * factor + shift per channel, the channels along dimension 1, or the
/// last one with channels_last (ztc-channels-last's NHWC): the same
/// arithmetic for each element either way.
template <typename T>
void batchNorm(const T *x, const Dims &dims, const T *scale, const Dims &,
               const T *bias, const Dims &, const T *mean, const Dims &,
               const T *var, const Dims &, T *y, const Dims &,
               const BatchNormParams &params) {
  using Acc = detail::ComputeT<T>;
  const bool last = params.channels_last;
  const int64_t channels = dims.d[last ? dims.rank - 1 : 1];
  const Acc epsilon = static_cast<Acc>(params.epsilon);
  std::vector<Acc> factor(channels), shift(channels);
  for (int64_t c = 0; c < channels; ++c) {
    Acc inverse = Acc(1) / std::sqrt(detail::load(var[c]) + epsilon);
    factor[c] = detail::load(scale[c]) * inverse;
    shift[c] = detail::load(bias[c]) - detail::load(mean[c]) * factor[c];
  }
  // Rows of one channel each (NCHW's planes), or of every channel (NHWC).
  const int64_t inner = last ? channels : product(dims, 2, dims.rank);
  const int64_t rows = inner ? dims.numElements() / inner : 0;
#pragma omp parallel for if (rows * inner > detail::kParallelGrain)
  for (int64_t row = 0; row < rows; ++row) {
    const T *in = x + row * inner;
    T *out = y + row * inner;
    if (last) {
      for (int64_t c = 0; c < inner; ++c)
        out[c] = detail::store<T>(detail::load(in[c]) * factor[c] + shift[c]);
    } else {
      const Acc f = factor[row % channels], s = shift[row % channels];
      for (int64_t i = 0; i < inner; ++i)
        out[i] = detail::store<T>(detail::load(in[i]) * f + s);
    }
  }
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_NORM_H
