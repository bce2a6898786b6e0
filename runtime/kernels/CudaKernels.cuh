//===- CudaKernels.cuh - kernels the generated CUDA code calls --*- C++ -*-===//
//
// Header-only library included by the CUDA source that ztc emits for the
// CUDA target (step.cu). It offers the API of CpuKernels.h in namespace
// ztc::cuda, with the same semantics (see that file's comment), plus one
// trailing `cudaStream_t stream` argument: every function enqueues its work
// on `stream` and returns without synchronizing. Data pointers are device
// pointers; `Dims` and the `const int64_t *` parameter arrays (strides,
// pads, perm, ...) are host values, read before the launch.
//
// Where the CUDA library differs from the CPU one:
//  - Nothing throws or aborts (generated code is plain host code). The first
//    failing CUDA or cuBLAS call is recorded, with the call and the kernel
//    it served ("cublasGemmStridedBatchedEx in matmul: CUBLAS_STATUS_..."),
//    in a process-wide error state: lastError() / clearError(). Invalid
//    data that only shows on the device (a gather index or a loss target
//    out of range) writes 0 for that element and leaves a device-side record
//    that lastError() also reports, so call lastError() after synchronizing.
//    The runtime reaches both through the C symbols ztc_cuda_last_error and
//    ztc_cuda_clear_error of the compiled step.
//  - Sums reduce in parallel trees: deterministic for a given shape, but in
//    another order than on the CPU, so results agree to rounding error.
//  - Matrix products of float, double, f16 and bf16 run on cuBLAS
//    (cublasGemmStridedBatchedEx): f32 computes in f32 (never TF32), f16 and
//    bf16 accumulate in f32 and round once; integers use a plain kernel.
//    conv2d is im2col + the same product, or a direct kernel for integers and
//    for small patches (depthwise, first layers); its weight gradient is
//    im2col + one product over the images, its input gradient (f32 and
//    f64) a product per image + col2im.
//  - One cuBLAS handle per device, created on first use and kept for the
//    process; products on it are serialized by a mutex, so generated code
//    may run on several host threads.
//
// Builds with nvcc -std=c++17 and no extended-lambda or relaxed-constexpr
// flags: kernels are function objects run by two generic launchers. One
// translation unit per shared object includes this file (the device-side
// data-error record is per translation unit). With ZTC_CUDA_HOST_EMULATION
// defined it compiles with a host compiler instead and runs every kernel
// body serially on the host with host pointers (cuBLAS replaced by the plain
// product), so the index arithmetic is tested on machines without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDAKERNELS_CUH
#define ZTC_RUNTIME_KERNELS_CUDAKERNELS_CUH

#include "Blockwise8bit.h"
#include "Dims.h"
#include "Half.h"
#include "MatmulPlan.h"
#include "Nf4.h"
#include "Numeric.h"
#include "Random.h"
#include "StepAbi.h"
#include "StepError.h"
#include "TrainState.h"
#include "Window.h"

#include <cuda_runtime_api.h>
#if !defined(ZTC_CUDA_HOST_EMULATION)
#include <cublas_v2.h>
#endif

#include <math.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace ztc::cuda {

/// The shape type of every kernel (runtime/kernels/Dims.h), passed to
/// kernels by value.
using Dims = ztc::Dims;

/// What `reduce` computes over the reduced dimensions.
enum class ReduceKind { Sum, Mean, Max };

/// The first failure recorded since the last clearError(), or "" when none.
/// Reads the device-side data-error record, so call it after synchronizing.
std::string lastError();
/// Forgets the recorded failure, on the host and on the current device.
void clearError();

//===----------------------------------------------------------------------===//
// Internal helpers
//===----------------------------------------------------------------------===//

namespace detail {

// ComputeT, SumT, load, store, isNan and lowestValue: the element
// arithmetic CpuKernels.h shares.
using namespace ztc::numeric;

ZTC_HOST_DEVICE inline float mathExp(float x) { return ::expf(x); }
ZTC_HOST_DEVICE inline double mathExp(double x) { return ::exp(x); }
ZTC_HOST_DEVICE inline float mathLog(float x) { return ::logf(x); }
ZTC_HOST_DEVICE inline double mathLog(double x) { return ::log(x); }
ZTC_HOST_DEVICE inline float mathSqrt(float x) { return ::sqrtf(x); }
ZTC_HOST_DEVICE inline double mathSqrt(double x) { return ::sqrt(x); }
// Integers compute in double, as std::exp(int) does on the CPU.
template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
ZTC_HOST_DEVICE double mathExp(I x) {
  return ::exp(static_cast<double>(x));
}
template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
ZTC_HOST_DEVICE double mathLog(I x) {
  return ::log(static_cast<double>(x));
}
template <typename I, typename = std::enable_if_t<std::is_integral_v<I>>>
ZTC_HOST_DEVICE double mathSqrt(I x) {
  return ::sqrt(static_cast<double>(x));
}

/// a + b, for tree reductions.
struct SumOp {
  template <typename A> ZTC_HOST_DEVICE A operator()(A a, A b) const {
    return a + b;
  }
};

/// std::max's choice (a NaN argument b is dropped): softmax's row maximum.
struct MaxOp {
  template <typename A> ZTC_HOST_DEVICE A operator()(A a, A b) const {
    return a < b ? b : a;
  }
};

/// The maximum that propagates NaN: reduce<T, Max>.
struct MaxNanOp {
  template <typename A> ZTC_HOST_DEVICE A operator()(A a, A b) const {
    return (b > a || isNan(b)) ? b : a;
  }
};

//===----------------------------------------------------------------------===//
// Error state
//===----------------------------------------------------------------------===//

struct ErrorState {
  std::mutex mutex;
  std::string message;
  /// The device-side record was seen set and must be reset by clearError.
  bool deviceRecordSet = false;
};

inline ErrorState &errorState() {
  static ErrorState state;
  return state;
}

/// Keeps `message` unless an earlier failure is recorded.
inline void recordError(const std::string &message) {
  ErrorState &state = errorState();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.message.empty())
    state.message = message;
}

inline std::string describeCuda(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + " (" +
         cudaGetErrorString(status) + ")";
}

/// Records a failed `call` made for `kernel`; true when `status` is success.
inline bool checkCuda(cudaError_t status, const char *call,
                      const char *kernel) {
  if (status == cudaSuccess)
    return true;
  recordError(std::string(call) + " in " + kernel + ": " +
              describeCuda(status));
  return false;
}

/// Invalid data found by a kernel (ztc_step_error, StepAbi.h; worded by
/// StepError.h); the first one is kept.
constexpr int kNoDataError = ZTC_ERROR_NONE;
constexpr int kGatherIndex = ZTC_ERROR_GATHER_INDEX;
constexpr int kLossTarget = ZTC_ERROR_LOSS_TARGET;
constexpr int kScatterIndex = ZTC_ERROR_SCATTER_INDEX;

#if !defined(ZTC_CUDA_HOST_EMULATION)
/// kind: 0 free, -1 being written, else a ZTC_ERROR_* kind.
static __device__ ztc_step_error deviceDataError;
#endif

/// Called by a kernel thread that found invalid data.
static ZTC_HOST_DEVICE inline void reportDataError(int kind, int64_t value,
                                                   int64_t low, int64_t high,
                                                   bool hasIgnore = false,
                                                   int64_t ignore = 0) {
#if defined(__CUDA_ARCH__)
  if (atomicCAS(&deviceDataError.kind, 0, -1) == 0) {
    deviceDataError.value = value;
    deviceDataError.low = low;
    deviceDataError.high = high;
    deviceDataError.has_ignore = hasIgnore;
    deviceDataError.ignore = ignore;
    __threadfence();
    atomicExch(&deviceDataError.kind, kind);
  }
#else
  recordError(describeStepError(
      makeStepError(kind, value, low, high, hasIgnore, ignore)));
#endif
}

/// Moves a set device-side record into the host error state. A failing read
/// (a sticky error from a crashed kernel) is left for the caller's own
/// synchronize to report.
static inline void collectDeviceDataError() {
#if !defined(ZTC_CUDA_HOST_EMULATION)
  ztc_step_error record{};
  if (cudaMemcpyFromSymbol(&record, deviceDataError, sizeof(record)) !=
      cudaSuccess)
    return;
  if (record.kind == kNoDataError)
    return;
  recordError(describeStepError(record));
  ErrorState &state = errorState();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.deviceRecordSet = true;
#endif
}

static inline void resetDeviceDataError() {
#if !defined(ZTC_CUDA_HOST_EMULATION)
  ztc_step_error record{};
  (void)cudaMemcpyToSymbol(deviceDataError, &record, sizeof(record));
#endif
}

//===----------------------------------------------------------------------===//
// Launching kernel bodies
//===----------------------------------------------------------------------===//
//
// A kernel is a function object. An element body has
//   ZTC_HOST_DEVICE void operator()(int64_t i) const
// and runs once per element; a row body has
//   template <typename Team> ZTC_HOST_DEVICE
//   void operator()(int64_t row, const Team &team) const
// and runs once per row on a whole thread block (`team`), which splits the
// row by team.rank() / team.size() and combines partial results with
// team.reduce(value, op). Every thread of the block calls team.reduce the
// same number of times.

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;

