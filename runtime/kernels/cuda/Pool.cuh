//===- Pool.cuh - 2-D pooling on CUDA ---------------------------*- C++ -*-===//
//
// maxPool2d, avgPool2d and their gradients on NCHW or NHWC tensors: one
// thread per output element (forward) or input element (gradient), every
// window and plane from Window.h.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_POOL_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_POOL_CUH

#include "Common.cuh"

#include "../Dims.h"
#include "../Library.h"
#include "../Window.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ztc::cuda {

namespace detail {

template <typename T> struct MaxPoolBody {
  const T *x;
  T *y;
  PoolGeometry g;
  ComputeT<T> lowest;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t pixel = g.out.pixelOf(flat);
    int64_t ow = pixel % g.window.outW, oh = pixel / g.window.outW;
    const T *in = x + g.in.start(g.out.planeOf(flat));
    MaxPick<ComputeT<T>> pick = g.window.maxPick(in, oh, ow, g.in.step());
    y[flat] = store<T>(pick.where < 0 ? lowest : pick.value);
  }
};

template <typename T> struct AvgPoolBody {
  const T *x;
  T *y;
  PoolGeometry g;
  bool countIncludePad;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    const Window2d &p = g.window;
    int64_t pixel = g.out.pixelOf(flat);
    int64_t ow = pixel % p.outW, oh = pixel / p.outW;
    const T *in = x + g.in.start(g.out.planeOf(flat));
    int64_t step = g.in.step();
    Span rows = p.rowSpan(oh), cols = p.colSpan(ow);
    Acc sum = 0;
    for (int64_t ih = rows.begin; ih < rows.end; ++ih)
      for (int64_t iw = cols.begin; iw < cols.end; ++iw)
        sum += load(in[(ih * p.width + iw) * step]);
    int64_t count = p.avgDivisor(rows, cols, countIncludePad);
    y[flat] = store<T>(sum / static_cast<Acc>(count));
  }
};

//===----------------------------------------------------------------------===//
// Gradient bodies
//===----------------------------------------------------------------------===//
//
// Each gathers what contributes to its element in the order the CPU kernel
// accumulates, without atomics (as Conv.cuh's).

/// The output rows (or columns) whose pooling window covers input index
/// `i`: [first, last], with `(i + pad - o * stride) % dilation == 0` left to
/// the caller.
struct CoveringWindows {
  int64_t first, last;
};
ZTC_HOST_DEVICE inline CoveringWindows
coveringWindows(int64_t i, int64_t pad, int64_t stride, int64_t kernel,
                int64_t dilation, int64_t outSize) {
  // o * stride - pad <= i  and  i <= o * stride - pad + (kernel-1)*dilation.
  int64_t high = i + pad;
  int64_t low = high - (kernel - 1) * dilation;
  int64_t first = low <= 0 ? 0 : (low + stride - 1) / stride;
  int64_t last = high / stride;
  return {first, last < outSize - 1 ? last : outSize - 1};
}

/// gx of maxPool2d at one input element: the gradients of the windows
/// whose pick (the first maximum, or the last NaN: MaxPoolBody's and the
/// CPU's rule) is this element, in window order.
template <typename T> struct MaxPoolBackwardBody {
  const T *x, *gy;
  T *gx;
  PoolGeometry g;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    const Window2d &p = g.window;
    int64_t pixel = g.in.pixelOf(flat), plane = g.in.planeOf(flat);
    int64_t iw = pixel % p.width, ih = pixel / p.width;
    const T *in = x + g.in.start(plane);
    const T *grad = gy + g.out.start(plane);
    int64_t inStep = g.in.step(), outStep = g.out.step();
    CoveringWindows rows =
        coveringWindows(ih, p.padH, p.strideH, p.kH, p.dilationH, p.outH);
    CoveringWindows cols =
        coveringWindows(iw, p.padW, p.strideW, p.kW, p.dilationW, p.outW);
    Acc sum = 0;
    for (int64_t oh = rows.first; oh <= rows.last; ++oh) {
      if ((ih + p.padH - oh * p.strideH) % p.dilationH)
        continue;
      for (int64_t ow = cols.first; ow <= cols.last; ++ow) {
        if ((iw + p.padW - ow * p.strideW) % p.dilationW)
          continue;
        if (p.maxPick(in, oh, ow, inStep).where == pixel)
          sum += load(grad[(oh * p.outW + ow) * outStep]);
      }
    }
    gx[flat] = store<T>(sum);
  }
};

