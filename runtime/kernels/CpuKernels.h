//===- CpuKernels.h - kernels the generated CPU code calls ------*- C++ -*-===//
//
// Header-only library included by the C++ that ztc emits for the CPU
// target (step.cpp). Elementwise work is emitted inline as fused loops; the
// structured operators below are called by name. Every function takes raw
// pointers into the arena (or to bound inputs/parameters) plus static shapes
// as `Dims`; shapes were verified at compile time, so kernels do not check
// them. Matrix products go to oneDNN (f32) and OpenBLAS (f64).
//
// This file must compile with only the C++17 standard library, OpenMP,
// cblas.h and oneDNN's dnnl.h: no MLIR, no ztc headers outside kernels/
// (Half.h, Numeric.h, VecMath.h, Window.h and the others beside it are part
// of this library).
// Without -fopenmp the pragmas are ignored and everything runs serially.
//
// Conventions shared by every kernel:
//  - Element types: float, double, ztc::f16, ztc::bf16, and the integer types
//    where an operator makes sense. f16/bf16 are computed in float and
//    rounded once when stored; float sums in reductions and losses
//    accumulate in double.
//  - Results are deterministic: a value is always reduced by one thread in a
//    fixed order, independent of the thread count (BLAS aside).
//  - Int64 parameter arrays (strides, pads, perm, ...) are `const int64_t *`
//    with one entry per dimension they describe; axes are non-negative.
//  - Invalid data that only shows at run time (a gather or scatter_add
//    index, a loss target out of range) never reads or writes out of
//    bounds: the element gets 0 (gather, nll_loss) or is skipped
//    (scatter_add), and the first such error since clearError() is kept in
//    an error slot ("gather: index 70 is outside [-64, 64)"), read with
//    lastError(); with several OpenMP threads finding bad data, one of them
//    wins. Nothing prints or aborts. The runtime clears the slot before
//    each call of a step and checks it after, through the C symbols
//    ztc_cpu_last_error and ztc_cpu_clear_error of the compiled step
//    (runtime/backend/CpuBackend.cpp), as it does for CudaKernels.cuh.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPUKERNELS_H
#define ZTC_RUNTIME_KERNELS_CPUKERNELS_H

#include "Blockwise8bit.h"
#include "Dims.h"
#include "Dnnl.h"
#include "Half.h"
#include "MatmulPlan.h"
#include "Nf4.h"
#include "Numeric.h"
#include "Random.h"
#include "StepAbi.h"
#include "StepError.h"
#include "TrainState.h"
#include "VecMath.h"
#include "Window.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace ztc::cpu {

/// The shape type of every kernel (runtime/kernels/Dims.h).
using Dims = ztc::Dims;

/// What `reduce` computes over the reduced dimensions.
enum class ReduceKind { Sum, Mean, Max };

// API (implemented in this header, templates over the element type T and
// the index type I where noted). Layouts are row-major and contiguous.
//
// matmul<T>(a, aDims, b, bDims, c, cDims)
//   a: [..., M, K], b: [..., K, N], c: [..., M, N]; batch dims broadcast
//   numpy-style (right-aligned; size-1 or missing dims repeat). A rank-1 a
//   is [K] -> [1, K] and a rank-1 b is [K] -> [K, 1], with the unit
//   dimension absent from c (numpy.matmul).
// conv2d<T>(x, xDims[N,C,H,W], w, wDims[O,C/g,kH,kW], bias or nullptr,
//           y, yDims[N,O,oH,oW], strides[2], pads[4] (top,left,bottom,right),
//           dilations[2], group)
// maxPool2d<T>(x, xDims, y, yDims, kernel[2], strides[2], pads[4],
//              dilations[2])                       padding never wins
// avgPool2d<T>(x, xDims, y, yDims, kernel[2], strides[2], pads[4],
//              countIncludePad)                    ONNX/PyTorch semantics,
//              incl. ceil_mode windows that run past the padded input
//   Pooling output sizes come from yDims, so ceil_mode is already in them.
//   countIncludePad divides by the full kernel size, as ONNX (reference
//   and onnxruntime) does even for a ceil_mode window that runs past the
//   padded input; PyTorch would clamp that window to the padded input, but
//   its exporter writes such pooling as Pad + AveragePool without
//   count_include_pad, where both agree. Without countIncludePad the
//   divisor is the number of input elements in the window.
// softmax<T>(x, dims, axis, y), logSoftmax<T>(x, dims, axis, y)
// layerNorm<T>(x, dims, axis, scale, bias or nullptr, epsilon, y)
//   normalizes over dims[axis:], scale/bias have shape dims[axis:]
// layerNormBackward<T>(x, dims, axis, scale, gy, epsilon, gx)
//   the gradient of layerNorm's x given gy, the gradient of its y
// batchNorm<T>(x, dims[N,C,...], scale, bias, mean, var, epsilon, y)
//   inference form with the given running statistics
// reduce<T, Kind>(x, dims, axesMask, y)  Kind: ReduceKind::Sum, Mean, Max
//   (a template argument, written explicitly: reduce<float,
//   ReduceKind::Sum>(...)); axesMask bit i set = reduce dim i; y has the
//   kept dims (keepdims is a view). Mean of integers truncates. Max
//   propagates NaN.
// transpose<T>(x, dims, perm, y)         y.dims[i] = dims[perm[i]]
// slice<T>(x, dims, starts, steps, y, yDims)   y[i] = x[starts + i*steps]
//   starts are normalized (0 <= start < dims) and steps may be negative.
// gather<T, I>(data, dataDims, indices, indexDims, axis, y)
//   numpy take; negative indices count from the end
// trilu<T>(x, dims, upper, diagonal, y)
// copyInto<T>(x, xDims, y, yDims, axis, offset)  for concat: writes x into
//   y at `offset` along `axis`
// nllLoss<T, I>(logProbs, lpDims[N,C,d...], target, weight or nullptr,
//               reduction (0 none, 1 sum, 2 mean), hasIgnore, ignoreIndex, y)
//   PyTorch semantics: mean divides by the sum of weights of non-ignored
//   targets (0/0 = NaN when every target is ignored); ignored elements of
//   reduction none are 0.
// randomUniform<T>(key, randomStream, y, dims)   T: float or double
//   y[i] = the value of element i of stream randomStream under the key *key
//   (Random.h): uniform in [0, 1) with 24 random bits, bit for bit the
//   values of the CUDA library's randomUniform
//
// Errors (see the file comment): lastError() is the first data error
// recorded since clearError(), or "" when none.

//===----------------------------------------------------------------------===//
// Internal helpers
//===----------------------------------------------------------------------===//