inline unsigned blockCount(int64_t work, int64_t perBlock) {
  int64_t blocks = (work + perBlock - 1) / perBlock;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

#if defined(__CUDACC__) && !defined(ZTC_CUDA_HOST_EMULATION)
template <typename Acc> __device__ Acc shuffleDown(Acc value, int offset) {
  constexpr unsigned kAll = 0xffffffffu;
  if constexpr (std::is_same_v<Acc, float> || std::is_same_v<Acc, double>)
    return __shfl_down_sync(kAll, value, offset);
  else if constexpr (sizeof(Acc) == 8)
    return static_cast<Acc>(
        __shfl_down_sync(kAll, static_cast<long long>(value), offset));
  else
    return static_cast<Acc>(
        __shfl_down_sync(kAll, static_cast<int>(value), offset));
}

/// Combines `value` over the block (blockDim.x a multiple of 32); every
/// thread gets the result.
template <typename Acc, typename Op>
__device__ Acc blockReduce(Acc value, Op op) {
  static_assert(sizeof(Acc) <= sizeof(double), "partials hold 8 bytes");
  __shared__ double storage[32];
  Acc *partial = reinterpret_cast<Acc *>(storage);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int warps = (blockDim.x + 31) >> 5;
  // Lane 0 of each warp ends with its warp's value (lanes past the end read
  // themselves, but lane 0 never reads a lane that did).
  for (int offset = 16; offset > 0; offset >>= 1)
    value = op(value, shuffleDown(value, offset));
  __syncthreads(); // `storage` may still be read by the previous reduce
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    Acc mine = lane < warps ? partial[lane] : partial[0];
    for (int offset = 16; offset > 0; offset >>= 1) {
      Acc other = shuffleDown(mine, offset);
      if (lane + offset < warps)
        mine = op(mine, other);
    }
    if (lane == 0)
      partial[0] = mine;
  }
  __syncthreads();
  return partial[0];
}
#endif

/// The threads that run one row: the whole block on the device, one thread
/// on the host (emulation).
struct BlockTeam {
  ZTC_HOST_DEVICE int64_t rank() const {
#if defined(__CUDA_ARCH__)
    return threadIdx.x;
#else
    return 0;
#endif
  }
  ZTC_HOST_DEVICE int64_t size() const {
#if defined(__CUDA_ARCH__)
    return blockDim.x;
#else
    return 1;
#endif
  }
  template <typename Acc, typename Op>
  ZTC_HOST_DEVICE Acc reduce(Acc value, Op op) const {
#if defined(__CUDA_ARCH__)
    return blockReduce(value, op);
#else
    (void)op;
    return value;
#endif
  }
};

#if !defined(ZTC_CUDA_HOST_EMULATION)
template <typename Body>
__global__ void elementsKernel(int64_t count, Body body) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x)
    body(i);
}

template <typename Body> __global__ void rowsKernel(int64_t rows, Body body) {
  BlockTeam team;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)
    body(row, team);
}
#endif

/// Runs `body(i)` for i in [0, count).
template <typename Body>
void launchElements(int64_t count, const Body &body, cudaStream_t stream,
                    const char *kernel) {
  if (count <= 0)
    return;
#if defined(ZTC_CUDA_HOST_EMULATION)
  (void)stream;
  (void)kernel;
  for (int64_t i = 0; i < count; ++i)
    body(i);
#else
  elementsKernel<<<blockCount(count, kThreads), kThreads, 0, stream>>>(count,
                                                                       body);
  checkCuda(cudaGetLastError(), "kernel launch", kernel);
#endif
}

/// Runs `body(row, team)` for row in [0, rows), one block per row; the block
/// size follows `rowLength` (a multiple of 32, at most kThreads).
template <typename Body>
void launchRows(int64_t rows, int64_t rowLength, const Body &body,
                cudaStream_t stream, const char *kernel) {
  if (rows <= 0)
    return;
  BlockTeam team;
#if defined(ZTC_CUDA_HOST_EMULATION)
  (void)rowLength;
  (void)stream;
  (void)kernel;
  for (int64_t row = 0; row < rows; ++row)
    body(row, team);
#else
  (void)team;
  int64_t threads = (rowLength + 31) / 32 * 32;
  threads = threads < 32 ? 32 : threads > kThreads ? kThreads : threads;
  rowsKernel<<<blockCount(rows, 1), static_cast<unsigned>(threads), 0,
               stream>>>(rows, body);
  checkCuda(cudaGetLastError(), "kernel launch", kernel);
#endif
}

/// `count` elements of scratch device memory, stream-ordered; nullptr (and
/// an error recorded) on failure.
template <typename T>
T *allocateScratch(int64_t count, cudaStream_t stream, const char *kernel) {
  size_t bytes = static_cast<size_t>(count) * sizeof(T);
#if defined(ZTC_CUDA_HOST_EMULATION)
  (void)stream;
  (void)kernel;
  return static_cast<T *>(std::malloc(bytes ? bytes : 1));
#else
  void *memory = nullptr;
  if (!checkCuda(cudaMallocAsync(&memory, bytes ? bytes : 1, stream),
                 "cudaMallocAsync", kernel))
    return nullptr;
  return static_cast<T *>(memory);
#endif
}

inline void freeScratch(void *memory, cudaStream_t stream, const char *kernel) {
#if defined(ZTC_CUDA_HOST_EMULATION)
  (void)stream;
  (void)kernel;
  std::free(memory);
#else
  checkCuda(cudaFreeAsync(memory, stream), "cudaFreeAsync", kernel);
#endif
}

/// The most scratch bytes a convolution (or its gradient) takes at once; it
/// works through the batch in chunks of images that fit. A variable so
/// tests can lower it and cover the chunked path.
inline int64_t &convScratchBytes() {
  static int64_t bytes = int64_t(256) << 20;
  return bytes;
}

/// How many of `batch` images, each `perImage` elements of T, fit in
/// convScratchBytes(): at least 1.
template <typename T> int64_t imagesPerChunk(int64_t perImage, int64_t batch) {
  int64_t chunk =
      convScratchBytes() / (perImage > 0 ? perImage * int64_t(sizeof(T)) : 1);
  return chunk < 1 ? 1 : chunk > batch ? batch : chunk;
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// A batch of row-major products C[b] = A[b] * B[b] (+ C[b] when
/// accumulating): A[b] = a + b*strideA is [m, k] with leading dimension lda,
/// B[b] is [k, n] (ldb), C[b] is [m, n] (ldc). Strides may be 0.
struct GemmShape {
  int64_t batch, m, n, k, lda, ldb, ldc, strideA, strideB, strideC;
  /// A is stored [k, m] (B: [n, k]); lda (ldb) is the stored row length.
  bool transA = false, transB = false;
};

/// One output element per call, accumulated in ComputeT<T> (the CPU gemm's
/// fallback): integers, k == 0, and the host emulation.
template <typename T> struct GemmBody {
  const T *a, *b;
  T *c;
  GemmShape s;
  bool accumulate;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    int64_t col = flat % s.n, row = (flat / s.n) % s.m;
    int64_t batch = flat / (s.n * s.m);
    // Element (row, p) of op(A) and (p, col) of op(B).
    int64_t aStep = s.transA ? s.lda : 1, bStep = s.transB ? 1 : s.ldb;
    // Offsets, not pointers: with k == 0 an operand may be null, and
    // offsetting a null pointer is undefined.
    int64_t aRow = batch * s.strideA + (s.transA ? row : row * s.lda);
    int64_t bCol = batch * s.strideB + (s.transB ? col * s.ldb : col);
    T *out = c + batch * s.strideC + row * s.ldc + col;
    Acc acc = accumulate ? load(*out) : Acc(0);
    for (int64_t p = 0; p < s.k; ++p)
      acc += load(a[aRow + p * aStep]) * load(b[bCol + p * bStep]);
    *out = store<T>(acc);
  }
};

template <typename T>
constexpr bool kCublasType =
    std::is_same_v<T, float> || std::is_same_v<T, double> ||
    std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

#if !defined(ZTC_CUDA_HOST_EMULATION)
inline bool checkCublas(cublasStatus_t status, const char *call,
                        const char *kernel) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return true;
  recordError(std::string(call) + " in " + kernel + ": " +
              cublasGetStatusName(status) + " (" +
              cublasGetStatusString(status) + ")");
  return false;
}

/// Serializes cublasSetStream + the products that follow on a shared handle.
inline std::mutex &cublasMutex() {
  static std::mutex mutex;
  return mutex;
}

