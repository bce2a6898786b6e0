//===- Conv.h - 2-D convolution on the CPU ----------------------*- C++ -*-===//
//
// conv2d and its gradients conv2dBackwardData and conv2dBackwardFilter.
// Float goes to oneDNN first. Otherwise conv2d is im2col (or the input as
// is) and a product (Linalg.h); its gradients are products and col2im for
// float and double, and direct sums in the window order of Window.h for the
// other types. Channels-last tensors that oneDNN does not take are copied to
// NCHW and back.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_CONV_H
#define ZTC_RUNTIME_KERNELS_CPU_CONV_H

#include "Common.h"
#include "Linalg.h"

#include "../Dims.h"
#include "../Dnnl.h"
#include "../Library.h"
#include "../Window.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace ztc::cpu {

namespace detail {

/// The columns of a convolution's GEMM: col[r, oh * outW + ow] for
/// r = (c, kh, kw) is the input `channels` planes' element under tap
/// (kh, kw) of output position (oh, ow), 0 in the padding.
template <typename T>
void im2col(const T *input, const Window2d &window, int64_t channels, T *col) {
  int64_t kH = window.kH, kW = window.kW, height = window.height,
          width = window.width, outH = window.outH, outW = window.outW;
  int64_t patch = channels * kH * kW, pixels = outH * outW;
#pragma omp parallel for if (patch * pixels > kParallelGrain)
  for (int64_t r = 0; r < patch; ++r) {
    int64_t c = r / (kH * kW), kh = (r / kW) % kH, kw = r % kW;
    const T *plane = input + c * height * width;
    T *out = col + r * pixels;
    for (int64_t oh = 0; oh < outH; ++oh) {
      int64_t ih = window.inputRow(oh, kh);
      bool rowInside = ih >= 0 && ih < height;
      for (int64_t ow = 0; ow < outW; ++ow) {
        int64_t iw = window.inputCol(ow, kw);
        out[oh * outW + ow] = rowInside && iw >= 0 && iw < width
                                  ? plane[ih * width + iw]
                                  : T(0.0f);
      }
    }
  }
}

/// The adjoint of im2col: every column element is added to the input
/// element it was read from (padding reads are dropped). Each task owns one
/// channel plane and adds in a fixed order, so the result does not depend
/// on the thread count.
template <typename T>
void col2im(const T *col, const Window2d &window, int64_t channels, T *input) {
  int64_t kH = window.kH, kW = window.kW, height = window.height,
          width = window.width, outH = window.outH, outW = window.outW;
  int64_t pixels = outH * outW;
#pragma omp parallel for if (channels * kH * kW * pixels > kParallelGrain)
  for (int64_t c = 0; c < channels; ++c) {
    T *plane = input + c * height * width;
    std::fill(plane, plane + height * width, T(0.0f));
    for (int64_t kh = 0; kh < kH; ++kh)
      for (int64_t kw = 0; kw < kW; ++kw) {
        const T *from = col + ((c * kH + kh) * kW + kw) * pixels;
        for (int64_t oh = 0; oh < outH; ++oh) {
          int64_t ih = window.inputRow(oh, kh);
          if (ih < 0 || ih >= height)
            continue;
          for (int64_t ow = 0; ow < outW; ++ow) {
            int64_t iw = window.inputCol(ow, kw);
            if (iw >= 0 && iw < width)
              plane[ih * width + iw] += from[oh * outW + ow];
          }
        }
      }
  }
}

/// Copies `from` (NCHW dimensions `nchw`) between the NCHW and NHWC layouts:
/// into NHWC with `toNhwc`, else from NHWC into NCHW. The convolutions'
/// fallback for channels-last tensors oneDNN did not take.
template <typename T>
std::vector<T> relayout(const T *from, const Dims &nchw, bool toNhwc) {
  int64_t n = nchw.d[0], c = nchw.d[1], hw = nchw.d[2] * nchw.d[3];
  std::vector<T> to(n * c * hw);
#pragma omp parallel for if (n * c * hw > kParallelGrain)
  for (int64_t image = 0; image < n; ++image)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t ch = 0; ch < c; ++ch) {
        int64_t nchwIndex = (image * c + ch) * hw + p,
                nhwcIndex = (image * hw + p) * c + ch;
        if (toNhwc)
          to[nhwcIndex] = from[nchwIndex];
        else
          to[nchwIndex] = from[nhwcIndex];
      }
  return to;
}

} // namespace detail

