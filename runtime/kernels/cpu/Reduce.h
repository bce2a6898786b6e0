//===- Reduce.h - reductions over axes on the CPU ---------------*- C++ -*-===//
//
// reduce<T, Kind> and its entry points reduceSum, reduceMean and reduceMax,
// with the block sizes the generated kernel.reduce loops use as well
// (detail::kReduceBlock, reduceChunks and reduceBlockWidth).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_REDUCE_H
#define ZTC_RUNTIME_KERNELS_CPU_REDUCE_H

#include "Common.h"

#include "../Dims.h"
#include "../Library.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace ztc::cpu {

/// What `reduce` computes over the reduced dimensions.
enum class ReduceKind { Sum, Mean, Max };

namespace detail {

/// The widest block of outputs a reduction over leading dimensions sums at
/// once (reduce, and the generated kernel.reduce loops).
constexpr int64_t kReduceBlock = 256;

/// A reduction over leading dimensions of at most kReduceBlock outputs
/// sums its `rows` in this many chunks at most, each row by row, then adds
/// the chunks' sums in order: threads take chunks, and the order depends on
/// the shape alone.
constexpr int64_t kReduceChunks = 16;
constexpr int64_t reduceChunks(int64_t rows) {
  return rows < kReduceChunks ? rows : kReduceChunks;
}

/// The width of those blocks for `outputs` outputs: at most kReduceBlock,
/// narrower when that would leave a thread without a block (a bias
/// gradient of 256). The width changes no output's order of terms.
inline int64_t reduceBlockWidth(int64_t outputs, bool parallel) {
  int64_t threads = 1;
#ifdef _OPENMP
  if (parallel)
    threads = omp_get_max_threads();
#endif
  int64_t perThread = (outputs + threads - 1) / threads;
  return std::clamp<int64_t>((perThread + 15) / 16 * 16, 16, kReduceBlock);
}

} // namespace detail

