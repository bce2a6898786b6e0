//===- DeviceMemoryProbe.cpp - ztc-train --device-memory-report -----------===//
//
// The sampler behind ztc-train's --device-memory-report
// (DeviceMemoryProbe.h): a second backend of the artifact's target, whose
// deviceMemory() the thread reads. Its own stream counts in the context
// figure, and so cancels out of the measured one; it runs no product, so
// cuBLAS's handle and workspace, made on the trainer's first product, count
// in the measured figure, as does the step's loaded device code.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc-train/DeviceMemoryProbe.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/io/Manifest.h"

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ztc::rt {

DeviceMemoryProbe::DeviceMemoryProbe(std::unique_ptr<Backend> backend)
    : backend_(std::move(backend)) {
  context_ = used();
  if (!context_)
    return;
  total_ = backend_->deviceMemory()->second;
  peak_ = *context_;
  samples_ = 1;
  thread_ = std::thread([this] {
    while (!stop_.load(std::memory_order_relaxed)) {
      sample();
      std::this_thread::sleep_for(
          std::chrono::microseconds(kIntervalMicroseconds));
    }
  });
}

DeviceMemoryProbe::~DeviceMemoryProbe() { finish(); }

std::unique_ptr<DeviceMemoryProbe>
DeviceMemoryProbe::forArtifact(const std::string &artifactDir) {
  std::string path = joinPath(artifactDir, "manifest.json");
  Manifest manifest = parseManifest(readFile(requireRegularFile(path)), path);
  return std::make_unique<DeviceMemoryProbe>(createBackend(manifest.target));
}

std::optional<uint64_t> DeviceMemoryProbe::used() const {
  std::optional<std::pair<uint64_t, uint64_t>> memory =
      backend_->deviceMemory();
  if (!memory)
    return std::nullopt;
  return memory->second - memory->first;
}

void DeviceMemoryProbe::sample() {
  std::optional<uint64_t> now = used();
  if (!now)
    return;
  uint64_t peak = peak_.load();
  while (*now > peak && !peak_.compare_exchange_weak(peak, *now)) {
  }
  ++samples_;
}

void DeviceMemoryProbe::finish() {
  if (!thread_.joinable())
    return;
  sample();
  stop_ = true;
  thread_.join();
}

std::string DeviceMemoryProbe::json() const {
  using nlohmann::ordered_json;
  auto bytes = [](std::optional<uint64_t> value) {
    return value ? ordered_json(*value) : ordered_json(nullptr);
  };
  std::optional<uint64_t> peak, measured;
  if (context_) {
    peak = peak_.load();
    measured = *peak - *context_;
  }
  ordered_json report = {{"target", targetName()},
                         {"context_used_bytes", bytes(context_)},
                         {"peak_used_bytes", bytes(peak)},
                         {"measured_bytes", bytes(measured)},
                         {"device_total_bytes", bytes(total_)},
                         {"samples", samples_.load()},
                         {"interval_us", uint64_t(kIntervalMicroseconds)}};
  if (!context_)
    report["note"] = std::string("the ") + targetName() +
                     " backend has no device memory of its own (its "
                     "buffers are host memory): nothing to measure";
  return report.dump(1) + "\n";
}

void DeviceMemoryProbe::write(const std::string &path) const {
  std::ofstream out(path, std::ios::trunc);
  out << json();
  if (!out.flush())
    throw Error("--device-memory-report: cannot write " + path);
}

} // namespace ztc::rt
