//===- KernelsTest.cpp - CpuKernels.h against naive references ------------===//
//
// Each kernel runs on small random inputs and is compared with a direct,
// loop-per-definition reference computed in double on the same (rounded)
// inputs. The pooling and loss corner cases that frameworks disagree on are
// also pinned to values computed by onnxruntime / PyTorch.
//
//===----------------------------------------------------------------------===//

#include "kernels/CpuKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace ztc;
using namespace ztc::cpu;
using ztc::bf16;
using ztc::f16;

namespace {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape &shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

Dims dimsOf(const Shape &shape) {
  Dims dims;
  for (int64_t dim : shape)
    dims.d[dims.rank++] = dim;
  return dims;
}

Shape stridesOf(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Multi-index of flat position `flat` in `shape`.
Shape unflatten(int64_t flat, const Shape &shape) {
  Shape index(shape.size());
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index;
}

template <typename T> double toDouble(T value) {
  return static_cast<double>(static_cast<float>(value));
}
template <> double toDouble(double value) { return value; }
template <> double toDouble(int64_t value) {
  return static_cast<double>(value);
}

template <typename T> T fromDouble(double value) {
  return static_cast<T>(static_cast<float>(value));
}
template <> double fromDouble(double value) { return value; }
template <> int64_t fromDouble(double value) {
  return static_cast<int64_t>(value);
}

/// Random values in [low, high), rounded to T.
template <typename T>
std::vector<T> randomValues(int64_t count, unsigned seed, double low = -1,
                            double high = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(low, high);
  std::vector<T> values(count);
  for (T &value : values)
    value = fromDouble<T>(std::is_integral_v<T> ? std::floor(dist(rng))
                                                : dist(rng));
  return values;
}

template <typename T> std::vector<double> widen(const std::vector<T> &values) {
  std::vector<double> result;
  for (const T &value : values)
    result.push_back(toDouble(value));
  return result;
}

/// Relative tolerance for results stored as T.
template <typename T> double tolerance() {
  if constexpr (std::is_same_v<T, double>)
    return 1e-12;
  else if constexpr (std::is_same_v<T, float>)
    return 2e-5;
  else if constexpr (std::is_same_v<T, f16>)
    return 2e-3;
  else if constexpr (std::is_same_v<T, bf16>)
    return 1.6e-2;
  else
    return 0;
}

template <typename T>
void expectNear(const std::vector<T> &actual,
                const std::vector<double> &expected, const char *what,
                double scale = 1.0) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    double a = toDouble(actual[i]), e = expected[i];
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(a)) << what << " at " << i;
      continue;
    }
    double bound = tolerance<T>() * std::max({std::abs(e), scale, 1e-30});
    ASSERT_NEAR(a, e, bound) << what << " at " << i;
  }
}

//===----------------------------------------------------------------------===//
// References
//===----------------------------------------------------------------------===//

/// numpy.matmul on doubles, including rank-1 operands.
std::vector<double> referenceMatmul(const std::vector<double> &a, Shape aShape,
                                    const std::vector<double> &b, Shape bShape,
                                    const Shape &cShape) {
  if (aShape.size() == 1)
    aShape.insert(aShape.begin(), 1);
  if (bShape.size() == 1)
    bShape.push_back(1);
  int64_t m = aShape[aShape.size() - 2], k = aShape.back(), n = bShape.back();
  Shape aBatch(aShape.begin(), aShape.end() - 2);
  Shape bBatch(bShape.begin(), bShape.end() - 2);
  size_t rank = std::max(aBatch.size(), bBatch.size());
  aBatch.insert(aBatch.begin(), rank - aBatch.size(), 1);
  bBatch.insert(bBatch.begin(), rank - bBatch.size(), 1);
  Shape batch(rank);
  for (size_t i = 0; i < rank; ++i)
    batch[i] = std::max(aBatch[i], bBatch[i]);
  std::vector<double> c(numel(cShape));
  EXPECT_EQ(static_cast<int64_t>(c.size()), numel(batch) * m * n);
  for (int64_t flat = 0; flat < numel(batch); ++flat) {
    Shape index = unflatten(flat, batch);
    int64_t aFlat = 0, bFlat = 0;
    for (size_t i = 0; i < rank; ++i) {
      aFlat = aFlat * aBatch[i] + (aBatch[i] == 1 ? 0 : index[i]);
      bFlat = bFlat * bBatch[i] + (bBatch[i] == 1 ? 0 : index[i]);
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += a[(aFlat * m + i) * k + p] * b[(bFlat * k + p) * n + j];
        c[(flat * m + i) * n + j] = sum;
      }
  }
  return c;
}

struct ConvCase {
  Shape x, w;
  int64_t strides[2], pads[4], dilations[2], group;
  bool bias;
};

// The parameters of the case's convolution (input_size and kernel, which
// the CPU kernels take from the dims, stay empty).
Conv2dParams convParams(const ConvCase &cc, bool channelsLast = false) {
  return {cc.strides, cc.pads, cc.dilations, cc.group, channelsLast};
}
Conv2dBackwardDataParams convDataParams(const ConvCase &cc,
                                        bool channelsLast = false) {
  return {Ints(), cc.strides, cc.pads, cc.dilations, cc.group, channelsLast};
}
Conv2dBackwardFilterParams convFilterParams(const ConvCase &cc,
                                            bool channelsLast = false) {
  return {Ints(), cc.strides, cc.pads, cc.dilations, cc.group, channelsLast};
}

/// nll_loss's parameters: reduction 0 none, 1 sum, 2 mean.
NllLossParams nllParams(int reduction, bool hasIgnore, int64_t ignoreIndex) {
  return {static_cast<Reduction>(reduction), MaybeInt{hasIgnore, ignoreIndex}};
}

Shape convOutShape(const ConvCase &cc) {
  Shape y = {cc.x[0], cc.w[0], 0, 0};
  for (int i = 0; i < 2; ++i)
    y[2 + i] = (cc.x[2 + i] + cc.pads[i] + cc.pads[i + 2] -
                cc.dilations[i] * (cc.w[2 + i] - 1) - 1) /
                   cc.strides[i] +
               1;
  return y;
}

/// Calls visit(xi, wi, yi) for every product x[xi] * w[wi] that conv2d's
/// output element yi sums (flat indices), output by output.
template <typename Visit>
void forEachConvProduct(const ConvCase &cc, Visit visit) {
  Shape y = convOutShape(cc);
  int64_t cPerGroup = cc.w[1], oPerGroup = cc.w[0] / cc.group;
  for (int64_t n = 0; n < y[0]; ++n)
    for (int64_t o = 0; o < y[1]; ++o)
      for (int64_t oh = 0; oh < y[2]; ++oh)
        for (int64_t ow = 0; ow < y[3]; ++ow) {
          int64_t yi = ((n * y[1] + o) * y[2] + oh) * y[3] + ow;
          int64_t g = o / oPerGroup;
          for (int64_t c = 0; c < cPerGroup; ++c)
            for (int64_t kh = 0; kh < cc.w[2]; ++kh)
              for (int64_t kw = 0; kw < cc.w[3]; ++kw) {
                int64_t ih =
                    oh * cc.strides[0] - cc.pads[0] + kh * cc.dilations[0];
                int64_t iw =
                    ow * cc.strides[1] - cc.pads[1] + kw * cc.dilations[1];
                if (ih < 0 || ih >= cc.x[2] || iw < 0 || iw >= cc.x[3])
                  continue;
                int64_t ic = g * cPerGroup + c;
                visit(((n * cc.x[1] + ic) * cc.x[2] + ih) * cc.x[3] + iw,
                      ((o * cPerGroup + c) * cc.w[2] + kh) * cc.w[3] + kw, yi);
              }
        }
}

std::vector<double> referenceConv(const ConvCase &cc,
                                  const std::vector<double> &x,
                                  const std::vector<double> &w,
                                  const std::vector<double> &bias) {
  Shape y = convOutShape(cc);
  std::vector<double> out(numel(y));
  for (int64_t i = 0; i < numel(y); ++i)
    out[i] = cc.bias ? bias[(i / (y[2] * y[3])) % y[1]] : 0.0;
  forEachConvProduct(cc, [&](int64_t xi, int64_t wi, int64_t yi) {
    out[yi] += x[xi] * w[wi];
  });
  return out;
}

/// conv2d's gradients by definition: every product x * w of the forward
/// sum sends gy to the input element and to the weight it multiplied.
void referenceConvGradients(const ConvCase &cc, const std::vector<double> &x,
                            const std::vector<double> &w,
                            const std::vector<double> &gy,
                            std::vector<double> &gx, std::vector<double> &gw) {
  gx.assign(numel(cc.x), 0.0);
  gw.assign(numel(cc.w), 0.0);
  forEachConvProduct(cc, [&](int64_t xi, int64_t wi, int64_t yi) {
    gx[xi] += gy[yi] * w[wi];
    gw[wi] += gy[yi] * x[xi];
  });
}

//===----------------------------------------------------------------------===//
// Checks, one per kernel, instantiated per element type
//===----------------------------------------------------------------------===//

template <typename T>
void checkMatmul(const Shape &aShape, const Shape &bShape, const Shape &cShape,
                 unsigned seed) {
  auto a = randomValues<T>(numel(aShape), seed, -2, 2);
  auto b = randomValues<T>(numel(bShape), seed + 1, -2, 2);
  std::vector<T> c(numel(cShape));
  matmul<T>(a.data(), dimsOf(aShape), b.data(), dimsOf(bShape), c.data(),
            dimsOf(cShape), MatmulParams{});
  double k = static_cast<double>(aShape.back());
  expectNear(c, referenceMatmul(widen(a), aShape, widen(b), bShape, cShape),
             "matmul", k);
}

template <typename T> void checkMatmulShapes() {
  unsigned seed = 10;
  checkMatmul<T>({4, 5}, {5, 3}, {4, 3}, ++seed);
  checkMatmul<T>({2, 3, 4, 5}, {5, 6}, {2, 3, 4, 6}, ++seed);    // shared b
  checkMatmul<T>({3, 1, 4, 5}, {2, 5, 6}, {3, 2, 4, 6}, ++seed); // both
  checkMatmul<T>({1, 4, 5}, {3, 5, 2}, {3, 4, 2}, ++seed);       // a repeats
  checkMatmul<T>({2, 4, 5}, {2, 5, 7}, {2, 4, 7}, ++seed);       // batched
  checkMatmul<T>({5}, {2, 5, 6}, {2, 6}, ++seed);                // vector a
  checkMatmul<T>({2, 4, 5}, {5}, {2, 4}, ++seed);                // vector b
  checkMatmul<T>({5}, {5}, {}, ++seed);                          // dot
  checkMatmul<T>({3, 0}, {0, 4}, {3, 4}, ++seed);                // K = 0
  // Large enough that the threads share out the batch.
  checkMatmul<T>({2, 4, 64, 48}, {4, 48, 40}, {2, 4, 64, 40}, ++seed);
}

/// The GEMM under matmul and conv2d: every combination of operands stored
/// transposed, leading dimensions wider than the rows, and a bias per row
/// of C. (float and the half types go to oneDNN, whose bf16 matmul takes a
/// row bias as a sum into C.)
template <typename T> void checkGemm() {
  const int64_t m = 37, n = 29, k = 45, pad = 3;
  auto aValues = randomValues<T>(m * k, 80, -2, 2);
  auto bValues = randomValues<T>(k * n, 81, -2, 2);
  auto bias = randomValues<T>(m, 82, -2, 2);
  for (int variant = 0; variant < 8; ++variant) {
    bool transA = variant & 1, transB = variant & 2, withBias = variant & 4;
    // A stored [m, k] or [k, m], B stored [k, n] or [n, k], rows padded.
    int64_t lda = (transA ? m : k) + pad, ldb = (transB ? k : n) + pad;
    int64_t ldc = n + pad;
    std::vector<T> a((transA ? k : m) * lda), b((transB ? n : k) * ldb);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p)
        a[transA ? p * lda + i : i * lda + p] = aValues[i * k + p];
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        b[transB ? j * ldb + p : p * ldb + j] = bValues[p * n + j];
    std::vector<T> c(m * ldc, fromDouble<T>(-7.0));
    detail::gemm<T>(m, n, k, a.data(), lda, transA, b.data(), ldb, transB,
                    c.data(), ldc, withBias ? bias.data() : nullptr);
    std::vector<T> computed;
    std::vector<double> expected;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = withBias ? toDouble(bias[i]) : 0.0;
        for (int64_t p = 0; p < k; ++p)
          sum += toDouble(aValues[i * k + p]) * toDouble(bValues[p * n + j]);
        expected.push_back(sum);
        computed.push_back(c[i * ldc + j]);
      }
    SCOPED_TRACE("transA " + std::to_string(transA) + ", transB " +
                 std::to_string(transB) + ", bias " + std::to_string(withBias));
    expectNear(computed, expected, "gemm", double(k));
    // The padding between rows of C is not written.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = n; j < ldc; ++j)
        ASSERT_EQ(toDouble(c[i * ldc + j]), -7.0) << "padding at " << i;
  }
}

TEST(KernelsTest, GemmLayoutsAndBias) {
  checkGemm<float>();
  checkGemm<double>();
  checkGemm<f16>();
  checkGemm<bf16>();
}

TEST(KernelsTest, MatmulFloat) { checkMatmulShapes<float>(); }
TEST(KernelsTest, MatmulDouble) { checkMatmulShapes<double>(); }
TEST(KernelsTest, MatmulF16) { checkMatmulShapes<f16>(); }
TEST(KernelsTest, MatmulBF16) { checkMatmulShapes<bf16>(); }

/// Whether two values of T have the same bits.
template <typename T> bool sameBits(T x, T y) {
  return std::memcmp(&x, &y, sizeof(T)) == 0;
}