namespace detail {

// ComputeT, SumT, load, store, isNan and lowestValue: the element
// arithmetic CudaKernels.cuh shares.
using namespace ztc::numeric;

/// Work (in elements) below which a loop stays on one thread.
constexpr int64_t kParallelGrain = 1 << 15;

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

/// The first data error since clearError(). `state` is 0 (none), 1 (a
/// thread is writing the message) or 2 (message complete): the first
/// thread to move it from 0 to 1 wins, others drop their error, so OpenMP
/// threads of one kernel can report concurrently. Constant-initialized.
struct ErrorState {
  std::atomic<int> state{0};
  char message[256] = {};
  /// The same error as the step's error slot records it.
  ztc_step_error record = {};
};

inline ErrorState &errorState() {
  static ErrorState state;
  return state;
}

/// Keeps `data` (and its message) unless an earlier error is recorded.
inline void recordDataError(const ztc_step_error &data) {
  ErrorState &error = errorState();
  int expected = 0;
  if (!error.state.compare_exchange_strong(expected, 1,
                                           std::memory_order_acquire))
    return;
  error.record = data;
  std::snprintf(error.message, sizeof error.message, "%s",
                describeStepError(data).c_str());
  error.state.store(2, std::memory_order_release);
}

/// Records an index or label `value` outside [low, high).
inline void recordRangeError(int32_t kind, int64_t value, int64_t low,
                             int64_t high, bool hasIgnore = false,
                             int64_t ignore = 0) {
  recordDataError(makeStepError(kind, value, low, high, hasIgnore, ignore));
}

/// Calls body(srcOffset, dstOffset) for the row-major positions [begin,
/// end) of dims[0, rank): one division per dimension for the first, then
/// an odometer step per position.
template <typename Body>
void forStridedRows(int64_t begin, int64_t end, const int64_t *dims,
                    int64_t rank, const int64_t *srcStrides,
                    const int64_t *dstStrides, Body &&body) {
  if (begin >= end)
    return;
  int64_t index[8] = {}, srcOffset = 0, dstOffset = 0;
  for (int64_t i = rank - 1, flat = begin; i >= 0; --i) {
    index[i] = flat % dims[i];
    flat /= dims[i];
    srcOffset += index[i] * srcStrides[i];
    dstOffset += index[i] * dstStrides[i];
  }
  for (int64_t row = begin;;) {
    body(srcOffset, dstOffset);
    if (++row == end)
      return;
    for (int64_t i = rank - 1; i >= 0; --i) {
      srcOffset += srcStrides[i];
      dstOffset += dstStrides[i];
      if (++index[i] < dims[i])
        break;
      srcOffset -= dims[i] * srcStrides[i];
      dstOffset -= dims[i] * dstStrides[i];
      index[i] = 0;
    }
  }
}

/// Runs body(begin, end) over [0, count) split into one contiguous range
/// per OpenMP thread when `parallel`, else on this thread alone.
template <typename Body>
void forThreadRanges(int64_t count, bool parallel, Body &&body) {
#ifdef _OPENMP
  if (parallel && count > 1) {
#pragma omp parallel
    {
      int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t chunk = (count + threads - 1) / threads;
      body(std::min(count, t * chunk), std::min(count, (t + 1) * chunk));
    }
    return;
  }
#endif
  body(int64_t(0), count);
}

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

/// C[M,N] = op(A)[M,K] * op(B)[K,N] (+ rowBias[m] on every element of row
/// m), where op transposes an operand stored transposed (transA: A is
/// stored [K,M]). Leading dimensions are the stored matrices', in elements.
/// oneDNN's sgemm for float (it generates kernels for the instructions this
/// processor has, AVX-512 included, whatever OPENBLAS_CORETYPE says: on
/// this project's AMD machines twice OpenBLAS's Haswell kernels), OpenBLAS
/// for double.
template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, const T *a, int64_t lda, bool transA,
          const T *b, int64_t ldb, bool transB, T *c, int64_t ldc,
          const T *rowBias) {
  if (m == 0 || n == 0)
    return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // C starts as the bias (beta 1) or is overwritten (beta 0).
    if (rowBias || k == 0)
      for (int64_t i = 0; i < m; ++i)
        std::fill(c + i * ldc, c + i * ldc + n, rowBias ? rowBias[i] : T(0));
    if (k == 0)
      return;
    T beta = rowBias ? T(1) : T(0);
    // The BLAS runs single-threaded inside OpenMP's threads, each on a band
    // of rows: two thread pools spinning on the same cores (OpenBLAS's and
    // libgomp's) cost more than they gain. oneDNN uses libgomp's pool and
    // runs sequentially inside a parallel region.
    static const bool singleThreaded = (openblas_set_num_threads(1), true);
    (void)singleThreaded;
    CBLAS_TRANSPOSE opA = transA ? CblasTrans : CblasNoTrans;
    CBLAS_TRANSPOSE opB = transB ? CblasTrans : CblasNoTrans;
    auto band = [&](int64_t begin, int64_t end) {
      if (begin >= end)
        return;
      // Row i of op(A) is row i of A, or column i of a transposed A.
      const T *aBand = a + (transA ? begin : begin * lda);
      if constexpr (std::is_same_v<T, float>) {
        // oneDNN fails only on arguments these are not, or out of memory;
        // OpenBLAS then computes the band.
        if (dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', end - begin, n,
                       k, 1.0f, aBand, lda, b, ldb, beta, c + begin * ldc,
                       ldc) != dnnl_success)
          cblas_sgemm(CblasRowMajor, opA, opB, end - begin, n, k, 1.0f, aBand,
                      lda, b, ldb, beta, c + begin * ldc, ldc);
      } else {
        cblas_dgemm(CblasRowMajor, opA, opB, end - begin, n, k, 1.0, aBand, lda,
                    b, ldb, beta, c + begin * ldc, ldc);
      }
    };
    forThreadRanges(m, m * n * k > 4 * kParallelGrain, band);
  } else if constexpr (std::is_same_v<ComputeT<T>, float>) {
    // f16 and bf16: f32 accumulation (as cuBLAS does for half GEMMs), each
    // result rounded once. oneDNN's matmul where it has one (bf16 on
    // AVX-512, on its bf16 dot products where the processor has them; f16
    // where it has AVX512-FP16). Otherwise both operands are widened to
    // float (exactly) in their stored layout and multiplied by sgemm. The
    // buffers live as long as the thread: a step's GEMMs reuse them.
    if (k > 0 && dnnl::matmul(std::is_same_v<T, bf16> ? dnnl_bf16 : dnnl_f16,
                              m, n, k, a, lda, transA, b, ldb, transB, c, ldc,
                              rowBias))
      return;
    thread_local std::vector<float> a32, b32, c32, bias32;
    auto widen = [](std::vector<float> &to, const T *from, int64_t rows,
                    int64_t cols, int64_t ld) {
      to.resize(size_t(rows) * size_t(cols));
      float *dense = to.data();
#pragma omp parallel for if (rows * cols > kParallelGrain)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          dense[r * cols + c] = load(from[r * ld + c]);
    };
    int64_t aCols = transA ? m : k, bCols = transB ? k : n;
    widen(a32, a, transA ? k : m, aCols, lda);
    widen(b32, b, transB ? n : k, bCols, ldb);
    if (rowBias)
      widen(bias32, rowBias, 1, m, m);
    c32.resize(size_t(m) * size_t(n));
    gemm<float>(m, n, k, a32.data(), aCols, transA, b32.data(), bCols, transB,
                c32.data(), n, rowBias ? bias32.data() : nullptr);
    const float *product = c32.data();
#pragma omp parallel for if (m * n > kParallelGrain)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = store<T>(product[i * n + j]);
  } else {
    using Acc = ComputeT<T>;
    // Element (i, p) of op(A) and (p, j) of op(B).
    int64_t aRow = transA ? 1 : lda, aCol = transA ? lda : 1;
    int64_t bRow = transB ? 1 : ldb, bCol = transB ? ldb : 1;
#pragma omp parallel for if (m * n * k > kParallelGrain)
    for (int64_t i = 0; i < m; ++i) {
      std::vector<Acc> row(n, rowBias ? load(rowBias[i]) : Acc(0));
      for (int64_t p = 0; p < k; ++p) {
        Acc scale = load(a[i * aRow + p * aCol]);
        const T *bRowStart = b + p * bRow;
        for (int64_t j = 0; j < n; ++j)
          row[j] += scale * load(bRowStart[j * bCol]);
      }
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = store<T>(row[j]);
    }
  }
}

} // namespace detail

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// The first data error recorded since the last clearError(), or "" when
/// none. Valid until the next clearError(); call it after the kernels
/// returned (not while another thread may still run one).
inline const char *lastError() {
  detail::ErrorState &error = detail::errorState();
  return error.state.load(std::memory_order_acquire) == 2 ? error.message : "";
}