/// gx of avgPool2d at one input element: each covering window's gradient
/// divided by the window's divisor (AvgPoolBody's), in window order.
template <typename T> struct AvgPoolBackwardBody {
  const T *gy;
  T *gx;
  PoolGeometry g;
  bool countIncludePad;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    const Window2d &p = g.window;
    int64_t pixel = g.in.pixelOf(flat);
    int64_t iw = pixel % p.width, ih = pixel / p.width;
    const T *grad = gy + g.out.start(g.in.planeOf(flat));
    int64_t outStep = g.out.step();
    CoveringWindows rows =
        coveringWindows(ih, p.padH, p.strideH, p.kH, 1, p.outH);
    CoveringWindows cols =
        coveringWindows(iw, p.padW, p.strideW, p.kW, 1, p.outW);
    Acc sum = 0;
    for (int64_t oh = rows.first; oh <= rows.last; ++oh) {
      Span rowSpan = p.rowSpan(oh);
      for (int64_t ow = cols.first; ow <= cols.last; ++ow) {
        int64_t count = p.avgDivisor(rowSpan, p.colSpan(ow), countIncludePad);
        sum +=
            load(grad[(oh * p.outW + ow) * outStep]) / static_cast<Acc>(count);
      }
    }
    gx[flat] = store<T>(sum);
  }
};

} // namespace detail

/// Every kernel here takes NCHW tensors, or NHWC ones with the parameters'
/// channels_last (ztc-channels-last); both give the same bits, the CPU
/// library's.
template <typename T>
void maxPool2d(const T *x, const Dims &xDims, T *y, const Dims &yDims,
               const MaxPool2dParams &params, cudaStream_t stream) {
  PoolGeometry g = poolGeometry(xDims, yDims, params.channels_last,
                                params.kernel.data, params.strides.data,
                                params.pads.data, params.dilations.data);
  detail::launchElements(
      yDims.numElements(),
      detail::MaxPoolBody<T>{x, y, g,
                             detail::lowestValue<detail::ComputeT<T>>()},
      stream, "maxPool2d");
}

template <typename T>
void avgPool2d(const T *x, const Dims &xDims, T *y, const Dims &yDims,
               const AvgPool2dParams &params, cudaStream_t stream) {
  PoolGeometry g =
      poolGeometry(xDims, yDims, params.channels_last, params.kernel.data,
                   params.strides.data, params.pads.data, nullptr);
  detail::launchElements(
      yDims.numElements(),
      detail::AvgPoolBody<T>{x, y, g, params.count_include_pad}, stream,
      "avgPool2d");
}

//===----------------------------------------------------------------------===//
// Gradients (adjoints of the kernels above)
//===----------------------------------------------------------------------===//

template <typename T>
void maxPool2dBackward(const T *x, const Dims &xDims, const T *gy,
                       const Dims &gyDims, T *gx, const Dims &,
                       const MaxPool2dParams &params, cudaStream_t stream) {
  PoolGeometry g = poolGeometry(xDims, gyDims, params.channels_last,
                                params.kernel.data, params.strides.data,
                                params.pads.data, params.dilations.data);
  detail::launchElements(xDims.numElements(),
                         detail::MaxPoolBackwardBody<T>{x, gy, gx, g}, stream,
                         "maxPool2dBackward");
}

template <typename T>
void avgPool2dBackward(const T *gy, const Dims &gyDims, T *gx,
                       const Dims &gxDims,
                       const AvgPool2dBackwardParams &params,
                       cudaStream_t stream) {
  PoolGeometry g =
      poolGeometry(gxDims, gyDims, params.channels_last, params.kernel.data,
                   params.strides.data, params.pads.data, nullptr);
  detail::launchElements(
      gxDims.numElements(),
      detail::AvgPoolBackwardBody<T>{gy, gx, g, params.count_include_pad},
      stream, "avgPool2dBackward");
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_POOL_CUH
