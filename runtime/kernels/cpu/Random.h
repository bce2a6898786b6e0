//===- Random.h - uniform random numbers on the CPU -------------*- C++ -*-===//
//
// randomUniform: the values of ../Random.h, the same bits as the CUDA
// library's, any element on any thread.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_RANDOM_H
#define ZTC_RUNTIME_KERNELS_CPU_RANDOM_H

#include "Common.h"

#include "../Dims.h"
#include "../Library.h"
#include "../Random.h"

#include <cstdint>
#include <type_traits>

namespace ztc::cpu {

template <typename T>
void randomUniform(const int64_t *key, const Dims &, T *y, const Dims &dims,
                   const RandomUniformParams &params) {
  const uint64_t randomStream = static_cast<uint64_t>(params.stream);
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "random values are float or double");
  uint64_t base = random::streamBase(static_cast<uint64_t>(*key), randomStream);
  int64_t count = dims.numElements();
#pragma omp parallel for if (count > detail::kParallelGrain)
  for (int64_t i = 0; i < count; ++i)
    y[i] = static_cast<T>(random::uniformAt(base, static_cast<uint64_t>(i)));
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_RANDOM_H
