//===- LinearCrossEntropy.cuh - the fused loss on CUDA ----------*- C++ -*-===//
//
// linearCrossEntropy and its gradient on CUDA, in the chunks of rows
// LinearCrossEntropy.h fixes: per chunk, one product (cuBLAS) writes the
// chunk's logits into the call's planned scratch (Scratch.h), a block per
// row reduces them to the row's loss; the gradient also turns the chunk
// into the logits' gradient in place and takes the gradients of x and w
// from it with two more products, w's accumulated over the chunks, and
// gives the forward's loss too. Sums over rows run on one
// block at the end, in a fixed tree, so results do not depend on timing.
// A target out of range is reported as a data error, never read.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_LINEARCROSSENTROPY_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_LINEARCROSSENTROPY_CUH

#include "Common.cuh"
#include "Linalg.cuh"
#include "Scratch.h"

#include "../Dims.h"
#include "../Library.h"
#include "../LinearCrossEntropy.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ztc::cuda {

namespace detail {

/// Whether class `t` counts: not ignored and in range.
ZTC_HOST_DEVICE inline bool countsClass(int64_t t, int64_t classes,
                                        bool hasIgnore, int64_t ignore) {
  return !(hasIgnore && t == ignore) && t >= 0 && t < classes;
}

/// The largest logit of a row and log(sum(exp(z - largest))), by the team;
/// `lowest` is -infinity (lowestValue is host only).
template <typename T, typename Team>
ZTC_HOST_DEVICE void
logitStatistics(const T *z, int64_t classes, const Team &team,
                ComputeT<T> lowest, ComputeT<T> &largest, ComputeT<T> &logSum) {
  using Acc = ComputeT<T>;
  Acc maximum = lowest;
  for (int64_t j = team.rank(); j < classes; j += team.size())
    maximum = MaxOp()(maximum, load(z[j]));
  largest = team.reduce(maximum, MaxOp());
  Acc sum = 0;
  for (int64_t j = team.rank(); j < classes; j += team.size())
    sum += mathExp(load(z[j]) - largest);
  logSum = mathLog(team.reduce(sum, SumOp()));
}

/// Row n's loss, whether its class scores highest (a tie counts: argmax
/// would pick the first) and that it counts, from its statistics: the
/// forward and the gradient record them alike, so the gradient's loss is
/// the forward's, bit for bit.
template <typename Acc>
ZTC_HOST_DEVICE void recordRow(int64_t n, Acc largest, Acc logSum, Acc picked,
                               Acc *rowLoss, Acc *rowHit, Acc *rowCounted) {
  rowLoss[n] = largest + logSum - picked;
  rowHit[n] = picked == largest ? Acc(1) : Acc(0);
  rowCounted[n] = 1;
}

/// Row `begin + r` of a chunk: its loss, whether its class scores highest
/// and whether it counts; in the gradient (`grad` set), the row then
/// becomes, in place, g / count * (softmax(z) - onehot(t)), or 0 when it
/// does not count. Both kernels report a class out of range: an entry
/// with the gradient runs no forward (ztc-merge-cross-entropy).
template <typename T, typename I> struct CrossEntropyRowBody {
  T *logits;
  const I *target;
  /// The gradient's: the loss's gradient and the count of rows that
  /// count; null in the forward.
  const T *grad;
  const ComputeT<T> *count;
  ComputeT<T> *rowLoss, *rowHit, *rowCounted;
  int64_t begin, classes, ignore;
  bool hasIgnore;
  ComputeT<T> lowest;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t r, const Team &team) const {
    using Acc = ComputeT<T>;
    int64_t n = begin + r;
    T *z = logits + r * classes;
    auto t = static_cast<int64_t>(target[n]);
    if (!countsClass(t, classes, hasIgnore, ignore)) {
      if (team.rank() == 0) {
        rowLoss[n] = rowHit[n] = rowCounted[n] = 0;
        if (!(hasIgnore && t == ignore))
          reportDataError(kLossTarget, t, 0, classes, hasIgnore, ignore);
      }
      if (grad)
        for (int64_t j = team.rank(); j < classes; j += team.size())
          z[j] = store<T>(Acc(0));
      return;
    }
    Acc largest, logSum;
    logitStatistics(z, classes, team, lowest, largest, logSum);
    // Every thread has read the row's logits (the reductions wait for all).
    if (team.rank() == 0)
      recordRow(n, largest, logSum, Acc(load(z[t])), rowLoss, rowHit,
                rowCounted);
    if (!grad)
      return;
    Acc shift = largest + logSum, scale = load(grad[0]) / count[0];
    for (int64_t j = team.rank(); j < classes; j += team.size()) {
      Acc value = store<T>(mathExp(load(z[j]) - shift) * scale);
      z[j] = store<T>(j == t ? value - scale : value);
    }
  }
};

