//===- Window.h - the sliding window of conv2d and pooling ------*- C++ -*-===//
//
// The one definition of which input elements a 2-D sliding window reads,
// shared by conv2d, its two gradients and the pooling kernels of the CPU and
// CUDA libraries: tap (kh, kw) of output (oh, ow) reads input row
// oh * stride - pad + kh * dilation and the matching column, and a tap in
// the padding reads nothing. The visitors below walk taps and outputs in one
// fixed order (rows outside, columns inside), so both libraries accumulate
// every sum in the same order.
//
// Only the C++17 standard library is used; under nvcc every member is also
// a device function (ZTC_HOST_DEVICE). Visitors are plain lambdas: one
// defined in a device function is a device function, so nvcc needs no
// extended-lambda flag.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_WINDOW_H
#define ZTC_RUNTIME_KERNELS_WINDOW_H

#include "Dims.h"
#include "Numeric.h"

#include <cstdint>

namespace ztc {

/// Input rows (or columns) [begin, end).
struct Span {
  int64_t begin, end;
};

/// What Window2d::maxPick returns: the value max pooling picks in a window
/// and its offset (ih * width + iw) in the input plane, -1 when every tap
/// lies in the padding.
template <typename Acc> struct MaxPick {
  Acc value;
  int64_t where;
};

/// A 2-D window over NCHW input planes (pads: top, left; the bottom and
/// right pads are implied by the output size). Passed to CUDA kernels by
/// value.
struct Window2d {
  int64_t height, width, outH, outW;
  int64_t kH, kW, strideH, strideW, padH, padW, dilationH, dilationW;

  /// The input row read by tap row `kh` of output row `oh`; outside
  /// [0, height) when the tap lies in the padding.
  ZTC_HOST_DEVICE int64_t inputRow(int64_t oh, int64_t kh) const {
    return oh * strideH - padH + kh * dilationH;
  }
  /// The input column read by tap column `kw` of output column `ow`.
  ZTC_HOST_DEVICE int64_t inputCol(int64_t ow, int64_t kw) const {
    return ow * strideW - padW + kw * dilationW;
  }

  /// A 1x1 kernel with unit stride and no padding reads the input as is.
  ZTC_HOST_DEVICE bool readsInputAsIs() const {
    return kH == 1 && kW == 1 && strideH == 1 && strideW == 1 && padH == 0 &&
           padW == 0 && outH == height && outW == width;
  }

  /// Calls visit(kh, kw, ih, iw) for every tap of output (oh, ow) that lies
  /// inside the input.
  template <typename Visit>
  ZTC_HOST_DEVICE void forEachTap(int64_t oh, int64_t ow,
                                  const Visit &visit) const {
    forEachInside({kH, inputRow(oh, 0), dilationH},
                  {kW, inputCol(ow, 0), dilationW}, visit);
  }

  /// Calls visit(oh, ow, ih, iw) for every output whose tap (kh, kw) lies
  /// inside the input (conv2d's filter gradient).
  template <typename Visit>
  ZTC_HOST_DEVICE void forEachOutputOfTap(int64_t kh, int64_t kw,
                                          const Visit &visit) const {
    forEachInside({outH, inputRow(0, kh), strideH},
                  {outW, inputCol(0, kw), strideW}, visit);
  }

  /// Calls visit(kh, kw, oh, ow) for every tap and output that read input
  /// (ih, iw) (conv2d's data gradient): inputRow(oh, kh) == ih and
  /// inputCol(ow, kw) == iw.
  template <typename Visit>
  ZTC_HOST_DEVICE void forEachReaderOf(int64_t ih, int64_t iw,
                                       const Visit &visit) const {
    for (int64_t kh = 0; kh < kH; ++kh) {
      int64_t oh = outputReading(ih, kh, padH, strideH, dilationH, outH);
      if (oh < 0)
        continue;
      for (int64_t kw = 0; kw < kW; ++kw) {
        int64_t ow = outputReading(iw, kw, padW, strideW, dilationW, outW);
        if (ow >= 0)
          visit(kh, kw, oh, ow);
      }
    }
  }

  /// The element max pooling picks in output (oh, ow)'s window of the input
  /// plane `in`, whose pixel ih * width + iw lies that many times `step`
  /// elements past `in`: the first maximum, or the last NaN (NaN
  /// propagates), the element PyTorch routes the gradient to.
  template <typename T>
  ZTC_HOST_DEVICE MaxPick<numeric::ComputeT<T>>
  maxPick(const T *in, int64_t oh, int64_t ow, int64_t step = 1) const {
    MaxPick<numeric::ComputeT<T>> pick{0, -1};
    forEachTap(oh, ow, [&](int64_t, int64_t, int64_t ih, int64_t iw) {
      auto value = numeric::load(in[(ih * width + iw) * step]);
      if (pick.where < 0 || value > pick.value || numeric::isNan(value))
        pick = {value, ih * width + iw};
    });
    return pick;
  }

  /// The input rows under output row `oh`'s window, clamped to the input
  /// (average pooling: no dilation).
  ZTC_HOST_DEVICE Span rowSpan(int64_t oh) const {
    return clamp(inputRow(oh, 0), kH, height);
  }
  /// The input columns under output column `ow`'s window, clamped.
  ZTC_HOST_DEVICE Span colSpan(int64_t ow) const {
    return clamp(inputCol(ow, 0), kW, width);
  }

