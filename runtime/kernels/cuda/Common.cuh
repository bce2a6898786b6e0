//===- Common.cuh - what every CUDA kernel family builds on -----*- C++ -*-===//
//
// The part of the CUDA kernel library (CudaKernels.cuh) that the family
// headers beside this one share: the math and tree-reduction helpers, the
// error state on the host and the device (lastError, clearError, and
// collectErrors, which every entry ends with), the two launchers every
// kernel body runs through, a call's part of its planned scratch, float
// arithmetic rounded as on the CPU with bitsandbytes' code books, and the
// training-state kernels.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_COMMON_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_COMMON_CUH

#include "../Dims.h"
#include "../Half.h"
#include "../Library.h"
#include "../Numeric.h"
#include "../StepAbi.h"
#include "../StepError.h"
#include "../TrainState.h"

#include <cuda_runtime_api.h>

#include <math.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <type_traits>

namespace ztc::cuda {

/// The shape type of every kernel (runtime/kernels/Dims.h), passed to
/// kernels by value.
using Dims = ztc::Dims;

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
ZTC_HOST_DEVICE inline float mathTanh(float x) { return ::tanhf(x); }
ZTC_HOST_DEVICE inline double mathTanh(double x) { return ::tanh(x); }
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

/// The lanes of a warp-per-row kernel's team: a warp on the device, one
/// thread on the host (emulation).
ZTC_HOST_DEVICE constexpr int rowLanes() {
#if defined(__CUDA_ARCH__)
  return 32;
#else
  return 1;
#endif
}

/// A loop over a row's slots that nvcc unrolls, so that a per-lane array
/// indexed by the slot stays in registers.
#if defined(__CUDA_ARCH__)
#define ZTC_UNROLL _Pragma("unroll")
#else
#define ZTC_UNROLL
#endif

#if defined(__CUDACC__) && !defined(ZTC_CUDA_HOST_EMULATION)
template <typename Acc> __device__ Acc shuffleXor(Acc value, int mask) {
  static_assert(std::is_same_v<Acc, float> || std::is_same_v<Acc, double>,
                "warp teams combine float or double");
  return __shfl_xor_sync(0xffffffffu, value, mask);
}
#endif

/// The threads that run one row of a warp-per-row kernel (launchWarpRows):
/// the 32 lanes of a warp on the device, one thread on the host. reduce()
/// combines in a butterfly, so every lane ends with the same bits (a + b
/// and b + a are equal); it needs no barrier, as a warp runs in step.
struct WarpTeam {
  ZTC_HOST_DEVICE int64_t rank() const {
#if defined(__CUDA_ARCH__)
    return threadIdx.x & 31;
#else
    return 0;
#endif
  }
  ZTC_HOST_DEVICE int64_t size() const { return rowLanes(); }
  template <typename Acc, typename Op>
  ZTC_HOST_DEVICE Acc reduce(Acc value, Op op) const {
#if defined(__CUDA_ARCH__)
    for (int mask = 16; mask > 0; mask >>= 1)
      value = op(value, shuffleXor(value, mask));
    return value;
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

/// A warp per row: each block's warps take consecutive rows.
template <typename Body>
__global__ void warpRowsKernel(int64_t rows, Body body) {
  WarpTeam team;
  const int64_t warps = blockDim.x >> 5;
  for (int64_t row = blockIdx.x * warps + (threadIdx.x >> 5); row < rows;
       row += (int64_t)gridDim.x * warps)
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

/// Runs `body(row, team)` for row in [0, rows), a warp (WarpTeam) per row,
/// eight rows a block.
template <typename Body>
void launchWarpRows(int64_t rows, const Body &body, cudaStream_t stream,
                    const char *kernel) {
  if (rows <= 0)
    return;
#if defined(ZTC_CUDA_HOST_EMULATION)
  (void)stream;
  (void)kernel;
  WarpTeam team;
  for (int64_t row = 0; row < rows; ++row)
    body(row, team);
#else
  warpRowsKernel<<<blockCount(rows, kThreads / 32), kThreads, 0, stream>>>(
      rows, body);
  checkCuda(cudaGetLastError(), "kernel launch", kernel);
#endif
}

/// Bytes [offset, offset + bytes) of a call's planned scratch as a T
/// array; nullptr, with an error recorded, when the call was given less
/// (its scratch operand missing, or smaller than its plan).
template <typename T>
T *scratchPart(const Scratch &scratch, int64_t offset, int64_t bytes,
               const char *kernel) {
  if (offset + bytes > scratch.bytes || !scratch.data) {
    recordError(
        std::string(kernel) + ": needs " + std::to_string(offset + bytes) +
        " bytes of scratch memory, was given " + std::to_string(scratch.bytes) +
        " (its artifact's memory plan gives it less: recompile it)");
    return nullptr;
  }
  return reinterpret_cast<T *>(static_cast<char *>(scratch.data) + offset);
}

//===----------------------------------------------------------------------===//
// Float arithmetic as the CPU rounds it; bitsandbytes' code books
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Training state (TrainState.h)
//===----------------------------------------------------------------------===//

namespace detail {
template <typename T> struct RecordLossBody {
  ztc_train_state *state;
  const T *loss;
  ZTC_HOST_DEVICE void operator()(int64_t) const {
    recordLossInto(state, *loss);
  }
};
} // namespace detail

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

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_COMMON_CUH
