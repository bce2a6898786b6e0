//===- Movement.cuh - data movement on CUDA ---------------------*- C++ -*-===//
//
// transpose, slice, copyInto (concat), gather, trilu, rotateHalf and rotary
// (arithmetic, but a turn's neighbour reads like rotateHalf's), and
// the adjoints scatterAdd and insertSlice; strided copies go through
// detail::stridedCopy.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_MOVEMENT_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_MOVEMENT_CUH

#include "Common.cuh"
#include "Sort.cuh"

#include "../Dims.h"
#include "../Library.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ztc::cuda {

namespace detail {

/// Element strides of a copy over `dims`; strides may be negative.
struct CopyPlan {
  int64_t rank;
  int64_t dims[8];
  int64_t src[8];
  int64_t dst[8];
};

template <typename T> struct StridedCopyBody {
  const T *x;
  T *y;
  CopyPlan p;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t from, to;
    stridedOffsets(flat, p.dims, p.rank, p.src, p.dst, from, to);
    y[to] = x[from];
  }
};

/// dst[index * dstStrides] = src[index * srcStrides] for every index of
/// `dims`.
template <typename T>
void stridedCopy(const T *src, const int64_t *srcStrides, T *dst,
                 const int64_t *dstStrides, const Dims &dims,
                 cudaStream_t stream, const char *kernel) {
  CopyPlan plan{};
  plan.rank = dims.rank;
  for (int64_t i = 0; i < dims.rank; ++i) {
    plan.dims[i] = dims.d[i];
    plan.src[i] = srcStrides[i];
    plan.dst[i] = dstStrides[i];
  }
  launchElements(dims.numElements(), StridedCopyBody<T>{src, dst, plan}, stream,
                 kernel);
}

template <typename T, typename I> struct GatherBody {
  const T *data;
  const I *indices;
  T *y;
  int64_t length, inner, count;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t row = flat / inner;
    int64_t index = static_cast<int64_t>(indices[row % count]);
    if (index < -length || index >= length) {
      reportDataError(kGatherIndex, index, -length, length);
      y[flat] = T(0.0f);
      return;
    }
    if (index < 0)
      index += length;
    y[flat] = data[((row / count) * length + index) * inner + flat % inner];
  }
};

/// One element of rotateHalf (cpu/Movement.h).
template <typename T> struct RotateHalfBody {
  const T *x;
  T *y;
  int64_t length;
  bool inverse;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    const int64_t half = length / 2, i = flat % length;
    const bool lower = i < half;
    const T from = x[lower ? flat + half : flat - half];
    // [-x2, x1] negates what the lower half receives, [x2, -x1] the upper.
    y[flat] = lower != inverse ? store<T>(-load(from)) : from;
  }
};

/// One element of rotary (cpu/Movement.h): element p of x and its
/// partner q in the other half, their tables broadcast (`table` strides).
template <typename T> struct RotaryBody {
  const T *x, *cos, *sin;
  T *y;
  int64_t rank, length;
  int64_t dims[kMaxRank], strides[kMaxRank], table[kMaxRank];
  bool inverse;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using C = ComputeT<T>;
    int64_t offset, tableOffset;
    stridedOffsets(flat, dims, rank, strides, table, offset, tableOffset);
    const int64_t half = length / 2, step = table[rank - 1];
    const bool lower = flat % length < half;
    const int64_t partner = lower ? flat + half : flat - half;
    const int64_t partnerTable =
        lower ? tableOffset + half * step : tableOffset - half * step;
    const C xp = load(x[flat]), xq = load(x[partner]);
    const C cp = load(cos[tableOffset]);
    // [-x2, x1] * s, or the inverse turn of x * s: [x2 s2, -x1 s1].
    const C sq = load(sin[inverse ? partnerTable : tableOffset]);
    y[flat] =
        store<T>(lower != inverse ? xp * cp - xq * sq : xp * cp + xq * sq);
  }
};

template <typename T> struct TriluBody {
  const T *x;
  T *y;
  int64_t rows, cols, diagonal;
  bool upper;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t j = flat % cols, i = (flat / cols) % rows;
    bool keep = upper ? j - i >= diagonal : j - i <= diagonal;
    y[flat] = keep ? x[flat] : T(0.0f);
  }
};