/// A 2-D convolution: x [N, C, H, W] (or [N, H, W, C] with `channelsLast`,
/// and y likewise), weights [O, C/group, kH, kW], an optional bias [O].
template <typename T>
void conv2d(const T *x, const Dims &xDims, const T *w, const Dims &wDims,
            const T *bias, const Dims &biasDims, T *y, const Dims &yDims,
            const Conv2dParams &params) {
  const int64_t *strides = params.strides.data, *pads = params.pads.data,
                *dilations = params.dilations.data;
  const int64_t group = params.group;
  if (params.channels_last) {
    Dims xNchw = nchwOf(xDims), yNchw = nchwOf(yDims);
    if constexpr (std::is_same_v<T, float>) {
      std::vector<void *> data = {const_cast<T *>(x), const_cast<T *>(w)};
      if (bias)
        data.push_back(const_cast<T *>(bias));
      data.push_back(y);
      if (dnnl::convolution(dnnl::ConvPass::Forward, xNchw, wDims, yNchw,
                            strides, pads, dilations, group, bias, true, data))
        return;
    }
    std::vector<T> xPlanes = detail::relayout(x, xNchw, false);
    std::vector<T> yPlanes(yNchw.numElements());
    Conv2dParams planes = params;
    planes.channels_last = false;
    conv2d(xPlanes.data(), xNchw, w, wDims, bias, biasDims, yPlanes.data(),
           yNchw, planes);
    std::vector<T> out = detail::relayout(yPlanes.data(), yNchw, true);
    std::copy(out.begin(), out.end(), y);
    return;
  }
  int64_t batch = xDims.d[0], channels = xDims.d[1];
  int64_t height = xDims.d[2], width = xDims.d[3];
  int64_t outChannels = wDims.d[0], groupChannels = wDims.d[1];
  int64_t kH = wDims.d[2], kW = wDims.d[3];
  int64_t outH = yDims.d[2], outW = yDims.d[3];
  int64_t groupOut = outChannels / group;
  int64_t patch = groupChannels * kH * kW; // gemm K
  int64_t pixels = outH * outW;            // gemm N
  if (batch == 0 || outChannels == 0 || pixels == 0)
    return;
  if constexpr (std::is_same_v<T, float>) {
    std::vector<void *> data = {const_cast<T *>(x), const_cast<T *>(w)};
    if (bias)
      data.push_back(const_cast<T *>(bias));
    data.push_back(y);
    if (dnnl::convolution(dnnl::ConvPass::Forward, xDims, wDims, yDims, strides,
                          pads, dilations, group, bias, false, data))
      return;
  }

  Window2d window =
      window2d(xDims, yDims, wDims.d + 2, strides, pads, dilations);
  bool direct = window.readsInputAsIs();
  std::vector<T> columns(direct ? 0 : patch * pixels);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t g = 0; g < group; ++g) {
      const T *input = x + (n * channels + g * groupChannels) * height * width;
      const T *cols = input;
      if (!direct) {
        detail::im2col(input, window, groupChannels, columns.data());
        cols = columns.data();
      }
      detail::gemm(groupOut, pixels, patch, w + g * groupOut * patch,
                   std::max<int64_t>(patch, 1), false, cols, pixels, false,
                   y + (n * outChannels + g * groupOut) * pixels, pixels,
                   bias ? bias + g * groupOut : nullptr);
    }
  }
}

//===----------------------------------------------------------------------===//
// Gradients (adjoints of the kernels above)
//===----------------------------------------------------------------------===//

