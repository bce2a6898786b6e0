//===- Random.cuh - uniform random numbers on CUDA --------------*- C++ -*-===//
//
// randomUniform: the values of ../Random.h, bit for bit those of the CPU
// library.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_RANDOM_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_RANDOM_CUH

#include "Common.cuh"

#include "../Dims.h"
#include "../Library.h"
#include "../Random.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

namespace ztc::cuda {

namespace detail {

/// Element i of a random stream (Random.h). The key is a binding the host
/// writes before the call, so it is read here, on the device.
template <typename T> struct RandomUniformBody {
  const int64_t *key;
  T *y;
  uint64_t randomStream;
  ZTC_HOST_DEVICE void operator()(int64_t i) const {
    uint64_t base =
        random::streamBase(static_cast<uint64_t>(*key), randomStream);
    y[i] = static_cast<T>(random::uniformAt(base, static_cast<uint64_t>(i)));
  }
};

} // namespace detail

/// The values of CpuKernels.h's randomUniform, bit for bit; `key` is a
/// device pointer like every data pointer.
template <typename T>
void randomUniform(const int64_t *key, const Dims &, T *y, const Dims &dims,
                   const RandomUniformParams &params, cudaStream_t stream) {
  const uint64_t randomStream = static_cast<uint64_t>(params.stream);
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "random values are float or double");
  detail::launchElements(dims.numElements(),
                         detail::RandomUniformBody<T>{key, y, randomStream},
                         stream, "randomUniform");
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_RANDOM_CUH
