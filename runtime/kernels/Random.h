//===- Random.h - counter-based random numbers for the kernels --*- C++ -*-===//
//
// The one definition of the values of `nn.random_uniform` (dropout masks),
// included by CpuKernels.h and CudaKernels.cuh so that both libraries, and
// the host and the device, produce the same bits. Nothing is stateful:
// element i of stream s under key k is a pure function of (k, s, i), so a
// kernel computes every element independently, in any order, on any number
// of threads, and a step that is run again with the same key draws the same
// numbers (what resuming a training run and gradient checks rely on).
//
// The numbers are splitmix64's (Steele, Lea, Flood 2014): a stream's base
// state is the key combined with the stream, and element i is the splitmix64
// output at state base + (i + 1) * gamma. The top 24 bits of that output,
// times 2^-24, are the value: uniform over the 2^24 multiples of 2^-24 in
// [0, 1), exact in float and double alike.
//
// Only the C++17 standard library is used; under nvcc every function is
// also a device function (ZTC_HOST_DEVICE).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_RANDOM_H
#define ZTC_RUNTIME_KERNELS_RANDOM_H

#include "Half.h" // ZTC_HOST_DEVICE

#include <cstdint>

namespace ztc::random {

/// splitmix64's increment: 2^64 divided by the golden ratio, odd.
constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

/// splitmix64's output function: a bijection of 64-bit words whose every
/// output bit depends on every input bit.
ZTC_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Absorbs `value` into `hash`. `hash` is mixed before `value` enters, so
/// the order of arguments matters and equal arguments do not cancel (as they
/// would in mix(a) ^ mix(b)); for a fixed argument the result is a
/// bijection of the other, and neighbouring values (keys, streams, steps)
/// give unrelated results.
ZTC_HOST_DEVICE inline uint64_t combine(uint64_t hash, uint64_t value) {
  return mix64(mix64(hash + kGamma) ^ value);
}

/// The base state of stream `stream` under `key`.
ZTC_HOST_DEVICE inline uint64_t streamBase(uint64_t key, uint64_t stream) {
  return combine(key, stream);
}

/// Element `index` of the stream whose base state is `base`: uniform in
/// [0, 1) with 24 random bits.
ZTC_HOST_DEVICE inline float uniformAt(uint64_t base, uint64_t index) {
  uint64_t bits = mix64(base + (index + 1) * kGamma);
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

} // namespace ztc::random

#endif // ZTC_RUNTIME_KERNELS_RANDOM_H