/// gx = the gradient of conv2d's input: gx[n, c, h, w] sums gy * w over the
/// output positions and filter taps that read (h, w). One (n, c) plane per
/// task, so there are no write races.
template <typename T>
void conv2dBackwardData(const T *gy, const Dims &gyDims, const T *w,
                        const Dims &wDims, T *gx, const Dims &gxDims,
                        const Conv2dBackwardDataParams &params) {
  const int64_t *strides = params.strides.data, *pads = params.pads.data,
                *dilations = params.dilations.data;
  const int64_t group = params.group;
  if (params.channels_last) {
    Dims gyNchw = nchwOf(gyDims), gxNchw = nchwOf(gxDims);
    if constexpr (std::is_same_v<T, float>)
      if (dnnl::convolution(dnnl::ConvPass::BackwardData, gxNchw, wDims, gyNchw,
                            strides, pads, dilations, group, false, true,
                            {const_cast<T *>(gy), const_cast<T *>(w), gx}))
        return;
    std::vector<T> gyPlanes = detail::relayout(gy, gyNchw, false);
    std::vector<T> gxPlanes(gxNchw.numElements());
    Conv2dBackwardDataParams planes = params;
    planes.channels_last = false;
    conv2dBackwardData(gyPlanes.data(), gyNchw, w, wDims, gxPlanes.data(),
                       gxNchw, planes);
    std::vector<T> out = detail::relayout(gxPlanes.data(), gxNchw, true);
    std::copy(out.begin(), out.end(), gx);
    return;
  }
  using Acc = detail::ComputeT<T>;
  int64_t batch = gxDims.d[0], channels = gxDims.d[1];
  int64_t height = gxDims.d[2], width = gxDims.d[3];
  int64_t outChannels = gyDims.d[1], outH = gyDims.d[2], outW = gyDims.d[3];
  int64_t groupIn = channels / group, groupOut = outChannels / group;
  int64_t kH = wDims.d[2], kW = wDims.d[3];
  Window2d window =
      window2d(gxDims, gyDims, wDims.d + 2, strides, pads, dilations);
  if constexpr (std::is_same_v<T, float>)
    if (dnnl::convolution(dnnl::ConvPass::BackwardData, gxDims, wDims, gyDims,
                          strides, pads, dilations, group, false, false,
                          {const_cast<T *>(gy), const_cast<T *>(w), gx}))
      return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // Per image and group, the columns W^T gy (a GEMM) added back into the
    // input planes they were read from (col2im); a 1x1 convolution with
    // stride 1 reads its input as is, so the GEMM writes gx directly.
    int64_t patch = groupIn * kH * kW, pixels = outH * outW;
    bool direct = window.readsInputAsIs();
    std::vector<T> columns(direct ? 0 : patch * pixels);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t g = 0; g < group; ++g) {
        T *planes = gx + (n * channels + g * groupIn) * height * width;
        T *cols = direct ? planes : columns.data();
        detail::gemm(patch, pixels, groupOut, w + g * groupOut * patch, patch,
                     /*transA=*/true,
                     gy + (n * outChannels + g * groupOut) * pixels, pixels,
                     false, cols, pixels, static_cast<const T *>(nullptr));
        if (!direct)
          detail::col2im(cols, window, groupIn, planes);
      }
    return;
  }
#pragma omp parallel for if (batch * channels * height * width * kH * kW *     \
                                 groupOut >                                    \
                             detail::kParallelGrain)
  for (int64_t plane = 0; plane < batch * channels; ++plane) {
    int64_t n = plane / channels, c = plane % channels;
    int64_t g = c / groupIn, ic = c % groupIn;
    for (int64_t h = 0; h < height; ++h)
      for (int64_t x = 0; x < width; ++x) {
        Acc sum = 0;
        window.forEachReaderOf(
            h, x, [&](int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
              for (int64_t j = 0; j < groupOut; ++j) {
                int64_t oc = g * groupOut + j;
                sum +=
                    detail::load(
                        gy[((n * outChannels + oc) * outH + oh) * outW + ow]) *
                    detail::load(w[((oc * groupIn + ic) * kH + kh) * kW + kw]);
              }
            });
        gx[(plane * height + h) * width + x] = detail::store<T>(sum);
      }
  }
}

