//===- Reduce.cuh - reductions over axes on CUDA ----------------*- C++ -*-===//
//
// reduce<T, Kind> and its entry points reduceSum, reduceMean and reduceMax:
// one thread per output for short reductions, thread blocks over segments of
// long ones, combined in order.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_REDUCE_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_REDUCE_CUH

#include "Common.cuh"

#include "../Dims.h"
#include "../Library.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

namespace ztc::cuda {

/// What `reduce` computes over the reduced dimensions.
enum class ReduceKind { Sum, Mean, Max };

namespace detail {

/// The bit mask of a reduction's axes (bit i: dimension i is reduced).
inline uint64_t axesMask(const Ints &axes) {
  uint64_t mask = 0;
  for (int64_t axis : axes)
    mask |= uint64_t(1) << axis;
  return mask;
}

/// reduce's split of the dimensions into kept (outputs) and reduced ones.
/// Long reductions view each output's elements as rows: the innermost
/// reduced dimension (`inner` elements, `innerStride` apart) repeated over
/// the outer reduced dimensions (`outerCount` rows); `segments` blocks share
/// one output, each taking a range of rows, or of the one row when there
/// is only one (`splitInner`).
struct ReducePlan {
  int64_t keptRank, kept[8], keptStrides[8];
  int64_t reducedRank, reduced[8], reducedStrides[8];
  int64_t count; // elements per output
  int64_t inner, innerStride, outerCount, segments;
  bool splitInner;
  ZTC_HOST_DEVICE int64_t offsetOf(int64_t rank, const int64_t *dims,
                                   const int64_t *strides, int64_t flat) const {
    int64_t offset = 0;
    for (int64_t i = rank - 1; i >= 0; --i) {
      offset += (flat % dims[i]) * strides[i];
      flat /= dims[i];
    }
    return offset;
  }
  ZTC_HOST_DEVICE int64_t keptOffset(int64_t output) const {
    return offsetOf(keptRank, kept, keptStrides, output);
  }
  ZTC_HOST_DEVICE int64_t reducedOffset(int64_t step) const {
    return offsetOf(reducedRank, reduced, reducedStrides, step);
  }
  /// The offset of outer row `row` (the reduced dimensions but the last).
  ZTC_HOST_DEVICE int64_t outerOffset(int64_t row) const {
    return offsetOf(reducedRank - 1, reduced, reducedStrides, row);
  }
};

template <typename T, ReduceKind Kind>
using ReduceAcc =
    std::conditional_t<Kind == ReduceKind::Max, ComputeT<T>, SumT<T>>;

template <ReduceKind Kind>
using ReduceOp = std::conditional_t<Kind == ReduceKind::Max, MaxNanOp, SumOp>;

template <typename T, ReduceKind Kind, typename Acc>
ZTC_HOST_DEVICE T finishReduce(Acc acc, int64_t count) {
  if constexpr (Kind == ReduceKind::Mean)
    if (count > 0)
      acc = acc / static_cast<Acc>(count);
  return store<T>(acc);
}

/// One output per thread, walking its elements with an odometer (short
/// reductions).
template <typename T, ReduceKind Kind> struct ReduceElementBody {
  const T *x;
  T *y;
  ReducePlan p;
  ReduceAcc<T, Kind> identity;
  ZTC_HOST_DEVICE void operator()(int64_t output) const {
    using Acc = ReduceAcc<T, Kind>;
    Acc acc = identity;
    int64_t index[8] = {0};
    int64_t offset = p.keptOffset(output);
    for (int64_t step = 0; step < p.count; ++step) {
      acc = ReduceOp<Kind>()(acc, static_cast<Acc>(load(x[offset])));
      for (int64_t i = p.reducedRank - 1; i >= 0; --i) {
        offset += p.reducedStrides[i];
        if (++index[i] < p.reduced[i])
          break;
        offset -= index[i] * p.reducedStrides[i];
        index[i] = 0;
      }
    }
    y[output] = finishReduce<T, Kind>(acc, p.count);
  }
};

/// One segment of one output per block (long reductions): the block's
/// threads walk the segment's rows side by side, each row's elements in
/// order, so neighbouring threads read neighbouring elements when the row
/// is contiguous, and no element needs a division to find. With one
/// segment the block writes the output; with several, its partial result
/// (ReduceCombineBody finishes).
template <typename T, ReduceKind Kind> struct ReduceRowBody {
  const T *x;
  T *y;
  ReduceAcc<T, Kind> *partials;
  ReducePlan p;
  ReduceAcc<T, Kind> identity;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t block, const Team &team) const {
    using Acc = ReduceAcc<T, Kind>;
    int64_t output = block / p.segments, segment = block % p.segments;
    const T *base = x + p.keptOffset(output);
    Acc acc = identity;
    if (p.splitInner) {
      int64_t first = segment * p.inner / p.segments;
      int64_t last = (segment + 1) * p.inner / p.segments;
      for (int64_t i = first + team.rank(); i < last; i += team.size())
        acc = ReduceOp<Kind>()(acc,
                               static_cast<Acc>(load(base[i * p.innerStride])));
    } else {
      int64_t first = segment * p.outerCount / p.segments;
      int64_t last = (segment + 1) * p.outerCount / p.segments;
      for (int64_t row = first; row < last; ++row) {
        const T *elements = base + p.outerOffset(row);
        for (int64_t i = team.rank(); i < p.inner; i += team.size())
          acc = ReduceOp<Kind>()(
              acc, static_cast<Acc>(load(elements[i * p.innerStride])));
      }
    }
    acc = team.reduce(acc, ReduceOp<Kind>());
    if (team.rank() != 0)
      return;
    if (p.segments == 1)
      y[output] = finishReduce<T, Kind>(acc, p.count);
    else
      partials[block] = acc;
  }
};

/// An output's segments combined in order (reduce's second pass).
template <typename T, ReduceKind Kind> struct ReduceCombineBody {
  const ReduceAcc<T, Kind> *partials;
  T *y;
  int64_t segments, count;
  ZTC_HOST_DEVICE void operator()(int64_t output) const {
    ReduceAcc<T, Kind> acc = partials[output * segments];
    for (int64_t i = 1; i < segments; ++i)
      acc = ReduceOp<Kind>()(acc, partials[output * segments + i]);
    y[output] = finishReduce<T, Kind>(acc, count);
  }
};

} // namespace detail

