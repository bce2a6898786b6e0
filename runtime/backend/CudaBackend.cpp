//===- CudaBackend.cpp - run generated code on a CUDA device --------------===//
//
// Device memory comes from cudaMalloc on the current device; copies are
// cudaMemcpy, which waits for the work enqueued before them. Entries run on
// the (blocking) streams and events the backend creates and the step
// context carries; `call` only enqueues (a failed launch is recorded, not
// waited for), so consecutive steps run back to back without the host. At
// `synchronize` the backend waits for the device and reports, as an Error,
// the first failure since the last synchronize: the one the kernel library
// recorded (it names the call and the kernel; read through the step's
// ztc_cuda_last_error), else an asynchronous fault, else a failed launch.
// The step is linked against the shared cudart (runtime/backend/Compile.cpp),
// so it and this file share one CUDA runtime and context.
//
// Without the CUDA toolkit at build time (ZTC_RUNTIME_CUDA unset) only
// createCudaBackend exists, and it throws.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"

#include "runtime/Error.h"

#if ZTC_RUNTIME_CUDA
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#endif

#include <string>
#include <vector>

namespace ztc::rt {

#if ZTC_RUNTIME_CUDA

namespace {

std::string describe(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + " (" +
         cudaGetErrorString(status) + ")";
}

/// Throws "CALL of N bytes[ (WHAT)]: ERROR" unless `status` is success.
void checkBytes(cudaError_t status, const char *call, size_t bytes,
                const char *what = nullptr) {
  if (status != cudaSuccess)
    throw Error(std::string(call) + " of " + std::to_string(bytes) + " bytes" +
                (what ? std::string(" (") + what + ")" : "") + ": " +
                describe(status));
}

class CudaBackend final : public Backend {
public:
  CudaBackend() {
    int devices = 0;
    cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess)
      throw Error("no usable CUDA device: cudaGetDeviceCount: " +
                  describe(status));
    if (devices == 0)
      throw Error("no usable CUDA device: cudaGetDeviceCount found none");
    (void)streams(1);
  }

  ~CudaBackend() override {
    for (cudaStream_t stream : streams_)
      cudaStreamDestroy(stream);
    for (cudaEvent_t event : events_)
      cudaEventDestroy(event);
  }

  Target target() const override { return Target::Cuda; }

  void *allocate(size_t bytes) override {
    // cudaMalloc aligns to at least 256 bytes; 0 bytes still gets memory.
    size_t size = bytes ? bytes : 1;
    void *memory = nullptr;
    checkBytes(cudaMalloc(&memory, size), "cudaMalloc", bytes);
    cudaError_t status = cudaMemset(memory, 0, size);
    if (status != cudaSuccess) {
      cudaFree(memory);
      checkBytes(status, "cudaMemset", bytes);
    }
    return memory;
  }

  /// Errors are dropped: this runs in destructors, and a failing cudaFree
  /// (a context lost to an earlier fault) was already reported.
  void deallocate(void *device) override { cudaFree(device); }

  void copyIn(void *device, const void *host, size_t bytes) override {
    if (bytes)
      checkBytes(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice),
                 "cudaMemcpy", bytes, "host to device");
  }

  void copyOut(void *host, const void *device, size_t bytes) override {
    if (bytes)
      checkBytes(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost),
                 "cudaMemcpy", bytes, "device to host");
  }

  std::vector<void *> streams(size_t count) override {
    while (streams_.size() < count) {
      // Blocking streams: cudaMemcpy and cudaMemset on the legacy default
      // stream wait for their work and they for theirs, so copies stay the
      // synchronization points the Backend interface promises.
      cudaStream_t stream = nullptr;
      cudaError_t status = cudaStreamCreate(&stream);
      if (status != cudaSuccess)
        throw Error("cannot create a CUDA stream: " + describe(status));
      streams_.push_back(stream);
    }
    return {streams_.begin(), streams_.begin() + count};
  }

  std::vector<void *> events(size_t count) override {
    while (events_.size() < count) {
      // Ordering only: no timing, so recording and waiting stay cheap.
      cudaEvent_t event = nullptr;
      cudaError_t status =
          cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
      if (status != cudaSuccess)
        throw Error("cannot create a CUDA event: " + describe(status));
      events_.push_back(event);
    }
    return {events_.begin(), events_.begin() + count};
  }
  bool asynchronous() const override { return true; }

  std::optional<std::pair<uint64_t, uint64_t>> deviceMemory() const override {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess)
      return std::nullopt;
    return std::make_pair(uint64_t(free), uint64_t(total));
  }

  void call(EntryFn entry, const ztc_step_context &ctx) override {
    if (entry != hooksEntry_) {
      hooks_ = findErrorHooks(entry, "cuda");
      hooksEntry_ = entry;
      if (!pending_ && hooks_.clearError)
        hooks_.clearError();
    }
    if (!pending_)
      // A failed launch left over from code outside the step is not the
      // step's failure (a sticky fault resurfaces at the synchronize).
      (void)cudaGetLastError();
    pending_ = true;
    entry(&ctx);
    // Launch failures are recorded without waiting; the first one is kept.
    cudaError_t launch = cudaGetLastError();
    if (launch != cudaSuccess && launch_ == cudaSuccess)
      launch_ = launch;
  }

  void synchronize() override {
    if (!pending_)
      return;
    // Every stream the calls used: the device, since they may fork.
    cudaError_t sync = cudaDeviceSynchronize();
    std::string library = hooks_.lastError ? hooks_.lastError() : "";
    cudaError_t launch = launch_;
    pending_ = false;
    launch_ = cudaSuccess;
    if (hooks_.clearError)
      hooks_.clearError();
    if (!library.empty())
      throw Error("the CUDA step failed: " + library);
    if (sync != cudaSuccess)
      throw Error("the CUDA step failed: cudaDeviceSynchronize: " +
                  describe(sync));
    if (launch != cudaSuccess)
      throw Error("the CUDA step failed: kernel launch: " + describe(launch));
  }

private:
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  /// Whether calls were enqueued since the last synchronize.
  bool pending_ = false;
  /// The first failed launch since the last synchronize.
  cudaError_t launch_ = cudaSuccess;
  EntryFn hooksEntry_ = nullptr;
  ErrorHooks hooks_;
};

} // namespace

std::unique_ptr<Backend> createCudaBackend() {
  return std::make_unique<CudaBackend>();
}

#else // !ZTC_RUNTIME_CUDA

std::unique_ptr<Backend> createCudaBackend() {
  throw Error("the ztc runtime was built without CUDA (the CUDA toolkit was "
              "not found at build time); cannot run a CUDA artifact");
}

#endif // ZTC_RUNTIME_CUDA

std::unique_ptr<Backend> createBackend(Target target,
                                       const BackendOptions &options) {
  return target == Target::Cuda ? createCudaBackend()
                                : createCpuBackend(options);
}

} // namespace ztc::rt
