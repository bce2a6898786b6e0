//===- Pool.h - 2-D pooling on the CPU --------------------------*- C++ -*-===//
//
// maxPool2d, avgPool2d and their gradients, on NCHW or NHWC tensors. Every
// window and plane comes from Window.h, so a gradient reaches exactly the
// inputs its forward kernel read.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_POOL_H
#define ZTC_RUNTIME_KERNELS_CPU_POOL_H

#include "Common.h"

#include "../Dims.h"
#include "../Library.h"
#include "../Window.h"

#include <cstdint>
#include <vector>

namespace ztc::cpu {

namespace detail {

/// Stores `pool(in, oh, ow)` (computed in ComputeT<T>) at every output
/// position of a 2-D pooling; `in` is the input plane of the position.
template <typename T, typename PoolFn>
void poolPlanes(const T *x, T *y, const PoolGeometry &g, PoolFn pool) {
  const Window2d &window = g.window;
  int64_t outH = window.outH, outW = window.outW, step = g.out.step();
#pragma omp parallel for if (g.planes * outH * outW > kParallelGrain)
  for (int64_t p = 0; p < g.planes; ++p) {
    const T *in = x + g.in.start(p);
    T *out = y + g.out.start(p);
    for (int64_t oh = 0; oh < outH; ++oh)
      for (int64_t ow = 0; ow < outW; ++ow)
        out[(oh * outW + ow) * step] = store<T>(pool(in, oh, ow));
  }
}

/// Stores, for every input plane of a 2-D pooling's gradient, the sums
/// that `spread(in, grad, acc)` accumulates into `acc` (one per input
/// pixel, zeroed); `in` and `grad` are the plane's forward input (null
/// without `x`) and output gradient.
template <typename T, typename SpreadFn>
void spreadPlanes(const T *x, const T *gy, T *gx, const PoolGeometry &g,
                  SpreadFn spread) {
  using Acc = ComputeT<T>;
  int64_t pixels = g.in.pixels, step = g.in.step();
#pragma omp parallel for if (g.planes * pixels > kParallelGrain)
  for (int64_t p = 0; p < g.planes; ++p) {
    std::vector<Acc> acc(pixels, Acc(0));
    spread(x ? x + g.in.start(p) : nullptr, gy + g.out.start(p), acc);
    T *out = gx + g.in.start(p);
    for (int64_t i = 0; i < pixels; ++i)
      out[i * step] = store<T>(acc[i]);
  }
}

} // namespace detail

/// Every kernel here takes NCHW tensors, or NHWC ones with the parameters'
/// channels_last (ztc-channels-last); both give the same bits.
template <typename T>
void maxPool2d(const T *x, const Dims &xDims, T *y, const Dims &yDims,
               const MaxPool2dParams &params) {
  using Acc = detail::ComputeT<T>;
  PoolGeometry g = poolGeometry(xDims, yDims, params.channels_last,
                                params.kernel.data, params.strides.data,
                                params.pads.data, params.dilations.data);
  int64_t step = g.in.step();
  detail::poolPlanes(x, y, g, [&](const T *in, int64_t oh, int64_t ow) {
    MaxPick<Acc> pick = g.window.maxPick(in, oh, ow, step);
    return pick.where < 0 ? detail::lowestValue<Acc>() : pick.value;
  });
}

template <typename T>
void avgPool2d(const T *x, const Dims &xDims, T *y, const Dims &yDims,
               const AvgPool2dParams &params) {
  const bool countIncludePad = params.count_include_pad;
  using Acc = detail::ComputeT<T>;
  PoolGeometry g =
      poolGeometry(xDims, yDims, params.channels_last, params.kernel.data,
                   params.strides.data, params.pads.data, nullptr);
  const Window2d &window = g.window;
  int64_t step = g.in.step();
  detail::poolPlanes(x, y, g, [&](const T *in, int64_t oh, int64_t ow) {
    Span rows = window.rowSpan(oh), cols = window.colSpan(ow);
    Acc sum = 0;
    for (int64_t ih = rows.begin; ih < rows.end; ++ih)
      for (int64_t iw = cols.begin; iw < cols.end; ++iw)
        sum += detail::load(in[(ih * window.width + iw) * step]);
    int64_t count = window.avgDivisor(rows, cols, countIncludePad);
    return sum / static_cast<Acc>(count);
  });
}

//===----------------------------------------------------------------------===//
// Gradients (adjoints of the kernels above)
//===----------------------------------------------------------------------===//

/// gx of maxPool2d: each window's gradient goes to the element the forward
/// kernel picked (the first maximum, or the last NaN), as PyTorch routes it.
template <typename T>
void maxPool2dBackward(const T *x, const Dims &xDims, const T *gy,
                       const Dims &gyDims, T *gx, const Dims &,
                       const MaxPool2dParams &params) {
  using Acc = detail::ComputeT<T>;
  PoolGeometry g = poolGeometry(xDims, gyDims, params.channels_last,
                                params.kernel.data, params.strides.data,
                                params.pads.data, params.dilations.data);
  const Window2d &window = g.window;
  int64_t inStep = g.in.step(), outStep = g.out.step();
  detail::spreadPlanes(
      x, gy, gx, g, [&](const T *in, const T *grad, std::vector<Acc> &acc) {
        for (int64_t oh = 0; oh < window.outH; ++oh)
          for (int64_t ow = 0; ow < window.outW; ++ow) {
            int64_t where = window.maxPick(in, oh, ow, inStep).where;
            if (where >= 0)
              acc[where] +=
                  detail::load(grad[(oh * window.outW + ow) * outStep]);
          }
      });
}

/// gx of avgPool2d: each window's gradient spread evenly over its inputs,
/// with the divisor the forward kernel used.
template <typename T>
void avgPool2dBackward(const T *gy, const Dims &gyDims, T *gx,
                       const Dims &gxDims,
                       const AvgPool2dBackwardParams &params) {
  const bool countIncludePad = params.count_include_pad;
  using Acc = detail::ComputeT<T>;
  PoolGeometry g =
      poolGeometry(gxDims, gyDims, params.channels_last, params.kernel.data,
                   params.strides.data, params.pads.data, nullptr);
  const Window2d &window = g.window;
  int64_t outStep = g.out.step();
  detail::spreadPlanes<T>(
      nullptr, gy, gx, g, [&](const T *, const T *grad, std::vector<Acc> &acc) {
        for (int64_t oh = 0; oh < window.outH; ++oh)
          for (int64_t ow = 0; ow < window.outW; ++ow) {
            Span rows = window.rowSpan(oh), cols = window.colSpan(ow);
            int64_t count = window.avgDivisor(rows, cols, countIncludePad);
            if (count <= 0)
              continue;
            Acc share = detail::load(grad[(oh * window.outW + ow) * outStep]) /
                        static_cast<Acc>(count);
            for (int64_t ih = rows.begin; ih < rows.end; ++ih)
              for (int64_t iw = cols.begin; iw < cols.end; ++iw)
                acc[ih * window.width + iw] += share;
          }
      });
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_POOL_H