/// matmul with a bias and matmulAdd (ztc-matmul-epilogues) give the bits of
/// the product followed by the loop they replace: the bias, then the
/// addend, each sum rounded to T.
template <typename T> void checkMatmulEpilogues() {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 5}, {5, 4}},    // one product of 6 rows
      {{2, 3, 5}, {2, 5, 4}}, // a batch of products
      {{64, 48}, {48, 40}},   // bands of rows on several threads
      {{3, 0}, {0, 4}}};      // K = 0: the bias and the addend alone
  unsigned seed = 90;
  for (const auto &[aShape, bShape] : cases) {
    Shape cShape = aShape;
    cShape.back() = bShape.back();
    const int64_t n = bShape.back(), count = numel(cShape);
    auto a = randomValues<T>(numel(aShape), ++seed, -2, 2);
    auto b = randomValues<T>(numel(bShape), ++seed, -2, 2);
    auto bias = randomValues<T>(n, ++seed, -2, 2);
    auto addend = randomValues<T>(count, ++seed, -2, 2);
    std::vector<T> product(count), biased(count, fromDouble<T>(9)),
        both(count, fromDouble<T>(9)), added(count, fromDouble<T>(9));
    matmul<T>(a.data(), dimsOf(aShape), b.data(), dimsOf(bShape),
              product.data(), dimsOf(cShape), MatmulParams{});
    matmul<T>(a.data(), dimsOf(aShape), b.data(), dimsOf(bShape), bias.data(),
              dimsOf({n}), biased.data(), dimsOf(cShape), MatmulParams{});
    matmulAdd<T>(a.data(), dimsOf(aShape), b.data(), dimsOf(bShape),
                 addend.data(), dimsOf(cShape), bias.data(), dimsOf({n}),
                 both.data(), dimsOf(cShape), MatmulParams{});
    matmulAdd<T>(a.data(), dimsOf(aShape), b.data(), dimsOf(bShape),
                 addend.data(), dimsOf(cShape), nullptr, Dims{}, added.data(),
                 dimsOf(cShape), MatmulParams{});
    for (int64_t i = 0; i < count; ++i) {
      T withBias = numeric::store<T>(numeric::load(product[i]) +
                                     numeric::load(bias[i % n]));
      EXPECT_TRUE(sameBits(biased[i], withBias)) << "bias, element " << i;
      EXPECT_TRUE(
          sameBits(both[i], numeric::store<T>(numeric::load(withBias) +
                                              numeric::load(addend[i]))))
          << "bias and addend, element " << i;
      EXPECT_TRUE(
          sameBits(added[i], numeric::store<T>(numeric::load(product[i]) +
                                               numeric::load(addend[i]))))
          << "addend, element " << i;
    }
  }
}

TEST(KernelsTest, MatmulEpiloguesFloat) { checkMatmulEpilogues<float>(); }
TEST(KernelsTest, MatmulEpiloguesDouble) { checkMatmulEpilogues<double>(); }
TEST(KernelsTest, MatmulEpiloguesBF16) { checkMatmulEpilogues<bf16>(); }
TEST(KernelsTest, MatmulEpiloguesF16) { checkMatmulEpilogues<f16>(); }

/// matmulWide and matmulAddWide (ztc-matmul-epilogues) give the bits of
/// the loops they replace: matmul's product in T (with its bias), widened
/// to f32, plus the f32 addend. Shapes as oneDNN's bf16 products see them
/// (one product, a batch, one large enough for its products to share the
/// threads, transposed weights, K long enough for several blocks, rows on
/// several threads) and with K = 0.
template <typename T> void checkWideProducts() {
  struct Case {
    Shape a, b;
    bool transB;
  };
  const std::vector<Case> cases = {
      {{2, 3, 5}, {5, 4}, false},       {{2, 3, 5}, {2, 5, 4}, false},
      {{8, 64, 32}, {8, 48, 32}, true}, {{2, 8, 32}, {48, 32}, true},
      {{96, 700}, {700, 40}, false},    {{256, 64}, {80, 64}, true},
      {{3, 0}, {0, 4}, false}};
  unsigned seed = 120;
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto &[aShape, bShape, transB] = cases[c];
    Shape cShape = aShape;
    cShape.back() = transB ? bShape[bShape.size() - 2] : bShape.back();
    const int64_t n = cShape.back(), count = numel(cShape);
    const MatmulParams params{false, transB, false};
    auto a = randomValues<T>(numel(aShape), ++seed, -2, 2);
    auto b = randomValues<T>(numel(bShape), ++seed, -2, 2);
    auto bias = randomValues<T>(n, ++seed, -2, 2);
    auto addend = randomValues<float>(count, ++seed, -8, 8);
    for (bool withBias : {false, true}) {
      const T *b0 = withBias ? bias.data() : nullptr;
      std::vector<T> product(count, fromDouble<T>(9));
      matmul<T>(a.data(), dimsOf(aShape), b.data(), dimsOf(bShape), b0,
                dimsOf({n}), product.data(), dimsOf(cShape), params);
      std::vector<float> wide(count, 9.0f), sum(count, 9.0f);
      matmulWide<T>(a.data(), dimsOf(aShape), b.data(), dimsOf(bShape), b0,
                    dimsOf({n}), wide.data(), dimsOf(cShape), params);
      matmulAddWide<T>(a.data(), dimsOf(aShape), b.data(), dimsOf(bShape),
                       addend.data(), dimsOf(cShape), b0, dimsOf({n}),
                       sum.data(), dimsOf(cShape), params);
      std::string what =
          "case " + std::to_string(c) + (withBias ? " with a bias" : "");
      for (int64_t i = 0; i < count; ++i) {
        const float widened = numeric::load(product[i]);
        EXPECT_TRUE(sameBits(wide[i], widened))
            << "matmulWide " << what << ", element " << i;
        EXPECT_TRUE(sameBits(sum[i], addend[i] + widened))
            << "matmulAddWide " << what << ", element " << i;
      }
    }
  }
}

TEST(KernelsTest, WideProductsBF16) { checkWideProducts<bf16>(); }
TEST(KernelsTest, WideProductsF16) { checkWideProducts<f16>(); }

/// matmulBiasGrad (ztc-matmul-epilogues) gives the bits of the transposed
/// product and of reduce_sum over every dimension of its first operand
/// but the last, the calls it replaces; over [batch, tokens, n] too, the
/// sum the step's gradient took before its rows were one dimension. So
/// does matmulBiasGradB, the gradient its second operand.
template <typename T> void checkMatmulBiasGrad() {
  // g (stored [rows, n]) and x ([rows, k]): dW = g^T x, db = g's row sums.
  const std::vector<std::tuple<Shape, int64_t>> cases = {
      {{2, 3, 5}, 4},    // a few rows
      {{4, 96, 40}, 24}, // rows in chunks, on several threads
      {{0, 6}, 3},       // no rows: zeros
      {{3, 300}, 2}};    // more outputs than a block
  unsigned seed = 140;
  for (const auto &[gShape, k] : cases) {
    const int64_t n = gShape.back(), rows = numel(gShape) / n;
    const Shape gRows = {rows, n};
    auto g = randomValues<T>(numel(gShape), ++seed, -2, 2);
    auto x = randomValues<T>(rows * k, ++seed, -2, 2);
    std::vector<T> product(n * k, fromDouble<T>(9)), sums(n, fromDouble<T>(9)),
        fusedProduct(n * k, fromDouble<T>(7)), fusedSums(n, fromDouble<T>(7));
    const MatmulParams transposed{true, false, false};
    matmul<T>(g.data(), dimsOf(gRows), x.data(), dimsOf({rows, k}),
              product.data(), dimsOf({n, k}), transposed);
    std::vector<int64_t> leading(gShape.size() - 1);
    std::iota(leading.begin(), leading.end(), int64_t(0));
    reduceSum<T>(
        g.data(), dimsOf(gShape), sums.data(), dimsOf({n}),
        ReduceParams{Ints(leading.data(), int64_t(leading.size())), false});
    matmulBiasGrad<T>(g.data(), dimsOf(gRows), x.data(), dimsOf({rows, k}),
                      fusedProduct.data(), dimsOf({n, k}), fusedSums.data(),
                      dimsOf({n}), transposed);
    for (int64_t i = 0; i < n * k; ++i)
      EXPECT_TRUE(sameBits(fusedProduct[i], product[i])) << "dW, element " << i;
    for (int64_t j = 0; j < n; ++j)
      EXPECT_TRUE(sameBits(fusedSums[j], sums[j])) << "db, element " << j;
    // A layer computing x W (GPT-2's Conv1D): dW = xᵀ g, g the second
    // operand, its rows summed.
    std::vector<T> productB(k * n, fromDouble<T>(9)),
        fusedProductB(k * n, fromDouble<T>(7)), fusedSumsB(n, fromDouble<T>(7));
    matmul<T>(x.data(), dimsOf({rows, k}), g.data(), dimsOf(gRows),
              productB.data(), dimsOf({k, n}), transposed);
    matmulBiasGradB<T>(x.data(), dimsOf({rows, k}), g.data(), dimsOf(gRows),
                       fusedProductB.data(), dimsOf({k, n}), fusedSumsB.data(),
                       dimsOf({n}), transposed);
    for (int64_t i = 0; i < k * n; ++i)
      EXPECT_TRUE(sameBits(fusedProductB[i], productB[i]))
          << "dW of x W, element " << i;
    for (int64_t j = 0; j < n; ++j)
      EXPECT_TRUE(sameBits(fusedSumsB[j], sums[j]))
          << "db of x W, element " << j;
  }
}

TEST(KernelsTest, MatmulBiasGradFloat) { checkMatmulBiasGrad<float>(); }
TEST(KernelsTest, MatmulBiasGradDouble) { checkMatmulBiasGrad<double>(); }
TEST(KernelsTest, MatmulBiasGradBF16) { checkMatmulBiasGrad<bf16>(); }
TEST(KernelsTest, MatmulBiasGradF16) { checkMatmulBiasGrad<f16>(); }

/// A batch of half-precision products shared out over threads (attention's
/// heads) gives, bit for bit, what the products give one at a time: each
/// oneDNN execution has its own scratchpad and stream. With oneDNN's shared
/// default scratchpad, products run at once corrupted each other.
TEST(KernelsTest, ConcurrentHalfProductsAreThoseComputedAlone) {
  const Shape aShape = {8, 4, 128, 64}, bShape = {8, 4, 64, 128},
              cShape = {8, 4, 128, 128};
  auto a = randomValues<bf16>(numel(aShape), 90, -2, 2);
  auto b = randomValues<bf16>(numel(bShape), 91, -2, 2);
  const int64_t items = 32, m = 128, n = 128, k = 64;
  std::vector<bf16> alone(numel(cShape));
  for (int64_t item = 0; item < items; ++item)
    detail::gemm<bf16>(m, n, k, a.data() + item * m * k, k, false,
                       b.data() + item * k * n, n, false,
                       alone.data() + item * m * n, n, nullptr);
#ifdef _OPENMP
  int threads = omp_get_max_threads();
  omp_set_num_threads(4);
#endif
  for (int round = 0; round < 5; ++round) {
    std::vector<bf16> batched(numel(cShape));
    matmul<bf16>(a.data(), dimsOf(aShape), b.data(), dimsOf(bShape),
                 batched.data(), dimsOf(cShape), MatmulParams{false, false});
    for (size_t i = 0; i < alone.size(); ++i)
      ASSERT_EQ(batched[i].bits, alone[i].bits)
          << "round " << round << ", element " << i;
  }
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
}

TEST(KernelsTest, MatmulInt64) {
  Shape aShape = {2, 3, 4}, bShape = {4, 5}, cShape = {2, 3, 5};
  auto a = randomValues<int64_t>(numel(aShape), 3, -50, 50);
  auto b = randomValues<int64_t>(numel(bShape), 4, -50, 50);
  std::vector<int64_t> c(numel(cShape));
  matmul<int64_t>(a.data(), dimsOf(aShape), b.data(), dimsOf(bShape), c.data(),
                  dimsOf(cShape), MatmulParams{});
  std::vector<double> expected =
      referenceMatmul(widen(a), aShape, widen(b), bShape, cShape);
  for (size_t i = 0; i < c.size(); ++i)
    EXPECT_EQ(c[i], static_cast<int64_t>(expected[i]));
}

template <typename T> void checkConv(const ConvCase &cc, unsigned seed) {
  Shape yShape = convOutShape(cc);
  auto x = randomValues<T>(numel(cc.x), seed);
  auto w = randomValues<T>(numel(cc.w), seed + 1);
  auto bias = randomValues<T>(cc.w[0], seed + 2);
  std::vector<T> y(numel(yShape));
  conv2d<T>(x.data(), dimsOf(cc.x), w.data(), dimsOf(cc.w),
            cc.bias ? bias.data() : nullptr, Dims{cc.w[0]}, y.data(),
            dimsOf(yShape), convParams(cc));
  double scale = static_cast<double>(cc.w[1] * cc.w[2] * cc.w[3]);
  expectNear(y, referenceConv(cc, widen(x), widen(w), widen(bias)), "conv2d",
             std::sqrt(scale));
}

template <typename T>
void checkConvGradients(const ConvCase &cc, unsigned seed) {
  Shape yShape = convOutShape(cc);
  auto x = randomValues<T>(numel(cc.x), seed);
  auto w = randomValues<T>(numel(cc.w), seed + 1);
  auto gy = randomValues<T>(numel(yShape), seed + 2);
  // Outputs start as garbage: the kernels must write every element.
  std::vector<T> gx(numel(cc.x), fromDouble<T>(7.0)),
      gw(numel(cc.w), fromDouble<T>(7.0));
  conv2dBackwardData<T>(gy.data(), dimsOf(yShape), w.data(), dimsOf(cc.w),
                        gx.data(), dimsOf(cc.x), convDataParams(cc));
  conv2dBackwardFilter<T>(x.data(), dimsOf(cc.x), gy.data(), dimsOf(yShape),
                          gw.data(), dimsOf(cc.w), convFilterParams(cc));
  std::vector<double> expectedX, expectedW;
  referenceConvGradients(cc, widen(x), widen(w), widen(gy), expectedX,
                         expectedW);
  // Sums of up to O*kH*kW (gx) and N*oH*oW (gw) terms of magnitude < 1.
  expectNear(gx, expectedX, "conv2dBackwardData",
             std::sqrt(double(cc.w[0] * cc.w[2] * cc.w[3])));
  expectNear(gw, expectedW, "conv2dBackwardFilter",
             std::sqrt(double(numel(yShape) / cc.w[0])));
}

