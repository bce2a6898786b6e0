//===- CudnnConv.cuh - conv2d and its gradients on cuDNN --------*- C++ -*-===//
//
// The cuDNN half of Conv.cuh: for a convolution of float, double, f16 or
// bf16, its activations NCHW or NHWC (the weights OIHW either way), one
// cuDNN call (cudnnConvolutionForward, ...BackwardData,
// ...BackwardFilter) with the call's planned scratch as its workspace.
// Each distinct convolution (direction, element type, shapes, window,
// groups, TF32, workspace bytes, device) gets its descriptors and its
// algorithm once, on its first call (a step's first, direct run: never
// while a CUDA graph is captured), chosen by cudnn::chooseAlgorithm from
// cuDNN's heuristics: deterministic, and within the planned bytes. The
// entry points return false where cuDNN cannot serve a call (not loaded,
// an element type or window it does not take, no algorithm that fits), and
// Conv.cuh runs its own kernels instead; a failing cuDNN call is recorded
// as every other failure is.
//
// In the host emulation (ZTC_CUDA_HOST_EMULATION) cuDNN is never used.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_CUDNNCONV_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_CUDNNCONV_CUH

#include "Common.cuh"
#include "Cudnn.h"
#include "Scratch.h"

#include "../Half.h"
#include "../Library.h"

#include <array>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace ztc::cuda::detail {

/// Which of the three convolutions a call is.
enum class ConvDirection { Forward, BackwardData, BackwardFilter };

/// cuDNN's element type for T; -1 for the types it does not convolve.
template <typename T> constexpr int cudnnDataType() {
  if constexpr (std::is_same_v<T, float>)
    return cudnn::kDataFloat;
  else if constexpr (std::is_same_v<T, double>)
    return cudnn::kDataDouble;
  else if constexpr (std::is_same_v<T, f16>)
    return cudnn::kDataHalf;
  else if constexpr (std::is_same_v<T, bf16>)
    return cudnn::kDataBfloat16;
  else
    return -1;
}

/// Whether cuDNN's 2-D convolution computes exactly the window of `p` over
/// `batch` images: every extent fits an int, and the output's extents are
/// the ones cuDNN derives from the begin pads taken as symmetric. (Only the
/// begin pads and the output's extents place the windows, so any end pads
/// that give those extents convolve the same.)
inline bool cudnnTakesWindow(const ConvPlan &p, int64_t batch) {
  const int64_t values[] = {batch,       p.channels,  p.height,     p.width,
                            p.outH,      p.outW,      p.kH,         p.kW,
                            p.strideH,   p.strideW,   p.padH,       p.padW,
                            p.dilationH, p.dilationW, p.outChannels};
  for (int64_t v : values)
    if (v < 0 || v > INT_MAX)
      return false;
  const int64_t elements[] = {batch * p.channels * p.height * p.width,
                              batch * p.outChannels * p.outH * p.outW,
                              p.outChannels * p.groupChannels * p.kH * p.kW};
  for (int64_t n : elements)
    if (n > INT_MAX)
      return false;
  auto extent = [](int64_t in, int64_t pad, int64_t k, int64_t dilation,
                   int64_t stride) {
    return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  };
  return batch > 0 && p.strideH > 0 && p.strideW > 0 &&
         p.outH == extent(p.height, p.padH, p.kH, p.dilationH, p.strideH) &&
         p.outW == extent(p.width, p.padW, p.kW, p.dilationW, p.strideW);
}

#if !defined(ZTC_CUDA_HOST_EMULATION)

/// Records a failed cuDNN `call` made for `kernel`; true on success.
inline bool checkCudnn(cudnn::Status status, const char *call,
                       const char *kernel) {
  if (status == cudnn::kSuccess)
    return true;
  recordError(std::string(call) + " in " + kernel + ": " +
              cudnn::library().api.getErrorString(status));
  return false;
}

