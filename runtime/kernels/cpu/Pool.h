//===- Pool.h - 2-D pooling on the CPU --------------------------*- C++ -*-===//
//
// maxPool2d, avgPool2d and their gradients. Every window comes from
// Window.h, so a gradient reaches exactly the inputs its forward kernel
// read.
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
void poolPlanes(const T *x, const Dims &xDims, T *y, const Dims &yDims,
                PoolFn pool) {
  int64_t planes = xDims.d[0] * xDims.d[1];
  int64_t planeSize = xDims.d[2] * xDims.d[3];
  int64_t outH = yDims.d[2], outW = yDims.d[3];
#pragma omp parallel for if (planes * outH * outW > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    const T *in = x + p * planeSize;
    T *out = y + p * outH * outW;
    for (int64_t oh = 0; oh < outH; ++oh)
      for (int64_t ow = 0; ow < outW; ++ow)
        out[oh * outW + ow] = store<T>(pool(in, oh, ow));
  }
}

} // namespace detail

template <typename T>
void maxPool2d(const T *x, const Dims &xDims, T *y, const Dims &yDims,
               const MaxPool2dParams &params) {
  const int64_t *kernel = params.kernel.data, *strides = params.strides.data,
                *pads = params.pads.data, *dilations = params.dilations.data;
  using Acc = detail::ComputeT<T>;
  Window2d window = window2d(xDims, yDims, kernel, strides, pads, dilations);
  detail::poolPlanes(
      x, xDims, y, yDims, [&](const T *in, int64_t oh, int64_t ow) {
        MaxPick<Acc> pick = window.maxPick(in, oh, ow);
        return pick.where < 0 ? detail::lowestValue<Acc>() : pick.value;
      });
}

template <typename T>
void avgPool2d(const T *x, const Dims &xDims, T *y, const Dims &yDims,
               const AvgPool2dParams &params) {
  const int64_t *kernel = params.kernel.data, *strides = params.strides.data,
                *pads = params.pads.data;
  const bool countIncludePad = params.count_include_pad;
  using Acc = detail::ComputeT<T>;
  Window2d window = window2d(xDims, yDims, kernel, strides, pads, nullptr);
  detail::poolPlanes(
      x, xDims, y, yDims, [&](const T *in, int64_t oh, int64_t ow) {
        Span rows = window.rowSpan(oh), cols = window.colSpan(ow);
        Acc sum = 0;
        for (int64_t ih = rows.begin; ih < rows.end; ++ih)
          for (int64_t iw = cols.begin; iw < cols.end; ++iw)
            sum += detail::load(in[ih * window.width + iw]);
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
  const int64_t *kernel = params.kernel.data, *strides = params.strides.data,
                *pads = params.pads.data, *dilations = params.dilations.data;
  using Acc = detail::ComputeT<T>;
  int64_t planes = xDims.d[0] * xDims.d[1];
  int64_t height = xDims.d[2], width = xDims.d[3];
  int64_t outH = gyDims.d[2], outW = gyDims.d[3];
  Window2d window = window2d(xDims, gyDims, kernel, strides, pads, dilations);
#pragma omp parallel for if (planes * height * width > detail::kParallelGrain)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T *in = x + plane * height * width;
    const T *grad = gy + plane * outH * outW;
    std::vector<Acc> acc(height * width, Acc(0));
    for (int64_t oh = 0; oh < outH; ++oh)
      for (int64_t ow = 0; ow < outW; ++ow) {
        int64_t where = window.maxPick(in, oh, ow).where;
        if (where >= 0)
          acc[where] += detail::load(grad[oh * outW + ow]);
      }
    for (int64_t i = 0; i < height * width; ++i)
      gx[plane * height * width + i] = detail::store<T>(acc[i]);
  }
}

/// gx of avgPool2d: each window's gradient spread evenly over its inputs,
/// with the divisor the forward kernel used.
template <typename T>
void avgPool2dBackward(const T *gy, const Dims &gyDims, T *gx,
                       const Dims &gxDims,
                       const AvgPool2dBackwardParams &params) {
  const int64_t *kernel = params.kernel.data, *strides = params.strides.data,
                *pads = params.pads.data;
  const bool countIncludePad = params.count_include_pad;
  using Acc = detail::ComputeT<T>;
  int64_t planes = gxDims.d[0] * gxDims.d[1];
  int64_t height = gxDims.d[2], width = gxDims.d[3];
  int64_t outH = gyDims.d[2], outW = gyDims.d[3];
  Window2d window = window2d(gxDims, gyDims, kernel, strides, pads, nullptr);
#pragma omp parallel for if (planes * height * width > detail::kParallelGrain)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T *grad = gy + plane * outH * outW;
    std::vector<Acc> acc(height * width, Acc(0));
    for (int64_t oh = 0; oh < outH; ++oh)
      for (int64_t ow = 0; ow < outW; ++ow) {
        Span rows = window.rowSpan(oh), cols = window.colSpan(ow);
        int64_t count = window.avgDivisor(rows, cols, countIncludePad);
        if (count <= 0)
          continue;
        Acc share =
            detail::load(grad[oh * outW + ow]) / static_cast<Acc>(count);
        for (int64_t ih = rows.begin; ih < rows.end; ++ih)
          for (int64_t iw = cols.begin; iw < cols.end; ++iw)
            acc[ih * width + iw] += share;
      }
    for (int64_t i = 0; i < height * width; ++i)
      gx[plane * height * width + i] = detail::store<T>(acc[i]);
  }
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_POOL_H