/// The sums over all rows, on one block: the mean loss (NaN when no row
/// counts, as in PyTorch) and, unless `correct` is null, the rows that
/// score their class.
template <typename T> struct CrossEntropyTotalBody {
  const ComputeT<T> *rowLoss, *rowHit, *rowCounted;
  T *loss, *correct;
  int64_t rows;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t, const Team &team) const {
    using Sum = SumT<T>;
    Sum total = 0, hits = 0, count = 0;
    for (int64_t n = team.rank(); n < rows; n += team.size()) {
      total += rowLoss[n];
      hits += rowHit[n];
      count += rowCounted[n];
    }
    total = team.reduce(total, SumOp());
    hits = team.reduce(hits, SumOp());
    count = team.reduce(count, SumOp());
    if (team.rank() != 0)
      return;
    loss[0] = store<T>(total / count);
    if (correct)
      correct[0] = store<T>(hits);
  }
};

/// The gradient's count of rows that count, on one block.
template <typename T, typename I> struct CountedRowsBody {
  const I *target;
  ComputeT<T> *count;
  int64_t rows, classes, ignore;
  bool hasIgnore;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t, const Team &team) const {
    ComputeT<T> counted = 0;
    for (int64_t n = team.rank(); n < rows; n += team.size())
      counted += countsClass(static_cast<int64_t>(target[n]), classes,
                             hasIgnore, ignore)
                     ? 1
                     : 0;
    counted = team.reduce(counted, SumOp());
    if (team.rank() == 0)
      count[0] = counted;
  }
};

/// y[i] = 0.
template <typename T> struct ZeroBody {
  T *y;
  ZTC_HOST_DEVICE void operator()(int64_t i) const { y[i] = store<T>(0.0); }
};

} // namespace detail

template <typename T, typename I>
void linearCrossEntropy(const T *x, const Dims &xDims, const T *w,
                        const Dims &wDims, const I *target, const Dims &,
                        T *loss, const Dims &, T *correct, const Dims &,
                        const LinearCrossEntropyParams &params,
                        const Scratch &scratch, cudaStream_t stream) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "nn.linear_cross_entropy is f32 or f64");
  using Acc = detail::ComputeT<T>;
  LinearCrossEntropyShape s(xDims, wDims, params);
  const char *kernel = "linearCrossEntropy";
  if (s.rows == 0) {
    // No row counts: NaN and 0, as the sums of nothing give.
    detail::launchRows(1, 32,
                       detail::CrossEntropyTotalBody<T>{
                           nullptr, nullptr, nullptr, loss, correct, 0},
                       stream, kernel);
    return;
  }
  int64_t chunk = s.chunkRows(scratch::kLinearCrossEntropyFloorRows);
  int64_t logitsBytes = scratch::linearCrossEntropyLogitsBytes<T>(s);
  int64_t statsBytes = 3 * s.rows * int64_t(sizeof(Acc));
  T *logits = detail::scratchPart<T>(scratch, 0, logitsBytes, kernel);
  Acc *stats =
      detail::scratchPart<Acc>(scratch, logitsBytes, statsBytes, kernel);
  if (!logits || !stats)
    return;
  Acc *rowLoss = stats, *rowHit = stats + s.rows, *rowCounted = rowHit + s.rows;
  for (int64_t begin = 0; begin < s.rows; begin += chunk) {
    int64_t rows = s.rows - begin < chunk ? s.rows - begin : chunk;
    detail::GemmShape product{
        1,         rows, s.classes, s.width, s.width, s.weightStride(),
        s.classes, 0,    0,         0};
    product.transB = s.transposed;
    detail::gemm(x + begin * s.width, w, logits, product, false, stream,
                 kernel);
    detail::launchRows(
        rows, s.classes,
        detail::CrossEntropyRowBody<T, I>{
            logits, target, nullptr, nullptr, rowLoss, rowHit, rowCounted,
            begin, s.classes, params.ignore_index.value,
            params.ignore_index.present, numeric::lowestValue<Acc>()},
        stream, kernel);
  }
  detail::launchRows(1, s.rows,
                     detail::CrossEntropyTotalBody<T>{
                         rowLoss, rowHit, rowCounted, loss, correct, s.rows},
                     stream, kernel);
}

