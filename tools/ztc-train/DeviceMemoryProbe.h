//===- DeviceMemoryProbe.h - ztc-train --device-memory-report ---*- C++ -*-===//
//
// What a training run really holds on its device, for comparison with the
// plan (memory.json's total_bytes): the device memory in use right after a
// backend for the artifact's target is created (the CUDA context, before
// the trainer allocates anything), and the most in use at any sample taken
// from then until training ends, every 100 microseconds on a thread of its
// own (so a kernel's scratch held for part of a step counts too). Measured
// = peak - context: the trainer's allocations and whatever else the run
// makes the device hold (cuBLAS's workspace, the step's code). The figures
// are the whole device's (cudaMemGetInfo): one rank per device, nothing
// else on it. A backend with no device memory
// of its own (the CPU's) records nulls and says why.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TOOLS_ZTC_TRAIN_DEVICEMEMORYPROBE_H
#define ZTC_TOOLS_ZTC_TRAIN_DEVICEMEMORYPROBE_H

#include "runtime/backend/Backend.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace ztc::rt {

/// Samples `backend`'s used device memory from construction until finish().
class DeviceMemoryProbe {
public:
  /// The first sample is the context's; sampling starts when the backend
  /// has device memory to report.
  explicit DeviceMemoryProbe(std::unique_ptr<Backend> backend);
  ~DeviceMemoryProbe();
  DeviceMemoryProbe(const DeviceMemoryProbe &) = delete;
  DeviceMemoryProbe &operator=(const DeviceMemoryProbe &) = delete;

  /// A backend for the target ART/manifest.json names.
  static std::unique_ptr<DeviceMemoryProbe>
  forArtifact(const std::string &artifactDir);

  /// Whether the backend has device memory of its own (else the figures
  /// are null).
  bool measured() const { return context_.has_value(); }
  /// The target's name ("cpu", "cuda").
  const char *targetName() const {
    return ztc::rt::targetName(backend_->target());
  }

  /// Takes a last sample and stops the thread (idempotent).
  void finish();
  /// The report as JSON text: context_used_bytes, peak_used_bytes,
  /// measured_bytes, device_total_bytes, samples, interval_us, target, and
  /// `note` with the reason when the figures are null.
  std::string json() const;
  /// Writes json() to `path`; throws Error naming it on failure.
  void write(const std::string &path) const;

  static constexpr unsigned kIntervalMicroseconds = 100;

private:
  /// Used bytes now (total - free), none without device memory.
  std::optional<uint64_t> used() const;
  void sample();

  std::unique_ptr<Backend> backend_;
  std::optional<uint64_t> context_, total_;
  std::atomic<uint64_t> peak_{0}, samples_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

} // namespace ztc::rt

#endif // ZTC_TOOLS_ZTC_TRAIN_DEVICEMEMORYPROBE_H