inline void clearError() {
  detail::ErrorState &error = detail::errorState();
  error.message[0] = '\0';
  error.record = ztc_step_error{};
  error.state.store(0, std::memory_order_release);
}

/// An entry's last work: moves the first data error its kernels recorded
/// into the context's error slot (unless the slot holds an earlier one) and
/// clears the library's, so the runtime finds it in the slot.
inline void collectErrors(ztc_step_error *slot) {
  if (!slot)
    return;
  detail::ErrorState &error = detail::errorState();
  if (error.state.load(std::memory_order_acquire) == 2 &&
      slot->kind == ZTC_ERROR_NONE)
    *slot = error.record;
  clearError();
}

/// kernel.record_loss: adds `*loss` to the context's training state
/// (TrainState.h), on the calling thread like every CPU kernel.
template <typename T> void recordLoss(ztc_train_state *state, const T *loss) {
  recordLossInto(state, *loss);
}

/// kernel.check_finite: notes check `check` (1-based) in the training
/// state when `x` holds a NaN or an infinity and no earlier check did.
template <typename T>
void checkFinite(ztc_train_state *state, const T *x, int64_t n, int64_t check) {
  if (!state || state->first_nonfinite_check != 0)
    return;
  for (int64_t i = 0; i < n; ++i)
    if (nonFinite(x[i])) {
      state->first_nonfinite_check = check;
      return;
    }
}

//===----------------------------------------------------------------------===//
// Streams: work of stream 1 and up runs on the runtime's threads
//===----------------------------------------------------------------------===//

/// The runtime's stream `stream`, or null when the entry runs every stream
/// on the calling thread.
inline const ztc_host_stream *hostStream(const ztc_step_context *ctx,
                                         int64_t stream) {
  if (!ctx->streams || stream >= ctx->stream_count)
    return nullptr;
  return static_cast<const ztc_host_stream *>(ctx->streams[stream]);
}

/// Runs `work` on stream `stream`: handed to its thread, after the work
/// handed to it before, or at once without host streams.
template <typename Work>
void onStream(const ztc_step_context *ctx, int64_t stream, Work work) {
  const ztc_host_stream *host = hostStream(ctx, stream);
  if (!host) {
    work();
    return;
  }
  auto *heap = new Work(std::move(work));
  host->enqueue(
      host->self,
      [](void *arg) {
        std::unique_ptr<Work> owned(static_cast<Work *>(arg));
        (*owned)();
      },
      heap);
}

/// kernel.signal: `event` completes once the work handed to `stream` so far
/// has.
inline void signalEvent(const ztc_step_context *ctx, int64_t stream,
                        int32_t event) {
  if (const ztc_host_stream *host = hostStream(ctx, stream))
    host->signal(host->self, event);
}

/// kernel.wait: later work of `stream` starts after `event` completed.
inline void waitEvent(const ztc_step_context *ctx, int64_t stream,
                      int32_t event) {
  if (const ztc_host_stream *host = hostStream(ctx, stream))
    host->wait(host->self, event);
}

//===----------------------------------------------------------------------===//
// Collectives (the dist dialect): through the context's communicator
//===----------------------------------------------------------------------===//

/// The ztc_comm element type of T.
template <typename T> constexpr int32_t commDType() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    std::is_same_v<T, bf16> || std::is_same_v<T, f16>,
                "collectives move floating-point tensors");
  return std::is_same_v<T, float>    ? ZTC_COMM_F32
         : std::is_same_v<T, double> ? ZTC_COMM_F64
         : std::is_same_v<T, bf16>   ? ZTC_COMM_BF16
                                     : ZTC_COMM_F16;
}

namespace detail {
/// Records a collective's failure `code` in the error slot.
inline void checkCollective(int32_t code, int32_t which) {
  if (code != 0)
    recordDataError(makeStepError(ZTC_ERROR_COLLECTIVE, code, which, 0));
}
} // namespace detail

/// dist.all_reduce: y = the sum over ranks of x (n elements). With no
/// communicator (one rank) the sum is x itself.
template <typename T>
void allReduce(const ztc_step_context *ctx, const T *x, T *y, int64_t n) {
  if (!ctx->comm) {
    std::copy(x, x + n, y);
    return;
  }
  detail::checkCollective(ctx->comm->all_reduce_sum(ctx->comm->self, x, y, n,
                                                    commDType<T>(), nullptr),
                          ZTC_COLLECTIVE_ALL_REDUCE);
}

/// dist.reduce_scatter: y (n elements) = block `rank` of the sum over ranks
/// of x (world_size blocks of n).
template <typename T>
void reduceScatter(const ztc_step_context *ctx, const T *x, T *y, int64_t n) {
  if (!ctx->comm) {
    std::copy(x + ctx->rank * n, x + (ctx->rank + 1) * n, y);
    return;
  }
  detail::checkCollective(ctx->comm->reduce_scatter_sum(ctx->comm->self, x, y,
                                                        n, commDType<T>(),
                                                        nullptr),
                          ZTC_COLLECTIVE_REDUCE_SCATTER);
}

/// dist.all_gather: y (world_size blocks of n) = every rank's x, in rank
/// order.
template <typename T>
void allGather(const ztc_step_context *ctx, const T *x, T *y, int64_t n) {
  if (!ctx->comm) {
    std::copy(x, x + n, y + ctx->rank * n);
    return;
  }
  detail::checkCollective(
      ctx->comm->all_gather(ctx->comm->self, x, y, n, commDType<T>(), nullptr),
      ZTC_COLLECTIVE_ALL_GATHER);
}

