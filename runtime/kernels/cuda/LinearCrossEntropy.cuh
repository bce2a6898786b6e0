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
// x and w are f32, f64, f16 or bf16, the loss ComputeT (as the CPU's,
// cpu/LinearCrossEntropy.h): a half chunk holds the logits rounded to the
// half type, each row's gradient is rounded once, and dw's product writes
// f32 sums into the scratch (cuBLAS with f32 output), rounded once at the
// end.
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
  const ComputeT<T> *grad;
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
    // Rounded once: the target's entry subtracts before it is stored.
    Acc shift = largest + logSum, scale = grad[0] / count[0];
    for (int64_t j = team.rank(); j < classes; j += team.size()) {
      Acc value = mathExp(load(z[j]) - shift) * scale;
      z[j] = store<T>(j == t ? value - scale : value);
    }
  }
};

/// The sums over all rows, on one block: the mean loss (NaN when no row
/// counts, as in PyTorch) and, unless `correct` is null, the rows that
/// score their class; Acc is the compute type.
template <typename Acc> struct CrossEntropyTotalBody {
  const Acc *rowLoss, *rowHit, *rowCounted;
  Acc *loss, *correct;
  int64_t rows;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t, const Team &team) const {
    using Sum = SumT<Acc>;
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
    loss[0] = static_cast<Acc>(total / count);
    if (correct)
      correct[0] = static_cast<Acc>(hits);
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

/// y[i] = x[i] rounded to T: a half dw from its f32 sums.
template <typename T> struct RoundBody {
  const float *x;
  T *y;
  ZTC_HOST_DEVICE void operator()(int64_t i) const { y[i] = store<T>(x[i]); }
};

/// The scratch of a call (scratch::LinearCrossEntropyLayout) as pointers;
/// all null (an error recorded) when the plan gave less.
template <typename T> struct CrossEntropyScratch {
  using Acc = ComputeT<T>;
  T *logits = nullptr;
  Acc *rowLoss = nullptr, *rowHit = nullptr, *rowCounted = nullptr,
      *count = nullptr;
  float *dwSums = nullptr;

  CrossEntropyScratch(const Scratch &scratch, const LinearCrossEntropyShape &s,
                      scratch::LinearCrossEntropyWork work,
                      const char *kernel) {
    bool gradient = work != scratch::LinearCrossEntropyWork::Loss;
    scratch::LinearCrossEntropyLayout<T> layout(s, work);
    T *chunk = scratchPart<T>(scratch, 0, layout.logitsBytes, kernel);
    Acc *stats = scratchPart<Acc>(scratch, layout.statsOffset,
                                  layout.statsBytes, kernel);
    float *sums = layout.sumsBytes
                      ? scratchPart<float>(scratch, layout.sumsOffset,
                                           layout.sumsBytes, kernel)
                      : nullptr;
    if (!chunk || !stats || (layout.sumsBytes && !sums))
      return;
    logits = chunk;
    rowLoss = stats;
    rowHit = stats + s.rows;
    rowCounted = rowHit + s.rows;
    count = gradient ? rowCounted + s.rows : nullptr;
    dwSums = sums;
  }
  explicit operator bool() const { return logits != nullptr; }
};

/// The row pass over `work`'s chunk, for the gradient when `grad` is set;
/// crossEntropyChunk sets its first row.
template <typename T, typename I>
CrossEntropyRowBody<T, I>
crossEntropyRows(const CrossEntropyScratch<T> &work, const I *target,
                 const ComputeT<T> *grad, const LinearCrossEntropyShape &s,
                 const LinearCrossEntropyParams &params) {
  return {work.logits,
          target,
          grad,
          work.count,
          work.rowLoss,
          work.rowHit,
          work.rowCounted,
          0,
          s.classes,
          params.ignore_index.value,
          params.ignore_index.present,
          numeric::lowestValue<ComputeT<T>>()};
}

/// The first half of both kernels' chunk: rows [begin, begin + rows) of x
/// times w into the chunk's logits, then `body` over each row.
template <typename T, typename I>
void crossEntropyChunk(const T *x, const T *w, const LinearCrossEntropyShape &s,
                       int64_t begin, int64_t rows,
                       CrossEntropyRowBody<T, I> body, cudaStream_t stream,
                       const char *kernel) {
  GemmShape product{
      1,         rows, s.classes, s.width, s.width, s.weightStride(),
      s.classes, 0,    0,         0};
  product.transB = s.transposed;
  gemm(x + begin * s.width, w, body.logits, product, false, stream, kernel);
  body.begin = begin;
  launchRows(rows, s.classes, body, stream, kernel);
}

} // namespace detail

template <typename T, typename I>
void linearCrossEntropy(const T *x, const Dims &xDims, const T *w,
                        const Dims &wDims, const I *target, const Dims &,
                        detail::ComputeT<T> *loss, const Dims &,
                        detail::ComputeT<T> *correct, const Dims &,
                        const LinearCrossEntropyParams &params,
                        const Scratch &scratch, cudaStream_t stream) {
  using Acc = detail::ComputeT<T>;
  LinearCrossEntropyShape s(xDims, wDims, params);
  const char *kernel = "linearCrossEntropy";
  if (s.rows == 0) {
    // No row counts: NaN and 0, as the sums of nothing give.
    detail::launchRows(1, 32,
                       detail::CrossEntropyTotalBody<Acc>{
                           nullptr, nullptr, nullptr, loss, correct, 0},
                       stream, kernel);
    return;
  }
  detail::CrossEntropyScratch<T> work(
      scratch, s, scratch::LinearCrossEntropyWork::Loss, kernel);
  if (!work)
    return;
  auto rowBody =
      detail::crossEntropyRows<T, I>(work, target, nullptr, s, params);
  int64_t chunk = s.chunkRows(scratch::kLinearCrossEntropyFloorRows);
  for (int64_t begin = 0; begin < s.rows; begin += chunk)
    detail::crossEntropyChunk(x, w, s, begin,
                              s.rows - begin < chunk ? s.rows - begin : chunk,
                              rowBody, stream, kernel);
  detail::launchRows(
      1, s.rows,
      detail::CrossEntropyTotalBody<Acc>{
          work.rowLoss, work.rowHit, work.rowCounted, loss, correct, s.rows},
      stream, kernel);
}