/// A scatterAdd position's sort key: its row (the index, made
/// non-negative) above its position, so that sorted keys list each row's
/// positions in order. An index out of range sorts last (kNoRow), with the
/// error reported, as do the positions past the last (the sort's padding).
constexpr uint64_t kNoRow = ~uint64_t(0);

template <typename I> struct ScatterKeysBody {
  const I *indices;
  uint64_t *keys;
  int64_t count, length;
  ZTC_HOST_DEVICE void operator()(int64_t position) const {
    uint64_t key = kNoRow;
    if (position < count) {
      int64_t index = static_cast<int64_t>(indices[position]);
      if (index < -length || index >= length)
        // Skipped: y keeps data there; the step reports the error.
        reportDataError(kScatterIndex, index, -length, length);
      else
        key = uint64_t(index < 0 ? index + length : index) << 32 |
              uint64_t(position);
    }
    keys[position] = key;
  }
};

/// scatterAdd for one column of one row that the indices hit: the thread of
/// the row's first position in sorted order adds the updates of all its
/// positions in order, as the CPU does, so repeated indices accumulate
/// without atomics and the sums have the CPU's bits.
template <typename T> struct ScatterRowsBody {
  const uint64_t *keys;
  const T *updates;
  T *y;
  int64_t length, inner, count;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    const int64_t c = flat % inner, at = (flat / inner) % count,
                  o = flat / inner / count;
    const uint64_t row = keys[at] >> 32;
    if (keys[at] == kNoRow || (at > 0 && keys[at - 1] >> 32 == row))
      return;
    T &to = y[(o * length + static_cast<int64_t>(row)) * inner + c];
    T sum = to;
    for (int64_t e = at; e < count && keys[e] >> 32 == row; ++e) {
      const int64_t position = static_cast<int64_t>(keys[e] & 0xffffffffu);
      sum = store<T>(load(sum) +
                     load(updates[(o * count + position) * inner + c]));
    }
    to = sum;
  }
};

} // namespace detail

template <typename T>
void transpose(const T *x, const Dims &dims, T *y, const Dims &,
               const TransposeParams &params, cudaStream_t stream) {
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
  detail::stridedCopy(x, srcStrides, y, yStrides, yDims, stream, "transpose");
}

template <typename T>
void slice(const T *x, const Dims &dims, T *y, const Dims &yDims,
           const SliceParams &params, cudaStream_t stream) {
  const int64_t *starts = params.starts.data, *steps = params.steps.data;
  int64_t xStrides[8], srcStrides[8], yStrides[8];
  contiguousStrides(dims, xStrides);
  contiguousStrides(yDims, yStrides);
  int64_t base = 0;
  for (int64_t i = 0; i < dims.rank; ++i) {
    base += starts[i] * xStrides[i];
    srcStrides[i] = xStrides[i] * steps[i];
  }
  detail::stridedCopy(x + base, srcStrides, y, yStrides, yDims, stream,
                      "slice");
}

template <typename T>
void copyInto(const T *x, const Dims &xDims, T *y, const Dims &yDims,
              const CopyIntoParams &params, cudaStream_t stream) {
  const int64_t axis = params.axis, offset = params.offset;
  int64_t xStrides[8], yStrides[8];
  contiguousStrides(xDims, xStrides);
  contiguousStrides(yDims, yStrides);
  detail::stridedCopy(x, xStrides, y + offset * yStrides[axis], yStrides, xDims,
                      stream, "copyInto");
}

template <typename T, typename I>
void gather(const T *data, const Dims &dataDims, const I *indices,
            const Dims &indexDims, T *y, const Dims &, const AxisParams &params,
            cudaStream_t stream) {
  const int64_t axis = params.axis;
  int64_t outer = product(dataDims, 0, axis);
  int64_t length = dataDims.d[axis];
  int64_t inner = product(dataDims, axis + 1, dataDims.rank);
  int64_t count = indexDims.numElements();
  if (inner == 0 || count == 0)
    return;
  detail::launchElements(
      outer * count * inner,
      detail::GatherBody<T, I>{data, indices, y, length, inner, count}, stream,
      "gather");
}

template <typename T>
void rotateHalf(const T *x, const Dims &dims, T *y, const Dims &,
                const RotateHalfParams &params, cudaStream_t stream) {
  detail::launchElements(
      dims.numElements(),
      detail::RotateHalfBody<T>{x, y, dims.d[dims.rank - 1], params.inverse},
      stream, "rotateHalf");
}

