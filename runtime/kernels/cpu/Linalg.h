//===- Linalg.h - matrix products of the CPU kernels ------------*- C++ -*-===//
//
// detail::gemm, the one GEMM every product goes through (oneDNN for float,
// OpenBLAS for double, f32 accumulation for the 16-bit types), and the entry
// points on it: matmul, matmulAdd, matmulWide, matmulAddWide,
// matmulBiasGrad and matmulBiasGradB (with what ztc-matmul-epilogues folds
// into a product), and matmulNf4 for a weight in 4-bit NormalFloat.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPU_LINALG_H
#define ZTC_RUNTIME_KERNELS_CPU_LINALG_H

#include "Common.h"
#include "Reduce.h"

#include "../Blockwise8bit.h"
#include "../Dims.h"
#include "../Dnnl.h"
#include "../Half.h"
#include "../Library.h"
#include "../MatmulPlan.h"
#include "../Nf4.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace ztc::cpu {

namespace detail {

/// `to` = the rows x cols matrix `from` (row length ld) widened to float,
/// exactly, stored densely.
template <typename T>
void widenMatrix(std::vector<float> &to, const T *from, int64_t rows,
                 int64_t cols, int64_t ld) {
  to.resize(size_t(rows) * size_t(cols));
  float *dense = to.data();
#pragma omp parallel for if (rows * cols > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      dense[r * cols + c] = load(from[r * ld + c]);
}

template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, const T *a, int64_t lda, bool transA,
          const T *b, int64_t ldb, bool transB, T *c, int64_t ldc,
          const T *rowBias, bool accumulate = false);

/// oneDNN's name of a half type.
template <typename T> constexpr dnnl_data_type_t dnnlType() {
  return std::is_same_v<T, bf16> ? dnnl_bf16 : dnnl_f16;
}

/// gemm of half-precision A and B into a float C (+ C itself with
/// `accumulate`), so C holds the f32 sums unrounded: oneDNN's matmul with
/// an f32 output where it has one (bf16 on AVX-512), else both operands
/// widened to float (exactly) in their stored layout and sgemm. The
/// widened copies live as long as the thread: a step's products reuse
/// them.
template <typename T>
void gemmWidened(int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,
                 bool transA, const T *b, int64_t ldb, bool transB, float *c,
                 int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0 || (accumulate && k == 0))
    return;
  if (k > 0 && dnnl::matmul(dnnlType<T>(), m, n, k, a, lda, transA, b, ldb,
                            transB, c, ldc, nullptr, dnnl_f32, accumulate))
    return;
  thread_local std::vector<float> a32, b32;
  int64_t aCols = transA ? m : k, bCols = transB ? k : n;
  widenMatrix(a32, a, transA ? k : m, aCols, lda);
  widenMatrix(b32, b, transB ? n : k, bCols, ldb);
  gemm<float>(m, n, k, a32.data(), aCols, transA, b32.data(), bCols, transB, c,
              ldc, nullptr, accumulate);
}