/// gw = the gradient of conv2d's weight: gw[oc, ic, kh, kw] sums
/// gy[n, oc, oh, ow] * x[n, g * C/g + ic, tap] over the batch and output
/// positions. One output channel per task, so there are no write races.
template <typename T>
void conv2dBackwardFilter(const T *x, const Dims &xDims, const T *gy,
                          const Dims &gyDims, T *gw, const Dims &gwDims,
                          const Conv2dBackwardFilterParams &params) {
  const int64_t *strides = params.strides.data, *pads = params.pads.data,
                *dilations = params.dilations.data;
  const int64_t group = params.group;
  if (params.channels_last) {
    Dims xNchw = nchwOf(xDims), gyNchw = nchwOf(gyDims);
    if constexpr (std::is_same_v<T, float>)
      if (dnnl::convolution(dnnl::ConvPass::BackwardWeights, xNchw, gwDims,
                            gyNchw, strides, pads, dilations, group, false,
                            true,
                            {const_cast<T *>(x), const_cast<T *>(gy), gw}))
        return;
    std::vector<T> xPlanes = detail::relayout(x, xNchw, false);
    std::vector<T> gyPlanes = detail::relayout(gy, gyNchw, false);
    Conv2dBackwardFilterParams planes = params;
    planes.channels_last = false;
    conv2dBackwardFilter(xPlanes.data(), xNchw, gyPlanes.data(), gyNchw, gw,
                         gwDims, planes);
    return;
  }
  using Acc = detail::ComputeT<T>;
  int64_t batch = xDims.d[0], channels = xDims.d[1];
  int64_t height = xDims.d[2], width = xDims.d[3];
  int64_t outChannels = gyDims.d[1], outH = gyDims.d[2], outW = gyDims.d[3];
  int64_t groupIn = channels / group, groupOut = outChannels / group;
  int64_t kH = gwDims.d[2], kW = gwDims.d[3];
  Window2d window =
      window2d(xDims, gyDims, gwDims.d + 2, strides, pads, dilations);
  if constexpr (std::is_same_v<T, float>)
    if (dnnl::convolution(dnnl::ConvPass::BackwardWeights, xDims, gwDims,
                          gyDims, strides, pads, dilations, group, false, false,
                          {const_cast<T *>(x), const_cast<T *>(gy), gw}))
      return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // Per group, gw = sum over images of gy cols^T: one GEMM per image into
    // a block, added to gw in image order.
    int64_t patch = groupIn * kH * kW, pixels = outH * outW;
    bool direct = window.readsInputAsIs();
    std::vector<T> columns(direct ? 0 : patch * pixels);
    std::vector<T> product(batch > 1 ? groupOut * patch : 0);
    for (int64_t g = 0; g < group; ++g) {
      T *gwGroup = gw + g * groupOut * patch;
      for (int64_t n = 0; n < batch; ++n) {
        const T *input = x + (n * channels + g * groupIn) * height * width;
        const T *cols = input;
        if (!direct) {
          detail::im2col(input, window, groupIn, columns.data());
          cols = columns.data();
        }
        T *into = n == 0 ? gwGroup : product.data();
        detail::gemm(groupOut, patch, pixels,
                     gy + (n * outChannels + g * groupOut) * pixels, pixels,
                     false, cols, pixels, /*transB=*/true, into, patch,
                     static_cast<const T *>(nullptr));
        if (n > 0)
          for (int64_t i = 0; i < groupOut * patch; ++i)
            gwGroup[i] += into[i];
      }
    }
    return;
  }
#pragma omp parallel for if (outChannels * groupIn * kH * kW * batch * outH *  \
                                 outW >                                        \
                             detail::kParallelGrain)
  for (int64_t oc = 0; oc < outChannels; ++oc) {
    int64_t g = oc / groupOut;
    for (int64_t ic = 0; ic < groupIn; ++ic)
      for (int64_t kh = 0; kh < kH; ++kh)
        for (int64_t kw = 0; kw < kW; ++kw) {
          Acc sum = 0;
          for (int64_t n = 0; n < batch; ++n) {
            const T *in =
                x + (n * channels + g * groupIn + ic) * height * width;
            const T *grad = gy + (n * outChannels + oc) * outH * outW;
            window.forEachOutputOfTap(
                kh, kw, [&](int64_t oh, int64_t ow, int64_t ih, int64_t iw) {
                  sum += detail::load(grad[oh * outW + ow]) *
                         detail::load(in[ih * width + iw]);
                });
          }
          gw[((oc * groupIn + ic) * kH + kh) * kW + kw] = detail::store<T>(sum);
        }
  }
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_CONV_H
