//===- Conv.cuh - 2-D convolution on CUDA -----------------------*- C++ -*-===//
//
// conv2d and its gradients conv2dBackwardData and conv2dBackwardFilter over
// NCHW tensors, or NHWC ones with `channels_last` (ztc-channels-last): on
// cuDNN where it is loaded and takes the call (CudnnConv.cuh), else, in
// NCHW, im2col and products (Linalg.cuh) over as many images as fit in the
// call's planned scratch (Scratch.h), or direct sums where a product cannot
// serve; channels-last tensors cuDNN does not take are summed directly.
// Every body reads the window of Window.h.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_CONV_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_CONV_CUH

#include "Common.cuh"
#include "CudnnConv.cuh"
#include "Linalg.cuh"
#include "Scratch.h"

#include "../Dims.h"
#include "../Library.h"
#include "../Window.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace ztc::cuda {

namespace detail {

/// cols[image][c * kH * kW + kh * kW + kw][oh * outW + ow] for the images
/// starting at x; the group-g rows are g's GEMM operand.
/// Divides flat indices by run-time divisors in 32 bits when the launch's
/// indices fit: such a division is a long instruction sequence on a GPU,
/// about twice as long in 64 bits, and index arithmetic is most of what the
/// copying kernels below do.
struct IndexMath {
  bool narrow;
  ZTC_HOST_DEVICE int64_t div(int64_t a, int64_t b) const {
    return narrow ? int64_t(uint32_t(a) / uint32_t(b)) : a / b;
  }
  ZTC_HOST_DEVICE int64_t mod(int64_t a, int64_t b) const {
    return narrow ? int64_t(uint32_t(a) % uint32_t(b)) : a % b;
  }
};

/// IndexMath for a launch over `count` elements whose divisors are extents
/// of those elements (so no larger than `count`).
inline IndexMath indexMath(int64_t count) { return {count <= INT32_MAX}; }

/// Which element of a convolution's input or output (image, channel, row,
/// column) lies at offset `flat`.
struct InputIndex {
  int64_t image, c, h, x;
};
ZTC_HOST_DEVICE inline InputIndex planeIndex(bool channelsLast,
                                             int64_t channels, int64_t height,
                                             int64_t width, int64_t flat,
                                             const IndexMath &m) {
  if (channelsLast)
    return {m.div(flat, width * height * channels), m.mod(flat, channels),
            m.mod(m.div(flat, width * channels), height),
            m.mod(m.div(flat, channels), width)};
  int64_t plane = width * height;
  return {m.div(flat, plane * channels), m.mod(m.div(flat, plane), channels),
          m.mod(m.div(flat, width), height), m.mod(flat, width)};
}
/// The input element at offset `flat`.
ZTC_HOST_DEVICE inline InputIndex inputIndex(const ConvPlan &p, int64_t flat,
                                             const IndexMath &m) {
  return planeIndex(p.channelsLast, p.channels, p.height, p.width, flat, m);
}
/// The output element at offset `flat`.
ZTC_HOST_DEVICE inline InputIndex outputIndex(const ConvPlan &p, int64_t flat,
                                              const IndexMath &m) {
  return planeIndex(p.channelsLast, p.outChannels, p.outH, p.outW, flat, m);
}

/// What im2col puts in row r = c * taps + kh * kW + kw, column `pixel`, of
/// `image`: the input element that filter tap reads for that output pixel,
/// or 0 in the padding.
template <typename T>
ZTC_HOST_DEVICE T im2colValue(const T *x, const ConvPlan &p, const IndexMath &m,
                              int64_t image, int64_t r, int64_t pixel) {
  int64_t taps = p.kH * p.kW;
  int64_t c = m.div(r, taps), kh = m.mod(m.div(r, p.kW), p.kH);
  int64_t kw = m.mod(r, p.kW);
  int64_t ih = p.inputRow(m.div(pixel, p.outW), kh);
  int64_t iw = p.inputCol(m.mod(pixel, p.outW), kw);
  bool inside = ih >= 0 && ih < p.height && iw >= 0 && iw < p.width;
  return inside ? x[((image * p.channels + c) * p.height + ih) * p.width + iw]
                : T(0.0f);
}

/// cols[image][r][pixel] (im2colValue): one image's columns after another.
template <typename T> struct Im2colBody {
  const T *x;
  T *cols;
  ConvPlan p;
  IndexMath m;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t pixels = p.outH * p.outW, rows = p.channels * p.kH * p.kW;
    int64_t pixel = m.mod(flat, pixels);
    int64_t r = m.mod(m.div(flat, pixels), rows);
    int64_t image = m.div(flat, pixels * rows);
    cols[flat] = im2colValue(x, p, m, image, r, pixel);
  }
};

