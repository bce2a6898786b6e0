//===- Movement.h - data movement on the CPU --------------------*- C++ -*-===//
//
// transpose, slice, copyInto (concat), gather, trilu, rotateHalf and rotary
// (arithmetic, but a turn's neighbour reads like rotateHalf's), and
// the adjoints scatterAdd and insertSlice; strided copies go through
// detail::stridedCopy.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_MOVEMENT_H
#define ZTC_RUNTIME_KERNELS_CPU_MOVEMENT_H

#include "Common.h"

#include "../Dims.h"
#include "../Library.h"
#include "../StepAbi.h"

#include <algorithm>
#include <cstdint>

namespace ztc::cpu {

namespace detail {

/// dst[index * dstStrides] = src[index * srcStrides] for every index of
/// `dims`; strides are in elements and may be negative. Writes run along
/// the last dimension; when the source is contiguous along another one
/// instead (a transpose), the copy goes in 32 x 32 tiles of those two, so
/// that reads too stay within a few cache lines.
template <typename T>
void stridedCopy(const T *src, const int64_t *srcStrides, T *dst,
                 const int64_t *dstStrides, const Dims &dims) {
  int64_t count = dims.numElements();
  if (count == 0)
    return;
  if (dims.rank == 0) {
    *dst = *src;
    return;
  }
  int64_t last = dims.rank - 1;
  int64_t inner = dims.d[last];
  int64_t srcStep = srcStrides[last], dstStep = dstStrides[last];
  int64_t across = -1;
  if (srcStep != 1)
    for (int64_t i = 0; i < last; ++i)
      if (srcStrides[i] == 1 && dims.d[i] > 1)
        across = i;
  if (across < 0) {
    forThreadRanges(
        count / inner, count > kParallelGrain, [&](int64_t begin, int64_t end) {
          forStridedRows(begin, end, dims.d, last, srcStrides, dstStrides,
                         [&](int64_t srcOffset, int64_t dstOffset) {
                           const T *from = src + srcOffset;
                           T *to = dst + dstOffset;
                           if (srcStep == 1 && dstStep == 1)
                             std::copy(from, from + inner, to);
                           else
                             for (int64_t j = 0; j < inner; ++j)
                               to[j * dstStep] = from[j * srcStep];
                         });
        });
    return;
  }
  // The other dimensions, then tiles of (across, last).
  int64_t outerDims[8], outerSrc[8], outerDst[8], outerRank = 0;
  for (int64_t i = 0; i < last; ++i)
    if (i != across) {
      outerDims[outerRank] = dims.d[i];
      outerSrc[outerRank] = srcStrides[i];
      outerDst[outerRank++] = dstStrides[i];
    }
  constexpr int64_t kTile = 32;
  int64_t rows = dims.d[across], acrossDst = dstStrides[across];
  int64_t rowTiles = (rows + kTile - 1) / kTile;
  int64_t colTiles = (inner + kTile - 1) / kTile;
  int64_t outer = count / (rows * inner);
  forThreadRanges(outer * rowTiles, count > kParallelGrain,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t task = begin; task < end; ++task) {
                      int64_t srcOffset, dstOffset;
                      stridedOffsets(task / rowTiles, outerDims, outerRank,
                                     outerSrc, outerDst, srcOffset, dstOffset);
                      int64_t r0 = (task % rowTiles) * kTile,
                              r1 = std::min(rows, r0 + kTile);
                      for (int64_t c = 0; c < colTiles; ++c) {
                        int64_t c0 = c * kTile,
                                c1 = std::min(inner, c0 + kTile);
                        for (int64_t j = c0; j < c1; ++j) {
                          const T *from = src + srcOffset + j * srcStep;
                          T *to = dst + dstOffset + j * dstStep;
                          for (int64_t r = r0; r < r1; ++r)
                            to[r * acrossDst] = from[r];
                        }
                      }
                    }
                  });
}

} // namespace detail

template <typename T>
void transpose(const T *x, const Dims &dims, T *y, const Dims &,
               const TransposeParams &params) {
  const int64_t *perm = params.perm.data;
  int64_t xStrides[8], srcStrides[8], yStrides[8];
  contiguousStrides(dims, xStrides);
  Dims yDims;
  yDims.rank = dims.rank;
  for (int64_t i = 0; i < dims.rank; ++i) {
    yDims.d[i] = dims.d[perm[i]];
    srcStrides[i] = xStrides[perm[i]];
  }
  contiguousStrides(yDims, yStrides);
  detail::stridedCopy(x, srcStrides, y, yStrides, yDims);
}

