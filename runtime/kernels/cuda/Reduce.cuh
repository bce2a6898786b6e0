//===- Reduce.cuh - reductions over axes on CUDA ----------------*- C++ -*-===//
//
// reduce<T, Kind> and its entry points reduceSum, reduceMean and reduceMax:
// one thread per output for short reductions, thread blocks over segments of
// long ones, or, over leading dimensions, a thread per output and segment
// of rows; segments are combined in order (by a block each output when
// there are many). reduceGroups runs the fused
// reductions the compiler writes (kernel.reduce) the same ways.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_REDUCE_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_REDUCE_CUH

#include "Common.cuh"
#include "Scratch.h"

#include "../Dims.h"
#include "../Library.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

namespace ztc::cuda {

/// What `reduce` computes over the reduced dimensions.
enum class ReduceKind { Sum, Mean, Max };

namespace detail {

static_assert(kReduceThreadElements == kThreads,
              "a short reduction takes one thread per output, up to a block");

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

/// One output and segment of rows of a reduction over leading dimensions
/// (ReducePlan::columns): its rows in order, `outputs` apart, so a warp's
/// threads read neighbouring elements. With one segment it writes the
/// output, else its partial result (ReduceCombineBody finishes).
template <typename T, ReduceKind Kind> struct ReduceColumnBody {
  const T *x;
  T *y;
  ReduceAcc<T, Kind> *partials;
  int64_t outputs, count, segments;
  ReduceAcc<T, Kind> identity;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ReduceAcc<T, Kind>;
    int64_t segment = flat / outputs, output = flat % outputs;
    int64_t first = count * segment / segments;
    int64_t last = count * (segment + 1) / segments;
    Acc acc = identity;
    for (int64_t row = first; row < last; ++row)
      acc = ReduceOp<Kind>()(acc,
                             static_cast<Acc>(load(x[row * outputs + output])));
    if (segments == 1)
      y[output] = finishReduce<T, Kind>(acc, count);
    else
      partials[output * segments + segment] = acc;
  }
};

/// An output's segments combined by a block (reduce's second pass when
/// there are more than a block's threads of them: NHWC statistics at a
/// large batch split each channel into thousands): the threads take the
/// segments in turn and combine theirs in a fixed tree.
template <typename T, ReduceKind Kind> struct ReduceCombineRowBody {
  const ReduceAcc<T, Kind> *partials;
  T *y;
  int64_t segments, count;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t output, const Team &team) const {
    const ReduceAcc<T, Kind> *mine = partials + output * segments;
    ReduceAcc<T, Kind> acc = mine[team.rank()];
    for (int64_t i = team.rank() + team.size(); i < segments; i += team.size())
      acc = ReduceOp<Kind>()(acc, mine[i]);
    acc = team.reduce(acc, ReduceOp<Kind>());
    if (team.rank() == 0)
      y[output] = finishReduce<T, Kind>(acc, count);
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

/// The sums of a fused reduction's N outputs: what its terms give and
/// its threads accumulate.
template <typename A, int N> struct Sums {
  A v[N];
  ZTC_HOST_DEVICE Sums &operator+=(const Sums &other) {
    for (int j = 0; j < N; ++j)
      v[j] += other.v[j];
    return *this;
  }
};

/// Where a fused reduction's N outputs go.
template <typename T, int N> struct GroupOutputs {
  T *y[N];
  /// Output k of each, from its sum over `count` terms.
  template <ReduceKind Kind, typename A>
  ZTC_HOST_DEVICE void write(int64_t k, const Sums<A, N> &sums,
                             int64_t count) const {
    for (int j = 0; j < N; ++j)
      y[j][k] = detail::finishReduce<T, Kind>(sums.v[j], count);
  }
};

namespace detail {

/// The sums of a block's threads added in a fixed tree, each output's
/// on its own.
template <typename Team, typename A, int N>
ZTC_HOST_DEVICE Sums<A, N> teamSum(const Team &team, Sums<A, N> sums) {
  for (int j = 0; j < N; ++j)
    sums.v[j] = team.reduce(sums.v[j], SumOp());
  return sums;
}

/// A fused reduction's output per thread (GroupReducePlan::perThread): its
/// terms in order.
template <ReduceKind Kind, typename Terms, typename Acc, typename Outputs>
struct GroupElementBody {
  Terms terms;
  Outputs y;
  int64_t count;
  ZTC_HOST_DEVICE void operator()(int64_t k) const {
    Acc acc{};
    for (int64_t r = 0; r < count; ++r)
      acc += terms(r, k);
    y.template write<Kind>(k, acc, count);
  }
};

/// One output and segment of rows of a fused reduction without an inner
/// group (GroupReducePlan::columns): neighbouring threads take neighbouring
/// outputs.
template <ReduceKind Kind, typename Terms, typename Acc, typename Outputs>
struct GroupColumnBody {
  Terms terms;
  Outputs y;
  Acc *partials;
  int64_t kept, count, segments;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t segment = flat / kept, k = flat % kept;
    int64_t first = count * segment / segments;
    int64_t last = count * (segment + 1) / segments;
    Acc acc{};
    for (int64_t r = first; r < last; ++r)
      acc += terms(r, k);
    if (segments == 1)
      y.template write<Kind>(k, acc, count);
    else
      partials[k * segments + segment] = acc;
  }
};

/// One segment of one output of a fused reduction per block: the block's
/// threads take its terms in turn and add their sums in a fixed tree.
template <ReduceKind Kind, typename Terms, typename Acc, typename Outputs>
struct GroupRowBody {
  Terms terms;
  Outputs y;
  Acc *partials;
  int64_t count, segments;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t block, const Team &team) const {
    int64_t k = block / segments, segment = block % segments;
    int64_t first = count * segment / segments;
    int64_t last = count * (segment + 1) / segments;
    Acc acc{};
    for (int64_t r = first + team.rank(); r < last; r += team.size())
      acc += terms(r, k);
    acc = teamSum(team, acc);
    if (team.rank() != 0)
      return;
    if (segments == 1)
      y.template write<Kind>(k, acc, count);
    else
      partials[block] = acc;
  }
};

/// An output's segments added in order (reduceGroups' second pass).
template <ReduceKind Kind, typename Acc, typename Outputs>
struct GroupCombineBody {
  const Acc *partials;
  Outputs y;
  int64_t segments, count;
  ZTC_HOST_DEVICE void operator()(int64_t k) const {
    Acc acc = partials[k * segments];
    for (int64_t i = 1; i < segments; ++i)
      acc += partials[k * segments + i];
    y.template write<Kind>(k, acc, count);
  }
};

/// An output's segments added by a block (reduceGroups' second pass when
/// there are more than a block's threads of them), as ReduceCombineRowBody.
template <ReduceKind Kind, typename Acc, typename Outputs>
struct GroupCombineRowBody {
  const Acc *partials;
  Outputs y;
  int64_t segments, count;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t k, const Team &team) const {
    const Acc *mine = partials + k * segments;
    Acc acc = mine[team.rank()];
    for (int64_t i = team.rank() + team.size(); i < segments; i += team.size())
      acc += mine[i];
    acc = teamSum(team, acc);
    if (team.rank() == 0)
      y.template write<Kind>(k, acc, count);
  }
};

} // namespace detail