/// Strides, padding, dilation, groups, 1x1 kernels, with and without bias.
const ConvCase kConvCases[] = {
    {{2, 3, 7, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
    {{1, 4, 9, 8}, {6, 2, 3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 1}, 2, true},
    {{2, 4, 10, 9}, {4, 1, 3, 3}, {1, 2}, {2, 2, 2, 2}, {2, 3}, 4, false},
    {{1, 6, 8, 8}, {3, 2, 2, 3}, {3, 2}, {0, 1, 1, 0}, {2, 1}, 3, true},
    {{2, 5, 4, 3}, {7, 5, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
    {{1, 2, 5, 5}, {2, 2, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false},
    {{1, 2, 3, 3}, {2, 1, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 2, true},
};

template <typename T> void checkConvCases() {
  unsigned seed = 100;
  for (const ConvCase &cc : kConvCases) {
    checkConv<T>(cc, seed += 3);
    checkConvGradients<T>(cc, seed);
  }
}

/// `nchw` (dimensions `shape`, NCHW) stored NHWC.
template <typename T>
std::vector<T> toNhwc(const std::vector<T> &nchw, const Shape &shape) {
  int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3];
  std::vector<T> nhwc(nchw.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < h * w; ++p)
        nhwc[(i * h * w + p) * c + ch] = nchw[(i * c + ch) * h * w + p];
  return nhwc;
}

Dims nhwcDims(const Shape &nchw) {
  return Dims{nchw[0], nchw[2], nchw[3], nchw[1]};
}

/// The channels-last convolutions (NHWC activations: oneDNN's for float,
/// the NCHW kernels between relayouts otherwise) compute what the NCHW ones
/// do, which the reference checks above.
template <typename T> void checkChannelsLastConvs(double tolerance) {
  // The reference cases, and channels in multiples of 16 as a CNN has.
  std::vector<ConvCase> cases(std::begin(kConvCases), std::end(kConvCases));
  cases.push_back(
      {{2, 16, 8, 8}, {32, 16, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, false});
  unsigned seed = 300;
  for (const ConvCase &cc : cases) {
    Shape yShape = convOutShape(cc);
    auto x = randomValues<T>(numel(cc.x), seed += 3);
    auto w = randomValues<T>(numel(cc.w), seed + 1);
    auto bias = randomValues<T>(cc.w[0], seed + 2);
    auto gy = randomValues<T>(numel(yShape), seed + 3);
    const T *b = cc.bias ? bias.data() : nullptr;
    std::vector<T> y(numel(yShape)), gx(numel(cc.x)), gw(numel(cc.w));
    conv2d<T>(x.data(), dimsOf(cc.x), w.data(), dimsOf(cc.w), b, Dims{cc.w[0]},
              y.data(), dimsOf(yShape), convParams(cc));
    conv2dBackwardData<T>(gy.data(), dimsOf(yShape), w.data(), dimsOf(cc.w),
                          gx.data(), dimsOf(cc.x), convDataParams(cc));
    conv2dBackwardFilter<T>(x.data(), dimsOf(cc.x), gy.data(), dimsOf(yShape),
                            gw.data(), dimsOf(cc.w), convFilterParams(cc));
    std::vector<T> xLast = toNhwc(x, cc.x), gyLast = toNhwc(gy, yShape);
    std::vector<T> yLast(y.size(), T(7.0f)), gxLast(gx.size(), T(7.0f)),
        gwLast(gw.size(), T(7.0f));
    conv2d<T>(xLast.data(), nhwcDims(cc.x), w.data(), dimsOf(cc.w), b,
              Dims{cc.w[0]}, yLast.data(), nhwcDims(yShape),
              convParams(cc, /*channelsLast=*/true));
    conv2dBackwardData<T>(gyLast.data(), nhwcDims(yShape), w.data(),
                          dimsOf(cc.w), gxLast.data(), nhwcDims(cc.x),
                          convDataParams(cc, true));
    conv2dBackwardFilter<T>(xLast.data(), nhwcDims(cc.x), gyLast.data(),
                            nhwcDims(yShape), gwLast.data(), dimsOf(cc.w),
                            convFilterParams(cc, true));
    auto near = [&](const std::vector<T> &got, const std::vector<T> &want,
                    const char *what) {
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(toDouble(got[i]), toDouble(want[i]), tolerance)
            << what << " element " << i;
    };
    near(yLast, toNhwc(y, yShape), "conv2d");
    near(gxLast, toNhwc(gx, cc.x), "conv2dBackwardData");
    near(gwLast, gw, "conv2dBackwardFilter");
  }
}

TEST(KernelsTest, ChannelsLastConvolutionsFloat) {
  checkChannelsLastConvs<float>(1e-4);
}
TEST(KernelsTest, ChannelsLastConvolutionsDouble) {
  // The NCHW kernels themselves, between exact relayouts.
  checkChannelsLastConvs<double>(0.0);
}

TEST(KernelsTest, Conv2dFloat) { checkConvCases<float>(); }
TEST(KernelsTest, Conv2dDouble) { checkConvCases<double>(); }
TEST(KernelsTest, Conv2dF16) { checkConvCases<f16>(); }

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

struct PoolCase {
  Shape x;
  int64_t kernel[2], strides[2], pads[4], dilations[2];
  bool ceil;
};

Shape poolOutShape(const PoolCase &pc) {
  Shape y = {pc.x[0], pc.x[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    int64_t span = pc.dilations[i] * (pc.kernel[i] - 1) + 1;
    int64_t numerator = pc.x[2 + i] + pc.pads[i] + pc.pads[i + 2] - span;
    int64_t out = (pc.ceil ? (numerator + pc.strides[i] - 1) / pc.strides[i]
                           : numerator / pc.strides[i]) +
                  1;
    // A window may not start in the end padding (PyTorch and ONNX).
    if (pc.ceil && (out - 1) * pc.strides[i] >= pc.x[2 + i] + pc.pads[i])
      --out;
    y[2 + i] = out;
  }
  return y;
}

/// Max or average over a window, the ONNX way: positions are enumerated on
/// the (conceptually infinite) zero-padded plane.
std::vector<double> referencePool(const PoolCase &pc,
                                  const std::vector<double> &x, bool max,
                                  bool countIncludePad) {
  Shape y = poolOutShape(pc);
  std::vector<double> out(numel(y));
  for (int64_t plane = 0; plane < y[0] * y[1]; ++plane)
    for (int64_t oh = 0; oh < y[2]; ++oh)
      for (int64_t ow = 0; ow < y[3]; ++ow) {
        double best = -INFINITY, sum = 0;
        int64_t valid = 0;
        for (int64_t kh = 0; kh < pc.kernel[0]; ++kh)
          for (int64_t kw = 0; kw < pc.kernel[1]; ++kw) {
            int64_t ih = oh * pc.strides[0] - pc.pads[0] + kh * pc.dilations[0];
            int64_t iw = ow * pc.strides[1] - pc.pads[1] + kw * pc.dilations[1];
            if (ih < 0 || ih >= pc.x[2] || iw < 0 || iw >= pc.x[3])
              continue;
            double value = x[(plane * pc.x[2] + ih) * pc.x[3] + iw];
            best = std::max(best, value);
            sum += value;
            ++valid;
          }
        double count = countIncludePad ? pc.kernel[0] * pc.kernel[1] : valid;
        out[(plane * y[2] + oh) * y[3] + ow] = max ? best : sum / count;
      }
  return out;
}

const PoolCase kPoolCases[] = {
    {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false},
    {{1, 2, 6, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
    {{1, 2, 5, 8}, {2, 3}, {2, 3}, {0, 1, 1, 2}, {1, 1}, true},
    {{1, 1, 4, 5}, {3, 3}, {2, 2}, {0, 1, 2, 0}, {1, 1}, true},
    {{2, 2, 9, 9}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false},
};

template <typename T> void checkPools() {
  unsigned seed = 300;
  for (const PoolCase &pc : kPoolCases) {
    Shape yShape = poolOutShape(pc);
    auto x = randomValues<T>(numel(pc.x), ++seed, -3, 1);
    for (bool include : {false, true}) {
      std::vector<T> y(numel(yShape));
      avgPool2d<T>(
          x.data(), dimsOf(pc.x), y.data(), dimsOf(yShape),
          AvgPool2dParams{pc.kernel, pc.strides, pc.pads, pc.ceil, include});
      expectNear(y, referencePool(pc, widen(x), false, include), "avgPool2d");
    }
  }
  // Max pooling also with dilations; all-negative inputs show that padding
  // (zero) never wins.
  const PoolCase dilated[] = {
      {{1, 2, 9, 8}, {3, 2}, {2, 2}, {2, 1, 2, 1}, {2, 3}, true},
      {{2, 1, 7, 7}, {2, 2}, {3, 3}, {1, 1, 1, 1}, {2, 2}, false},
  };
  std::vector<PoolCase> maxCases(std::begin(kPoolCases), std::end(kPoolCases));
  maxCases.insert(maxCases.end(), std::begin(dilated), std::end(dilated));
  for (const PoolCase &pc : maxCases) {
    Shape yShape = poolOutShape(pc);
    auto x = randomValues<T>(numel(pc.x), ++seed, -3, -1);
    std::vector<T> y(numel(yShape));
    maxPool2d<T>(
        x.data(), dimsOf(pc.x), y.data(), dimsOf(yShape),
        MaxPool2dParams{pc.kernel, pc.strides, pc.pads, pc.dilations, pc.ceil});
    expectNear(y, referencePool(pc, widen(x), true, false), "maxPool2d");
  }
}

TEST(KernelsTest, PoolingFloat) { checkPools<float>(); }
TEST(KernelsTest, PoolingF16) { checkPools<f16>(); }
TEST(KernelsTest, PoolingBF16) { checkPools<bf16>(); }

// Values from onnxruntime 1.20 and the ONNX reference evaluator (opset 19):
// x = 1..36 as 6x6, kernel 3, stride 2, pads 1, ceil_mode. The last window
// runs past the padded input: ONNX still divides by 9 with
// count_include_pad (PyTorch would divide by 6).
TEST(KernelsTest, AvgPoolCeilModeMatchesOnnxRuntime) {
  std::vector<float> x(36);
  for (int i = 0; i < 36; ++i)
    x[i] = static_cast<float>(i + 1);
  const int64_t kernel[] = {3, 3}, strides[] = {2, 2}, pads[] = {1, 1, 1, 1};
  std::vector<float> y(16);
  avgPool2d<float>(x.data(), {1, 1, 6, 6}, y.data(), {1, 1, 4, 4},
                   AvgPool2dParams{kernel, strides, pads, true, true});
  expectNear(y,
             {2.0, 4.0, 5.3333333, 2.0, 9.0, 15.0, 17.0, 6.0, 17.0, 27.0, 29.0,
              10.0, 7.0, 11.0, 11.6666667, 4.0},
             "count_include_pad");
  avgPool2d<float>(x.data(), {1, 1, 6, 6}, y.data(), {1, 1, 4, 4},
                   AvgPool2dParams{kernel, strides, pads, true, false});
  expectNear(y,
             {4.5, 6.0, 8.0, 9.0, 13.5, 15.0, 17.0, 18.0, 25.5, 27.0, 29.0,
              30.0, 31.5, 33.0, 35.0, 36.0},
             "exclude pad");

  // Asymmetric pads (top 0, left 1, bottom 2, right 0) on 1..20 as 4x5.
  std::vector<float> x45(20);
  for (int i = 0; i < 20; ++i)
    x45[i] = static_cast<float>(i + 1);
  const int64_t asymmetric[] = {0, 1, 2, 0};
  std::vector<float> y23(6);
  avgPool2d<float>(x45.data(), {1, 1, 4, 5}, y23.data(), {1, 1, 2, 3},
                   AvgPool2dParams{kernel, strides, asymmetric, false, true});
  expectNear(y23, {4.3333333, 8.0, 6.3333333, 6.2222222, 10.333333, 7.5555556},
             "asymmetric include");
  avgPool2d<float>(x45.data(), {1, 1, 4, 5}, y23.data(), {1, 1, 2, 3},
                   AvgPool2dParams{kernel, strides, asymmetric, false, false});
  expectNear(y23, {6.5, 8.0, 9.5, 14.0, 15.5, 17.0}, "asymmetric exclude");
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

template <typename T> void checkSoftmax() {
  Shape shape = {3, 4, 5};
  auto x = randomValues<T>(numel(shape), 7, -4, 4);
  std::vector<double> xs = widen(x);
  for (int64_t axis = 0; axis < 3; ++axis) {
    int64_t outer = 1, inner = 1, length = shape[axis];
    for (int64_t i = 0; i < axis; ++i)
      outer *= shape[i];
    for (int64_t i = axis + 1; i < 3; ++i)
      inner *= shape[i];
    std::vector<double> soft(xs.size()), logSoft(xs.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        double sum = 0;
        for (int64_t i = 0; i < length; ++i)
          sum += std::exp(xs[(o * length + i) * inner + in]);
        for (int64_t i = 0; i < length; ++i) {
          int64_t at = (o * length + i) * inner + in;
          soft[at] = std::exp(xs[at]) / sum;
          logSoft[at] = xs[at] - std::log(sum);
        }
      }
    std::vector<T> y(xs.size());
    softmax<T>(x.data(), dimsOf(shape), y.data(), dimsOf(shape),
               AxisParams{axis});
    expectNear(y, soft, "softmax");
    // Written over its input (Library.def's ZTC_IN_PLACE rows): the same
    // bits.
    std::vector<T> z = x;
    softmax<T>(z.data(), dimsOf(shape), z.data(), dimsOf(shape),
               AxisParams{axis});
    EXPECT_EQ(0, std::memcmp(z.data(), y.data(), y.size() * sizeof(T)))
        << "softmax in place, axis " << axis;
    logSoftmax<T>(x.data(), dimsOf(shape), y.data(), dimsOf(shape),
                  AxisParams{axis});
    expectNear(y, logSoft, "logSoftmax", 4.0);
    z = x;
    logSoftmax<T>(z.data(), dimsOf(shape), z.data(), dimsOf(shape),
                  AxisParams{axis});
    EXPECT_EQ(0, std::memcmp(z.data(), y.data(), y.size() * sizeof(T)))
        << "logSoftmax in place, axis " << axis;
  }
  // Large logits must not overflow.
  std::vector<T> big = {fromDouble<T>(1000.0), fromDouble<T>(999.0)}, y(2);
  softmax<T>(big.data(), {2}, y.data(), {2}, AxisParams{0});
  expectNear(y, {1 / (1 + std::exp(-1.0)), 1 / (1 + std::exp(1.0))}, "stable");
}

TEST(KernelsTest, SoftmaxFloat) { checkSoftmax<float>(); }
TEST(KernelsTest, SoftmaxDouble) { checkSoftmax<double>(); }
TEST(KernelsTest, SoftmaxF16) { checkSoftmax<f16>(); }

/// layerNorm against its formula in double; with `rms`, root-mean-square
/// normalization (no mean subtracted).
template <typename T> void checkLayerNorm(bool withBias, bool rms = false) {
  Shape shape = {2, 3, 8};
  for (int64_t axis : {1, 2}) {
    int64_t rows = axis == 1 ? 2 : 6, length = numel(shape) / rows;
    auto x = randomValues<T>(numel(shape), 20 + axis, -2, 3);
    auto scale = randomValues<T>(length, 30, 0.5, 1.5);
    auto bias = randomValues<T>(length, 31);
    std::vector<double> xs = widen(x), expected(xs.size());
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < length && !rms; ++i)
        mean += xs[r * length + i] / length;
      for (int64_t i = 0; i < length; ++i)
        var += std::pow(xs[r * length + i] - mean, 2) / length;
      for (int64_t i = 0; i < length; ++i)
        expected[r * length + i] = (xs[r * length + i] - mean) /
                                       std::sqrt(var + 1e-5) *
                                       toDouble(scale[i]) +
                                   (withBias ? toDouble(bias[i]) : 0.0);
    }
    std::vector<T> y(xs.size());
    layerNorm<T>(x.data(), dimsOf(shape), scale.data(), {},
                 withBias ? bias.data() : nullptr, {}, y.data(), dimsOf(shape),
                 LayerNormParams{axis, 1e-5, rms});
    expectNear(y, expected, rms ? "rms layerNorm" : "layerNorm", 1.0);
  }
}

TEST(KernelsTest, LayerNorm) {
  checkLayerNorm<float>(true);
  checkLayerNorm<float>(false);
  checkLayerNorm<double>(true);
  checkLayerNorm<f16>(true);
  checkLayerNorm<bf16>(false);
}

TEST(KernelsTest, RmsNorm) {
  checkLayerNorm<float>(false, /*rms=*/true);
  checkLayerNorm<float>(true, /*rms=*/true);
  checkLayerNorm<double>(false, /*rms=*/true);
  checkLayerNorm<bf16>(false, /*rms=*/true);
}

/// layerNormBackward against central differences of sum(gy * layerNorm(x))
/// computed in double: the input's gradient by its definition, not by the
/// formula the kernel implements; the scale's and bias's gradients against
/// sum(gy * xhat) and sum(gy) over the rows in double. Enough rows (200 at
/// axis 2) that the sums take several chunks. With `rms`, of the
/// root-mean-square normalization.
template <typename T> void checkLayerNormBackward(bool rms = false) {
  Shape shape = {5, 40, 12};
  for (int64_t axis : {1, 2}) {
    int64_t rows = axis == 1 ? 5 : 200, length = numel(shape) / rows;
    auto x = randomValues<T>(numel(shape), 60 + axis, -2, 3);
    auto scale = randomValues<T>(length, 62, 0.5, 1.5);
    auto gy = randomValues<T>(numel(shape), 63, -1, 1);
    std::vector<double> xs = widen(x), gys = widen(gy), expected(xs.size());
    std::vector<double> expectedScale(length, 0.0), expectedBias(length, 0.0);
    auto statistics = [&](const std::vector<double> &v, int64_t r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < length && !rms; ++i)
        mean += v[r * length + i] / length;
      for (int64_t i = 0; i < length; ++i)
        var += std::pow(v[r * length + i] - mean, 2) / length;
      return std::make_pair(mean, 1 / std::sqrt(var + 1e-5));
    };
    // sum(gy * layerNorm(x)) over row r, in double.
    auto rowLoss = [&](const std::vector<double> &v, int64_t r) {
      auto [mean, rstd] = statistics(v, r);
      double loss = 0;
      for (int64_t i = 0; i < length; ++i)
        loss += gys[r * length + i] * (v[r * length + i] - mean) * rstd *
                toDouble(scale[i]);
      return loss;
    };
    const double h = 1e-6;
    for (int64_t r = 0; r < rows; ++r) {
      auto [mean, rstd] = statistics(xs, r);
      for (int64_t i = 0; i < length; ++i) {
        std::vector<double> up = xs, down = xs;
        up[r * length + i] += h;
        down[r * length + i] -= h;
        expected[r * length + i] = (rowLoss(up, r) - rowLoss(down, r)) / (2 * h);
        expectedScale[i] +=
            gys[r * length + i] * (xs[r * length + i] - mean) * rstd;
        expectedBias[i] += gys[r * length + i];
      }
    }
    std::vector<T> gx(xs.size()), gscale(length, T(7.0f)),
        gbias(length, T(7.0f));
    const Shape normalized(shape.begin() + axis, shape.end());
    layerNormBackward<T>(x.data(), dimsOf(shape), scale.data(),
                         dimsOf(normalized), gy.data(), dimsOf(shape), nullptr,
                         Dims{}, gx.data(), dimsOf(shape), gscale.data(),
                         dimsOf(normalized), gbias.data(), dimsOf(normalized),
                         LayerNormParams{axis, 1e-5, rms});
    SCOPED_TRACE("axis " + std::to_string(axis) + (rms ? ", rms" : ""));
    // Central differences are good to about 1e-9 here: double's own
    // tolerance would be finer than the reference.
    expectNear(gx, expected, "layerNormBackward",
               std::max(4.0, 1e-7 / tolerance<T>()));
    // A sum of `rows` rounded terms: the tolerance grows with the rows.
    double terms = std::sqrt(double(rows));
    expectNear(gscale, expectedScale, "layerNormBackward scale",
               std::max(4.0, 1e-7 / tolerance<T>()) * terms);
    expectNear(gbias, expectedBias, "layerNormBackward bias",
               std::max(4.0, 1e-7 / tolerance<T>()) * terms);
  }
}

TEST(KernelsTest, LayerNormBackward) {
  checkLayerNormBackward<float>();
  checkLayerNormBackward<double>();
  checkLayerNormBackward<bf16>();
}

TEST(KernelsTest, RmsNormBackward) {
  checkLayerNormBackward<float>(/*rms=*/true);
  checkLayerNormBackward<double>(/*rms=*/true);
  checkLayerNormBackward<bf16>(/*rms=*/true);
}

TEST(KernelsTest, BatchNorm) {
  Shape shape = {2, 3, 4, 5};
  auto x = randomValues<float>(numel(shape), 40, -2, 2);
  auto scale = randomValues<float>(3, 41), bias = randomValues<float>(3, 42);
  auto mean = randomValues<float>(3, 43),
       var = randomValues<float>(3, 44, 0.1, 2);
  std::vector<double> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t c = (i / 20) % 3;
    expected[i] =
        (x[i] - double(mean[c])) / std::sqrt(double(var[c]) + 1e-3) * scale[c] +
        bias[c];
  }
  std::vector<float> y(x.size());
  batchNorm<float>(x.data(), dimsOf(shape), scale.data(), {}, bias.data(), {},
                   mean.data(), {}, var.data(), {}, y.data(), dimsOf(shape),
                   BatchNormParams{1e-3});
  expectNear(y, expected, "batchNorm", 1.0);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

std::vector<double> referenceReduce(const std::vector<double> &x,
                                    const Shape &shape, uint64_t mask,
                                    ReduceKind kind, Shape &outShape) {
  outShape.clear();
  for (size_t i = 0; i < shape.size(); ++i)
    if (!(mask >> i & 1))
      outShape.push_back(shape[i]);
  std::vector<double> out(numel(outShape),
                          kind == ReduceKind::Max ? -INFINITY : 0.0);
  std::vector<int64_t> counts(out.size(), 0);
  for (int64_t flat = 0; flat < numel(shape); ++flat) {
    Shape index = unflatten(flat, shape);
    int64_t o = 0;
    for (size_t i = 0; i < shape.size(); ++i)
      if (!(mask >> i & 1))
        o = o * shape[i] + index[i];
    if (kind == ReduceKind::Max)
      out[o] = std::isnan(x[flat]) || std::isnan(out[o])
                   ? NAN
                   : std::max(out[o], x[flat]);
    else
      out[o] += x[flat];
    ++counts[o];
  }
  if (kind == ReduceKind::Mean)
    for (size_t i = 0; i < out.size(); ++i)
      out[i] /= counts[i];
  return out;
}

template <typename T, ReduceKind Kind> void checkReduce() {
  // The second shape's innermost runs (37 x 9 elements, 9, 333) are longer
  // than a vector and not a multiple of its lanes. 0b1101 and 0b1100 are
  // BatchNorm's statistics over N, H and W of NCHW, and over H and W.
  for (Shape shape : {Shape{3, 4, 2, 5}, Shape{2, 3, 37, 9}}) {
    auto x = randomValues<T>(numel(shape), 50, -3, 3);
    for (uint64_t mask : {0b0001u, 0b1000u, 0b0101u, 0b1010u, 0b1111u,
                          0b0000u, 0b0110u, 0b1101u, 0b1100u}) {
      Shape outShape;
      std::vector<double> expected =
          referenceReduce(widen(x), shape, mask, Kind, outShape);
      std::vector<T> y(expected.size());
      reduce<T, Kind>(x.data(), dimsOf(shape), mask, y.data());
      expectNear(y, expected, "reduce", 3.0);
    }
  }
}

TEST(KernelsTest, Reduce) {
  checkReduce<float, ReduceKind::Sum>();
  checkReduce<float, ReduceKind::Mean>();
  checkReduce<float, ReduceKind::Max>();
  checkReduce<double, ReduceKind::Sum>();
  checkReduce<f16, ReduceKind::Mean>();
  checkReduce<bf16, ReduceKind::Max>();
}

TEST(KernelsTest, ReduceIntegersAndNaN) {
  std::vector<int64_t> x = {1, 2, 4, -7, 5, 6};
  std::vector<int64_t> y(2);
  reduce<int64_t, ReduceKind::Mean>(x.data(), {2, 3}, 0b10, y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{2, 1})); // 7/3 and 4/3 truncate
  reduce<int64_t, ReduceKind::Max>(x.data(), {2, 3}, 0b10, y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{4, 6}));
  std::vector<int64_t> sums(3);
  reduce<int64_t, ReduceKind::Sum>(x.data(), {2, 3}, 0b01, sums.data());
  EXPECT_EQ(sums, (std::vector<int64_t>{-6, 7, 10}));

  std::vector<float> withNan = {1.0f, NAN, 3.0f, 2.0f}, maxima(2);
  reduce<float, ReduceKind::Max>(withNan.data(), {2, 2}, 0b10, maxima.data());
  EXPECT_TRUE(std::isnan(maxima[0]));
  EXPECT_EQ(maxima[1], 3.0f);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(KernelsTest, Transpose) {
  Shape shape = {2, 3, 4, 5};
  auto x = randomValues<float>(numel(shape), 60);
  const int64_t perms[][4] = {
      {0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 1, 3}, {1, 3, 0, 2}, {2, 0, 3, 1}};
  Shape xStrides = stridesOf(shape);
  for (const auto &perm : perms) {
    Shape yShape(4);
    for (int i = 0; i < 4; ++i)
      yShape[i] = shape[perm[i]];
    std::vector<double> expected(x.size());
    for (int64_t flat = 0; flat < numel(yShape); ++flat) {
      Shape index = unflatten(flat, yShape);
      int64_t from = 0;
      for (int i = 0; i < 4; ++i)
        from += index[i] * xStrides[perm[i]];
      expected[flat] = x[from];
    }
    std::vector<float> y(x.size());
    transpose<float>(x.data(), dimsOf(shape), y.data(), {},
                     TransposeParams{perm});
    expectNear(y, expected, "transpose");
  }
  // A large one goes through the parallel path.
  Shape big = {64, 48, 40};
  auto xb = randomValues<double>(numel(big), 61);
  const int64_t perm[] = {2, 0, 1};
  std::vector<double> yb(xb.size());
  transpose<double>(xb.data(), dimsOf(big), yb.data(), {},
                    TransposeParams{perm});
  for (int64_t k = 0; k < 40; k += 7)
    for (int64_t i = 0; i < 64; i += 5)
      for (int64_t j = 0; j < 48; j += 3)
        ASSERT_EQ(yb[(k * 64 + i) * 48 + j], xb[(i * 48 + j) * 40 + k]);
  // Tiles of 32 x 32 with ragged edges (37 and 70 rows and columns), and
  // dimensions outside the tile on both sides of it: every element.
  Shape tiled = {3, 37, 5, 70};
  auto xt = randomValues<float>(numel(tiled), 62);
  const int64_t swap[] = {0, 3, 2, 1};
  std::vector<float> yt(xt.size());
  transpose<float>(xt.data(), dimsOf(tiled), yt.data(), {},
                   TransposeParams{swap});
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t d = 0; d < 70; ++d)
      for (int64_t c = 0; c < 5; ++c)
        for (int64_t b = 0; b < 37; ++b)
          ASSERT_EQ(yt[((a * 70 + d) * 5 + c) * 37 + b],
                    xt[((a * 37 + b) * 5 + c) * 70 + d]);
}

TEST(KernelsTest, Slice) {
  Shape shape = {4, 6, 5};
  auto x = randomValues<int64_t>(numel(shape), 70, -100, 100);
  // starts/steps per dim, with negative steps walking backwards.
  const int64_t starts[] = {1, 5, 0}, steps[] = {2, -2, 1};
  Shape yShape = {2, 3, 5};
  std::vector<int64_t> y(numel(yShape));
  slice<int64_t>(x.data(), dimsOf(shape), y.data(), dimsOf(yShape),
                 SliceParams{starts, Ints(), steps});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 5; ++k)
        EXPECT_EQ(y[(i * 3 + j) * 5 + k],
                  x[((1 + 2 * i) * 6 + (5 - 2 * j)) * 5 + k]);
}

TEST(KernelsTest, CopyIntoConcatenates) {
  std::vector<float> a = randomValues<float>(2 * 2 * 3, 80);
  std::vector<float> b = randomValues<float>(2 * 4 * 3, 81);
  std::vector<float> y(2 * 6 * 3, -1.0f);
  copyInto<float>(a.data(), {2, 2, 3}, y.data(), {2, 6, 3},
                  CopyIntoParams{1, 0});
  copyInto<float>(b.data(), {2, 4, 3}, y.data(), {2, 6, 3},
                  CopyIntoParams{1, 2});
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t c = 0; c < 3; ++c) {
        float expected =
            r < 2 ? a[(n * 2 + r) * 3 + c] : b[(n * 4 + r - 2) * 3 + c];
        EXPECT_EQ(y[(n * 6 + r) * 3 + c], expected);
      }
}

template <typename I> void checkGather() {
  Shape shape = {3, 5, 2};
  auto data = randomValues<float>(numel(shape), 90);
  std::vector<I> indices = {0, -1, 4, 2, -5, 3};
  // axis 1, indices [2, 3]
  std::vector<float> y(3 * 6 * 2);
  gather<float, I>(data.data(), dimsOf(shape), indices.data(), {2, 3}, y.data(),
                   {}, AxisParams{1});
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t j = 0; j < 6; ++j) {
      int64_t index = indices[j] < 0 ? indices[j] + 5 : indices[j];
      for (int64_t i = 0; i < 2; ++i)
        EXPECT_EQ(y[(o * 6 + j) * 2 + i], data[(o * 5 + index) * 2 + i]);
    }
  // axis 0 (an embedding lookup), negative index counts from the end.
  std::vector<I> rows = {-1, 0, 2};
  std::vector<float> z(3 * 10);
  gather<float, I>(data.data(), dimsOf(shape), rows.data(), {3}, z.data(), {},
                   AxisParams{0});
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t i = 0; i < 10; ++i)
      EXPECT_EQ(z[r * 10 + i], data[(rows[r] < 0 ? 2 : rows[r]) * 10 + i]);
}

TEST(KernelsTest, Gather) {
  checkGather<int64_t>();
  checkGather<int32_t>();
}

/// lastError() after clearing it, then clears it again.
std::string takeError() {
  std::string message = lastError();
  clearError();
  return message;
}

TEST(KernelsTest, GatherOutOfRangeIsRecordedNotRead) {
  clearError();
  std::vector<float> data = {1, 2, 3, 4, 5, 6}, y(6, -1.0f);
  std::vector<int64_t> index = {1, 3, -4};
  gather<float, int64_t>(data.data(), {3, 2}, index.data(), {3}, y.data(), {},
                         AxisParams{0});
  // Bad rows are 0; good rows are still copied.
  EXPECT_EQ(y, (std::vector<float>{3, 4, 0, 0, 0, 0}));
  // The first error is kept.
  EXPECT_EQ(takeError(), "gather: index 3 is outside [-3, 3)");
  EXPECT_STREQ(lastError(), "");
  // The C entry points the runtime finds in a step see the same slot.
  gather<float, int64_t>(data.data(), {3, 2}, index.data(), {3}, y.data(), {},
                         AxisParams{0});
  EXPECT_STREQ(ztc_cpu_last_error(), "gather: index 3 is outside [-3, 3)");
  ztc_cpu_clear_error();
  EXPECT_STREQ(ztc_cpu_last_error(), "");
  // Valid indices record nothing.
  std::vector<int64_t> good = {2, -3};
  gather<float, int64_t>(data.data(), {3, 2}, good.data(), {2}, y.data(), {},
                         AxisParams{0});
  EXPECT_STREQ(lastError(), "");
}

TEST(KernelsTest, GatherErrorsFromManyThreadsKeepOne) {
  clearError();
  // Above the parallel grain: every row is bad, the threads race to report.
  const int64_t rows = 1 << 16;
  std::vector<float> data(4, 1.0f), y(rows, -1.0f);
  std::vector<int32_t> index(rows);
  for (int64_t i = 0; i < rows; ++i)
    index[i] = static_cast<int32_t>(4 + i);
  gather<float, int32_t>(data.data(), {4, 1}, index.data(), {rows}, y.data(),
                         {}, AxisParams{0});
  std::string message = takeError();
  EXPECT_EQ(message.rfind("gather: index ", 0), 0u) << message;
  EXPECT_NE(message.find(" is outside [-4, 4)"), std::string::npos) << message;
  for (float value : y)
    ASSERT_EQ(value, 0.0f);
}

TEST(KernelsTest, ScatterAddOutOfRangeIsRecordedAndSkipped) {
  clearError();
  std::vector<float> data = {1, 1, 1}, updates = {10, 20, 30, 40}, y(3);
  std::vector<int64_t> index = {0, 5, -1, -4};
  scatterAdd<float, int64_t>(data.data(), {3}, index.data(), {4},
                             updates.data(), {4}, y.data(), {3}, AxisParams{0});
  EXPECT_EQ(y, (std::vector<float>{11, 1, 31}));
  EXPECT_EQ(takeError(), "scatter_add: index 5 is outside [-3, 3)");
}

TEST(KernelsTest, Trilu) {
  Shape shape = {2, 3, 4};
  auto x = randomValues<float>(numel(shape), 100, 1, 2);
  for (bool upper : {true, false})
    for (int64_t k : {-2, -1, 0, 1, 3}) {
      std::vector<float> y(x.size());
      trilu<float>(x.data(), dimsOf(shape), y.data(), dimsOf(shape),
                   TriluParams{upper, k});
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 4; ++j) {
            int64_t at = (b * 3 + i) * 4 + j;
            bool keep = upper ? j >= i + k : j <= i + k;
            EXPECT_EQ(y[at], keep ? x[at] : 0.0f) << upper << k;
          }
    }
}