namespace detail {

/// linearCrossEntropyBackward, and without w's gradient when `gradW` is
/// null (linearCrossEntropyBackwardX): the chunk's dw product is skipped,
/// and so are a half T's f32 sums.
template <typename T, typename I>
void crossEntropyGradients(const T *x, const LinearCrossEntropyShape &s,
                           const T *w, const I *target, const ComputeT<T> *grad,
                           T *gradX, T *gradW, ComputeT<T> *loss,
                           const LinearCrossEntropyParams &params,
                           const Scratch &scratch, cudaStream_t stream,
                           const char *kernel) {
  using Acc = ComputeT<T>;
  // A half dw sums the chunks in f32 (the layout's dwSums).
  constexpr bool kHalf = !std::is_same_v<T, Acc>;
  if (s.rows == 0) {
    if (gradW)
      launchElements(s.width * s.classes, ZeroBody<T>{gradW}, stream, kernel);
    launchRows(
        1, 32,
        CrossEntropyTotalBody<Acc>{nullptr, nullptr, nullptr, loss, nullptr, 0},
        stream, kernel);
    return;
  }
  CrossEntropyScratch<T> work(
      scratch, s,
      gradW ? scratch::LinearCrossEntropyWork::Gradients
            : scratch::LinearCrossEntropyWork::InputGradient,
      kernel);
  if (!work)
    return;
  launchRows(1, s.rows,
             CountedRowsBody<T, I>{target, work.count, s.rows, s.classes,
                                   params.ignore_index.value,
                                   params.ignore_index.present},
             stream, kernel);
  auto rowBody = crossEntropyRows<T, I>(work, target, grad, s, params);
  T *dz = work.logits;
  int64_t chunk = s.chunkRows(scratch::kLinearCrossEntropyFloorRows);
  for (int64_t begin = 0; begin < s.rows; begin += chunk) {
    int64_t rows = s.rows - begin < chunk ? s.rows - begin : chunk;
    const T *xChunk = x + begin * s.width;
    crossEntropyChunk(x, w, s, begin, rows, rowBody, stream, kernel);
    // dx = dz w as [V, D].
    GemmShape dx{1,       rows, s.width, s.classes, s.classes, s.weightStride(),
                 s.width, 0,    0,       0};
    dx.transB = !s.transposed;
    gemm<T>(dz, w, gradX + begin * s.width, dx, false, stream, kernel);
    if (!gradW)
      continue;
    // dw (+)= dzᵀ x ([V, D]) or xᵀ dz ([D, V]), into the f32 sums for a
    // half T.
    GemmShape dw =
        s.transposed ? GemmShape{1,       s.classes, s.width, rows, s.classes,
                                 s.width, s.width,   0,       0,    0}
                     : GemmShape{1,         s.width,   s.classes, rows, s.width,
                                 s.classes, s.classes, 0,         0,    0};
    dw.transA = true;
    const T *dwA = s.transposed ? dz : xChunk;
    const T *dwB = s.transposed ? xChunk : dz;
    if constexpr (kHalf)
      gemm<T, float>(dwA, dwB, work.dwSums, dw, begin > 0, stream, kernel);
    else
      gemm<T>(dwA, dwB, gradW, dw, begin > 0, stream, kernel);
  }
  if constexpr (kHalf)
    if (gradW)
      launchElements(s.width * s.classes, RoundBody<T>{work.dwSums, gradW},
                     stream, kernel);
  launchRows(1, s.rows,
             CrossEntropyTotalBody<Acc>{work.rowLoss, work.rowHit,
                                        work.rowCounted, loss, nullptr, s.rows},
             stream, kernel);
}

} // namespace detail

template <typename T, typename I>
void linearCrossEntropyBackward(const T *x, const Dims &xDims, const T *w,
                                const Dims &wDims, const I *target,
                                const Dims &, const detail::ComputeT<T> *grad,
                                const Dims &, T *gradX, const Dims &, T *gradW,
                                const Dims &, detail::ComputeT<T> *loss,
                                const Dims &,
                                const LinearCrossEntropyParams &params,
                                const Scratch &scratch, cudaStream_t stream) {
  detail::crossEntropyGradients(
      x, LinearCrossEntropyShape(xDims, wDims, params), w, target, grad, gradX,
      gradW, loss, params, scratch, stream, "linearCrossEntropyBackward");
}

template <typename T, typename I>
void linearCrossEntropyBackwardX(const T *x, const Dims &xDims, const T *w,
                                 const Dims &wDims, const I *target,
                                 const Dims &, const detail::ComputeT<T> *grad,
                                 const Dims &, T *gradX, const Dims &,
                                 detail::ComputeT<T> *loss, const Dims &,
                                 const LinearCrossEntropyParams &params,
                                 const Scratch &scratch, cudaStream_t stream) {
  detail::crossEntropyGradients(
      x, LinearCrossEntropyShape(xDims, wDims, params), w, target, grad, gradX,
      static_cast<T *>(nullptr), loss, params, scratch, stream,
      "linearCrossEntropyBackwardX");
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_LINEARCROSSENTROPY_CUH