template <typename T>
void slice(const T *x, const Dims &dims, T *y, const Dims &yDims,
           const SliceParams &params) {
  const int64_t *starts = params.starts.data, *steps = params.steps.data;
  int64_t xStrides[8], srcStrides[8], yStrides[8];
  contiguousStrides(dims, xStrides);
  contiguousStrides(yDims, yStrides);
  int64_t base = 0;
  for (int64_t i = 0; i < dims.rank; ++i) {
    base += starts[i] * xStrides[i];
    srcStrides[i] = xStrides[i] * steps[i];
  }
  detail::stridedCopy(x + base, srcStrides, y, yStrides, yDims);
}

template <typename T>
void copyInto(const T *x, const Dims &xDims, T *y, const Dims &yDims,
              const CopyIntoParams &params) {
  const int64_t axis = params.axis, offset = params.offset;
  int64_t xStrides[8], yStrides[8];
  contiguousStrides(xDims, xStrides);
  contiguousStrides(yDims, yStrides);
  detail::stridedCopy(x, xStrides, y + offset * yStrides[axis], yStrides,
                      xDims);
}

template <typename T, typename I>
void gather(const T *data, const Dims &dataDims, const I *indices,
            const Dims &indexDims, T *y, const Dims &,
            const AxisParams &params) {
  const int64_t axis = params.axis;
  int64_t outer = product(dataDims, 0, axis);
  int64_t length = dataDims.d[axis];
  int64_t inner = product(dataDims, axis + 1, dataDims.rank);
  int64_t count = indexDims.numElements();
#pragma omp parallel for if (outer * count * inner > detail::kParallelGrain)
  for (int64_t row = 0; row < outer * count; ++row) {
    int64_t o = row / count;
    int64_t index = static_cast<int64_t>(indices[row % count]);
    if (index < -length || index >= length) {
      detail::recordRangeError(ZTC_ERROR_GATHER_INDEX, index, -length, length);
      std::fill(y + row * inner, y + (row + 1) * inner, T(0.0f));
      continue;
    }
    if (index < 0)
      index += length;
    const T *from = data + (o * length + index) * inner;
    std::copy(from, from + inner, y + row * inner);
  }
}

/// The last dimension's halves x1 and x2 as [-x2, x1], or with `inverse`
/// as [x2, -x1] (nn.rotate_half): moved, and negated exactly.
template <typename T>
void rotateHalf(const T *x, const Dims &dims, T *y, const Dims &,
                const RotateHalfParams &params) {
  const bool inverse = params.inverse;
  const int64_t length = dims.d[dims.rank - 1], half = length / 2;
  const int64_t rows = length > 0 ? dims.numElements() / length : 0;
#pragma omp parallel for if (rows * length > detail::kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const T *in = x + r * length;
    T *out = y + r * length;
    for (int64_t i = 0; i < half; ++i) {
      const T lower = in[i], upper = in[half + i];
      out[i] = inverse ? upper : detail::store<T>(-detail::load(upper));
      out[half + i] = inverse ? detail::store<T>(-detail::load(lower)) : lower;
    }
  }
}

