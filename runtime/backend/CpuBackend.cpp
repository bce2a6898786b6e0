//===- CpuBackend.cpp - run generated code on the host --------------------===//
//
// Device memory is 64-byte aligned host memory; copies are memcpy and the
// entry runs on the calling thread (its kernels use OpenMP and OpenBLAS);
// a step whose collectives run on stream 1 hands them to a thread
// (HostStreams.h), which `call` waits for before it returns.
// `call` clears the kernel library's error slot before the entry and throws
// its first data error after (a gather index or loss target out of range:
// "nll_loss: target 12 is outside [0, 10) (ignore_index -100)"), read
// through the step's ztc_cpu_last_error / ztc_cpu_clear_error
// (kernels/CpuKernels.h). A step that does not include the library has
// neither symbol and is not checked.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/backend/HostStreams.h"

#include "runtime/Error.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include <dlfcn.h>

namespace ztc::rt {

namespace {

/// Cache-line (and AVX-512) alignment for every buffer.
constexpr size_t kAlignment = 64;

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(const BackendOptions &options) : options_(options) {}

  Target target() const override { return Target::Cpu; }

  void *allocate(size_t bytes) override {
    void *memory = nullptr;
    if (::posix_memalign(&memory, kAlignment, bytes ? bytes : 1) != 0)
      throw Error("cannot allocate " + std::to_string(bytes) +
                  " bytes of host memory");
    std::memset(memory, 0, bytes);
    return memory;
  }

  void deallocate(void *device) override { std::free(device); }

  void copyIn(void *device, const void *host, size_t bytes) override {
    if (bytes)
      std::memcpy(device, host, bytes);
  }

  void copyOut(void *host, const void *device, size_t bytes) override {
    if (bytes)
      std::memcpy(host, device, bytes);
  }

  // One stream, or streamThreads off: entries run on the calling thread in
  // program order (which every stream schedule allows), with null streams.
  // Else stream 0 is the calling thread and every other a thread of its
  // own (HostStreams); events live there, so the context's are
  // placeholders.
  std::vector<void *> streams(size_t count) override {
    if (count <= 1 || !options_.streamThreads)
      return std::vector<void *>(count, nullptr);
    if (!hostStreams_ || hostStreams_->tables().size() != count) {
      hostStreams_ = std::make_unique<HostStreams>(count);
      hostStreams_->setEventCount(eventCount_);
    }
    return hostStreams_->tables();
  }
  std::vector<void *> events(size_t count) override {
    eventCount_ = count;
    if (hostStreams_)
      hostStreams_->setEventCount(count);
    return std::vector<void *>(count, nullptr);
  }
  bool asynchronous() const override { return false; }
  /// Every call has finished (and been checked) when it returns.
  void synchronize() override {}

  void call(EntryFn entry, const ztc_step_context &ctx) override {
    if (entry != hooksEntry_) {
      hooks_ = findErrorHooks(entry, "cpu");
      hooksEntry_ = entry;
    }
    if (hooks_.clearError)
      hooks_.clearError();
    bool streamed = hostStreams_ && ctx.streams && ctx.stream_count > 1;
    if (streamed)
      hostStreams_->reset();
    entry(&ctx);
    // Stream 0 waited for every other stream before the end (the memory
    // planner refuses steps that do not); this also waits for what they
    // ran after their last signal, so nothing outlives the call.
    if (streamed)
      hostStreams_->drain();
    if (!hooks_.lastError)
      return;
    const char *message = hooks_.lastError();
    if (message && *message) {
      std::string text = message;
      // The next call starts clean even if the caller goes on.
      hooks_.clearError();
      throw Error(text);
    }
  }

private:
  BackendOptions options_;
  std::unique_ptr<HostStreams> hostStreams_;
  size_t eventCount_ = 0;
  EntryFn hooksEntry_ = nullptr;
  ErrorHooks hooks_;
};

} // namespace

std::unique_ptr<Backend> createCpuBackend(const BackendOptions &options) {
  return std::make_unique<CpuBackend>(options);
}

} // namespace ztc::rt
