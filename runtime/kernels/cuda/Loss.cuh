//===- Loss.cuh - the negative log-likelihood loss on CUDA ------*- C++ -*-===//
//
// nllLoss on one thread block; a target out of range is reported as a data
// error (Common.cuh), never read.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_LOSS_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_LOSS_CUH

#include "Common.cuh"

#include "../Dims.h"
#include "../Library.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ztc::cuda {

namespace detail {

/// The whole loss on one block: per-element values for reduction none, the
/// sum and the weight sum reduced in SumT<T> otherwise.
template <typename T, typename I> struct NllLossBody {
  const T *logProbs;
  const I *target;
  const T *weight;
  T *y;
  int64_t batch, classes, spatial, reduction, ignoreIndex;
  bool hasIgnore;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t, const Team &team) const {
    using Acc = SumT<T>;
    Acc total = 0, weightSum = 0;
    for (int64_t e = team.rank(); e < batch * spatial; e += team.size()) {
      int64_t n = e / spatial, s = e % spatial;
      int64_t t = static_cast<int64_t>(target[e]);
      Acc loss = 0;
      if (!(hasIgnore && t == ignoreIndex)) {
        if (t < 0 || t >= classes) {
          reportDataError(kLossTarget, t, 0, classes, hasIgnore, ignoreIndex);
        } else {
          Acc w = weight ? static_cast<Acc>(load(weight[t])) : Acc(1);
          loss = -w * static_cast<Acc>(
                          load(logProbs[(n * classes + t) * spatial + s]));
          weightSum += w;
        }
      }
      if (reduction == 0)
        y[e] = store<T>(loss);
      total += loss;
    }
    total = team.reduce(total, SumOp());
    weightSum = team.reduce(weightSum, SumOp());
    if (team.rank() != 0)
      return;
    if (reduction == 1)
      y[0] = store<T>(total);
    else if (reduction == 2)
      y[0] = store<T>(total / weightSum);
  }
};

} // namespace detail

template <typename T, typename I>
void nllLoss(const T *logProbs, const Dims &lpDims, const I *target,
             const Dims &, const T *weight, const Dims &, T *y, const Dims &,
             const NllLossParams &params, cudaStream_t stream) {
  const int64_t reduction = static_cast<int64_t>(params.reduction);
  const bool hasIgnore = params.ignore_index.present;
  const int64_t ignoreIndex = params.ignore_index.value;
  int64_t batch = lpDims.d[0], classes = lpDims.d[1];
  int64_t spatial = product(lpDims, 2, lpDims.rank);
  // One block: its fixed-shape tree keeps the sum deterministic, and the
  // work is small next to the log-softmax before it.
  detail::launchRows(
      1, batch * spatial,
      detail::NllLossBody<T, I>{logProbs, target, weight, y, batch, classes,
                                spatial, reduction, ignoreIndex, hasIgnore},
      stream, "nllLoss");
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_LOSS_CUH