template <typename T, ReduceKind Kind>
void reduce(const T *x, const Dims &dims, uint64_t axesMask, T *y) {
  using Acc = std::conditional_t<Kind == ReduceKind::Max, detail::ComputeT<T>,
                                 detail::SumT<T>>;
  int64_t strides[8];
  contiguousStrides(dims, strides);
  Dims kept, reduced;
  int64_t keptStrides[8], reducedStrides[8];
  for (int64_t i = 0; i < dims.rank; ++i) {
    if (axesMask >> i & 1) {
      reducedStrides[reduced.rank] = strides[i];
      reduced.d[reduced.rank++] = dims.d[i];
    } else {
      keptStrides[kept.rank] = strides[i];
      kept.d[kept.rank++] = dims.d[i];
    }
  }
  int64_t outputs = kept.numElements(), count = reduced.numElements();
  auto combine = [](Acc &acc, Acc value) {
    if constexpr (Kind == ReduceKind::Max) {
      if (value > acc || detail::isNan(value))
        acc = value;
    } else {
      acc += value;
    }
  };
  auto finish = [&](Acc acc) {
    if constexpr (Kind == ReduceKind::Mean)
      if (count > 0)
        acc = acc / static_cast<Acc>(count);
    return detail::store<T>(acc);
  };
  // Leading axes reduced (bias and normalization gradients, statistics of
  // NHWC data: [rows, inner] summed over rows), reading memory in order.
  uint64_t leading = (uint64_t(1) << reduced.rank) - 1;
  if (reduced.rank > 0 && kept.rank > 0 && axesMask == leading) {
    bool parallel = outputs * count > detail::kParallelGrain;
    Acc init = Kind == ReduceKind::Max ? detail::lowestValue<Acc>() : Acc(0);
    if (outputs <= detail::kReduceBlock) {
      // Few outputs (channels of NHWC data): the rows in chunks, each
      // summed row by row across the outputs' vector lanes, then the
      // chunks' sums in chunk order.
      int64_t chunks = detail::reduceChunks(count);
      Acc partial[detail::kReduceChunks][detail::kReduceBlock];
#pragma omp parallel for if (parallel)
      for (int64_t c = 0; c < chunks; ++c) {
        Acc *acc = partial[c];
        for (int64_t j = 0; j < outputs; ++j)
          acc[j] = init;
        for (int64_t r = count * c / chunks; r < count * (c + 1) / chunks;
             ++r) {
          const T *row = x + r * outputs;
#pragma omp simd
          for (int64_t j = 0; j < outputs; ++j)
            combine(acc[j], static_cast<Acc>(detail::load(row[j])));
        }
      }
      for (int64_t j = 0; j < outputs; ++j) {
        Acc total = chunks > 0 ? partial[0][j] : init;
        for (int64_t c = 1; c < chunks; ++c)
          combine(total, partial[c][j]);
        y[j] = finish(total);
      }
      return;
    }
    int64_t blockWidth = detail::reduceBlockWidth(outputs, parallel);
    int64_t blocks = (outputs + blockWidth - 1) / blockWidth;
#pragma omp parallel for if (parallel)
    for (int64_t block = 0; block < blocks; ++block) {
      int64_t begin = block * blockWidth;
      int64_t width = std::min(blockWidth, outputs - begin);
      Acc acc[detail::kReduceBlock];
      for (int64_t j = 0; j < width; ++j)
        acc[j] = init;
      for (int64_t r = 0; r < count; ++r) {
        const T *row = x + r * outputs + begin;
#pragma omp simd
        for (int64_t j = 0; j < width; ++j)
          combine(acc[j], static_cast<Acc>(detail::load(row[j])));
      }
      for (int64_t j = 0; j < width; ++j)
        y[begin + j] = finish(acc[j]);
    }
    return;
  }
  // A sum over the innermost dimensions, when they are contiguous in memory
  // (normalization statistics: [rows, C] over C, [N, C, H, W] over H and
  // W), adds whole runs: each run is summed in vector lanes, then added to
  // the output's total. The order is fixed by the code, not by the threads.
  int64_t run = 1, runDims = reduced.rank;
  if constexpr (Kind != ReduceKind::Max)
    while (runDims > 0 && reducedStrides[runDims - 1] == run)
      run *= reduced.d[--runDims];
  int64_t runs = run > 0 ? count / run : 0;
#pragma omp parallel for if (outputs * count > detail::kParallelGrain)
  for (int64_t o = 0; o < outputs; ++o) {
    int64_t base = 0, rest = o;
    for (int64_t i = kept.rank - 1; i >= 0; --i) {
      base += (rest % kept.d[i]) * keptStrides[i];
      rest /= kept.d[i];
    }
    Acc acc = Kind == ReduceKind::Max ? detail::lowestValue<Acc>() : Acc(0);
    int64_t index[8] = {0};
    int64_t offset = base;
    for (int64_t step = 0; step < runs; ++step) {
      if (run == 1) {
        combine(acc, static_cast<Acc>(detail::load(x[offset])));
      } else {
        Acc sum = 0;
        const T *from = x + offset;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < run; ++j)
          sum += static_cast<Acc>(detail::load(from[j]));
        acc += sum;
      }
      // Odometer over the other reduced dimensions, innermost first.
      for (int64_t i = runDims - 1; i >= 0; --i) {
        offset += reducedStrides[i];
        if (++index[i] < reduced.d[i])
          break;
        offset -= index[i] * reducedStrides[i];
        index[i] = 0;
      }
    }
    y[o] = finish(acc);
  }
}

namespace detail {
/// The bit mask of a reduction's axes (bit i: dimension i is reduced).
inline uint64_t axesMask(const Ints &axes) {
  uint64_t mask = 0;
  for (int64_t axis : axes)
    mask |= uint64_t(1) << axis;
  return mask;
}
} // namespace detail

template <typename T>
void reduceSum(const T *x, const Dims &dims, T *y, const Dims &,
               const ReduceParams &params) {
  reduce<T, ReduceKind::Sum>(x, dims, detail::axesMask(params.axes), y);
}

template <typename T>
void reduceMean(const T *x, const Dims &dims, T *y, const Dims &,
                const ReduceParams &params) {
  reduce<T, ReduceKind::Mean>(x, dims, detail::axesMask(params.axes), y);
}

template <typename T>
void reduceMax(const T *x, const Dims &dims, T *y, const Dims &,
               const ReduceParams &params) {
  reduce<T, ReduceKind::Max>(x, dims, detail::axesMask(params.axes), y);
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_REDUCE_H