/// C[M,N] = op(A)[M,K] * op(B)[K,N] (+ rowBias[m] on every element of row
/// m; with `accumulate`, + C itself instead), where op transposes an operand
/// stored transposed (transA: A is stored [K,M]). Leading dimensions are
/// the stored matrices', in elements.
/// oneDNN's sgemm for float (it generates kernels for the instructions this
/// processor has, AVX-512 included, whatever OPENBLAS_CORETYPE says: on
/// this project's AMD machines twice OpenBLAS's Haswell kernels), OpenBLAS
/// for double.
template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, const T *a, int64_t lda, bool transA,
          const T *b, int64_t ldb, bool transB, T *c, int64_t ldc,
          const T *rowBias, bool accumulate) {
  if (m == 0 || n == 0 || (accumulate && k == 0))
    return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // C starts as the bias or as itself (beta 1), or is overwritten (beta
    // 0).
    if (!accumulate && (rowBias || k == 0))
      for (int64_t i = 0; i < m; ++i)
        std::fill(c + i * ldc, c + i * ldc + n, rowBias ? rowBias[i] : T(0));
    if (k == 0)
      return;
    T beta = rowBias || accumulate ? T(1) : T(0);
    // The BLAS runs single-threaded inside OpenMP's threads, each on a band
    // of rows: two thread pools spinning on the same cores (OpenBLAS's and
    // libgomp's) cost more than they gain. oneDNN uses libgomp's pool and
    // runs sequentially inside a parallel region.
    static const bool singleThreaded = (openblas_set_num_threads(1), true);
    (void)singleThreaded;
    CBLAS_TRANSPOSE opA = transA ? CblasTrans : CblasNoTrans;
    CBLAS_TRANSPOSE opB = transB ? CblasTrans : CblasNoTrans;
    auto band = [&](int64_t begin, int64_t end) {
      if (begin >= end)
        return;
      // Row i of op(A) is row i of A, or column i of a transposed A.
      const T *aBand = a + (transA ? begin : begin * lda);
      if constexpr (std::is_same_v<T, float>) {
        // oneDNN fails only on arguments these are not, or out of memory;
        // OpenBLAS then computes the band.
        if (dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', end - begin, n,
                       k, 1.0f, aBand, lda, b, ldb, beta, c + begin * ldc,
                       ldc) != dnnl_success)
          cblas_sgemm(CblasRowMajor, opA, opB, end - begin, n, k, 1.0f, aBand,
                      lda, b, ldb, beta, c + begin * ldc, ldc);
      } else {
        cblas_dgemm(CblasRowMajor, opA, opB, end - begin, n, k, 1.0, aBand, lda,
                    b, ldb, beta, c + begin * ldc, ldc);
      }
    };
    forThreadRanges(m, m * n * k > 4 * kParallelGrain, band);
  } else if constexpr (std::is_same_v<ComputeT<T>, float>) {
    // f16 and bf16: f32 accumulation (as cuBLAS does for half GEMMs), each
    // result rounded once. oneDNN's matmul where it has one (bf16 on
    // AVX-512, on its bf16 dot products where the processor has them; f16
    // where it has AVX512-FP16). Otherwise both operands are widened to
    // float (exactly) in their stored layout and multiplied by sgemm. The
    // buffers live as long as the thread: a step's GEMMs reuse them.
    if (k > 0 && !accumulate &&
        dnnl::matmul(dnnlType<T>(), m, n, k, a, lda, transA, b, ldb, transB, c,
                     ldc, rowBias, dnnlType<T>(), false))
      return;
    thread_local std::vector<float> c32, bias32;
    c32.resize(size_t(m) * size_t(n));
    if (rowBias) {
      widenMatrix(bias32, rowBias, 1, m, m);
      for (int64_t i = 0; i < m; ++i)
        std::fill(c32.begin() + i * n, c32.begin() + (i + 1) * n, bias32[i]);
    }
    gemmWidened(m, n, k, a, lda, transA, b, ldb, transB, c32.data(), n,
                rowBias != nullptr);
    const float *product = c32.data();
#pragma omp parallel for if (m * n > kParallelGrain)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = store<T>(product[i * n + j] +
                                  (accumulate ? load(c[i * ldc + j]) : 0.0f));
  } else {
    using Acc = ComputeT<T>;
    // Element (i, p) of op(A) and (p, j) of op(B).
    int64_t aRow = transA ? 1 : lda, aCol = transA ? lda : 1;
    int64_t bRow = transB ? 1 : ldb, bCol = transB ? ldb : 1;
#pragma omp parallel for if (m * n * k > kParallelGrain)
    for (int64_t i = 0; i < m; ++i) {
      std::vector<Acc> row(n, rowBias ? load(rowBias[i]) : Acc(0));
      if (accumulate)
        for (int64_t j = 0; j < n; ++j)
          row[j] = load(c[i * ldc + j]);
      for (int64_t p = 0; p < k; ++p) {
        Acc scale = load(a[i * aRow + p * aCol]);
        const T *bRowStart = b + p * bRow;
        for (int64_t j = 0; j < n; ++j)
          row[j] += scale * load(bRowStart[j * bCol]);
      }
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = store<T>(row[j]);
    }
  }
}

} // namespace detail