/// im2col with the images side by side: cols[r][image * pixels + pixel],
/// so that one product reduces over every image and pixel (conv2d's weight
/// gradient).
template <typename T> struct Im2colRowsBody {
  const T *x;
  T *cols;
  ConvPlan p;
  int64_t images;
  IndexMath m;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t pixels = p.outH * p.outW;
    int64_t column = m.mod(flat, images * pixels);
    int64_t r = m.div(flat, images * pixels);
    cols[flat] =
        im2colValue(x, p, m, m.div(column, pixels), r, m.mod(column, pixels));
  }
};

/// y[o][image * pixels + pixel] = x[image][o][pixel]: a batch of channel
/// planes with the images side by side per channel.
template <typename T> struct ImagesSideBySideBody {
  const T *x;
  T *y;
  int64_t images, channels, pixels;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t pixel = flat % pixels, image = (flat / pixels) % images;
    int64_t o = flat / (pixels * images);
    y[flat] = x[(image * channels + o) * pixels + pixel];
  }
};

/// col2im: gx[image][c][h][w] sums the columns (laid out as Im2colBody
/// writes them) that read (h, w), in filter-tap order.
template <typename T> struct Col2imBody {
  const T *cols;
  T *gx;
  ConvPlan p;
  IndexMath m;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    InputIndex at = inputIndex(p, flat, m);
    int64_t pixels = p.outH * p.outW, taps = p.kH * p.kW;
    const T *rows = cols + (at.image * p.channels + at.c) * taps * pixels;
    Acc sum = 0;
    p.forEachReaderOf(
        at.h, at.x, [&](int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
          sum += load(rows[(kh * p.kW + kw) * pixels + oh * p.outW + ow]);
        });
    gx[flat] = store<T>(sum);
  }
};

/// y[image][o][pixel] (y[image][pixel][o] with `channelsLast`) = bias[o]:
/// the GEMM or cuDNN then accumulates onto it, so the sum rounds once, as
/// on the CPU.
template <typename T> struct BiasFillBody {
  const T *bias;
  T *y;
  int64_t channels, pixels;
  bool channelsLast;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    y[flat] = bias[channelsLast ? flat % channels : (flat / pixels) % channels];
  }
};

/// One output of conv2d summed directly.
template <typename T> struct DirectConvBody {
  const T *x, *w, *bias;
  T *y;
  ConvPlan p;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    InputIndex at = outputIndex(p, flat, IndexMath{false});
    int64_t n = at.image, o = at.c, oh = at.h, ow = at.x;
    int64_t g = o / p.groupOut;
    Acc acc = bias ? load(bias[o]) : Acc(0);
    for (int64_t c = 0; c < p.groupChannels; ++c) {
      const int64_t channel = g * p.groupChannels + c;
      const T *taps = w + (o * p.groupChannels + c) * p.kH * p.kW;
      p.forEachTap(oh, ow, [&](int64_t kh, int64_t kw, int64_t ih, int64_t iw) {
        acc +=
            load(x[p.inputAt(n, channel, ih, iw)]) * load(taps[kh * p.kW + kw]);
      });
    }
    y[flat] = store<T>(acc);
  }
};

