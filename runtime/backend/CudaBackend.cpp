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
// replay records an entry as a CUDA graph (GraphReplay.h says when):
// stream 0 is captured (thread-local mode) while the entry runs, which
// follows the streams it forks to with events, and the graph is launched
// on stream 0 from then on. Before a capture the backend waits for the
// calls so far, once per graph, so that an error the capture leaves is
// the capture's: it is then a notice and every later call direct.
//
// Uploads (Backend::upload) go from pinned host memory on a stream of
// their own, ordered with two events per slot: the upload stream waits for
// the slot's last readers (released), stream 0 for the upload (uploaded).
// All streams are blocking, so a cudaMemcpy (copyIn, copyOut) still waits
// for every one of them.
//
// Without the CUDA toolkit at build time (ZTC_RUNTIME_CUDA unset) only
// createCudaBackend exists, and it throws.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"

#include "runtime/Error.h"
#include "runtime/backend/GraphReplay.h"

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

/// Throws "CALL (WHAT): ERROR" unless `status` is success.
void check(cudaError_t status, const char *call, const std::string &what) {
  if (status != cudaSuccess)
    throw Error(std::string(call) + " (" + what + "): " + describe(status));
}

/// Throws "CALL of N bytes[ (WHAT)]: ERROR" unless `status` is success.
void checkBytes(cudaError_t status, const char *call, size_t bytes,
                const char *what = nullptr) {
  if (status != cudaSuccess)
    throw Error(std::string(call) + " of " + std::to_string(bytes) + " bytes" +
                (what ? std::string(" (") + what + ")" : "") + ": " +
                describe(status));
}

