//===- DeviceMemoryProbeTest.cpp - ztc-train --device-memory-report -------===//
//
// The probe behind ztc-train's --device-memory-report
// (tools/ztc-train/DeviceMemoryProbe.h) on a fake device whose free memory
// the test sets: the context is the first sample, the peak what the
// sampling thread saw while the "trainer" held memory, measured their
// difference; a backend without device memory reports nulls and why.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc-train/DeviceMemoryProbe.h"

#include "FakeDevice.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

namespace ztc::rt {
namespace {

TEST(DeviceMemoryProbe, MeasuredIsThePeakAboveTheContext) {
  // 1000 bytes, 100 in use by the context when the probe starts; the
  // "trainer" then holds 300 for a while (the thread samples it), 50 at
  // the end.
  auto owned = std::make_unique<test::FakeDevice>(900, 1000, Target::Cuda);
  test::FakeDevice *device = owned.get();
  DeviceMemoryProbe probe(std::move(owned));
  EXPECT_TRUE(probe.measured());
  device->free = 600;
  // Until the thread has seen it (a loaded machine may take a while).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (probe.json().find("\"peak_used_bytes\": 400,") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  device->free = 850;
  probe.finish();
  std::string json = probe.json();
  EXPECT_NE(json.find("\"target\": \"cuda\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"context_used_bytes\": 100,"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"peak_used_bytes\": 400,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"measured_bytes\": 300,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"device_total_bytes\": 1000,"), std::string::npos)
      << json;
  EXPECT_EQ(json.find("\"note\""), std::string::npos) << json;
  probe.finish(); // Idempotent.
}

TEST(DeviceMemoryProbe, CpuHasNoDeviceMemory) {
  DeviceMemoryProbe probe(createCpuBackend());
  probe.finish();
  EXPECT_FALSE(probe.measured());
  std::string json = probe.json();
  EXPECT_NE(json.find("\"context_used_bytes\": null,"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"measured_bytes\": null,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"note\": \"the cpu backend has no device memory of "
                      "its own"),
            std::string::npos)
      << json;
}

} // namespace
} // namespace ztc::rt
