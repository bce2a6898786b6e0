//===- FakeDevice.h - a CPU backend posing as a device ----------*- C++ -*-===//
//
// The CPU backend reporting a device's memory as cudaMemGetInfo would, for
// the tests of what the runtime and ztc-train do with it (the Runner's
// check before allocating, ztc-train's --device-memory-report probe). The
// free bytes can change while a test runs; allocations are counted.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TEST_UNIT_RUNTIME_FAKEDEVICE_H
#define ZTC_TEST_UNIT_RUNTIME_FAKEDEVICE_H

#include "runtime/backend/Backend.h"

#include <atomic>
#include <cstdint>
#include <memory>

namespace ztc::rt::test {

/// The CPU backend behind another name: every operation forwarded, for
/// the fakes to watch the ones they override.
class OverCpu : public Backend {
public:
  Target target() const override { return Target::Cpu; }
  void *allocate(size_t bytes) override { return cpu_->allocate(bytes); }
  void deallocate(void *device) override { cpu_->deallocate(device); }
  void copyIn(void *device, const void *host, size_t bytes) override {
    cpu_->copyIn(device, host, bytes);
  }
  void copyOut(void *host, const void *device, size_t bytes) override {
    cpu_->copyOut(host, device, bytes);
  }
  std::vector<void *> streams(size_t count) override {
    return cpu_->streams(count);
  }
  std::vector<void *> events(size_t count) override {
    return cpu_->events(count);
  }
  void call(EntryFn entry, const ztc_step_context &ctx) override {
    cpu_->call(entry, ctx);
  }
  void synchronize() override { cpu_->synchronize(); }
  bool asynchronous() const override { return false; }

protected:
  std::unique_ptr<Backend> cpu_ = createCpuBackend();
};

/// `free` bytes free of `total`; the target it names is `target` (the
/// memory and the calls are the CPU's whatever it says).
class FakeDevice final : public OverCpu {
public:
  FakeDevice(uint64_t free, uint64_t total, Target target = Target::Cpu)
      : free(free), total_(total), target_(target) {}
  Target target() const override { return target_; }
  void *allocate(size_t bytes) override {
    ++allocations;
    return OverCpu::allocate(bytes);
  }
  std::optional<std::pair<uint64_t, uint64_t>> deviceMemory() const override {
    return std::make_pair(free.load(), total_);
  }

  std::atomic<uint64_t> free;
  std::atomic<int> allocations{0};

private:
  uint64_t total_;
  Target target_;
};

} // namespace ztc::rt::test

#endif // ZTC_TEST_UNIT_RUNTIME_FAKEDEVICE_H
