//===- Dims.h - static shapes for the kernel libraries ------------*- C++ -*-===//
//
// The shape type every kernel of the CPU and CUDA libraries takes: a rank
// and up to eight sizes, built from a braced list in generated code and
// passed to CUDA kernels by value. Shapes are static, checked at compile
// time, so kernels never validate them.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_DIMS_H
#define ZTC_RUNTIME_KERNELS_DIMS_H

#include "Half.h" // ZTC_HOST_DEVICE

#include <cstdint>
#include <initializer_list>

namespace ztc {

/// A static shape (rank <= 8).
struct Dims {
  int64_t rank = 0;
  int64_t d[8] = {0};
  Dims() = default;
  Dims(std::initializer_list<int64_t> dims) {
    for (int64_t size : dims)
      if (rank < 8)
        d[rank++] = size;
  }
  ZTC_HOST_DEVICE int64_t numElements() const {
    int64_t count = 1;
    for (int64_t i = 0; i < rank; ++i)
      count *= d[i];
    return count;
  }
  ZTC_HOST_DEVICE int64_t operator[](int64_t i) const { return d[i]; }
};

} // namespace ztc

#endif // ZTC_RUNTIME_KERNELS_DIMS_H