/// Serializes cudnnSetStream + the convolution that follows on a shared
/// handle, and the cache of descriptors below.
inline std::mutex &cudnnMutex() {
  static std::mutex mutex;
  return mutex;
}

/// The loaded library, or nullptr; the first time it is missing, one line
/// on standard error says why and what runs instead (nothing when
/// ZTC_CUDNN=0 asked for ztc's kernels).
inline const cudnn::Api *cudnnApi() {
  const cudnn::Library &lib = cudnn::library();
  if (lib.loaded)
    return &lib.api;
  static std::once_flag told;
  std::call_once(told, [&] {
    if (!lib.why.empty())
      std::fprintf(stderr,
                   "ztc: cuDNN is not available (%s); convolutions run on "
                   "ztc's own CUDA kernels (set ZTC_CUDNN_LIBRARY to "
                   "libcudnn.so.9's path, or ZTC_CUDNN=0 to use them "
                   "without this notice)\n",
                   lib.why.c_str());
  });
  return nullptr;
}

/// Says on standard error that a channels-last convolution runs on ztc's
/// direct sums, which are slow for large ones, because cuDNN `what` it.
inline void noteSlowChannelsLast(const char *what, const ConvPlan &p,
                                 int64_t batch, const char *kernel) {
  std::fprintf(stderr,
               "ztc: cuDNN %s %s over channels-last [%lld, %lld, %lld, %lld] "
               "tensors; ztc sums it directly, which is slow (compile with "
               "--conv-layout nchw)\n",
               what, kernel, static_cast<long long>(batch),
               static_cast<long long>(p.height),
               static_cast<long long>(p.width),
               static_cast<long long>(p.channels));
}

/// The current device's handle, created on first use (call with
/// cudnnMutex() held); nullptr with an error recorded on failure.
inline cudnn::Handle cudnnHandle(const cudnn::Api &api, const char *kernel) {
  static std::vector<cudnn::Handle> handles;
  int device = 0;
  if (!checkCuda(cudaGetDevice(&device), "cudaGetDevice", kernel))
    return nullptr;
  if (handles.size() <= static_cast<size_t>(device))
    handles.resize(device + 1, nullptr);
  if (!handles[device]) {
    cudnn::Handle handle = nullptr;
    if (!checkCudnn(api.create(&handle), "cudnnCreate", kernel))
      return nullptr;
    handles[device] = handle;
  }
  return handles[device];
}

/// One convolution's descriptors and algorithm, made on its first call.
struct CudnnConv {
  bool usable = false;
  cudnn::TensorDesc x = nullptr, y = nullptr;
  cudnn::FilterDesc w = nullptr;
  cudnn::ConvDesc conv = nullptr;
  int algo = 0;
  size_t workspace = 0;
};

/// Destroys what `c` holds, when cuDNN cannot serve its convolution: the
/// cache keeps only the verdict.
inline void releaseCudnnConv(const cudnn::Api &api, CudnnConv &c) {
  if (c.x)
    api.destroyTensorDescriptor(c.x);
  if (c.y)
    api.destroyTensorDescriptor(c.y);
  if (c.w)
    api.destroyFilterDescriptor(c.w);
  if (c.conv)
    api.destroyConvolutionDescriptor(c.conv);
  c = CudnnConv();
}

/// What tells two convolutions apart for cuDNN.
using CudnnConvKey = std::array<int64_t, 22>;

