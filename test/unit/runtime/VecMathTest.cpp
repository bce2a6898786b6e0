//===- VecMathTest.cpp - ztc::vecmath's exp and erf -----------------------===//
//
// Against libm's double exp and erf, in units in the last place of the
// float result: every 101st float of the ranges where the functions vary
// (about twenty million values each), and the special values by name.
//
//===----------------------------------------------------------------------===//

#include "kernels/VecMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace {

/// |got - exact| in units of the float spacing at the exact value (the
/// smallest subnormal for results below the normal range).
double ulps(float got, double exact) {
  float rounded = static_cast<float>(exact);
  float magnitude = std::fabs(rounded);
  float spacing =
      std::nextafter(magnitude, std::numeric_limits<float>::infinity()) -
      magnitude;
  return std::fabs(double(got) - exact) / double(spacing);
}

float floatOfBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

/// The largest error of `fn` against `exact` over every 101st float with
/// |x| below `limit`, and where it occurs.
template <typename Fn, typename Exact>
std::pair<double, float> worstError(Fn fn, Exact exact, float limit) {
  std::pair<double, float> worst = {0.0, 0.0f};
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 101) {
    float x = floatOfBits(static_cast<uint32_t>(bits));
    if (!(std::fabs(x) < limit))
      continue;
    double error = ulps(fn(x), exact(double(x)));
    if (error > worst.first)
      worst = {error, x};
  }
  return worst;
}

TEST(VecMathTest, ExpIsWithinOneUlpAndAHalf) {
  auto [error, at] = worstError([](float x) { return ztc::vecmath::exp(x); },
                                [](double x) { return std::exp(x); }, 88.7f);
  EXPECT_LE(error, 1.5) << "at x = " << at;
  // Below the normal range (results from 2^-149 to 2^-126) too.
  auto [low, lowAt] = worstError(
      [](float x) { return ztc::vecmath::exp(x - 88.0f); },
      [](double x) { return std::exp(double(float(x) - 88.0f)); }, 16.0f);
  EXPECT_LE(low, 1.5) << "at x = " << lowAt << " - 88";
}

TEST(VecMathTest, ErfIsWithinThreeUlp) {
  auto [error, at] = worstError([](float x) { return ztc::vecmath::erf(x); },
                                [](double x) { return std::erf(x); }, 6.0f);
  EXPECT_LE(error, 3.0) << "at x = " << at;
}

TEST(VecMathTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  using ztc::vecmath::erf;
  using ztc::vecmath::exp;
  EXPECT_EQ(exp(0.0f), 1.0f);
  EXPECT_EQ(exp(-0.0f), 1.0f);
  EXPECT_EQ(exp(inf), inf);
  EXPECT_EQ(exp(-inf), 0.0f);
  EXPECT_EQ(exp(89.0f), inf);
  EXPECT_EQ(exp(1e30f), inf);
  EXPECT_EQ(exp(-104.5f), 0.0f);
  EXPECT_EQ(exp(-1e30f), 0.0f);
  EXPECT_TRUE(std::isnan(exp(nan)));
  // The largest float below overflow and the smallest subnormal.
  EXPECT_EQ(exp(88.72283f), std::exp(88.72283f));
  EXPECT_EQ(exp(-103.9f), std::exp(-103.9f));

  EXPECT_EQ(erf(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(erf(-0.0f)));
  EXPECT_EQ(erf(inf), 1.0f);
  EXPECT_EQ(erf(-inf), -1.0f);
  EXPECT_EQ(erf(10.0f), 1.0f);
  EXPECT_EQ(erf(-10.0f), -1.0f);
  EXPECT_TRUE(std::isnan(erf(nan)));
  // Near 0 erf(x) = 2x/sqrt(pi): relative accuracy holds there too.
  EXPECT_FLOAT_EQ(erf(1e-30f), static_cast<float>(std::erf(1e-30)));
  EXPECT_FLOAT_EQ(erf(-1e-20f), static_cast<float>(std::erf(-1e-20)));
}

} // namespace