template <typename T>
void rotary(const T *x, const Dims &dims, const T *cos, const Dims &tableDims,
            const T *sin, const Dims &, T *y, const Dims &,
            const RotaryParams &params, cudaStream_t stream) {
  detail::RotaryBody<T> body{x, cos, sin, y, dims.rank, dims.d[dims.rank - 1]};
  for (int64_t i = 0; i < dims.rank; ++i)
    body.dims[i] = dims.d[i];
  contiguousStrides(dims, body.strides);
  broadcastStrides(tableDims, dims, body.table);
  body.inverse = params.inverse;
  detail::launchElements(dims.numElements(), body, stream, "rotary");
}

template <typename T>
void trilu(const T *x, const Dims &dims, T *y, const Dims &,
           const TriluParams &params, cudaStream_t stream) {
  const bool upper = params.upper;
  const int64_t diagonal = params.diagonal;
  int64_t rows = dims.d[dims.rank - 2], cols = dims.d[dims.rank - 1];
  detail::launchElements(
      dims.numElements(),
      detail::TriluBody<T>{x, y, rows, cols, diagonal, upper}, stream, "trilu");
}

//===----------------------------------------------------------------------===//
// Gradients (adjoints of the kernels above)
//===----------------------------------------------------------------------===//

/// y = data with updates added at indices along axis (np.add.at); y may be
/// data (ZTC_IN_PLACE). The positions are sorted by the row they hit
/// (scratch::scatterAddBytes of scratch), then a thread per column of each
/// row hit adds that row's updates in order: the work is spread over the
/// rows hit, however many positions a row has.
template <typename T, typename I>
void scatterAdd(const T *data, const Dims &dataDims, const I *indices,
                const Dims &indexDims, const T *updates, const Dims &, T *y,
                const Dims &, const AxisParams &params, const Scratch &scratch,
                cudaStream_t stream) {
  const char *kernel = "scatterAdd";
  const int64_t axis = params.axis;
  if (y != data) {
    int64_t strides[8];
    contiguousStrides(dataDims, strides);
    detail::stridedCopy(data, strides, y, strides, dataDims, stream, kernel);
  }
  const int64_t outer = product(dataDims, 0, axis);
  const int64_t inner = product(dataDims, axis + 1, dataDims.rank);
  const int64_t length = dataDims.d[axis];
  const int64_t count = indexDims.numElements();
  if (count == 0 || outer * inner == 0)
    return;
  if (count > (int64_t(1) << 32) || length > (int64_t(1) << 31)) {
    detail::recordError(
        std::string(kernel) + ": " + std::to_string(count) + " indices into " +
        std::to_string(length) +
        " rows; the CUDA library scatters at most 2^32 indices into "
        "at most 2^31 rows");
    return;
  }
  const int64_t n = scratch::sortKeyCount(count);
  uint64_t *keys = detail::scratchPart<uint64_t>(
      scratch, 0, n * int64_t(sizeof(uint64_t)), kernel);
  if (!keys)
    return;
  detail::launchElements(
      n, detail::ScatterKeysBody<I>{indices, keys, count, length}, stream,
      kernel);
  detail::sortKeys(keys, n, stream, kernel);
  detail::launchElements(
      outer * count * inner,
      detail::ScatterRowsBody<T>{keys, updates, y, length, inner, count},
      stream, kernel);
}

/// y = dest with source written at starts + i * steps (slice's adjoint).
template <typename T>
void insertSlice(const T *dest, const Dims &destDims, const T *source,
                 const Dims &sourceDims, T *y, const Dims &,
                 const InsertSliceParams &params, cudaStream_t stream) {
  const int64_t *starts = params.starts.data, *steps = params.steps.data;
  int64_t destStrides[8], sourceStrides[8], toStrides[8];
  contiguousStrides(destDims, destStrides);
  contiguousStrides(sourceDims, sourceStrides);
  detail::stridedCopy(dest, destStrides, y, destStrides, destDims, stream,
                      "insertSlice");
  int64_t base = 0;
  for (int64_t d = 0; d < destDims.rank; ++d) {
    base += starts[d] * destStrides[d];
    toStrides[d] = destStrides[d] * steps[d];
  }
  detail::stridedCopy(source, sourceStrides, y + base, toStrides, sourceDims,
                      stream, "insertSlice");
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_MOVEMENT_CUH
