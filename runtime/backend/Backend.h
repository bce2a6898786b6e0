//===- Backend.h - where generated code runs --------------------*- C++ -*-===//
//
// The Runner talks to a device only through this interface: allocate device
// memory, copy bytes in and out, enqueue the compiled entry point on the
// backend's stream (directly, or replaying a record of it), upload per-call
// data double-buffered, and wait. Two backends implement it: the CPU (host
// memory, the entry runs on the calling thread, copies at once;
// CpuBackend.cpp) and CUDA (cudaMalloc, streams, calls that return before
// the device is done, CUDA graphs, pinned uploads on their own stream;
// CudaBackend.cpp). The calling convention is runtime/kernels/StepAbi.h.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_BACKEND_H
#define ZTC_RUNTIME_BACKEND_H

#include "runtime/backend/Compile.h"
#include "runtime/kernels/StepAbi.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ztc::rt {

/// The generated entry point: `extern "C" void ztc_<entry>(const
/// ztc_step_context *ctx)`; every pointer in the context is a device
/// pointer (StepAbi.h).
using EntryFn = ztc_entry_fn;

/// Memory and execution on one device.
class Backend {
public:
  virtual ~Backend() = default;

  virtual Target target() const = 0;
  /// `bytes` of device memory, 64-byte aligned and zero-filled; 0 bytes
  /// still yields a valid pointer. Throws Error when out of memory.
  virtual void *allocate(size_t bytes) = 0;
  virtual void deallocate(void *device) = 0;
  /// Copies after every call enqueued so far has finished (a copy is a
  /// synchronization point).
  virtual void copyIn(void *device, const void *host, size_t bytes) = 0;
  virtual void copyOut(void *host, const void *device, size_t bytes) = 0;
  /// `count` streams for ztc_step_context::streams, owned by the backend
  /// (the same ones on every call; the first is the one copies are ordered
  /// with): cudaStream_t, or nulls on the CPU.
  virtual std::vector<void *> streams(size_t count) = 0;
  /// `count` events for ztc_step_context::events, owned by the backend:
  /// cudaEvent_t, or nulls on the CPU.
  virtual std::vector<void *> events(size_t count) = 0;
  /// Enqueues `entry` with `ctx` (whose streams and events came from this
  /// backend). The CPU runs it to completion and throws the kernel
  /// library's first data error; CUDA returns at once, without waiting for
  /// the device.
  virtual void call(EntryFn entry, const ztc_step_context &ctx) = 0;
  /// Waits for every call enqueued so far and throws the first failure
  /// among them (the kernel library's, or the device's).
  virtual void synchronize() = 0;
  /// Whether call() returns before the entry has finished.
  virtual bool asynchronous() const = 0;
  /// The device memory still free and in all, in bytes, where the device
  /// has a fixed amount (CUDA); none on the CPU, whose memory is the host's.
  virtual std::optional<std::pair<uint64_t, uint64_t>> deviceMemory() const {
    return std::nullopt;
  }

  // Recorded entries (CUDA graphs).

  /// Like call(), but the backend may record the entry's work once per
  /// entry and context and replay the record on later calls (CUDA: a
  /// graph captured from stream 0, launched with cudaGraphLaunch). Only for
  /// entries whose work depends on the context's device memory alone, and
  /// contexts whose arrays (bindings, streams, events) hold the same values
  /// whenever they are the same arrays. When recording fails the backend
  /// calls directly from then on and says why once (takeNotices). Returns
  /// how many times the entry's host code ran: 1 for a direct call or the
  /// call that recorded it, 2 for a recording that failed and the direct
  /// call after it, 0 for a launch of a record; so that the caller can
  /// count what that code counts (the elements the step's collectives
  /// move) once per call. The default calls directly.
  virtual unsigned replay(EntryFn entry, const ztc_step_context &ctx) {
    call(entry, ctx);
    return 1;
  }
  /// What the backend has to tell the user since the last call (each
  /// notice once): why it stopped recording entries.
  virtual std::vector<std::string> takeNotices() { return {}; }

