//===- StepAbi.h - the calling convention of a compiled step ----*- C++ -*-===//
//
// The one definition of how the runtime calls a generated entry and what the
// entry may touch, included by the generated source (CPU and CUDA) and by
// the runtime. Every entry is
//
//   extern "C" void ztc_<entry>(const ztc_step_context *ctx);
//
// and runs asynchronously on ctx->streams: it enqueues work and returns, and
// never copies to the host or synchronizes. What the host wants to know
// about a run (the loss, whether it stayed finite, how many calls ran)
// accumulates in ctx->state, in device memory, which the trainer reads only
// when it logs, checkpoints or finishes.
//
// Plain C layout (standard-layout structs of fixed-width fields), so the
// emitter, nvcc, the C++ runtime and a future C or Python loader agree on
// every offset. Bump ZTC_STEP_ABI_VERSION on any change; the manifest
// records the version an artifact was compiled for.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_STEPABI_H
#define ZTC_RUNTIME_KERNELS_STEPABI_H

#include <stdint.h>

/// The version of this calling convention (the manifest's "abi").
#define ZTC_STEP_ABI_VERSION 5

/// Training state the step updates on the device (`kernel.record_loss`):
/// the host zeroes it, lets entries accumulate, and reads it at log points.
typedef struct ztc_train_state {
  /// Sum of the losses recorded since the host last reset the state.
  double loss_sum;
  /// Calls that recorded a loss since the reset: the device's step counter
  /// (one per micro-batch).
  int64_t calls;
  /// 0 while every recorded loss was finite; else the value of `calls`
  /// (1-based) at the first non-finite one.
  int64_t first_nonfinite_call;
  /// The first non-finite loss itself (NaN or an infinity), for the report.
  double first_nonfinite_loss;
  /// --check-finite (kernel.check_finite): 0 while every checked kernel
  /// wrote finite values; else the 1-based index, in the manifest's
  /// finite_checks, of the first check that found a NaN or an infinity.
  int64_t first_nonfinite_check;
} ztc_train_state;

/// What a step's kernels found wrong with its data: the first index or
/// label outside the range it indexes, since the host last read the slot.
/// Each entry moves its kernels' record here as its last work, on the
/// device, so the host learns of it when it next waits, without the step
/// waiting for the host.
typedef struct ztc_step_error {
  /// ZTC_ERROR_NONE (0) or which check failed.
  int32_t kind;
  /// nll_loss: whether the loss has an ignore_index, and its value.
  int32_t has_ignore;
  int64_t ignore;
  /// The value found and the range [low, high) it should have been in.
  int64_t value;
  int64_t low;
  int64_t high;
} ztc_step_error;

/// ztc_step_error::kind.
enum {
  ZTC_ERROR_NONE = 0,
  ZTC_ERROR_GATHER_INDEX = 1,
  ZTC_ERROR_LOSS_TARGET = 2,
  ZTC_ERROR_SCATTER_INDEX = 3,
  /// A collective failed: `value` is the communicator's error code, `low`
  /// which collective (ZTC_COLLECTIVE_*); the communicator keeps the
  /// message.
  ZTC_ERROR_COLLECTIVE = 4,
};

/// The element types a collective moves (ztc_comm's `dtype`).
enum {
  ZTC_COMM_F32 = 0,
  ZTC_COMM_F64 = 1,
  ZTC_COMM_BF16 = 2,
  ZTC_COMM_F16 = 3,
};

/// The collectives (ztc_step_error::low of a ZTC_ERROR_COLLECTIVE).
enum {
  ZTC_COLLECTIVE_ALL_REDUCE = 0,
  ZTC_COLLECTIVE_REDUCE_SCATTER = 1,
  ZTC_COLLECTIVE_ALL_GATHER = 2,
};

/// The communicator a step's collectives run on (runtime/comm): a table of
/// functions the runtime fills, so the generated code links no MPI or
/// NCCL. Every rank calls the same collectives in the same order (the
/// program is SPMD). Each returns 0, or an error code after which the
/// communicator can say what failed. `stream` is the cudaStream_t the
/// collective is ordered on (null on the CPU, where it completes before it
/// returns). Half-precision types sum in fp32 and round once.
typedef struct ztc_comm {
  void *self;
  /// recv[i] = the sum over ranks of send[i], for `count` elements; send
  /// may equal recv.
  int32_t (*all_reduce_sum)(void *self, const void *send, void *recv,
                            int64_t count, int32_t dtype, void *stream);
  /// send holds world_size blocks of `count` elements; recv = block `rank`
  /// of the sum over ranks.
  int32_t (*reduce_scatter_sum)(void *self, const void *send, void *recv,
                                int64_t count, int32_t dtype, void *stream);
  /// recv = every rank's `count` elements of send, in rank order.
  int32_t (*all_gather)(void *self, const void *send, void *recv, int64_t count,
                        int32_t dtype, void *stream);
} ztc_comm;

/// A stream on the CPU, where the runtime runs stream 0 on the calling
/// thread and every other stream on a thread of its own. Stream 0's
/// `enqueue` runs the work at once and its `signal` completes the event at
/// once; another stream's run in the order they were called. `wait` makes
/// later work of the stream (stream 0: the caller) start only after the
/// event completed. Events are numbered as the manifest counts them and
/// each is signalled at most once per call of an entry.
typedef struct ztc_host_stream {
  void *self;
  void (*enqueue)(void *self, void (*work)(void *arg), void *arg);
  void (*signal)(void *self, int32_t event);
  void (*wait)(void *self, int32_t event);
} ztc_host_stream;

/// Everything an entry receives.
typedef struct ztc_step_context {
  /// One device pointer per manifest binding, in manifest order.
  void *const *bindings;
  /// The arena: arena_bytes of device memory, at the planned offsets.
  char *arena;
  /// The streams the entry enqueues on, `stream_count` of them (the
  /// manifest's "streams"): cudaStream_t on CUDA, where stream 0 is the one
  /// the host orders copies with; const ztc_host_stream * on the CPU, or
  /// null there (every entry of one stream), when the entry runs on the
  /// calling thread in program order, which every stream schedule allows.
  void *const *streams;
  int32_t stream_count;
  /// Events the entry signals and waits on between its streams,
  /// `event_count` of them (the manifest's "events"): cudaEvent_t on CUDA,
  /// created by the runtime (creating one synchronizes); null on the CPU,
  /// where the host streams keep them.
  int32_t event_count;
  void *const *events;
  /// The communicator collectives run on (null: a single rank, where a
  /// step compiled for one rank has no collectives).
  const ztc_comm *comm;
  /// This process's rank and the number of ranks.
  int32_t rank;
  int32_t world_size;
  /// Device memory the entry's loss records accumulate into (entries that
  /// record no loss, forward and gradient checks, leave it alone).
  ztc_train_state *state;
  /// Device memory for the step's data error (the error slot).
  ztc_step_error *error;
} ztc_step_context;

/// The generated entry point.
typedef void (*ztc_entry_fn)(const ztc_step_context *ctx);

#endif // ZTC_RUNTIME_KERNELS_STEPABI_H