/// Makes the descriptors of `key`'s convolution and chooses its algorithm;
/// `usable` stays false, and nothing is held, where cuDNN offers nothing
/// that fits.
template <typename T>
CudnnConv describeCudnnConv(const cudnn::Api &api, cudnn::Handle handle,
                            ConvDirection direction, const ConvPlan &p,
                            int64_t batch, bool tf32, size_t budget,
                            const char *kernel) {
  constexpr int type = cudnnDataType<T>();
  // f16 and bf16 accumulate in f32, as the products do; double in double.
  constexpr int compute =
      type == cudnn::kDataDouble ? cudnn::kDataDouble : cudnn::kDataFloat;
  CudnnConv c;
  auto ok = [&](cudnn::Status status, const char *call) {
    return checkCudnn(status, call, kernel);
  };
  auto i = [](int64_t v) { return static_cast<int>(v); };
  if (!ok(api.createTensorDescriptor(&c.x), "cudnnCreateTensorDescriptor") ||
      !ok(api.createTensorDescriptor(&c.y), "cudnnCreateTensorDescriptor") ||
      !ok(api.createFilterDescriptor(&c.w), "cudnnCreateFilterDescriptor") ||
      !ok(api.createConvolutionDescriptor(&c.conv),
          "cudnnCreateConvolutionDescriptor"))
    return c;
  // Shapes cuDNN refuses leave the call to ztc's kernels: not an error.
  // The activations' layout is the plan's; the weights stay [O, C/group,
  // kH, kW].
  const int layout = p.channelsLast ? cudnn::kNhwc : cudnn::kNchw;
  bool described =
      api.setTensor4dDescriptor(c.x, layout, type, i(batch), i(p.channels),
                                i(p.height), i(p.width)) == cudnn::kSuccess &&
      api.setTensor4dDescriptor(c.y, layout, type, i(batch), i(p.outChannels),
                                i(p.outH), i(p.outW)) == cudnn::kSuccess &&
      api.setFilter4dDescriptor(c.w, type, cudnn::kNchw, i(p.outChannels),
                                i(p.groupChannels), i(p.kH),
                                i(p.kW)) == cudnn::kSuccess &&
      api.setConvolution2dDescriptor(c.conv, i(p.padH), i(p.padW), i(p.strideH),
                                     i(p.strideW), i(p.dilationH),
                                     i(p.dilationW), cudnn::kCrossCorrelation,
                                     compute) == cudnn::kSuccess &&
      api.setConvolutionGroupCount(c.conv, i(p.channels / p.groupChannels)) ==
          cudnn::kSuccess &&
      api.setConvolutionMathType(
          c.conv, cudnn::mathTypeFor(type, tf32, cudnn::kDefaultMath)) ==
          cudnn::kSuccess;
  if (!described)
    return c;
  cudnn::AlgoPerf perfs[16];
  int count = 0;
  cudnn::Status status =
      direction == ConvDirection::Forward
          ? api.forwardAlgorithms(handle, c.x, c.w, c.conv, c.y, 16, &count,
                                  perfs)
      : direction == ConvDirection::BackwardData
          ? api.backwardDataAlgorithms(handle, c.w, c.y, c.conv, c.x, 16,
                                       &count, perfs)
          : api.backwardFilterAlgorithms(handle, c.x, c.y, c.conv, c.w, 16,
                                         &count, perfs);
  if (status != cudnn::kSuccess)
    return c;
  int chosen = cudnn::chooseAlgorithm(perfs, count, budget);
  if (chosen < 0)
    return c;
  if (!ok(api.setConvolutionMathType(
              c.conv, cudnn::mathTypeFor(type, tf32, perfs[chosen].mathType)),
          "cudnnSetConvolutionMathType"))
    return c;
  c.algo = perfs[chosen].algo;
  c.workspace = perfs[chosen].memory;
  c.usable = true;
  return c;
}

template <typename T>
CudnnConv makeCudnnConv(const cudnn::Api &api, cudnn::Handle handle,
                        ConvDirection direction, const ConvPlan &p,
                        int64_t batch, bool tf32, size_t budget,
                        const char *kernel) {
  CudnnConv c = describeCudnnConv<T>(api, handle, direction, p, batch, tf32,
                                     budget, kernel);
  if (!c.usable)
    releaseCudnnConv(api, c);
  return c;
}

