//===- Optim.cuh - optimizer updates on CUDA --------------------*- C++ -*-===//
//
// adam8bit: one Adam step on bitsandbytes' 8-bit moments, one thread block
// per block of 256 elements, the same bits as the CPU library's.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_OPTIM_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_OPTIM_CUH

#include "Common.cuh"

#include "../Blockwise8bit.h"
#include "../Dims.h"
#include "../Library.h"

#include <cuda_runtime_api.h>

#include <math.h>

#include <cstdint>

namespace ztc::cuda {

namespace detail {

/// adam8bit: one block of 256 elements per row (Blockwise8bit.h's
/// adamStep). Each thread reads the old scales before the block's maximum
/// (whose reduction every thread passes), so the new ones may overwrite
/// them in place; each element's codes are read and written by one thread.
struct Adam8bitBody {
  const float *p, *g;
  const uint8_t *m, *v;
  const float *mScale, *vScale, *lr, *step;
  float *pOut;
  uint8_t *mOut, *vOut;
  float *mScaleOut, *vScaleOut;
  int64_t n;
  float beta1, beta2, rest1, rest2, eps;
  double beta1d, beta2d, weightDecay;
  CodeBook first, second;

  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using blockwise8bit::kBlock;
    const int64_t start = row * kBlock;
    const int64_t count = n - start < kBlock ? n - start : kBlock;
    const float oldScale1 = mScale[row], oldScale2 = vScale[row];
    const double t = double(*step), rate = double(*lr);
    const double c1 = 1.0 - pow(beta1d, t);
    const float c2 = float(sqrt(1.0 - pow(beta2d, t)));
    const float stepSize = float(-rate / c1);
    const float decay = float(1.0 - rate * weightDecay);
    auto moments = [&](int64_t at, float &m1, float &m2) {
      m1 = mulRounded(mulRounded(first.value[m[at]], oldScale1), beta1);
      m1 = fmaf(g[at], rest1, m1);
      m2 = mulRounded(mulRounded(second.value[v[at]], oldScale2), beta2);
      m2 = fmaf(mulRounded(rest2, g[at]), g[at], m2);
    };
    float max1 = 0.0f, max2 = 0.0f;
    for (int64_t i = team.rank(); i < count; i += team.size()) {
      float m1, m2;
      moments(start + i, m1, m2);
      max1 = fmaxf(max1, fabsf(m1));
      max2 = fmaxf(max2, fabsf(m2));
    }
    const float absmax1 = team.reduce(max1, MaxOp());
    const float absmax2 = team.reduce(max2, MaxOp());
    const float inverse1 = absmax1 == 0.0f ? 0.0f : 1.0f / absmax1;
    const float inverse2 = absmax2 == 0.0f ? 0.0f : 1.0f / absmax2;
    for (int64_t i = team.rank(); i < count; i += team.size()) {
      const int64_t at = start + i;
      float m1, m2;
      moments(at, m1, m2);
      float denominator = addRounded(sqrtf(m2) / c2, eps);
      float value = p[at];
      if (weightDecay > 0)
        value = mulRounded(value, decay);
      pOut[at] = addRounded(value, mulRounded(stepSize, m1) / denominator);
      mOut[at] = absmax1 == 0.0f ? 0 : first.code(mulRounded(m1, inverse1));
      vOut[at] = absmax2 == 0.0f ? 0 : second.code(mulRounded(m2, inverse2));
    }
    if (team.rank() == 0) {
      mScaleOut[row] = absmax1;
      vScaleOut[row] = absmax2;
    }
  }
};

} // namespace detail

/// One Adam step on 8-bit moments (CpuKernels.h's adam8bit, the same bits):
/// one thread block per block of 256 elements.
inline void adam8bit(const float *p, const Dims &pDims, const float *g,
                     const Dims &, const int8_t *m, const Dims &,
                     const float *mScale, const Dims &, const int8_t *v,
                     const Dims &, const float *vScale, const Dims &,
                     const float *lr, const Dims &, const float *step,
                     const Dims &, float *pOut, const Dims &, int8_t *mOut,
                     const Dims &, float *mScaleOut, const Dims &, int8_t *vOut,
                     const Dims &, float *vScaleOut, const Dims &,
                     const Adam8bitParams &params, cudaStream_t stream) {
  const int64_t n = pDims.numElements();
  const double beta1 = params.beta1, beta2 = params.beta2, eps = params.eps,
               weightDecay = params.weight_decay;
  detail::Adam8bitBody body;
  body.p = p;
  body.g = g;
  body.m = reinterpret_cast<const uint8_t *>(m);
  body.v = reinterpret_cast<const uint8_t *>(v);
  body.mScale = mScale;
  body.vScale = vScale;
  body.lr = lr;
  body.step = step;
  body.pOut = pOut;
  body.mOut = reinterpret_cast<uint8_t *>(mOut);
  body.vOut = reinterpret_cast<uint8_t *>(vOut);
  body.mScaleOut = mScaleOut;
  body.vScaleOut = vScaleOut;
  body.n = n;
  body.beta1 = float(beta1);
  body.beta2 = float(beta2);
  body.rest1 = float(1.0 - beta1);
  body.rest2 = float(1.0 - beta2);
  body.eps = float(eps);
  body.beta1d = beta1;
  body.beta2d = beta2;
  body.weightDecay = weightDecay;
  for (int k = 0; k < 256; ++k) {
    body.first.value[k] = blockwise8bit::kSignedCodes[k];
    body.second.value[k] = blockwise8bit::kUnsignedCodes[k];
  }
  detail::launchRows((n + blockwise8bit::kBlock - 1) / blockwise8bit::kBlock,
                     blockwise8bit::kBlock, body, stream, "adam8bit");
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_OPTIM_CUH