/// The current device's handle, created on first use (call with
/// cublasMutex() held); nullptr with an error recorded on failure.
inline cublasHandle_t cublasHandleForDevice(const char *kernel) {
  static std::vector<cublasHandle_t> handles;
  int device = 0;
  if (!checkCuda(cudaGetDevice(&device), "cudaGetDevice", kernel))
    return nullptr;
  if (handles.size() <= static_cast<size_t>(device))
    handles.resize(device + 1, nullptr);
  if (!handles[device]) {
    cublasHandle_t handle = nullptr;
    if (!checkCublas(cublasCreate(&handle), "cublasCreate", kernel))
      return nullptr;
    // No split-K reductions in 16-bit: sums stay in f32 until the store.
    checkCublas(
        cublasSetMathMode(
            handle, static_cast<cublasMath_t>(
                        CUBLAS_DEFAULT_MATH |
                        CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
        "cublasSetMathMode", kernel);
    handles[device] = handle;
  }
  return handles[device];
}

template <typename T> cudaDataType_t cublasDataType() {
  if constexpr (std::is_same_v<T, double>)
    return CUDA_R_64F;
  else if constexpr (std::is_same_v<T, f16>)
    return CUDA_R_16F;
  else if constexpr (std::is_same_v<T, bf16>)
    return CUDA_R_16BF;
  else
    return CUDA_R_32F;
}

/// GemmShape on cuBLAS. cuBLAS is column-major: the row-major C = A * B is
/// the column-major C^T = B^T * A^T, so B goes first and m and n swap; a
/// row-major matrix is its transpose to cuBLAS, so an operand stored
/// transposed is passed with CUBLAS_OP_T.
template <typename T>
void cublasGemm(const T *a, const T *b, T *c, const GemmShape &s,
                bool accumulate, cudaStream_t stream, const char *kernel) {
  const int64_t kIntMax = INT_MAX;
  if (s.m > kIntMax || s.n > kIntMax || s.k > kIntMax || s.lda > kIntMax ||
      s.ldb > kIntMax || s.ldc > kIntMax) {
    recordError(std::string(kernel) +
                ": a dimension exceeds the int range of cuBLAS");
    return;
  }
  // Double computes in double; everything else in f32 with f32 scalars.
  constexpr bool kDouble = std::is_same_v<T, double>;
  using Scalar = std::conditional_t<kDouble, double, float>;
  Scalar alpha = 1, beta = accumulate ? 1 : 0;
  cublasComputeType_t compute =
      kDouble ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  cudaDataType_t type = cublasDataType<T>();

  std::lock_guard<std::mutex> lock(cublasMutex());
  cublasHandle_t handle = cublasHandleForDevice(kernel);
  if (!handle ||
      !checkCublas(cublasSetStream(handle, stream), "cublasSetStream", kernel))
    return;
  // Batches go in chunks: grids cap the batch count cuBLAS launches.
  constexpr int64_t kMaxBatch = 65535;
  for (int64_t first = 0; first < s.batch; first += kMaxBatch) {
    int64_t count = s.batch - first < kMaxBatch ? s.batch - first : kMaxBatch;
    cublasStatus_t status = cublasGemmStridedBatchedEx(
        handle, s.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
        s.transA ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(s.n),
        static_cast<int>(s.m), static_cast<int>(s.k), &alpha,
        b + first * s.strideB, type, static_cast<int>(s.ldb), s.strideB,
        a + first * s.strideA, type, static_cast<int>(s.lda), s.strideA, &beta,
        c + first * s.strideC, type, static_cast<int>(s.ldc), s.strideC,
        static_cast<int>(count), compute, CUBLAS_GEMM_DEFAULT);
    if (!checkCublas(status, "cublasGemmStridedBatchedEx", kernel))
      return;
  }
}
#endif

/// Runs GemmShape: cuBLAS where it applies, else GemmBody.
template <typename T>
void gemm(const T *a, const T *b, T *c, const GemmShape &s, bool accumulate,
          cudaStream_t stream, const char *kernel) {
  if (s.batch == 0 || s.m == 0 || s.n == 0)
    return;
#if !defined(ZTC_CUDA_HOST_EMULATION)
  if constexpr (kCublasType<T>) {
    if (s.k > 0) {
      cublasGemm(a, b, c, s, accumulate, stream, kernel);
      return;
    }
  }
#endif
  launchElements(s.batch * s.m * s.n, GemmBody<T>{a, b, c, s, accumulate},
                 stream, kernel);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Kernel bodies
//===----------------------------------------------------------------------===//

/// conv2d's geometry: its window (Window.h) and its channels.
struct ConvPlan : Window2d {
  int64_t channels, outChannels, groupChannels, groupOut;
};

/// conv2d's plan from its input, weight and output shapes.
inline ConvPlan convPlan(const Dims &xDims, const Dims &wDims,
                         const Dims &yDims, const int64_t *strides,
                         const int64_t *pads, const int64_t *dilations,
                         int64_t group) {
  return {window2d(xDims, yDims, wDims.d + 2, strides, pads, dilations),
          xDims.d[1], wDims.d[0], wDims.d[1], wDims.d[0] / group};
}

/// cols[image][c * kH * kW + kh * kW + kw][oh * outW + ow] for the images
/// starting at x; the group-g rows are g's GEMM operand.
/// Divides flat indices by run-time divisors in 32 bits when the launch's
/// indices fit: such a division is a long instruction sequence on a GPU,
/// about twice as long in 64 bits, and index arithmetic is most of what the
/// copying kernels below do.
struct IndexMath {
  bool narrow;
  ZTC_HOST_DEVICE int64_t div(int64_t a, int64_t b) const {
    return narrow ? int64_t(uint32_t(a) / uint32_t(b)) : a / b;
  }
  ZTC_HOST_DEVICE int64_t mod(int64_t a, int64_t b) const {
    return narrow ? int64_t(uint32_t(a) % uint32_t(b)) : a % b;
  }
};

/// IndexMath for a launch over `count` elements whose divisors are extents
/// of those elements (so no larger than `count`).
inline IndexMath indexMath(int64_t count) { return {count <= INT32_MAX}; }

/// Where element `flat` of a tensor shaped like a convolution's input
/// ([images, channels, height, width]) lies.
struct InputIndex {
  int64_t image, c, h, x;
};
ZTC_HOST_DEVICE inline InputIndex inputIndex(const ConvPlan &p, int64_t flat,
                                             const IndexMath &m) {
  int64_t plane = p.width * p.height;
  return {m.div(flat, plane * p.channels),
          m.mod(m.div(flat, plane), p.channels),
          m.mod(m.div(flat, p.width), p.height), m.mod(flat, p.width)};
}

/// What im2col puts in row r = c * taps + kh * kW + kw, column `pixel`, of
/// `image`: the input element that filter tap reads for that output pixel,
/// or 0 in the padding.
template <typename T>
ZTC_HOST_DEVICE T im2colValue(const T *x, const ConvPlan &p, const IndexMath &m,
                              int64_t image, int64_t r, int64_t pixel) {
  int64_t taps = p.kH * p.kW;
  int64_t c = m.div(r, taps), kh = m.mod(m.div(r, p.kW), p.kH);
  int64_t kw = m.mod(r, p.kW);
  int64_t ih = p.inputRow(m.div(pixel, p.outW), kh);
  int64_t iw = p.inputCol(m.mod(pixel, p.outW), kw);
  bool inside = ih >= 0 && ih < p.height && iw >= 0 && iw < p.width;
  return inside ? x[((image * p.channels + c) * p.height + ih) * p.width + iw]
                : T(0.0f);
}

/// cols[image][r][pixel] (im2colValue): one image's columns after another.
template <typename T> struct Im2colBody {
  const T *x;
  T *cols;
  ConvPlan p;
  IndexMath m;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t pixels = p.outH * p.outW, rows = p.channels * p.kH * p.kW;
    int64_t pixel = m.mod(flat, pixels);
    int64_t r = m.mod(m.div(flat, pixels), rows);
    int64_t image = m.div(flat, pixels * rows);
    cols[flat] = im2colValue(x, p, m, image, r, pixel);
  }
};

/// im2col with the images side by side: cols[r][image * pixels + pixel],
/// so that one product reduces over every image and pixel (conv2d's weight
/// gradient).
template <typename T> struct Im2colRowsBody {
  const T *x;
  T *cols;
  ConvPlan p;
  int64_t images;
  IndexMath m;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t pixels = p.outH * p.outW;
    int64_t column = m.mod(flat, images * pixels);
    int64_t r = m.div(flat, images * pixels);
    cols[flat] =
        im2colValue(x, p, m, m.div(column, pixels), r, m.mod(column, pixels));
  }
};

/// y[o][image * pixels + pixel] = x[image][o][pixel]: a batch of channel
/// planes with the images side by side per channel.
template <typename T> struct ImagesSideBySideBody {
  const T *x;
  T *y;
  int64_t images, channels, pixels;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t pixel = flat % pixels, image = (flat / pixels) % images;
    int64_t o = flat / (pixels * images);
    y[flat] = x[(image * channels + o) * pixels + pixel];
  }
};

/// col2im: gx[image][c][h][w] sums the columns (laid out as Im2colBody
/// writes them) that read (h, w), in filter-tap order.
template <typename T> struct Col2imBody {
  const T *cols;
  T *gx;
  ConvPlan p;
  IndexMath m;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    InputIndex at = inputIndex(p, flat, m);
    int64_t pixels = p.outH * p.outW, taps = p.kH * p.kW;
    const T *rows = cols + (at.image * p.channels + at.c) * taps * pixels;
    Acc sum = 0;
    p.forEachReaderOf(
        at.h, at.x, [&](int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
          sum += load(rows[(kh * p.kW + kw) * pixels + oh * p.outW + ow]);
        });
    gx[flat] = store<T>(sum);
  }
};

/// y[image][o][pixel] = bias[o]: the GEMM then accumulates onto it, so the
/// sum rounds once, as on the CPU.
template <typename T> struct BiasFillBody {
  const T *bias;
  T *y;
  int64_t channels, pixels;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    y[flat] = bias[(flat / pixels) % channels];
  }
};

/// One output of conv2d summed directly.
template <typename T> struct DirectConvBody {
  const T *x, *w, *bias;
  T *y;
  ConvPlan p;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    int64_t ow = flat % p.outW, oh = (flat / p.outW) % p.outH;
    int64_t o = (flat / (p.outW * p.outH)) % p.outChannels;
    int64_t n = flat / (p.outW * p.outH * p.outChannels);
    int64_t g = o / p.groupOut;
    Acc acc = bias ? load(bias[o]) : Acc(0);
    for (int64_t c = 0; c < p.groupChannels; ++c) {
      const T *plane =
          x + (n * p.channels + g * p.groupChannels + c) * p.height * p.width;
      const T *taps = w + (o * p.groupChannels + c) * p.kH * p.kW;
      p.forEachTap(oh, ow, [&](int64_t kh, int64_t kw, int64_t ih, int64_t iw) {
        acc += load(plane[ih * p.width + iw]) * load(taps[kh * p.kW + kw]);
      });
    }
    y[flat] = store<T>(acc);
  }
};