/// rotateHalf: each row's halves x1, x2 become [-x2, x1], or [x2, -x1]
/// with inverse, element for element; one turn after the other gives x
/// back, in f32 and in bf16.
template <typename T> void checkRotateHalf() {
  const Shape shape = {3, 2, 6};
  const auto x = randomValues<T>(numel(shape), 101, -2, 2);
  std::vector<T> turned(x.size()), back(x.size());
  auto bits = [](T value) {
    uint32_t word = 0;
    std::memcpy(&word, &value, sizeof(T));
    return word;
  };
  for (bool inverse : {false, true}) {
    rotateHalf<T>(x.data(), dimsOf(shape), turned.data(), dimsOf(shape),
                  RotateHalfParams{inverse});
    for (int64_t row = 0; row < 6; ++row)
      for (int64_t i = 0; i < 3; ++i) {
        const int64_t lower = row * 6 + i, upper = lower + 3;
        const float x1 = float(x[lower]), x2 = float(x[upper]);
        EXPECT_EQ(float(turned[lower]), inverse ? x2 : -x2) << row << i;
        EXPECT_EQ(float(turned[upper]), inverse ? -x1 : x1) << row << i;
      }
    rotateHalf<T>(turned.data(), dimsOf(shape), back.data(), dimsOf(shape),
                  RotateHalfParams{!inverse});
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(bits(back[i]), bits(x[i])) << "element " << i;
  }
}

