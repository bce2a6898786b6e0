//===- CpuBackend.cpp - run generated code on the host --------------------===//
//
// Device memory is 64-byte aligned host memory; copies are memcpy and the
// entry runs on the calling thread (its kernels use OpenMP and OpenBLAS).
//
//===----------------------------------------------------------------------===//

#include "runtime/Backend.h"

#include "runtime/Error.h"

#include <cstdlib>
#include <cstring>

namespace ztc::rt {

namespace {

/// Cache-line (and AVX-512) alignment for every buffer.
constexpr size_t kAlignment = 64;

class CpuBackend final : public Backend {
public:
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

  void call(EntryFn entry, void *const *bindings, char *arena) override {
    entry(bindings, arena);
  }
};

} // namespace

std::unique_ptr<Backend> createCpuBackend() {
  return std::make_unique<CpuBackend>();
}

} // namespace ztc::rt