/// dist.shard: y (n elements) = block `rank` of x, no communication.
template <typename T>
void shard(const ztc_step_context *ctx, const T *x, T *y, int64_t n) {
  std::copy(x + ctx->rank * n, x + (ctx->rank + 1) * n, y);
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

/// c = a @ b, numpy-style (MatmulPlan.h); transA/transB: the operand is
/// stored with its last two dimensions swapped.
template <typename T>
void matmul(const T *a, const Dims &aDims, const T *b, const Dims &bDims, T *c,
            const Dims &cDims, bool transA = false, bool transB = false) {
  MatmulPlan p = planMatmul(aDims, bDims, cDims, transA, transB);
  if (p.batches == 0)
    return;
  if (p.single) {
    detail::gemm(p.batches * p.m, p.n, p.k, a, p.lda, false, b, p.ldb, p.transB,
                 c, p.ldc, static_cast<const T *>(nullptr));
    return;
  }
  auto product = [&](int64_t item) {
    int64_t o = item / p.inner, i = item % p.inner;
    int64_t aOffset, bOffset;
    p.offsets(o, aOffset, bOffset);
    detail::gemm(p.m, p.n, p.k, a + aOffset + i * p.strideA, p.lda, p.transA,
                 b + bOffset + i * p.strideB, p.ldb, p.transB,
                 c + item * p.m * p.n, p.ldc, static_cast<const T *>(nullptr));
  };
  int64_t items = p.outer * p.inner;
#ifdef _OPENMP
  // A batch of at least one product per thread (attention's heads): the
  // threads share out the products, each GEMM on one thread, instead of
  // every GEMM splitting its rows (one parallel region, not one per item).
  if (items >= omp_get_max_threads() && items > 1 &&
      items * p.m * p.n * p.k > 4 * detail::kParallelGrain) {
#pragma omp parallel for schedule(static)
    for (int64_t item = 0; item < items; ++item)
      product(item);
    return;
  }
#endif
  for (int64_t item = 0; item < items; ++item)
    product(item);
}

namespace detail {

/// The columns of a convolution's GEMM: col[r, oh * outW + ow] for
/// r = (c, kh, kw) is the input `channels` planes' element under tap
/// (kh, kw) of output position (oh, ow), 0 in the padding.
template <typename T>
void im2col(const T *input, const Window2d &window, int64_t channels, T *col) {
  int64_t kH = window.kH, kW = window.kW, height = window.height,
          width = window.width, outH = window.outH, outW = window.outW;
  int64_t patch = channels * kH * kW, pixels = outH * outW;
#pragma omp parallel for if (patch * pixels > kParallelGrain)
  for (int64_t r = 0; r < patch; ++r) {
    int64_t c = r / (kH * kW), kh = (r / kW) % kH, kw = r % kW;
    const T *plane = input + c * height * width;
    T *out = col + r * pixels;
    for (int64_t oh = 0; oh < outH; ++oh) {
      int64_t ih = window.inputRow(oh, kh);
      bool rowInside = ih >= 0 && ih < height;
      for (int64_t ow = 0; ow < outW; ++ow) {
        int64_t iw = window.inputCol(ow, kw);
        out[oh * outW + ow] = rowInside && iw >= 0 && iw < width
                                  ? plane[ih * width + iw]
                                  : T(0.0f);
      }
    }
  }
}

/// The adjoint of im2col: every column element is added to the input
/// element it was read from (padding reads are dropped). Each task owns one
/// channel plane and adds in a fixed order, so the result does not depend
/// on the thread count.
template <typename T>
void col2im(const T *col, const Window2d &window, int64_t channels, T *input) {
  int64_t kH = window.kH, kW = window.kW, height = window.height,
          width = window.width, outH = window.outH, outW = window.outW;
  int64_t pixels = outH * outW;
#pragma omp parallel for if (channels * kH * kW * pixels > kParallelGrain)
  for (int64_t c = 0; c < channels; ++c) {
    T *plane = input + c * height * width;
    std::fill(plane, plane + height * width, T(0.0f));
    for (int64_t kh = 0; kh < kH; ++kh)
      for (int64_t kw = 0; kw < kW; ++kw) {
        const T *from = col + ((c * kH + kh) * kW + kw) * pixels;
        for (int64_t oh = 0; oh < outH; ++oh) {
          int64_t ih = window.inputRow(oh, kh);
          if (ih < 0 || ih >= height)
            continue;
          for (int64_t ow = 0; ow < outW; ++ow) {
            int64_t iw = window.inputCol(ow, kw);
            if (iw >= 0 && iw < width)
              plane[ih * width + iw] += from[oh * outW + ow];
          }
        }
      }
  }
}

/// The NCHW dimensions of a tensor of NHWC dimensions `nhwc`.
inline Dims nchwOf(const Dims &nhwc) {
  return Dims{nhwc.d[0], nhwc.d[3], nhwc.d[1], nhwc.d[2]};
}

/// Copies `from` (NCHW dimensions `nchw`) between the NCHW and NHWC layouts:
/// into NHWC with `toNhwc`, else from NHWC into NCHW. The convolutions'
/// fallback for channels-last tensors oneDNN did not take.
template <typename T>
std::vector<T> relayout(const T *from, const Dims &nchw, bool toNhwc) {
  int64_t n = nchw.d[0], c = nchw.d[1], hw = nchw.d[2] * nchw.d[3];
  std::vector<T> to(n * c * hw);
#pragma omp parallel for if (n * c * hw > kParallelGrain)
  for (int64_t image = 0; image < n; ++image)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t ch = 0; ch < c; ++ch) {
        int64_t nchwIndex = (image * c + ch) * hw + p,
                nhwcIndex = (image * hw + p) * c + ch;
        if (toNhwc)
          to[nhwcIndex] = from[nchwIndex];
        else
          to[nchwIndex] = from[nhwcIndex];
      }
  return to;
}

} // namespace detail

/// A 2-D convolution: x [N, C, H, W] (or [N, H, W, C] with `channelsLast`,
/// and y likewise), weights [O, C/group, kH, kW], an optional bias [O].
template <typename T>
void conv2d(const T *x, const Dims &xDims, const T *w, const Dims &wDims,
            const T *bias, T *y, const Dims &yDims, const int64_t *strides,
            const int64_t *pads, const int64_t *dilations, int64_t group,
            bool channelsLast = false) {
  if (channelsLast) {
    Dims xNchw = detail::nchwOf(xDims), yNchw = detail::nchwOf(yDims);
    if constexpr (std::is_same_v<T, float>) {
      std::vector<void *> data = {const_cast<T *>(x), const_cast<T *>(w)};
      if (bias)
        data.push_back(const_cast<T *>(bias));
      data.push_back(y);
      if (dnnl::convolution(dnnl::ConvPass::Forward, xNchw, wDims, yNchw,
                            strides, pads, dilations, group, bias, true, data))
        return;
    }
    std::vector<T> xPlanes = detail::relayout(x, xNchw, false);
    std::vector<T> yPlanes(yNchw.numElements());
    conv2d(xPlanes.data(), xNchw, w, wDims, bias, yPlanes.data(), yNchw,
           strides, pads, dilations, group);
    std::vector<T> out = detail::relayout(yPlanes.data(), yNchw, true);
    std::copy(out.begin(), out.end(), y);
    return;
  }
  int64_t batch = xDims.d[0], channels = xDims.d[1];
  int64_t height = xDims.d[2], width = xDims.d[3];
  int64_t outChannels = wDims.d[0], groupChannels = wDims.d[1];
  int64_t kH = wDims.d[2], kW = wDims.d[3];
  int64_t outH = yDims.d[2], outW = yDims.d[3];
  int64_t groupOut = outChannels / group;
  int64_t patch = groupChannels * kH * kW; // gemm K
  int64_t pixels = outH * outW;            // gemm N
  if (batch == 0 || outChannels == 0 || pixels == 0)
    return;
  if constexpr (std::is_same_v<T, float>) {
    std::vector<void *> data = {const_cast<T *>(x), const_cast<T *>(w)};
    if (bias)
      data.push_back(const_cast<T *>(bias));
    data.push_back(y);
    if (dnnl::convolution(dnnl::ConvPass::Forward, xDims, wDims, yDims, strides,
                          pads, dilations, group, bias, false, data))
      return;
  }

  Window2d window =
      window2d(xDims, yDims, wDims.d + 2, strides, pads, dilations);
  bool direct = window.readsInputAsIs();
  std::vector<T> columns(direct ? 0 : patch * pixels);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t g = 0; g < group; ++g) {
      const T *input = x + (n * channels + g * groupChannels) * height * width;
      const T *cols = input;
      if (!direct) {
        detail::im2col(input, window, groupChannels, columns.data());
        cols = columns.data();
      }
      detail::gemm(groupOut, pixels, patch, w + g * groupOut * patch,
                   std::max<int64_t>(patch, 1), false, cols, pixels, false,
                   y + (n * outChannels + g * groupOut) * pixels, pixels,
                   bias ? bias + g * groupOut : nullptr);
    }
  }
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