namespace detail {

/// What a product adds as it stores its `rows` x `n` result c
/// (ztc-matmul-epilogues): the bias along the last dimension, then the
/// addend, each sum rounded to T as the loop it replaces rounded it.
template <typename T>
void addEpilogue(T *c, int64_t rows, int64_t n, const T *bias,
                 const T *addend) {
  if (!bias && !addend)
    return;
#pragma omp parallel for if (rows * n > kParallelGrain)
  for (int64_t i = 0; i < rows; ++i) {
    T *row = c + i * n;
    if (bias) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        row[j] = store<T>(load(row[j]) + load(bias[j]));
    }
    if (addend) {
      const T *add = addend + i * n;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        row[j] = store<T>(load(row[j]) + load(add[j]));
    }
  }
}

} // namespace detail

namespace detail {

/// Runs `product(item)` for each of a plan's products that is not one
/// single product. A batch of at least one product per thread
/// (attention's heads): the threads share out the products, each GEMM on
/// one thread, instead of every GEMM splitting its rows (one parallel
/// region, not one per item).
template <typename F> void eachProduct(const MatmulPlan &p, F &&product) {
  int64_t items = p.outer * p.inner;
#ifdef _OPENMP
  if (items >= omp_get_max_threads() && items > 1 &&
      items * p.m * p.n * p.k > 4 * kParallelGrain) {
#pragma omp parallel for schedule(static)
    for (int64_t item = 0; item < items; ++item)
      product(item);
    return;
  }
#endif
  for (int64_t item = 0; item < items; ++item)
    product(item);
}

} // namespace detail

/// c = a @ b, numpy-style (MatmulPlan.h), plus the bias along c's last
/// dimension when there is one; transA/transB: the operand is stored with
/// its last two dimensions swapped.
template <typename T>
void matmul(const T *a, const Dims &aDims, const T *b, const Dims &bDims,
            const T *bias, const Dims &, T *c, const Dims &cDims,
            const MatmulParams &params) {
  const bool transA = params.transpose_a, transB = params.transpose_b;
  MatmulPlan p = planMatmul(aDims, bDims, cDims, transA, transB);
  if (p.batches == 0)
    return;
  const int64_t n = cDims.rank ? cDims.d[cDims.rank - 1] : 1;
  const int64_t rows = n ? cDims.numElements() / n : 0;
  if (p.single) {
    detail::gemm(p.batches * p.m, p.n, p.k, a, p.lda, false, b, p.ldb, p.transB,
                 c, p.ldc, static_cast<const T *>(nullptr));
    detail::addEpilogue(c, rows, n, bias, static_cast<const T *>(nullptr));
    return;
  }
  detail::eachProduct(p, [&](int64_t item) {
    int64_t o = item / p.inner, i = item % p.inner;
    int64_t aOffset, bOffset;
    p.offsets(o, aOffset, bOffset);
    detail::gemm(p.m, p.n, p.k, a + aOffset + i * p.strideA, p.lda, p.transA,
                 b + bOffset + i * p.strideB, p.ldb, p.transB,
                 c + item * p.m * p.n, p.ldc, static_cast<const T *>(nullptr));
  });
  detail::addEpilogue(c, rows, n, bias, static_cast<const T *>(nullptr));
}

/// A product without a bias.
template <typename T>
void matmul(const T *a, const Dims &aDims, const T *b, const Dims &bDims, T *c,
            const Dims &cDims, const MatmulParams &params) {
  matmul(a, aDims, b, bDims, static_cast<const T *>(nullptr), Dims{}, c, cDims,
         params);
}

/// c = (a @ b + bias) + addend: matmul, then the bias and the addend added
/// to each element, each sum rounded to T (the addend is never c).
template <typename T>
void matmulAdd(const T *a, const Dims &aDims, const T *b, const Dims &bDims,
               const T *addend, const Dims &, const T *bias, const Dims &, T *c,
               const Dims &cDims, const MatmulParams &params) {
  matmul(a, aDims, b, bDims, c, cDims, params);
  const int64_t n = cDims.rank ? cDims.d[cDims.rank - 1] : 1;
  detail::addEpilogue(c, n ? cDims.numElements() / n : 0, n, bias, addend);
}

