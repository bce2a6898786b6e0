//===- Library.h - the library kernels' parameter structs -------*- C++ -*-===//
//
// One aggregate per configuration of runtime/kernels/Library.def, with the
// fields in the .def's order: generated steps build them positionally, the
// CPU and CUDA libraries read them by name, so the C++ compiler checks
// every field of every call. Plain host C++ (no MLIR, no CUDA).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_LIBRARY_H
#define ZTC_RUNTIME_KERNELS_LIBRARY_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ztc {

/// An i64 array field: a view of values the caller keeps alive for the
/// call (a static array in generated code).
struct Ints {
  const int64_t *data = nullptr;
  int64_t size = 0;

  constexpr Ints() = default;
  constexpr Ints(const int64_t *values, int64_t count)
      : data(values), size(count) {}
  template <size_t N>
  constexpr Ints(const int64_t (&values)[N]) : data(values), size(N) {}
  Ints(const std::vector<int64_t> &values)
      : data(values.data()), size(static_cast<int64_t>(values.size())) {}
  constexpr int64_t operator[](int64_t i) const { return data[i]; }
  constexpr const int64_t *begin() const { return data; }
  constexpr const int64_t *end() const { return data + size; }
};

/// An optional integer field.
struct MaybeInt {
  bool present = false;
  int64_t value = 0;
};

/// Device memory a CUDA kernel works in besides its operands, planned by
/// the compiler (runtime/kernels/cuda/Scratch.h): the kernels of
/// Library.def's ZTC_SCRATCH rows take it after their parameter struct.
struct Scratch {
  void *data = nullptr;
  int64_t bytes = 0;
};

/// A loss's reduction over its elements (absent: mean, as PyTorch's).
enum class Reduction : int32_t { None = 0, Sum = 1, Mean = 2 };

namespace library {
using Int = int64_t;
using Bool = bool;
using Flag = bool;
using Float = double;
using MaybeFloat = double; // 0 when absent
using Ints = ztc::Ints;
using MaybeInts = ztc::Ints;
using MaybeInt = ztc::MaybeInt;
using Bits = int64_t;
using Reduction = ztc::Reduction;
} // namespace library

#define ZTC_FIELD(name, Kind) library::Kind name;
#define ZTC_CONFIG(Name, Fields)                                               \
  struct Name##Params {                                                        \
    Fields                                                                     \
  };
#include "Library.def"

} // namespace ztc

#endif // ZTC_RUNTIME_KERNELS_LIBRARY_H