namespace detail {

/// Stores `pool(in, oh, ow)` (computed in ComputeT<T>) at every output
/// position of a 2-D pooling; `in` is the input plane of the position.
template <typename T, typename PoolFn>
void poolPlanes(const T *x, const Dims &xDims, T *y, const Dims &yDims,
                PoolFn pool) {
  int64_t planes = xDims.d[0] * xDims.d[1];
  int64_t planeSize = xDims.d[2] * xDims.d[3];
  int64_t outH = yDims.d[2], outW = yDims.d[3];
#pragma omp parallel for if (planes * outH * outW > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    const T *in = x + p * planeSize;
    T *out = y + p * outH * outW;
    for (int64_t oh = 0; oh < outH; ++oh)
      for (int64_t ow = 0; ow < outW; ++ow)
        out[oh * outW + ow] = store<T>(pool(in, oh, ow));
  }
}

} // namespace detail

template <typename T>
void maxPool2d(const T *x, const Dims &xDims, T *y, const Dims &yDims,
               const int64_t *kernel, const int64_t *strides,
               const int64_t *pads, const int64_t *dilations) {
  using Acc = detail::ComputeT<T>;
  Window2d window = window2d(xDims, yDims, kernel, strides, pads, dilations);
  detail::poolPlanes(
      x, xDims, y, yDims, [&](const T *in, int64_t oh, int64_t ow) {
        MaxPick<Acc> pick = window.maxPick(in, oh, ow);
        return pick.where < 0 ? detail::lowestValue<Acc>() : pick.value;
      });
}

template <typename T>
void avgPool2d(const T *x, const Dims &xDims, T *y, const Dims &yDims,
               const int64_t *kernel, const int64_t *strides,
               const int64_t *pads, bool countIncludePad) {
  using Acc = detail::ComputeT<T>;
  Window2d window = window2d(xDims, yDims, kernel, strides, pads, nullptr);
  detail::poolPlanes(
      x, xDims, y, yDims, [&](const T *in, int64_t oh, int64_t ow) {
        Span rows = window.rowSpan(oh), cols = window.colSpan(ow);
        Acc sum = 0;
        for (int64_t ih = rows.begin; ih < rows.end; ++ih)
          for (int64_t iw = cols.begin; iw < cols.end; ++iw)
            sum += detail::load(in[ih * window.width + iw]);
        int64_t count = window.avgDivisor(rows, cols, countIncludePad);
        return sum / static_cast<Acc>(count);
      });
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

namespace detail {

/// softmax (log = false) or logSoftmax (log = true) along `axis`.
/// e^x: ztc::vecmath's in float (loops vectorize it), libm's in double.
inline float exp(float x) { return ztc::vecmath::exp(x); }
inline double exp(double x) { return std::exp(x); }

template <typename T>
void softmaxImpl(const T *x, const Dims &dims, int64_t axis, T *y, bool log) {
  using Acc = ComputeT<T>;
  if (axis < 0)
    axis += dims.rank;
  int64_t outer = product(dims, 0, axis), length = dims.d[axis];
  int64_t inner = product(dims, axis + 1, dims.rank);
#pragma omp parallel for if (outer * length * inner > kParallelGrain)
  for (int64_t row = 0; row < outer * inner; ++row) {
    int64_t base = (row / inner) * length * inner + row % inner;
    const T *in = x + base;
    T *out = y + base;
    // The maximum and the sum in vector lanes: the maximum is the same in
    // any order (a NaN makes every output NaN either way, through the sum),
    // and the sum's order is fixed by the code, not by the threads.
    Acc maximum = -std::numeric_limits<Acc>::infinity();
#pragma omp simd reduction(max : maximum)
    for (int64_t i = 0; i < length; ++i)
      maximum = std::max(maximum, load(in[i * inner]));
    Acc sum = 0;
    if (!log && std::is_same_v<T, Acc>) {
      // Each exponential once, kept in the output until the sum is known.
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < length; ++i) {
        Acc e = exp(load(in[i * inner]) - maximum);
        out[i * inner] = store<T>(e);
        sum += e;
      }
#pragma omp simd
      for (int64_t i = 0; i < length; ++i)
        out[i * inner] = store<T>(load(out[i * inner]) / sum);
      continue;
    }
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < length; ++i)
      sum += exp(load(in[i * inner]) - maximum);
    if (log) {
      Acc shift = maximum + std::log(sum);
      for (int64_t i = 0; i < length; ++i)
        out[i * inner] = store<T>(load(in[i * inner]) - shift);
    } else {
      for (int64_t i = 0; i < length; ++i)
        out[i * inner] = store<T>(exp(load(in[i * inner]) - maximum) / sum);
    }
  }
}

} // namespace detail

template <typename T>
void softmax(const T *x, const Dims &dims, int64_t axis, T *y) {
  detail::softmaxImpl(x, dims, axis, y, /*log=*/false);
}

template <typename T>
void logSoftmax(const T *x, const Dims &dims, int64_t axis, T *y) {
  detail::softmaxImpl(x, dims, axis, y, /*log=*/true);
}

namespace detail {

/// The mean of a row and one over its standard deviation (`epsilon` added
/// to the variance), both sums in vector lanes (an order fixed by the
/// code): layerNorm and its gradient compute them alike.
template <typename T>
std::pair<ComputeT<T>, ComputeT<T>> rowStatistics(const T *in, int64_t length,
                                                  double epsilon) {
  using Acc = ComputeT<T>;
  Acc sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < length; ++i)
    sum += load(in[i]);
  Acc mean = sum / static_cast<Acc>(length);
  Acc squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < length; ++i) {
    Acc centered = load(in[i]) - mean;
    squares += centered * centered;
  }
  Acc variance = squares / static_cast<Acc>(length);
  return {mean, Acc(1) / std::sqrt(variance + static_cast<Acc>(epsilon))};
}

} // namespace detail

template <typename T>
void layerNorm(const T *x, const Dims &dims, int64_t axis, const T *scale,
               const T *bias, double epsilon, T *y) {
  using Acc = detail::ComputeT<T>;
  // Plain variables, not structured bindings: clang's OpenMP cannot
  // capture those (the sanitizer build compiles steps with clang).
  const NormalizedRows shape = normalizedRows(dims, axis);
  const int64_t rows = shape.rows, length = shape.length;
#pragma omp parallel for if (rows * length > detail::kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const T *in = x + r * length;
    T *out = y + r * length;
    const std::pair<Acc, Acc> stats =
        detail::rowStatistics(in, length, epsilon);
    const Acc mean = stats.first, inverse = stats.second;
    for (int64_t i = 0; i < length; ++i) {
      Acc value =
          (detail::load(in[i]) - mean) * inverse * detail::load(scale[i]);
      if (bias)
        value += detail::load(bias[i]);
      out[i] = detail::store<T>(value);
    }
  }
}