/// Runs one convolution on cuDNN, in the call's scratch, as `direction`
/// says: y = conv(x, w), dx = the data gradient of dy (x: dy, y: dx), or
/// dw = the filter gradient (w: dy, y: dw). `before()` runs first, once
/// cuDNN is known to serve the call, and returns whether it left values in
/// y that the convolution adds to (conv2d's bias). False when cuDNN cannot
/// serve the call (the caller computes it itself); true once it is enqueued
/// or an error is recorded.
template <typename T, typename Before>
bool cudnnConvolve(ConvDirection direction, const ConvPlan &p, int64_t batch,
                   const T *x, const T *w, T *y, bool tf32,
                   const Scratch &scratch, cudaStream_t stream,
                   const char *kernel, Before before) {
  constexpr int type = cudnnDataType<T>();
  if constexpr (type < 0) {
    return false;
  } else {
    if (!cudnnTakesWindow(p, batch)) {
      // Once a process: nothing caches this verdict.
      static std::once_flag told;
      if (p.channelsLast)
        std::call_once(told, [&] {
          noteSlowChannelsLast("does not take the window of", p, batch, kernel);
        });
      return false;
    }
    const cudnn::Api *api = cudnnApi();
    if (!api)
      return false;
    int device = 0;
    if (!checkCuda(cudaGetDevice(&device), "cudaGetDevice", kernel))
      return true;
    const size_t budget = scratch.data ? size_t(scratch.bytes) : 0;
    const CudnnConvKey key{int64_t(direction),
                           type,
                           device,
                           batch,
                           p.channels,
                           p.height,
                           p.width,
                           p.outChannels,
                           p.groupChannels,
                           p.kH,
                           p.kW,
                           p.outH,
                           p.outW,
                           p.strideH,
                           p.strideW,
                           p.padH,
                           p.padW,
                           p.dilationH,
                           p.dilationW,
                           tf32,
                           int64_t(budget),
                           p.channelsLast};
    std::lock_guard<std::mutex> lock(cudnnMutex());
    cudnn::Handle handle = cudnnHandle(*api, kernel);
    if (!handle)
      return true;
    static std::map<CudnnConvKey, CudnnConv> convs;
    auto found = convs.find(key);
    if (found == convs.end()) {
      found = convs
                  .emplace(key, makeCudnnConv<T>(*api, handle, direction, p,
                                                 batch, tf32, budget, kernel))
                  .first;
      if (!found->second.usable && p.channelsLast)
        noteSlowChannelsLast("offers no algorithm for", p, batch, kernel);
    }
    const CudnnConv &c = found->second;
    if (!c.usable)
      return false;
    using Scalar = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const Scalar one = 1, beta = before() ? 1 : 0;
    if (!checkCudnn(api->setStream(handle, stream), "cudnnSetStream", kernel))
      return true;
    void *workspace = c.workspace ? scratch.data : nullptr;
    switch (direction) {
    case ConvDirection::Forward:
      checkCudnn(api->forward(handle, &one, c.x, x, c.w, w, c.conv, c.algo,
                              workspace, c.workspace, &beta, c.y, y),
                 "cudnnConvolutionForward", kernel);
      break;
    case ConvDirection::BackwardData:
      checkCudnn(api->backwardData(handle, &one, c.w, w, c.y, x, c.conv, c.algo,
                                   workspace, c.workspace, &beta, c.x, y),
                 "cudnnConvolutionBackwardData", kernel);
      break;
    case ConvDirection::BackwardFilter:
      checkCudnn(api->backwardFilter(handle, &one, c.x, x, c.y, w, c.conv,
                                     c.algo, workspace, c.workspace, &beta, c.w,
                                     y),
                 "cudnnConvolutionBackwardFilter", kernel);
      break;
    }
    return true;
  }
}

#else

template <typename T, typename Before>
bool cudnnConvolve(ConvDirection, const ConvPlan &, int64_t, const T *,
                   const T *, T *, bool, const Scratch &, cudaStream_t,
                   const char *, Before) {
  return false;
}

#endif // !defined(ZTC_CUDA_HOST_EMULATION)

} // namespace ztc::cuda::detail

#endif // ZTC_RUNTIME_KERNELS_CUDA_CUDNNCONV_CUH