/// reduce<T, Kind>(x, dims, axesMask, y, stream): Kind over the dimensions
/// whose bit is set in axesMask; reduceSum, reduceMean and reduceMax, the
/// entry points of Library.def, call it with their axes' mask.
template <typename T, ReduceKind Kind>
void reduce(const T *x, const Dims &dims, uint64_t axesMask, T *y,
            cudaStream_t stream) {
  int64_t strides[8];
  contiguousStrides(dims, strides);
  detail::ReducePlan p{};
  for (int64_t i = 0; i < dims.rank; ++i) {
    if (axesMask >> i & 1) {
      p.reducedStrides[p.reducedRank] = strides[i];
      p.reduced[p.reducedRank++] = dims.d[i];
    } else {
      p.keptStrides[p.keptRank] = strides[i];
      p.kept[p.keptRank++] = dims.d[i];
    }
  }
  // Reduced dimensions adjacent in memory are one: the same elements in the
  // same order, with longer rows.
  int64_t merged = 0;
  for (int64_t i = 0; i < p.reducedRank; ++i) {
    if (merged > 0 &&
        p.reducedStrides[merged - 1] == p.reducedStrides[i] * p.reduced[i]) {
      p.reduced[merged - 1] *= p.reduced[i];
      p.reducedStrides[merged - 1] = p.reducedStrides[i];
      continue;
    }
    p.reduced[merged] = p.reduced[i];
    p.reducedStrides[merged++] = p.reducedStrides[i];
  }
  p.reducedRank = merged;
  int64_t outputs = 1;
  for (int64_t i = 0; i < p.keptRank; ++i)
    outputs *= p.kept[i];
  p.count = 1;
  for (int64_t i = 0; i < p.reducedRank; ++i)
    p.count *= p.reduced[i];
  using Acc = detail::ReduceAcc<T, Kind>;
  Acc identity = Kind == ReduceKind::Max ? detail::lowestValue<Acc>() : Acc(0);
  // Up to a block's worth of elements per output: one thread each.
  if (p.count <= detail::kThreads) {
    detail::launchElements(
        outputs, detail::ReduceElementBody<T, Kind>{x, y, p, identity}, stream,
        "reduce");
    return;
  }
  // Longer ones: a block per segment, with enough segments that the blocks
  // fill the device (BatchNorm's statistics reduce N*H*W elements into each
  // of a few dozen channels) and each still reads kSegmentElements or more.
  constexpr int64_t kBlocks = 1024, kSegmentElements = 4096;
  p.inner = p.reduced[p.reducedRank - 1];
  p.innerStride = p.reducedStrides[p.reducedRank - 1];
  p.outerCount = p.count / p.inner;
  p.splitInner = p.outerCount == 1;
  int64_t segments = (kBlocks + outputs - 1) / outputs;
  int64_t most = (p.count + kSegmentElements - 1) / kSegmentElements;
  segments = segments < most ? segments : most;
  if (!p.splitInner && segments > p.outerCount)
    segments = p.outerCount;
  p.segments = segments < 1 ? 1 : segments;
  Acc *partials = nullptr;
  if (p.segments > 1) {
    partials =
        detail::allocateScratch<Acc>(outputs * p.segments, stream, "reduce");
    if (!partials)
      return;
  }
  detail::launchRows(
      outputs * p.segments, p.splitInner ? p.inner / p.segments : p.inner,
      detail::ReduceRowBody<T, Kind>{x, y, partials, p, identity}, stream,
      "reduce");
  if (partials) {
    detail::launchElements(
        outputs,
        detail::ReduceCombineBody<T, Kind>{partials, y, p.segments, p.count},
        stream, "reduce");
    detail::freeScratch(partials, stream, "reduce");
  }
}

template <typename T>
void reduceSum(const T *x, const Dims &dims, T *y, const Dims &,
               const ReduceParams &params, cudaStream_t stream) {
  reduce<T, ReduceKind::Sum>(x, dims, detail::axesMask(params.axes), y, stream);
}

template <typename T>
void reduceMean(const T *x, const Dims &dims, T *y, const Dims &,
                const ReduceParams &params, cudaStream_t stream) {
  reduce<T, ReduceKind::Mean>(x, dims, detail::axesMask(params.axes), y,
                              stream);
}

template <typename T>
void reduceMax(const T *x, const Dims &dims, T *y, const Dims &,
               const ReduceParams &params, cudaStream_t stream) {
  reduce<T, ReduceKind::Max>(x, dims, detail::axesMask(params.axes), y, stream);
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_REDUCE_CUH