TEST(KernelsTest, RotateHalf) { checkRotateHalf<float>(); }
TEST(KernelsTest, RotateHalfBF16) { checkRotateHalf<bf16>(); }

/// rotary against its formula in double, with tables [T, 1, D] broadcast
/// over x [B, T, H, D] (the projections' layout); and each form the other's
/// transpose: <rotary(x), z> = <x, rotary_inverse(z)>.
template <typename T> void checkRotary(double tolerance) {
  const Shape shape = {2, 3, 4, 6}, table = {3, 1, 6};
  const auto x = randomValues<T>(numel(shape), 111, -2, 2);
  const auto z = randomValues<T>(numel(shape), 112, -2, 2);
  const auto c = randomValues<T>(numel(table), 113, -1, 1);
  const auto s = randomValues<T>(numel(table), 114, -1, 1);
  std::vector<T> forward(x.size()), inverse(x.size());
  rotary<T>(x.data(), dimsOf(shape), c.data(), dimsOf(table), s.data(),
            dimsOf(table), forward.data(), dimsOf(shape), RotaryParams{false});
  rotary<T>(z.data(), dimsOf(shape), c.data(), dimsOf(table), s.data(),
            dimsOf(table), inverse.data(), dimsOf(shape), RotaryParams{true});
  auto at = [](const std::vector<T> &v, int64_t i) {
    return double(float(v[i]));
  };
  double forwardDot = 0, inverseDot = 0, scale = 0;
  for (int64_t row = 0; row < 2 * 3 * 4; ++row) {
    const int64_t t = (row / 4) % 3;
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t lo = row * 6 + i, hi = lo + 3;
      const double x1 = at(x, lo), x2 = at(x, hi), z1 = at(z, lo),
                   z2 = at(z, hi);
      const double c1 = at(c, t * 6 + i), c2 = at(c, t * 6 + i + 3);
      const double s1 = at(s, t * 6 + i), s2 = at(s, t * 6 + i + 3);
      // [-x2, x1] * s; the inverse turn of z * s, [z2 s2, -z1 s1].
      EXPECT_NEAR(at(forward, lo), x1 * c1 - x2 * s1, tolerance) << lo;
      EXPECT_NEAR(at(forward, hi), x2 * c2 + x1 * s2, tolerance) << hi;
      EXPECT_NEAR(at(inverse, lo), z1 * c1 + z2 * s2, tolerance) << lo;
      EXPECT_NEAR(at(inverse, hi), z2 * c2 - z1 * s1, tolerance) << hi;
      const double lower = (x1 * c1 - x2 * s1) * z1,
                   upper = (x2 * c2 + x1 * s2) * z2;
      forwardDot += lower + upper;
      inverseDot += x1 * (z1 * c1 + z2 * s2) + x2 * (z2 * c2 - z1 * s1);
      scale += std::abs(lower) + std::abs(upper);
    }
  }
  EXPECT_NEAR(forwardDot, inverseDot, 1e-12 * scale);
}

TEST(KernelsTest, Rotary) { checkRotary<float>(1e-5); }
TEST(KernelsTest, RotaryBF16) { checkRotary<bf16>(2e-2); }

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

// Reference values from torch.nn.functional.nll_loss (PyTorch 1.13) with
// weight [0.5, 2.0, 1.5] and ignore_index -100 on [N=2, C=3, d=2].
TEST(KernelsTest, NllLossMatchesPyTorch) {
  std::vector<float> logProbs = {
      -1.4570214748382568f, -1.4570214748382568f, -0.7170214653015137f,
      -0.7170214653015137f, -1.2770214080810547f, -1.2770214080810547f,
      -1.0182790756225586f, -0.6405313611030579f, -1.5782790184020996f,
      -1.2005314826965332f, -0.8382790684700012f, -1.7605311870574951f};
  std::vector<int64_t> target = {0, 2, -100, 1};
  std::vector<float> weight = {0.5f, 2.0f, 1.5f};
  std::vector<float> none(4), sum(1), mean(1);
  nllLoss<float, int64_t>(logProbs.data(), {2, 3, 2}, target.data(), {},
                          weight.data(), {}, none.data(), {},
                          nllParams(0, true, -100));
  nllLoss<float, int64_t>(logProbs.data(), {2, 3, 2}, target.data(), {},
                          weight.data(), {}, sum.data(), {},
                          nllParams(1, true, -100));
  nllLoss<float, int64_t>(logProbs.data(), {2, 3, 2}, target.data(), {},
                          weight.data(), {}, mean.data(), {},
                          nllParams(2, true, -100));
  expectNear(none,
             {0.7285107374191284, 1.915532112121582, 0.0, 2.4010629653930664},
             "none");
  expectNear(sum, {5.045105934143066}, "sum");
  expectNear(mean, {1.2612764835357666}, "mean");

  std::vector<int64_t> ignored = {-100, -100, -100, -100};
  nllLoss<float, int64_t>(logProbs.data(), {2, 3, 2}, ignored.data(), {},
                          nullptr, {}, mean.data(), {},
                          nllParams(2, true, -100));
  EXPECT_TRUE(std::isnan(mean[0])); // 0 / 0, as PyTorch
}

TEST(KernelsTest, NllLossAgainstReference) {
  const int64_t n = 4, c = 5;
  auto logProbs = randomValues<float>(n * c, 110, -5, 0);
  auto weight = randomValues<float>(c, 111, 0.1, 2);
  std::vector<int32_t> target = {3, 1, 4, 1};
  for (bool useWeight : {false, true})
    for (bool hasIgnore : {false, true}) {
      double total = 0, weights = 0;
      std::vector<double> none(n);
      for (int64_t i = 0; i < n; ++i) {
        if (hasIgnore && target[i] == 1)
          continue;
        double w = useWeight ? weight[target[i]] : 1.0;
        none[i] = -w * logProbs[i * c + target[i]];
        total += none[i];
        weights += w;
      }
      std::vector<float> y(n), s(1);
      const float *w = useWeight ? weight.data() : nullptr;
      nllLoss<float, int32_t>(logProbs.data(), {n, c}, target.data(), {}, w, {},
                              y.data(), {}, nllParams(0, hasIgnore, 1));
      expectNear(y, none, "none");
      nllLoss<float, int32_t>(logProbs.data(), {n, c}, target.data(), {}, w, {},
                              s.data(), {}, nllParams(1, hasIgnore, 1));
      expectNear(s, {total}, "sum");
      nllLoss<float, int32_t>(logProbs.data(), {n, c}, target.data(), {}, w, {},
                              s.data(), {}, nllParams(2, hasIgnore, 1));
      expectNear(s, {total / weights}, "mean");
    }
}

/// nn.linear_cross_entropy and its gradient in double, written out: the
/// logits z = x w, the mean of logsumexp(z) - z[t] over the rows that
/// count, the rows whose z[t] is the largest, and from dz = g / count *
/// (softmax(z) - onehot(t)) the gradients of x and w (w stored [D, V], or
/// [V, D] when transposed). For a half T each logit and each entry of dz
/// is rounded to T, where the kernels (and the unfused product and cast
/// they replace) store them.
struct LinearCrossEntropyReference {
  double loss = 0, correct = 0;
  std::vector<double> dx, dw;

  template <typename T, typename I>
  LinearCrossEntropyReference(const std::vector<T> &x, const std::vector<T> &w,
                              const std::vector<I> &target, int64_t n,
                              int64_t d, int64_t v, bool transposed,
                              int64_t ignore, double g)
      : dx(n * d, 0.0), dw(d * v, 0.0) {
    constexpr bool kHalf = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;
    auto round = [](double value) {
      return kHalf ? toDouble(fromDouble<T>(value)) : value;
    };
    auto weight = [&](int64_t i, int64_t j) { // W as [D, V]
      return toDouble(transposed ? w[j * d + i] : w[i * v + j]);
    };
    std::vector<std::vector<double>> dz(n, std::vector<double>(v, 0.0));
    int64_t count = 0;
    for (int64_t r = 0; r < n; ++r)
      count += target[r] != ignore;
    for (int64_t r = 0; r < n; ++r) {
      if (target[r] == ignore)
        continue;
      std::vector<double> z(v, 0.0);
      for (int64_t j = 0; j < v; ++j) {
        for (int64_t i = 0; i < d; ++i)
          z[j] += toDouble(x[r * d + i]) * weight(i, j);
        z[j] = round(z[j]);
      }
      double largest = *std::max_element(z.begin(), z.end()), sum = 0;
      for (double zj : z)
        sum += std::exp(zj - largest);
      double lse = largest + std::log(sum);
      loss += (lse - z[target[r]]) / count;
      correct += z[target[r]] == largest;
      for (int64_t j = 0; j < v; ++j)
        dz[r][j] = round(g / count * (std::exp(z[j] - lse) - (j == target[r])));
    }
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < v; ++j)
        for (int64_t i = 0; i < d; ++i) {
          dx[r * d + i] += dz[r][j] * weight(i, j);
          dw[transposed ? j * d + i : i * v + j] +=
              toDouble(x[r * d + i]) * dz[r][j];
        }
  }
};

/// The fraction of `actual` equal to `expected` rounded to T, after
/// asserting every element within two of T's units in the last place (a
/// double rounding, or f32 sums landing across a rounding boundary).
template <typename T>
double fractionRoundedAlike(const std::vector<T> &actual,
                            const std::vector<double> &expected,
                            const std::string &what) {
  const double ulp = std::is_same_v<T, bf16> ? 0x1p-7 : 0x1p-10;
  int64_t alike = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    double a = toDouble(actual[i]), e = expected[i];
    EXPECT_NEAR(a, e, 2 * ulp * std::abs(e) + 1e-6) << what << " at " << i;
    alike += a == toDouble(fromDouble<T>(e));
  }
  return double(alike) / double(expected.size());
}