namespace detail {

/// c = a @ b in f32, never rounded to T (gemmWidened), numpy-style as
/// matmul lays the products out: what the widened products below round.
template <typename T>
void widenedProduct(const T *a, const Dims &aDims, const T *b,
                    const Dims &bDims, float *c, const Dims &cDims,
                    const MatmulParams &params) {
  MatmulPlan p =
      planMatmul(aDims, bDims, cDims, params.transpose_a, params.transpose_b);
  if (p.batches == 0)
    return;
  if (p.single) {
    gemmWidened(p.batches * p.m, p.n, p.k, a, p.lda, false, b, p.ldb, p.transB,
                c, p.ldc, false);
    return;
  }
  eachProduct(p, [&](int64_t item) {
    int64_t o = item / p.inner, i = item % p.inner;
    int64_t aOffset, bOffset;
    p.offsets(o, aOffset, bOffset);
    gemmWidened(p.m, p.n, p.k, a + aOffset + i * p.strideA, p.lda, p.transA,
                b + bOffset + i * p.strideB, p.ldb, p.transB,
                c + item * p.m * p.n, p.ldc, false);
  });
}

/// matmulWide and matmulAddWide of a half T: the product in f32 into c,
/// then each element rounded to T as matmul stores it, plus the bias
/// rounded to T as matmul adds it, widened back to f32, plus the addend
/// in f32.
template <typename T>
void productWidened(const T *a, const Dims &aDims, const T *b,
                    const Dims &bDims, const float *addend, const T *bias,
                    float *c, const Dims &cDims, const MatmulParams &params) {
  widenedProduct(a, aDims, b, bDims, c, cDims, params);
  const int64_t n = cDims.rank ? cDims.d[cDims.rank - 1] : 1;
  const int64_t rows = n ? cDims.numElements() / n : 0;
  // Rounded to T in float lanes (bf16: roundToBFloat16, the same bits).
  auto rounded = [](float value) {
    if constexpr (std::is_same_v<T, bf16>)
      return roundToBFloat16(value);
    else
      return load(store<T>(value));
  };
#pragma omp parallel for if (rows * n > kParallelGrain)
  for (int64_t i = 0; i < rows; ++i) {
    float *row = c + i * n;
    if (bias) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        row[j] = rounded(rounded(row[j]) + load(bias[j]));
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        row[j] = rounded(row[j]);
    }
    if (addend) {
      const float *add = addend + i * n;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        row[j] += add[j];
    }
  }
}

} // namespace detail

/// c = the product matmul stores in T (with its bias), widened to T's
/// compute type C (f32 for bf16 and f16; T itself otherwise, where this is
/// matmul): a product whose only reader widened it (the first of several
/// products' gradients summed in f32, ztc-matmul-epilogues).
template <typename T>
void matmulWide(const T *a, const Dims &aDims, const T *b, const Dims &bDims,
                const T *bias, const Dims &biasDims, detail::ComputeT<T> *c,
                const Dims &cDims, const MatmulParams &params) {
  if constexpr (std::is_same_v<detail::ComputeT<T>, T>)
    matmul(a, aDims, b, bDims, bias, biasDims, c, cDims, params);
  else
    detail::productWidened(a, aDims, b, bDims, nullptr, bias, c, cDims, params);
}

/// c = addend + matmulWide's c, the sum in C: a residual stream in f32
/// adding a half product (a Llama or GPT-2 block's under bf16 autocast),
/// as the loop ztc-matmul-epilogues folds into it computed. The addend is
/// never c.
template <typename T>
void matmulAddWide(const T *a, const Dims &aDims, const T *b, const Dims &bDims,
                   const detail::ComputeT<T> *addend, const Dims &addendDims,
                   const T *bias, const Dims &biasDims, detail::ComputeT<T> *c,
                   const Dims &cDims, const MatmulParams &params) {
  if constexpr (std::is_same_v<detail::ComputeT<T>, T>)
    matmulAdd(a, aDims, b, bDims, addend, addendDims, bias, biasDims, c, cDims,
              params);
  else
    detail::productWidened(a, aDims, b, bDims, addend, bias, c, cDims, params);
}