template <typename T> struct MaxPoolBody {
  const T *x;
  T *y;
  Window2d p;
  ComputeT<T> lowest;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t ow = flat % p.outW, oh = (flat / p.outW) % p.outH;
    const T *in = x + (flat / (p.outW * p.outH)) * p.height * p.width;
    MaxPick<ComputeT<T>> pick = p.maxPick(in, oh, ow);
    y[flat] = store<T>(pick.where < 0 ? lowest : pick.value);
  }
};

template <typename T> struct AvgPoolBody {
  const T *x;
  T *y;
  Window2d p;
  bool countIncludePad;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    int64_t ow = flat % p.outW, oh = (flat / p.outW) % p.outH;
    const T *in = x + (flat / (p.outW * p.outH)) * p.height * p.width;
    Span rows = p.rowSpan(oh), cols = p.colSpan(ow);
    Acc sum = 0;
    for (int64_t ih = rows.begin; ih < rows.end; ++ih)
      for (int64_t iw = cols.begin; iw < cols.end; ++iw)
        sum += load(in[ih * p.width + iw]);
    int64_t count = p.avgDivisor(rows, cols, countIncludePad);
    y[flat] = store<T>(sum / static_cast<Acc>(count));
  }
};

/// softmax (log = false) or logSoftmax (log = true) of one row along the
/// axis: `length` elements `inner` apart.
template <typename T> struct SoftmaxBody {
  const T *x;
  T *y;
  int64_t length, inner;
  bool log;
  ComputeT<T> lowest;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    int64_t base = (row / inner) * length * inner + row % inner;
    const T *in = x + base;
    T *out = y + base;
    Acc maximum = lowest;
    for (int64_t i = team.rank(); i < length; i += team.size())
      maximum = MaxOp()(maximum, load(in[i * inner]));
    maximum = team.reduce(maximum, MaxOp());
    Acc sum = 0;
    for (int64_t i = team.rank(); i < length; i += team.size())
      sum += mathExp(load(in[i * inner]) - maximum);
    sum = team.reduce(sum, SumOp());
    if (log) {
      Acc shift = maximum + mathLog(sum);
      for (int64_t i = team.rank(); i < length; i += team.size())
        out[i * inner] = store<T>(load(in[i * inner]) - shift);
    } else {
      for (int64_t i = team.rank(); i < length; i += team.size())
        out[i * inner] = store<T>(mathExp(load(in[i * inner]) - maximum) / sum);
    }
  }
};

/// The mean of a row and one over its standard deviation (`epsilon` added
/// to the variance), computed by the whole team: layerNorm and its
/// gradient compute them alike.
template <typename T, typename Team>
ZTC_HOST_DEVICE void rowStatistics(const T *in, int64_t length, double epsilon,
                                   const Team &team, ComputeT<T> &mean,
                                   ComputeT<T> &inverse) {
  using Acc = ComputeT<T>;
  Acc sum = 0;
  for (int64_t i = team.rank(); i < length; i += team.size())
    sum += load(in[i]);
  mean = team.reduce(sum, SumOp()) / static_cast<Acc>(length);
  Acc squares = 0;
  for (int64_t i = team.rank(); i < length; i += team.size()) {
    Acc centered = load(in[i]) - mean;
    squares += centered * centered;
  }
  Acc variance = team.reduce(squares, SumOp()) / static_cast<Acc>(length);
  inverse = Acc(1) / mathSqrt(variance + static_cast<Acc>(epsilon));
}

template <typename T> struct LayerNormBody {
  const T *x, *scale, *bias;
  T *y;
  int64_t length;
  double epsilon;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    const T *in = x + row * length;
    T *out = y + row * length;
    Acc mean, inverse;
    rowStatistics(in, length, epsilon, team, mean, inverse);
    for (int64_t i = team.rank(); i < length; i += team.size()) {
      Acc value = (load(in[i]) - mean) * inverse * load(scale[i]);
      if (bias)
        value += load(bias[i]);
      out[i] = store<T>(value);
    }
  }
};

/// One row of layerNormBackward (CpuKernels.h has the formula).
template <typename T> struct LayerNormBackwardBody {
  const T *x, *scale, *gy;
  T *gx;
  int64_t length;
  double epsilon;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using Acc = ComputeT<T>;
    const T *in = x + row * length, *g = gy + row * length;
    T *out = gx + row * length;
    Acc mean, rstd;
    rowStatistics(in, length, epsilon, team, mean, rstd);
    Acc dnSum = 0, dnXhatSum = 0;
    for (int64_t i = team.rank(); i < length; i += team.size()) {
      Acc dn = load(g[i]) * load(scale[i]);
      dnSum += dn;
      dnXhatSum += dn * (load(in[i]) - mean) * rstd;
    }
    Acc dnMean = team.reduce(dnSum, SumOp()) / static_cast<Acc>(length);
    Acc dnXhatMean = team.reduce(dnXhatSum, SumOp()) / static_cast<Acc>(length);
    for (int64_t i = team.rank(); i < length; i += team.size()) {
      Acc dn = load(g[i]) * load(scale[i]);
      Acc xhat = (load(in[i]) - mean) * rstd;
      out[i] = store<T>(rstd * (dn - dnMean - xhat * dnXhatMean));
    }
  }
};

template <typename T> struct BatchNormBody {
  const T *x, *scale, *bias, *mean, *var;
  T *y;
  int64_t channels, spatial;
  double epsilon;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    int64_t c = (flat / spatial) % channels;
    Acc inverse = Acc(1) / mathSqrt(load(var[c]) + static_cast<Acc>(epsilon));
    Acc factor = load(scale[c]) * inverse;
    Acc shift = load(bias[c]) - load(mean[c]) * factor;
    y[flat] = store<T>(load(x[flat]) * factor + shift);
  }
};

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

/// The whole loss on one block: per-element values for reduction none, the
/// sum and the weight sum reduced in SumT<T> otherwise.
template <typename T, typename I> struct NllLossBody {
  const T *logProbs;
  const I *target;
  const T *weight;
  T *y;
  int64_t batch, classes, spatial, reduction, ignoreIndex;
  bool hasIgnore;
  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t, const Team &team) const {
    using Acc = SumT<T>;
    Acc total = 0, weightSum = 0;
    for (int64_t e = team.rank(); e < batch * spatial; e += team.size()) {
      int64_t n = e / spatial, s = e % spatial;
      int64_t t = static_cast<int64_t>(target[e]);
      Acc loss = 0;
      if (!(hasIgnore && t == ignoreIndex)) {
        if (t < 0 || t >= classes) {
          reportDataError(kLossTarget, t, 0, classes, hasIgnore, ignoreIndex);
        } else {
          Acc w = weight ? static_cast<Acc>(load(weight[t])) : Acc(1);
          loss = -w * static_cast<Acc>(
                          load(logProbs[(n * classes + t) * spatial + s]));
          weightSum += w;
        }
      }
      if (reduction == 0)
        y[e] = store<T>(loss);
      total += loss;
    }
    total = team.reduce(total, SumOp());
    weightSum = team.reduce(weightSum, SumOp());
    if (team.rank() != 0)
      return;
    if (reduction == 1)
      y[0] = store<T>(total);
    else if (reduction == 2)
      y[0] = store<T>(total / weightSum);
  }
};

//===----------------------------------------------------------------------===//
// Gradient bodies
//===----------------------------------------------------------------------===//
//
// Each body computes one output element by gathering what contributes to it,
// in the order the CPU kernel accumulates: no atomics, so results are
// deterministic and equal the CPU's up to the precision of the sum type.
// The convolution's gradients use their bodies only where a product cannot
// serve (integers, and half types where the product's result would round
// more often): a thread per weight element summing over the whole batch
// leaves most of a GPU idle.

/// gx[n, c, h, w] of conv2d: gy * w over the output positions and filter
/// taps that read (h, w). The plan's sizes are the forward conv's.
template <typename T> struct ConvBackwardDataBody {
  const T *gy, *w;
  T *gx;
  ConvPlan p;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    InputIndex at = inputIndex(p, flat, IndexMath{false});
    int64_t n = at.image;
    int64_t g = at.c / p.groupChannels, ic = at.c % p.groupChannels;
    Acc sum = 0;
    p.forEachReaderOf(
        at.h, at.x, [&](int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
          for (int64_t j = 0; j < p.groupOut; ++j) {
            int64_t oc = g * p.groupOut + j;
            sum +=
                load(gy[((n * p.outChannels + oc) * p.outH + oh) * p.outW +
                        ow]) *
                load(w[((oc * p.groupChannels + ic) * p.kH + kh) * p.kW + kw]);
          }
        });
    gx[flat] = store<T>(sum);
  }
};

/// gw[oc, ic, kh, kw] of conv2d: gy[n, oc, oh, ow] * x[n, g * C/g + ic, tap]
/// over the batch and the output positions.
template <typename T> struct ConvBackwardFilterBody {
  const T *x, *gy;
  T *gw;
  ConvPlan p;
  int64_t batch;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    int64_t kw = flat % p.kW, kh = (flat / p.kW) % p.kH;
    int64_t ic = (flat / (p.kW * p.kH)) % p.groupChannels;
    int64_t oc = flat / (p.kW * p.kH * p.groupChannels);
    int64_t g = oc / p.groupOut;
    Acc sum = 0;
    for (int64_t n = 0; n < batch; ++n) {
      const T *in =
          x + (n * p.channels + g * p.groupChannels + ic) * p.height * p.width;
      const T *grad = gy + (n * p.outChannels + oc) * p.outH * p.outW;
      p.forEachOutputOfTap(
          kh, kw, [&](int64_t oh, int64_t ow, int64_t ih, int64_t iw) {
            sum += load(grad[oh * p.outW + ow]) * load(in[ih * p.width + iw]);
          });
    }
    gw[flat] = store<T>(sum);
  }
};