  /// Average pooling's divisor for a window over `rows` x `cols`: the full
  /// kernel size with countIncludePad (also for a ceil_mode window that runs
  /// past the padded input, as ONNX does), else the inputs in the window.
  ZTC_HOST_DEVICE int64_t avgDivisor(Span rows, Span cols,
                                     bool countIncludePad) const {
    return countIncludePad ? kH * kW
                           : (rows.end - rows.begin) * (cols.end - cols.begin);
  }

private:
  /// Input rows (or columns) start + i * step for i in [0, count): the taps
  /// of one output step by the dilation, the outputs of one tap by the
  /// stride.
  struct Walk {
    int64_t count, start, step;
  };

  /// Calls visit(i, j, ih, iw) for every row i of `rows` and column j of
  /// `cols` that lie inside the input, rows outside.
  template <typename Visit>
  ZTC_HOST_DEVICE void forEachInside(Walk rows, Walk cols,
                                     const Visit &visit) const {
    for (int64_t i = 0; i < rows.count; ++i) {
      int64_t ih = rows.start + i * rows.step;
      if (ih < 0 || ih >= height)
        continue;
      for (int64_t j = 0; j < cols.count; ++j) {
        int64_t iw = cols.start + j * cols.step;
        if (iw < 0 || iw >= width)
          continue;
        visit(i, j, ih, iw);
      }
    }
  }

  /// Along one axis: the output o whose tap k reads input index i
  /// (o * stride - pad + k * dilation == i), or -1 when there is none.
  ZTC_HOST_DEVICE static int64_t outputReading(int64_t i, int64_t k,
                                               int64_t pad, int64_t stride,
                                               int64_t dilation,
                                               int64_t outSize) {
    int64_t offset = i + pad - k * dilation;
    if (offset < 0 || offset % stride)
      return -1;
    int64_t o = offset / stride;
    return o < outSize ? o : -1;
  }

  ZTC_HOST_DEVICE static Span clamp(int64_t begin, int64_t kernel,
                                    int64_t size) {
    return {begin > 0 ? begin : 0,
            begin + kernel < size ? begin + kernel : size};
  }
};

/// The window of a conv2d or 2-D pooling from its NCHW input and output
/// shapes; `kernel` is {kH, kW}, `pads` starts with top and left, and
/// `dilations` may be nullptr (all 1).
inline Window2d window2d(const Dims &inDims, const Dims &outDims,
                         const int64_t *kernel, const int64_t *strides,
                         const int64_t *pads, const int64_t *dilations) {
  Window2d w{};
  w.height = inDims.d[2];
  w.width = inDims.d[3];
  w.outH = outDims.d[2];
  w.outW = outDims.d[3];
  w.kH = kernel[0];
  w.kW = kernel[1];
  w.strideH = strides[0];
  w.strideW = strides[1];
  w.padH = pads[0];
  w.padW = pads[1];
  w.dilationH = dilations ? dilations[0] : 1;
  w.dilationW = dilations ? dilations[1] : 1;
  return w;
}

/// Where the planes of a 2-D pooling's input or output lie: plane
/// p = n * channels + c (image n's channel c) starts at start(p), and its
/// pixel h * width + w lies that many times step() elements further. The
/// planes of an NCHW tensor are contiguous; an NHWC one's (channelsLast)
/// interleave, one element of each per pixel. Passed to CUDA kernels by
/// value.
struct PoolPlanes {
  int64_t channels, pixels;
  bool channelsLast;

  ZTC_HOST_DEVICE int64_t start(int64_t plane) const {
    return channelsLast
               ? plane / channels * pixels * channels + plane % channels
               : plane * pixels;
  }
  ZTC_HOST_DEVICE int64_t step() const { return channelsLast ? channels : 1; }
  /// The plane of element `flat` of the tensor.
  ZTC_HOST_DEVICE int64_t planeOf(int64_t flat) const {
    return channelsLast
               ? flat / (pixels * channels) * channels + flat % channels
               : flat / pixels;
  }
  /// The pixel of element `flat` in its plane.
  ZTC_HOST_DEVICE int64_t pixelOf(int64_t flat) const {
    return channelsLast ? flat / channels % pixels : flat % pixels;
  }
};

/// A 2-D pooling (or its gradient) from `in` to `out` (NCHW dimensions, or
/// NHWC ones with channelsLast): its window, the planes of both and their
/// number.
struct PoolGeometry {
  Window2d window;
  PoolPlanes in, out;
  int64_t planes;
};

inline PoolGeometry poolGeometry(const Dims &inDims, const Dims &outDims,
                                 bool channelsLast, const int64_t *kernel,
                                 const int64_t *strides, const int64_t *pads,
                                 const int64_t *dilations) {
  Dims in = channelsLast ? nchwOf(inDims) : inDims;
  Dims out = channelsLast ? nchwOf(outDims) : outDims;
  PoolGeometry g{};
  g.window = window2d(in, out, kernel, strides, pads, dilations);
  g.in = {in.d[1], in.d[2] * in.d[3], channelsLast};
  g.out = {out.d[1], out.d[2] * out.d[3], channelsLast};
  g.planes = in.d[0] * in.d[1];
  return g;
}

} // namespace ztc

#endif // ZTC_RUNTIME_KERNELS_WINDOW_H
