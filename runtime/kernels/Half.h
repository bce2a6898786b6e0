//===- Half.h - 16-bit floating-point storage types -------------*- C++ -*-===//
//
// Storage types for IEEE binary16 (`ztc::f16`) and bfloat16 (`ztc::bf16`) in
// the C++ and CUDA that ztc emits. They hold bits only: generated code and
// the kernels compute in float and convert on load and store, so the types
// offer explicit conversions from and to float and nothing else. Conversion
// to 16 bits rounds to nearest, ties to even; overflow becomes infinity and
// NaN stays NaN (quieted). Both types are trivially copyable, 2 bytes, and
// laid out exactly like their bit pattern, so arena bytes can be viewed as
// arrays of them.
//
// Only the C++17 standard library is used. Under nvcc every conversion is
// also a device function (ZTC_HOST_DEVICE), computed with the same integer
// arithmetic, so host and device round identically. A host compiler
// targeting F16C (-mf16c, which runtime/backend/Compile adds for CPU steps
// on machines that have it) converts f16 with the instructions instead:
// the same IEEE rounding, bit for bit (HalfTest compares every half and a
// sweep of floats), several times faster.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_HALF_H
#define ZTC_RUNTIME_KERNELS_HALF_H

#include <cstdint>
#include <cstring>

#if defined(__F16C__) && !defined(__CUDACC__)
#include <immintrin.h>
#define ZTC_F16C 1
#endif

/// `__host__ __device__` under nvcc, nothing for a host compiler.
#ifndef ZTC_HOST_DEVICE
#if defined(__CUDACC__)
#define ZTC_HOST_DEVICE __host__ __device__
#else
#define ZTC_HOST_DEVICE
#endif
#endif

namespace ztc {
namespace half_detail {

ZTC_HOST_DEVICE inline uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
#endif
}

ZTC_HOST_DEVICE inline float bitsFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

/// Rounds `mantissa >> shift` to nearest, ties to even.
ZTC_HOST_DEVICE inline uint32_t shiftRightRne(uint32_t mantissa,
                                              uint32_t shift) {
  uint32_t kept = mantissa >> shift;
  uint32_t rest = mantissa & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (kept & 1u)))
    ++kept;
  return kept;
}

/// float -> binary16 bits, round to nearest even.
ZTC_HOST_DEVICE inline uint16_t floatToHalfBits(float value) {
  uint32_t bits = floatBits(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {
    if (magnitude == 0x7f800000u)
      return static_cast<uint16_t>(sign | 0x7c00u);
    // NaN: keep the top payload bits, force the quiet bit.
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 is halfway between the largest half (65504) and 2^16; the tie
  // rounds to the even neighbour, which is infinity.
  if (magnitude >= 0x477ff000u)
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {
    // Result is subnormal (or zero): value / 2^-24, rounded.
    if (magnitude < 0x33000000u) // below 2^-25: rounds to zero
      return static_cast<uint16_t>(sign);
    uint32_t exponent = magnitude >> 23;
    uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    // A carry out of the subnormal range yields 0x400, the smallest normal.
    return static_cast<uint16_t>(sign |
                                 shiftRightRne(mantissa, 126u - exponent));
  }
  // Normal: rebias the exponent (127 -> 15) and round away 13 mantissa bits;
  // a carry into the exponent is the correct rounded result.
  return static_cast<uint16_t>(sign |
                               shiftRightRne(magnitude - 0x38000000u, 13u));
}

/// binary16 bits -> float (exact; a NaN comes out quiet).
ZTC_HOST_DEVICE inline float halfBitsToFloat(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return bitsFloat(sign | floatBits(magnitude));
  }
  if (exponent == 31) // infinity, or a NaN widened quiet (as F16C does)
    return bitsFloat(sign | 0x7f800000u | (mantissa << 13) |
                     (mantissa ? 0x400000u : 0u));
  return bitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/// float -> bfloat16 bits, round to nearest even.
ZTC_HOST_DEVICE inline uint16_t floatToBFloat16Bits(float value) {
  uint32_t bits = floatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40u); // quiet NaN
  // Adding 0x7fff plus the lowest kept bit rounds ties to even; overflow of
  // the largest finite values carries into the infinity pattern.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

/// bfloat16 bits -> float (exact).
ZTC_HOST_DEVICE inline float bfloat16BitsToFloat(uint16_t value) {
  return bitsFloat(static_cast<uint32_t>(value) << 16);
}

} // namespace half_detail

/// IEEE 754 binary16, storage only.
struct f16 {
  uint16_t bits;

  f16() = default;
#if defined(ZTC_F16C)
  explicit f16(float value)
      : bits(static_cast<uint16_t>(
            _cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT))) {}
  explicit operator float() const { return _cvtsh_ss(bits); }
#else
  ZTC_HOST_DEVICE explicit f16(float value)
      : bits(half_detail::floatToHalfBits(value)) {}
  ZTC_HOST_DEVICE explicit operator float() const {
    return half_detail::halfBitsToFloat(bits);
  }
#endif

  ZTC_HOST_DEVICE static f16 fromBits(uint16_t bits) {
    f16 result;
    result.bits = bits;
    return result;
  }
};

/// bfloat16 (the top half of a float), storage only.
struct bf16 {
  uint16_t bits;

  bf16() = default;
  ZTC_HOST_DEVICE explicit bf16(float value)
      : bits(half_detail::floatToBFloat16Bits(value)) {}
  ZTC_HOST_DEVICE explicit operator float() const {
    return half_detail::bfloat16BitsToFloat(bits);
  }

  ZTC_HOST_DEVICE static bf16 fromBits(uint16_t bits) {
    bf16 result;
    result.bits = bits;
    return result;
  }
};

/// `value` rounded to bfloat16 and widened back: float(bf16(value)), bit
/// for bit, without narrowing to 16 bits and widening again (a fused bf16
/// kernel rounds every result; this way a vector loop does it in float
/// lanes, in about half the instructions).
ZTC_HOST_DEVICE inline float roundToBFloat16(float value) {
  uint32_t bits = half_detail::floatBits(value);
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  uint32_t quietNan = (bits | 0x400000u) & 0xffff0000u;
  return half_detail::bitsFloat((bits & 0x7fffffffu) > 0x7f800000u ? quietNan
                                                                    : rounded);
}

static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2,
              "half types must be exactly their bit pattern");

} // namespace ztc

#endif // ZTC_RUNTIME_KERNELS_HALF_H