/// 300 rows of 8 features, 50 classes: chunks of 128, 128 and 44 rows, for
/// both weight layouts. For a half T the loss is f32 over the logits
/// rounded to T and the gradients are rounded once: dw sums the three
/// chunks in f32 before its one rounding, so nearly every element is dw's
/// exact value rounded to T, which rounding after each chunk would miss
/// for a large share.
template <typename T> void checkLinearCrossEntropy() {
  using Acc = detail::ComputeT<T>;
  constexpr bool kHalf = !std::is_same_v<T, Acc>;
  const int64_t n = 300, d = 8, v = 50, ignore = -100;
  ASSERT_EQ(LinearCrossEntropyShape(Dims{n, d}, Dims{d, v},
                                    LinearCrossEntropyParams{})
                .chunkRows(detail::kLinearCrossEntropyFloorRows),
            128);
  auto x = randomValues<T>(n * d, 120, -2, 2);
  auto w = randomValues<T>(d * v, 121, -1, 1);
  std::vector<int64_t> target(n);
  for (int64_t r = 0; r < n; ++r)
    target[r] = r % 7 == 3 ? ignore : (r * 13) % v;
  for (bool transposed : {false, true}) {
    LinearCrossEntropyParams params{transposed, {true, ignore}};
    Dims wDims = transposed ? Dims{v, d} : Dims{d, v};
    LinearCrossEntropyReference expected(x, w, target, n, d, v, transposed,
                                         ignore, 0.75);
    std::vector<Acc> loss(1), correct(1), gradOut = {Acc(0.75)};
    linearCrossEntropy<T, int64_t>(x.data(), {n, d}, w.data(), wDims,
                                   target.data(), {n}, loss.data(), {},
                                   correct.data(), {}, params);
    std::string what = transposed ? "[V, D] weight" : "[D, V] weight";
    expectNear(loss, {expected.loss}, ("loss, " + what).c_str());
    // Rounded logits may tie where the reference's do not.
    EXPECT_NEAR(double(correct[0]), expected.correct, kHalf ? 1 : 0) << what;
    std::vector<T> dx(n * d), dw(d * v, T(7.0f)); // overwritten, not added to
    std::vector<Acc> backwardLoss(1);
    linearCrossEntropyBackward<T, int64_t>(
        x.data(), {n, d}, w.data(), wDims, target.data(), {n}, gradOut.data(),
        {}, dx.data(), {n, d}, dw.data(), wDims, backwardLoss.data(), {},
        params);
    // The gradient's loss is the forward's, to the bit.
    EXPECT_EQ(0, std::memcmp(backwardLoss.data(), loss.data(), sizeof(Acc)))
        << what;
    // Without w's gradient (a frozen w): dx and the loss, to the bit.
    std::vector<T> dxAlone(n * d);
    std::vector<Acc> aloneLoss(1);
    linearCrossEntropyBackwardX<T, int64_t>(
        x.data(), {n, d}, w.data(), wDims, target.data(), {n}, gradOut.data(),
        {}, dxAlone.data(), {n, d}, aloneLoss.data(), {}, params);
    EXPECT_EQ(0, std::memcmp(dxAlone.data(), dx.data(), dx.size() * sizeof(T)))
        << what;
    EXPECT_EQ(0, std::memcmp(aloneLoss.data(), loss.data(), sizeof(Acc)))
        << what;
    if constexpr (kHalf) {
      EXPECT_GT(fractionRoundedAlike(dx, expected.dx, "dx, " + what), 0.95)
          << what;
      EXPECT_GT(fractionRoundedAlike(dw, expected.dw, "dw, " + what), 0.95)
          << what;
    } else {
      // Sums of V (dx) and N (dw) rounded terms.
      expectNear(dx, expected.dx, ("dx, " + what).c_str(), 0.05);
      expectNear(dw, expected.dw, ("dw, " + what).c_str(), 0.05);
    }
  }
}

TEST(KernelsTest, LinearCrossEntropyFloat) { checkLinearCrossEntropy<float>(); }
TEST(KernelsTest, LinearCrossEntropyDouble) {
  checkLinearCrossEntropy<double>();
}
TEST(KernelsTest, LinearCrossEntropyBF16) { checkLinearCrossEntropy<bf16>(); }
TEST(KernelsTest, LinearCrossEntropyF16) { checkLinearCrossEntropy<f16>(); }

/// A row whose class scores highest counts as correct (a tie too); no row
/// counted gives NaN and zero gradients; a class out of range is recorded
/// and counts for nothing.
TEST(KernelsTest, LinearCrossEntropyEdges) {
  clearError();
  // Two rows, two features, three classes, w [D, V] = I with a zero column:
  // z = x's row, then 0.
  std::vector<float> x = {3, 1, 2, 2}, w = {1, 0, 0, 0, 1, 0};
  std::vector<int64_t> target = {0, 1};
  std::vector<float> loss(1), correct(1), g = {1};
  LinearCrossEntropyParams params{false, {true, -1}};
  linearCrossEntropy<float, int64_t>(x.data(), {2, 2}, w.data(), {2, 3},
                                     target.data(), {2}, loss.data(), {},
                                     correct.data(), {}, params);
  EXPECT_EQ(correct[0], 2.0f); // 3 > 1, and a tie 2 = 2
  EXPECT_EQ(takeError(), "");
  target = {-1, -1};
  std::vector<float> dx(4, 5.0f), dw(6, 5.0f);
  linearCrossEntropy<float, int64_t>(x.data(), {2, 2}, w.data(), {2, 3},
                                     target.data(), {2}, loss.data(), {},
                                     correct.data(), {}, params);
  EXPECT_TRUE(std::isnan(loss[0])); // 0 / 0, as PyTorch
  EXPECT_EQ(correct[0], 0.0f);
  std::vector<float> backwardLoss(1);
  linearCrossEntropyBackward<float, int64_t>(
      x.data(), {2, 2}, w.data(), {2, 3}, target.data(), {2}, g.data(), {},
      dx.data(), {2, 2}, dw.data(), {2, 3}, backwardLoss.data(), {}, params);
  EXPECT_EQ(dx, std::vector<float>(4, 0.0f));
  EXPECT_EQ(dw, std::vector<float>(6, 0.0f));
  EXPECT_TRUE(std::isnan(backwardLoss[0]));
  target = {0, 3};
  linearCrossEntropy<float, int64_t>(x.data(), {2, 2}, w.data(), {2, 3},
                                     target.data(), {2}, loss.data(), {},
                                     correct.data(), {}, params);
  EXPECT_EQ(takeError(), "nll_loss: target 3 is outside [0, 3) "
                         "(ignore_index -1)");
  // Row 0 alone: logsumexp(3, 1, 0) - 3.
  EXPECT_NEAR(loss[0], std::log(1 + std::exp(-2.0) + std::exp(-3.0)), 1e-6);
  // The gradient checks too: an entry with it runs no forward.
  linearCrossEntropyBackward<float, int64_t>(
      x.data(), {2, 2}, w.data(), {2, 3}, target.data(), {2}, g.data(), {},
      dx.data(), {2, 2}, dw.data(), {2, 3}, backwardLoss.data(), {}, params);
  EXPECT_EQ(takeError(), "nll_loss: target 3 is outside [0, 3) "
                         "(ignore_index -1)");
  EXPECT_EQ(backwardLoss[0], loss[0]);
}

TEST(KernelsTest, NllLossBadTargetIsRecorded) {
  clearError();
  std::vector<float> logProbs = {-1, -2, -3, -4, -5, -6}, y(2), s(1);
  std::vector<int64_t> target = {0, 3};
  // Without ignore_index.
  nllLoss<float, int64_t>(logProbs.data(), {2, 3}, target.data(), {}, nullptr,
                          {}, s.data(), {}, nllParams(1, false, 0));
  EXPECT_EQ(takeError(), "nll_loss: target 3 is outside [0, 3)");
  // The bad element counts for nothing; the others are unchanged.
  EXPECT_EQ(s[0], 1.0f);
  // With ignore_index, which the message names (a target equal to it is
  // fine, whatever its value).
  target = {12, -100};
  nllLoss<float, int64_t>(logProbs.data(), {2, 3}, target.data(), {}, nullptr,
                          {}, y.data(), {}, nllParams(0, true, -100));
  EXPECT_EQ(y, (std::vector<float>{0, 0}));
  EXPECT_EQ(takeError(),
            "nll_loss: target 12 is outside [0, 3) (ignore_index -100)");
  target = {-1, -100};
  nllLoss<float, int64_t>(logProbs.data(), {2, 3}, target.data(), {}, nullptr,
                          {}, s.data(), {}, nllParams(2, true, -100));
  EXPECT_EQ(takeError(),
            "nll_loss: target -1 is outside [0, 3) (ignore_index -100)");
  // A weight is never read at a bad target.
  std::vector<float> weight = {2, 2, 2};
  target = {1, 1000000};
  nllLoss<float, int64_t>(logProbs.data(), {2, 3}, target.data(), {},
                          weight.data(), {}, s.data(), {},
                          nllParams(2, false, 0));
  EXPECT_EQ(s[0], 2.0f); // -2 * -2 / 2
  EXPECT_EQ(takeError(), "nll_loss: target 1000000 is outside [0, 3)");
}

// Sizes above the parallel grain, so the OpenMP paths run (the small cases
// above stay serial).
TEST(KernelsTest, LargeShapesTakeParallelPaths) {
  checkMatmul<f16>({2, 48, 40}, {40, 50}, {2, 48, 50}, 500);
  checkMatmul<float>({3, 64, 32}, {3, 32, 48}, {3, 64, 48}, 501);
  checkConv<float>(
      {{1, 8, 32, 32}, {16, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      502);
  checkConv<bf16>(
      {{1, 4, 40, 40}, {4, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, false},
      503);
  PoolCase pc = {{2, 8, 48, 48}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true};
  Shape yShape = poolOutShape(pc);
  auto x = randomValues<float>(numel(pc.x), 504);
  std::vector<float> y(numel(yShape));
  avgPool2d<float>(
      x.data(), dimsOf(pc.x), y.data(), dimsOf(yShape),
      AvgPool2dParams{pc.kernel, pc.strides, pc.pads, pc.ceil, true});
  expectNear(y, referencePool(pc, widen(x), false, true), "avgPool2d");
  maxPool2d<float>(
      x.data(), dimsOf(pc.x), y.data(), dimsOf(yShape),
      MaxPool2dParams{pc.kernel, pc.strides, pc.pads, pc.dilations, pc.ceil});
  expectNear(y, referencePool(pc, widen(x), true, false), "maxPool2d");
  Shape shape = {96, 512};
  auto r = randomValues<float>(numel(shape), 505);
  for (uint64_t mask : {1u, 2u}) {
    Shape outShape;
    std::vector<double> expected =
        referenceReduce(widen(r), shape, mask, ReduceKind::Sum, outShape);
    std::vector<float> sums(expected.size());
    reduce<float, ReduceKind::Sum>(r.data(), dimsOf(shape), mask, sums.data());
    expectNear(sums, expected, "reduce", 20.0);
  }
}

/// randomUniform<T> of `count` elements under `key` and `stream`.
template <typename T>
std::vector<T> randomUniformValues(int64_t key, uint64_t stream,
                                   int64_t count) {
  std::vector<T> values(count, T(-1));
  randomUniform<T>(&key, {}, values.data(), dimsOf({count}),
                   RandomUniformParams{static_cast<int64_t>(stream)});
  return values;
}

/// How many elements two draws share (same position, same value).
int64_t agreements(const std::vector<float> &a, const std::vector<float> &b) {
  int64_t same = 0;
  for (size_t i = 0; i < a.size(); ++i)
    same += a[i] == b[i];
  return same;
}

// Random numbers: 2^16 draws (above the parallel grain) are multiples of
// 2^-24 in [0, 1) whose mean, whose fraction below 0.3 (a dropout ratio)
// and whose 16-bucket histogram fit the uniform distribution. Every bound is
// five standard deviations (or a chi-square tail far below 1e-6), so a
// correct generator fails none of them in practice, while a constant, a
// skewed or a short-period one fails.
TEST(KernelsTest, RandomUniformIsUniform) {
  constexpr int64_t kCount = 1 << 16;
  std::vector<float> u = randomUniformValues<float>(12345, 7, kCount);
  double sum = 0;
  int64_t below = 0;
  std::vector<int64_t> buckets(16, 0);
  for (float value : u) {
    ASSERT_GE(value, 0.0f);
    ASSERT_LT(value, 1.0f);
    float scaled = value * 16777216.0f;
    ASSERT_EQ(scaled, std::floor(scaled)) << value << " is not k * 2^-24";
    sum += value;
    below += value < 0.3f;
    ++buckets[static_cast<size_t>(value * 16)];
  }
  double n = kCount;
  EXPECT_NEAR(sum / n, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(below / n, 0.3, 5 * std::sqrt(0.3 * 0.7 / n));
  double chiSquare = 0, expected = n / 16;
  for (int64_t count : buckets)
    chiSquare += (count - expected) * (count - expected) / expected;
  // 15 degrees of freedom: P(chi-square > 60) is below 1e-6.
  EXPECT_LT(chiSquare, 60.0);
  // No value repeats its neighbour (a period-1 generator would).
  int64_t repeats = 0;
  for (int64_t i = 1; i < kCount; ++i)
    repeats += u[i] == u[i - 1];
  EXPECT_LT(repeats, 5);
}

// The values are a pure function of (key, stream, index): the same call
// repeats them, a prefix of a longer draw is the shorter draw, and double
// holds the float values exactly. Another key or another stream gives
// unrelated values (equal only by chance, about 2^-24 per element).
TEST(KernelsTest, RandomUniformDependsOnKeyStreamAndIndexOnly) {
  constexpr int64_t kCount = 1 << 16;
  std::vector<float> u = randomUniformValues<float>(-42, 3, kCount);
  EXPECT_EQ(randomUniformValues<float>(-42, 3, kCount), u);
  std::vector<float> prefix = randomUniformValues<float>(-42, 3, 100);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), u.begin()));
  std::vector<double> wide = randomUniformValues<double>(-42, 3, kCount);
  for (int64_t i = 0; i < kCount; ++i)
    ASSERT_EQ(wide[i], static_cast<double>(u[i])) << "element " << i;
  EXPECT_LT(agreements(randomUniformValues<float>(-41, 3, kCount), u), 10);
  EXPECT_LT(agreements(randomUniformValues<float>(-42, 4, kCount), u), 10);
  EXPECT_LT(agreements(randomUniformValues<float>(3, -42, kCount), u), 10);
}

// The first values of key 0, stream 0, pinned: they are part of what a
// checkpoint means (a resumed run must draw the masks the first run would
// have), so a change to Random.h must be deliberate.
TEST(KernelsTest, RandomUniformValuesArePinned) {
  std::vector<float> u = randomUniformValues<float>(0, 0, 4);
  const float k = 0x1p-24f;
  std::vector<float> pinned = {5671579 * k, 4515256 * k, 4556131 * k,
                               8055908 * k};
  EXPECT_EQ(u, pinned);
}

TEST(KernelsTest, DimsFromBracedList) {
  Dims scalar = {};
  EXPECT_EQ(scalar.rank, 0);
  EXPECT_EQ(scalar.numElements(), 1);
  Dims dims = {2, 3, 4};
  EXPECT_EQ(dims.rank, 3);
  EXPECT_EQ(dims.numElements(), 24);
  EXPECT_EQ(dims[1], 3);
}

} // namespace

namespace {

/// A weight of [rows, cols] in NF4, and its float32 value dequantized whole
/// (Nf4.h, the layout bitsandbytes' quantize_4bit gives: Nf4Test).
struct Nf4Weight {
  std::vector<uint8_t> packed, codes;
  std::vector<float> nested, dense;
  float offset = 0;