/// A linear layer's weight and bias gradients from its output's gradient
/// a (ztc-matmul-epilogues): c = a @ b as matmul computes it, and biasGrad
/// the sum of a's rows (every dimension but the last summed, as reduce_sum
/// over those dimensions sums them: the same bits).
template <typename T>
void matmulBiasGrad(const T *a, const Dims &aDims, const T *b,
                    const Dims &bDims, T *c, const Dims &cDims, T *biasGrad,
                    const Dims &, const MatmulParams &params) {
  matmul(a, aDims, b, bDims, c, cDims, params);
  reduce<T, ReduceKind::Sum>(a, rowsOf(aDims), 1, biasGrad);
}

/// The same for a layer whose weight multiplies from the right (x W +
/// bias): c = a @ b, and biasGrad the sum of b's rows, b its output's
/// gradient (the same bits as reduce_sum over b's leading dimensions).
template <typename T>
void matmulBiasGradB(const T *a, const Dims &aDims, const T *b,
                     const Dims &bDims, T *c, const Dims &cDims, T *biasGrad,
                     const Dims &, const MatmulParams &params) {
  matmul(a, aDims, b, bDims, c, cDims, params);
  reduce<T, ReduceKind::Sum>(b, rowsOf(bDims), 1, biasGrad);
}

//===----------------------------------------------------------------------===//
// Quantized weights
//===----------------------------------------------------------------------===//

/// y = x op(W) for a weight W of [rows, cols] in NF4 (Nf4.h: packed codes,
/// the 8-bit codes of the block scales, their scales and offset), op the
/// transpose when transB; x is [..., K], y [..., N]. W is never whole in
/// memory: a tile of op(W)'s columns (nf4::tileColumns: about 256K
/// elements) is dequantized in float32, rounded to T and
/// multiplied as any product is (detail::gemm: f32 accumulation, each
/// result rounded once), then the next tile. The tile lives as long as the
/// thread: 1 MiB of float32 (512 KiB of bf16) for K up to 16384.
template <typename T>
void matmulNf4(const T *x, const Dims &xDims, const int8_t *packedCodes,
               const Dims &, const int8_t *absmaxCodes, const Dims &,
               const float *nested, const Dims &, const float *offset,
               const Dims &, T *y, const Dims &yDims,
               const MatmulNf4Params &params) {
  const auto *packed = reinterpret_cast<const uint8_t *>(packedCodes);
  const auto *absmax = reinterpret_cast<const uint8_t *>(absmaxCodes);
  const int64_t rows = params.weight_shape[0], cols = params.weight_shape[1];
  const bool transB = params.transpose_b;
  const int64_t k = transB ? cols : rows, n = transB ? rows : cols;
  const int64_t m = k ? xDims.numElements() / k : 0;
  (void)yDims;
  if (m == 0 || n == 0)
    return;
  const blockwise8bit::CodeTable &table = blockwise8bit::codeTable(true);
  const float shift = *offset;
  const int64_t panel = nf4::tileColumns(k, n);
  thread_local std::vector<T> tile;
  tile.resize(size_t(k) * size_t(panel));
  T *t = tile.data();
  for (int64_t j0 = 0; j0 < n; j0 += panel) {
    const int64_t width = std::min(panel, n - j0);
    // The tile is op(W)[:, j0 : j0 + width], stored as W is: rows j0.. of
    // W ([width, K]) when transposed, else columns j0.. of every row
    // ([K, width]).
    // Each row of the tile is a run of W's flat elements.
    const int64_t outer = transB ? width : k, inner = transB ? k : width;
#pragma omp parallel for if (outer * inner > detail::kParallelGrain)
    for (int64_t r = 0; r < outer; ++r)
      nf4::dequantizeRange(packed, absmax, nested, shift,
                           transB ? (j0 + r) * cols : r * cols + j0, inner,
                           table, t + r * inner,
                           [](float value) { return detail::store<T>(value); });
    detail::gemm(m, width, k, x, k, false, t, inner, transB, y + j0, n,
                 static_cast<const T *>(nullptr));
  }
}

} // namespace ztc::cpu

#endif // ZTC_RUNTIME_KERNELS_CPU_LINALG_H
