//===- VecMath.h - exp and erf that loops vectorize -------------*- C++ -*-===//
//
// Float exp and erf for the generated CPU code and the CPU kernels
// (CpuKernels.h). libm's expf and erff are calls the compiler cannot
// vectorize: on the 4-layer GPT the GELU's two erf loops and softmax's
// exponentials took 15% of the step. These are straight-line code (a
// polynomial, bit operations, selects) that a loop vectorizes, as
// PyTorch's and ONNX Runtime's vectorized kernels do.
//
// Accuracy against the exact value, checked by VecMathTest over every
// 101st float of the ranges where the functions vary: exp within 1.5 ulp
// (1.2 measured; subnormal results included), erf within 3 ulp (2.65
// measured; libm's are within 1).
// Special values as libm: exp(-inf) = 0, exp(+inf) = inf, overflow to inf,
// NaN in NaN out; erf(+-inf) = +-1, erf(-0) = -0.
//
// Coefficients: least-squares polynomial fits on Chebyshev nodes in double
// precision, evaluated by Horner's rule in float.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_VECMATH_H
#define ZTC_RUNTIME_KERNELS_VECMATH_H

#include <cstdint>
#include <cstring>

namespace ztc::vecmath {

namespace detail {

inline float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline uint32_t toBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Quiet comparisons: an ordinary < may raise the invalid-operation flag on
// a NaN, so the compiler may not evaluate both sides of a select made of
// it, and the loop would not vectorize.
inline bool less(float a, float b) { return __builtin_isless(a, b); }

inline float clamp(float x, float low, float high) {
  return less(x, low) ? low : (less(high, x) ? high : x);
}

} // namespace detail

/// e^x. e^x = 2^n e^r with n = round(x / ln 2) and r = x - n ln 2 (ln 2 in
/// two parts, so r is exact), |r| <= ln(2)/2; e^r by a degree-6
/// polynomial. 2^n is applied as two normal factors 2^(n/2) 2^(n - n/2),
/// so that results near overflow and subnormal ones come out right.
inline float exp(float x) {
  // Beyond these e^x is inf, or 0 after rounding; NaN computes as 0 and
  // is put back at the end (a NaN must not reach the integer conversion).
  float xc = x != x ? 0.0f : detail::clamp(x, -104.0f, 88.8f);
  // Round to nearest by the 1.5 * 2^23 trick (the default rounding mode).
  float n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.394644656e-3f;
  p = p * r + 8.369151694e-3f;
  p = p * r + 4.166626314e-2f;
  p = p * r + 1.666651599e-1f;
  p = p * r + 5.000000081e-1f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  auto e = static_cast<int32_t>(n);
  int32_t half = e / 2;
  float scale1 = detail::fromBits(static_cast<uint32_t>(half + 127) << 23);
  float scale2 = detail::fromBits(static_cast<uint32_t>(e - half + 127) << 23);
  float result = p * scale1 * scale2;
  return x != x ? x : result;
}

/// erf(x). Below |x| = 1, x P(x^2) (relative accuracy near 0); from 1 to
/// 4 a degree-12 polynomial in |x| - 2.5, fitted on [1, 4]; from 3.919206
/// on, erf(x) rounds to +-1.
inline float erf(float x) {
  float ax = detail::clamp(detail::fromBits(detail::toBits(x) & 0x7fffffffu),
                           0.0f, 4.0f);
  float s = ax * ax;
  float small = 7.933493887e-5f;
  small = small * s - 8.034846650e-4f;
  small = small * s + 5.191218377e-3f;
  small = small * s - 2.685539945e-2f;
  small = small * s + 1.128362573e-1f;
  small = small * s - 3.761262988e-1f;
  small = small * s + 1.128379167e+0f;
  small = small * ax;
  float u = ax - 2.5f;
  float large = -8.709440798e-6f;
  large = large * u + 2.140600996e-5f;
  large = large * u + 5.941381129e-5f;
  large = large * u - 2.808719308e-4f;
  large = large * u + 2.919994278e-4f;
  large = large * u + 5.742026847e-4f;
  large = large * u - 2.823754270e-3f;
  large = large * u + 6.100025459e-3f;
  large = large * u - 8.612779454e-3f;
  large = large * u + 8.354324599e-3f;
  large = large * u - 5.447070271e-3f;
  large = large * u + 2.177979306e-3f;
  large = large * u + 9.995930794e-1f;
  large = detail::less(1.0f, large) ? 1.0f : large; // never above 1
  float magnitude = detail::less(ax, 1.0f) ? small : large;
  // From 3.919206 on, 1 - erf(x) is below half the spacing of floats under
  // 1: erf(x) rounds to 1.
  magnitude = detail::less(ax, 3.919206f) ? magnitude : 1.0f;
  // The sign of x (erf is odd; -0 stays -0); NaN passes through.
  float result = detail::fromBits(detail::toBits(magnitude) |
                                  (detail::toBits(x) & 0x80000000u));
  return x != x ? x : result;
}

} // namespace ztc::vecmath

#endif // ZTC_RUNTIME_KERNELS_VECMATH_H