  Nf4Weight(int64_t rows, int64_t cols, unsigned seed) {
    namespace nf4 = ztc::nf4;
    namespace b8 = ztc::blockwise8bit;
    const int64_t n = rows * cols, blocks = nf4::blocksOf(n);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    std::vector<float> w(n), scales(blocks);
    for (float &value : w)
      value = normal(rng);
    packed.resize((n + 1) / 2);
    codes.resize(blocks);
    nested.resize((blocks + nf4::kScaleBlock - 1) / nf4::kScaleBlock);
    nf4::quantize(w.data(), n, packed.data(), scales.data());
    offset = nf4::meanOf(scales.data(), blocks);
    static auto table = [] {
      auto built = std::make_unique<b8::CodeTable>();
      b8::buildTable(b8::kSignedCodes, *built);
      return built;
    }();
    nf4::quantizeScales(scales.data(), blocks, offset, *table, codes.data(),
                        nested.data());
    dense.resize(n);
    nf4::dequantize(packed.data(), codes.data(), nested.data(), offset, n,
                    *table, dense.data());
  }
};

/// matmulNf4<T> against the product with the whole dequantized weight (in
/// double, each operand rounded to T first), for both layouts and a
/// contraction long enough to need several tiles of columns.
template <typename T> void checkMatmulNf4(double tolerance) {
  for (bool transB : {false, true}) {
    const int64_t rows = transB ? 300 : 1100, cols = transB ? 1100 : 300;
    const int64_t k = transB ? cols : rows, n = transB ? rows : cols, m = 6;
    Nf4Weight w(rows, cols, transB ? 7 : 8);
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    std::vector<T> x(m * k), y(m * n);
    for (T &value : x)
      value = T(normal(rng));
    const int64_t shape[] = {rows, cols};
    matmulNf4<T>(x.data(), {2, 3, k},
                 reinterpret_cast<const int8_t *>(w.packed.data()), {},
                 reinterpret_cast<const int8_t *>(w.codes.data()), {},
                 w.nested.data(), {}, &w.offset, {}, y.data(), {2, 3, n},
                 MatmulNf4Params{shape, transB});
    double worst = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, scale = 0;
        for (int64_t p = 0; p < k; ++p) {
          float weight = w.dense[transB ? j * cols + p : p * cols + j];
          double term = double(float(x[i * k + p])) * double(float(T(weight)));
          sum += term;
          scale += std::fabs(term);
        }
        worst = std::max(worst, std::fabs(double(float(y[i * n + j])) - sum) /
                                    std::max(scale, 1e-30));
      }
    EXPECT_LE(worst, tolerance) << (transB ? "x W^T" : "x W");
  }
}

TEST(KernelsTest, MatmulNf4IsTheProductWithTheDequantizedWeight) {
  checkMatmulNf4<float>(1e-6);
  // bf16: the weight rounded to bf16 as autocast would round it, the sum in
  // float, the result rounded once (2^-8 of the terms' magnitude).
  checkMatmulNf4<bf16>(4e-3);
}

//===----------------------------------------------------------------------===//
// Fused attention: the textbook computation in double (the scores
// q kᵀ * scale + mask or the causal -inf, their softmax P, P v; dv = Pᵀ g,
// dS = P * (g vᵀ - rowsum(P * g vᵀ)), dq = dS k * scale, dk = dSᵀ q *
// scale). Sizes are odd and larger than the kernels' blocks (16 queries,
// 64 keys), with key counts other than the query counts and masks that
// repeat along some dimensions.
//===----------------------------------------------------------------------===//

/// One attention problem: batch entries `batch`, queries, keys, head sizes;
/// `maskShape` empty for no mask, else [batch..., Tq or 1, Tk or 1] with
/// the batch given as [b0, b1]. With `kvHeads` (batch [B, H]), k and v have
/// that many heads, each read by H / kvHeads query heads (grouped-query
/// attention). With `softcap`, the scaled scores are capped (c tanh(s / c))
/// before the mask.
struct Problem {
  Shape batch;
  int64_t tq, tk, d, dv;
  bool causal;
  Shape maskShape;
  int64_t kvHeads = 0;
  double softcap = 0;

  /// k's and v's batch dimensions.
  Shape kvBatch() const {
    Shape shape = batch;
    if (kvHeads > 0)
      shape[1] = kvHeads;
    return shape;
  }
  /// The key/value entry that query entry `b` reads.
  int64_t kvEntry(int64_t b) const {
    if (kvHeads == 0)
      return b;
    const int64_t heads = batch[1], group = heads / kvHeads;
    return b / heads * kvHeads + b % heads / group;
  }
};

struct Reference {
  std::vector<double> out, dq, dk, dv;
};

/// The textbook attention and its gradients, in double.
template <typename T>
Reference reference(const Problem &p, const std::vector<T> &q,
                    const std::vector<T> &k, const std::vector<T> &v,
                    const std::vector<T> &mask, const std::vector<T> &g,
                    double scale) {
  int64_t batch = numel(p.batch), kvBatch = numel(p.kvBatch());
  Reference r;
  r.out.assign(batch * p.tq * p.dv, 0);
  r.dq.assign(batch * p.tq * p.d, 0);
  r.dk.assign(kvBatch * p.tk * p.d, 0);
  r.dv.assign(kvBatch * p.tk * p.dv, 0);
  Shape maskStrides;
  if (!p.maskShape.empty()) {
    maskStrides.assign(p.maskShape.size(), 0);
    int64_t stride = 1;
    for (int64_t i = static_cast<int64_t>(p.maskShape.size()) - 1; i >= 0;
         --i) {
      maskStrides[i] = p.maskShape[i] == 1 ? 0 : stride;
      stride *= p.maskShape[i];
    }
  }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t kb = p.kvEntry(b);
    int64_t maskBase = 0;
    if (!mask.empty()) {
      int64_t rest = b;
      for (int64_t i = static_cast<int64_t>(p.batch.size()) - 1; i >= 0; --i) {
        maskBase += (rest % p.batch[i]) * maskStrides[i];
        rest /= p.batch[i];
      }
    }
    std::vector<double> prob(p.tq * p.tk), dprob(p.tq * p.tk),
        slope(p.tq * p.tk, 1.0);
    for (int64_t i = 0; i < p.tq; ++i) {
      double maximum = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < p.tk; ++j) {
        double s = 0;
        for (int64_t c = 0; c < p.d; ++c)
          s += toDouble(q[(b * p.tq + i) * p.d + c]) *
               toDouble(k[(kb * p.tk + j) * p.d + c]);
        s *= scale;
        if (p.softcap > 0) {
          const double t = std::tanh(s / p.softcap);
          s = p.softcap * t;
          slope[i * p.tk + j] = 1 - t * t;
        }
        if (!mask.empty())
          s +=
              toDouble(mask[maskBase + i * maskStrides[maskStrides.size() - 2] +
                            j * maskStrides.back()]);
        if (p.causal && j > i)
          s = -std::numeric_limits<double>::infinity();
        prob[i * p.tk + j] = s;
        maximum = std::max(maximum, s);
      }
      double sum = 0;
      for (int64_t j = 0; j < p.tk; ++j)
        sum += prob[i * p.tk + j] = std::exp(prob[i * p.tk + j] - maximum);
      for (int64_t j = 0; j < p.tk; ++j)
        prob[i * p.tk + j] /= sum;
    }
    for (int64_t i = 0; i < p.tq; ++i) {
      double rowDot = 0;
      for (int64_t j = 0; j < p.tk; ++j) {
        double dp = 0;
        for (int64_t c = 0; c < p.dv; ++c) {
          double vjc = toDouble(v[(kb * p.tk + j) * p.dv + c]);
          double gic = toDouble(g[(b * p.tq + i) * p.dv + c]);
          r.out[(b * p.tq + i) * p.dv + c] += prob[i * p.tk + j] * vjc;
          r.dv[(kb * p.tk + j) * p.dv + c] += prob[i * p.tk + j] * gic;
          dp += gic * vjc;
        }
        dprob[i * p.tk + j] = dp;
        rowDot += dp * prob[i * p.tk + j];
      }
      for (int64_t j = 0; j < p.tk; ++j) {
        double ds = prob[i * p.tk + j] * (dprob[i * p.tk + j] - rowDot) *
                    scale * slope[i * p.tk + j];
        for (int64_t c = 0; c < p.d; ++c) {
          r.dq[(b * p.tq + i) * p.d + c] +=
              ds * toDouble(k[(kb * p.tk + j) * p.d + c]);
          r.dk[(kb * p.tk + j) * p.d + c] +=
              ds * toDouble(q[(b * p.tq + i) * p.d + c]);
        }
      }
    }
  }
  return r;
}

/// Runs the forward and the backward of `p` and compares them with the
/// reference.
template <typename T> void checkAttention(const Problem &p) {
  Shape qShape = p.batch, kShape = p.kvBatch(), vShape = p.kvBatch(),
        oShape = p.batch;
  qShape.insert(qShape.end(), {p.tq, p.d});
  kShape.insert(kShape.end(), {p.tk, p.d});
  vShape.insert(vShape.end(), {p.tk, p.dv});
  oShape.insert(oShape.end(), {p.tq, p.dv});
  auto q = randomValues<T>(numel(qShape), 1, -1.5, 1.5);
  auto k = randomValues<T>(numel(kShape), 2, -1.5, 1.5);
  auto v = randomValues<T>(numel(vShape), 3);
  auto g = randomValues<T>(numel(oShape), 4);
  std::vector<T> mask;
  if (!p.maskShape.empty())
    mask = randomValues<T>(numel(p.maskShape), 5);
  double scale = 1.0 / std::sqrt(static_cast<double>(p.d));
  Reference want = reference(p, q, k, v, mask, g, scale);

  AttentionParams params{scale, p.causal};
  params.softcap = p.softcap;
  const T *maskData = mask.empty() ? nullptr : mask.data();
  Dims maskDims = mask.empty() ? Dims{} : dimsOf(p.maskShape);
  std::vector<T> out(numel(oShape));
  attention<T>(q.data(), dimsOf(qShape), k.data(), dimsOf(kShape), v.data(),
               dimsOf(vShape), maskData, maskDims, out.data(), dimsOf(oShape),
               params);
  expectNear(out, want.out, "attention out");

  std::vector<T> dq(q.size()), dk(k.size()), dv(v.size());
  attentionBackward<T>(q.data(), dimsOf(qShape), k.data(), dimsOf(kShape),
                       v.data(), dimsOf(vShape), out.data(), dimsOf(oShape),
                       g.data(), dimsOf(oShape), maskData, maskDims, dq.data(),
                       dimsOf(qShape), dk.data(), dimsOf(kShape), dv.data(),
                       dimsOf(vShape), params);
  expectNear(dq, want.dq, "attention dq");
  expectNear(dk, want.dk, "attention dk");
  expectNear(dv, want.dv, "attention dv");
}

// More queries and keys than a block holds (16 and 64), neither a multiple.
const Problem kCausal{{2, 3}, 37, 37, 7, 5, /*causal=*/true, {}};
const Problem kMasked{{2, 3}, 19, 83, 9, 11, false, {2, 1, 19, 83}};
const Problem kMaskedRows{{3}, 21, 70, 4, 6, false, {1, 1, 70}};
const Problem kCausalAndMasked{{1, 2}, 66, 66, 8, 8, true, {1, 2, 66, 66}};
const Problem kPlain{{5}, 1, 3, 1, 2, false, {}};
// Grouped-query heads: 6 query heads over 2 key/value heads (and over 1),
// with a mask per query head, and causal.
const Problem kGrouped{{2, 6}, 19, 83, 9, 11, false, {2, 6, 19, 83}, 2};
const Problem kGroupedCausal{{1, 4}, 37, 37, 8, 5, true, {}, 1};
// Capped scores (Gemma 2's softcap), small enough that tanh bends them,
// with a mask after the cap, and causal.
const Problem kCapped{{2, 3}, 19, 83, 9, 11, false, {2, 1, 19, 83}, 0, 0.7};
const Problem kCappedCausal{{1, 4}, 37, 37, 8, 5, true, {}, 2, 0.7};

TEST(KernelsTest, AttentionCausalDouble) { checkAttention<double>(kCausal); }
TEST(KernelsTest, AttentionCausalFloat) { checkAttention<float>(kCausal); }
TEST(KernelsTest, AttentionMaskedFloat) { checkAttention<float>(kMasked); }
TEST(KernelsTest, AttentionMaskedDouble) { checkAttention<double>(kMasked); }
TEST(KernelsTest, AttentionRepeatedMaskFloat) {
  checkAttention<float>(kMaskedRows);
}
TEST(KernelsTest, AttentionCausalAndMaskedFloat) {
  checkAttention<float>(kCausalAndMasked);
}
TEST(KernelsTest, AttentionSmallFloat) { checkAttention<float>(kPlain); }
TEST(KernelsTest, AttentionCausalBF16) { checkAttention<bf16>(kCausal); }
TEST(KernelsTest, AttentionGroupedFloat) { checkAttention<float>(kGrouped); }
TEST(KernelsTest, AttentionGroupedDouble) {
  checkAttention<double>(kGrouped);
  checkAttention<double>(kGroupedCausal);
}
TEST(KernelsTest, AttentionGroupedBF16) {
  checkAttention<bf16>(kGroupedCausal);
}
TEST(KernelsTest, AttentionCappedFloat) {
  checkAttention<float>(kCapped);
  checkAttention<float>(kCappedCausal);
}
TEST(KernelsTest, AttentionCappedDouble) {
  checkAttention<double>(kCapped);
  checkAttention<double>(kCappedCausal);
}
TEST(KernelsTest, AttentionCappedBF16) { checkAttention<bf16>(kCappedCausal); }

/// The kernels' arithmetic written as plain scalar loops, one query and one
/// key at a time (what cpu/Attention.h computed before its loops ran on
/// vectors): each score a dot product in the head's order, the forward's
/// online softmax over blocks of 64 keys, the backward's log-sum-exp from
/// the exponentials' sum in key order, every gradient's additions in key
/// order, then query order. q, k, v [batch, T, D], no mask broadcast.
struct ScalarAttention {
  std::vector<float> out, dq, dk, dv;
};
ScalarAttention
scalarAttention(int64_t batch, int64_t tq, int64_t tk, int64_t d, int64_t dv,
                bool causal, float scale, const std::vector<float> &q,
                const std::vector<float> &k, const std::vector<float> &v,
                const std::vector<float> &mask, const std::vector<float> &g) {
  const float lowest = -std::numeric_limits<float>::infinity();
  ScalarAttention r{
      std::vector<float>(batch * tq * dv), std::vector<float>(batch * tq * d),
      std::vector<float>(batch * tk * d), std::vector<float>(batch * tk * dv)};
  auto score = [&](int64_t b, int64_t i, int64_t j) {
    float dot = 0;
    for (int64_t c = 0; c < d; ++c)
      dot += q[(b * tq + i) * d + c] * k[(b * tk + j) * d + c];
    float s = dot * scale;
    if (!mask.empty())
      s += mask[(b * tq + i) * tk + j];
    return s;
  };
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> dkAcc(tk * d, 0.f), dvAcc(tk * dv, 0.f);
    for (int64_t i = 0; i < tq; ++i) {
      const int64_t end = causal ? std::min(tk, i + 1) : tk;
      // Forward.
      float m = lowest, sum = 0;
      std::vector<float> row(dv, 0.f);
      for (int64_t j0 = 0; j0 < end; j0 += 64) {
        const int64_t j1 = std::min(end, j0 + 64);
        float scores[64], blockMax = lowest;
        for (int64_t j = j0; j < j1; ++j)
          blockMax = std::max(blockMax, scores[j - j0] = score(b, i, j));
        const float newMax = std::max(m, blockMax);
        if (newMax == lowest)
          continue;
        const float rescale = cpu::detail::exp(m - newMax);
        m = newMax;
        float blockSum = 0;
        for (int64_t c = 0; c < dv; ++c)
          row[c] *= rescale;
        for (int64_t j = j0; j < j1; ++j) {
          const float p = cpu::detail::exp(scores[j - j0] - newMax);
          blockSum += p;
          for (int64_t c = 0; c < dv; ++c)
            row[c] += p * v[(b * tk + j) * dv + c];
        }
        sum = sum * rescale + blockSum;
      }
      for (int64_t c = 0; c < dv; ++c)
        r.out[(b * tq + i) * dv + c] = row[c] / sum;
      // Backward.
      float maximum = lowest;
      for (int64_t j = 0; j < end; ++j)
        maximum = std::max(maximum, score(b, i, j));
      float total = 0;
      for (int64_t j = 0; j < end; ++j)
        total += cpu::detail::exp(score(b, i, j) - maximum);
      const float logSumExp = maximum + std::log(total);
      float delta = 0;
      for (int64_t c = 0; c < dv; ++c)
        delta += g[(b * tq + i) * dv + c] * r.out[(b * tq + i) * dv + c];
      std::vector<float> dqRow(d, 0.f);
      for (int64_t j = 0; j < end; ++j) {
        const float p = cpu::detail::exp(score(b, i, j) - logSumExp);
        float dp = 0;
        for (int64_t c = 0; c < dv; ++c) {
          dp += g[(b * tq + i) * dv + c] * v[(b * tk + j) * dv + c];
          dvAcc[j * dv + c] += p * g[(b * tq + i) * dv + c];
        }
        const float ds = p * (dp - delta) * scale;
        for (int64_t c = 0; c < d; ++c) {
          dqRow[c] += ds * k[(b * tk + j) * d + c];
          dkAcc[j * d + c] += ds * q[(b * tq + i) * d + c];
        }
      }
      std::copy(dqRow.begin(), dqRow.end(), r.dq.begin() + (b * tq + i) * d);
    }
    std::copy(dkAcc.begin(), dkAcc.end(), r.dk.begin() + b * tk * d);
    std::copy(dvAcc.begin(), dvAcc.end(), r.dv.begin() + b * tk * dv);
  }
  return r;
}