/// x * cos + rotate_half(x) * sin, or with `inverse` x * cos +
/// rotate_half_inverse(x * sin) (nn.rotary), cos and sin broadcast to x's
/// shape, each element in T's compute type and rounded once.
template <typename T>
void rotary(const T *x, const Dims &dims, const T *cos, const Dims &tableDims,
            const T *sin, const Dims &, T *y, const Dims &,
            const RotaryParams &params) {
  using C = detail::ComputeT<T>;
  const bool inverse = params.inverse;
  const int64_t rank = dims.rank, length = dims.d[rank - 1], half = length / 2;
  const int64_t rows = length > 0 ? dims.numElements() / length : 0;
  int64_t strides[kMaxRank], tableStrides[kMaxRank];
  contiguousStrides(dims, strides);
  broadcastStrides(tableDims, dims, tableStrides);
  const int64_t step = tableStrides[rank - 1];
#pragma omp parallel for if (rows * length > detail::kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset, tableOffset;
    stridedOffsets(r * length, dims.d, rank, strides, tableStrides, offset,
                   tableOffset);
    const T *in = x + offset;
    const T *c = cos + tableOffset, *s = sin + tableOffset;
    T *out = y + offset;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t lo = i * step, hi = (half + i) * step;
      const C x1 = detail::load(in[i]), x2 = detail::load(in[half + i]);
      const C c1 = detail::load(c[lo]), c2 = detail::load(c[hi]);
      const C s1 = detail::load(s[lo]), s2 = detail::load(s[hi]);
      // [-x2, x1] * s, or the inverse turn of x * s: [x2 s2, -x1 s1].
      out[i] =
          detail::store<T>(inverse ? x1 * c1 + x2 * s2 : x1 * c1 - x2 * s1);
      out[half + i] =
          detail::store<T>(inverse ? x2 * c2 - x1 * s1 : x2 * c2 + x1 * s2);
    }
  }
}

template <typename T>
void trilu(const T *x, const Dims &dims, T *y, const Dims &,
           const TriluParams &params) {
  const bool upper = params.upper;
  const int64_t diagonal = params.diagonal;
  int64_t rows = dims.d[dims.rank - 2], cols = dims.d[dims.rank - 1];
  int64_t matrices = product(dims, 0, dims.rank - 2);
#pragma omp parallel for if (matrices * rows * cols > detail::kParallelGrain)
  for (int64_t r = 0; r < matrices * rows; ++r) {
    int64_t i = r % rows;
    const T *in = x + r * cols;
    T *out = y + r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      bool keep = upper ? j - i >= diagonal : j - i <= diagonal;
      out[j] = keep ? in[j] : T(0.0f);
    }
  }
}

//===----------------------------------------------------------------------===//
// Gradients (adjoints of the kernels above)
//===----------------------------------------------------------------------===//

/// y = data with updates added at indices along axis (np.add.at); repeated
/// indices accumulate. y may be data (ZTC_IN_PLACE). Sequential over
/// indices, parallel over the rest.
template <typename T, typename I>
void scatterAdd(const T *data, const Dims &dataDims, const I *indices,
                const Dims &indexDims, const T *updates, const Dims &, T *y,
                const Dims &, const AxisParams &params) {
  const int64_t axis = params.axis;
  int64_t total = dataDims.numElements();
  if (y != data)
    std::copy(data, data + total, y);
  int64_t outer = product(dataDims, 0, axis);
  int64_t length = dataDims.d[axis];
  int64_t inner = product(dataDims, axis + 1, dataDims.rank);
  int64_t count = indexDims.numElements();
#pragma omp parallel for if (outer * count * inner > detail::kParallelGrain)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      int64_t index = static_cast<int64_t>(indices[j]);
      if (index < -length || index >= length) {
        // Skipped: y keeps data there; the step reports the error.
        detail::recordRangeError(ZTC_ERROR_SCATTER_INDEX, index, -length,
                                 length);
        continue;
      }
      if (index < 0)
        index += length;
      T *to = y + (o * length + index) * inner;
      const T *from = updates + (o * count + j) * inner;
      for (int64_t i = 0; i < inner; ++i)
        to[i] = detail::store<T>(detail::load(to[i]) + detail::load(from[i]));
    }
}

/// y = dest with source written at starts + i * steps (slice's adjoint).
template <typename T>
void insertSlice(const T *dest, const Dims &destDims, const T *source,
                 const Dims &sourceDims, T *y, const Dims &,
                 const InsertSliceParams &params) {
  const int64_t *starts = params.starts.data, *steps = params.steps.data;
  std::copy(dest, dest + destDims.numElements(), y);
  int64_t destStrides[8], sourceStrides[8], toStrides[8];
  contiguousStrides(destDims, destStrides);
  contiguousStrides(sourceDims, sourceStrides);
  int64_t base = 0;
  for (int64_t d = 0; d < destDims.rank; ++d) {
    base += starts[d] * destStrides[d];
    toStrides[d] = destStrides[d] * steps[d];
  }
  detail::stridedCopy(source, sourceStrides, y + base, toStrides, sourceDims);
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_MOVEMENT_H