/// The gradient of layerNorm's input: per row of the normalized dimensions,
/// rstd * (dn - mean(dn) - xhat * mean(dn * xhat)) with dn = gy * scale,
/// xhat the normalized input and rstd one over its standard deviation (the
/// statistics recomputed as layerNorm computes them). The row stays in
/// cache between its passes.
template <typename T>
void layerNormBackward(const T *x, const Dims &dims, int64_t axis,
                       const T *scale, const T *gy, double epsilon, T *gx) {
  using Acc = detail::ComputeT<T>;
  const NormalizedRows shape = normalizedRows(dims, axis);
  const int64_t rows = shape.rows, length = shape.length;
  if (length == 0)
    return;
#pragma omp parallel for if (rows * length > detail::kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const T *in = x + r * length, *g = gy + r * length;
    T *out = gx + r * length;
    const std::pair<Acc, Acc> stats =
        detail::rowStatistics(in, length, epsilon);
    const Acc mean = stats.first, rstd = stats.second;
    Acc dnSum = 0, dnXhatSum = 0;
#pragma omp simd reduction(+ : dnSum, dnXhatSum)
    for (int64_t i = 0; i < length; ++i) {
      Acc dn = detail::load(g[i]) * detail::load(scale[i]);
      Acc xhat = (detail::load(in[i]) - mean) * rstd;
      dnSum += dn;
      dnXhatSum += dn * xhat;
    }
    Acc dnMean = dnSum / static_cast<Acc>(length);
    Acc dnXhatMean = dnXhatSum / static_cast<Acc>(length);
#pragma omp simd
    for (int64_t i = 0; i < length; ++i) {
      Acc dn = detail::load(g[i]) * detail::load(scale[i]);
      Acc xhat = (detail::load(in[i]) - mean) * rstd;
      out[i] = detail::store<T>(rstd * (dn - dnMean - xhat * dnXhatMean));
    }
  }
}

template <typename T>
void batchNorm(const T *x, const Dims &dims, const T *scale, const T *bias,
               const T *mean, const T *var, double epsilon, T *y) {
  using Acc = detail::ComputeT<T>;
  int64_t batch = dims.d[0], channels = dims.d[1];
  int64_t planes = batch * channels;
  int64_t spatial = product(dims, 2, dims.rank);
#pragma omp parallel for if (planes * spatial > detail::kParallelGrain)
  for (int64_t plane = 0; plane < planes; ++plane) {
    int64_t c = plane % channels;
    Acc inverse =
        Acc(1) / std::sqrt(detail::load(var[c]) + static_cast<Acc>(epsilon));
    Acc factor = detail::load(scale[c]) * inverse;
    Acc shift = detail::load(bias[c]) - detail::load(mean[c]) * factor;
    const T *in = x + plane * spatial;
    T *out = y + plane * spatial;
    for (int64_t i = 0; i < spatial; ++i)
      out[i] = detail::store<T>(detail::load(in[i]) * factor + shift);
  }
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

template <typename T>
void transpose(const T *x, const Dims &dims, const int64_t *perm, T *y) {
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
void slice(const T *x, const Dims &dims, const int64_t *starts,
           const int64_t *steps, T *y, const Dims &yDims) {
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
              int64_t axis, int64_t offset) {
  int64_t xStrides[8], yStrides[8];
  contiguousStrides(xDims, xStrides);
  contiguousStrides(yDims, yStrides);
  detail::stridedCopy(x, xStrides, y + offset * yStrides[axis], yStrides,
                      xDims);
}

template <typename T, typename I>
void gather(const T *data, const Dims &dataDims, const I *indices,
            const Dims &indexDims, int64_t axis, T *y) {
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

template <typename T>
void trilu(const T *x, const Dims &dims, bool upper, int64_t diagonal, T *y) {
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
// Losses
//===----------------------------------------------------------------------===//

template <typename T, typename I>
void nllLoss(const T *logProbs, const Dims &lpDims, const I *target,
             const T *weight, int64_t reduction, bool hasIgnore,
             int64_t ignoreIndex, T *y) {
  using Acc = detail::SumT<T>;
  int64_t batch = lpDims.d[0], classes = lpDims.d[1];
  int64_t spatial = product(lpDims, 2, lpDims.rank);
  // Serial on purpose: the sum's order must not depend on the thread count,
  // and the work is O(N * d), small next to the log-softmax before it.
  Acc total = 0, weightSum = 0;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t s = 0; s < spatial; ++s) {
      int64_t t = static_cast<int64_t>(target[n * spatial + s]);
      Acc loss = 0;
      if (hasIgnore && t == ignoreIndex) {
        // No loss and no weight.
      } else if (t < 0 || t >= classes) {
        // No loss and no weight either; the step reports the error.
        detail::recordRangeError(ZTC_ERROR_LOSS_TARGET, t, 0, classes,
                                 hasIgnore, ignoreIndex);
      } else {
        Acc w = weight ? static_cast<Acc>(detail::load(weight[t])) : Acc(1);
        loss = -w * static_cast<Acc>(detail::load(
                        logProbs[(n * classes + t) * spatial + s]));
        weightSum += w;
      }
      if (reduction == 0)
        y[n * spatial + s] = detail::store<T>(loss);
      total += loss;
    }
  }
  if (reduction == 1)
    y[0] = detail::store<T>(total);
  else if (reduction == 2)
    y[0] = detail::store<T>(total / weightSum);
}

//===----------------------------------------------------------------------===//
// Gradients (adjoints of the kernels above)
//===----------------------------------------------------------------------===//

/// gx = the gradient of conv2d's input: gx[n, c, h, w] sums gy * w over the
/// output positions and filter taps that read (h, w). One (n, c) plane per
/// task, so there are no write races.
template <typename T>
void conv2dBackwardData(const T *gy, const Dims &gyDims, const T *w,
                        const Dims &wDims, T *gx, const Dims &gxDims,
                        const int64_t *strides, const int64_t *pads,
                        const int64_t *dilations, int64_t group,
                        bool channelsLast = false) {
  if (channelsLast) {
    Dims gyNchw = detail::nchwOf(gyDims), gxNchw = detail::nchwOf(gxDims);
    if constexpr (std::is_same_v<T, float>)
      if (dnnl::convolution(dnnl::ConvPass::BackwardData, gxNchw, wDims, gyNchw,
                            strides, pads, dilations, group, false, true,
                            {const_cast<T *>(gy), const_cast<T *>(w), gx}))
        return;
    std::vector<T> gyPlanes = detail::relayout(gy, gyNchw, false);
    std::vector<T> gxPlanes(gxNchw.numElements());
    conv2dBackwardData(gyPlanes.data(), gyNchw, w, wDims, gxPlanes.data(),
                       gxNchw, strides, pads, dilations, group);
    std::vector<T> out = detail::relayout(gxPlanes.data(), gxNchw, true);
    std::copy(out.begin(), out.end(), gx);
    return;
  }
  using Acc = detail::ComputeT<T>;
  int64_t batch = gxDims.d[0], channels = gxDims.d[1];
  int64_t height = gxDims.d[2], width = gxDims.d[3];
  int64_t outChannels = gyDims.d[1], outH = gyDims.d[2], outW = gyDims.d[3];
  int64_t groupIn = channels / group, groupOut = outChannels / group;
  int64_t kH = wDims.d[2], kW = wDims.d[3];
  Window2d window =
      window2d(gxDims, gyDims, wDims.d + 2, strides, pads, dilations);
  if constexpr (std::is_same_v<T, float>)
    if (dnnl::convolution(dnnl::ConvPass::BackwardData, gxDims, wDims, gyDims,
                          strides, pads, dilations, group, false, false,
                          {const_cast<T *>(gy), const_cast<T *>(w), gx}))
      return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // Per image and group, the columns W^T gy (a GEMM) added back into the
    // input planes they were read from (col2im); a 1x1 convolution with
    // stride 1 reads its input as is, so the GEMM writes gx directly.
    int64_t patch = groupIn * kH * kW, pixels = outH * outW;
    bool direct = window.readsInputAsIs();
    std::vector<T> columns(direct ? 0 : patch * pixels);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t g = 0; g < group; ++g) {
        T *planes = gx + (n * channels + g * groupIn) * height * width;
        T *cols = direct ? planes : columns.data();
        detail::gemm(patch, pixels, groupOut, w + g * groupOut * patch, patch,
                     /*transA=*/true,
                     gy + (n * outChannels + g * groupOut) * pixels, pixels,
                     false, cols, pixels, static_cast<const T *>(nullptr));
        if (!direct)
          detail::col2im(cols, window, groupIn, planes);
      }
    return;
  }
#pragma omp parallel for if (batch * channels * height * width * kH * kW *     \
                                 groupOut >                                    \
                             detail::kParallelGrain)
  for (int64_t plane = 0; plane < batch * channels; ++plane) {
    int64_t n = plane / channels, c = plane % channels;
    int64_t g = c / groupIn, ic = c % groupIn;
    for (int64_t h = 0; h < height; ++h)
      for (int64_t x = 0; x < width; ++x) {
        Acc sum = 0;
        window.forEachReaderOf(
            h, x, [&](int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
              for (int64_t j = 0; j < groupOut; ++j) {
                int64_t oc = g * groupOut + j;
                sum +=
                    detail::load(
                        gy[((n * outChannels + oc) * outH + oh) * outW + ow]) *
                    detail::load(w[((oc * groupIn + ic) * kH + kh) * kW + kw]);
              }
            });
        gx[(plane * height + h) * width + x] = detail::store<T>(sum);
      }
  }
}

