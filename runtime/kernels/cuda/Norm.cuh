//===- Norm.cuh - softmax and normalization on CUDA -------------*- C++ -*-===//
//
// softmax, logSoftmax, layerNorm (or root-mean-square normalization) with
// its gradients, and batchNorm (inference form); a row's sums are one thread
// block's tree reduction.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_NORM_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_NORM_CUH

#include "Common.cuh"
#include "Scratch.h"

#include "../Dims.h"
#include "../Library.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ztc::cuda {

namespace detail {

/// softmax (log = false) or logSoftmax (log = true) of one row along the
/// axis: `length` elements `inner` apart.
template <typename T> struct SoftmaxBody {
  const T *x;
  T *y;
  int64_t length, inner;
  bool log;
  ComputeT<T> lowest;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    int64_t base = (row / inner) * length * inner + row % inner;
    const T *in = x + base;
    T *out = y + base;
    Acc maximum = lowest;
    for (int64_t i = team.rank(); i < length; i += team.size())
      maximum = MaxOp()(maximum, load(in[i * inner]));
    maximum = team.reduce(maximum, MaxOp());
    Acc sum = 0;
    for (int64_t i = team.rank(); i < length; i += team.size())
      sum += mathExp(load(in[i * inner]) - maximum);
    sum = team.reduce(sum, SumOp());
    if (log) {
      Acc shift = maximum + mathLog(sum);
      for (int64_t i = team.rank(); i < length; i += team.size())
        out[i * inner] = store<T>(load(in[i * inner]) - shift);
    } else {
      for (int64_t i = team.rank(); i < length; i += team.size())
        out[i * inner] = store<T>(mathExp(load(in[i * inner]) - maximum) / sum);
    }
  }
};

/// The mean of a row and one over its standard deviation (`epsilon` added
/// to the variance), computed by the whole team: layerNorm and its
/// gradient compute them alike. With `rms` the mean is 0 and the
/// "variance" the mean square.
template <typename T, typename Team>
ZTC_HOST_DEVICE void rowStatistics(const T *in, int64_t length, double epsilon,
                                   bool rms, const Team &team,
                                   ComputeT<T> &mean, ComputeT<T> &inverse) {
  using Acc = ComputeT<T>;
  mean = 0;
  if (!rms) {
    Acc sum = 0;
    for (int64_t i = team.rank(); i < length; i += team.size())
      sum += load(in[i]);
    mean = team.reduce(sum, SumOp()) / static_cast<Acc>(length);
  }
  Acc squares = 0;
  for (int64_t i = team.rank(); i < length; i += team.size()) {
    Acc centered = load(in[i]) - mean;
    squares += centered * centered;
  }
  Acc variance = team.reduce(squares, SumOp()) / static_cast<Acc>(length);
  inverse = Acc(1) / mathSqrt(variance + static_cast<Acc>(epsilon));
}

template <typename T, typename Out = T> struct LayerNormBody {
  const T *x, *scale, *bias;
  Out *y;
  int64_t length;
  double epsilon;
  bool rms;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    const T *in = x + row * length;
    Out *out = y + row * length;
    Acc mean, inverse;
    rowStatistics(in, length, epsilon, rms, team, mean, inverse);
    for (int64_t i = team.rank(); i < length; i += team.size()) {
      Acc value = (load(in[i]) - mean) * inverse * load(scale[i]);
      if (bias)
        value += load(bias[i]);
      out[i] = store<Out>(value);
    }
  }
};

/// One row of layerNormBackward's input gradient (cpu/Norm.h has the
/// formula); the team's first thread keeps the row's statistics in `stats`
/// for the column sums. gy may be of a narrower type G; with `narrow`, the
/// gradient is also stored there in Narrow, rounded from its value in T.
template <typename T, typename G = T, typename Narrow = T>
struct LayerNormBackwardBody {
  const T *x, *scale;
  const G *gy;
  const T *addend;
  T *gx;
  Narrow *narrow;
  ComputeT<T> *stats;
  int64_t length;
  double epsilon;
  bool rms;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    const T *in = x + row * length;
    const G *g = gy + row * length;
    T *out = gx + row * length;
    Narrow *narrowOut = narrow ? narrow + row * length : nullptr;
    const T *add = addend ? addend + row * length : nullptr;
    Acc mean, rstd;
    rowStatistics(in, length, epsilon, rms, team, mean, rstd);
    if (team.rank() == 0) {
      stats[2 * row] = mean;
      stats[2 * row + 1] = rstd;
    }
    Acc dnSum = 0, dnXhatSum = 0;
    for (int64_t i = team.rank(); i < length; i += team.size()) {
      Acc dn = load(g[i]) * load(scale[i]);
      dnSum += dn;
      dnXhatSum += dn * (load(in[i]) - mean) * rstd;
    }
    // Without a mean subtracted, dn's mean has no part in the gradient
    // (`rms` is the whole team's, so all of it skips the reduction).
    const Acc dnMean =
        rms ? Acc(0) : team.reduce(dnSum, SumOp()) / static_cast<Acc>(length);
    Acc dnXhatMean = team.reduce(dnXhatSum, SumOp()) / static_cast<Acc>(length);
    for (int64_t i = team.rank(); i < length; i += team.size()) {
      Acc dn = load(g[i]) * load(scale[i]);
      Acc xhat = (load(in[i]) - mean) * rstd;
      out[i] = storePlus<T>(rstd * (dn - dnMean - xhat * dnXhatMean), add, i);
      if (narrowOut)
        narrowOut[i] = store<Narrow>(load(out[i]));
    }
  }
};