//===----------------------------------------------------------------------===//
// Gradient bodies
//===----------------------------------------------------------------------===//
//
// Each body computes one output element by gathering what contributes to it,
// in the order the CPU kernel accumulates: no atomics, so results are
// deterministic and equal the CPU's up to the precision of the sum type.
// The convolution's gradients use their bodies only where a product cannot
// serve (integers, and half types where the product's result would round
// more often): a thread per weight element summing over the whole batch
// leaves most of a GPU idle.

/// gx[n, c, h, w] of conv2d: gy * w over the output positions and filter
/// taps that read (h, w). The plan's sizes are the forward conv's.
template <typename T> struct ConvBackwardDataBody {
  const T *gy, *w;
  T *gx;
  ConvPlan p;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    InputIndex at = inputIndex(p, flat, IndexMath{false});
    int64_t n = at.image;
    int64_t g = at.c / p.groupChannels, ic = at.c % p.groupChannels;
    Acc sum = 0;
    p.forEachReaderOf(
        at.h, at.x, [&](int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
          for (int64_t j = 0; j < p.groupOut; ++j) {
            int64_t oc = g * p.groupOut + j;
            sum +=
                load(gy[p.outputAt(n, oc, oh, ow)]) *
                load(w[((oc * p.groupChannels + ic) * p.kH + kh) * p.kW + kw]);
          }
        });
    gx[flat] = store<T>(sum);
  }
};

/// gw[oc, ic, kh, kw] of conv2d: gy[n, oc, oh, ow] * x[n, g * C/g + ic, tap]
/// over the batch and the output positions.
template <typename T> struct ConvBackwardFilterBody {
  const T *x, *gy;
  T *gw;
  ConvPlan p;
  int64_t batch;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    int64_t kw = flat % p.kW, kh = (flat / p.kW) % p.kH;
    int64_t ic = (flat / (p.kW * p.kH)) % p.groupChannels;
    int64_t oc = flat / (p.kW * p.kH * p.groupChannels);
    int64_t g = oc / p.groupOut;
    Acc sum = 0;
    const int64_t channel = g * p.groupChannels + ic;
    for (int64_t n = 0; n < batch; ++n)
      p.forEachOutputOfTap(kh, kw,
                           [&](int64_t oh, int64_t ow, int64_t ih, int64_t iw) {
                             sum += load(gy[p.outputAt(n, oc, oh, ow)]) *
                                    load(x[p.inputAt(n, channel, ih, iw)]);
                           });
    gw[flat] = store<T>(sum);
  }
};

} // namespace detail

