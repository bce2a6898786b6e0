//===- Numeric.h - element arithmetic of the kernel libraries ---*- C++ -*-===//
//
// The one definition of how the CPU and CUDA kernel libraries compute on an
// element type: the type they compute in (float for f16 and bf16), the type
// sums accumulate in, the conversions on load and store, and the NaN test
// and identity of max. Both libraries must agree on these for their results
// to agree, so both take them from here (their detail namespaces import
// ztc::numeric).
//
// Only the C++17 standard library is used; under nvcc every function but
// lowestValue is also a device function (ZTC_HOST_DEVICE).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_NUMERIC_H
#define ZTC_RUNTIME_KERNELS_NUMERIC_H

#include "Half.h"

#include <cstdint>
#include <limits>
#include <type_traits>

namespace ztc::numeric {

/// The type a kernel computes in: float for the 16-bit types.
template <typename T> struct Compute { using type = T; };
template <> struct Compute<f16> { using type = float; };
template <> struct Compute<bf16> { using type = float; };
template <typename T> using ComputeT = typename Compute<T>::type;

/// The type sums accumulate in: double for floating point, T for integers.
template <typename T>
using SumT = std::conditional_t<std::is_integral_v<T>, T, double>;

template <typename T> ZTC_HOST_DEVICE inline ComputeT<T> load(T value) {
  return static_cast<ComputeT<T>>(value);
}

template <typename T, typename U> ZTC_HOST_DEVICE inline T store(U value) {
  return static_cast<T>(static_cast<ComputeT<T>>(value));
}

/// What a kernel with an optional addend stores (layer_norm_backward's
/// input gradient): its own value rounded to T, plus the addend's element i
/// where there is an addend, that sum rounded again, as a loop adding the
/// two after the kernel would round it.
template <typename T, typename U>
ZTC_HOST_DEVICE inline T storePlus(U value, const T *addend, int64_t i) {
  const T own = store<T>(value);
  return addend ? store<T>(load(addend[i]) + load(own)) : own;
}

template <typename T> ZTC_HOST_DEVICE inline bool isNan(T value) {
  if constexpr (std::is_floating_point_v<T>)
    return value != value;
  else
    return false;
}

/// The identity of max: -infinity, or the lowest value for integers. Host
/// only (numeric_limits is not a device function): CUDA kernels get it as a
/// member.
template <typename Acc> Acc lowestValue() {
  return std::numeric_limits<Acc>::has_infinity
             ? -std::numeric_limits<Acc>::infinity()
             : std::numeric_limits<Acc>::lowest();
}

} // namespace ztc::numeric

#endif // ZTC_RUNTIME_KERNELS_NUMERIC_H