/// One column of one segment of rows of layerNormBackward's scale and bias
/// gradients: sum(gy * xhat) (each product rounded to ComputeT) and
/// sum(gy), in SumT, row by row. With one segment it writes the gradients,
/// else its sums (LayerNormColumnsCombineBody adds them).
template <typename T, typename G = T> struct LayerNormColumnsBody {
  const T *x;
  const G *gy;
  const ComputeT<T> *stats;
  T *gscale, *gbias;
  SumT<T> *partials;
  LayerNormBackwardPlan p;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    using Sum = SumT<T>;
    int64_t segment = flat / p.length, i = flat % p.length;
    int64_t first = p.rows * segment / p.segments;
    int64_t last = p.rows * (segment + 1) / p.segments;
    Sum scaleSum = 0, biasSum = 0;
    for (int64_t r = first; r < last; ++r) {
      Acc g = load(gy[r * p.length + i]);
      Acc xhat = (load(x[r * p.length + i]) - stats[2 * r]) * stats[2 * r + 1];
      Acc term = g * xhat;
      scaleSum += static_cast<Sum>(term);
      biasSum += static_cast<Sum>(g);
    }
    if (p.segments == 1) {
      gscale[i] = store<T>(scaleSum);
      gbias[i] = store<T>(biasSum);
      return;
    }
    partials[(2 * segment) * p.length + i] = scaleSum;
    partials[(2 * segment + 1) * p.length + i] = biasSum;
  }
};

/// One column of the scale's (flat < length) or bias's gradient: the
/// segments' sums added in segment order.
template <typename T> struct LayerNormColumnsCombineBody {
  const SumT<T> *partials;
  T *gscale, *gbias;
  int64_t length, segments;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t which = flat / length, i = flat % length;
    SumT<T> sum = 0;
    for (int64_t s = 0; s < segments; ++s)
      sum += partials[(2 * s + which) * length + i];
    (which == 0 ? gscale : gbias)[i] = store<T>(sum);
  }
};

/// `spatial` is 1 for channels-last tensors, whose channels are the last
/// dimension.
template <typename T> struct BatchNormBody {
  const T *x, *scale, *bias, *mean, *var;
  T *y;
  int64_t channels, spatial;
  double epsilon;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    int64_t c = (flat / spatial) % channels;
    Acc inverse = Acc(1) / mathSqrt(load(var[c]) + static_cast<Acc>(epsilon));
    Acc factor = load(scale[c]) * inverse;
    Acc shift = load(bias[c]) - load(mean[c]) * factor;
    y[flat] = store<T>(load(x[flat]) * factor + shift);
  }
};

} // namespace detail

namespace detail {

template <typename T>
void softmaxImpl(const T *x, const Dims &dims, int64_t axis, T *y, bool log,
                 cudaStream_t stream, const char *kernel) {
  if (axis < 0)
    axis += dims.rank;
  int64_t outer = product(dims, 0, axis), length = dims.d[axis];
  int64_t inner = product(dims, axis + 1, dims.rank);
  if (length == 0)
    return;
  launchRows(
      outer * inner, length,
      SoftmaxBody<T>{x, y, length, inner, log, lowestValue<ComputeT<T>>()},
      stream, kernel);
}

} // namespace detail

template <typename T>
void softmax(const T *x, const Dims &dims, T *y, const Dims &,
             const AxisParams &params, cudaStream_t stream) {
  detail::softmaxImpl(x, dims, params.axis, y, /*log=*/false, stream,
                      "softmax");
}

template <typename T>
void logSoftmax(const T *x, const Dims &dims, T *y, const Dims &,
                const AxisParams &params, cudaStream_t stream) {
  detail::softmaxImpl(x, dims, params.axis, y, /*log=*/true, stream,
                      "logSoftmax");
}

namespace detail {

/// layerNorm over T, its result stored in Out: a block per row.
template <typename T, typename Out>
void layerNormRows(const T *x, const Dims &dims, const T *scale, const T *bias,
                   Out *y, const LayerNormParams &params, cudaStream_t stream,
                   const char *kernel) {
  auto [rows, length] = normalizedRows(dims, params.axis);
  if (length == 0)
    return;
  launchRows(rows, length,
             LayerNormBody<T, Out>{x, scale, bias, y, length, params.epsilon,
                                   params.rms},
             stream, kernel);
}

} // namespace detail

template <typename T>
void layerNorm(const T *x, const Dims &dims, const T *scale, const Dims &,
               const T *bias, const Dims &, T *y, const Dims &,
               const LayerNormParams &params, cudaStream_t stream) {
  detail::layerNormRows(x, dims, scale, bias, y, params, stream, "layerNorm");
}

