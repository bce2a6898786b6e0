//===- Collectives.cuh - the dist collectives on CUDA -----------*- C++ -*-===//
//
// allReduce, reduceScatter, allGather and shard on the step's stream: the
// step context's communicator moves the data; with one rank and no
// communicator, a copy kernel does.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_COLLECTIVES_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_COLLECTIVES_CUH

#include "Common.cuh"

#include "../Half.h"
#include "../StepAbi.h"
#include "../StepError.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

namespace ztc::cuda {

namespace detail {
/// y[to + i] = x[from + i]: one rank's block out of or into a whole.
template <typename T> struct CopyBlockBody {
  const T *x;
  T *y;
  int64_t from, to;
  ZTC_HOST_DEVICE void operator()(int64_t i) const { y[to + i] = x[from + i]; }
};
template <typename T> constexpr int32_t commDType() {
  return std::is_same_v<T, float>    ? ZTC_COMM_F32
         : std::is_same_v<T, double> ? ZTC_COMM_F64
         : std::is_same_v<T, bf16>   ? ZTC_COMM_BF16
                                     : ZTC_COMM_F16;
}
inline void checkCollective(int32_t code, int32_t which) {
  if (code != 0)
    recordError(
        describeStepError(makeStepError(ZTC_ERROR_COLLECTIVE, code, which, 0)));
}
} // namespace detail

/// dist.all_reduce: y = the sum over ranks of x (n elements).
template <typename T>
void allReduce(const ztc_step_context *ctx, const T *x, T *y, int64_t n,
               cudaStream_t stream) {
  if (!ctx->comm) {
    detail::launchElements(n, detail::CopyBlockBody<T>{x, y, 0, 0}, stream,
                           "allReduce");
    return;
  }
  detail::checkCollective(ctx->comm->all_reduce_sum(ctx->comm->self, x, y, n,
                                                    detail::commDType<T>(),
                                                    stream),
                          ZTC_COLLECTIVE_ALL_REDUCE);
}

/// dist.reduce_scatter: y (n elements) = block `rank` of the sum of x.
template <typename T>
void reduceScatter(const ztc_step_context *ctx, const T *x, T *y, int64_t n,
                   cudaStream_t stream) {
  if (!ctx->comm) {
    detail::launchElements(
        n, detail::CopyBlockBody<T>{x, y, int64_t(ctx->rank) * n, 0}, stream,
        "reduceScatter");
    return;
  }
  detail::checkCollective(
      ctx->comm->reduce_scatter_sum(ctx->comm->self, x, y, n,
                                    detail::commDType<T>(), stream),
      ZTC_COLLECTIVE_REDUCE_SCATTER);
}

/// dist.all_gather: y (world_size blocks of n) = every rank's x.
template <typename T>
void allGather(const ztc_step_context *ctx, const T *x, T *y, int64_t n,
               cudaStream_t stream) {
  if (!ctx->comm) {
    detail::launchElements(
        n, detail::CopyBlockBody<T>{x, y, 0, int64_t(ctx->rank) * n}, stream,
        "allGather");
    return;
  }
  detail::checkCollective(ctx->comm->all_gather(ctx->comm->self, x, y, n,
                                                detail::commDType<T>(), stream),
                          ZTC_COLLECTIVE_ALL_GATHER);
}

/// dist.shard: y (n elements) = block `rank` of x.
template <typename T>
void shard(const ztc_step_context *ctx, const T *x, T *y, int64_t n,
           cudaStream_t stream) {
  detail::launchElements(
      n, detail::CopyBlockBody<T>{x, y, int64_t(ctx->rank) * n, 0}, stream,
      "shard");
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_COLLECTIVES_CUH
