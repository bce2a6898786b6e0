//===- Dims.h - static shapes for the kernel libraries ----------*- C++ -*-===//
//
// The shape type every kernel of the CPU and CUDA libraries takes: a rank
// and up to eight sizes, built from a braced list in generated code and
// passed to CUDA kernels by value, with the row-major index arithmetic both
// libraries do on it. Shapes are static, checked at compile time, so
// kernels never validate them.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_DIMS_H
#define ZTC_RUNTIME_KERNELS_DIMS_H

#include "Half.h" // ZTC_HOST_DEVICE

#include <cstdint>
#include <initializer_list>

namespace ztc {

/// The most dimensions a kernel's shape holds. The compiler refuses a
/// tensor of higher rank at import (dialects/NN/IR/ShapeLimits.h, whose
/// kMaxRank must equal this one: ShapeLimitsTest).
constexpr int64_t kMaxRank = 8;

/// A static shape (rank <= kMaxRank).
struct Dims {
  int64_t rank = 0;
  int64_t d[kMaxRank] = {0};
  Dims() = default;
  Dims(std::initializer_list<int64_t> dims) {
    for (int64_t size : dims)
      if (rank < kMaxRank)
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

/// The number of elements of dims.d[begin, end).
inline int64_t product(const Dims &dims, int64_t begin, int64_t end) {
  int64_t count = 1;
  for (int64_t i = begin; i < end; ++i)
    count *= dims.d[i];
  return count;
}

/// A normalization's rows: the dimensions before `axis` (negative counts
/// from the end) index them, those from `axis` on make one row.
struct NormalizedRows {
  int64_t rows, length;
};
inline NormalizedRows normalizedRows(const Dims &dims, int64_t axis) {
  if (axis < 0)
    axis += dims.rank;
  return {product(dims, 0, axis), product(dims, axis, dims.rank)};
}

/// `dims` as a matrix of rows of its last dimension: [the product of the
/// others, the last] (a bias gradient sums such rows).
inline Dims rowsOf(const Dims &dims) {
  if (dims.rank == 0)
    return Dims{1, 1};
  return Dims{product(dims, 0, dims.rank - 1), dims.d[dims.rank - 1]};
}

/// The NCHW dimensions of a tensor of NHWC dimensions `nhwc` (the
/// convolutions' channels-last activations).
inline Dims nchwOf(const Dims &nhwc) {
  return Dims{nhwc.d[0], nhwc.d[3], nhwc.d[1], nhwc.d[2]};
}

/// Row-major element strides of `dims`.
inline void contiguousStrides(const Dims &dims, int64_t *strides) {
  int64_t stride = 1;
  for (int64_t i = dims.rank - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= dims.d[i];
  }
}

/// The strides of a tensor of shape `from` read as one of shape `to`
/// (NumPy broadcasting: `from` aligned to `to`'s last dimensions, each of
/// its sizes `to`'s or 1): an absent or size-1 dimension has stride 0.
inline void broadcastStrides(const Dims &from, const Dims &to,
                             int64_t *strides) {
  int64_t stride = 1, skip = to.rank - from.rank;
  for (int64_t i = to.rank - 1; i >= 0; --i) {
    int64_t size = i < skip ? 1 : from.d[i - skip];
    strides[i] = size == 1 ? 0 : stride;
    stride *= size;
  }
}

/// The offsets of row-major position `flat` of dims[0, rank) under two sets
/// of strides (strided copies, matmul batches).
ZTC_HOST_DEVICE inline void stridedOffsets(int64_t flat, const int64_t *dims,
                                           int64_t rank,
                                           const int64_t *stridesA,
                                           const int64_t *stridesB,
                                           int64_t &offsetA, int64_t &offsetB) {
  offsetA = offsetB = 0;
  for (int64_t i = rank - 1; i >= 0; --i) {
    int64_t index = flat % dims[i];
    flat /= dims[i];
    offsetA += index * stridesA[i];
    offsetB += index * stridesB[i];
  }
}

} // namespace ztc

#endif // ZTC_RUNTIME_KERNELS_DIMS_H
