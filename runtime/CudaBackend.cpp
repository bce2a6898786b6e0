//===- CudaBackend.cpp - run generated code on a CUDA device --------------===//
//
// Device memory comes from cudaMalloc on the current device; copies are
// synchronous cudaMemcpy. The entry enqueues its kernels on the legacy
// default stream, so `call` synchronizes the device and then reports, as an
// Error, the first failure of the step: the one the kernel library recorded
// (it names the call and the kernel; read through the step's
// ztc_cuda_last_error), else an asynchronous fault the synchronize returns,
// else a failed launch of a generated kernel (cudaGetLastError). The step is
// linked against the shared cudart (runtime/Compile.cpp), so it and this
// file share one CUDA runtime and context.
//
// Without the CUDA toolkit at build time (ZTC_RUNTIME_CUDA unset) only
// createCudaBackend exists, and it throws.
//
//===----------------------------------------------------------------------===//

#include "runtime/Backend.h"

#include "runtime/Error.h"

#if ZTC_RUNTIME_CUDA
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#endif

#include <string>

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

  void call(EntryFn entry, void *const *bindings, char *arena) override {
    if (entry != hooksEntry_) {
      hooks_ = findErrorHooks(entry, "cuda");
      hooksEntry_ = entry;
    }
    // A failed launch left over from code outside the step is not the
    // step's failure (a sticky fault resurfaces at the synchronize).
    (void)cudaGetLastError();
    if (hooks_.clearError)
      hooks_.clearError();

    entry(bindings, arena);

    cudaError_t sync = cudaDeviceSynchronize();
    std::string library = hooks_.lastError ? hooks_.lastError() : "";
    cudaError_t launch = cudaGetLastError();
    if (!library.empty())
      throw Error("the CUDA step failed: " + library);
    if (sync != cudaSuccess)
      throw Error("the CUDA step failed: cudaDeviceSynchronize: " +
                  describe(sync));
    if (launch != cudaSuccess)
      throw Error("the CUDA step failed: kernel launch: " + describe(launch));
  }

private:
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

std::unique_ptr<Backend> createBackend(Target target) {
  return target == Target::Cuda ? createCudaBackend() : createCpuBackend();
}

} // namespace ztc::rt