/// The vectorized kernels give the scalar loops' bits: whole and partial
/// groups of four queries, blocks of keys, heads that fill vectors and
/// heads that do not, causal, and masks with -inf (a row wholly masked is
/// NaN in both).
TEST(KernelsTest, AttentionIsTheScalarArithmetic) {
  struct Case {
    int64_t batch, tq, tk, d, dv;
    bool causal, masked;
  };
  for (const Case &c : {Case{2, 130, 130, 64, 64, true, false},
                        Case{3, 21, 150, 16, 40, false, true},
                        Case{2, 67, 67, 9, 17, true, true},
                        Case{1, 5, 3, 3, 2, false, false}}) {
    auto q = randomValues<float>(c.batch * c.tq * c.d, 21, -1.5, 1.5);
    auto k = randomValues<float>(c.batch * c.tk * c.d, 22, -1.5, 1.5);
    auto v = randomValues<float>(c.batch * c.tk * c.dv, 23);
    auto g = randomValues<float>(c.batch * c.tq * c.dv, 24);
    std::vector<float> mask;
    if (c.masked) {
      mask = randomValues<float>(c.batch * c.tq * c.tk, 25);
      for (size_t e = 0; e < mask.size(); e += 7)
        mask[e] = -std::numeric_limits<float>::infinity();
      // The first query of the first entry sees no key.
      for (int64_t j = 0; j < c.tk; ++j)
        mask[j] = -std::numeric_limits<float>::infinity();
    }
    const float scale = 0.3f;
    ScalarAttention want = scalarAttention(c.batch, c.tq, c.tk, c.d, c.dv,
                                           c.causal, scale, q, k, v, mask, g);
    const Shape qs{c.batch, c.tq, c.d}, ks{c.batch, c.tk, c.d},
        vs{c.batch, c.tk, c.dv}, os{c.batch, c.tq, c.dv},
        ms{c.batch, c.tq, c.tk};
    const AttentionParams params{scale, c.causal};
    const float *m = mask.empty() ? nullptr : mask.data();
    const Dims md = mask.empty() ? Dims{} : dimsOf(ms);
    std::vector<float> out(want.out.size()), dq(q.size()), dk(k.size()),
        dv(v.size());
    attention<float>(q.data(), dimsOf(qs), k.data(), dimsOf(ks), v.data(),
                     dimsOf(vs), m, md, out.data(), dimsOf(os), params);
    attentionBackward<float>(
        q.data(), dimsOf(qs), k.data(), dimsOf(ks), v.data(), dimsOf(vs),
        want.out.data(), dimsOf(os), g.data(), dimsOf(os), m, md, dq.data(),
        dimsOf(qs), dk.data(), dimsOf(ks), dv.data(), dimsOf(vs), params);
    auto same = [](const std::vector<float> &a, const std::vector<float> &b) {
      return a.size() == b.size() &&
             std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    std::string what = "attention " + std::to_string(c.tq) + "x" +
                       std::to_string(c.tk) + "x" + std::to_string(c.d);
    EXPECT_TRUE(same(out, want.out)) << what << ": out";
    EXPECT_TRUE(same(dq, want.dq)) << what << ": dq";
    EXPECT_TRUE(same(dk, want.dk)) << what << ": dk";
    EXPECT_TRUE(same(dv, want.dv)) << what << ": dv";
    if (c.masked)
      EXPECT_TRUE(std::isnan(out[0])) << what << ": a row with no key";
  }
}

/// `x` of shape [B, H, T, D] stored [B, T, H, D].
template <typename T>
std::vector<T> tokensOuter(const std::vector<T> &x, const Shape &shape) {
  const int64_t b = shape[0], h = shape[1], t = shape[2], d = shape[3];
  std::vector<T> y(x.size());
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < h; ++j)
      for (int64_t k = 0; k < t; ++k)
        for (int64_t c = 0; c < d; ++c)
          y[((i * t + k) * h + j) * d + c] = x[((i * h + j) * t + k) * d + c];
  return y;
}

Shape swapHeadsAndTokens(Shape shape) {
  std::swap(shape[1], shape[2]);
  return shape;
}

/// Random q, k, v, mask and result gradient of one shape, and attention's
/// forward and backward on them as whole [B, H, T, D] tensors: what calls
/// on other layouts of the same values must reproduce.
struct WholeAttention {
  const Shape qShape{2, 3, 10, 4}, kShape{2, 3, 12, 4}, vShape{2, 3, 12, 5},
      oShape{2, 3, 10, 5}, maskShape{2, 1, 10, 12};
  std::vector<float> q, k, v, g, mask, out, dq, dk, dv;

  WholeAttention(unsigned seed, const AttentionParams &params)
      : q(randomValues<float>(numel(qShape), seed, -1.5, 1.5)),
        k(randomValues<float>(numel(kShape), seed + 1, -1.5, 1.5)),
        v(randomValues<float>(numel(vShape), seed + 2)),
        g(randomValues<float>(numel(oShape), seed + 3)),
        mask(randomValues<float>(numel(maskShape), seed + 4)),
        out(numel(oShape)), dq(q.size()), dk(k.size()), dv(v.size()) {
    attention<float>(q.data(), dimsOf(qShape), k.data(), dimsOf(kShape),
                     v.data(), dimsOf(vShape), mask.data(), dimsOf(maskShape),
                     out.data(), dimsOf(oShape), params);
    attentionBackward<float>(
        q.data(), dimsOf(qShape), k.data(), dimsOf(kShape), v.data(),
        dimsOf(vShape), out.data(), dimsOf(oShape), g.data(), dimsOf(oShape),
        mask.data(), dimsOf(maskShape), dq.data(), dimsOf(qShape), dk.data(),
        dimsOf(kShape), dv.data(), dimsOf(vShape), params);
  }
};

/// Operands stored [B, T, H, D] (the bthd bits of their roles; here every
/// other role, then all): the same bits as the [B, H, T, D] call, moved.
TEST(KernelsTest, AttentionTokensOuterIsTheSameArithmetic) {
  const WholeAttention whole(11, AttentionParams{0.5, false});
  const Shape &qShape = whole.qShape, &kShape = whole.kShape,
              &vShape = whole.vShape, &oShape = whole.oShape,
              &maskShape = whole.maskShape;
  const std::vector<float> &q = whole.q, &k = whole.k, &v = whole.v,
                           &g = whole.g, &out = whole.out, &dq = whole.dq,
                           &dk = whole.dk, &dv = whole.dv;
  const std::vector<float> &mask = whole.mask;
  for (int64_t bits : {0b01010101, 0b11111111}) {
    auto stored = [&](const std::vector<float> &x, const Shape &shape,
                      int role) {
      return bits >> role & 1 ? tokensOuter(x, shape) : x;
    };
    auto dims = [&](const Shape &shape, int role) {
      return dimsOf(bits >> role & 1 ? swapHeadsAndTokens(shape) : shape);
    };
    const AttentionParams params{0.5, false, bits};
    auto sq = stored(q, qShape, kAttentionQ),
         sk = stored(k, kShape, kAttentionK),
         sv = stored(v, vShape, kAttentionV);
    std::vector<float> sOut(out.size());
    attention<float>(sq.data(), dims(qShape, kAttentionQ), sk.data(),
                     dims(kShape, kAttentionK), sv.data(),
                     dims(vShape, kAttentionV), mask.data(), dimsOf(maskShape),
                     sOut.data(), dims(oShape, kAttentionOut), params);
    EXPECT_EQ(sOut, stored(out, oShape, kAttentionOut)) << "bthd " << bits;
    auto so = stored(out, oShape, kAttentionOut),
         sg = stored(g, oShape, kAttentionGradOut);
    std::vector<float> sdq(dq.size()), sdk(dk.size()), sdv(dv.size());
    attentionBackward<float>(
        sq.data(), dims(qShape, kAttentionQ), sk.data(),
        dims(kShape, kAttentionK), sv.data(), dims(vShape, kAttentionV),
        so.data(), dims(oShape, kAttentionOut), sg.data(),
        dims(oShape, kAttentionGradOut), mask.data(), dimsOf(maskShape),
        sdq.data(), dims(qShape, kAttentionGradQ), sdk.data(),
        dims(kShape, kAttentionGradK), sdv.data(),
        dims(vShape, kAttentionGradV), params);
    EXPECT_EQ(sdq, stored(dq, qShape, kAttentionGradQ)) << "bthd " << bits;
    EXPECT_EQ(sdk, stored(dk, kShape, kAttentionGradK)) << "bthd " << bits;
    EXPECT_EQ(sdv, stored(dv, vShape, kAttentionGradV)) << "bthd " << bits;
  }
}

/// `x` of shape [B, H, T, D] as heads [start, start + H) of a buffer of
/// `stored` heads, laid out [B, T, stored, D] when `outer`, else
/// [B, stored, T, D]; every other element is `fill`.
template <typename T>
std::vector<T> inWindow(const std::vector<T> &x, const Shape &shape,
                        int64_t stored, int64_t start, bool outer, T fill) {
  const int64_t b = shape[0], h = shape[1], t = shape[2], d = shape[3];
  std::vector<T> y(b * stored * t * d, fill);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < h; ++j)
      for (int64_t k = 0; k < t; ++k)
        for (int64_t c = 0; c < d; ++c) {
          int64_t head = start + j;
          int64_t at = outer ? ((i * t + k) * stored + head) * d + c
                             : ((i * stored + head) * t + k) * d + c;
          y[at] = x[((i * h + j) * t + k) * d + c];
        }
  return y;
}

/// Operands that are windows of heads of larger buffers (`heads` and
/// `head_starts`, as ztc-fold-head-windows sets them for q, k and v inside
/// a fused projection), each role its own window, in both layouts: the
/// same bits as the call on whole tensors, and nothing outside a window
/// written.
TEST(KernelsTest, AttentionHeadWindowsAreTheSameArithmetic) {
  const WholeAttention whole(21, AttentionParams{0.5, true});
  const Shape &qShape = whole.qShape, &kShape = whole.kShape,
              &vShape = whole.vShape, &oShape = whole.oShape,
              &maskShape = whole.maskShape;
  const std::vector<float> &mask = whole.mask;

  // Role r holds heads [1 + r % 2, 4 + r % 2) of 5 + r % 3.
  int64_t starts[kAttentionRoles], storedHeads[kAttentionRoles];
  for (int r = 0; r < kAttentionRoles; ++r) {
    starts[r] = 1 + r % 2;
    storedHeads[r] = 5 + r % 3;
  }
  const float fill = 7.0f;
  for (bool outer : {false, true}) {
    const AttentionParams params{0.5, true, outer ? 0xff : 0, MaybeInt{true, 3},
                                 Ints{starts}};
    auto window = [&](const std::vector<float> &x, const Shape &shape,
                      int role) {
      return inWindow(x, shape, storedHeads[role], starts[role], outer, fill);
    };
    auto dims = [&](const Shape &shape, int role) {
      Shape stored = shape;
      stored[1] = storedHeads[role];
      return dimsOf(outer ? swapHeadsAndTokens(stored) : stored);
    };
    auto wq = window(whole.q, qShape, kAttentionQ),
         wk = window(whole.k, kShape, kAttentionK),
         wv = window(whole.v, vShape, kAttentionV);
    std::vector<float> wOut(numel(oShape) / 3 * storedHeads[kAttentionOut],
                            fill);
    attention<float>(wq.data(), dims(qShape, kAttentionQ), wk.data(),
                     dims(kShape, kAttentionK), wv.data(),
                     dims(vShape, kAttentionV), mask.data(), dimsOf(maskShape),
                     wOut.data(), dims(oShape, kAttentionOut), params);
    EXPECT_EQ(wOut, window(whole.out, oShape, kAttentionOut))
        << "outer " << outer;

    auto wo = window(whole.out, oShape, kAttentionOut),
         wg = window(whole.g, oShape, kAttentionGradOut);
    std::vector<float> wdq(numel(qShape) / 3 * storedHeads[kAttentionGradQ],
                           fill),
        wdk(numel(kShape) / 3 * storedHeads[kAttentionGradK], fill),
        wdv(numel(vShape) / 3 * storedHeads[kAttentionGradV], fill);
    attentionBackward<float>(
        wq.data(), dims(qShape, kAttentionQ), wk.data(),
        dims(kShape, kAttentionK), wv.data(), dims(vShape, kAttentionV),
        wo.data(), dims(oShape, kAttentionOut), wg.data(),
        dims(oShape, kAttentionGradOut), mask.data(), dimsOf(maskShape),
        wdq.data(), dims(qShape, kAttentionGradQ), wdk.data(),
        dims(kShape, kAttentionGradK), wdv.data(),
        dims(vShape, kAttentionGradV), params);
    EXPECT_EQ(wdq, window(whole.dq, qShape, kAttentionGradQ))
        << "outer " << outer;
    EXPECT_EQ(wdk, window(whole.dk, kShape, kAttentionGradK))
        << "outer " << outer;
    EXPECT_EQ(wdv, window(whole.dv, vShape, kAttentionGradV))
        << "outer " << outer;
  }
}

} // namespace
