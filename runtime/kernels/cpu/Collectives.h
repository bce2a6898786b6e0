//===- Collectives.h - the dist collectives on the CPU ----------*- C++ -*-===//
//
// allReduce, reduceScatter, allGather and shard: the step context's
// communicator moves the data; with one rank and no communicator, a copy
// does.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_COLLECTIVES_H
#define ZTC_RUNTIME_KERNELS_CPU_COLLECTIVES_H

#include "Common.h"

#include "../Half.h"
#include "../StepAbi.h"
#include "../StepError.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace ztc::cpu {

/// The ztc_comm element type of T.
template <typename T> constexpr int32_t commDType() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    std::is_same_v<T, bf16> || std::is_same_v<T, f16>,
                "collectives move floating-point tensors");
  return std::is_same_v<T, float>    ? ZTC_COMM_F32
         : std::is_same_v<T, double> ? ZTC_COMM_F64
         : std::is_same_v<T, bf16>   ? ZTC_COMM_BF16
                                     : ZTC_COMM_F16;
}

namespace detail {
/// Records a collective's failure `code` in the error slot.
inline void checkCollective(int32_t code, int32_t which) {
  if (code != 0)
    recordDataError(makeStepError(ZTC_ERROR_COLLECTIVE, code, which, 0));
}
} // namespace detail

/// dist.all_reduce: y = the sum over ranks of x (n elements). With no
/// communicator (one rank) the sum is x itself.
template <typename T>
void allReduce(const ztc_step_context *ctx, const T *x, T *y, int64_t n) {
  if (!ctx->comm) {
    std::copy(x, x + n, y);
    return;
  }
  detail::checkCollective(ctx->comm->all_reduce_sum(ctx->comm->self, x, y, n,
                                                    commDType<T>(), nullptr),
                          ZTC_COLLECTIVE_ALL_REDUCE);
}

/// dist.reduce_scatter: y (n elements) = block `rank` of the sum over ranks
/// of x (world_size blocks of n).
template <typename T>
void reduceScatter(const ztc_step_context *ctx, const T *x, T *y, int64_t n) {
  if (!ctx->comm) {
    std::copy(x + ctx->rank * n, x + (ctx->rank + 1) * n, y);
    return;
  }
  detail::checkCollective(ctx->comm->reduce_scatter_sum(ctx->comm->self, x, y,
                                                        n, commDType<T>(),
                                                        nullptr),
                          ZTC_COLLECTIVE_REDUCE_SCATTER);
}

/// dist.all_gather: y (world_size blocks of n) = every rank's x, in rank
/// order.
template <typename T>
void allGather(const ztc_step_context *ctx, const T *x, T *y, int64_t n) {
  if (!ctx->comm) {
    std::copy(x, x + n, y + ctx->rank * n);
    return;
  }
  detail::checkCollective(
      ctx->comm->all_gather(ctx->comm->self, x, y, n, commDType<T>(), nullptr),
      ZTC_COLLECTIVE_ALL_GATHER);
}

/// dist.shard: y (n elements) = block `rank` of x, no communication.
template <typename T>
void shard(const ztc_step_context *ctx, const T *x, T *y, int64_t n) {
  std::copy(x + ctx->rank * n, x + (ctx->rank + 1) * n, y);
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_COLLECTIVES_H