/// reduceGroups<Kind>(terms, p, y, scratch, stream): a fused reduction
/// (kernel.reduce; Kind Sum or Mean) into the N outputs y[j][0, p.kept).
/// `terms` is a function object whose ZTC_HOST_DEVICE
/// `Sums<A, N> operator()(int64_t r, int64_t k)` gives term r of output k
/// of each (GroupReducePlan); they accumulate in A, each output's always in
/// the same order. The segments' partial sums go to `scratch`
/// (scratch::groupReducePartialsBytes).
template <ReduceKind Kind, typename Terms, typename T, int N>
void reduceGroups(const Terms &terms, const detail::GroupReducePlan &p,
                  const GroupOutputs<T, N> &y, const Scratch &scratch,
                  cudaStream_t stream) {
  static_assert(Kind != ReduceKind::Max, "fused reductions sum");
  using Acc = decltype(terms(int64_t(0), int64_t(0)));
  using Outputs = GroupOutputs<T, N>;
  constexpr const char *kName = "reduce (fused)";
  if (p.perThread) {
    detail::launchElements(
        p.kept,
        detail::GroupElementBody<Kind, Terms, Acc, Outputs>{terms, y, p.count},
        stream, kName);
    return;
  }
  Acc *partials = nullptr;
  if (p.segments > 1) {
    partials = detail::scratchPart<Acc>(
        scratch, 0, scratch::groupReducePartialsBytes(p, sizeof(Acc)), kName);
    if (!partials)
      return;
  }
  if (p.columns)
    detail::launchElements(p.kept * p.segments,
                           detail::GroupColumnBody<Kind, Terms, Acc, Outputs>{
                               terms, y, partials, p.kept, p.count, p.segments},
                           stream, kName);
  else
    detail::launchRows(p.kept * p.segments, p.count / p.segments,
                       detail::GroupRowBody<Kind, Terms, Acc, Outputs>{
                           terms, y, partials, p.count, p.segments},
                       stream, kName);
  if (partials && p.segments > detail::kThreads)
    detail::launchRows(p.kept, p.segments,
                       detail::GroupCombineRowBody<Kind, Acc, Outputs>{
                           partials, y, p.segments, p.count},
                       stream, kName);
  else if (partials)
    detail::launchElements(p.kept,
                           detail::GroupCombineBody<Kind, Acc, Outputs>{
                               partials, y, p.segments, p.count},
                           stream, kName);
}

