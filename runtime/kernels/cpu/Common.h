//===- Common.h - what every CPU kernel family builds on --------*- C++ -*-===//
//
// The part of the CPU kernel library (CpuKernels.h) that the family headers
// beside this one share: the element arithmetic and thread-splitting helpers
// of namespace detail, the error slot (lastError, clearError, and
// collectErrors, which every entry ends with), the training-state kernels
// and the host streams.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_COMMON_H
#define ZTC_RUNTIME_KERNELS_CPU_COMMON_H

#include "../Dims.h"
#include "../Half.h"
#include "../Numeric.h"
#include "../StepAbi.h"
#include "../StepError.h"
#include "../TrainState.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <utility>

namespace ztc::cpu {

/// The shape type of every kernel (runtime/kernels/Dims.h).
using Dims = ztc::Dims;

//===----------------------------------------------------------------------===//
// Internal helpers
//===----------------------------------------------------------------------===//

namespace detail {

// ComputeT, SumT, load, store, isNan and lowestValue: the element
// arithmetic CudaKernels.cuh shares.
using namespace ztc::numeric;

/// Work (in elements) below which a loop stays on one thread.
constexpr int64_t kParallelGrain = 1 << 15;

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

//===----------------------------------------------------------------------===//
// Training state (TrainState.h)
//===----------------------------------------------------------------------===//

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

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_COMMON_H
