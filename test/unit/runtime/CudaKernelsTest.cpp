//===- CudaKernelsTest.cpp - CudaKernels.cuh against CpuKernels.h ---------===//
//
// Runs the CUDA kernel library in its host emulation (ZTC_CUDA_HOST_EMULATION:
// every kernel body runs serially on the host, the plain product stands in
// for cuBLAS) and compares each function with its CpuKernels.h counterpart,
// which KernelsTest.cpp checks against references. This covers the host
// planning and every kernel's index arithmetic on machines without a GPU;
// the device-only parts (launches, block reductions, cuBLAS calls) are
// exercised only where a GPU runs the generated code.
//
//===----------------------------------------------------------------------===//

#define ZTC_CUDA_HOST_EMULATION 1
#include "kernels/CudaKernels.cuh"
#include "kernels/CpuKernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

using ztc::bf16;
using ztc::f16;
namespace cpu = ztc::cpu;
namespace gpu = ztc::cuda;

namespace {

using Shape = std::vector<int64_t>;
constexpr cudaStream_t kStream = nullptr;

/// A call's scratch as the compiler plans it (Scratch.h's ZTC_SCRATCH
/// functions), on the host: a kernel given too little records an error,
/// so every comparison below also checks the plan covers the kernel.
struct PlannedScratch {
  std::vector<char> memory;
  explicit PlannedScratch(int64_t bytes) : memory(bytes) {}
  ztc::Scratch get() {
    return {memory.empty() ? nullptr : memory.data(),
            static_cast<int64_t>(memory.size())};
  }
};

/// The convolutions' budget for columns: lowered to one image's worth by
/// the chunked tests, so the products accumulate over chunks.
int64_t &convBudget() {
  static int64_t budget = gpu::scratch::kConvColumnsBytes;
  return budget;
}

int64_t numel(const Shape &shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

cpu::Dims cpuDims(const Shape &shape) {
  cpu::Dims dims;
  for (int64_t dim : shape)
    dims.d[dims.rank++] = dim;
  return dims;
}

gpu::Dims gpuDims(const Shape &shape) {
  gpu::Dims dims;
  for (int64_t dim : shape)
    dims.d[dims.rank++] = dim;
  return dims;
}

template <typename T> double toDouble(T value) {
  if constexpr (std::is_integral_v<T> || std::is_same_v<T, double>)
    return static_cast<double>(value);
  else
    return static_cast<double>(static_cast<float>(value));
}

/// Random values in [low, high), rounded to T (integers: truncated).
template <typename T>
std::vector<T> randomValues(int64_t count, unsigned seed, double low = -1,
                            double high = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(low, high);
  std::vector<T> values(count);
  for (T &value : values) {
    double sample = dist(rng);
    if constexpr (std::is_integral_v<T>)
      value = static_cast<T>(std::floor(sample));
    else if constexpr (std::is_same_v<T, double>)
      value = sample;
    else
      value = static_cast<T>(static_cast<float>(sample));
  }
  return values;
}

/// Relative tolerance of T's results: sums run in another order than on
/// the CPU (BLAS), and 16-bit results may round to a neighbour.
template <typename T> double tolerance() {
  if constexpr (std::is_same_v<T, f16>)
    return 2e-3;
  else if constexpr (std::is_same_v<T, bf16>)
    return 1.6e-2;
  else if constexpr (std::is_same_v<T, float>)
    return 1e-5;
  else
    return 1e-12;
}

template <typename T>
void expectClose(const std::vector<T> &actual, const std::vector<T> &expected,
                 const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = toDouble(actual[i]), e = toDouble(expected[i]);
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(a)) << what << " at " << i;
      continue;
    }
    EXPECT_NEAR(a, e, tolerance<T>() * (1 + std::fabs(e)))
        << what << " at " << i;
  }
}

std::string describe(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// ztc::cuda::lastError(), then cleared.
std::string takeError() {
  std::string message = gpu::lastError();
  gpu::clearError();
  return message;
}

//===----------------------------------------------------------------------===//
// Matrix products and convolution
//===----------------------------------------------------------------------===//

/// numpy.matmul's result shape.
Shape matmulShape(Shape a, Shape b) {
  bool aVector = a.size() == 1, bVector = b.size() == 1;
  if (aVector)
    a.insert(a.begin(), 1);
  if (bVector)
    b.push_back(1);
  Shape aBatch(a.begin(), a.end() - 2), bBatch(b.begin(), b.end() - 2);
  size_t rank = std::max(aBatch.size(), bBatch.size());
  Shape c(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x =
        i < rank - aBatch.size() ? 1 : aBatch[i - (rank - aBatch.size())];
    int64_t y =
        i < rank - bBatch.size() ? 1 : bBatch[i - (rank - bBatch.size())];
    c[i] = x == 1 ? y : x;
  }
  if (!aVector)
    c.push_back(a[a.size() - 2]);
  if (!bVector)
    c.push_back(b.back());
  return c;
}

/// `values` of `shape` with the last two dimensions swapped; `shape`
/// becomes the swapped shape.
template <typename T>
std::vector<T> swapLastTwo(const std::vector<T> &values, Shape &shape) {
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  int64_t batches = numel(shape) / std::max<int64_t>(rows * cols, 1);
  std::vector<T> swapped(values.size());
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        swapped[(b * cols + j) * rows + i] = values[(b * rows + i) * cols + j];
  std::swap(shape[shape.size() - 2], shape.back());
  return swapped;
}

template <typename T> void checkMatmuls() {
  // Shared b, vectors, full batches, a broadcast, broadcasts that leave an
  // outer host loop, an empty K, and a product the CPU splits into bands.
  std::vector<std::pair<Shape, Shape>> cases = {{{3, 4}, {4, 5}},
                                                {{2, 3, 4}, {4, 5}},
                                                {{4}, {4, 5}},
                                                {{3, 4}, {4}},
                                                {{4}, {4}},
                                                {{2, 3, 4}, {2, 4, 5}},
                                                {{1, 3, 4}, {2, 4, 5}},
                                                {{3, 4}, {2, 2, 4, 5}},
                                                {{2, 1, 3, 4}, {1, 3, 4, 5}},
                                                {{5, 1, 3, 4}, {2, 4, 6}},
                                                {{2, 3, 1, 3, 4}, {3, 2, 4, 2}},
                                                {{2, 3, 0}, {0, 4}},
                                                // Large enough for the CPU's
                                                // bands of rows.
                                                {{64, 48}, {48, 64}}};
  unsigned seed = 1;
  for (const auto &[aShape, bShape] : cases) {
    Shape cShape = matmulShape(aShape, bShape);
    auto a = randomValues<T>(numel(aShape), seed++, -2, 2);
    auto b = randomValues<T>(numel(bShape), seed++, -2, 2);
    std::vector<T> expected(numel(cShape), T(7.0f)),
        actual(numel(cShape), T(-3.0f));
    cpu::matmul<T>(a.data(), cpuDims(aShape), b.data(), cpuDims(bShape),
                   expected.data(), cpuDims(cShape),
                   ztc::MatmulParams{false, false});
    gpu::matmul<T>(a.data(), gpuDims(aShape), b.data(), gpuDims(bShape),
                   actual.data(), gpuDims(cShape),
                   ztc::MatmulParams{false, false}, kStream);
    std::string what = describe(aShape) + " x " + describe(bShape);
    expectClose(actual, expected, "matmul " + what);
    // The same products with operands stored transposed, on both libraries.
    for (bool transA : {false, true})
      for (bool transB : {false, true}) {
        if ((!transA && !transB) || (transA && aShape.size() < 2) ||
            (transB && bShape.size() < 2))
          continue;
        Shape aStored = aShape, bStored = bShape;
        auto aValues = transA ? swapLastTwo(a, aStored) : a;
        auto bValues = transB ? swapLastTwo(b, bStored) : b;
        std::string flags =
            std::string(transA ? " transA" : "") + (transB ? " transB" : "");
        std::vector<T> cpuActual(numel(cShape), T(-5.0f));
        cpu::matmul<T>(aValues.data(), cpuDims(aStored), bValues.data(),
                       cpuDims(bStored), cpuActual.data(), cpuDims(cShape),
                       ztc::MatmulParams{transA, transB});
        expectClose(cpuActual, expected, "cpu matmul " + what + flags);
        std::fill(actual.begin(), actual.end(), T(-3.0f));
        gpu::matmul<T>(aValues.data(), gpuDims(aStored), bValues.data(),
                       gpuDims(bStored), actual.data(), gpuDims(cShape),
                       ztc::MatmulParams{transA, transB}, kStream);
        expectClose(actual, expected, "matmul " + what + flags);
      }
  }
}

TEST(CudaKernelsTest, MatmulFloat) { checkMatmuls<float>(); }
TEST(CudaKernelsTest, MatmulDouble) { checkMatmuls<double>(); }
TEST(CudaKernelsTest, MatmulF16) { checkMatmuls<f16>(); }
TEST(CudaKernelsTest, MatmulBF16) { checkMatmuls<bf16>(); }
TEST(CudaKernelsTest, MatmulInt64) { checkMatmuls<int64_t>(); }

/// matmul with a bias and matmulAdd against the CPU's (the products differ
/// in rounding, the epilogues are the same sums): one product, a batch of
/// them, and K = 0. On a device a single product runs in cuBLASLt's
/// epilogue; the emulation adds in EpilogueBody.
template <typename T> void checkMatmulEpilogues() {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 5}, {5, 4}}, {{2, 3, 5}, {2, 5, 4}}, {{3, 0}, {0, 4}}};
  unsigned seed = 400;
  for (const auto &[aShape, bShape] : cases) {
    Shape cShape = matmulShape(aShape, bShape);
    const int64_t n = bShape.back(), count = numel(cShape);
    auto a = randomValues<T>(numel(aShape), seed++, -2, 2);
    auto b = randomValues<T>(numel(bShape), seed++, -2, 2);
    auto bias = randomValues<T>(n, seed++, -2, 2);
    auto addend = randomValues<T>(count, seed++, -2, 2);
    std::string what = describe(aShape) + " x " + describe(bShape);
    for (bool withBias : {false, true}) {
      const T *b0 = withBias ? bias.data() : nullptr;
      std::vector<T> expected(count, T(7.0f)), actual(count, T(-3.0f));
      cpu::matmulAdd<T>(a.data(), cpuDims(aShape), b.data(), cpuDims(bShape),
                        addend.data(), cpuDims(cShape), b0, cpuDims({n}),
                        expected.data(), cpuDims(cShape), ztc::MatmulParams{});
      gpu::matmulAdd<T>(a.data(), gpuDims(aShape), b.data(), gpuDims(bShape),
                        addend.data(), gpuDims(cShape), b0, gpuDims({n}),
                        actual.data(), gpuDims(cShape), ztc::MatmulParams{},
                        kStream);
      expectClose(actual, expected,
                  "matmulAdd " + what + (withBias ? " with a bias" : ""));
    }
    std::vector<T> expected(count, T(7.0f)), actual(count, T(-3.0f));
    cpu::matmul<T>(a.data(), cpuDims(aShape), b.data(), cpuDims(bShape),
                   bias.data(), cpuDims({n}), expected.data(), cpuDims(cShape),
                   ztc::MatmulParams{});
    gpu::matmul<T>(a.data(), gpuDims(aShape), b.data(), gpuDims(bShape),
                   bias.data(), gpuDims({n}), actual.data(), gpuDims(cShape),
                   ztc::MatmulParams{}, kStream);
    expectClose(actual, expected, "matmul with a bias " + what);
  }
}

TEST(CudaKernelsTest, MatmulEpiloguesFloat) { checkMatmulEpilogues<float>(); }
TEST(CudaKernelsTest, MatmulEpiloguesBF16) { checkMatmulEpilogues<bf16>(); }

/// matmulWide and matmulAddWide against the CPU's: f32 results of half
/// products, each rounded to T before it is widened, so they may differ by
/// one of T's steps where the sums' order rounds a product the other way
/// (T's tolerance). One product with and without a transposed weight, a
/// batch, and K = 0. On a device a single product runs in cuBLASLt with
/// an f32 C and D; the emulation multiplies and adds in WideEpilogueBody.
template <typename T> void checkWideProducts() {
  const std::vector<std::tuple<Shape, Shape, bool>> cases = {
      {{2, 3, 5}, {5, 4}, false},
      {{2, 8, 32}, {48, 32}, true},
      {{2, 3, 5}, {2, 5, 4}, false},
      {{3, 0}, {0, 4}, false}};
  unsigned seed = 410;
  for (const auto &[aShape, bShape, transB] : cases) {
    Shape cShape = aShape;
    cShape.back() = transB ? bShape[bShape.size() - 2] : bShape.back();
    const int64_t n = cShape.back(), count = numel(cShape);
    const ztc::MatmulParams params{false, transB, false};
    auto a = randomValues<T>(numel(aShape), seed++, -2, 2);
    auto b = randomValues<T>(numel(bShape), seed++, -2, 2);
    auto bias = randomValues<T>(n, seed++, -2, 2);
    auto addend = randomValues<float>(count, seed++, -8, 8);
    for (bool withBias : {false, true}) {
      const T *b0 = withBias ? bias.data() : nullptr;
      std::string what = describe(aShape) + " x " + describe(bShape) +
                         (withBias ? " with a bias" : "");
      for (bool add : {false, true}) {
        std::vector<float> expected(count, 7.0f), actual(count, -3.0f);
        if (add) {
          cpu::matmulAddWide<T>(a.data(), cpuDims(aShape), b.data(),
                                cpuDims(bShape), addend.data(), cpuDims(cShape),
                                b0, cpuDims({n}), expected.data(),
                                cpuDims(cShape), params);
          gpu::matmulAddWide<T>(a.data(), gpuDims(aShape), b.data(),
                                gpuDims(bShape), addend.data(), gpuDims(cShape),
                                b0, gpuDims({n}), actual.data(),
                                gpuDims(cShape), params, kStream);
        } else {
          cpu::matmulWide<T>(a.data(), cpuDims(aShape), b.data(),
                             cpuDims(bShape), b0, cpuDims({n}), expected.data(),
                             cpuDims(cShape), params);
          gpu::matmulWide<T>(a.data(), gpuDims(aShape), b.data(),
                             gpuDims(bShape), b0, gpuDims({n}), actual.data(),
                             gpuDims(cShape), params, kStream);
        }
        for (int64_t i = 0; i < count; ++i)
          EXPECT_NEAR(actual[i], expected[i],
                      tolerance<T>() * (1 + std::fabs(expected[i])))
              << (add ? "matmulAddWide " : "matmulWide ") << what << " at "
              << i;
      }
    }
  }
}

TEST(CudaKernelsTest, WideProductsBF16) { checkWideProducts<bf16>(); }
TEST(CudaKernelsTest, WideProductsF16) { checkWideProducts<f16>(); }

/// matmulBiasGrad against the CPU's: the transposed product and the sums
/// of g's rows, in the scratch the compiler plans. On a device one
/// product runs in cuBLASLt's bias-gradient epilogue; the emulation
/// multiplies and then reduces.
template <typename T> void checkMatmulBiasGrad() {
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> cases = {
      {6, 5, 4}, {700, 40, 3}, {0, 6, 3}}; // rows, n, k
  unsigned seed = 430;
  for (const auto &[rows, n, k] : cases) {
    // Small values: the products' 700-term sums differ in order only.
    auto g = randomValues<T>(rows * n, seed++, -0.5, 0.5);
    auto x = randomValues<T>(rows * k, seed++, -0.5, 0.5);
    const ztc::MatmulParams transposed{true, false, false};
    std::vector<T> product(n * k, T(7.0f)), sums(n, T(7.0f));
    cpu::matmulBiasGrad<T>(g.data(), cpuDims({rows, n}), x.data(),
                           cpuDims({rows, k}), product.data(), cpuDims({n, k}),
                           sums.data(), cpuDims({n}), transposed);
    std::vector<T> actualProduct(n * k, T(-3.0f)), actualSums(n, T(-3.0f));
    const gpu::Dims ins[] = {gpuDims({rows, n}), gpuDims({rows, k})};
    const gpu::Dims outs[] = {gpuDims({n, k}), gpuDims({n})};
    PlannedScratch scratch(
        gpu::scratch::matmulBiasGradBytes<T>(ins, outs, transposed));
    gpu::matmulBiasGrad<T>(g.data(), ins[0], x.data(), ins[1],
                           actualProduct.data(), outs[0], actualSums.data(),
                           outs[1], transposed, scratch.get(), kStream);
    std::string what = describe({rows, n}) + " x " + describe({rows, k});
    expectClose(actualProduct, product, "matmulBiasGrad's product " + what);
    expectClose(actualSums, sums, "matmulBiasGrad's sums " + what);
    // x W's gradients (matmulBiasGradB): xᵀ g, g's rows summed.
    std::vector<T> productB(k * n, T(7.0f)), actualB(k * n, T(-3.0f)),
        sumsB(n, T(-3.0f));
    cpu::matmul<T>(x.data(), cpuDims({rows, k}), g.data(), cpuDims({rows, n}),
                   productB.data(), cpuDims({k, n}), transposed);
    const gpu::Dims insB[] = {gpuDims({rows, k}), gpuDims({rows, n})};
    const gpu::Dims outsB[] = {gpuDims({k, n}), gpuDims({n})};
    PlannedScratch scratchB(
        gpu::scratch::matmulBiasGradBBytes<T>(insB, outsB, transposed));
    gpu::matmulBiasGradB<T>(x.data(), insB[0], g.data(), insB[1],
                            actualB.data(), outsB[0], sumsB.data(), outsB[1],
                            transposed, scratchB.get(), kStream);
    expectClose(actualB, productB, "matmulBiasGradB's product " + what);
    expectClose(sumsB, sums, "matmulBiasGradB's sums " + what);
  }
}