template <typename T>
void conv2d(const T *x, const Dims &xDims, const T *w, const Dims &wDims,
            const T *bias, const Dims &, T *y, const Dims &yDims,
            const Conv2dParams &params, const Scratch &scratch,
            cudaStream_t stream) {
  const int64_t group = params.group;
  detail::ConvPlan p = detail::convPlan(xDims, wDims, yDims, params);
  int64_t batch = xDims.d[0];
  int64_t patch = p.groupChannels * p.kH * p.kW; // gemm K
  int64_t pixels = p.outH * p.outW;              // gemm N
  if (batch == 0 || p.outChannels == 0 || pixels == 0)
    return;
  // cuDNN adds the convolution to the bias, so the sum rounds once, as on
  // the CPU.
  auto biasFirst = [&] {
    if (bias)
      detail::launchElements(batch * p.outChannels * pixels,
                             detail::BiasFillBody<T>{bias, y, p.outChannels,
                                                     pixels, p.channelsLast},
                             stream, "conv2d");
    return bias != nullptr;
  };
  if (detail::cudnnConvolve<T>(detail::ConvDirection::Forward, p, batch, x, w,
                               y, params.tf32, scratch, stream, "conv2d",
                               biasFirst))
    return;

  // Integers and short patches (depthwise, first layers) sum directly;
  // the rest is im2col + GEMM per group, over as many images at a time as
  // the call's columns hold (1x1 windows multiply the input as is).
  scratch::ConvColumns plan =
      scratch::conv2dColumns<T>(xDims, wDims, yDims, params, scratch.bytes);
  if (!plan.product) {
    detail::launchElements(batch * p.outChannels * pixels,
                           detail::DirectConvBody<T>{x, w, bias, y, p}, stream,
                           "conv2d");
    return;
  }
  bool direct = p.readsInputAsIs();
  int64_t imageCols = p.channels * p.kH * p.kW * pixels;
  int64_t chunk = plan.chunk;
  T *cols = nullptr;
  if (!direct) {
    cols = detail::scratchPart<T>(scratch, 0, plan.bytes, "conv2d");
    if (!cols)
      return;
  }
  int64_t imageIn = p.channels * p.height * p.width;
  int64_t imageOut = p.outChannels * pixels;
  for (int64_t first = 0; first < batch; first += chunk) {
    int64_t images = batch - first < chunk ? batch - first : chunk;
    const T *input = x + first * imageIn;
    T *output = y + first * imageOut;
    if (!direct)
      detail::launchElements(
          images * imageCols,
          detail::Im2colBody<T>{input, cols, p,
                                detail::indexMath(images * imageCols)},
          stream, "conv2d");
    if (bias)
      detail::launchElements(
          images * imageOut,
          detail::BiasFillBody<T>{bias, output, p.outChannels, pixels, false},
          stream, "conv2d");
    const T *operand = direct ? input : cols;
    int64_t operandStride = direct ? imageIn : imageCols;
    for (int64_t g = 0; g < group; ++g)
      detail::gemm(w + g * p.groupOut * patch,
                   operand +
                       g * (direct ? p.groupChannels * pixels : patch * pixels),
                   output + g * p.groupOut * pixels,
                   {images, p.groupOut, pixels, patch, patch, pixels, pixels, 0,
                    operandStride, imageOut, false, false, params.tf32},
                   bias != nullptr, stream, "conv2d");
  }
}

//===----------------------------------------------------------------------===//
// Gradients (adjoints of the kernels above)
//===----------------------------------------------------------------------===//

template <typename T>
void conv2dBackwardData(const T *gy, const Dims &gyDims, const T *w,
                        const Dims &wDims, T *gx, const Dims &gxDims,
                        const Conv2dBackwardDataParams &params,
                        const Scratch &scratch, cudaStream_t stream) {
  const int64_t group = params.group;
  detail::ConvPlan p = detail::convPlan(gxDims, wDims, gyDims, params);
  int64_t batch = gxDims.d[0];
  int64_t patch = p.groupChannels * p.kH * p.kW;
  int64_t pixels = p.outH * p.outW;
  int64_t rows = p.channels * p.kH * p.kW;
  if (detail::cudnnConvolve<T>(detail::ConvDirection::BackwardData, p, batch,
                               gy, w, gx, params.tf32, scratch, stream,
                               "conv2dBackwardData", [] { return false; }))
    return;
  // f32 and f64: per image, the columns' gradient w^T * gy (one product
  // per group), then col2im. Half types keep the direct sum, which rounds
  // once (the columns would round each partial sum to the half type).
  scratch::ConvColumns plan = scratch::conv2dBackwardDataColumns<T>(
      gyDims, wDims, gxDims, params, scratch.bytes);
  if (!plan.product) {
    detail::launchElements(gxDims.numElements(),
                           detail::ConvBackwardDataBody<T>{gy, w, gx, p},
                           stream, "conv2dBackwardData");
    return;
  }
  int64_t chunk = plan.chunk;
  T *cols =
      detail::scratchPart<T>(scratch, 0, plan.bytes, "conv2dBackwardData");
  if (!cols)
    return;
  int64_t imageIn = p.channels * p.height * p.width;
  int64_t imageOut = p.outChannels * pixels;
  for (int64_t first = 0; first < batch; first += chunk) {
    int64_t images = batch - first < chunk ? batch - first : chunk;
    for (int64_t g = 0; g < group; ++g)
      detail::gemm(w + g * p.groupOut * patch,
                   gy + first * imageOut + g * p.groupOut * pixels,
                   cols + g * patch * pixels,
                   {images, patch, pixels, p.groupOut, patch, pixels, pixels, 0,
                    imageOut, rows * pixels, /*transA=*/true, false,
                    params.tf32},
                   false, stream, "conv2dBackwardData");
    detail::launchElements(
        images * imageIn,
        detail::Col2imBody<T>{cols, gx + first * imageIn, p,
                              detail::indexMath(images * imageIn)},
        stream, "conv2dBackwardData");
  }
}

