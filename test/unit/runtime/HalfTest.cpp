//===- HalfTest.cpp - f16 / bf16 conversions ------------------------------===//
//
// Exhaustive checks: every 16-bit pattern converts to float and back
// unchanged, and the midpoint between every pair of neighbours rounds to the
// even one (values a hair either side round to the nearer). Plus named
// cases: overflow, subnormals, signed zero, infinities, NaN.
//
//===----------------------------------------------------------------------===//

#include "kernels/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using ztc::bf16;
using ztc::f16;

namespace {

template <typename H> uint16_t bitsOf(float value) { return H(value).bits; }

template <typename H> float valueOf(uint16_t bits) {
  return static_cast<float>(H::fromBits(bits));
}

bool isNanBits(uint16_t bits, uint16_t exponentMask) {
  return (bits & exponentMask) == exponentMask &&
         (bits & static_cast<uint16_t>(~exponentMask & 0x7fff)) != 0;
}

/// float(pattern) converts back to the pattern; NaNs stay NaN.
template <typename H> void checkRoundTrip(uint16_t exponentMask) {
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    uint16_t bits = static_cast<uint16_t>(p);
    float value = valueOf<H>(bits);
    if (isNanBits(bits, exponentMask)) {
      EXPECT_TRUE(std::isnan(value));
      EXPECT_TRUE(isNanBits(bitsOf<H>(value), exponentMask));
    } else {
      EXPECT_EQ(bitsOf<H>(value), bits) << std::hex << p;
    }
  }
}

/// Every finite non-negative pattern p and its successor p+1: the midpoint
/// ties to the even pattern, a float just below/above goes to the nearer.
template <typename H> void checkRounding(uint16_t exponentMask) {
  for (uint32_t p = 0; p < exponentMask; ++p) {
    uint16_t low = static_cast<uint16_t>(p),
             high = static_cast<uint16_t>(p + 1);
    float a = valueOf<H>(low), b = valueOf<H>(high);
    ASSERT_EQ(bitsOf<H>(a), low);
    ASSERT_EQ(bitsOf<H>(-a), low | 0x8000);
    if (std::isinf(b))
      continue; // the overflow threshold is checked by name
    float mid = static_cast<float>((static_cast<double>(a) + b) / 2);
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(a) + b) / 2);
    uint16_t even = (low & 1) ? high : low;
    ASSERT_EQ(bitsOf<H>(mid), even) << std::hex << p;
    ASSERT_EQ(bitsOf<H>(-mid), even | 0x8000) << std::hex << p;
    ASSERT_EQ(bitsOf<H>(std::nextafter(mid, 0.0f)), low) << std::hex << p;
    ASSERT_EQ(bitsOf<H>(std::nextafter(mid, INFINITY)), high) << std::hex << p;
  }
}

} // namespace

TEST(HalfTest, F16RoundTripsEveryPattern) { checkRoundTrip<f16>(0x7c00); }

// This file is compiled with -mf16c where the compiler has it (see
// CMakeLists.txt), so f16 converts by instruction here: every half and a
// sweep of 2^32 / 61 float patterns (every exponent, sign and rounding
// case) give the bits of the integer arithmetic CUDA uses.
TEST(HalfTest, F16InstructionsMatchTheIntegerConversion) {
#if !defined(ZTC_F16C)
  GTEST_SKIP() << "compiled without F16C";
#else
  if (!__builtin_cpu_supports("f16c"))
    GTEST_SKIP() << "this machine has no F16C";
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    float byInstruction = valueOf<f16>(static_cast<uint16_t>(p));
    float byIntegers =
        ztc::half_detail::halfBitsToFloat(static_cast<uint16_t>(p));
    uint32_t a, b;
    std::memcpy(&a, &byInstruction, 4);
    std::memcpy(&b, &byIntegers, 4);
    ASSERT_EQ(a, b) << std::hex << p;
  }
  for (uint64_t p = 0; p <= 0xffffffffull; p += 61) {
    uint32_t pattern = static_cast<uint32_t>(p);
    float value;
    std::memcpy(&value, &pattern, 4);
    ASSERT_EQ(bitsOf<f16>(value), ztc::half_detail::floatToHalfBits(value))
        << std::hex << pattern;
  }
#endif
}

TEST(HalfTest, F16RoundsToNearestEven) { checkRounding<f16>(0x7c00); }

