//===- Optim.h - optimizer updates on the CPU -------------------*- C++ -*-===//
//
// adam8bit: one Adam step on bitsandbytes' 8-bit moments (Blockwise8bit.h),
// block by block.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_OPTIM_H
#define ZTC_RUNTIME_KERNELS_CPU_OPTIM_H

#include "Common.h"

#include "../Blockwise8bit.h"
#include "../Dims.h"
#include "../Library.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ztc::cpu {

/// One Adam step of the float32 parameter p[0..n) on 8-bit moments, as
/// bitsandbytes' Adam8bit and AdamW8bit take it (Blockwise8bit.h):
/// m and v are codes (the signed and unsigned dynamic maps), mScale and
/// vScale one scale per 256 elements; lr and step (1-based) are read from
/// their rank-0 buffers. The results go to the *Out buffers, which may be
/// the inputs' own (an in-place update). Blocks run on any thread; each
/// block's result does not depend on how they are shared out.
inline void adam8bit(const float *p, const Dims &pDims, const float *g,
                     const Dims &, const int8_t *m, const Dims &,
                     const float *mScale, const Dims &, const int8_t *v,
                     const Dims &, const float *vScale, const Dims &,
                     const float *lr, const Dims &, const float *step,
                     const Dims &, float *pOut, const Dims &, int8_t *mOut,
                     const Dims &, float *mScaleOut, const Dims &, int8_t *vOut,
                     const Dims &, float *vScaleOut, const Dims &,
                     const Adam8bitParams &params) {
  const int64_t n = pDims.numElements();
  using blockwise8bit::kBlock;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  auto copy = [](const void *from, void *to, size_t bytes) {
    if (from != to)
      std::memcpy(to, from, bytes);
  };
  copy(p, pOut, size_t(n) * sizeof(float));
  copy(m, mOut, size_t(n));
  copy(v, vOut, size_t(n));
  copy(mScale, mScaleOut, size_t(blocks) * sizeof(float));
  copy(vScale, vScaleOut, size_t(blocks) * sizeof(float));
  blockwise8bit::AdamStep hyper;
  hyper.step = static_cast<int64_t>(*step);
  hyper.lr = *lr;
  hyper.beta1 = params.beta1;
  hyper.beta2 = params.beta2;
  hyper.eps = params.eps;
  hyper.weightDecay = params.weight_decay;
  const blockwise8bit::CodeTable &signedTable = blockwise8bit::codeTable(true);
  const blockwise8bit::CodeTable &unsignedTable =
      blockwise8bit::codeTable(false);
  auto *m1 = reinterpret_cast<uint8_t *>(mOut);
  auto *m2 = reinterpret_cast<uint8_t *>(vOut);
#pragma omp parallel for if (n > detail::kParallelGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t start = b * kBlock;
    blockwise8bit::adamStep(pOut + start, g + start, m1 + start, m2 + start,
                            mScaleOut + b, vScaleOut + b,
                            std::min(kBlock, n - start), hyper, signedTable,
                            unsignedTable);
  }
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_OPTIM_H
