//===- Backend.h - where generated code runs --------------------*- C++ -*-===//
//
// The Runner talks to a device only through this interface: allocate device
// memory, copy bytes in and out, and call the compiled entry point. Two
// backends implement it: the CPU (host memory, direct call; CpuBackend.cpp)
// and CUDA (cudaMalloc, cudaMemcpy, a call that synchronizes the device;
// CudaBackend.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_BACKEND_H
#define ZTC_RUNTIME_BACKEND_H

#include "runtime/Compile.h"

#include <cstddef>
#include <memory>
#include <utility>

namespace ztc::rt {

/// The generated entry point: `extern "C" void ztc_forward(void *const
/// *bindings, char *arena)`; every pointer is a device pointer.
using EntryFn = void (*)(void *const *bindings, char *arena);

/// Memory and execution on one device.
class Backend {
public:
  virtual ~Backend() = default;

  virtual Target target() const = 0;
  /// `bytes` of device memory, 64-byte aligned and zero-filled; 0 bytes
  /// still yields a valid pointer. Throws Error when out of memory.
  virtual void *allocate(size_t bytes) = 0;
  virtual void deallocate(void *device) = 0;
  virtual void copyIn(void *device, const void *host, size_t bytes) = 0;
  virtual void copyOut(void *host, const void *device, size_t bytes) = 0;
  /// Runs `entry`; returns once its results are visible to copyOut.
  virtual void call(EntryFn entry, void *const *bindings, char *arena) = 0;
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

std::unique_ptr<Backend> createCpuBackend();

/// Memory on the current CUDA device; the entry runs on the legacy default
/// stream and `call` synchronizes, then throws the step's first CUDA,
/// cuBLAS or kernel-library failure (runtime/CudaBackend.cpp). Throws if
/// there is no device, or if the runtime was built without CUDA.
std::unique_ptr<Backend> createCudaBackend();

/// The backend that runs code generated for `target`.
std::unique_ptr<Backend> createBackend(Target target);

/// Device memory owned by a backend; freed on destruction.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend &backend, size_t bytes)
      : backend_(&backend), data_(backend.allocate(bytes)), bytes_(bytes) {}
  ~DeviceBuffer() {
    if (data_)
      backend_->deallocate(data_);
  }
  DeviceBuffer(DeviceBuffer &&other) noexcept { *this = std::move(other); }
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept {
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

} // namespace ztc::rt

#endif // ZTC_RUNTIME_BACKEND_H