/// The output rows (or columns) whose pooling window covers input index
/// `i`: [first, last], with `(i + pad - o * stride) % dilation == 0` left to
/// the caller.
struct CoveringWindows {
  int64_t first, last;
};
ZTC_HOST_DEVICE inline CoveringWindows
coveringWindows(int64_t i, int64_t pad, int64_t stride, int64_t kernel,
                int64_t dilation, int64_t outSize) {
  // o * stride - pad <= i  and  i <= o * stride - pad + (kernel-1)*dilation.
  int64_t high = i + pad;
  int64_t low = high - (kernel - 1) * dilation;
  int64_t first = low <= 0 ? 0 : (low + stride - 1) / stride;
  int64_t last = high / stride;
  return {first, last < outSize - 1 ? last : outSize - 1};
}

/// gx of maxPool2d at one input element: the gradients of the windows
/// whose pick (the first maximum, or the last NaN: MaxPoolBody's and the
/// CPU's rule) is this element, in window order.
template <typename T> struct MaxPoolBackwardBody {
  const T *x, *gy;
  T *gx;
  Window2d p;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    int64_t iw = flat % p.width, ih = (flat / p.width) % p.height;
    int64_t plane = flat / (p.width * p.height);
    const T *in = x + plane * p.height * p.width;
    const T *grad = gy + plane * p.outH * p.outW;
    CoveringWindows rows =
        coveringWindows(ih, p.padH, p.strideH, p.kH, p.dilationH, p.outH);
    CoveringWindows cols =
        coveringWindows(iw, p.padW, p.strideW, p.kW, p.dilationW, p.outW);
    Acc sum = 0;
    for (int64_t oh = rows.first; oh <= rows.last; ++oh) {
      if ((ih + p.padH - oh * p.strideH) % p.dilationH)
        continue;
      for (int64_t ow = cols.first; ow <= cols.last; ++ow) {
        if ((iw + p.padW - ow * p.strideW) % p.dilationW)
          continue;
        if (p.maxPick(in, oh, ow).where == ih * p.width + iw)
          sum += load(grad[oh * p.outW + ow]);
      }
    }
    gx[flat] = store<T>(sum);
  }
};

/// gx of avgPool2d at one input element: each covering window's gradient
/// divided by the window's divisor (AvgPoolBody's), in window order.
template <typename T> struct AvgPoolBackwardBody {
  const T *gy;
  T *gx;
  Window2d p;
  bool countIncludePad;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    int64_t iw = flat % p.width, ih = (flat / p.width) % p.height;
    const T *grad = gy + (flat / (p.width * p.height)) * p.outH * p.outW;
    CoveringWindows rows =
        coveringWindows(ih, p.padH, p.strideH, p.kH, 1, p.outH);
    CoveringWindows cols =
        coveringWindows(iw, p.padW, p.strideW, p.kW, 1, p.outW);
    Acc sum = 0;
    for (int64_t oh = rows.first; oh <= rows.last; ++oh) {
      Span rowSpan = p.rowSpan(oh);
      for (int64_t ow = cols.first; ow <= cols.last; ++ow) {
        int64_t count = p.avgDivisor(rowSpan, p.colSpan(ow), countIncludePad);
        sum += load(grad[oh * p.outW + ow]) / static_cast<Acc>(count);
      }
    }
    gx[flat] = store<T>(sum);
  }
};

/// scatterAdd for one (outer, inner) column: every update of the column in
/// index order, so repeated indices accumulate without atomics.
template <typename T, typename I> struct ScatterAddColumnBody {
  const I *indices;
  const T *updates;
  T *y;
  int64_t length, inner, count;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    int64_t o = flat / inner, i = flat % inner;
    for (int64_t j = 0; j < count; ++j) {
      int64_t index = static_cast<int64_t>(indices[j]);
      if (index < -length || index >= length) {
        // Skipped: y keeps data there; the step reports the error.
        reportDataError(kScatterIndex, index, -length, length);
        continue;
      }
      if (index < 0)
        index += length;
      T &to = y[(o * length + index) * inner + i];
      to = store<T>(load(to) + load(updates[(o * count + j) * inner + i]));
    }
  }
};

/// Element i of a random stream (Random.h). The key is a binding the host
/// writes before the call, so it is read here, on the device.
template <typename T> struct RandomUniformBody {
  const int64_t *key;
  T *y;
  uint64_t randomStream;
  ZTC_HOST_DEVICE void operator()(int64_t i) const {
    uint64_t base =
        random::streamBase(static_cast<uint64_t>(*key), randomStream);
    y[i] = static_cast<T>(random::uniformAt(base, static_cast<uint64_t>(i)));
  }
};

} // namespace detail

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

inline std::string lastError() {
  detail::collectDeviceDataError();
  detail::ErrorState &state = detail::errorState();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.message;
}

inline void clearError() {
  detail::ErrorState &state = detail::errorState();
  bool resetDevice;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.message.clear();
    resetDevice = state.deviceRecordSet;
    state.deviceRecordSet = false;
  }
  if (resetDevice)
    detail::resetDeviceDataError();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

/// c = a @ b, numpy-style (MatmulPlan.h); transA/transB: the operand is
/// stored with its last two dimensions swapped.
template <typename T>
void matmul(const T *a, const Dims &aDims, const T *b, const Dims &bDims, T *c,
            const Dims &cDims, bool transA, bool transB, cudaStream_t stream) {
  MatmulPlan p = planMatmul(aDims, bDims, cDims, transA, transB);
  if (p.batches == 0)
    return;
  if (p.single) {
    detail::gemm(a, b, c,
                 {1, p.batches * p.m, p.n, p.k, p.lda, p.ldb, p.ldc, 0, 0, 0,
                  false, p.transB},
                 false, stream, "matmul");
    return;
  }
  // Each group is one strided batch; the host loops over the groups.
  for (int64_t o = 0; o < p.outer; ++o) {
    int64_t aOffset, bOffset;
    p.offsets(o, aOffset, bOffset);
    detail::gemm(a + aOffset, b + bOffset, c + o * p.inner * p.m * p.n,
                 {p.inner, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.strideA,
                  p.strideB, p.m * p.n, p.transA, p.transB},
                 false, stream, "matmul");
  }
}

