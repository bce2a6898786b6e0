//===- Loss.h - the negative log-likelihood loss on the CPU -----*- C++ -*-===//
//
// nllLoss with PyTorch's semantics; a target out of range is recorded in the
// error slot (Common.h), never read.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_LOSS_H
#define ZTC_RUNTIME_KERNELS_CPU_LOSS_H

#include "Common.h"

#include "../Dims.h"
#include "../Library.h"
#include "../StepAbi.h"

#include <cstdint>

namespace ztc::cpu {

template <typename T, typename I>
void nllLoss(const T *logProbs, const Dims &lpDims, const I *target,
             const Dims &, const T *weight, const Dims &, T *y, const Dims &,
             const NllLossParams &params) {
  const int64_t reduction = static_cast<int64_t>(params.reduction);
  const bool hasIgnore = params.ignore_index.present;
  const int64_t ignoreIndex = params.ignore_index.value;
  using Acc = detail::SumT<T>;
  int64_t batch = lpDims.d[0], classes = lpDims.d[1];
  int64_t spatial = product(lpDims, 2, lpDims.rank);
  // Serial on purpose: the sum's order must not depend on the thread count,
  // and the work is O(N * d), small next to the log-softmax before it.
  Acc total = 0, weightSum = 0;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t s = 0; s < spatial; ++s) {
      int64_t t = static_cast<int64_t>(target[n * spatial + s]);
      Acc loss = 0;
      if (hasIgnore && t == ignoreIndex) {
        // No loss and no weight.
      } else if (t < 0 || t >= classes) {
        // No loss and no weight either; the step reports the error.
        detail::recordRangeError(ZTC_ERROR_LOSS_TARGET, t, 0, classes,
                                 hasIgnore, ignoreIndex);
      } else {
        Acc w = weight ? static_cast<Acc>(detail::load(weight[t])) : Acc(1);
        loss = -w * static_cast<Acc>(detail::load(
                        logProbs[(n * classes + t) * spatial + s]));
        weightSum += w;
      }
      if (reduction == 0)
        y[n * spatial + s] = detail::store<T>(loss);
      total += loss;
    }
  }
  if (reduction == 1)
    y[0] = detail::store<T>(total);
  else if (reduction == 2)
    y[0] = detail::store<T>(total / weightSum);
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_LOSS_H