/// gw = the gradient of conv2d's weight: gw[oc, ic, kh, kw] sums
/// gy[n, oc, oh, ow] * x[n, g * C/g + ic, tap] over the batch and output
/// positions. One output channel per task, so there are no write races.
template <typename T>
void conv2dBackwardFilter(const T *x, const Dims &xDims, const T *gy,
                          const Dims &gyDims, T *gw, const Dims &gwDims,
                          const int64_t *strides, const int64_t *pads,
                          const int64_t *dilations, int64_t group,
                          bool channelsLast = false) {
  if (channelsLast) {
    Dims xNchw = detail::nchwOf(xDims), gyNchw = detail::nchwOf(gyDims);
    if constexpr (std::is_same_v<T, float>)
      if (dnnl::convolution(dnnl::ConvPass::BackwardWeights, xNchw, gwDims,
                            gyNchw, strides, pads, dilations, group, false,
                            true,
                            {const_cast<T *>(x), const_cast<T *>(gy), gw}))
        return;
    std::vector<T> xPlanes = detail::relayout(x, xNchw, false);
    std::vector<T> gyPlanes = detail::relayout(gy, gyNchw, false);
    conv2dBackwardFilter(xPlanes.data(), xNchw, gyPlanes.data(), gyNchw, gw,
                         gwDims, strides, pads, dilations, group);
    return;
  }
  using Acc = detail::ComputeT<T>;
  int64_t batch = xDims.d[0], channels = xDims.d[1];
  int64_t height = xDims.d[2], width = xDims.d[3];
  int64_t outChannels = gyDims.d[1], outH = gyDims.d[2], outW = gyDims.d[3];
  int64_t groupIn = channels / group, groupOut = outChannels / group;
  int64_t kH = gwDims.d[2], kW = gwDims.d[3];
  Window2d window =
      window2d(xDims, gyDims, gwDims.d + 2, strides, pads, dilations);
  if constexpr (std::is_same_v<T, float>)
    if (dnnl::convolution(dnnl::ConvPass::BackwardWeights, xDims, gwDims,
                          gyDims, strides, pads, dilations, group, false, false,
                          {const_cast<T *>(x), const_cast<T *>(gy), gw}))
      return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // Per group, gw = sum over images of gy cols^T: one GEMM per image into
    // a block, added to gw in image order.
    int64_t patch = groupIn * kH * kW, pixels = outH * outW;
    bool direct = window.readsInputAsIs();
    std::vector<T> columns(direct ? 0 : patch * pixels);
    std::vector<T> product(batch > 1 ? groupOut * patch : 0);
    for (int64_t g = 0; g < group; ++g) {
      T *gwGroup = gw + g * groupOut * patch;
      for (int64_t n = 0; n < batch; ++n) {
        const T *input = x + (n * channels + g * groupIn) * height * width;
        const T *cols = input;
        if (!direct) {
          detail::im2col(input, window, groupIn, columns.data());
          cols = columns.data();
        }
        T *into = n == 0 ? gwGroup : product.data();
        detail::gemm(groupOut, patch, pixels,
                     gy + (n * outChannels + g * groupOut) * pixels, pixels,
                     false, cols, pixels, /*transB=*/true, into, patch,
                     static_cast<const T *>(nullptr));
        if (n > 0)
          for (int64_t i = 0; i < groupOut * patch; ++i)
            gwGroup[i] += into[i];
      }
    }
    return;
  }
#pragma omp parallel for if (outChannels * groupIn * kH * kW * batch * outH *  \
                                 outW >                                        \
                             detail::kParallelGrain)
  for (int64_t oc = 0; oc < outChannels; ++oc) {
    int64_t g = oc / groupOut;
    for (int64_t ic = 0; ic < groupIn; ++ic)
      for (int64_t kh = 0; kh < kH; ++kh)
        for (int64_t kw = 0; kw < kW; ++kw) {
          Acc sum = 0;
          for (int64_t n = 0; n < batch; ++n) {
            const T *in =
                x + (n * channels + g * groupIn + ic) * height * width;
            const T *grad = gy + (n * outChannels + oc) * outH * outW;
            window.forEachOutputOfTap(
                kh, kw, [&](int64_t oh, int64_t ow, int64_t ih, int64_t iw) {
                  sum += detail::load(grad[oh * outW + ow]) *
                         detail::load(in[ih * width + iw]);
                });
          }
          gw[((oc * groupIn + ic) * kH + kh) * kW + kw] = detail::store<T>(sum);
        }
  }
}

/// gx of maxPool2d: each window's gradient goes to the element the forward
/// kernel picked (the first maximum, or the last NaN), as PyTorch routes it.
template <typename T>
void maxPool2dBackward(const T *x, const Dims &xDims, const T *gy,
                       const Dims &gyDims, T *gx, const int64_t *kernel,
                       const int64_t *strides, const int64_t *pads,
                       const int64_t *dilations) {
  using Acc = detail::ComputeT<T>;
  int64_t planes = xDims.d[0] * xDims.d[1];
  int64_t height = xDims.d[2], width = xDims.d[3];
  int64_t outH = gyDims.d[2], outW = gyDims.d[3];
  Window2d window = window2d(xDims, gyDims, kernel, strides, pads, dilations);
#pragma omp parallel for if (planes * height * width > detail::kParallelGrain)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T *in = x + plane * height * width;
    const T *grad = gy + plane * outH * outW;
    std::vector<Acc> acc(height * width, Acc(0));
    for (int64_t oh = 0; oh < outH; ++oh)
      for (int64_t ow = 0; ow < outW; ++ow) {
        int64_t where = window.maxPick(in, oh, ow).where;
        if (where >= 0)
          acc[where] += detail::load(grad[oh * outW + ow]);
      }
    for (int64_t i = 0; i < height * width; ++i)
      gx[plane * height * width + i] = detail::store<T>(acc[i]);
  }
}