TEST(HalfTest, F16NamedValues) {
  EXPECT_EQ(bitsOf<f16>(1.0f), 0x3c00);
  EXPECT_EQ(bitsOf<f16>(-2.0f), 0xc000);
  EXPECT_EQ(bitsOf<f16>(0.1f), 0x2e66);
  EXPECT_EQ(bitsOf<f16>(65504.0f), 0x7bff);
  EXPECT_EQ(bitsOf<f16>(65519.996f), 0x7bff);
  EXPECT_EQ(bitsOf<f16>(65520.0f), 0x7c00); // tie rounds to even: infinity
  EXPECT_EQ(bitsOf<f16>(1e10f), 0x7c00);
  EXPECT_EQ(bitsOf<f16>(-1e10f), 0xfc00);
  EXPECT_EQ(bitsOf<f16>(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(bitsOf<f16>(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(bitsOf<f16>(-0.0f), 0x8000);
  EXPECT_EQ(bitsOf<f16>(std::ldexp(1.0f, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(bitsOf<f16>(std::ldexp(1.0f, -25)), 0x0000); // tie to even: 0
  EXPECT_EQ(bitsOf<f16>(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(bitsOf<f16>(std::ldexp(3.0f, -25)), 0x0002);    // 1.5 ulp ties to 2
  EXPECT_EQ(bitsOf<f16>(std::ldexp(1.0f, -14)), 0x0400);    // smallest normal
  EXPECT_EQ(bitsOf<f16>(std::ldexp(1023.5f, -24)), 0x0400); // carry to normal
  EXPECT_EQ(bitsOf<f16>(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(std::isnan(static_cast<float>(f16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(static_cast<float>(f16(-std::nanf("")))));
  EXPECT_EQ(valueOf<f16>(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(valueOf<f16>(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(valueOf<f16>(0x3555), 0.333251953125f);
}

TEST(HalfTest, BF16RoundTripsEveryPattern) { checkRoundTrip<bf16>(0x7f80); }

TEST(HalfTest, BF16RoundsToNearestEven) { checkRounding<bf16>(0x7f80); }

/// The emitter's rounding of bf16 results in float lanes is the narrowing
/// and widening it replaces, bit for bit: every 31st float pattern (both
/// signs, subnormals, infinities and NaNs among them) and the ties.
TEST(HalfTest, RoundToBFloat16IsNarrowingAndWidening) {
  auto check = [](uint32_t pattern) {
    float value;
    std::memcpy(&value, &pattern, 4);
    float expected = static_cast<float>(bf16(value));
    float actual = ztc::roundToBFloat16(value);
    uint32_t expectedBits, actualBits;
    std::memcpy(&expectedBits, &expected, 4);
    std::memcpy(&actualBits, &actual, 4);
    ASSERT_EQ(actualBits, expectedBits) << "float pattern " << std::hex
                                        << pattern;
  };
  for (uint64_t pattern = 0; pattern <= 0xffffffffu; pattern += 31)
    check(static_cast<uint32_t>(pattern));
  for (uint32_t high : {0x3f80u, 0x3f81u, 0x7f7fu, 0x0001u, 0x8001u})
    for (uint32_t low : {0x7fffu, 0x8000u, 0x8001u})
      check(high << 16 | low);
}

TEST(HalfTest, BF16NamedValues) {
  EXPECT_EQ(bitsOf<bf16>(1.0f), 0x3f80);
  EXPECT_EQ(bitsOf<bf16>(0.1f), 0x3dcd);
  EXPECT_EQ(bitsOf<bf16>(-3.0f), 0xc040);
  EXPECT_EQ(bitsOf<bf16>(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bitsOf<bf16>(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bitsOf<bf16>(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(bitsOf<bf16>(-0.0f), 0x8000);
  EXPECT_EQ(bitsOf<bf16>(std::numeric_limits<float>::denorm_min()), 0x0000);
  // A signalling NaN whose payload sits in the dropped bits stays NaN.
  uint32_t signalling = 0x7f800001;
  float nan;
  std::memcpy(&nan, &signalling, 4);
  EXPECT_TRUE(std::isnan(static_cast<float>(bf16(nan))));
  EXPECT_EQ(valueOf<bf16>(0x4049), 3.140625f);
}