/// reduce<T, Kind>(x, dims, axesMask, y, scratch, stream): Kind over the
/// dimensions whose bit is set in axesMask; reduceSum, reduceMean and
/// reduceMax, the entry points of Library.def, call it with their axes'
/// mask. Long reductions keep their partial results in `scratch`
/// (Scratch.h's reducePartialsBytes).
template <typename T, ReduceKind Kind>
void reduce(const T *x, const Dims &dims, uint64_t axesMask, T *y,
            const Scratch &scratch, cudaStream_t stream) {
  detail::ReducePlan p = detail::reducePlan(dims, axesMask);
  using Acc = detail::ReduceAcc<T, Kind>;
  Acc identity = Kind == ReduceKind::Max ? detail::lowestValue<Acc>() : Acc(0);
  if (p.perThread()) {
    detail::launchElements(
        p.outputs, detail::ReduceElementBody<T, Kind>{x, y, p, identity},
        stream, "reduce");
    return;
  }
  Acc *partials = nullptr;
  if (p.segments > 1) {
    partials = detail::scratchPart<Acc>(
        scratch, 0, scratch::reducePartialsBytes<Acc>(p), "reduce");
    if (!partials)
      return;
  }
  if (p.columns)
    detail::launchElements(
        p.outputs * p.segments,
        detail::ReduceColumnBody<T, Kind>{x, y, partials, p.outputs, p.count,
                                          p.segments, identity},
        stream, "reduce");
  else
    detail::launchRows(
        p.outputs * p.segments, p.splitInner ? p.inner / p.segments : p.inner,
        detail::ReduceRowBody<T, Kind>{x, y, partials, p, identity}, stream,
        "reduce");
  if (partials && p.segments > detail::kThreads)
    detail::launchRows(
        p.outputs, p.segments,
        detail::ReduceCombineRowBody<T, Kind>{partials, y, p.segments, p.count},
        stream, "reduce");
  else if (partials)
    detail::launchElements(
        p.outputs,
        detail::ReduceCombineBody<T, Kind>{partials, y, p.segments, p.count},
        stream, "reduce");
}

template <typename T>
void reduceSum(const T *x, const Dims &dims, T *y, const Dims &,
               const ReduceParams &params, const Scratch &scratch,
               cudaStream_t stream) {
  reduce<T, ReduceKind::Sum>(x, dims, detail::axesMask(params.axes), y, scratch,
                             stream);
}

template <typename T>
void reduceMean(const T *x, const Dims &dims, T *y, const Dims &,
                const ReduceParams &params, const Scratch &scratch,
                cudaStream_t stream) {
  reduce<T, ReduceKind::Mean>(x, dims, detail::axesMask(params.axes), y,
                              scratch, stream);
}

template <typename T>
void reduceMax(const T *x, const Dims &dims, T *y, const Dims &,
               const ReduceParams &params, const Scratch &scratch,
               cudaStream_t stream) {
  reduce<T, ReduceKind::Max>(x, dims, detail::axesMask(params.axes), y, scratch,
                             stream);
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_REDUCE_CUH