/// gx of avgPool2d: each window's gradient spread evenly over its inputs,
/// with the divisor the forward kernel used.
template <typename T>
void avgPool2dBackward(const T *gy, const Dims &gyDims, T *gx,
                       const Dims &gxDims, const int64_t *kernel,
                       const int64_t *strides, const int64_t *pads,
                       bool countIncludePad) {
  using Acc = detail::ComputeT<T>;
  int64_t planes = gxDims.d[0] * gxDims.d[1];
  int64_t height = gxDims.d[2], width = gxDims.d[3];
  int64_t outH = gyDims.d[2], outW = gyDims.d[3];
  Window2d window = window2d(gxDims, gyDims, kernel, strides, pads, nullptr);
#pragma omp parallel for if (planes * height * width > detail::kParallelGrain)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T *grad = gy + plane * outH * outW;
    std::vector<Acc> acc(height * width, Acc(0));
    for (int64_t oh = 0; oh < outH; ++oh)
      for (int64_t ow = 0; ow < outW; ++ow) {
        Span rows = window.rowSpan(oh), cols = window.colSpan(ow);
        int64_t count = window.avgDivisor(rows, cols, countIncludePad);
        if (count <= 0)
          continue;
        Acc share =
            detail::load(grad[oh * outW + ow]) / static_cast<Acc>(count);
        for (int64_t ih = rows.begin; ih < rows.end; ++ih)
          for (int64_t iw = cols.begin; iw < cols.end; ++iw)
            acc[ih * width + iw] += share;
      }
    for (int64_t i = 0; i < height * width; ++i)
      gx[plane * height * width + i] = detail::store<T>(acc[i]);
  }
}

/// y = data with updates added at indices along axis (np.add.at); repeated
/// indices accumulate. Sequential over indices, parallel over the rest.
template <typename T, typename I>
void scatterAdd(const T *data, const Dims &dataDims, const I *indices,
                const Dims &indexDims, const T *updates, int64_t axis, T *y) {
  int64_t total = dataDims.numElements();
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
                 const Dims &sourceDims, const int64_t *starts,
                 const int64_t *steps, T *y) {
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

//===----------------------------------------------------------------------===//
// Random numbers
//===----------------------------------------------------------------------===//

template <typename T>
void randomUniform(const int64_t *key, uint64_t randomStream, T *y,
                   const Dims &dims) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "random values are float or double");
  uint64_t base = random::streamBase(static_cast<uint64_t>(*key), randomStream);
  int64_t count = dims.numElements();
#pragma omp parallel for if (count > detail::kParallelGrain)
  for (int64_t i = 0; i < count; ++i)
    y[i] = static_cast<T>(random::uniformAt(base, static_cast<uint64_t>(i)));
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

/// One Adam step of the float32 parameter p[0..n) on 8-bit moments, as
/// bitsandbytes' Adam8bit and AdamW8bit take it (Blockwise8bit.h):
/// m and v are codes (the signed and unsigned dynamic maps), mScale and
/// vScale one scale per 256 elements; lr and step (1-based) are read from
/// their rank-0 buffers. The results go to the *Out buffers, which may be
/// the inputs' own (an in-place update). Blocks run on any thread; each
/// block's result does not depend on how they are shared out.
inline void adam8bit(const float *p, const float *g, const int8_t *m,
                     const float *mScale, const int8_t *v, const float *vScale,
                     const float *lr, const float *step, float *pOut,
                     int8_t *mOut, float *mScaleOut, int8_t *vOut,
                     float *vScaleOut, int64_t n, double beta1, double beta2,
                     double eps, double weightDecay) {
  using blockwise8bit::kBlock;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  auto copy = [](const void *from, void *to, size_t bytes) {
    if (from != to)
      std::memcpy(to, from, bytes);
  };
  copy(p, pOut, size_t(n) * sizeof(float));
  copy(m, mOut, size_t(n));
  copy(v, vOut, size_t(n));
  copy(mScale, mScaleOut, size_t(blocks) * sizeof(float));
  copy(vScale, vScaleOut, size_t(blocks) * sizeof(float));
  blockwise8bit::AdamStep hyper;
  hyper.step = static_cast<int64_t>(*step);
  hyper.lr = *lr;
  hyper.beta1 = beta1;
  hyper.beta2 = beta2;
  hyper.eps = eps;
  hyper.weightDecay = weightDecay;
  const blockwise8bit::CodeTable &signedTable = blockwise8bit::codeTable(true);
  const blockwise8bit::CodeTable &unsignedTable =
      blockwise8bit::codeTable(false);
  auto *m1 = reinterpret_cast<uint8_t *>(mOut);
  auto *m2 = reinterpret_cast<uint8_t *>(vOut);
#pragma omp parallel for if (n > detail::kParallelGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t start = b * kBlock;
    blockwise8bit::adamStep(pOut + start, g + start, m1 + start, m2 + start,
                            mScaleOut + b, vScaleOut + b,
                            std::min(kBlock, n - start), hyper, signedTable,
                            unsignedTable);
  }
}

//===----------------------------------------------------------------------===//
// Quantized weights
//===----------------------------------------------------------------------===//

/// y = x op(W) for a weight W of [rows, cols] in NF4 (Nf4.h: packed codes,
/// the 8-bit codes of the block scales, their scales and offset), op the
/// transpose when transB; x is [..., K], y [..., N]. W is never whole in
/// memory: a tile of op(W)'s columns (nf4::tileColumns: about 256K
/// elements) is dequantized in float32, rounded to T and
/// multiplied as any product is (detail::gemm: f32 accumulation, each
/// result rounded once), then the next tile. The tile lives as long as the
/// thread: 1 MiB of float32 (512 KiB of bf16) for K up to 16384.
template <typename T>
void matmulNf4(const T *x, const Dims &xDims, const uint8_t *packed,
               const uint8_t *absmax, const float *nested, const float *offset,
               int64_t rows, int64_t cols, bool transB, T *y,
               const Dims &yDims) {
  const int64_t k = transB ? cols : rows, n = transB ? rows : cols;
  const int64_t m = k ? xDims.numElements() / k : 0;
  (void)yDims;
  if (m == 0 || n == 0)
    return;
  const blockwise8bit::CodeTable &table = blockwise8bit::codeTable(true);
  const float shift = *offset;
  const int64_t panel = nf4::tileColumns(k, n);
  thread_local std::vector<T> tile;
  tile.resize(size_t(k) * size_t(panel));
  T *t = tile.data();
  for (int64_t j0 = 0; j0 < n; j0 += panel) {
    const int64_t width = std::min(panel, n - j0);
    // The tile is op(W)[:, j0 : j0 + width], stored as W is: rows j0.. of
    // W ([width, K]) when transposed, else columns j0.. of every row
    // ([K, width]).
    // Each row of the tile is a run of W's flat elements.
    const int64_t outer = transB ? width : k, inner = transB ? k : width;
#pragma omp parallel for if (outer * inner > detail::kParallelGrain)
    for (int64_t r = 0; r < outer; ++r)
      nf4::dequantizeRange(packed, absmax, nested, shift,
                           transB ? (j0 + r) * cols : r * cols + j0, inner,
                           table, t + r * inner,
                           [](float value) { return detail::store<T>(value); });
    detail::gemm(m, width, k, x, k, false, t, inner, transB, y + j0, n,
                 static_cast<const T *>(nullptr));
  }
}

} // namespace ztc::cpu

//===----------------------------------------------------------------------===//
// C entry points for the runtime
//===----------------------------------------------------------------------===//
//
// The runtime finds these with dlsym in the compiled step (CpuBackend.cpp).
// Weak, so several translation units of one binary that include this header
// link; default visibility, so they stay exported whatever the flags.

/// ztc::cpu::lastError(): the step's first data error, or "".
extern "C" __attribute__((weak, visibility("default"))) const char *
ztc_cpu_last_error() {
  return ztc::cpu::lastError();
}

/// ztc::cpu::clearError().
extern "C" __attribute__((weak, visibility("default"))) void
ztc_cpu_clear_error() {
  ztc::cpu::clearError();
}

#endif // ZTC_RUNTIME_KERNELS_CPUKERNELS_H