  // Double-buffered uploads: the data a call reads (inputs, labels,
  // hypers) goes up while the previous call runs. The caller alternates
  // two slots, each with its own device buffers and host memory: it waits
  // for the slot's last upload to have read the host memory
  // (waitUploadRead), writes it, enqueues the upload (upload), enqueues the
  // calls that read the slot, and releases the slot (releaseUpload). The
  // defaults, for synchronous backends, copy at once.

  /// `bytes` of host memory uploads copy from (pinned on CUDA); 0 bytes
  /// still yields a valid pointer. Throws Error when out of memory.
  virtual void *allocateHost(size_t bytes) {
    return ::operator new(bytes ? bytes : 1);
  }
  virtual void deallocateHost(void *host) { ::operator delete(host); }
  /// One copy of an upload: `bytes` from `host` (allocateHost's) to
  /// `device`.
  struct UploadCopy {
    void *device;
    const void *host;
    size_t bytes;
  };
  /// Enqueues `copies` for slot `slot` (0 or 1) on the backend's upload
  /// stream, after the calls of the slot's last release, and orders the
  /// calls enqueued after this one after the copies (CUDA: events; the
  /// host does not wait).
  virtual void upload(unsigned slot, const std::vector<UploadCopy> &copies) {
    (void)slot;
    for (const UploadCopy &copy : copies)
      copyIn(copy.device, copy.host, copy.bytes);
  }
  /// The calls enqueued since upload(slot) are the slot's readers: the
  /// slot's next upload waits for them (CUDA: an event on stream 0).
  virtual void releaseUpload(unsigned slot) { (void)slot; }
  /// Waits until the last upload of `slot` has read its host memory, so
  /// that the caller may write it again (CUDA: the only host wait of a
  /// step, for an upload two calls back).
  virtual void waitUploadRead(unsigned slot) { (void)slot; }
};

/// How a backend runs entries.
struct BackendOptions {
  /// CPU: run each stream other than 0 (a step's collectives, compiled with
  /// --overlap-comm) on a thread of its own, overlapping compute; off: every
  /// stream in program order on the calling thread. CUDA always has
  /// streams.
  bool streamThreads = false;
};

/// Host memory, entry called on the calling thread (OpenMP inside).
/// The kernel library's error hooks in the shared object holding `entry`:
/// `ztc_<library>_last_error` and `ztc_<library>_clear_error` ("cpu" or
/// "cuda"). Both or neither: a step that could report but not clear would
/// report a stale error forever.
struct ErrorHooks {
  const char *(*lastError)() = nullptr;
  void (*clearError)() = nullptr;
};
ErrorHooks findErrorHooks(EntryFn entry, const char *library);

std::unique_ptr<Backend> createCpuBackend(const BackendOptions &options = {});

/// Memory on the current CUDA device; entries run on one stream the backend
/// creates, and `synchronize` throws the first CUDA, cuBLAS or
/// kernel-library failure of the calls since the last one
/// (runtime/backend/CudaBackend.cpp). Throws if there is no device, or if the
/// runtime was built without CUDA.
std::unique_ptr<Backend> createCudaBackend();

/// The backend that runs code generated for `target`.
std::unique_ptr<Backend> createBackend(Target target,
                                       const BackendOptions &options = {});

/// Memory owned by a backend, freed on destruction: device memory
/// (DeviceBuffer, Backend::allocate) or host memory uploads copy from
/// (HostBuffer, Backend::allocateHost).
template <bool Host> class BackendBuffer {
public:
  BackendBuffer() = default;
  BackendBuffer(Backend &backend, size_t bytes)
      : backend_(&backend),
        data_(Host ? backend.allocateHost(bytes) : backend.allocate(bytes)),
        bytes_(bytes) {}
  ~BackendBuffer() {
    if (data_ && Host)
      backend_->deallocateHost(data_);
    else if (data_)
      backend_->deallocate(data_);
  }
  BackendBuffer(BackendBuffer &&other) noexcept { *this = std::move(other); }
  BackendBuffer &operator=(BackendBuffer &&other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }

  void *data() const { return data_; }
  size_t size() const { return bytes_; }

private:
  Backend *backend_ = nullptr;
  void *data_ = nullptr;
  size_t bytes_ = 0;
};
using DeviceBuffer = BackendBuffer<false>;
using HostBuffer = BackendBuffer<true>;

} // namespace ztc::rt

#endif // ZTC_RUNTIME_BACKEND_H