class CudaBackend final : public Backend, private GraphReplayer {
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
    // Errors are dropped here, as in deallocate.
    destroyRecords();
    for (unsigned slot = 0; slot < 2; ++slot) {
      if (uploaded_[slot])
        cudaEventDestroy(uploaded_[slot]);
      if (released_[slot])
        cudaEventDestroy(released_[slot]);
    }
    if (uploadStream_)
      cudaStreamDestroy(uploadStream_);
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
    beginCall(entry);
    entry(&ctx);
    endCall(cudaGetLastError());
  }

  unsigned replay(EntryFn entry, const ztc_step_context &ctx) override {
    return GraphReplayer::replay(entry, ctx);
  }

  std::vector<std::string> takeNotices() override {
    return GraphReplayer::takeNotices();
  }

  void *allocateHost(size_t bytes) override {
    void *memory = nullptr;
    checkBytes(cudaHostAlloc(&memory, bytes ? bytes : 1, cudaHostAllocDefault),
               "cudaHostAlloc", bytes, "pinned host memory");
    return memory;
  }

  /// Errors are dropped, as in deallocate.
  void deallocateHost(void *host) override { cudaFreeHost(host); }

  void upload(unsigned slot, const std::vector<UploadCopy> &copies) override {
    createUploadStream();
    std::string name = "upload slot " + std::to_string(slotIndex(slot));
    check(cudaStreamWaitEvent(uploadStream_, released_[slot], 0),
          "cudaStreamWaitEvent", name + ": the upload waits for its readers");
    for (const UploadCopy &copy : copies)
      if (copy.bytes)
        checkBytes(cudaMemcpyAsync(copy.device, copy.host, copy.bytes,
                                   cudaMemcpyHostToDevice, uploadStream_),
                   "cudaMemcpyAsync", copy.bytes,
                   (name + ", host to device").c_str());
    check(cudaEventRecord(uploaded_[slot], uploadStream_), "cudaEventRecord",
          name + ": uploaded");
    check(cudaStreamWaitEvent(streams_[0], uploaded_[slot], 0),
          "cudaStreamWaitEvent", name + ": stream 0 waits for the upload");
  }

  void releaseUpload(unsigned slot) override {
    createUploadStream();
    check(cudaEventRecord(released_[slotIndex(slot)], streams_[0]),
          "cudaEventRecord",
          "upload slot " + std::to_string(slot) + ": its readers enqueued");
  }

  void waitUploadRead(unsigned slot) override {
    createUploadStream();
    // An event never recorded counts as complete: the first two calls
    // do not wait.
    check(cudaEventSynchronize(uploaded_[slotIndex(slot)]),
          "cudaEventSynchronize",
          "upload slot " + std::to_string(slot) + ": its host memory read");
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
  /// Error hooks for `entry`'s library; a failed launch left from before.
  void beginCall(EntryFn entry) {
    useHooks(entry);
    if (!pending_)
      // A failed launch left over from code outside the step is not the
      // step's failure (a sticky fault resurfaces at the synchronize).
      (void)cudaGetLastError();
    pending_ = true;
  }

  /// Launch failures are recorded without waiting; the first one is kept.
  void endCall(cudaError_t launch) {
    if (launch != cudaSuccess && launch_ == cudaSuccess)
      launch_ = launch;
  }

  void useHooks(EntryFn entry) {
    if (entry == hooksEntry_)
      return;
    hooks_ = findErrorHooks(entry, "cuda");
    hooksEntry_ = entry;
    if (!pending_ && hooks_.clearError)
      hooks_.clearError();
  }

  // GraphReplayer's device operations.

  void callDirect(EntryFn entry, const ztc_step_context &ctx) override {
    call(entry, ctx);
  }

  void *record(EntryFn entry, const ztc_step_context &ctx,
               std::string &why) override {
    // The calls so far first: their failures are theirs (this throws
    // them), and the error state is clean for the capture.
    synchronize();
    useHooks(entry);
    (void)cudaGetLastError();
    auto stream = static_cast<cudaStream_t>(ctx.streams[0]);
    cudaError_t status =
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (status != cudaSuccess) {
      why = "cudaStreamBeginCapture: " + describe(status);
      return nullptr;
    }
    entry(&ctx);
    cudaGraph_t graph = nullptr;
    status = cudaStreamEndCapture(stream, &graph);
    // What the capture left: a launch the capture refused, the kernel
    // library's record of it. Cleared, so it is not a later step's error.
    cudaError_t refused = cudaGetLastError();
    std::string library = hooks_.lastError ? hooks_.lastError() : "";
    if (hooks_.clearError)
      hooks_.clearError();
    for (int32_t i = 0; i < ctx.stream_count; ++i) {
      cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
      cudaError_t query = cudaStreamIsCapturing(
          static_cast<cudaStream_t>(ctx.streams[i]), &capturing);
      if (query != cudaSuccess || capturing != cudaStreamCaptureStatusNone) {
        if (graph)
          cudaGraphDestroy(graph);
        throw Error("cannot end the capture of a CUDA graph: stream " +
                    std::to_string(i) + " is still capturing" +
                    (query != cudaSuccess
                         ? " (cudaStreamIsCapturing: " + describe(query) + ")"
                         : std::string()));
      }
    }
    cudaGraphExec_t instance = nullptr;
    if (status != cudaSuccess)
      why = "cudaStreamEndCapture: " + describe(status);
    else if (!library.empty())
      why = "while capturing, the kernel library failed: " + library;
    else if (refused != cudaSuccess)
      why = "while capturing: " + describe(refused);
    else if ((status = cudaGraphInstantiate(&instance, graph, 0)) !=
             cudaSuccess) {
      why = "cudaGraphInstantiate: " + describe(status);
      instance = nullptr;
    }
    if (graph)
      cudaGraphDestroy(graph); // the instance keeps what it needs
    (void)cudaGetLastError();
    return instance;
  }

  void launch(void *record, EntryFn entry,
              const ztc_step_context &ctx) override {
    beginCall(entry);
    endCall(cudaGraphLaunch(static_cast<cudaGraphExec_t>(record),
                            static_cast<cudaStream_t>(ctx.streams[0])));
  }

  void destroy(void *record) override {
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(record));
  }

  static unsigned slotIndex(unsigned slot) {
    if (slot > 1)
      throw Error("upload slot " + std::to_string(slot) + " (0 or 1)");
    return slot;
  }

  /// The upload stream and the slots' events, on first use.
  void createUploadStream() {
    if (uploadStream_)
      return;
    // Blocking, as the step's streams (see streams()).
    check(cudaStreamCreate(&uploadStream_), "cudaStreamCreate",
          "the upload stream");
    for (unsigned slot = 0; slot < 2; ++slot) {
      check(cudaEventCreateWithFlags(&uploaded_[slot], cudaEventDisableTiming),
            "cudaEventCreateWithFlags",
            "upload slot " + std::to_string(slot) + ": uploaded");
      check(cudaEventCreateWithFlags(&released_[slot], cudaEventDisableTiming),
            "cudaEventCreateWithFlags",
            "upload slot " + std::to_string(slot) + ": released");
    }
  }

  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  /// Backend::upload's stream, and per slot: its upload done, its readers
  /// done.
  cudaStream_t uploadStream_ = nullptr;
  cudaEvent_t uploaded_[2] = {nullptr, nullptr};
  cudaEvent_t released_[2] = {nullptr, nullptr};
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