template <typename T>
void conv2d(const T *x, const Dims &xDims, const T *w, const Dims &wDims,
            const T *bias, T *y, const Dims &yDims, const int64_t *strides,
            const int64_t *pads, const int64_t *dilations, int64_t group,
            cudaStream_t stream) {
  detail::ConvPlan p =
      detail::convPlan(xDims, wDims, yDims, strides, pads, dilations, group);
  int64_t batch = xDims.d[0];
  int64_t patch = p.groupChannels * p.kH * p.kW; // gemm K
  int64_t pixels = p.outH * p.outW;              // gemm N
  if (batch == 0 || p.outChannels == 0 || pixels == 0)
    return;

  // Short patches (depthwise, first layers) and integers: sum directly.
  constexpr int64_t kDirectPatch = 32;
  if (!detail::kCublasType<T> || patch <= kDirectPatch) {
    detail::launchElements(batch * p.outChannels * pixels,
                           detail::DirectConvBody<T>{x, w, bias, y, p}, stream,
                           "conv2d");
    return;
  }

  // im2col + GEMM per group, over as many images at a time as fit in
  // convScratchBytes() of columns.
  bool direct = p.readsInputAsIs();
  int64_t imageCols = p.channels * p.kH * p.kW * pixels;
  int64_t chunk = detail::imagesPerChunk<T>(imageCols, batch);
  T *cols = nullptr;
  if (!direct) {
    cols = detail::allocateScratch<T>(chunk * imageCols, stream, "conv2d");
    if (!cols)
      return;
  }
  int64_t imageIn = p.channels * p.height * p.width;
  int64_t imageOut = p.outChannels * pixels;
  for (int64_t first = 0; first < batch; first += chunk) {
    int64_t images = batch - first < chunk ? batch - first : chunk;
    const T *input = x + first * imageIn;
    T *output = y + first * imageOut;
    if (!direct)
      detail::launchElements(
          images * imageCols,
          detail::Im2colBody<T>{input, cols, p,
                                detail::indexMath(images * imageCols)},
          stream, "conv2d");
    if (bias)
      detail::launchElements(
          images * imageOut,
          detail::BiasFillBody<T>{bias, output, p.outChannels, pixels}, stream,
          "conv2d");
    const T *operand = direct ? input : cols;
    int64_t operandStride = direct ? imageIn : imageCols;
    for (int64_t g = 0; g < group; ++g)
      detail::gemm(w + g * p.groupOut * patch,
                   operand +
                       g * (direct ? p.groupChannels * pixels : patch * pixels),
                   output + g * p.groupOut * pixels,
                   {images, p.groupOut, pixels, patch, patch, pixels, pixels, 0,
                    operandStride, imageOut},
                   bias != nullptr, stream, "conv2d");
  }
  if (cols)
    detail::freeScratch(cols, stream, "conv2d");
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

template <typename T>
void maxPool2d(const T *x, const Dims &xDims, T *y, const Dims &yDims,
               const int64_t *kernel, const int64_t *strides,
               const int64_t *pads, const int64_t *dilations,
               cudaStream_t stream) {
  Window2d p = window2d(xDims, yDims, kernel, strides, pads, dilations);
  detail::launchElements(
      yDims.numElements(),
      detail::MaxPoolBody<T>{x, y, p,
                             detail::lowestValue<detail::ComputeT<T>>()},
      stream, "maxPool2d");
}

template <typename T>
void avgPool2d(const T *x, const Dims &xDims, T *y, const Dims &yDims,
               const int64_t *kernel, const int64_t *strides,
               const int64_t *pads, bool countIncludePad, cudaStream_t stream) {
  Window2d p = window2d(xDims, yDims, kernel, strides, pads, nullptr);
  detail::launchElements(yDims.numElements(),
                         detail::AvgPoolBody<T>{x, y, p, countIncludePad},
                         stream, "avgPool2d");
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

namespace detail {

template <typename T>
void softmaxImpl(const T *x, const Dims &dims, int64_t axis, T *y, bool log,
                 cudaStream_t stream, const char *kernel) {
  if (axis < 0)
    axis += dims.rank;
  int64_t outer = product(dims, 0, axis), length = dims.d[axis];
  int64_t inner = product(dims, axis + 1, dims.rank);
  if (length == 0)
    return;
  launchRows(
      outer * inner, length,
      SoftmaxBody<T>{x, y, length, inner, log, lowestValue<ComputeT<T>>()},
      stream, kernel);
}

} // namespace detail

template <typename T>
void softmax(const T *x, const Dims &dims, int64_t axis, T *y,
             cudaStream_t stream) {
  detail::softmaxImpl(x, dims, axis, y, /*log=*/false, stream, "softmax");
}

template <typename T>
void logSoftmax(const T *x, const Dims &dims, int64_t axis, T *y,
                cudaStream_t stream) {
  detail::softmaxImpl(x, dims, axis, y, /*log=*/true, stream, "logSoftmax");
}

template <typename T>
void layerNorm(const T *x, const Dims &dims, int64_t axis, const T *scale,
               const T *bias, double epsilon, T *y, cudaStream_t stream) {
  auto [rows, length] = normalizedRows(dims, axis);
  if (length == 0)
    return;
  detail::launchRows(
      rows, length,
      detail::LayerNormBody<T>{x, scale, bias, y, length, epsilon}, stream,
      "layerNorm");
}

template <typename T>
void layerNormBackward(const T *x, const Dims &dims, int64_t axis,
                       const T *scale, const T *gy, double epsilon, T *gx,
                       cudaStream_t stream) {
  auto [rows, length] = normalizedRows(dims, axis);
  if (length == 0)
    return;
  detail::launchRows(
      rows, length,
      detail::LayerNormBackwardBody<T>{x, scale, gy, gx, length, epsilon},
      stream, "layerNormBackward");
}

template <typename T>
void batchNorm(const T *x, const Dims &dims, const T *scale, const T *bias,
               const T *mean, const T *var, double epsilon, T *y,
               cudaStream_t stream) {
  detail::launchElements(
      dims.numElements(),
      detail::BatchNormBody<T>{x, scale, bias, mean, var, y, dims.d[1],
                               product(dims, 2, dims.rank), epsilon},
      stream, "batchNorm");
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

template <typename T>
void transpose(const T *x, const Dims &dims, const int64_t *perm, T *y,
               cudaStream_t stream) {
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
void slice(const T *x, const Dims &dims, const int64_t *starts,
           const int64_t *steps, T *y, const Dims &yDims, cudaStream_t stream) {
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
              int64_t axis, int64_t offset, cudaStream_t stream) {
  int64_t xStrides[8], yStrides[8];
  contiguousStrides(xDims, xStrides);
  contiguousStrides(yDims, yStrides);
  detail::stridedCopy(x, xStrides, y + offset * yStrides[axis], yStrides, xDims,
                      stream, "copyInto");
}

template <typename T, typename I>
void gather(const T *data, const Dims &dataDims, const I *indices,
            const Dims &indexDims, int64_t axis, T *y, cudaStream_t stream) {
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
void trilu(const T *x, const Dims &dims, bool upper, int64_t diagonal, T *y,
           cudaStream_t stream) {
  int64_t rows = dims.d[dims.rank - 2], cols = dims.d[dims.rank - 1];
  detail::launchElements(
      dims.numElements(),
      detail::TriluBody<T>{x, y, rows, cols, diagonal, upper}, stream, "trilu");
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

template <typename T, typename I>
void nllLoss(const T *logProbs, const Dims &lpDims, const I *target,
             const T *weight, int64_t reduction, bool hasIgnore,
             int64_t ignoreIndex, T *y, cudaStream_t stream) {
  int64_t batch = lpDims.d[0], classes = lpDims.d[1];
  int64_t spatial = product(lpDims, 2, lpDims.rank);
  // One block: its fixed-shape tree keeps the sum deterministic, and the
  // work is small next to the log-softmax before it.
  detail::launchRows(
      1, batch * spatial,
      detail::NllLossBody<T, I>{logProbs, target, weight, y, batch, classes,
                                spatial, reduction, ignoreIndex, hasIgnore},
      stream, "nllLoss");
}

//===----------------------------------------------------------------------===//
// Gradients (adjoints of the kernels above)
//===----------------------------------------------------------------------===//

template <typename T>
void conv2dBackwardData(const T *gy, const Dims &gyDims, const T *w,
                        const Dims &wDims, T *gx, const Dims &gxDims,
                        const int64_t *strides, const int64_t *pads,
                        const int64_t *dilations, int64_t group,
                        cudaStream_t stream) {
  detail::ConvPlan p =
      detail::convPlan(gxDims, wDims, gyDims, strides, pads, dilations, group);
  int64_t batch = gxDims.d[0];
  int64_t patch = p.groupChannels * p.kH * p.kW;
  int64_t pixels = p.outH * p.outW;
  int64_t rows = p.channels * p.kH * p.kW;
  // f32 and f64: per image, the columns' gradient w^T * gy (one product
  // per group), then col2im. Half types keep the direct sum, which rounds
  // once (the columns would round each partial sum to the half type).
  if (!(std::is_same_v<T, float> || std::is_same_v<T, double>) || batch == 0 ||
      pixels == 0 || p.groupOut == 0) {
    detail::launchElements(gxDims.numElements(),
                           detail::ConvBackwardDataBody<T>{gy, w, gx, p},
                           stream, "conv2dBackwardData");
    return;
  }
  int64_t chunk = detail::imagesPerChunk<T>(rows * pixels, batch);
  T *cols = detail::allocateScratch<T>(chunk * rows * pixels, stream,
                                       "conv2dBackwardData");
  if (!cols)
    return;
  int64_t imageIn = p.channels * p.height * p.width;
  int64_t imageOut = p.outChannels * pixels;
  for (int64_t first = 0; first < batch; first += chunk) {
    int64_t images = batch - first < chunk ? batch - first : chunk;
    for (int64_t g = 0; g < group; ++g)
      detail::gemm(w + g * p.groupOut * patch,
                   gy + first * imageOut + g * p.groupOut * pixels,
                   cols + g * patch * pixels,
                   {images, patch, pixels, p.groupOut, patch, pixels, pixels, 0,
                    imageOut, rows * pixels, /*transA=*/true, false},
                   false, stream, "conv2dBackwardData");
    detail::launchElements(
        images * imageIn,
        detail::Col2imBody<T>{cols, gx + first * imageIn, p,
                              detail::indexMath(images * imageIn)},
        stream, "conv2dBackwardData");
  }
  detail::freeScratch(cols, stream, "conv2dBackwardData");
}

template <typename T>
void conv2dBackwardFilter(const T *x, const Dims &xDims, const T *gy,
                          const Dims &gyDims, T *gw, const Dims &gwDims,
                          const int64_t *strides, const int64_t *pads,
                          const int64_t *dilations, int64_t group,
                          cudaStream_t stream) {
  detail::ConvPlan p =
      detail::convPlan(xDims, gwDims, gyDims, strides, pads, dilations, group);
  int64_t batch = xDims.d[0];
  int64_t patch = p.groupChannels * p.kH * p.kW;
  int64_t pixels = p.outH * p.outW;
  int64_t rows = p.channels * p.kH * p.kW;
  // One product per group over all images and pixels at once: gw_g =
  // gy_g * cols_g^T, with gy and the columns laid out images side by side.
  // Integers, and half types whose batch needs several chunks (each would
  // round the running sum to the half type), keep the direct sum.
  int64_t chunk =
      detail::imagesPerChunk<T>((rows + p.outChannels) * pixels, batch);
  constexpr bool kWide = std::is_same_v<T, float> || std::is_same_v<T, double>;
  if (!detail::kCublasType<T> || (!kWide && chunk < batch) || batch == 0 ||
      pixels == 0) {
    detail::launchElements(
        gwDims.numElements(),
        detail::ConvBackwardFilterBody<T>{x, gy, gw, p, batch}, stream,
        "conv2dBackwardFilter");
    return;
  }
  T *cols = detail::allocateScratch<T>(chunk * rows * pixels, stream,
                                       "conv2dBackwardFilter");
  T *grads = cols ? detail::allocateScratch<T>(chunk * p.outChannels * pixels,
                                               stream, "conv2dBackwardFilter")
                  : nullptr;
  if (!grads) {
    if (cols)
      detail::freeScratch(cols, stream, "conv2dBackwardFilter");
    return;
  }
  int64_t imageIn = p.channels * p.height * p.width;
  int64_t imageOut = p.outChannels * pixels;
  for (int64_t first = 0; first < batch; first += chunk) {
    int64_t images = batch - first < chunk ? batch - first : chunk;
    int64_t width = images * pixels;
    detail::launchElements(
        rows * width,
        detail::Im2colRowsBody<T>{x + first * imageIn, cols, p, images,
                                  detail::indexMath(rows * width)},
        stream, "conv2dBackwardFilter");
    detail::launchElements(
        p.outChannels * width,
        detail::ImagesSideBySideBody<T>{gy + first * imageOut, grads, images,
                                        p.outChannels, pixels},
        stream, "conv2dBackwardFilter");
    for (int64_t g = 0; g < group; ++g)
      detail::gemm(grads + g * p.groupOut * width, cols + g * patch * width,
                   gw + g * p.groupOut * patch,
                   {1, p.groupOut, patch, width, width, width, patch, 0, 0, 0,
                    false, /*transB=*/true},
                   first > 0, stream, "conv2dBackwardFilter");
  }
  detail::freeScratch(grads, stream, "conv2dBackwardFilter");
  detail::freeScratch(cols, stream, "conv2dBackwardFilter");
}

template <typename T>
void maxPool2dBackward(const T *x, const Dims &xDims, const T *gy,
                       const Dims &gyDims, T *gx, const int64_t *kernel,
                       const int64_t *strides, const int64_t *pads,
                       const int64_t *dilations, cudaStream_t stream) {
  Window2d p = window2d(xDims, gyDims, kernel, strides, pads, dilations);
  detail::launchElements(xDims.numElements(),
                         detail::MaxPoolBackwardBody<T>{x, gy, gx, p}, stream,
                         "maxPool2dBackward");
}

template <typename T>
void avgPool2dBackward(const T *gy, const Dims &gyDims, T *gx,
                       const Dims &gxDims, const int64_t *kernel,
                       const int64_t *strides, const int64_t *pads,
                       bool countIncludePad, cudaStream_t stream) {
  Window2d p = window2d(gxDims, gyDims, kernel, strides, pads, nullptr);
  detail::launchElements(
      gxDims.numElements(),
      detail::AvgPoolBackwardBody<T>{gy, gx, p, countIncludePad}, stream,
      "avgPool2dBackward");
}

/// y = data with updates added at indices along axis (np.add.at). One
/// thread per (outer, inner) column walks the indices in order.
template <typename T, typename I>
void scatterAdd(const T *data, const Dims &dataDims, const I *indices,
                const Dims &indexDims, const T *updates, int64_t axis, T *y,
                cudaStream_t stream) {
  int64_t strides[8];
  contiguousStrides(dataDims, strides);
  detail::stridedCopy(data, strides, y, strides, dataDims, stream,
                      "scatterAdd");
  int64_t outer = product(dataDims, 0, axis);
  int64_t inner = product(dataDims, axis + 1, dataDims.rank);
  int64_t count = indexDims.numElements();
  if (count == 0)
    return;
  detail::launchElements(outer * inner,
                         detail::ScatterAddColumnBody<T, I>{indices, updates, y,
                                                            dataDims.d[axis],
                                                            inner, count},
                         stream, "scatterAdd");
}

/// y = dest with source written at starts + i * steps (slice's adjoint).
template <typename T>
void insertSlice(const T *dest, const Dims &destDims, const T *source,
                 const Dims &sourceDims, const int64_t *starts,
                 const int64_t *steps, T *y, cudaStream_t stream) {
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

//===----------------------------------------------------------------------===//
// Random numbers
//===----------------------------------------------------------------------===//

/// The values of CpuKernels.h's randomUniform, bit for bit; `key` is a
/// device pointer like every data pointer.
template <typename T>
void randomUniform(const int64_t *key, uint64_t randomStream, T *y,
                   const Dims &dims, cudaStream_t stream) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "random values are float or double");
  detail::launchElements(dims.numElements(),
                         detail::RandomUniformBody<T>{key, y, randomStream},
                         stream, "randomUniform");
}

namespace detail {
template <typename T> struct RecordLossBody {
  ztc_train_state *state;
  const T *loss;
  ZTC_HOST_DEVICE void operator()(int64_t) const {
    recordLossInto(state, *loss);
  }
};
} // namespace detail

#if !defined(ZTC_CUDA_HOST_EMULATION)
/// Moves the device-side data error into the slot (unless it holds one).
__global__ void collectErrorsKernel(ztc_step_error *slot) {
  if (detail::deviceDataError.kind > 0) {
    if (slot->kind == ZTC_ERROR_NONE)
      *slot = detail::deviceDataError;
    detail::deviceDataError = ztc_step_error{};
  }
}
#endif

/// An entry's last work: one thread on `stream` moves the first data error
/// its kernels found into the context's error slot, on the device, so the
/// host learns of it when it next waits (the step never waits for it). In
/// the host emulation errors stay with lastError().
inline void collectErrors(ztc_step_error *slot, cudaStream_t stream) {
#if defined(ZTC_CUDA_HOST_EMULATION)
  (void)slot;
  (void)stream;
#else
  if (!slot)
    return;
  collectErrorsKernel<<<1, 1, 0, stream>>>(slot);
  detail::checkCuda(cudaGetLastError(), "kernel launch", "collectErrors");
#endif
}

/// kernel.record_loss: one thread on the step's stream adds `*loss` (a
/// device pointer) to the context's training state, so the host never
/// waits for the loss (TrainState.h).
template <typename T>
void recordLoss(ztc_train_state *state, const T *loss, cudaStream_t stream) {
  detail::launchElements(1, detail::RecordLossBody<T>{state, loss}, stream,
                         "recordLoss");
}

namespace detail {
template <typename T> struct CheckFiniteBody {
  ztc_train_state *state;
  const T *x;
  int64_t check;
  ZTC_HOST_DEVICE void operator()(int64_t i) const {
    if (!nonFinite(x[i]))
      return;
      // Kernels of one stream run in order: the first check to find one
      // wins; threads of the same check write the same value.
#if defined(__CUDA_ARCH__)
    atomicCAS(
        reinterpret_cast<unsigned long long *>(&state->first_nonfinite_check),
        0ull, static_cast<unsigned long long>(check));
#else
    if (state->first_nonfinite_check == 0)
      state->first_nonfinite_check = check;
#endif
  }
};
} // namespace detail

/// kernel.check_finite: notes check `check` (1-based) in the training state
/// when `x` holds a NaN or an infinity and no earlier check did; on the
/// step's stream, so the host learns of it only when it reads the state.
template <typename T>
void checkFinite(ztc_train_state *state, const T *x, int64_t n, int64_t check,
                 cudaStream_t stream) {
  if (!state)
    return;
  detail::launchElements(n, detail::CheckFiniteBody<T>{state, x, check}, stream,
                         "checkFinite");
}

//===----------------------------------------------------------------------===//
// Collectives (the dist dialect): the context's communicator, on `stream`
//===----------------------------------------------------------------------===//

namespace detail {
/// y[to + i] = x[from + i]: one rank's block out of or into a whole.
template <typename T> struct CopyBlockBody {
  const T *x;
  T *y;
  int64_t from, to;
  ZTC_HOST_DEVICE void operator()(int64_t i) const { y[to + i] = x[from + i]; }
};
template <typename T> constexpr int32_t commDType() {
  return std::is_same_v<T, float>    ? ZTC_COMM_F32
         : std::is_same_v<T, double> ? ZTC_COMM_F64
         : std::is_same_v<T, bf16>   ? ZTC_COMM_BF16
                                     : ZTC_COMM_F16;
}
inline void checkCollective(int32_t code, int32_t which) {
  if (code != 0)
    recordError(
        describeStepError(makeStepError(ZTC_ERROR_COLLECTIVE, code, which, 0)));
}
} // namespace detail

/// dist.all_reduce: y = the sum over ranks of x (n elements).
template <typename T>
void allReduce(const ztc_step_context *ctx, const T *x, T *y, int64_t n,
               cudaStream_t stream) {
  if (!ctx->comm) {
    detail::launchElements(n, detail::CopyBlockBody<T>{x, y, 0, 0}, stream,
                           "allReduce");
    return;
  }
  detail::checkCollective(ctx->comm->all_reduce_sum(ctx->comm->self, x, y, n,
                                                    detail::commDType<T>(),
                                                    stream),
                          ZTC_COLLECTIVE_ALL_REDUCE);
}

/// dist.reduce_scatter: y (n elements) = block `rank` of the sum of x.
template <typename T>
void reduceScatter(const ztc_step_context *ctx, const T *x, T *y, int64_t n,
                   cudaStream_t stream) {
  if (!ctx->comm) {
    detail::launchElements(
        n, detail::CopyBlockBody<T>{x, y, int64_t(ctx->rank) * n, 0}, stream,
        "reduceScatter");
    return;
  }
  detail::checkCollective(
      ctx->comm->reduce_scatter_sum(ctx->comm->self, x, y, n,
                                    detail::commDType<T>(), stream),
      ZTC_COLLECTIVE_REDUCE_SCATTER);
}

/// dist.all_gather: y (world_size blocks of n) = every rank's x.
template <typename T>
void allGather(const ztc_step_context *ctx, const T *x, T *y, int64_t n,
               cudaStream_t stream) {
  if (!ctx->comm) {
    detail::launchElements(
        n, detail::CopyBlockBody<T>{x, y, 0, int64_t(ctx->rank) * n}, stream,
        "allGather");
    return;
  }
  detail::checkCollective(ctx->comm->all_gather(ctx->comm->self, x, y, n,
                                                detail::commDType<T>(), stream),
                          ZTC_COLLECTIVE_ALL_GATHER);
}

/// dist.shard: y (n elements) = block `rank` of x.
template <typename T>
void shard(const ztc_step_context *ctx, const T *x, T *y, int64_t n,
           cudaStream_t stream) {
  detail::launchElements(
      n, detail::CopyBlockBody<T>{x, y, int64_t(ctx->rank) * n, 0}, stream,
      "shard");
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

namespace detail {

/// A product and a sum rounded as written: nvcc would fuse a * b + c into
/// one rounding, the CPU library (-ffp-contract=off) does not.
ZTC_HOST_DEVICE inline float mulRounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
ZTC_HOST_DEVICE inline float addRounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/// One of bitsandbytes' code books, by value in the kernel's parameters.
struct CodeBook {
  float value[256];

  /// The code of `x` (already divided by its block's scale) as
  /// blockwise8bit::quantizeBlock finds it: its point of the grid of 65536,
  /// then the number of midpoints between codes below that point's value
  /// (a binary search where the CPU reads a table built the same way).
  ZTC_HOST_DEVICE uint8_t code(float x) const {
    float y = fminf(1.0f, fmaxf(-1.0f, x));
    float t = mulRounded(addRounded(y, 1.0f), 0.5f);
    int point = int(truncf(fmaf(t, 65535.0f, 0.5f))) & 0xFFFF;
    float grid = addRounded(float(point), float(point)) / 65535.0f - 1.0f;
    int low = 0, high = 255; // midpoints [low, high) are undecided
    while (low < high) {
      int k = (low + high) / 2;
      float mid = mulRounded(0.5f, addRounded(value[k], value[k + 1]));
      if (mid < grid)
        low = k + 1;
      else
        high = k;
    }
    return uint8_t(low);
  }
};

/// adam8bit: one block of 256 elements per row (Blockwise8bit.h's
/// adamStep). Each thread reads the old scales before the block's maximum
/// (whose reduction every thread passes), so the new ones may overwrite
/// them in place; each element's codes are read and written by one thread.
struct Adam8bitBody {
  const float *p, *g;
  const uint8_t *m, *v;
  const float *mScale, *vScale, *lr, *step;
  float *pOut;
  uint8_t *mOut, *vOut;
  float *mScaleOut, *vScaleOut;
  int64_t n;
  float beta1, beta2, rest1, rest2, eps;
  double beta1d, beta2d, weightDecay;
  CodeBook first, second;

  template <typename Team>
  ZTC_HOST_DEVICE void operator()(int64_t row, const Team &team) const {
    using blockwise8bit::kBlock;
    const int64_t start = row * kBlock;
    const int64_t count = n - start < kBlock ? n - start : kBlock;
    const float oldScale1 = mScale[row], oldScale2 = vScale[row];
    const double t = double(*step), rate = double(*lr);
    const double c1 = 1.0 - pow(beta1d, t);
    const float c2 = float(sqrt(1.0 - pow(beta2d, t)));
    const float stepSize = float(-rate / c1);
    const float decay = float(1.0 - rate * weightDecay);
    auto moments = [&](int64_t at, float &m1, float &m2) {
      m1 = mulRounded(mulRounded(first.value[m[at]], oldScale1), beta1);
      m1 = fmaf(g[at], rest1, m1);
      m2 = mulRounded(mulRounded(second.value[v[at]], oldScale2), beta2);
      m2 = fmaf(mulRounded(rest2, g[at]), g[at], m2);
    };
    float max1 = 0.0f, max2 = 0.0f;
    for (int64_t i = team.rank(); i < count; i += team.size()) {
      float m1, m2;
      moments(start + i, m1, m2);
      max1 = fmaxf(max1, fabsf(m1));
      max2 = fmaxf(max2, fabsf(m2));
    }
    const float absmax1 = team.reduce(max1, MaxOp());
    const float absmax2 = team.reduce(max2, MaxOp());
    const float inverse1 = absmax1 == 0.0f ? 0.0f : 1.0f / absmax1;
    const float inverse2 = absmax2 == 0.0f ? 0.0f : 1.0f / absmax2;
    for (int64_t i = team.rank(); i < count; i += team.size()) {
      const int64_t at = start + i;
      float m1, m2;
      moments(at, m1, m2);
      float denominator = addRounded(sqrtf(m2) / c2, eps);
      float value = p[at];
      if (weightDecay > 0)
        value = mulRounded(value, decay);
      pOut[at] = addRounded(value, mulRounded(stepSize, m1) / denominator);
      mOut[at] = absmax1 == 0.0f ? 0 : first.code(mulRounded(m1, inverse1));
      vOut[at] = absmax2 == 0.0f ? 0 : second.code(mulRounded(m2, inverse2));
    }
    if (team.rank() == 0) {
      mScaleOut[row] = absmax1;
      vScaleOut[row] = absmax2;
    }
  }
};

} // namespace detail

/// One Adam step on 8-bit moments (CpuKernels.h's adam8bit, the same bits):
/// one thread block per block of 256 elements.
inline void adam8bit(const float *p, const float *g, const int8_t *m,
                     const float *mScale, const int8_t *v, const float *vScale,
                     const float *lr, const float *step, float *pOut,
                     int8_t *mOut, float *mScaleOut, int8_t *vOut,
                     float *vScaleOut, int64_t n, double beta1, double beta2,
                     double eps, double weightDecay, cudaStream_t stream) {
  detail::Adam8bitBody body;
  body.p = p;
  body.g = g;
  body.m = reinterpret_cast<const uint8_t *>(m);
  body.v = reinterpret_cast<const uint8_t *>(v);
  body.mScale = mScale;
  body.vScale = vScale;
  body.lr = lr;
  body.step = step;
  body.pOut = pOut;
  body.mOut = reinterpret_cast<uint8_t *>(mOut);
  body.vOut = reinterpret_cast<uint8_t *>(vOut);
  body.mScaleOut = mScaleOut;
  body.vScaleOut = vScaleOut;
  body.n = n;
  body.beta1 = float(beta1);
  body.beta2 = float(beta2);
  body.rest1 = float(1.0 - beta1);
  body.rest2 = float(1.0 - beta2);
  body.eps = float(eps);
  body.beta1d = beta1;
  body.beta2d = beta2;
  body.weightDecay = weightDecay;
  for (int k = 0; k < 256; ++k) {
    body.first.value[k] = blockwise8bit::kSignedCodes[k];
    body.second.value[k] = blockwise8bit::kUnsignedCodes[k];
  }
  detail::launchRows((n + blockwise8bit::kBlock - 1) / blockwise8bit::kBlock,
                     blockwise8bit::kBlock, body, stream, "adam8bit");
}

namespace detail {

/// One tile of an NF4 weight dequantized (Nf4.h): element (r, c) of a
/// [outer, inner] tile is W's flat element `first + r * rowStep + c`, its
/// scale and value rounded as the CPU's (no contraction into an fma), then
/// rounded to T.
template <typename T> struct Nf4TileBody {
  const uint8_t *packed, *absmax;
  const float *nested, *offset;
  T *tile;
  int64_t first, rowStep, inner;
  CodeBook scales;
  float values[16];

  ZTC_HOST_DEVICE void operator()(int64_t at) const {
    const int64_t i = first + (at / inner) * rowStep + at % inner;
    const int64_t block = i / nf4::kBlock;
    const float scale = addRounded(mulRounded(scales.value[absmax[block]],
                                              nested[block / nf4::kScaleBlock]),
                                   *offset);
    const uint8_t byte = packed[i / 2];
    tile[at] =
        store<T>(mulRounded(values[i % 2 ? byte & 0x0F : byte >> 4], scale));
  }
};

} // namespace detail

/// y = x op(W) for an NF4 weight W of [rows, cols] (CpuKernels.h's
/// matmulNf4): tiles of op(W)'s columns dequantized into stream-ordered
/// scratch, each multiplied by cuBLAS into its columns of y.
template <typename T>
void matmulNf4(const T *x, const Dims &xDims, const uint8_t *packed,
               const uint8_t *absmax, const float *nested, const float *offset,
               int64_t rows, int64_t cols, bool transB, T *y, const Dims &yDims,
               cudaStream_t stream) {
  const int64_t k = transB ? cols : rows, n = transB ? rows : cols;
  const int64_t m = k ? xDims.numElements() / k : 0;
  (void)yDims;
  if (m == 0 || n == 0)
    return;
  const int64_t panel = nf4::tileColumns(k, n);
  T *tile = detail::allocateScratch<T>(k * panel, stream, "matmul_nf4");
  if (!tile)
    return;
  detail::Nf4TileBody<T> body;
  body.packed = packed;
  body.absmax = absmax;
  body.nested = nested;
  body.offset = offset;
  body.tile = tile;
  for (int q = 0; q < 256; ++q)
    body.scales.value[q] = blockwise8bit::kSignedCodes[q];
  for (int q = 0; q < 16; ++q)
    body.values[q] = nf4::kNf4Codes[q];
  for (int64_t j0 = 0; j0 < n; j0 += panel) {
    const int64_t width = n - j0 < panel ? n - j0 : panel;
    // Rows j0.. of W ([width, K]) when transposed, else columns j0.. of
    // every row ([K, width]).
    const int64_t outer = transB ? width : k, inner = transB ? k : width;
    body.first = transB ? j0 * cols : j0;
    body.rowStep = cols;
    body.inner = inner;
    detail::launchElements(outer * inner, body, stream, "matmul_nf4");
    detail::gemm(x, tile, y + j0,
                 {1, m, width, k, k, inner, n, 0, 0, 0, false, transB}, false,
                 stream, "matmul_nf4");
  }
  detail::freeScratch(tile, stream, "matmul_nf4");
}

} // namespace ztc::cuda

//===----------------------------------------------------------------------===//
// C entry points for the runtime
//===----------------------------------------------------------------------===//
//
// The runtime loads the compiled step with dlopen and finds these with
// dlsym. Weak, so two translation units of one shared object link.

/// ztc::cuda::lastError(); the text stays valid until the next call on the
/// same thread.
extern "C" __attribute__((weak)) const char *ztc_cuda_last_error() {
  static thread_local std::string text;
  text = ztc::cuda::lastError();
  return text.c_str();
}

/// ztc::cuda::clearError().
extern "C" __attribute__((weak)) void ztc_cuda_clear_error() {
  ztc::cuda::clearError();
}

#endif // ZTC_RUNTIME_KERNELS_CUDAKERNELS_CUH