TEST(CudaKernelsTest, MatmulBiasGradFloat) { checkMatmulBiasGrad<float>(); }
TEST(CudaKernelsTest, MatmulBiasGradBF16) { checkMatmulBiasGrad<bf16>(); }

struct ConvCase {
  Shape x, w;
  int64_t strides[2], pads[4], dilations[2], group;
  bool bias;
};

/// Convolutions: short patches (direct kernel) and longer ones (im2col +
/// product), strides, pads, dilations and groups, depthwise, 1x1 kernels.
std::vector<ConvCase> convCases() {
  return {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {{2, 8, 7, 6}, {5, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {{1, 8, 9, 8}, {6, 4, 3, 3}, {2, 1}, {1, 0, 2, 1}, {2, 1}, 2, false},
      {{2, 12, 9, 9}, {6, 4, 3, 4}, {1, 2}, {0, 1, 1, 0}, {1, 2}, 3, true},
      {{2, 4, 5, 5}, {4, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4, true},
      {{2, 40, 3, 4}, {6, 40, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      {{1, 80, 3, 3}, {4, 40, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, false},
      {{1, 40, 5, 5}, {3, 40, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, true},
  };
}

/// The output shape of `c`.
Shape convOutput(const ConvCase &c) {
  int64_t kH = c.w[2], kW = c.w[3];
  int64_t outH =
      (c.x[2] + c.pads[0] + c.pads[2] - c.dilations[0] * (kH - 1) - 1) /
          c.strides[0] +
      1;
  int64_t outW =
      (c.x[3] + c.pads[1] + c.pads[3] - c.dilations[1] * (kW - 1) - 1) /
          c.strides[1] +
      1;
  return {c.x[0], c.w[0], outH, outW};
}

template <typename T> void checkConvs() {
  std::vector<ConvCase> cases = convCases();
  unsigned seed = 100;
  for (const ConvCase &c : cases) {
    Shape yShape = convOutput(c);
    auto x = randomValues<T>(numel(c.x), seed++, -2, 2);
    auto w = randomValues<T>(numel(c.w), seed++, -2, 2);
    auto bias = randomValues<T>(c.w[0], seed++, -2, 2);
    std::vector<T> expected(numel(yShape), T(7.0f)),
        actual(numel(yShape), T(-3.0f));
    const Shape biasShape = c.bias ? Shape{c.w[0]} : Shape{};
    const ztc::Conv2dParams params{ztc::Ints{c.strides}, ztc::Ints{c.pads},
                                   ztc::Ints{c.dilations}, c.group, false};
    cpu::conv2d<T>(x.data(), cpuDims(c.x), w.data(), cpuDims(c.w),
                   c.bias ? bias.data() : nullptr, cpuDims(biasShape),
                   expected.data(), cpuDims(yShape), params);
    const gpu::Dims ins[] = {gpuDims(c.x), gpuDims(c.w), gpuDims(biasShape)};
    const gpu::Dims outs[] = {gpuDims(yShape)};
    PlannedScratch scratch(gpu::scratch::conv2dBytes<T>(ins, outs, params));
    gpu::conv2d<T>(x.data(), gpuDims(c.x), w.data(), gpuDims(c.w),
                   c.bias ? bias.data() : nullptr, gpuDims(biasShape),
                   actual.data(), gpuDims(yShape), params, scratch.get(),
                   kStream);
    expectClose(actual, expected,
                "conv2d " + describe(c.x) + " * " + describe(c.w));
  }
}

TEST(CudaKernelsTest, Conv2dFloat) { checkConvs<float>(); }
TEST(CudaKernelsTest, Conv2dF16) { checkConvs<f16>(); }
TEST(CudaKernelsTest, Conv2dInt64) { checkConvs<int64_t>(); }

// A convolution given less scratch than its plan writes nothing and says
// how much it needed: 2 images of 8 * 3 * 3 rows by 7 * 6 pixels of
// columns, in f32, would fit; none does not.
TEST(CudaKernelsTest, Conv2dNamesTheScratchItLacks) {
  const ConvCase c = convCases()[1];
  Shape yShape = convOutput(c);
  std::vector<float> x(numel(c.x), 1.0f), w(numel(c.w), 1.0f),
      y(numel(yShape), -3.0f);
  const ztc::Conv2dParams params{ztc::Ints{c.strides}, ztc::Ints{c.pads},
                                 ztc::Ints{c.dilations}, c.group, false};
  const gpu::Dims ins[] = {gpuDims(c.x), gpuDims(c.w), gpuDims({})};
  const gpu::Dims outs[] = {gpuDims(yShape)};
  int64_t planned = gpu::scratch::conv2dBytes<float>(ins, outs, params);
  EXPECT_EQ(planned, 2 * 8 * 3 * 3 * 7 * 6 * int64_t(sizeof(float)));
  gpu::conv2d<float>(x.data(), gpuDims(c.x), w.data(), gpuDims(c.w), nullptr,
                     gpuDims({}), y.data(), gpuDims(yShape), params,
                     ztc::Scratch{}, kStream);
  EXPECT_EQ(takeError(), "conv2d: needs " + std::to_string(planned / 2) +
                             " bytes of scratch memory, was given 0 (its "
                             "artifact's memory plan gives it less: "
                             "recompile it)");
  EXPECT_EQ(y[0], -3.0f);
}

//===----------------------------------------------------------------------===//
// Pooling and normalization
//===----------------------------------------------------------------------===//

struct PoolCase {
  Shape x, y;
  int64_t kernel[2], strides[2], pads[4], dilations[2];
  /// y's sizes round up (the kernels read them from y; the flag is the
  /// configuration's record of it).
  bool ceilMode;
};

/// Pooling windows; the last case has ceil-mode windows that run past the
/// padded input.
std::vector<PoolCase> poolCases() {
  return {
      {{2, 3, 8, 8}, {2, 3, 4, 4}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false},
      {{1, 2, 7, 6}, {1, 2, 4, 3}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false},
      {{1, 2, 9, 9}, {1, 2, 3, 4}, {3, 2}, {3, 2}, {1, 0, 0, 0}, {2, 2}, true},
      {{1, 1, 5, 5}, {1, 1, 3, 3}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true},
  };
}

template <typename T> void checkPools() {
  unsigned seed = 200;
  for (const PoolCase &c : poolCases()) {
    auto x = randomValues<T>(numel(c.x), seed++, -3, 3);
    std::vector<T> expected(numel(c.y), T(7.0f)), actual(numel(c.y), T(-3.0f));
    const ztc::MaxPool2dParams maxParams{
        ztc::Ints{c.kernel}, ztc::Ints{c.strides}, ztc::Ints{c.pads},
        ztc::Ints{c.dilations}, c.ceilMode};
    cpu::maxPool2d<T>(x.data(), cpuDims(c.x), expected.data(), cpuDims(c.y),
                      maxParams);
    gpu::maxPool2d<T>(x.data(), gpuDims(c.x), actual.data(), gpuDims(c.y),
                      maxParams, kStream);
    expectClose(actual, expected, "maxPool2d " + describe(c.x));
    for (bool includePad : {false, true}) {
      const ztc::AvgPool2dParams avgParams{
          ztc::Ints{c.kernel}, ztc::Ints{c.strides}, ztc::Ints{c.pads},
          c.ceilMode, includePad};
      cpu::avgPool2d<T>(x.data(), cpuDims(c.x), expected.data(), cpuDims(c.y),
                        avgParams);
      gpu::avgPool2d<T>(x.data(), gpuDims(c.x), actual.data(), gpuDims(c.y),
                        avgParams, kStream);
      expectClose(actual, expected,
                  "avgPool2d " + describe(c.x) +
                      (includePad ? " count_include_pad" : ""));
    }
  }
}

TEST(CudaKernelsTest, PoolingFloat) { checkPools<float>(); }
TEST(CudaKernelsTest, PoolingBF16) { checkPools<bf16>(); }

template <typename T> void checkSoftmax() {
  Shape shape = {3, 4, 5};
  auto x = randomValues<T>(numel(shape), 300, -4, 4);
  std::vector<T> expected(x.size(), T(7.0f)), actual(x.size(), T(-3.0f));
  for (int64_t axis : {0, 1, 2, -1}) {
    cpu::softmax<T>(x.data(), cpuDims(shape), expected.data(), cpuDims(shape),
                    ztc::AxisParams{axis});
    gpu::softmax<T>(x.data(), gpuDims(shape), actual.data(), gpuDims(shape),
                    ztc::AxisParams{axis}, kStream);
    expectClose(actual, expected, "softmax axis " + std::to_string(axis));
    cpu::logSoftmax<T>(x.data(), cpuDims(shape), expected.data(),
                       cpuDims(shape), ztc::AxisParams{axis});
    gpu::logSoftmax<T>(x.data(), gpuDims(shape), actual.data(), gpuDims(shape),
                       ztc::AxisParams{axis}, kStream);
    expectClose(actual, expected, "logSoftmax axis " + std::to_string(axis));
    // Written over its input (Library.def's ZTC_IN_PLACE rows): the same
    // bits as into a buffer of its own.
    std::vector<T> over = x;
    gpu::logSoftmax<T>(over.data(), gpuDims(shape), over.data(), gpuDims(shape),
                       ztc::AxisParams{axis}, kStream);
    EXPECT_EQ(
        0, std::memcmp(over.data(), actual.data(), actual.size() * sizeof(T)))
        << "logSoftmax in place, axis " << axis;
    gpu::softmax<T>(x.data(), gpuDims(shape), actual.data(), gpuDims(shape),
                    ztc::AxisParams{axis}, kStream);
    over = x;
    gpu::softmax<T>(over.data(), gpuDims(shape), over.data(), gpuDims(shape),
                    ztc::AxisParams{axis}, kStream);
    EXPECT_EQ(
        0, std::memcmp(over.data(), actual.data(), actual.size() * sizeof(T)))
        << "softmax in place, axis " << axis;
  }
}

TEST(CudaKernelsTest, SoftmaxFloat) { checkSoftmax<float>(); }
TEST(CudaKernelsTest, SoftmaxDouble) { checkSoftmax<double>(); }
TEST(CudaKernelsTest, SoftmaxF16) { checkSoftmax<f16>(); }

/// Fused attention and its gradients, causal and with a mask that repeats
/// along the heads; key counts that differ from query counts; k and v with
/// fewer heads than q (grouped-query attention). For f32 and
/// the halves, heads of up to 128 run on tiles of 64 by 32 (several of
/// each, partial ones at the ends, more keys than queries and fewer), on
/// the tensor cores for bf16 heads of multiples of 16 (in the emulation,
/// their sums in f32); the heads at the register kernels' limit (256) and
/// past it (their accumulators in the scratch) a warp per row, as double
/// does. Each path again with capped scores (Gemma 2's softcap).
template <typename T> void checkAttention() {
  struct Case {
    Shape q, k, v, mask;
    bool causal;
    double softcap = 0;
  };
  static_assert(gpu::scratch::kAttentionRegisterHead == 256);
  static_assert(gpu::detail::kTileSliceCols == 128);
  const Case cases[] = {
      {{2, 3, 13, 5}, {2, 3, 13, 5}, {2, 3, 13, 7}, {}, true},
      {{2, 3, 9, 4}, {2, 3, 17, 4}, {2, 3, 17, 3}, {2, 1, 9, 17}, false},
      {{1, 2, 11, 6}, {1, 2, 11, 6}, {1, 2, 11, 6}, {1, 1, 1, 11}, true},
      {{1, 2, 150, 64}, {1, 2, 150, 64}, {1, 2, 150, 64}, {}, true},
      {{2, 2, 70, 40},
       {2, 2, 100, 40},
       {2, 2, 100, 24},
       {2, 1, 70, 100},
       false},
      {{1, 1, 40, 128}, {1, 1, 90, 128}, {1, 1, 90, 96}, {}, true},
      {{1, 1, 100, 16}, {1, 1, 40, 16}, {1, 1, 40, 16}, {1, 1, 100, 1}, true},
      {{1, 2, 5, 256}, {1, 2, 6, 256}, {1, 2, 6, 256}, {}, false},
      {{1, 1, 5, 260}, {1, 1, 6, 260}, {1, 1, 6, 257}, {1, 1, 5, 6}, true},
      // Grouped-query heads (k and v with fewer heads than q): a mask per
      // query head; tiles of several keys (the tensor cores for bf16); the
      // register kernels' limit; one key/value head for four query heads.
      {{2, 4, 9, 4}, {2, 2, 17, 4}, {2, 2, 17, 3}, {2, 4, 9, 17}, false},
      {{1, 6, 70, 32},
       {1, 2, 100, 32},
       {1, 2, 100, 32},
       {1, 1, 70, 100},
       false},
      {{1, 4, 40, 16}, {1, 1, 40, 16}, {1, 1, 40, 16}, {}, true},
      {{1, 4, 5, 256}, {1, 2, 6, 256}, {1, 2, 6, 256}, {}, true},
      // Capped scores, a mask after the cap: small tiles, the tensor
      // cores (bf16), grouped heads, a warp per row with accumulators in
      // registers and in the scratch.
      {{2, 3, 9, 4}, {2, 3, 17, 4}, {2, 3, 17, 3}, {2, 1, 9, 17}, false, 0.5},
      {{1, 2, 150, 64}, {1, 2, 150, 64}, {1, 2, 150, 64}, {}, true, 0.5},
      {{1, 4, 40, 16}, {1, 1, 40, 16}, {1, 1, 40, 16}, {}, true, 0.5},
      {{1, 2, 5, 256}, {1, 2, 6, 256}, {1, 2, 6, 256}, {}, false, 0.5},
      {{1, 1, 5, 260}, {1, 1, 6, 260}, {1, 1, 6, 257}, {1, 1, 5, 6}, true, 0.5},
  };
  unsigned seed = 400;
  for (const Case &c : cases) {
    Shape o = c.q;
    o.back() = c.v.back();
    auto q = randomValues<T>(numel(c.q), seed++, -2, 2);
    auto k = randomValues<T>(numel(c.k), seed++, -2, 2);
    auto v = randomValues<T>(numel(c.v), seed++);
    auto g = randomValues<T>(numel(o), seed++);
    std::vector<T> mask;
    if (!c.mask.empty())
      mask = randomValues<T>(numel(c.mask), seed++);
    const T *m = mask.empty() ? nullptr : mask.data();
    ztc::AttentionParams params{0.4, c.causal};
    params.softcap = c.softcap;
    const ztc::AttentionShape shape(gpuDims(c.q), gpuDims(c.k), gpuDims(c.v),
                                    gpuDims(c.mask), m != nullptr, params);
    using gpu::detail::AttentionPath;
    AttentionPath path = AttentionPath::Warp;
    if (sizeof(T) != 8 && c.q.back() <= 128 && c.v.back() <= 128)
      path = sizeof(T) == 2 && c.q.back() % 16 == 0 && c.v.back() % 16 == 0
                 ? AttentionPath::TensorCores
                 : AttentionPath::Tiles;
    for (auto kernel : {gpu::detail::AttentionTileKernel::Forward,
                        gpu::detail::AttentionTileKernel::GradQuery,
                        gpu::detail::AttentionTileKernel::GradKey})
      EXPECT_EQ(gpu::detail::attentionPath<T>(shape, kernel), path)
          << describe(c.q);
    std::vector<T> expected(numel(o)), actual(numel(o));
    cpu::attention<T>(q.data(), cpuDims(c.q), k.data(), cpuDims(c.k), v.data(),
                      cpuDims(c.v), m, cpuDims(c.mask), expected.data(),
                      cpuDims(o), params);
    const gpu::Dims ins[] = {gpuDims(c.q), gpuDims(c.k), gpuDims(c.v),
                             gpuDims(c.mask)};
    PlannedScratch forward(
        gpu::scratch::attentionBytes<T>(ins, nullptr, params));
    gpu::attention<T>(q.data(), gpuDims(c.q), k.data(), gpuDims(c.k), v.data(),
                      gpuDims(c.v), m, gpuDims(c.mask), actual.data(),
                      gpuDims(o), params, forward.get(), kStream);
    std::string what = "attention " + describe(c.q) + " x " + describe(c.k) +
                       (c.softcap > 0 ? " capped" : "");
    expectClose(actual, expected, what);
    std::vector<T> dq(q.size()), dk(k.size()), dv(v.size());
    std::vector<T> gpuDq(q.size()), gpuDk(k.size()), gpuDv(v.size());
    cpu::attentionBackward<T>(
        q.data(), cpuDims(c.q), k.data(), cpuDims(c.k), v.data(), cpuDims(c.v),
        expected.data(), cpuDims(o), g.data(), cpuDims(o), m, cpuDims(c.mask),
        dq.data(), cpuDims(c.q), dk.data(), cpuDims(c.k), dv.data(),
        cpuDims(c.v), params);
    PlannedScratch backward(
        gpu::scratch::attentionBackwardBytes<T>(ins, nullptr, params));
    gpu::attentionBackward<T>(
        q.data(), gpuDims(c.q), k.data(), gpuDims(c.k), v.data(), gpuDims(c.v),
        expected.data(), gpuDims(o), g.data(), gpuDims(o), m, gpuDims(c.mask),
        gpuDq.data(), gpuDims(c.q), gpuDk.data(), gpuDims(c.k), gpuDv.data(),
        gpuDims(c.v), params, backward.get(), kStream);
    expectClose(gpuDq, dq, "dq of " + what);
    expectClose(gpuDk, dk, "dk of " + what);
    expectClose(gpuDv, dv, "dv of " + what);
  }
}

/// nn.linear_cross_entropy and its gradient: the CUDA kernels, in chunks of
/// at least 512 rows (1100 rows: two chunks, dw accumulated over both) in
/// their planned scratch, give the CPU's results (the same chunks). A half
/// T's loss is f32, and its dw sums the chunks in the scratch's f32.
template <typename T> void checkLinearCrossEntropy() {
  using Acc = gpu::detail::ComputeT<T>;
  const int64_t n = 1100, d = 4, v = 8, ignore = -100;
  auto x = randomValues<T>(n * d, 51, -2, 2);
  auto w = randomValues<T>(d * v, 52);
  std::vector<int32_t> target(n);
  for (int64_t r = 0; r < n; ++r)
    target[r] = r % 5 == 2 ? ignore : (r * 3) % v;
  std::vector<Acc> g = {Acc(0.5)};
  for (bool transposed : {false, true}) {
    const ztc::LinearCrossEntropyParams params{transposed, {true, ignore}};
    const Shape wShape = transposed ? Shape{v, d} : Shape{d, v};
    ASSERT_EQ(
        ztc::LinearCrossEntropyShape(gpuDims({n, d}), gpuDims(wShape), params)
            .chunkRows(gpu::scratch::kLinearCrossEntropyFloorRows),
        560);
    std::string what = transposed ? "[V, D] weight" : "[D, V] weight";
    std::vector<Acc> loss(1), correct(1), gpuLoss(1), gpuCorrect(1);
    cpu::linearCrossEntropy<T, int32_t>(x.data(), cpuDims({n, d}), w.data(),
                                        cpuDims(wShape), target.data(),
                                        cpuDims({n}), loss.data(), cpuDims({}),
                                        correct.data(), cpuDims({}), params);
    const gpu::Dims ins[] = {gpuDims({n, d}), gpuDims(wShape), gpuDims({n}),
                             gpuDims({})};
    PlannedScratch forward(
        gpu::scratch::linearCrossEntropyBytes<T>(ins, nullptr, params));
    gpu::linearCrossEntropy<T, int32_t>(
        x.data(), gpuDims({n, d}), w.data(), gpuDims(wShape), target.data(),
        gpuDims({n}), gpuLoss.data(), gpuDims({}), gpuCorrect.data(),
        gpuDims({}), params, forward.get(), kStream);
    expectClose(gpuLoss, loss, "loss, " + what);
    EXPECT_EQ(gpuCorrect, correct) << what;
    EXPECT_GT(correct[0], Acc(0)) << what;
    std::vector<T> dx(n * d), dw(d * v), gpuDx(n * d), gpuDw(d * v, T(3.0f));
    std::vector<Acc> backwardLoss(1), gpuBackwardLoss(1);
    cpu::linearCrossEntropyBackward<T, int32_t>(
        x.data(), cpuDims({n, d}), w.data(), cpuDims(wShape), target.data(),
        cpuDims({n}), g.data(), cpuDims({}), dx.data(), cpuDims({n, d}),
        dw.data(), cpuDims(wShape), backwardLoss.data(), cpuDims({}), params);
    PlannedScratch backward(
        gpu::scratch::linearCrossEntropyBackwardBytes<T>(ins, nullptr, params));
    gpu::linearCrossEntropyBackward<T, int32_t>(
        x.data(), gpuDims({n, d}), w.data(), gpuDims(wShape), target.data(),
        gpuDims({n}), g.data(), gpuDims({}), gpuDx.data(), gpuDims({n, d}),
        gpuDw.data(), gpuDims(wShape), gpuBackwardLoss.data(), gpuDims({}),
        params, backward.get(), kStream);
    expectClose(gpuDx, dx, "dx, " + what);
    expectClose(gpuDw, dw, "dw, " + what);
    // The gradient's loss is the forward's, to the bit.
    EXPECT_EQ(gpuBackwardLoss, gpuLoss) << what;
    // Without w's gradient (a frozen w), in its own smaller scratch: dx
    // and the loss, to the bit.
    PlannedScratch alone(gpu::scratch::linearCrossEntropyBackwardXBytes<T>(
        ins, nullptr, params));
    std::vector<T> gpuDxAlone(n * d);
    std::vector<Acc> aloneLoss(1);
    gpu::linearCrossEntropyBackwardX<T, int32_t>(
        x.data(), gpuDims({n, d}), w.data(), gpuDims(wShape), target.data(),
        gpuDims({n}), g.data(), gpuDims({}), gpuDxAlone.data(), gpuDims({n, d}),
        aloneLoss.data(), gpuDims({}), params, alone.get(), kStream);
    EXPECT_EQ(0, std::memcmp(gpuDxAlone.data(), gpuDx.data(),
                             gpuDx.size() * sizeof(T)))
        << what;
    EXPECT_EQ(aloneLoss, gpuLoss) << what;
    // The planned scratch was enough for both.
    EXPECT_EQ(takeError(), "") << what;
  }
}

TEST(CudaKernelsTest, LinearCrossEntropyMatchesTheCpu) {
  checkLinearCrossEntropy<float>();
  checkLinearCrossEntropy<bf16>();
  // Half dw's f32 sums are planned after the row statistics.
  const gpu::Dims ins[] = {gpuDims({1100, 4}), gpuDims({4, 8}), gpuDims({1100}),
                           gpuDims({})};
  const ztc::LinearCrossEntropyParams params{false, {true, -100}};
  EXPECT_EQ(
      gpu::scratch::linearCrossEntropyBackwardBytes<bf16>(ins, nullptr, params),
      gpu::scratch::alignUp(gpu::scratch::alignUp(560 * 8 * 2) +
                            (3 * 1100 + 1) * 4) +
          4 * 8 * 4);
  EXPECT_EQ(gpu::scratch::linearCrossEntropyBackwardBytes<float>(ins, nullptr,
                                                                 params),
            gpu::scratch::alignUp(560 * 8 * 4) + (3 * 1100 + 1) * 4);
  // Without w's gradient, no sums.
  EXPECT_EQ(gpu::scratch::linearCrossEntropyBackwardXBytes<bf16>(ins, nullptr,
                                                                 params),
            gpu::scratch::alignUp(560 * 8 * 2) + (3 * 1100 + 1) * 4);
}

/// A class out of range is reported by the gradient too: an entry with it
/// runs no forward.
TEST(CudaKernelsTest, LinearCrossEntropyReportsBadTargets) {
  const int64_t n = 4, d = 2, v = 3;
  std::vector<float> x(n * d, 1.0f), w(d * v, 0.5f), g = {1.0f};
  std::vector<int32_t> target = {0, 2, 3, -100};
  const ztc::LinearCrossEntropyParams params{false, {true, -100}};
  const gpu::Dims ins[] = {gpuDims({n, d}), gpuDims({d, v}), gpuDims({n}),
                           gpuDims({})};
  PlannedScratch backward(gpu::scratch::linearCrossEntropyBackwardBytes<float>(
      ins, nullptr, params));
  std::vector<float> dx(n * d), dw(d * v), loss(1);
  gpu::linearCrossEntropyBackward<float, int32_t>(
      x.data(), gpuDims({n, d}), w.data(), gpuDims({d, v}), target.data(),
      gpuDims({n}), g.data(), gpuDims({}), dx.data(), gpuDims({n, d}),
      dw.data(), gpuDims({d, v}), loss.data(), gpuDims({}), params,
      backward.get(), kStream);
  EXPECT_EQ(takeError(),
            "nll_loss: target 3 is outside [0, 3) (ignore_index -100)");
  // Rows 0 and 1 count: equal logits, so each loses log(3).
  EXPECT_NEAR(loss[0], std::log(3.0), 1e-6);
}

/// Operands stored [B, T, H, D] (every role's bthd bit): the CUDA kernels
/// read and write them where the CPU's do, for the same results.
template <typename T> void checkAttentionTokensOuter() {
  // Two tiles of queries and three of keys; heads of 16 and 32 (the
  // tensor cores for bf16).
  const Shape q{2, 70, 3, 16}, k{2, 80, 3, 16}, v{2, 80, 3, 32},
      o{2, 70, 3, 32};
  auto qv = randomValues<T>(numel(q), 31, -2, 2);
  auto kv = randomValues<T>(numel(k), 32, -2, 2);
  auto vv = randomValues<T>(numel(v), 33);
  auto gv = randomValues<T>(numel(o), 34);
  const ztc::AttentionParams params{0.4, true, 0xff};
  std::vector<T> expected(numel(o)), actual(numel(o));
  cpu::attention<T>(qv.data(), cpuDims(q), kv.data(), cpuDims(k), vv.data(),
                    cpuDims(v), nullptr, cpuDims({}), expected.data(),
                    cpuDims(o), params);
  const gpu::Dims ins[] = {gpuDims(q), gpuDims(k), gpuDims(v), gpuDims({})};
  PlannedScratch forward(gpu::scratch::attentionBytes<T>(ins, nullptr, params));
  gpu::attention<T>(qv.data(), gpuDims(q), kv.data(), gpuDims(k), vv.data(),
                    gpuDims(v), nullptr, gpuDims({}), actual.data(), gpuDims(o),
                    params, forward.get(), kStream);
  expectClose(actual, expected, "attention, tokens outer");
  std::vector<T> dq(qv.size()), dk(kv.size()), dv(vv.size());
  std::vector<T> gpuDq(qv.size()), gpuDk(kv.size()), gpuDv(vv.size());
  cpu::attentionBackward<T>(qv.data(), cpuDims(q), kv.data(), cpuDims(k),
                            vv.data(), cpuDims(v), expected.data(), cpuDims(o),
                            gv.data(), cpuDims(o), nullptr, cpuDims({}),
                            dq.data(), cpuDims(q), dk.data(), cpuDims(k),
                            dv.data(), cpuDims(v), params);
  PlannedScratch backward(
      gpu::scratch::attentionBackwardBytes<T>(ins, nullptr, params));
  gpu::attentionBackward<T>(
      qv.data(), gpuDims(q), kv.data(), gpuDims(k), vv.data(), gpuDims(v),
      expected.data(), gpuDims(o), gv.data(), gpuDims(o), nullptr, gpuDims({}),
      gpuDq.data(), gpuDims(q), gpuDk.data(), gpuDims(k), gpuDv.data(),
      gpuDims(v), params, backward.get(), kStream);
  expectClose(gpuDq, dq, "dq, tokens outer");
  expectClose(gpuDk, dk, "dk, tokens outer");
  expectClose(gpuDv, dv, "dv, tokens outer");
}

/// GPT-2's fused projection: q, k and v are heads 0-2, 3-5 and 6-8 of one
/// [B, T, 9, D] tensor, and dq, dk, dv the same windows of another
/// (ztc-fold-head-windows). The CUDA kernels read and write the windows
/// where the CPU's do, for the same results, and write nothing else.
template <typename T> void checkAttentionHeadWindows() {
  const Shape packed{2, 70, 9, 16}, o{2, 70, 3, 16};
  auto qkv = randomValues<T>(numel(packed), 41, -2, 2);
  auto gv = randomValues<T>(numel(o), 42);
  const int64_t starts[] = {0, 3, 6, 0, 0, 0, 3, 6};
  const ztc::AttentionParams params{0.5, true, 0xff, ztc::MaybeInt{true, 3},
                                    ztc::Ints{starts}};
  const T *q = qkv.data();
  std::vector<T> expected(numel(o)), actual(numel(o));
  cpu::attention<T>(q, cpuDims(packed), q, cpuDims(packed), q, cpuDims(packed),
                    nullptr, cpuDims({}), expected.data(), cpuDims(o), params);
  const gpu::Dims ins[] = {gpuDims(packed), gpuDims(packed), gpuDims(packed),
                           gpuDims({})};
  PlannedScratch forward(gpu::scratch::attentionBytes<T>(ins, nullptr, params));
  gpu::attention<T>(q, gpuDims(packed), q, gpuDims(packed), q, gpuDims(packed),
                    nullptr, gpuDims({}), actual.data(), gpuDims(o), params,
                    forward.get(), kStream);
  expectClose(actual, expected, "attention, head windows");
  // Both gradients start as 5.0 everywhere; each call writes its three
  // windows, which tile the packed tensor.
  std::vector<T> grads(qkv.size(), T(5.0f)), gpuGrads(qkv.size(), T(5.0f));
  T *d = grads.data(), *gd = gpuGrads.data();
  cpu::attentionBackward<T>(
      q, cpuDims(packed), q, cpuDims(packed), q, cpuDims(packed),
      expected.data(), cpuDims(o), gv.data(), cpuDims(o), nullptr, cpuDims({}),
      d, cpuDims(packed), d, cpuDims(packed), d, cpuDims(packed), params);
  PlannedScratch backward(
      gpu::scratch::attentionBackwardBytes<T>(ins, nullptr, params));
  gpu::attentionBackward<T>(q, gpuDims(packed), q, gpuDims(packed), q,
                            gpuDims(packed), expected.data(), gpuDims(o),
                            gv.data(), gpuDims(o), nullptr, gpuDims({}), gd,
                            gpuDims(packed), gd, gpuDims(packed), gd,
                            gpuDims(packed), params, backward.get(), kStream);
  EXPECT_EQ(std::count_if(grads.begin(), grads.end(),
                          [](T x) { return toDouble(x) == 5.0; }),
            0);
  expectClose(gpuGrads, grads, "dq, dk, dv, head windows");
}

TEST(CudaKernelsTest, AttentionTokensOuterMatchesTheCpu) {
  checkAttentionTokensOuter<float>();
  checkAttentionTokensOuter<bf16>();
}

TEST(CudaKernelsTest, AttentionHeadWindowsMatchTheCpu) {
  checkAttentionHeadWindows<float>();
  checkAttentionHeadWindows<bf16>();
}

/// What attention plans: nothing forward and two statistics per query
/// backward with heads of up to 256 (the accumulators in registers), rows
/// of accumulators in the scratch past that.
TEST(CudaKernelsTest, AttentionScratchHoldsAccumulatorsOnlyForLargeHeads) {
  const ztc::AttentionParams params{0.5, true};
  const gpu::Dims small[] = {gpuDims({2, 3, 7, 64}), gpuDims({2, 3, 9, 64}),
                             gpuDims({2, 3, 9, 256}), gpuDims({})};
  EXPECT_EQ(gpu::scratch::attentionBytes<float>(small, nullptr, params), 0);
  EXPECT_EQ(gpu::scratch::attentionBackwardBytes<float>(small, nullptr, params),
            2 * 3 * 7 * 2 * 4);
  EXPECT_EQ(
      gpu::scratch::attentionBackwardBytes<double>(small, nullptr, params),
      2 * 3 * 7 * 2 * 8);
  const gpu::Dims large[] = {gpuDims({2, 3, 7, 64}), gpuDims({2, 3, 9, 64}),
                             gpuDims({2, 3, 9, 257}), gpuDims({})};
  EXPECT_EQ(gpu::scratch::attentionBytes<float>(large, nullptr, params),
            2 * 3 * 7 * 257 * 4);
  EXPECT_EQ(gpu::scratch::attentionBackwardBytes<bf16>(large, nullptr, params),
            (2 * 3 * 7 * (2 + 64) + 2 * 3 * 9 * (64 + 257)) * 4);
}

/// The tile kernels' shared memory (docs/design/cuda.md states these):
/// bf16 heads of 64 within the default 48 KiB, f32's backward past it; on
/// the tensor cores every kernel past it (50 to 56 KiB for heads of 64).
TEST(CudaKernelsTest, AttentionTilesSharedMemory) {
  using gpu::detail::AttentionTileKernel;
  const ztc::AttentionParams params{0.125, true};
  auto bytes = [&](auto element, int64_t head, AttentionTileKernel kernel,
                   bool tensorCores = false) {
    using T = decltype(element);
    const Shape q{8, 12, 1024, head};
    const ztc::AttentionShape shape(gpuDims(q), gpuDims(q), gpuDims(q),
                                    gpuDims({}), false, params);
    return gpu::detail::attentionTiles<T>(shape, kernel, tensorCores).bytes;
  };
  EXPECT_EQ(bytes(bf16(), 64, AttentionTileKernel::Forward), 26368);
  EXPECT_EQ(bytes(bf16(), 64, AttentionTileKernel::GradQuery), 34816);
  EXPECT_EQ(bytes(bf16(), 64, AttentionTileKernel::GradKey), 42752);
  EXPECT_EQ(bytes(float(), 64, AttentionTileKernel::Forward), 42752);
  EXPECT_EQ(bytes(float(), 64, AttentionTileKernel::GradQuery), 59392);
  EXPECT_EQ(bytes(float(), 64, AttentionTileKernel::GradKey), 67328);
  EXPECT_EQ(bytes(float(), 128, AttentionTileKernel::GradKey), 116480);
  EXPECT_EQ(bytes(bf16(), 64, AttentionTileKernel::Forward, true), 51200);
  EXPECT_EQ(bytes(bf16(), 64, AttentionTileKernel::GradQuery, true), 52224);
  EXPECT_EQ(bytes(bf16(), 64, AttentionTileKernel::GradKey, true), 56832);
  EXPECT_EQ(bytes(bf16(), 128, AttentionTileKernel::GradKey, true), 81408);
}

/// ZTC_CUDA_ATTENTION limits the kernels' paths (the GPU check compares
/// them); another value is the call's error.
TEST(CudaKernelsTest, AttentionPathFollowsTheEnvironment) {
  using gpu::detail::AttentionPath;
  using gpu::detail::AttentionTileKernel;
  const Shape q{2, 12, 100, 64};
  const ztc::AttentionShape shape(gpuDims(q), gpuDims(q), gpuDims(q),
                                  gpuDims({}), false,
                                  ztc::AttentionParams{0.125, true});
  auto path = [&](const char *value) {
    if (value)
      setenv("ZTC_CUDA_ATTENTION", value, 1);
    else
      unsetenv("ZTC_CUDA_ATTENTION");
    return gpu::detail::attentionPath<bf16>(shape,
                                            AttentionTileKernel::GradKey);
  };
  EXPECT_EQ(path("tiles"), AttentionPath::Tiles);
  EXPECT_EQ(path("warp"), AttentionPath::Warp);
  EXPECT_EQ(path("auto"), AttentionPath::TensorCores);
  EXPECT_EQ(takeError(), "");
  EXPECT_EQ(path("flash"), AttentionPath::TensorCores);
  EXPECT_EQ(takeError(),
            "ZTC_CUDA_ATTENTION='flash': expected auto, tiles or warp");
  EXPECT_EQ(path(nullptr), AttentionPath::TensorCores);
  // Forced onto tiles, bf16 still matches the CPU.
  setenv("ZTC_CUDA_ATTENTION", "tiles", 1);
  checkAttentionTokensOuter<bf16>();
  unsetenv("ZTC_CUDA_ATTENTION");
}

TEST(CudaKernelsTest, AttentionFloat) { checkAttention<float>(); }
TEST(CudaKernelsTest, AttentionDouble) { checkAttention<double>(); }
TEST(CudaKernelsTest, AttentionBF16) { checkAttention<bf16>(); }

/// layerNormBackward's three gradients against the CPU's, the CUDA kernels
/// in the scratch they plan (LayerNormBackwardPlan's segments).
template <typename T>
void compareLayerNormBackward(const Shape &shape, const std::vector<T> &x,
                              const std::vector<T> &scale,
                              const std::vector<T> &gy,
                              const ztc::LayerNormParams &config) {
  int64_t axis =
      config.axis < 0 ? config.axis + int64_t(shape.size()) : config.axis;
  const Shape normalized(shape.begin() + axis, shape.end());
  const int64_t length = numel(normalized);
  std::vector<T> cpuX(x.size()), gpuX(x.size(), T(-3.0f)), cpuScale(length),
      cpuBias(length), gpuScale(length, T(9.0f)), gpuBias(length, T(9.0f));
  auto cpuCall = [&](const T *addend, T *out) {
    cpu::layerNormBackward<T>(
        x.data(), cpuDims(shape), scale.data(), cpuDims(normalized), gy.data(),
        cpuDims(shape), addend, cpuDims(addend ? shape : Shape{}), out,
        cpuDims(shape), cpuScale.data(), cpuDims(normalized), cpuBias.data(),
        cpuDims(normalized), config);
  };
  const gpu::Dims inputs[] = {gpuDims(shape), gpuDims(normalized),
                              gpuDims(shape)};
  std::vector<char> scratch(
      gpu::scratch::layerNormBackwardBytes<T>(inputs, nullptr, config));
  auto gpuCall = [&](const T *addend, T *out) {
    gpu::layerNormBackward<T>(
        x.data(), gpuDims(shape), scale.data(), gpuDims(normalized), gy.data(),
        gpuDims(shape), addend, gpuDims(addend ? shape : Shape{}), out,
        gpuDims(shape), gpuScale.data(), gpuDims(normalized), gpuBias.data(),
        gpuDims(normalized), config,
        ztc::Scratch{scratch.data(), int64_t(scratch.size())}, kStream);
  };
  cpuCall(nullptr, cpuX.data());
  gpuCall(nullptr, gpuX.data());
  const std::string what = std::string(config.rms ? "rms " : "") +
                           "layerNormBackward " + describe(shape) + " axis " +
                           std::to_string(axis);
  expectClose(gpuX, cpuX, what);
  expectClose(gpuScale, cpuScale, what + " scale");
  expectClose(gpuBias, cpuBias, what + " bias");

  // With an addend (a residual's gradient, ztc-matmul-epilogues): each
  // library's gradient plus the addend, rounded as a loop after it would
  // round, the CPU's into a buffer of its own, CUDA's over the addend.
  const std::vector<T> addend = randomValues<T>(x.size(), 409, -1, 1);
  std::vector<T> cpuSum(x.size()), gpuSum = addend;
  cpuCall(addend.data(), cpuSum.data());
  gpuCall(gpuSum.data(), gpuSum.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const T cpuExpected = gpu::detail::store<T>(gpu::detail::load(addend[i]) +
                                                gpu::detail::load(cpuX[i]));
    const T gpuExpected = gpu::detail::store<T>(gpu::detail::load(addend[i]) +
                                                gpu::detail::load(gpuX[i]));
    ASSERT_EQ(0, std::memcmp(&cpuSum[i], &cpuExpected, sizeof(T)))
        << what << " with an addend, element " << i;
    ASSERT_EQ(0, std::memcmp(&gpuSum[i], &gpuExpected, sizeof(T)))
        << what << " over an addend, element " << i;
  }
}

/// layerNormNarrow: an f32 layer norm stored in T (bf16, f16). Each
/// library's result is its f32 layer norm rounded once to T, bit for bit
/// (what the cast it replaces gave), and CUDA's is the CPU's within T's
/// tolerance; with and without a bias, centered and root-mean-square.
template <typename T> void checkLayerNormNarrow() {
  const Shape shape = {6, 40}, normalized = {40};
  auto x = randomValues<float>(numel(shape), 405, -2, 3);
  auto scale = randomValues<float>(40, 406, -1, 1);
  auto bias = randomValues<float>(40, 407, -1, 1);
  for (bool rms : {false, true})
    for (bool withBias : {true, false}) {
      const ztc::LayerNormParams config{1, 1e-5, rms};
      const float *b = withBias ? bias.data() : nullptr;
      const Shape biasShape = withBias ? normalized : Shape{};
      std::vector<float> cpuWide(x.size()), gpuWide(x.size());
      std::vector<T> cpuNarrow(x.size()), gpuNarrow(x.size());
      cpu::layerNorm<float>(x.data(), cpuDims(shape), scale.data(),
                            cpuDims(normalized), b, cpuDims(biasShape),
                            cpuWide.data(), cpuDims(shape), config);
      cpu::layerNormNarrow<T>(x.data(), cpuDims(shape), scale.data(),
                              cpuDims(normalized), b, cpuDims(biasShape),
                              cpuNarrow.data(), cpuDims(shape), config);
      gpu::layerNorm<float>(x.data(), gpuDims(shape), scale.data(),
                            gpuDims(normalized), b, gpuDims(biasShape),
                            gpuWide.data(), gpuDims(shape), config, kStream);
      gpu::layerNormNarrow<T>(x.data(), gpuDims(shape), scale.data(),
                              gpuDims(normalized), b, gpuDims(biasShape),
                              gpuNarrow.data(), gpuDims(shape), config,
                              kStream);
      for (size_t i = 0; i < x.size(); ++i) {
        const T cpuCast(cpuWide[i]), gpuCast(gpuWide[i]);
        ASSERT_EQ(0, std::memcmp(&cpuNarrow[i], &cpuCast, sizeof(T)))
            << "CPU element " << i << (withBias ? " with" : " without")
            << " a bias";
        ASSERT_EQ(0, std::memcmp(&gpuNarrow[i], &gpuCast, sizeof(T)))
            << "CUDA element " << i << (withBias ? " with" : " without")
            << " a bias";
      }
      expectClose(gpuNarrow, cpuNarrow, "layerNormNarrow");
    }
}

TEST(CudaKernelsTest, LayerNormNarrowBF16) { checkLayerNormNarrow<bf16>(); }
TEST(CudaKernelsTest, LayerNormNarrowF16) { checkLayerNormNarrow<f16>(); }

/// Whether `a` and `b` hold the same bits, element by element.
template <typename T>
void expectSameBits(const std::vector<T> &a, const std::vector<T> &b,
                    const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(0, std::memcmp(&a[i], &b[i], sizeof(T)))
        << what << ", element " << i;
}

/// layerNormBackwardNarrow: an f32 layer norm's backward of a gradient in
/// T (bf16, f16), its input's gradient stored in f32 and again in T. Each
/// library's gradients are bit for bit its f32 backward's of the widened
/// gradient, and the narrow copy that gradient rounded once to T (what
/// the casts it replaces gave); with an addend (CUDA's over it) and
/// without; rows enough for CUDA's column sums in several segments;
/// centered and root-mean-square. layerNormBackwardNarrowOut, of the f32
/// gradient, likewise.
template <typename T> void checkLayerNormBackwardNarrow(bool rms) {
  const Shape shape = {300, 40}, normalized = {40};
  const size_t n = numel(shape);
  auto x = randomValues<float>(n, 410, -2, 3);
  auto scale = randomValues<float>(40, 411, -1, 1);
  auto addend = randomValues<float>(n, 412, -1, 1);
  auto gy = randomValues<T>(n, 413, -1, 1);
  std::vector<float> gyWide(n);
  for (size_t i = 0; i < n; ++i)
    gyWide[i] = float(gy[i]);
  const ztc::LayerNormParams config{1, 1e-5, rms};
  const gpu::Dims inputs[] = {gpuDims(shape), gpuDims(normalized),
                              gpuDims(shape)};
  std::vector<char> scratch(
      gpu::scratch::layerNormBackwardNarrowBytes<T>(inputs, nullptr, config));
  ASSERT_EQ(scratch.size(), size_t(gpu::scratch::layerNormBackwardBytes<float>(
                                inputs, nullptr, config)));
  const ztc::Scratch work{scratch.data(), int64_t(scratch.size())};
  // The three f32 gradients, then the narrow copy (empty for the f32
  // backward).
  struct Gradients {
    std::vector<float> x, scale, bias;
    std::vector<T> narrow;
  };
  for (bool cuda : {false, true})
    for (bool withAddend : {false, true})
      for (bool wideGradient : {false, true}) {
        const std::string what = std::string(cuda ? "CUDA" : "CPU") +
                                 (wideGradient ? " narrow out" : "") +
                                 (withAddend ? " with an addend" : "") +
                                 (rms ? ", rms" : "");
        const float *add = withAddend ? addend.data() : nullptr;
        const Shape addShape = withAddend ? shape : Shape{};
        Gradients wide{std::vector<float>(n),
                       std::vector<float>(40),
                       std::vector<float>(40),
                       {}};
        Gradients narrow{withAddend ? addend : std::vector<float>(n),
                         std::vector<float>(40), std::vector<float>(40),
                         std::vector<T>(n)};
        // CUDA's narrow backward writes over the addend.
        const float *narrowAdd = withAddend && cuda ? narrow.x.data() : add;
        if (cuda) {
          gpu::layerNormBackward<float>(
              x.data(), gpuDims(shape), scale.data(), gpuDims(normalized),
              gyWide.data(), gpuDims(shape), add, gpuDims(addShape),
              wide.x.data(), gpuDims(shape), wide.scale.data(),
              gpuDims(normalized), wide.bias.data(), gpuDims(normalized),
              config, work, kStream);
          if (wideGradient)
            gpu::layerNormBackwardNarrowOut<T>(
                x.data(), gpuDims(shape), scale.data(), gpuDims(normalized),
                gyWide.data(), gpuDims(shape), narrowAdd, gpuDims(addShape),
                narrow.x.data(), gpuDims(shape), narrow.scale.data(),
                gpuDims(normalized), narrow.bias.data(), gpuDims(normalized),
                narrow.narrow.data(), gpuDims(shape), config, work, kStream);
          else
            gpu::layerNormBackwardNarrow<T>(
                x.data(), gpuDims(shape), scale.data(), gpuDims(normalized),
                gy.data(), gpuDims(shape), narrowAdd, gpuDims(addShape),
                narrow.x.data(), gpuDims(shape), narrow.scale.data(),
                gpuDims(normalized), narrow.bias.data(), gpuDims(normalized),
                narrow.narrow.data(), gpuDims(shape), config, work, kStream);
        } else {
          cpu::layerNormBackward<float>(
              x.data(), cpuDims(shape), scale.data(), cpuDims(normalized),
              gyWide.data(), cpuDims(shape), add, cpuDims(addShape),
              wide.x.data(), cpuDims(shape), wide.scale.data(),
              cpuDims(normalized), wide.bias.data(), cpuDims(normalized),
              config);
          if (wideGradient)
            cpu::layerNormBackwardNarrowOut<T>(
                x.data(), cpuDims(shape), scale.data(), cpuDims(normalized),
                gyWide.data(), cpuDims(shape), narrowAdd, cpuDims(addShape),
                narrow.x.data(), cpuDims(shape), narrow.scale.data(),
                cpuDims(normalized), narrow.bias.data(), cpuDims(normalized),
                narrow.narrow.data(), cpuDims(shape), config);
          else
            cpu::layerNormBackwardNarrow<T>(
                x.data(), cpuDims(shape), scale.data(), cpuDims(normalized),
                gy.data(), cpuDims(shape), narrowAdd, cpuDims(addShape),
                narrow.x.data(), cpuDims(shape), narrow.scale.data(),
                cpuDims(normalized), narrow.bias.data(), cpuDims(normalized),
                narrow.narrow.data(), cpuDims(shape), config);
        }
        std::vector<T> cast(n);
        for (size_t i = 0; i < n; ++i)
          cast[i] = T(wide.x[i]);
        expectSameBits(narrow.x, wide.x, what + ": the input's gradient");
        expectSameBits(narrow.scale, wide.scale,
                       what + ": the scale's gradient");
        expectSameBits(narrow.bias, wide.bias, what + ": the bias's gradient");
        expectSameBits(narrow.narrow, cast, what + ": the narrow gradient");
      }
}

TEST(CudaKernelsTest, LayerNormBackwardNarrowBF16) {
  checkLayerNormBackwardNarrow<bf16>(/*rms=*/false);
  checkLayerNormBackwardNarrow<bf16>(/*rms=*/true);
}
TEST(CudaKernelsTest, LayerNormBackwardNarrowF16) {
  checkLayerNormBackwardNarrow<f16>(/*rms=*/false);
  checkLayerNormBackwardNarrow<f16>(/*rms=*/true);
}

template <typename T> void checkNorms() {
  Shape shape = {2, 3, 4, 5};
  auto x = randomValues<T>(numel(shape), 400, -2, 3);
  auto params = randomValues<T>(numel(shape), 401, -1, 1);
  auto bias = randomValues<T>(numel(shape), 402, -1, 1);
  std::vector<T> expected(x.size(), T(7.0f)), actual(x.size(), T(-3.0f));
  for (int64_t axis : {1, 3, -2}) {
    // scale and bias: shape[axis:].
    const Shape normalized(shape.begin() +
                               (axis < 0 ? axis + int64_t(shape.size()) : axis),
                           shape.end());
    for (bool rms : {false, true}) {
      const ztc::LayerNormParams config{axis, 1e-5, rms};
      const std::string what = std::string(rms ? "rms " : "") +
                               "layerNorm axis " + std::to_string(axis);
      for (bool withBias : {true, false}) {
        const Shape biasShape = withBias ? normalized : Shape{};
        cpu::layerNorm<T>(x.data(), cpuDims(shape), params.data(),
                          cpuDims(normalized), withBias ? bias.data() : nullptr,
                          cpuDims(biasShape), expected.data(), cpuDims(shape),
                          config);
        gpu::layerNorm<T>(x.data(), gpuDims(shape), params.data(),
                          gpuDims(normalized), withBias ? bias.data() : nullptr,
                          gpuDims(biasShape), actual.data(), gpuDims(shape),
                          config, kStream);
        expectClose(actual, expected, what);
      }
      // The gradients, with `bias` as the result's gradient.
      compareLayerNormBackward(shape, x, params, bias, config);
    }
  }
  auto mean = randomValues<T>(3, 403, -1, 1);
  auto var = randomValues<T>(3, 404, 0.5, 2);
  // Per-channel scale, bias and statistics: the first 3 values of each.
  const Shape channels = {3};
  cpu::batchNorm<T>(x.data(), cpuDims(shape), params.data(), cpuDims(channels),
                    bias.data(), cpuDims(channels), mean.data(),
                    cpuDims(channels), var.data(), cpuDims(channels),
                    expected.data(), cpuDims(shape),
                    ztc::BatchNormParams{1e-5});
  gpu::batchNorm<T>(x.data(), gpuDims(shape), params.data(), gpuDims(channels),
                    bias.data(), gpuDims(channels), mean.data(),
                    gpuDims(channels), var.data(), gpuDims(channels),
                    actual.data(), gpuDims(shape), ztc::BatchNormParams{1e-5},
                    kStream);
  expectClose(actual, expected, "batchNorm");
}

TEST(CudaKernelsTest, NormalizationFloat) { checkNorms<float>(); }
TEST(CudaKernelsTest, NormalizationF16) { checkNorms<f16>(); }

// Enough rows that the scale's and bias's gradients are summed in several
// segments of rows and the segments' sums added by a second kernel; and
// no rows at all (zero gradients).
TEST(CudaKernelsTest, LayerNormBackwardSegments) {
  for (const Shape &shape : {Shape{3, 100, 16}, Shape{1, 700, 3}}) {
    EXPECT_GT(gpu::detail::layerNormBackwardPlan(gpuDims(shape), 2).segments, 1)
        << describe(shape);
    auto check = [&](auto zero) {
      using T = decltype(zero);
      auto x = randomValues<T>(numel(shape), 410, -2, 3);
      auto scale = randomValues<T>(shape[2], 411, 0.5, 1.5);
      auto gy = randomValues<T>(numel(shape), 412, -1, 1);
      compareLayerNormBackward<T>(shape, x, scale, gy, {2, 1e-5});
    };
    check(0.0f);
    check(0.0);
  }
  const Shape empty = {0, 4};
  std::vector<float> none, scale = {1, 2, 3, 4};
  std::vector<float> gscale(4, 9.0f), gbias(4, 9.0f);
  const gpu::Dims inputs[] = {gpuDims(empty), gpuDims({4}), gpuDims(empty)};
  EXPECT_EQ(
      gpu::scratch::layerNormBackwardBytes<float>(inputs, nullptr, {1, 1e-5}),
      0);
  gpu::layerNormBackward<float>(
      none.data(), gpuDims(empty), scale.data(), gpuDims({4}), none.data(),
      gpuDims(empty), nullptr, gpuDims({}), none.data(), gpuDims(empty),
      gscale.data(), gpuDims({4}), gbias.data(), gpuDims({4}), {1, 1e-5},
      ztc::Scratch{}, kStream);
  EXPECT_EQ(gscale, std::vector<float>(4, 0.0f));
  EXPECT_EQ(gbias, std::vector<float>(4, 0.0f));
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <typename T, gpu::ReduceKind Kind, cpu::ReduceKind CpuKind>
void checkReduce(const Shape &shape, const std::vector<T> &x, uint64_t mask) {
  Shape kept;
  for (size_t i = 0; i < shape.size(); ++i)
    if (!(mask >> i & 1))
      kept.push_back(shape[i]);
  std::vector<T> expected(numel(kept), T(7.0f)), actual(numel(kept), T(-3.0f));
  cpu::reduce<T, CpuKind>(x.data(), cpuDims(shape), mask, expected.data());
  using Acc = gpu::detail::ReduceAcc<T, Kind>;
  PlannedScratch scratch(gpu::scratch::reducePartialsBytes<Acc>(
      gpu::detail::reducePlan(gpuDims(shape), mask)));
  gpu::reduce<T, Kind>(x.data(), gpuDims(shape), mask, actual.data(),
                       scratch.get(), kStream);
  expectClose(actual, expected,
              "reduce " + std::to_string(static_cast<int>(Kind)) + " of " +
                  describe(shape) + " mask " + std::to_string(mask));
}

template <typename T> void checkReduces(std::vector<T> x, const Shape &shape) {
  // Short reductions run one output per thread, long ones (over 256
  // elements) one per block.
  for (uint64_t mask = 0; mask < (uint64_t(1) << shape.size()); ++mask) {
    checkReduce<T, gpu::ReduceKind::Sum, cpu::ReduceKind::Sum>(shape, x, mask);
    checkReduce<T, gpu::ReduceKind::Mean, cpu::ReduceKind::Mean>(shape, x,
                                                                 mask);
    checkReduce<T, gpu::ReduceKind::Max, cpu::ReduceKind::Max>(shape, x, mask);
  }
}

TEST(CudaKernelsTest, Reduce) {
  Shape shape = {3, 20, 30};
  checkReduces(randomValues<float>(numel(shape), 500, -3, 3), shape);
  checkReduces(randomValues<f16>(numel(shape), 501, -3, 3), shape);
  auto ints = randomValues<int64_t>(numel(shape), 502, -50, 50);
  checkReduces(ints, shape);
  auto withNan = randomValues<float>(numel(shape), 503, -3, 3);
  withNan[17] = NAN;
  withNan[numel(shape) - 2] = NAN;
  checkReduces(withNan, shape);
}

// Long reductions into few outputs split each output over several blocks
// and combine their partial results: over rows (BatchNorm's statistics of
// [N, C, H, W] over N, H and W; H and W are one contiguous row), over one
// long row (everything into one output), and with a kept innermost
// dimension (rows strided by it).
TEST(CudaKernelsTest, ReduceInSegments) {
  Shape images = {6, 3, 40, 40};
  checkReduces(randomValues<float>(numel(images), 504, -3, 3), images);
  Shape line = {20000};
  auto values = randomValues<float>(numel(line), 505, -3, 3);
  checkReduce<float, gpu::ReduceKind::Sum, cpu::ReduceKind::Sum>(line, values,
                                                                 1);
  checkReduce<float, gpu::ReduceKind::Max, cpu::ReduceKind::Max>(line, values,
                                                                 1);
  values[12345] = NAN;
  checkReduce<float, gpu::ReduceKind::Max, cpu::ReduceKind::Max>(line, values,
                                                                 1);
  checkReduce<float, gpu::ReduceKind::Mean, cpu::ReduceKind::Mean>(line, values,
                                                                   1);
  Shape columns = {5000, 3};
  checkReduce<f16, gpu::ReduceKind::Sum, cpu::ReduceKind::Sum>(
      columns, randomValues<f16>(numel(columns), 506, -3, 3), 1);
}

// Long reductions over leading dimensions (bias gradients, NHWC
// statistics) sum down the columns: a thread per output and segment of
// rows, the segments combined in order; NaN still wins a maximum.
TEST(CudaKernelsTest, ReduceDownColumns) {
  for (const Shape &shape :
       {Shape{5000, 32}, Shape{2, 300, 40}, Shape{20000, 32}}) {
    uint64_t leading = shape.size() == 2 ? 1 : 3;
    gpu::detail::ReducePlan plan =
        gpu::detail::reducePlan(gpuDims(shape), leading);
    EXPECT_TRUE(plan.columns) << describe(shape);
    EXPECT_GT(plan.segments, 1) << describe(shape);
    auto values = randomValues<float>(numel(shape), 507, -3, 3);
    checkReduces(values, shape);
    values[numel(shape) / 2] = NAN;
    checkReduce<float, gpu::ReduceKind::Max, cpu::ReduceKind::Max>(
        shape, values, leading);
    checkReduces(randomValues<double>(numel(shape), 508, -3, 3), shape);
    checkReduces(randomValues<bf16>(numel(shape), 509, -3, 3), shape);
  }
  // Thousands of segments a column (NHWC statistics at a large batch) are
  // combined by a block each column.
  EXPECT_GT(gpu::detail::reducePlan(gpuDims({20000, 32}), 1).segments,
            gpu::detail::kThreads);
  // Fewer outputs than a warp, one output, or leading dimensions that are
  // not all reduced: blocks over rows.
  EXPECT_FALSE(gpu::detail::reducePlan(gpuDims({5000, 31}), 1).columns);
  EXPECT_FALSE(gpu::detail::reducePlan(gpuDims({20000}), 1).columns);
  EXPECT_FALSE(gpu::detail::reducePlan(gpuDims({6, 3, 40, 40}), 13).columns);
  EXPECT_FALSE(gpu::detail::reducePlan(gpuDims({600, 3}), 2).columns);
}

/// The terms of BatchNorm's fused backward sums over a [outer, kept, inner]
/// space, as kernel.reduce's emitted code gives them: the gradient g and
/// g * (x - mean[k]), term r = o * inner + i of output k.
struct BatchNormTerms {
  const float *g, *x, *mean;
  int64_t kept, inner;
  gpu::Sums<float, 2> operator()(int64_t r, int64_t k) const {
    int64_t o = r / inner, i = r % inner, at = (o * kept + k) * inner + i;
    return {{g[at], g[at] * (x[at] - mean[k])}};
  }
};

/// reduceGroups' two sums of BatchNormTerms over [outer, kept, inner]
/// against sums in double, in the mode the plan `expected` names.
void checkGroupReduce(int64_t outer, int64_t kept, int64_t inner,
                      const char *expected) {
  std::string what = "fused reduce over [" + std::to_string(outer) + ", " +
                     std::to_string(kept) + ", " + std::to_string(inner) + "]";
  int64_t n = outer * kept * inner;
  auto g = randomValues<float>(n, 510, -3, 3);
  auto x = randomValues<float>(n, 511, -3, 3);
  auto mean = randomValues<float>(kept, 512, -1, 1);
  gpu::detail::GroupReducePlan plan =
      gpu::detail::groupReducePlan(outer, kept, inner);
  std::string mode = plan.perThread ? "thread"
                     : plan.columns ? "columns"
                                    : "blocks";
  EXPECT_EQ(mode, expected) << what;
  std::vector<double> sum(kept), product(kept);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < kept; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (o * kept + k) * inner + i;
        sum[k] += g[at];
        product[k] += double(g[at]) * (double(x[at]) - mean[k]);
      }
  std::vector<float> y0(kept, -3.0f), y1(kept, -3.0f);
  PlannedScratch scratch(gpu::scratch::groupReducePartialsBytes(
      plan, sizeof(gpu::Sums<float, 2>)));
  gpu::reduceGroups<gpu::ReduceKind::Sum>(
      BatchNormTerms{g.data(), x.data(), mean.data(), kept, inner}, plan,
      gpu::GroupOutputs<float, 2>{{y0.data(), y1.data()}}, scratch.get(),
      kStream);
  for (int64_t k = 0; k < kept; ++k) {
    // Float sums of `count` terms of magnitude up to 3 and 12.
    double count = double(outer * inner);
    EXPECT_NEAR(y0[k], sum[k], 3e-6 * 3 * count) << what << " output " << k;
    EXPECT_NEAR(y1[k], product[k], 3e-6 * 12 * count)
        << what << " output " << k;
  }
  // Means in bf16: each sum divided by its count, then rounded.
  std::vector<bf16> m(kept, bf16(-3.0f));
  gpu::reduceGroups<gpu::ReduceKind::Mean>(
      [&](int64_t r, int64_t k) {
        return gpu::Sums<float, 1>{
            BatchNormTerms{g.data(), x.data(), mean.data(), kept, inner}(r, k)
                .v[1]};
      },
      plan, gpu::GroupOutputs<bf16, 1>{{m.data()}},
      PlannedScratch(gpu::scratch::groupReducePartialsBytes(
                         plan, sizeof(gpu::Sums<float, 1>)))
          .get(),
      kStream);
  for (int64_t k = 0; k < kept; ++k)
    EXPECT_NEAR(toDouble(m[k]), product[k] / double(outer * inner),
                1e-2 * (1 + std::fabs(product[k] / double(outer * inner))))
        << what << " mean " << k;
  EXPECT_EQ(takeError(), "") << what;
}

// The reductions the compiler fuses (kernel.reduce) run by reduceGroups:
// short ones a thread per output, NCHW statistics a block per segment of an
// output's terms, NHWC ones (no inner group, a warp's width of channels)
// a thread per channel and segment of rows; several outputs sum side by
// side.
TEST(CudaKernelsTest, FusedReductionsMatchSumsInDouble) {
  checkGroupReduce(5, 3, 7, "thread");
  checkGroupReduce(1, 40, 200, "thread");
  checkGroupReduce(16, 4, 1200, "blocks");
  checkGroupReduce(1, 2, 30000, "blocks");
  checkGroupReduce(3000, 5, 1, "blocks");
  checkGroupReduce(3000, 40, 1, "columns");
  // Over 256 segments a channel: a block adds each channel's.
  checkGroupReduce(20000, 32, 1, "columns");
  EXPECT_GT(gpu::detail::groupReducePlan(20000, 32, 1).segments,
            gpu::detail::kThreads);
  EXPECT_GT(gpu::detail::groupReducePlan(16, 4, 1200).segments, 1);
  EXPECT_GT(gpu::detail::groupReducePlan(3000, 40, 1).segments, 1);
  EXPECT_EQ(gpu::detail::groupReducePlan(5, 3, 7).segments, 1);
}

// A fused reduction split over blocks needs its planned scratch, and says
// so when its artifact gives it less.
TEST(CudaKernelsTest, FusedReductionNamesTheScratchItLacks) {
  gpu::detail::GroupReducePlan plan = gpu::detail::groupReducePlan(16, 4, 1200);
  std::vector<float> g(16 * 4 * 1200, 1.0f), y(4, -3.0f);
  gpu::reduceGroups<gpu::ReduceKind::Sum>(
      [&](int64_t r, int64_t k) { return gpu::Sums<float, 1>{{g[r + k]}}; },
      plan, gpu::GroupOutputs<float, 1>{{y.data()}}, ztc::Scratch{}, kStream);
  EXPECT_EQ(takeError(),
            "reduce (fused): needs " +
                std::to_string(4 * plan.segments * int64_t(sizeof(float))) +
                " bytes of scratch memory, was given 0 (its artifact's "
                "memory plan gives it less: recompile it)");
  EXPECT_EQ(y[0], -3.0f);
}

//===----------------------------------------------------------------------===//
// Data movement and losses
//===----------------------------------------------------------------------===//

TEST(CudaKernelsTest, TransposeSliceCopyInto) {
  Shape shape = {2, 3, 4, 5};
  auto x = randomValues<float>(numel(shape), 600);
  std::vector<float> expected(x.size(), 7.0f), actual(x.size(), -3.0f);
  const int64_t perms[][4] = {
      {0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 3, 1}, {1, 0, 3, 2}};
  for (const auto &perm : perms) {
    Shape permuted;
    for (int64_t axis : perm)
      permuted.push_back(shape[axis]);
    cpu::transpose<float>(x.data(), cpuDims(shape), expected.data(),
                          cpuDims(permuted),
                          ztc::TransposeParams{ztc::Ints{perm}});
    gpu::transpose<float>(x.data(), gpuDims(shape), actual.data(),
                          gpuDims(permuted),
                          ztc::TransposeParams{ztc::Ints{perm}}, kStream);
    expectClose(actual, expected, "transpose");
  }

  // Negative steps walk backwards from a normalized start.
  const int64_t starts[] = {1, 0, 3, 4}, steps[] = {-1, 2, -2, -3};
  Shape sliced = {2, 2, 2, 2};
  std::vector<float> sliceExpected(numel(sliced), 7.0f),
      sliceActual(numel(sliced), -3.0f);
  const ztc::SliceParams sliceParams{ztc::Ints{starts}, ztc::Ints{sliced},
                                     ztc::Ints{steps}};
  cpu::slice<float>(x.data(), cpuDims(shape), sliceExpected.data(),
                    cpuDims(sliced), sliceParams);
  gpu::slice<float>(x.data(), gpuDims(shape), sliceActual.data(),
                    gpuDims(sliced), sliceParams, kStream);
  expectClose(sliceActual, sliceExpected, "slice");

  Shape whole = {2, 7, 4, 5};
  std::vector<float> concatExpected(numel(whole), 7.0f),
      concatActual(numel(whole), 7.0f);
  cpu::copyInto<float>(x.data(), cpuDims(shape), concatExpected.data(),
                       cpuDims(whole), ztc::CopyIntoParams{1, 4});
  gpu::copyInto<float>(x.data(), gpuDims(shape), concatActual.data(),
                       gpuDims(whole), ztc::CopyIntoParams{1, 4}, kStream);
  expectClose(concatActual, concatExpected, "copyInto");
}

TEST(CudaKernelsTest, GatherAndTrilu) {
  Shape data = {4, 3, 5};
  auto x = randomValues<float>(numel(data), 700);
  std::vector<int64_t> indices = {3, -1, 0, 2, -4, 1};
  for (int64_t axis : {0, 1}) {
    Shape index = {2, 3};
    Shape y = data;
    y.erase(y.begin() + axis);
    y.insert(y.begin() + axis, index.begin(), index.end());
    // Axis 1 has 3 entries: fold the indices into [-3, 3).
    std::vector<int64_t> clipped = indices;
    if (axis == 1)
      for (int64_t &i : clipped)
        i = i % 3;
    std::vector<int32_t> clippedNarrow(clipped.begin(), clipped.end());
    std::vector<float> expected(numel(y), 7.0f), actual(numel(y), -3.0f);
    cpu::gather<float, int64_t>(x.data(), cpuDims(data), clipped.data(),
                                cpuDims(index), expected.data(), cpuDims(y),
                                ztc::AxisParams{axis});
    gpu::gather<float, int64_t>(x.data(), gpuDims(data), clipped.data(),
                                gpuDims(index), actual.data(), gpuDims(y),
                                ztc::AxisParams{axis}, kStream);
    expectClose(actual, expected, "gather axis " + std::to_string(axis));
    gpu::gather<float, int32_t>(x.data(), gpuDims(data), clippedNarrow.data(),
                                gpuDims(index), actual.data(), gpuDims(y),
                                ztc::AxisParams{axis}, kStream);
    expectClose(actual, expected, "gather int32 axis " + std::to_string(axis));
  }
  EXPECT_EQ(takeError(), "");

  Shape matrix = {2, 4, 5};
  auto m = randomValues<float>(numel(matrix), 701);
  std::vector<float> expected(m.size(), 7.0f), actual(m.size(), -3.0f);
  for (bool upper : {true, false}) {
    for (int64_t diagonal : {-2, 0, 1, 6}) {
      cpu::trilu<float>(m.data(), cpuDims(matrix), expected.data(),
                        cpuDims(matrix), ztc::TriluParams{upper, diagonal});
      gpu::trilu<float>(m.data(), gpuDims(matrix), actual.data(),
                        gpuDims(matrix), ztc::TriluParams{upper, diagonal},
                        kStream);
      expectClose(actual, expected, "trilu");
    }
  }
}

/// rotateHalf: CUDA's turns equal the CPU's, either way, in f32 and bf16.
template <typename T> void compareRotateHalf() {
  const Shape shape = {5, 3, 8};
  const auto x = randomValues<T>(numel(shape), 702, -2, 2);
  for (bool inverse : {false, true}) {
    std::vector<T> expected(x.size(), T(7.0f)), actual(x.size(), T(-3.0f));
    cpu::rotateHalf<T>(x.data(), cpuDims(shape), expected.data(),
                       cpuDims(shape), ztc::RotateHalfParams{inverse});
    gpu::rotateHalf<T>(x.data(), gpuDims(shape), actual.data(), gpuDims(shape),
                       ztc::RotateHalfParams{inverse}, kStream);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(0, std::memcmp(&actual[i], &expected[i], sizeof(T)))
          << "rotateHalf" << (inverse ? " inverse" : "") << ", element " << i;
  }
}

TEST(CudaKernelsTest, RotateHalf) {
  compareRotateHalf<float>();
  compareRotateHalf<bf16>();
}

/// rotary: CUDA's equals the CPU's, either form, in f32 and bf16, with
/// tables broadcast over heads ([T, 1, D]) and over batch and heads ([1,
/// 1, T, D], Hugging Face's).
template <typename T> void compareRotary() {
  const Shape shape = {2, 5, 3, 8};
  const auto x = randomValues<T>(numel(shape), 703, -2, 2);
  for (const Shape &table : {Shape{5, 1, 8}, Shape{1, 1, 3, 8}}) {
    const auto c = randomValues<T>(numel(table), 704, -1, 1);
    const auto s = randomValues<T>(numel(table), 705, -1, 1);
    for (bool inverse : {false, true}) {
      std::vector<T> expected(x.size(), T(7.0f)), actual(x.size(), T(-3.0f));
      cpu::rotary<T>(x.data(), cpuDims(shape), c.data(), cpuDims(table),
                     s.data(), cpuDims(table), expected.data(), cpuDims(shape),
                     ztc::RotaryParams{inverse});
      gpu::rotary<T>(x.data(), gpuDims(shape), c.data(), gpuDims(table),
                     s.data(), gpuDims(table), actual.data(), gpuDims(shape),
                     ztc::RotaryParams{inverse}, kStream);
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(0, std::memcmp(&actual[i], &expected[i], sizeof(T)))
            << "rotary" << (inverse ? " inverse" : "") << " with tables of "
            << table.size() << " dimensions, element " << i;
    }
  }
}

TEST(CudaKernelsTest, Rotary) {
  compareRotary<float>();
  compareRotary<bf16>();
}

TEST(CudaKernelsTest, BadDataIsRecordedNotFatal) {
  gpu::clearError();
  Shape data = {4, 3};
  std::vector<float> x(12, 1.0f), y(9, 5.0f);
  std::vector<int64_t> indices = {1, 70, -9};
  gpu::gather<float, int64_t>(x.data(), gpuDims(data), indices.data(),
                              gpuDims({3}), y.data(), gpuDims({3, 3}),
                              ztc::AxisParams{0}, kStream);
  // The first bad index is reported; its rows read as 0.
  EXPECT_EQ(takeError(), "gather: index 70 is outside [-4, 4)");
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_EQ(y[0], 1.0f);

  std::vector<float> logProbs(6, -1.0f), loss(1);
  std::vector<int64_t> target = {1, 3};
  gpu::nllLoss<float, int64_t>(
      logProbs.data(), gpuDims({2, 3}), target.data(), gpuDims({2}), nullptr,
      gpu::Dims{}, loss.data(), gpu::Dims{},
      ztc::NllLossParams{ztc::Reduction::Mean, ztc::MaybeInt{}}, kStream);
  EXPECT_EQ(takeError(), "nll_loss: target 3 is outside [0, 3)");
  EXPECT_EQ(takeError(), "");
  // With an ignore_index, the message names it, as the CPU's does.
  target = {1, 12};
  gpu::nllLoss<float, int64_t>(
      logProbs.data(), gpuDims({2, 3}), target.data(), gpuDims({2}), nullptr,
      gpu::Dims{}, loss.data(), gpu::Dims{},
      ztc::NllLossParams{ztc::Reduction::Mean, ztc::MaybeInt{true, -100}},
      kStream);
  EXPECT_EQ(takeError(),
            "nll_loss: target 12 is outside [0, 3) (ignore_index -100)");
}

template <typename T> void checkNllLoss() {
  Shape shape = {4, 5, 3};
  auto logProbs = randomValues<T>(numel(shape), 800, -5, 0);
  auto weight = randomValues<T>(5, 801, 0.1, 2);
  std::vector<int64_t> target = {0, 4, 2, 1, 1, 3, -100, 0, 4, 2, -100, 3};
  // Targets and per-element losses: [N, d...].
  const Shape targetShape = {4, 3};
  for (int64_t reduction : {0, 1, 2}) {
    const ztc::NllLossParams config{static_cast<ztc::Reduction>(reduction),
                                    ztc::MaybeInt{true, -100}};
    const Shape lossShape = reduction == 0 ? targetShape : Shape{};
    for (bool withWeight : {false, true}) {
      std::vector<T> expected(reduction == 0 ? 12 : 1, T(7.0f)),
          actual(expected.size(), T(-3.0f));
      const Shape weightShape = withWeight ? Shape{5} : Shape{};
      cpu::nllLoss<T, int64_t>(
          logProbs.data(), cpuDims(shape), target.data(), cpuDims(targetShape),
          withWeight ? weight.data() : nullptr, cpuDims(weightShape),
          expected.data(), cpuDims(lossShape), config);
      gpu::nllLoss<T, int64_t>(
          logProbs.data(), gpuDims(shape), target.data(), gpuDims(targetShape),
          withWeight ? weight.data() : nullptr, gpuDims(weightShape),
          actual.data(), gpuDims(lossShape), config, kStream);
      expectClose(actual, expected,
                  "nllLoss reduction " + std::to_string(reduction));
    }
  }
  EXPECT_EQ(takeError(), "");
}

TEST(CudaKernelsTest, NllLossFloat) { checkNllLoss<float>(); }
TEST(CudaKernelsTest, NllLossBF16) { checkNllLoss<bf16>(); }

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

template <typename T> void checkConvGradients() {
  unsigned seed = 900;
  for (const ConvCase &c : convCases()) {
    Shape yShape = convOutput(c);
    auto x = randomValues<T>(numel(c.x), seed++, -2, 2);
    auto w = randomValues<T>(numel(c.w), seed++, -2, 2);
    auto gy = randomValues<T>(numel(yShape), seed++, -2, 2);
    std::string what = describe(c.x) + " * " + describe(c.w);
    std::vector<T> expected(numel(c.x), T(7.0f)), actual(numel(c.x), T(-3.0f));
    const int64_t inputSize[] = {c.x[2], c.x[3]}, kernel[] = {c.w[2], c.w[3]};
    const ztc::Conv2dBackwardDataParams dataParams{ztc::Ints{inputSize},
                                                   ztc::Ints{c.strides},
                                                   ztc::Ints{c.pads},
                                                   ztc::Ints{c.dilations},
                                                   c.group,
                                                   false};
    cpu::conv2dBackwardData<T>(gy.data(), cpuDims(yShape), w.data(),
                               cpuDims(c.w), expected.data(), cpuDims(c.x),
                               dataParams);
    PlannedScratch dataScratch(gpu::scratch::conv2dBackwardDataColumns<T>(
                                   gpuDims(yShape), gpuDims(c.w), gpuDims(c.x),
                                   dataParams, convBudget())
                                   .bytes);
    gpu::conv2dBackwardData<T>(gy.data(), gpuDims(yShape), w.data(),
                               gpuDims(c.w), actual.data(), gpuDims(c.x),
                               dataParams, dataScratch.get(), kStream);
    expectClose(actual, expected, "conv2dBackwardData " + what);
    std::vector<T> expectedW(numel(c.w), T(7.0f)),
        actualW(numel(c.w), T(-3.0f));
    const ztc::Conv2dBackwardFilterParams filterParams{
        ztc::Ints{kernel}, ztc::Ints{c.strides},
        ztc::Ints{c.pads}, ztc::Ints{c.dilations},
        c.group,           false};
    cpu::conv2dBackwardFilter<T>(x.data(), cpuDims(c.x), gy.data(),
                                 cpuDims(yShape), expectedW.data(),
                                 cpuDims(c.w), filterParams);
    PlannedScratch filterScratch(gpu::scratch::conv2dBackwardFilterColumns<T>(
                                     gpuDims(c.x), gpuDims(yShape),
                                     gpuDims(c.w), filterParams, convBudget())
                                     .bytes);
    gpu::conv2dBackwardFilter<T>(x.data(), gpuDims(c.x), gy.data(),
                                 gpuDims(yShape), actualW.data(), gpuDims(c.w),
                                 filterParams, filterScratch.get(), kStream);
    expectClose(actualW, expectedW, "conv2dBackwardFilter " + what);
  }
}

TEST(CudaKernelsTest, ConvGradientsFloat) { checkConvGradients<float>(); }
TEST(CudaKernelsTest, ConvGradientsF16) { checkConvGradients<f16>(); }

// One image per chunk of scratch: the products accumulate over chunks.
template <typename T> void checkConvGradientsInChunks() {
  convBudget() = 1;
  checkConvGradients<T>();
  convBudget() = gpu::scratch::kConvColumnsBytes;
}
TEST(CudaKernelsTest, ConvGradientsFloatInChunks) {
  checkConvGradientsInChunks<float>();
}
TEST(CudaKernelsTest, ConvGradientsF16InChunks) {
  checkConvGradientsInChunks<f16>();
}

/// `nchw` (of NCHW shape `shape`) in NHWC.
template <typename T>
std::vector<T> toNhwc(const std::vector<T> &nchw, const Shape &shape) {
  int64_t n = shape[0], c = shape[1], hw = shape[2] * shape[3];
  std::vector<T> nhwc(nchw.size());
  for (int64_t image = 0; image < n; ++image)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        nhwc[(image * hw + p) * c + ch] = nchw[(image * c + ch) * hw + p];
  return nhwc;
}

/// Shape `nchw` as NHWC dimensions.
Shape nhwcShape(const Shape &nchw) {
  return {nchw[0], nchw[2], nchw[3], nchw[1]};
}

/// Channels-last convolutions (cuDNN's in a build with it; here, as where
/// cuDNN declines, the direct sums): each the CPU's channels-last result
/// (oneDNN for f32) within T's tolerance, and the same bits as the NCHW
/// direct sums' result laid out NHWC, which add in the same order.
template <typename T> void checkChannelsLastConvs() {
  unsigned seed = 1200;
  for (const ConvCase &c : convCases()) {
    Shape yShape = convOutput(c);
    const Shape xLast = nhwcShape(c.x), yLast = nhwcShape(yShape);
    auto x = randomValues<T>(numel(c.x), seed++, -2, 2);
    auto w = randomValues<T>(numel(c.w), seed++, -2, 2);
    auto bias = randomValues<T>(c.w[0], seed++, -2, 2);
    auto gy = randomValues<T>(numel(yShape), seed++, -2, 2);
    const auto xNhwc = toNhwc(x, c.x), gyNhwc = toNhwc(gy, yShape);
    const Shape biasShape = c.bias ? Shape{c.w[0]} : Shape{};
    const T *b = c.bias ? bias.data() : nullptr;
    std::string what = describe(xLast) + " * " + describe(c.w);
    const int64_t inputSize[] = {c.x[2], c.x[3]}, kernel[] = {c.w[2], c.w[3]};
    const ztc::Conv2dParams params{ztc::Ints{c.strides}, ztc::Ints{c.pads},
                                   ztc::Ints{c.dilations}, c.group, true};
    const ztc::Conv2dBackwardDataParams dataParams{ztc::Ints{inputSize},
                                                   ztc::Ints{c.strides},
                                                   ztc::Ints{c.pads},
                                                   ztc::Ints{c.dilations},
                                                   c.group,
                                                   true};
    const ztc::Conv2dBackwardFilterParams filterParams{
        ztc::Ints{kernel}, ztc::Ints{c.strides},
        ztc::Ints{c.pads}, ztc::Ints{c.dilations},
        c.group,           true};
    ztc::Conv2dParams planes = params;
    planes.channels_last = false;
    const gpu::detail::ConvPlan p = gpu::detail::convPlan(
        gpuDims(c.x), gpuDims(c.w), gpuDims(yShape), planes);

    // Forward.
    std::vector<T> cpuY(numel(yShape), T(7.0f)), gpuY(numel(yShape), T(-3.0f)),
        directY(numel(yShape), T(5.0f));
    cpu::conv2d<T>(xNhwc.data(), cpuDims(xLast), w.data(), cpuDims(c.w), b,
                   cpuDims(biasShape), cpuY.data(), cpuDims(yLast), params);
    const gpu::Dims ins[] = {gpuDims(xLast), gpuDims(c.w), gpuDims(biasShape)};
    const gpu::Dims outs[] = {gpuDims(yLast)};
    PlannedScratch scratch(gpu::scratch::conv2dBytes<T>(ins, outs, params));
    gpu::conv2d<T>(xNhwc.data(), ins[0], w.data(), ins[1], b, ins[2],
                   gpuY.data(), outs[0], params, scratch.get(), kStream);
    gpu::detail::launchElements(numel(yShape),
                                gpu::detail::DirectConvBody<T>{
                                    x.data(), w.data(), b, directY.data(), p},
                                kStream, "conv2d");
    EXPECT_EQ(takeError(), "") << what;
    expectClose(gpuY, cpuY, "channels-last conv2d " + what);
    EXPECT_EQ(0, std::memcmp(gpuY.data(), toNhwc(directY, yShape).data(),
                             gpuY.size() * sizeof(T)))
        << "channels-last conv2d against the NCHW direct sums " << what;

    // The data gradient.
    std::vector<T> cpuDx(numel(c.x), T(7.0f)), gpuDx(numel(c.x), T(-3.0f)),
        directDx(numel(c.x), T(5.0f));
    cpu::conv2dBackwardData<T>(gyNhwc.data(), cpuDims(yLast), w.data(),
                               cpuDims(c.w), cpuDx.data(), cpuDims(xLast),
                               dataParams);
    const gpu::Dims dataIns[] = {gpuDims(yLast), gpuDims(c.w)};
    const gpu::Dims dataOuts[] = {gpuDims(xLast)};
    PlannedScratch dataScratch(gpu::scratch::conv2dBackwardDataBytes<T>(
        dataIns, dataOuts, dataParams));
    gpu::conv2dBackwardData<T>(gyNhwc.data(), dataIns[0], w.data(), dataIns[1],
                               gpuDx.data(), dataOuts[0], dataParams,
                               dataScratch.get(), kStream);
    gpu::detail::launchElements(numel(c.x),
                                gpu::detail::ConvBackwardDataBody<T>{
                                    gy.data(), w.data(), directDx.data(), p},
                                kStream, "conv2dBackwardData");
    EXPECT_EQ(takeError(), "") << what;
    expectClose(gpuDx, cpuDx, "channels-last conv2dBackwardData " + what);
    EXPECT_EQ(0, std::memcmp(gpuDx.data(), toNhwc(directDx, c.x).data(),
                             gpuDx.size() * sizeof(T)))
        << "channels-last conv2dBackwardData against the NCHW direct sums "
        << what;

    // The filter gradient: OIHW either way.
    std::vector<T> cpuDw(numel(c.w), T(7.0f)), gpuDw(numel(c.w), T(-3.0f)),
        directDw(numel(c.w), T(5.0f));
    cpu::conv2dBackwardFilter<T>(xNhwc.data(), cpuDims(xLast), gyNhwc.data(),
                                 cpuDims(yLast), cpuDw.data(), cpuDims(c.w),
                                 filterParams);
    const gpu::Dims filterIns[] = {gpuDims(xLast), gpuDims(yLast)};
    const gpu::Dims filterOuts[] = {gpuDims(c.w)};
    PlannedScratch filterScratch(gpu::scratch::conv2dBackwardFilterBytes<T>(
        filterIns, filterOuts, filterParams));
    gpu::conv2dBackwardFilter<T>(xNhwc.data(), filterIns[0], gyNhwc.data(),
                                 filterIns[1], gpuDw.data(), filterOuts[0],
                                 filterParams, filterScratch.get(), kStream);
    gpu::detail::launchElements(
        numel(c.w),
        gpu::detail::ConvBackwardFilterBody<T>{x.data(), gy.data(),
                                               directDw.data(), p, c.x[0]},
        kStream, "conv2dBackwardFilter");
    EXPECT_EQ(takeError(), "") << what;
    expectClose(gpuDw, cpuDw, "channels-last conv2dBackwardFilter " + what);
    EXPECT_EQ(
        0, std::memcmp(gpuDw.data(), directDw.data(), gpuDw.size() * sizeof(T)))
        << "channels-last conv2dBackwardFilter against the NCHW direct sums "
        << what;
  }
}

TEST(CudaKernelsTest, ChannelsLastConvsFloat) {
  checkChannelsLastConvs<float>();
}
TEST(CudaKernelsTest, ChannelsLastConvsBF16) { checkChannelsLastConvs<bf16>(); }

// Channels-last convolutions plan cuDNN's workspace alone: where cuDNN
// declines they sum directly, without columns.
TEST(CudaKernelsTest, ChannelsLastConvsPlanNoColumns) {
  const ConvCase c = convCases()[1];
  Shape yShape = convOutput(c);
  ztc::Conv2dParams params{ztc::Ints{c.strides}, ztc::Ints{c.pads},
                           ztc::Ints{c.dilations}, c.group, false};
  const gpu::Dims ins[] = {gpuDims(c.x), gpuDims(c.w), gpuDims({})};
  const gpu::Dims outs[] = {gpuDims(yShape)};
  const gpu::Dims lastIns[] = {gpuDims(nhwcShape(c.x)), gpuDims(c.w),
                               gpuDims({})};
  const gpu::Dims lastOuts[] = {gpuDims(nhwcShape(yShape))};
  int64_t columns = gpu::scratch::conv2dColumns<float>(ins[0], ins[1], outs[0],
                                                       params, 1 << 30)
                        .bytes;
  EXPECT_EQ(columns, 2 * 8 * 3 * 3 * 7 * 6 * int64_t(sizeof(float)));
  params.channels_last = true;
  EXPECT_FALSE(gpu::scratch::conv2dColumns<float>(lastIns[0], lastIns[1],
                                                  lastOuts[0], params, 1 << 30)
                   .product);
  // cuDNN's workspace: the whole batch's columns, as for NCHW.
  EXPECT_EQ(gpu::scratch::conv2dBytes<float>(lastIns, lastOuts, params),
            columns);
}

template <typename T> void checkPoolGradients() {
  unsigned seed = 950;
  for (const PoolCase &c : poolCases()) {
    auto x = randomValues<T>(numel(c.x), seed++, -3, 3);
    auto gy = randomValues<T>(numel(c.y), seed++, -3, 3);
    std::vector<T> expected(numel(c.x), T(7.0f)), actual(numel(c.x), T(-3.0f));
    const ztc::MaxPool2dParams maxParams{
        ztc::Ints{c.kernel}, ztc::Ints{c.strides}, ztc::Ints{c.pads},
        ztc::Ints{c.dilations}, c.ceilMode};
    cpu::maxPool2dBackward<T>(x.data(), cpuDims(c.x), gy.data(), cpuDims(c.y),
                              expected.data(), cpuDims(c.x), maxParams);
    gpu::maxPool2dBackward<T>(x.data(), gpuDims(c.x), gy.data(), gpuDims(c.y),
                              actual.data(), gpuDims(c.x), maxParams, kStream);
    expectClose(actual, expected, "maxPool2dBackward " + describe(c.x));
    // Average pooling has no dilations.
    if (c.dilations[0] != 1 || c.dilations[1] != 1)
      continue;
    const int64_t inputSize[] = {c.x[2], c.x[3]};
    for (bool includePad : {false, true}) {
      const ztc::AvgPool2dBackwardParams avgParams{
          ztc::Ints{inputSize}, ztc::Ints{c.kernel}, ztc::Ints{c.strides},
          ztc::Ints{c.pads},    c.ceilMode,          includePad};
      cpu::avgPool2dBackward<T>(gy.data(), cpuDims(c.y), expected.data(),
                                cpuDims(c.x), avgParams);
      gpu::avgPool2dBackward<T>(gy.data(), gpuDims(c.y), actual.data(),
                                gpuDims(c.x), avgParams, kStream);
      expectClose(actual, expected,
                  "avgPool2dBackward " + describe(c.x) +
                      (includePad ? " count_include_pad" : ""));
    }
  }
}

TEST(CudaKernelsTest, PoolGradientsFloat) { checkPoolGradients<float>(); }
TEST(CudaKernelsTest, PoolGradientsBF16) { checkPoolGradients<bf16>(); }

/// Channels-last pooling (ztc-channels-last's, between NHWC convolutions):
/// both libraries' NHWC results, forward and gradient, are the CPU's NCHW
/// results laid out NHWC, bit for bit (each element sums or compares the
/// same values in the same order). The last case has planes enough for the
/// CPU's parallel loops.
template <typename T> void checkChannelsLastPools() {
  std::vector<PoolCase> cases = poolCases();
  cases.push_back({{2, 16, 24, 24},
                   {2, 16, 12, 12},
                   {3, 3},
                   {2, 2},
                   {1, 1, 1, 1},
                   {1, 1},
                   true});
  unsigned seed = 1400;
  for (const PoolCase &c : cases) {
    auto x = randomValues<T>(numel(c.x), seed++, -3, 3);
    auto gy = randomValues<T>(numel(c.y), seed++, -3, 3);
    const auto xLast = toNhwc(x, c.x), gyLast = toNhwc(gy, c.y);
    const Shape xShape = nhwcShape(c.x), yShape = nhwcShape(c.y);
    // What the NCHW CPU kernel stores, laid out NHWC, against what each
    // library's NHWC kernel stores.
    auto check = [&](const std::vector<T> &nchw, const Shape &shape,
                     const std::vector<T> &cpuLast,
                     const std::vector<T> &gpuLast, const std::string &what) {
      std::vector<T> expected = toNhwc(nchw, shape);
      expectSameBits(cpuLast, expected, "CPU " + what + " " + describe(c.x));
      expectSameBits(gpuLast, expected, "CUDA " + what + " " + describe(c.x));
    };
    ztc::MaxPool2dParams maxParams{ztc::Ints{c.kernel}, ztc::Ints{c.strides},
                                   ztc::Ints{c.pads}, ztc::Ints{c.dilations},
                                   c.ceilMode};
    std::vector<T> y(numel(c.y)), yCpu(y.size(), T(7.0f)),
        yGpu(y.size(), T(-3.0f));
    std::vector<T> gx(numel(c.x)), gxCpu(gx.size(), T(7.0f)),
        gxGpu(gx.size(), T(-3.0f));
    cpu::maxPool2d<T>(x.data(), cpuDims(c.x), y.data(), cpuDims(c.y),
                      maxParams);
    cpu::maxPool2dBackward<T>(x.data(), cpuDims(c.x), gy.data(), cpuDims(c.y),
                              gx.data(), cpuDims(c.x), maxParams);
    maxParams.channels_last = true;
    cpu::maxPool2d<T>(xLast.data(), cpuDims(xShape), yCpu.data(),
                      cpuDims(yShape), maxParams);
    gpu::maxPool2d<T>(xLast.data(), gpuDims(xShape), yGpu.data(),
                      gpuDims(yShape), maxParams, kStream);
    check(y, c.y, yCpu, yGpu, "maxPool2d");
    cpu::maxPool2dBackward<T>(xLast.data(), cpuDims(xShape), gyLast.data(),
                              cpuDims(yShape), gxCpu.data(), cpuDims(xShape),
                              maxParams);
    gpu::maxPool2dBackward<T>(xLast.data(), gpuDims(xShape), gyLast.data(),
                              gpuDims(yShape), gxGpu.data(), gpuDims(xShape),
                              maxParams, kStream);
    check(gx, c.x, gxCpu, gxGpu, "maxPool2dBackward");
    if (c.dilations[0] != 1 || c.dilations[1] != 1)
      continue;
    const int64_t inputSize[] = {c.x[2], c.x[3]};
    for (bool includePad : {false, true}) {
      std::string what = includePad ? " count_include_pad" : "";
      ztc::AvgPool2dParams avgParams{ztc::Ints{c.kernel}, ztc::Ints{c.strides},
                                     ztc::Ints{c.pads}, c.ceilMode, includePad};
      cpu::avgPool2d<T>(x.data(), cpuDims(c.x), y.data(), cpuDims(c.y),
                        avgParams);
      avgParams.channels_last = true;
      cpu::avgPool2d<T>(xLast.data(), cpuDims(xShape), yCpu.data(),
                        cpuDims(yShape), avgParams);
      gpu::avgPool2d<T>(xLast.data(), gpuDims(xShape), yGpu.data(),
                        gpuDims(yShape), avgParams, kStream);
      check(y, c.y, yCpu, yGpu, "avgPool2d" + what);
      ztc::AvgPool2dBackwardParams backParams{
          ztc::Ints{inputSize}, ztc::Ints{c.kernel}, ztc::Ints{c.strides},
          ztc::Ints{c.pads},    c.ceilMode,          includePad};
      cpu::avgPool2dBackward<T>(gy.data(), cpuDims(c.y), gx.data(),
                                cpuDims(c.x), backParams);
      backParams.channels_last = true;
      cpu::avgPool2dBackward<T>(gyLast.data(), cpuDims(yShape), gxCpu.data(),
                                cpuDims(xShape), backParams);
      gpu::avgPool2dBackward<T>(gyLast.data(), gpuDims(yShape), gxGpu.data(),
                                gpuDims(xShape), backParams, kStream);
      check(gx, c.x, gxCpu, gxGpu, "avgPool2dBackward" + what);
    }
  }
}

TEST(CudaKernelsTest, ChannelsLastPoolsFloat) {
  checkChannelsLastPools<float>();
}
TEST(CudaKernelsTest, ChannelsLastPoolsBF16) { checkChannelsLastPools<bf16>(); }

/// Channels-last inference batch norms (a model exported in eval mode,
/// between NHWC convolutions): both libraries' NHWC results are the CPU's
/// NCHW result laid out NHWC, bit for bit. The second shape has rows
/// enough for the CPU's parallel loop.
template <typename T> void checkChannelsLastBatchNorm() {
  unsigned seed = 1500;
  for (const Shape &shape : {Shape{2, 5, 3, 4}, Shape{4, 32, 16, 17}}) {
    int64_t c = shape[1];
    auto x = randomValues<T>(numel(shape), seed++, -3, 3);
    auto scale = randomValues<T>(c, seed++, 0.5, 1.5);
    auto bias = randomValues<T>(c, seed++, -1, 1);
    auto mean = randomValues<T>(c, seed++, -1, 1);
    auto var = randomValues<T>(c, seed++, 0.5, 2);
    const Shape channels = {c}, last = nhwcShape(shape);
    const auto xLast = toNhwc(x, shape);
    std::vector<T> y(x.size()), yCpu(x.size(), T(7.0f)),
        yGpu(x.size(), T(-3.0f));
    ztc::BatchNormParams params{1e-5};
    cpu::batchNorm<T>(x.data(), cpuDims(shape), scale.data(), cpuDims(channels),
                      bias.data(), cpuDims(channels), mean.data(),
                      cpuDims(channels), var.data(), cpuDims(channels),
                      y.data(), cpuDims(shape), params);
    params.channels_last = true;
    cpu::batchNorm<T>(xLast.data(), cpuDims(last), scale.data(),
                      cpuDims(channels), bias.data(), cpuDims(channels),
                      mean.data(), cpuDims(channels), var.data(),
                      cpuDims(channels), yCpu.data(), cpuDims(last), params);
    gpu::batchNorm<T>(xLast.data(), gpuDims(last), scale.data(),
                      gpuDims(channels), bias.data(), gpuDims(channels),
                      mean.data(), gpuDims(channels), var.data(),
                      gpuDims(channels), yGpu.data(), gpuDims(last), params,
                      kStream);
    std::vector<T> expected = toNhwc(y, shape);
    expectSameBits(yCpu, expected, "CPU batchNorm " + describe(shape));
    expectSameBits(yGpu, expected, "CUDA batchNorm " + describe(shape));
  }
}

TEST(CudaKernelsTest, ChannelsLastBatchNormFloat) {
  checkChannelsLastBatchNorm<float>();
}
TEST(CudaKernelsTest, ChannelsLastBatchNormBF16) {
  checkChannelsLastBatchNorm<bf16>();
}

/// The CUDA library's scatterAdd with the scratch the compiler plans for it.
template <typename T, typename I>
void gpuScatterAdd(const T *data, const Shape &dataShape,
                   const std::vector<I> &indices, const Shape &indexShape,
                   const T *updates, const Shape &updateShape, T *y,
                   int64_t axis) {
  const ztc::Dims ins[] = {gpuDims(dataShape), gpuDims(indexShape),
                           gpuDims(updateShape)};
  PlannedScratch scratch(
      gpu::scratch::scatterAddBytes<T>(ins, nullptr, ztc::AxisParams{axis}));
  gpu::scatterAdd<T, I>(data, ins[0], indices.data(), ins[1], updates, ins[2],
                        y, ins[0], ztc::AxisParams{axis}, scratch.get(),
                        kStream);
}

TEST(CudaKernelsTest, ScatterAddAndInsertSlice) {
  // Repeated and negative indices accumulate, along a middle and the first
  // axis, with int64 and int32 indices.
  Shape data = {5, 3, 4};
  auto x = randomValues<float>(numel(data), 990, -1, 1);
  std::vector<int64_t> indices = {2, -1, 0, 2};
  auto updates = randomValues<float>(5 * 4 * 4, 991, -1, 1);
  std::vector<float> expected(numel(data)), actual(numel(data));
  cpu::scatterAdd<float, int64_t>(
      x.data(), cpuDims(data), indices.data(), cpuDims({4}), updates.data(),
      cpuDims({5, 4, 4}), expected.data(), cpuDims(data), ztc::AxisParams{1});
  gpuScatterAdd<float, int64_t>(x.data(), data, indices, {4}, updates.data(),
                                {5, 4, 4}, actual.data(), 1);
  expectClose(actual, expected, "scatterAdd axis 1");
  std::vector<int32_t> rows = {4, 0, 4};
  auto rowUpdates = randomValues<float>(3 * 3 * 4, 992, -1, 1);
  cpu::scatterAdd<float, int32_t>(
      x.data(), cpuDims(data), rows.data(), cpuDims({3}), rowUpdates.data(),
      cpuDims({3, 3, 4}), expected.data(), cpuDims(data), ztc::AxisParams{0});
  gpuScatterAdd<float, int32_t>(x.data(), data, rows, {3}, rowUpdates.data(),
                                {3, 3, 4}, actual.data(), 0);
  expectClose(actual, expected, "scatterAdd axis 0 int32");

  // Every other row and column of a 6x5 destination.
  Shape dest = {6, 5}, source = {3, 3};
  auto d = randomValues<float>(numel(dest), 993, -1, 1);
  auto src = randomValues<float>(numel(source), 994, -1, 1);
  int64_t starts[] = {1, 0}, steps[] = {2, 2};
  std::vector<float> expectedY(numel(dest)), actualY(numel(dest));
  const ztc::InsertSliceParams insertParams{ztc::Ints{starts},
                                            ztc::Ints{steps}};
  cpu::insertSlice<float>(d.data(), cpuDims(dest), src.data(), cpuDims(source),
                          expectedY.data(), cpuDims(dest), insertParams);
  gpu::insertSlice<float>(d.data(), gpuDims(dest), src.data(), gpuDims(source),
                          actualY.data(), gpuDims(dest), insertParams, kStream);
  expectClose(actualY, expectedY, "insertSlice");
  EXPECT_EQ(actualY[5], src[0]);
  EXPECT_EQ(actualY[0], d[0]);
}

TEST(CudaKernelsTest, ScatterAddRangeErrorMatchesTheCpu) {
  Shape data = {3, 2};
  std::vector<float> x(6, 1.0f), updates(4, 1.0f), y(6);
  std::vector<int64_t> indices = {1, 7};
  cpu::clearError();
  cpu::scatterAdd<float, int64_t>(x.data(), cpuDims(data), indices.data(),
                                  cpuDims({2}), updates.data(), cpuDims({2, 2}),
                                  y.data(), cpuDims(data), ztc::AxisParams{0});
  std::string cpuMessage = cpu::lastError();
  gpu::clearError();
  gpuScatterAdd<float, int64_t>(x.data(), data, indices, {2}, updates.data(),
                                {2, 2}, y.data(), 0);
  EXPECT_EQ(cpuMessage, "scatter_add: index 7 is outside [-3, 3)");
  EXPECT_EQ(takeError(), cpuMessage);
  // The valid update landed; the bad one left data as it was.
  EXPECT_EQ(y[2], 2.0f);
  EXPECT_EQ(y[0], 1.0f);
}

/// The sort behind scatterAdd: distinct keys of every power-of-two count
/// from one tile's to several tiles' (the steps of larger strides and the
/// tiles' merges), against std::sort.
TEST(CudaKernelsTest, SortKeysSortsDistinctKeys) {
  std::mt19937_64 random(77);
  for (int64_t n : {1, 2, 8, 512, 2048, 4096, 16384}) {
    std::vector<uint64_t> keys(n);
    for (int64_t i = 0; i < n; ++i)
      keys[i] = (random() & ~uint64_t(0xffff)) | uint64_t(i);
    std::vector<uint64_t> expected = keys;
    std::sort(expected.begin(), expected.end());
    gpu::detail::sortKeys(keys.data(), n, kStream, "sortKeys");
    EXPECT_EQ(keys, expected) << n << " keys";
  }
}

/// scatterAdd's sums, bit for bit the CPU's, where the positions need
/// several tiles of the sort (5,000 of them, 8,192 sort keys) and repeat
/// rows from twice to hundreds of times (an embedding's gradient over
/// real tokens, with a padding token), along the first and a middle axis,
/// in f32 and bf16, into a buffer of its own and over its data (in place).
template <typename T> void checkScatterAddMatchesTheCpuBits() {
  const int64_t count = 5000, length = 300, inner = 40;
  std::mt19937 random(78);
  std::vector<int64_t> indices(count);
  for (int64_t j = 0; j < count; ++j) {
    const int64_t pick = random() % 4;
    indices[j] = pick == 0   ? 7                            // a padding token
                 : pick == 1 ? int64_t(random() % 20)       // common tokens
                 : pick == 2 ? -int64_t(random() % 300) - 1 // from the end
                             : int64_t(random() % 300);
  }
  auto bitsOf = [](const std::vector<T> &v) {
    std::vector<uint16_t> words(v.size() * sizeof(T) / 2);
    std::memcpy(words.data(), v.data(), v.size() * sizeof(T));
    return words;
  };
  for (int64_t axis : {0, 1}) {
    const Shape data =
        axis == 0 ? Shape{length, inner} : Shape{3, length, inner};
    const Shape updateShape =
        axis == 0 ? Shape{count, inner} : Shape{3, count, inner};
    auto x = randomValues<T>(numel(data), 79, -1, 1);
    auto updates = randomValues<T>(numel(updateShape), 80, -1, 1);
    std::vector<T> expected(numel(data)), actual(numel(data));
    cpu::scatterAdd<T, int64_t>(x.data(), cpuDims(data), indices.data(),
                                cpuDims({count}), updates.data(),
                                cpuDims(updateShape), expected.data(),
                                cpuDims(data), ztc::AxisParams{axis});
    gpuScatterAdd<T, int64_t>(x.data(), data, indices, {count}, updates.data(),
                              updateShape, actual.data(), axis);
    EXPECT_EQ(bitsOf(actual), bitsOf(expected)) << "axis " << axis;
    std::vector<T> over = x;
    gpuScatterAdd<T, int64_t>(over.data(), data, indices, {count},
                              updates.data(), updateShape, over.data(), axis);
    EXPECT_EQ(bitsOf(over), bitsOf(expected)) << "in place, axis " << axis;
    std::vector<T> cpuOver = x;
    cpu::scatterAdd<T, int64_t>(cpuOver.data(), cpuDims(data), indices.data(),
                                cpuDims({count}), updates.data(),
                                cpuDims(updateShape), cpuOver.data(),
                                cpuDims(data), ztc::AxisParams{axis});
    EXPECT_EQ(bitsOf(cpuOver), bitsOf(expected))
        << "CPU in place, axis " << axis;
  }
  EXPECT_EQ(takeError(), "");
}

TEST(CudaKernelsTest, ScatterAddMatchesTheCpuBitsFloat) {
  checkScatterAddMatchesTheCpuBits<float>();
}
TEST(CudaKernelsTest, ScatterAddMatchesTheCpuBitsBF16) {
  checkScatterAddMatchesTheCpuBits<bf16>();
}

/// The scatter's scratch: a sort key per position, rounded up to a power
/// of two; none without positions.
TEST(CudaKernelsTest, ScatterAddScratchHoldsASortKeyPerPosition) {
  auto bytes = [](int64_t count) {
    const ztc::Dims ins[] = {gpuDims({50257, 768}), gpuDims({count}),
                             gpuDims({count, 768})};
    return gpu::scratch::scatterAddBytes<float>(ins, nullptr,
                                                ztc::AxisParams{0});
  };
  EXPECT_EQ(bytes(0), 0);
  EXPECT_EQ(bytes(1), 8);
  EXPECT_EQ(bytes(1024), 1024 * 8);
  EXPECT_EQ(bytes(1025), 2048 * 8);
}

// The CUDA library's random numbers are the CPU library's, bit for bit:
// both evaluate Random.h, the CUDA one reading the key through the device
// pointer inside the kernel body (here, on the host).
TEST(CudaKernelsTest, RandomUniformMatchesTheCpuBits) {
  for (int64_t key : {int64_t(0), int64_t(99), int64_t(-7)}) {
    for (uint64_t stream : {uint64_t(0), uint64_t(5), ~uint64_t(0)}) {
      Shape shape = {3, 5, 7};
      // The configuration's stream is an int64 the kernels read as unsigned.
      const ztc::RandomUniformParams params{static_cast<int64_t>(stream)};
      std::vector<float> expected(numel(shape), 7.0f),
          actual(numel(shape), -3.0f);
      cpu::randomUniform<float>(&key, cpu::Dims{}, expected.data(),
                                cpuDims(shape), params);
      gpu::randomUniform<float>(&key, gpu::Dims{}, actual.data(),
                                gpuDims(shape), params, kStream);
      EXPECT_EQ(actual, expected) << "key " << key << ", stream " << stream;
      std::vector<double> wideExpected(numel(shape)), wideActual(numel(shape));
      cpu::randomUniform<double>(&key, cpu::Dims{}, wideExpected.data(),
                                 cpuDims(shape), params);
      gpu::randomUniform<double>(&key, gpu::Dims{}, wideActual.data(),
                                 gpuDims(shape), params, kStream);
      EXPECT_EQ(wideActual, wideExpected);
    }
  }
}

// adam8bit: the CUDA body (its code by binary search over the code book's
// midpoints, its block maximum by reduction) leaves the CPU library's bytes
// (a 65536-point table) in the parameter, the codes and the scales, step
// after step; in place on the CUDA side, into other buffers on the CPU
// side. 7000 elements: a partial last block; one step's zero gradients in
// the first block leave its second moment's scale at zero's code path.
TEST(CudaKernelsTest, Adam8bitMatchesTheCpuBits) {
  const int64_t n = 7000, blocks = (n + 255) / 256;
  std::mt19937 rng(37);
  std::normal_distribution<float> normal;
  std::vector<float> p(n);
  for (float &value : p)
    value = normal(rng);
  std::vector<float> cpuP = p, gpuP = p, cpuScale1(blocks, 0.0f),
                     cpuScale2(blocks, 0.0f), gpuScale1(blocks, 0.0f),
                     gpuScale2(blocks, 0.0f);
  std::vector<int8_t> cpuM(n, 0), cpuV(n, 0), gpuM(n, 0), gpuV(n, 0);
  const float scales[] = {1e-2f, 1.0f, 1e-4f, 1e-2f, 3e-3f};
  // Elements, block scales, scalars (lr and step).
  const ztc::Dims elements{n}, perBlock{blocks}, scalar{};
  const ztc::Adam8bitParams config{0.9, 0.999, 1e-8, 0.01};
  for (int step = 1; step <= 5; ++step) {
    std::vector<float> g(n);
    for (float &value : g)
      value = normal(rng) * scales[step - 1];
    if (step == 1)
      std::fill(g.begin(), g.begin() + 256, 0.0f);
    float lr = 1e-3f, t = float(step);
    // The CPU library into fresh buffers, then kept.
    std::vector<float> outP(n), outScale1(blocks), outScale2(blocks);
    std::vector<int8_t> outM(n), outV(n);
    cpu::adam8bit(cpuP.data(), elements, g.data(), elements, cpuM.data(),
                  elements, cpuScale1.data(), perBlock, cpuV.data(), elements,
                  cpuScale2.data(), perBlock, &lr, scalar, &t, scalar,
                  outP.data(), elements, outM.data(), elements,
                  outScale1.data(), perBlock, outV.data(), elements,
                  outScale2.data(), perBlock, config);
    cpuP = outP;
    cpuM = outM;
    cpuV = outV;
    cpuScale1 = outScale1;
    cpuScale2 = outScale2;
    gpu::adam8bit(gpuP.data(), elements, g.data(), elements, gpuM.data(),
                  elements, gpuScale1.data(), perBlock, gpuV.data(), elements,
                  gpuScale2.data(), perBlock, &lr, scalar, &t, scalar,
                  gpuP.data(), elements, gpuM.data(), elements,
                  gpuScale1.data(), perBlock, gpuV.data(), elements,
                  gpuScale2.data(), perBlock, config, kStream);
    ASSERT_EQ(gpuP, cpuP) << "step " << step;
    ASSERT_EQ(gpuM, cpuM) << "step " << step;
    ASSERT_EQ(gpuV, cpuV) << "step " << step;
    ASSERT_EQ(gpuScale1, cpuScale1) << "step " << step;
    ASSERT_EQ(gpuScale2, cpuScale2) << "step " << step;
  }
  // The steps moved everything: not a comparison of untouched buffers.
  EXPECT_NE(cpuP, p);
  EXPECT_LT(std::count(cpuM.begin(), cpuM.end(), int8_t(0)), n);
  EXPECT_LT(std::count(cpuV.begin(), cpuV.end(), int8_t(0)), n);
}

TEST(CudaKernelsTest, MatmulNf4MatchesTheCpu) {
  // A weight of 96 x 700 in NF4 (Nf4.h); the host emulation's products
  // accumulate in another order than oneDNN's, so the two agree to float
  // rounding, and the dequantized tiles exactly (a 1 x K identity-like
  // input picks columns of W).
  namespace nf4 = ztc::nf4;
  namespace b8 = ztc::blockwise8bit;
  const int64_t rows = 96, cols = 700, n = rows * cols;
  const int64_t blocks = nf4::blocksOf(n);
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(n), scales(blocks);
  for (float &value : w)
    value = normal(rng);
  std::vector<uint8_t> packed((n + 1) / 2), codes(blocks);
  std::vector<float> nested((blocks + 255) / 256);
  nf4::quantize(w.data(), n, packed.data(), scales.data());
  float offset = nf4::meanOf(scales.data(), blocks);
  auto table = std::make_unique<b8::CodeTable>();
  b8::buildTable(b8::kSignedCodes, *table);
  nf4::quantizeScales(scales.data(), blocks, offset, *table, codes.data(),
                      nested.data());
  std::vector<float> dense(n);
  nf4::dequantize(packed.data(), codes.data(), nested.data(), offset, n, *table,
                  dense.data());
  // The kernels take the codes as the i8 tensors of the NF4 weight.
  const auto *packedCodes = reinterpret_cast<const int8_t *>(packed.data());
  const auto *scaleCodes = reinterpret_cast<const int8_t *>(codes.data());
  const ztc::Dims packedDims{int64_t(packed.size())}, codeDims{blocks},
      nestedDims{int64_t(nested.size())}, offsetDims{};
  const int64_t weightShape[] = {rows, cols};
  for (bool transB : {false, true}) {
    const int64_t k = transB ? cols : rows, out = transB ? rows : cols;
    // x = a row of ones at p = 5, then random rows.
    const int64_t m = 4;
    std::vector<float> x(m * k, 0.0f), cpuY(m * out), gpuY(m * out);
    x[5] = 1.0f;
    for (int64_t i = k; i < m * k; ++i)
      x[i] = normal(rng);
    const ztc::MatmulNf4Params config{ztc::Ints{weightShape}, transB};
    cpu::matmulNf4<float>(x.data(), {m, k}, packedCodes, packedDims, scaleCodes,
                          codeDims, nested.data(), nestedDims, &offset,
                          offsetDims, cpuY.data(), {m, out}, config);
    const gpu::Dims ins[] = {{m, k}};
    PlannedScratch scratch(
        gpu::scratch::matmulNf4Bytes<float>(ins, nullptr, config));
    gpu::matmulNf4<float>(x.data(), {m, k}, packedCodes, packedDims, scaleCodes,
                          codeDims, nested.data(), nestedDims, &offset,
                          offsetDims, gpuY.data(), {m, out}, config,
                          scratch.get(), kStream);
    for (int64_t j = 0; j < out; ++j) {
      float weight = dense[transB ? j * cols + 5 : 5 * cols + j];
      ASSERT_EQ(gpuY[j], weight) << "column " << j;
      ASSERT_EQ(cpuY[j], weight) << "column " << j;
    }
    for (int64_t i = out; i < m * out; ++i)
      ASSERT_NEAR(gpuY[i], cpuY[i], 1e-5f * (1.0f + std::fabs(cpuY[i])));
  }
}

TEST(CudaKernelsTest, DimsFromBracedList) {
  gpu::Dims dims{4, 16, 32};
  EXPECT_EQ(dims.rank, 3);
  EXPECT_EQ(dims[1], 16);
  EXPECT_EQ(dims.numElements(), 4 * 16 * 32);
  EXPECT_EQ(gpu::Dims{}.numElements(), 1);
}

} // namespace