template <typename T, typename I>
void linearCrossEntropyBackward(const T *x, const Dims &xDims, const T *w,
                                const Dims &wDims, const I *target,
                                const Dims &, const T *grad, const Dims &,
                                T *gradX, const Dims &, T *gradW, const Dims &,
                                T *loss, const Dims &,
                                const LinearCrossEntropyParams &params,
                                const Scratch &scratch, cudaStream_t stream) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "nn.linear_cross_entropy is f32 or f64");
  using Acc = detail::ComputeT<T>;
  LinearCrossEntropyShape s(xDims, wDims, params);
  const char *kernel = "linearCrossEntropyBackward";
  if (s.rows == 0) {
    detail::launchElements(s.width * s.classes, detail::ZeroBody<T>{gradW},
                           stream, kernel);
    detail::launchRows(1, 32,
                       detail::CrossEntropyTotalBody<T>{
                           nullptr, nullptr, nullptr, loss, nullptr, 0},
                       stream, kernel);
    return;
  }
  int64_t chunk = s.chunkRows(scratch::kLinearCrossEntropyFloorRows);
  int64_t logitsBytes = scratch::linearCrossEntropyLogitsBytes<T>(s);
  int64_t statsBytes = (3 * s.rows + 1) * int64_t(sizeof(Acc));
  T *dz = detail::scratchPart<T>(scratch, 0, logitsBytes, kernel);
  Acc *stats =
      detail::scratchPart<Acc>(scratch, logitsBytes, statsBytes, kernel);
  if (!dz || !stats)
    return;
  Acc *rowLoss = stats, *rowHit = stats + s.rows, *rowCounted = rowHit + s.rows;
  Acc *count = rowCounted + s.rows;
  const int64_t ignore = params.ignore_index.value;
  const bool hasIgnore = params.ignore_index.present;
  detail::launchRows(1, s.rows,
                     detail::CountedRowsBody<T, I>{
                         target, count, s.rows, s.classes, ignore, hasIgnore},
                     stream, kernel);
  for (int64_t begin = 0; begin < s.rows; begin += chunk) {
    int64_t rows = s.rows - begin < chunk ? s.rows - begin : chunk;
    const T *xChunk = x + begin * s.width;
    detail::GemmShape logitsProduct{
        1,         rows, s.classes, s.width, s.width, s.weightStride(),
        s.classes, 0,    0,         0};
    logitsProduct.transB = s.transposed;
    detail::gemm(xChunk, w, dz, logitsProduct, false, stream, kernel);
    detail::launchRows(rows, s.classes,
                       detail::CrossEntropyRowBody<T, I>{
                           dz, target, grad, count, rowLoss, rowHit, rowCounted,
                           begin, s.classes, ignore, hasIgnore,
                           numeric::lowestValue<Acc>()},
                       stream, kernel);
    // dx = dz w as [V, D].
    detail::GemmShape dx{
        1,       rows, s.width, s.classes, s.classes, s.weightStride(),
        s.width, 0,    0,       0};
    dx.transB = !s.transposed;
    detail::gemm<T>(dz, w, gradX + begin * s.width, dx, false, stream, kernel);
    // dw (+)= dzᵀ x ([V, D]) or xᵀ dz ([D, V]).
    if (s.transposed) {
      detail::GemmShape dw{1,       s.classes, s.width, rows, s.classes,
                           s.width, s.width,   0,       0,    0};
      dw.transA = true;
      detail::gemm<T>(dz, xChunk, gradW, dw, begin > 0, stream, kernel);
    } else {
      detail::GemmShape dw{1,         s.width,   s.classes, rows, s.width,
                           s.classes, s.classes, 0,         0,    0};
      dw.transA = true;
      detail::gemm<T>(xChunk, dz, gradW, dw, begin > 0, stream, kernel);
    }
  }
  detail::launchRows(1, s.rows,
                     detail::CrossEntropyTotalBody<T>{
                         rowLoss, rowHit, rowCounted, loss, nullptr, s.rows},
                     stream, kernel);
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_LINEARCROSSENTROPY_CUH