/// layerNorm in T's compute type, stored in T (Library.def).
template <typename T>
void layerNormNarrow(const detail::ComputeT<T> *x, const Dims &dims,
                     const detail::ComputeT<T> *scale, const Dims &,
                     const detail::ComputeT<T> *bias, const Dims &, T *y,
                     const Dims &, const LayerNormParams &params,
                     cudaStream_t stream) {
  detail::layerNormRows(x, dims, scale, bias, y, params, stream,
                        "layerNormNarrow");
}

namespace detail {

/// The gradients of layerNorm's input, scale and bias (cpu/Norm.h): a
/// block per row for the input's, then the columns' sums over segments of
/// rows (Scratch.h's LayerNormBackwardPlan), in the scratch
/// layerNormBackwardBytes<T> plans. gy may be of a narrower type G; with
/// `narrow`, the input's gradient is also stored there in Narrow.
template <typename T, typename G, typename Narrow>
void layerNormBackwardRows(const T *x, const Dims &dims, const T *scale,
                           const G *gy, const T *addend, T *gx, T *gscale,
                           T *gbias, Narrow *narrow,
                           const LayerNormParams &params,
                           const Scratch &scratch, cudaStream_t stream,
                           const char *kernel) {
  using Acc = ComputeT<T>;
  using Sum = SumT<T>;
  const LayerNormBackwardPlan p = layerNormBackwardPlan(dims, params.axis);
  if (p.length == 0)
    return;
  int64_t statsBytes = scratch::layerNormStatisticsBytes<T>(p);
  Acc *stats = nullptr;
  if (statsBytes > 0 &&
      !(stats = scratchPart<Acc>(scratch, 0, statsBytes, kernel)))
    return;
  Sum *partials = nullptr;
  if (p.segments > 1 &&
      !(partials = scratchPart<Sum>(
            scratch, scratch::alignUp(statsBytes),
            p.segments * 2 * p.length * int64_t(sizeof(Sum)), kernel)))
    return;
  launchRows(p.rows, p.length,
             LayerNormBackwardBody<T, G, Narrow>{x, scale, gy, addend, gx,
                                                 narrow, stats, p.length,
                                                 params.epsilon, params.rms},
             stream, kernel);
  launchElements(
      p.segments * p.length,
      LayerNormColumnsBody<T, G>{x, gy, stats, gscale, gbias, partials, p},
      stream, kernel);
  if (partials)
    launchElements(2 * p.length,
                   LayerNormColumnsCombineBody<T>{partials, gscale, gbias,
                                                  p.length, p.segments},
                   stream, kernel);
}

} // namespace detail

template <typename T>
void layerNormBackward(const T *x, const Dims &dims, const T *scale,
                       const Dims &, const T *gy, const Dims &, const T *addend,
                       const Dims &, T *gx, const Dims &, T *gscale,
                       const Dims &, T *gbias, const Dims &,
                       const LayerNormParams &params, const Scratch &scratch,
                       cudaStream_t stream) {
  detail::layerNormBackwardRows(x, dims, scale, gy, addend, gx, gscale, gbias,
                                static_cast<T *>(nullptr), params, scratch,
                                stream, "layerNormBackward");
}

/// layerNormBackward in T's compute type (f32) of the result's gradient in
/// T (bf16, f16), which also stores the input's gradient in T
/// (Library.def); its scratch is layerNormBackward's in the compute type.
template <typename T>
void layerNormBackwardNarrow(const detail::ComputeT<T> *x, const Dims &dims,
                             const detail::ComputeT<T> *scale, const Dims &,
                             const T *gy, const Dims &,
                             const detail::ComputeT<T> *addend, const Dims &,
                             detail::ComputeT<T> *gx, const Dims &,
                             detail::ComputeT<T> *gscale, const Dims &,
                             detail::ComputeT<T> *gbias, const Dims &,
                             T *gxNarrow, const Dims &,
                             const LayerNormParams &params,
                             const Scratch &scratch, cudaStream_t stream) {
  detail::layerNormBackwardRows(x, dims, scale, gy, addend, gx, gscale, gbias,
                                gxNarrow, params, scratch, stream,
                                "layerNormBackwardNarrow");
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
                                const LayerNormParams &params,
                                const Scratch &scratch, cudaStream_t stream) {
  detail::layerNormBackwardRows(x, dims, scale, gy, addend, gx, gscale, gbias,
                                gxNarrow, params, scratch, stream,
                                "layerNormBackwardNarrowOut");
}

template <typename T>
void batchNorm(const T *x, const Dims &dims, const T *scale, const Dims &,
               const T *bias, const Dims &, const T *mean, const Dims &,
               const T *var, const Dims &, T *y, const Dims &,
               const BatchNormParams &params, cudaStream_t stream) {
  const double epsilon = params.epsilon;
  const bool last = params.channels_last;
  detail::launchElements(
      dims.numElements(),
      detail::BatchNormBody<T>{x, scale, bias, mean, var, y,
                               dims.d[last ? dims.rank - 1 : 1],
                               last ? 1 : product(dims, 2, dims.rank), epsilon},
      stream, "batchNorm");
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_NORM_CUH