template <typename T>
void conv2dBackwardFilter(const T *x, const Dims &xDims, const T *gy,
                          const Dims &gyDims, T *gw, const Dims &gwDims,
                          const Conv2dBackwardFilterParams &params,
                          const Scratch &scratch, cudaStream_t stream) {
  const int64_t group = params.group;
  detail::ConvPlan p = detail::convPlan(xDims, gwDims, gyDims, params);
  int64_t batch = xDims.d[0];
  int64_t patch = p.groupChannels * p.kH * p.kW;
  int64_t pixels = p.outH * p.outW;
  int64_t rows = p.channels * p.kH * p.kW;
  if (detail::cudnnConvolve<T>(detail::ConvDirection::BackwardFilter, p, batch,
                               x, gy, gw, params.tf32, scratch, stream,
                               "conv2dBackwardFilter", [] { return false; }))
    return;
  // One product per group over all images and pixels at once: gw_g =
  // gy_g * cols_g^T, with gy and the columns laid out images side by side.
  // Integers, and half types whose batch needs several chunks (each would
  // round the running sum to the half type), keep the direct sum.
  scratch::ConvColumns plan = scratch::conv2dBackwardFilterColumns<T>(
      xDims, gyDims, gwDims, params, scratch.bytes);
  if (!plan.product) {
    detail::launchElements(
        gwDims.numElements(),
        detail::ConvBackwardFilterBody<T>{x, gy, gw, p, batch}, stream,
        "conv2dBackwardFilter");
    return;
  }
  int64_t chunk = plan.chunk;
  T *cols = detail::scratchPart<T>(scratch, 0, plan.gradsOffset,
                                   "conv2dBackwardFilter");
  T *grads = cols ? detail::scratchPart<T>(scratch, plan.gradsOffset,
                                           plan.bytes - plan.gradsOffset,
                                           "conv2dBackwardFilter")
                  : nullptr;
  if (!grads)
    return;
  int64_t imageIn = p.channels * p.height * p.width;
  int64_t imageOut = p.outChannels * pixels;
  for (int64_t first = 0; first < batch; first += chunk) {
    int64_t images = batch - first < chunk ? batch - first : chunk;
    int64_t width = images * pixels;
    detail::launchElements(
        rows * width,
        detail::Im2colRowsBody<T>{x + first * imageIn, cols, p, images,
                                  detail::indexMath(rows * width)},
        stream, "conv2dBackwardFilter");
    detail::launchElements(
        p.outChannels * width,
        detail::ImagesSideBySideBody<T>{gy + first * imageOut, grads, images,
                                        p.outChannels, pixels},
        stream, "conv2dBackwardFilter");
    for (int64_t g = 0; g < group; ++g)
      detail::gemm(grads + g * p.groupOut * width, cols + g * patch * width,
                   gw + g * p.groupOut * patch,
                   {1, p.groupOut, patch, width, width, width, patch, 0, 0, 0,
                    false, /*transB=*/true, params.tf32},
                   first > 0, stream, "conv2dBackwardFilter");
  }
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_CONV_CUH
