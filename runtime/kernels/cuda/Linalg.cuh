//===- Linalg.cuh - matrix products of the CUDA kernels ---------*- C++ -*-===//
//
// detail::gemm, the one product every matrix product goes through (cuBLAS
// for float, double, f16 and bf16; a plain kernel for integers and in the
// host emulation), and the entry points on it: matmul, matmulAdd (a bias
// and an addend added as the product is stored: cuBLASLt's epilogue where
// it has one), matmulWide and matmulAddWide (half products stored, or
// added to an addend, in f32), matmulBiasGrad and matmulBiasGradB (a bias
// gradient summed as the product reads its operand: cuBLASLt's BGRADB and
// BGRADA), and matmulNf4 for a weight in 4-bit NormalFloat, dequantized
// tile by tile.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_LINALG_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_LINALG_CUH

#include "Common.cuh"
#include "Reduce.cuh"
#include "Scratch.h"

#include "../Blockwise8bit.h"
#include "../Dims.h"
#include "../Half.h"
#include "../Library.h"
#include "../MatmulPlan.h"
#include "../Nf4.h"

#include <cuda_runtime_api.h>
#if !defined(ZTC_CUDA_HOST_EMULATION)
#include <cublasLt.h>
#include <cublas_v2.h>
#endif

#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace ztc::cuda {

namespace detail {

/// A batch of row-major products C[b] = A[b] * B[b] (+ C[b] when
/// accumulating): A[b] = a + b*strideA is [m, k] with leading dimension lda,
/// B[b] is [k, n] (ldb), C[b] is [m, n] (ldc). Strides may be 0.
struct GemmShape {
  int64_t batch, m, n, k, lda, ldb, ldc, strideA, strideB, strideC;
  /// A is stored [k, m] (B: [n, k]); lda (ldb) is the stored row length.
  bool transA = false, transB = false;
  /// f32 only: cuBLAS may multiply on TF32 tensor cores (inputs rounded to
  /// 10 mantissa bits, sums in f32), as PyTorch's allow_tf32.
  bool tf32 = false;
};

/// One output element per call, accumulated in ComputeT<T> (the CPU gemm's
/// fallback): integers, k == 0, and the host emulation. C is T, or f32 for
/// half operands whose sums stay in f32.
template <typename T, typename C = T> struct GemmBody {
  const T *a, *b;
  C *c;
  GemmShape s;
  bool accumulate;
  ZTC_HOST_DEVICE void operator()(int64_t flat) const {
    using Acc = ComputeT<T>;
    int64_t col = flat % s.n, row = (flat / s.n) % s.m;
    int64_t batch = flat / (s.n * s.m);
    // Element (row, p) of op(A) and (p, col) of op(B).
    int64_t aStep = s.transA ? s.lda : 1, bStep = s.transB ? 1 : s.ldb;
    // Offsets, not pointers: with k == 0 an operand may be null, and
    // offsetting a null pointer is undefined.
    int64_t aRow = batch * s.strideA + (s.transA ? row : row * s.lda);
    int64_t bCol = batch * s.strideB + (s.transB ? col * s.ldb : col);
    C *out = c + batch * s.strideC + row * s.ldc + col;
    Acc acc = accumulate ? Acc(load(*out)) : Acc(0);
    for (int64_t p = 0; p < s.k; ++p)
      acc += load(a[aRow + p * aStep]) * load(b[bCol + p * bStep]);
    *out = store<C>(acc);
  }
};

/// What a product adds as it stores (ztc-matmul-epilogues), element by
/// element of c: the bias along the last dimension (n), then the addend,
/// each sum rounded to T as the CPU's and the loop it replaces.
template <typename T> struct EpilogueBody {
  T *c;
  const T *bias, *addend;
  int64_t n;
  ZTC_HOST_DEVICE void operator()(int64_t at) const {
    T value = c[at];
    if (bias)
      value = store<T>(load(value) + load(bias[at % n]));
    if (addend)
      value = store<T>(load(value) + load(addend[at]));
    c[at] = value;
  }
};

/// The widened products' epilogue (the CPU's productWidened), element by
/// element of c, which holds the f32 product: rounded to T, plus the bias
/// rounded to T, widened, plus the addend in f32.
template <typename T> struct WideEpilogueBody {
  float *c;
  const T *bias;
  const float *addend;
  int64_t n;
  ZTC_HOST_DEVICE void operator()(int64_t at) const {
    T product = store<T>(c[at]);
    if (bias)
      product = store<T>(load(product) + load(bias[at % n]));
    c[at] = addend ? load(product) + addend[at] : load(product);
  }
};

#if !defined(ZTC_CUDA_HOST_EMULATION)
inline bool checkCublas(cublasStatus_t status, const char *call,
                        const char *kernel) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return true;
  recordError(std::string(call) + " in " + kernel + ": " +
              cublasGetStatusName(status) + " (" +
              cublasGetStatusString(status) + ")");
  return false;
}

/// Serializes cublasSetStream + the products that follow on a shared handle.
inline std::mutex &cublasMutex() {
  static std::mutex mutex;
  return mutex;
}

/// What cuBLASLt's choice of algorithm for a product depends on.
struct LtProblem {
  int type, outType, compute, epilogue;
  int64_t m, n, k, lda, ldb, ldc;
  bool transA, transB, addend;
  uint32_t alignA, alignB, alignC, alignD;
  bool operator<(const LtProblem &other) const {
    auto key = [](const LtProblem &p) {
      return std::tie(p.type, p.outType, p.compute, p.epilogue, p.m, p.n, p.k,
                      p.lda, p.ldb, p.ldc, p.transA, p.transB, p.addend,
                      p.alignA, p.alignB, p.alignC, p.alignD);
    };
    return key(*this) < key(other);
  }
};

/// cuBLAS on one device: its handles, the workspace both multiply in, and
/// the algorithm cuBLASLt's heuristic chose for each problem (none: it
/// found none), asked once per problem.
struct CublasDevice {
  cublasHandle_t handle = nullptr;
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr;
  std::map<LtProblem, std::optional<cublasLtMatmulAlgo_t>> algorithms;
};

/// The current device's cuBLAS, its handle and workspace created on first
/// use (call with cublasMutex() held); nullptr with an error recorded on
/// failure.
inline CublasDevice *cublasDevice(const char *kernel) {
  static std::vector<CublasDevice> devices;
  int device = 0;
  if (!checkCuda(cudaGetDevice(&device), "cudaGetDevice", kernel))
    return nullptr;
  if (devices.size() <= static_cast<size_t>(device))
    devices.resize(device + 1);
  CublasDevice &mine = devices[device];
  if (!mine.handle) {
    cublasHandle_t handle = nullptr;
    if (!checkCublas(cublasCreate(&handle), "cublasCreate", kernel))
      return nullptr;
    // No split-K reductions in 16-bit: sums stay in f32 until the store.
    checkCublas(
        cublasSetMathMode(
            handle, static_cast<cublasMath_t>(
                        CUBLAS_DEFAULT_MATH |
                        CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
        "cublasSetMathMode", kernel);
    // Its workspace, of the size the plan reserves
    // (scratch::kCublasWorkspaceBytes), allocated on the first product
    // (a step's first, direct call: never while a graph is captured) and
    // kept for the process, so cuBLAS allocates nothing while a step runs
    // and captured graphs keep a valid pointer. Products run one at a time
    // (cublasMutex()) on a step's compute stream, so one workspace serves
    // them all.
    if (!checkCuda(cudaMalloc(&mine.workspace, scratch::kCublasWorkspaceBytes),
                   "cudaMalloc (the cuBLAS workspace)", kernel)) {
      cublasDestroy(handle);
      return nullptr;
    }
    mine.handle = handle;
  }
  return &mine;
}

/// The current device's cuBLAS handle (call with cublasMutex() held),
/// bound to `stream` with its workspace; nullptr with an error recorded on
/// failure.
inline cublasHandle_t cublasHandleOn(cudaStream_t stream, const char *kernel) {
  CublasDevice *mine = cublasDevice(kernel);
  if (!mine)
    return nullptr;
  // cublasSetStream puts cuBLAS back on its own default workspace, so the
  // planned one is set again after it, every time.
  if (!checkCublas(cublasSetStream(mine->handle, stream), "cublasSetStream",
                   kernel) ||
      !checkCublas(cublasSetWorkspace(mine->handle, mine->workspace,
                                      scratch::kCublasWorkspaceBytes),
                   "cublasSetWorkspace", kernel))
    return nullptr;
  return mine->handle;
}

template <typename T> cudaDataType_t cublasDataType() {
  if constexpr (std::is_same_v<T, double>)
    return CUDA_R_64F;
  else if constexpr (std::is_same_v<T, f16>)
    return CUDA_R_16F;
  else if constexpr (std::is_same_v<T, bf16>)
    return CUDA_R_16BF;
  else
    return CUDA_R_32F;
}

/// GemmShape on cuBLAS. cuBLAS is column-major: the row-major C = A * B is
/// the column-major C^T = B^T * A^T, so B goes first and m and n swap; a
/// row-major matrix is its transpose to cuBLAS, so an operand stored
/// transposed is passed with CUBLAS_OP_T.
template <typename T, typename C>
void cublasGemm(const T *a, const T *b, C *c, const GemmShape &s,
                bool accumulate, cudaStream_t stream, const char *kernel) {
  const int64_t kIntMax = INT_MAX;
  if (s.m > kIntMax || s.n > kIntMax || s.k > kIntMax || s.lda > kIntMax ||
      s.ldb > kIntMax || s.ldc > kIntMax) {
    recordError(std::string(kernel) +
                ": a dimension exceeds the int range of cuBLAS");
    return;
  }
  // Double computes in double; everything else in f32 with f32 scalars.
  constexpr bool kDouble = std::is_same_v<T, double>;
  using Scalar = std::conditional_t<kDouble, double, float>;
  Scalar alpha = 1, beta = accumulate ? 1 : 0;
  cublasComputeType_t compute = kDouble ? CUBLAS_COMPUTE_64F
                                : std::is_same_v<T, float> && s.tf32
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  cudaDataType_t type = cublasDataType<T>(), cType = cublasDataType<C>();

  std::lock_guard<std::mutex> lock(cublasMutex());
  cublasHandle_t handle = cublasHandleOn(stream, kernel);
  if (!handle)
    return;
  // Batches go in chunks: grids cap the batch count cuBLAS launches.
  constexpr int64_t kMaxBatch = 65535;
  for (int64_t first = 0; first < s.batch; first += kMaxBatch) {
    int64_t count = s.batch - first < kMaxBatch ? s.batch - first : kMaxBatch;
    cublasStatus_t status = cublasGemmStridedBatchedEx(
        handle, s.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
        s.transA ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(s.n),
        static_cast<int>(s.m), static_cast<int>(s.k), &alpha,
        b + first * s.strideB, type, static_cast<int>(s.ldb), s.strideB,
        a + first * s.strideA, type, static_cast<int>(s.lda), s.strideA, &beta,
        c + first * s.strideC, cType, static_cast<int>(s.ldc), s.strideC,
        static_cast<int>(count), compute, CUBLAS_GEMM_DEFAULT);
    if (!checkCublas(status, "cublasGemmStridedBatchedEx", kernel))
      return;
  }
}

/// The largest power of two, up to 256, that divides `pointer`'s address:
/// what cuBLASLt may assume of its alignment.
inline uint32_t alignmentOf(const void *pointer) {
  uint32_t alignment = 256;
  while (alignment > 1 && reinterpret_cast<uintptr_t>(pointer) % alignment != 0)
    alignment /= 2;
  return alignment;
}

/// A single product (s.batch == 1) with its epilogue in cuBLASLt: D = A B
/// + C with C the addend (beta 1), or D itself and beta 0 without one; C
/// and D of type Out, T's or (for half operands) f32, the bias T;
/// CUBLASLT_EPILOGUE_BIAS adding the bias along D's rows in cuBLAS's
/// column-major view (c's last dimension), or CUBLASLT_EPILOGUE_BGRADB
/// writing biasGrad, the sums of our a's rows (a transposed: cuBLAS's B,
/// summed over the product's k), or with `gradOfB` CUBLASLT_EPILOGUE_BGRADA
/// the sums of our b's rows (b stored [k, n]: cuBLAS's A, summed over k).
/// Sums stay in f32 until the store: split-K
/// reductions only in the compute type. False when cuBLASLt has no
/// algorithm for it (nothing was run; the caller multiplies and adds with
/// EpilogueBody, or sums with reduce); true once it ran or an error was
/// recorded. The heuristic is asked once per problem (a step's products
/// repeat every step).
template <typename T, typename Out = T>
bool cublasLtEpilogue(const T *a, const T *b, Out *c, const GemmShape &s,
                      const T *bias, const Out *addend, T *biasGrad,
                      cudaStream_t stream, const char *kernel,
                      bool gradOfB = false) {
  const int64_t kIntMax = INT_MAX;
  if (std::is_same_v<T, double> || s.batch != 1 || s.k == 0 || s.m > kIntMax ||
      s.n > kIntMax || s.k > kIntMax || s.lda > kIntMax || s.ldb > kIntMax ||
      s.ldc > kIntMax ||
      (biasGrad && ((gradOfB ? s.transB : !s.transA) || bias || addend)))
    return false;
  std::lock_guard<std::mutex> lock(cublasMutex());
  CublasDevice *mine = cublasDevice(kernel);
  if (!mine)
    return true;
  if (!mine->lt &&
      !checkCublas(cublasLtCreate(&mine->lt), "cublasLtCreate", kernel))
    return true;
  // Every descriptor this call makes, destroyed on the way out.
  struct Descriptors {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
    cublasLtMatmulPreference_t preference = nullptr;
    ~Descriptors() {
      if (preference)
        cublasLtMatmulPreferenceDestroy(preference);
      for (cublasLtMatrixLayout_t layout : {a, b, c, d})
        if (layout)
          cublasLtMatrixLayoutDestroy(layout);
      if (op)
        cublasLtMatmulDescDestroy(op);
    }
  } desc;
  cublasComputeType_t compute = std::is_same_v<T, float> && s.tf32
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  cudaDataType_t type = cublasDataType<T>(), outType = cublasDataType<Out>();
  // cuBLAS's A is our b and its B our a (see cublasGemm); the column-major
  // D is [n, m] with leading dimension ldc, the dense addend [n, m] with n.
  cublasOperation_t opA = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue =
      biasGrad ? (gradOfB ? CUBLASLT_EPILOGUE_BGRADA : CUBLASLT_EPILOGUE_BGRADB)
      : bias   ? CUBLASLT_EPILOGUE_BIAS
               : CUBLASLT_EPILOGUE_DEFAULT;
  const void *biasPointer = biasGrad ? static_cast<const void *>(biasGrad)
                                     : static_cast<const void *>(bias);
  uint64_t workspaceBytes = scratch::kCublasWorkspaceBytes;
  uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  const Out *cInput = addend ? addend : c;
  uint32_t alignA = alignmentOf(b), alignB = alignmentOf(a),
           alignC = alignmentOf(cInput), alignD = alignmentOf(c);
  const char *failed = nullptr;
  auto check = [&](cublasStatus_t status, const char *call) {
    if (status != CUBLAS_STATUS_SUCCESS && !failed) {
      failed = call;
      checkCublas(status, call, kernel);
    }
  };
  check(cublasLtMatmulDescCreate(&desc.op, compute, CUDA_R_32F),
        "cublasLtMatmulDescCreate");
  if (!failed) {
    check(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                         &opA, sizeof(opA)),
          "cublasLtMatmulDescSetAttribute");
    check(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                         &opB, sizeof(opB)),
          "cublasLtMatmulDescSetAttribute");
    check(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                         &epilogue, sizeof(epilogue)),
          "cublasLtMatmulDescSetAttribute");
    if (biasPointer)
      check(cublasLtMatmulDescSetAttribute(desc.op,
                                           CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                           &biasPointer, sizeof(biasPointer)),
            "cublasLtMatmulDescSetAttribute");
    // The bias is D's type unless told: a half bias of an f32 D says so
    // (where cuBLASLt has no such algorithm, its heuristic finds none and
    // the caller adds the bias itself).
    int32_t biasType = type;
    if (biasPointer && outType != type)
      check(cublasLtMatmulDescSetAttribute(desc.op,
                                           CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                           &biasType, sizeof(biasType)),
            "cublasLtMatmulDescSetAttribute");
    check(cublasLtMatrixLayoutCreate(&desc.a, type, s.transB ? s.k : s.n,
                                     s.transB ? s.n : s.k, s.ldb),
          "cublasLtMatrixLayoutCreate");
    check(cublasLtMatrixLayoutCreate(&desc.b, type, s.transA ? s.m : s.k,
                                     s.transA ? s.k : s.m, s.lda),
          "cublasLtMatrixLayoutCreate");
    check(cublasLtMatrixLayoutCreate(&desc.c, outType, s.n, s.m,
                                     addend ? s.n : s.ldc),
          "cublasLtMatrixLayoutCreate");
    check(cublasLtMatrixLayoutCreate(&desc.d, outType, s.n, s.m, s.ldc),
          "cublasLtMatrixLayoutCreate");
    check(cublasLtMatmulPreferenceCreate(&desc.preference),
          "cublasLtMatmulPreferenceCreate");
  }
  if (!failed) {
    auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attribute,
                      const void *value, size_t bytes) {
      check(cublasLtMatmulPreferenceSetAttribute(desc.preference, attribute,
                                                 value, bytes),
            "cublasLtMatmulPreferenceSetAttribute");
    };
    prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
           sizeof(workspaceBytes));
    prefer(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
           sizeof(reductions));
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA, sizeof(alignA));
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB, sizeof(alignB));
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC, sizeof(alignC));
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD, sizeof(alignD));
  }
  if (failed)
    return true;
  LtProblem problem{type,
                    outType,
                    compute,
                    static_cast<int>(epilogue),
                    s.m,
                    s.n,
                    s.k,
                    s.lda,
                    s.ldb,
                    s.ldc,
                    s.transA,
                    s.transB,
                    addend != nullptr,
                    alignA,
                    alignB,
                    alignC,
                    alignD};
  auto [chosen, fresh] = mine->algorithms.try_emplace(problem);
  if (fresh) {
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(
            mine->lt, desc.op, desc.a, desc.b, desc.c, desc.d, desc.preference,
            1, &result, &found) == CUBLAS_STATUS_SUCCESS &&
        found > 0)
      chosen->second = result.algo;
  }
  if (!chosen->second)
    return false;
  float alpha = 1, beta = addend ? 1 : 0;
  checkCublas(cublasLtMatmul(mine->lt, desc.op, &alpha, b, desc.a, a, desc.b,
                             &beta, cInput, desc.c, c, desc.d, &*chosen->second,
                             mine->workspace, scratch::kCublasWorkspaceBytes,
                             stream),
              "cublasLtMatmul", kernel);
  return true;
}
#endif

/// Runs GemmShape: cuBLAS where it applies, else GemmBody. C is T, or f32
/// for half operands (cuBLAS's f32 output of a half product, its sums never
/// rounded to the half type).
template <typename T, typename C = T>
void gemm(const T *a, const T *b, C *c, const GemmShape &s, bool accumulate,
          cudaStream_t stream, const char *kernel) {
  static_assert(std::is_same_v<C, T> ||
                    (std::is_same_v<C, float> && !std::is_same_v<T, double>),
                "a product's output is its operands' type, or f32 for half");
  if (s.batch == 0 || s.m == 0 || s.n == 0)
    return;
#if !defined(ZTC_CUDA_HOST_EMULATION)
  if constexpr (kCublasType<T>) {
    if (s.k > 0) {
      cublasGemm(a, b, c, s, accumulate, stream, kernel);
      return;
    }
  }
#endif
  launchElements(s.batch * s.m * s.n, GemmBody<T, C>{a, b, c, s, accumulate},
                 stream, kernel);
}

/// One tile of an NF4 weight dequantized (Nf4.h): element (r, c) of a
/// [outer, inner] tile is W's flat element `first + r * rowStep + c`, its
/// scale and value rounded as the CPU's (no contraction into an fma), then
/// rounded to T.
template <typename T> struct Nf4TileBody {
  const uint8_t *packed, *absmax;
  const float *nested, *offset;
  T *tile;
  int64_t first, rowStep, inner;
  CodeBook scales;
  float values[16];

  ZTC_HOST_DEVICE void operator()(int64_t at) const {
    const int64_t i = first + (at / inner) * rowStep + at % inner;
    const int64_t block = i / nf4::kBlock;
    const float scale = addRounded(mulRounded(scales.value[absmax[block]],
                                              nested[block / nf4::kScaleBlock]),
                                   *offset);
    const uint8_t byte = packed[i / 2];
    tile[at] =
        store<T>(mulRounded(values[i % 2 ? byte & 0x0F : byte >> 4], scale));
  }
};

} // namespace detail

namespace detail {

/// The product of a plan whose batches are one product (p.single): every
/// batch's rows of a at once, b shared.
inline GemmShape singleGemm(const MatmulPlan &p, const MatmulParams &params) {
  return {1, p.batches * p.m, p.n,      p.k,        p.lda, p.ldb, p.ldc, 0, 0,
          0, false,           p.transB, params.tf32};
}

/// A plan's products, each group one strided batch, the host looping over
/// the groups. C is T, or f32 for half operands.
template <typename T, typename C>
void groupedGemms(const T *a, const T *b, C *c, const MatmulPlan &p,
                  const MatmulParams &params, cudaStream_t stream,
                  const char *kernel) {
  for (int64_t o = 0; o < p.outer; ++o) {
    int64_t aOffset, bOffset;
    p.offsets(o, aOffset, bOffset);
    gemm(a + aOffset, b + bOffset, c + o * p.inner * p.m * p.n,
         {p.inner, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.strideA, p.strideB,
          p.m * p.n, p.transA, p.transB, params.tf32},
         false, stream, kernel);
  }
}

/// c = a @ b, numpy-style (MatmulPlan.h), then the bias along c's last
/// dimension and the addend, when there are: a single product in one
/// cuBLASLt call with its epilogue where cuBLASLt has an algorithm for
/// it, else the product and EpilogueBody.
template <typename T>
void matmulWith(const T *a, const Dims &aDims, const T *b, const Dims &bDims,
                const T *bias, const T *addend, T *c, const Dims &cDims,
                const MatmulParams &params, cudaStream_t stream,
                const char *kernel) {
  const bool transA = params.transpose_a, transB = params.transpose_b;
  MatmulPlan p = planMatmul(aDims, bDims, cDims, transA, transB);
  const int64_t n = cDims.rank ? cDims.d[cDims.rank - 1] : 1;
  const int64_t count = cDims.numElements();
  auto epilogue = [&] {
    if ((bias || addend) && count > 0 && n > 0)
      launchElements(count, EpilogueBody<T>{c, bias, addend, n}, stream,
                     kernel);
  };
  if (p.batches == 0) {
    epilogue();
    return;
  }
  if (p.single) {
    GemmShape shape = singleGemm(p, params);
#if !defined(ZTC_CUDA_HOST_EMULATION)
    if constexpr (kCublasType<T>)
      if ((bias || addend) &&
          cublasLtEpilogue(a, b, c, shape, bias, addend,
                           static_cast<T *>(nullptr), stream, kernel))
        return;
#endif
    gemm(a, b, c, shape, false, stream, kernel);
  } else {
    groupedGemms(a, b, c, p, params, stream, kernel);
  }
  epilogue();
}

/// matmulWide and matmulAddWide of half operands: a single product in one
/// cuBLASLt call, f32 C and D (the product added in f32 before any
/// rounding), where cuBLASLt has an algorithm for it; else the product in
/// f32 into c and WideEpilogueBody, the CPU's sums.
template <typename T>
void matmulWideWith(const T *a, const Dims &aDims, const T *b,
                    const Dims &bDims, const T *bias, const float *addend,
                    float *c, const Dims &cDims, const MatmulParams &params,
                    cudaStream_t stream, const char *kernel) {
  MatmulPlan p =
      planMatmul(aDims, bDims, cDims, params.transpose_a, params.transpose_b);
  const int64_t n = cDims.rank ? cDims.d[cDims.rank - 1] : 1;
  const int64_t count = cDims.numElements();
  if (p.batches > 0 && p.single) {
    GemmShape shape = singleGemm(p, params);
#if !defined(ZTC_CUDA_HOST_EMULATION)
    if (cublasLtEpilogue(a, b, c, shape, bias, addend,
                         static_cast<T *>(nullptr), stream, kernel))
      return;
#endif
    gemm(a, b, c, shape, false, stream, kernel);
  } else if (p.batches > 0) {
    groupedGemms(a, b, c, p, params, stream, kernel);
  }
  if (count > 0 && n > 0)
    launchElements(count, WideEpilogueBody<T>{c, bias, addend, n}, stream,
                   kernel);
}

} // namespace detail

/// c = a @ b, numpy-style (MatmulPlan.h), plus the bias along c's last
/// dimension when there is one; transpose_a/_b: the operand is stored with
/// its last two dimensions swapped; tf32: f32 on TF32 tensor cores.
template <typename T>
void matmul(const T *a, const Dims &aDims, const T *b, const Dims &bDims,
            const T *bias, const Dims &, T *c, const Dims &cDims,
            const MatmulParams &params, cudaStream_t stream) {
  detail::matmulWith(a, aDims, b, bDims, bias, static_cast<const T *>(nullptr),
                     c, cDims, params, stream, "matmul");
}

/// A product without a bias.
template <typename T>
void matmul(const T *a, const Dims &aDims, const T *b, const Dims &bDims, T *c,
            const Dims &cDims, const MatmulParams &params,
            cudaStream_t stream) {
  matmul(a, aDims, b, bDims, static_cast<const T *>(nullptr), Dims{}, c, cDims,
         params, stream);
}

/// c = (a @ b + bias) + addend (the CPU's matmulAdd): with a single
/// product, one cuBLASLt call, the addend as its C.
template <typename T>
void matmulAdd(const T *a, const Dims &aDims, const T *b, const Dims &bDims,
               const T *addend, const Dims &, const T *bias, const Dims &, T *c,
               const Dims &cDims, const MatmulParams &params,
               cudaStream_t stream) {
  detail::matmulWith(a, aDims, b, bDims, bias, addend, c, cDims, params, stream,
                     "matmul_add");
}

/// The product matmul stores in T (with its bias), widened to the compute
/// type (the CPU's matmulWide); matmul itself for a T that is its own.
template <typename T>
void matmulWide(const T *a, const Dims &aDims, const T *b, const Dims &bDims,
                const T *bias, const Dims &biasDims, detail::ComputeT<T> *c,
                const Dims &cDims, const MatmulParams &params,
                cudaStream_t stream) {
  if constexpr (std::is_same_v<detail::ComputeT<T>, T>)
    matmul(a, aDims, b, bDims, bias, biasDims, c, cDims, params, stream);
  else
    detail::matmulWideWith(a, aDims, b, bDims, bias,
                           static_cast<const float *>(nullptr), c, cDims,
                           params, stream, "matmul_wide");
}

/// c = addend + matmulWide's c, the sum in the compute type (the CPU's
/// matmulAddWide): with a single product, one cuBLASLt call, the addend
/// its f32 C.
template <typename T>
void matmulAddWide(const T *a, const Dims &aDims, const T *b, const Dims &bDims,
                   const detail::ComputeT<T> *addend, const Dims &addendDims,
                   const T *bias, const Dims &biasDims, detail::ComputeT<T> *c,
                   const Dims &cDims, const MatmulParams &params,
                   cudaStream_t stream) {
  if constexpr (std::is_same_v<detail::ComputeT<T>, T>)
    matmulAdd(a, aDims, b, bDims, addend, addendDims, bias, biasDims, c, cDims,
              params, stream);
  else
    detail::matmulWideWith(a, aDims, b, bDims, bias, addend, c, cDims, params,
                           stream, "matmul_add_wide");
}

namespace detail {

/// matmulBiasGrad (`ofB` false: the sum of a's rows) and matmulBiasGradB
/// (true: of b's rows). A single product whose summed operand is stored
/// [k, ...] (a transposed, or b not) runs as one cuBLASLt call with the
/// bias-gradient epilogue (BGRADB of cuBLAS's B, our a; BGRADA of its A,
/// our b); otherwise the product, then reduce over the rows in `scratch`
/// (Scratch.h's matmulBiasGradBytes, matmulBiasGradBBytes).
template <typename T>
void matmulBiasGradOf(bool ofB, const T *a, const Dims &aDims, const T *b,
                      const Dims &bDims, T *c, const Dims &cDims, T *biasGrad,
                      const MatmulParams &params, const Scratch &scratch,
                      cudaStream_t stream, const char *kernel) {
#if !defined(ZTC_CUDA_HOST_EMULATION)
  if constexpr (kCublasType<T>) {
    MatmulPlan p =
        planMatmul(aDims, bDims, cDims, params.transpose_a, params.transpose_b);
    if (p.batches == 1 && (ofB ? !p.transB : p.transA) && aDims.rank == 2 &&
        bDims.rank == 2) {
      GemmShape shape{1, p.m, p.n, p.k,      p.lda,    p.ldb,      p.ldc,
                      0, 0,   0,   p.transA, p.transB, params.tf32};
      if (cublasLtEpilogue(a, b, c, shape, static_cast<const T *>(nullptr),
                           static_cast<const T *>(nullptr), biasGrad, stream,
                           kernel, ofB))
        return;
    }
  }
#endif
  matmulWith(a, aDims, b, bDims, static_cast<const T *>(nullptr),
             static_cast<const T *>(nullptr), c, cDims, params, stream, kernel);
  reduce<T, ReduceKind::Sum>(ofB ? b : a, rowsOf(ofB ? bDims : aDims), 1,
                             biasGrad, scratch, stream);
}

} // namespace detail

/// A linear layer's weight and bias gradients from its output's gradient
/// a (the CPU's matmulBiasGrad): c = a @ b, and biasGrad the sum of a's
/// rows (detail::matmulBiasGradOf).
template <typename T>
void matmulBiasGrad(const T *a, const Dims &aDims, const T *b,
                    const Dims &bDims, T *c, const Dims &cDims, T *biasGrad,
                    const Dims &, const MatmulParams &params,
                    const Scratch &scratch, cudaStream_t stream) {
  detail::matmulBiasGradOf(false, a, aDims, b, bDims, c, cDims, biasGrad,
                           params, scratch, stream, "matmul_bias_grad");
}

/// The same for a layer whose weight multiplies from the right (the CPU's
/// matmulBiasGradB): c = a @ b, and biasGrad the sum of b's rows.
template <typename T>
void matmulBiasGradB(const T *a, const Dims &aDims, const T *b,
                     const Dims &bDims, T *c, const Dims &cDims, T *biasGrad,
                     const Dims &, const MatmulParams &params,
                     const Scratch &scratch, cudaStream_t stream) {
  detail::matmulBiasGradOf(true, a, aDims, b, bDims, c, cDims, biasGrad, params,
                           scratch, stream, "matmul_bias_grad_b");
}

//===----------------------------------------------------------------------===//
// Quantized weights
//===----------------------------------------------------------------------===//

/// y = x op(W) for an NF4 weight W of weight_shape [rows, cols]
/// (CpuKernels.h's matmulNf4): tiles of op(W)'s columns dequantized into
/// the call's planned scratch, each multiplied by cuBLAS into its columns of
/// y.
template <typename T>
void matmulNf4(const T *x, const Dims &xDims, const int8_t *packedCodes,
               const Dims &, const int8_t *absmaxCodes, const Dims &,
               const float *nested, const Dims &, const float *offset,
               const Dims &, T *y, const Dims &yDims,
               const MatmulNf4Params &params, const Scratch &scratch,
               cudaStream_t stream) {
  const auto *packed = reinterpret_cast<const uint8_t *>(packedCodes);
  const auto *absmax = reinterpret_cast<const uint8_t *>(absmaxCodes);
  const int64_t rows = params.weight_shape[0], cols = params.weight_shape[1];
  const bool transB = params.transpose_b;
  const int64_t k = transB ? cols : rows, n = transB ? rows : cols;
  const int64_t m = k ? xDims.numElements() / k : 0;
  (void)yDims;
  if (m == 0 || n == 0)
    return;
  const int64_t panel = nf4::tileColumns(k, n);
  T *tile = detail::scratchPart<T>(
      scratch, 0, scratch::matmulNf4TileBytes<T>(xDims, params), "matmul_nf4");
  if (!tile)
    return;
  detail::Nf4TileBody<T> body;
  body.packed = packed;
  body.absmax = absmax;
  body.nested = nested;
  body.offset = offset;
  body.tile = tile;
  for (int q = 0; q < 256; ++q)
    body.scales.value[q] = blockwise8bit::kSignedCodes[q];
  for (int q = 0; q < 16; ++q)
    body.values[q] = nf4::kNf4Codes[q];
  for (int64_t j0 = 0; j0 < n; j0 += panel) {
    const int64_t width = n - j0 < panel ? n - j0 : panel;
    // Rows j0.. of W ([width, K]) when transposed, else columns j0.. of
    // every row ([K, width]).
    const int64_t outer = transB ? width : k, inner = transB ? k : width;
    body.first = transB ? j0 * cols : j0;
    body.rowStep = cols;
    body.inner = inner;
    detail::launchElements(outer * inner, body, stream, "matmul_nf4");
    detail::gemm(x, tile, y + j0,
                 {1, m, width, k, k, inner, n, 0, 0, 0, false, transB}, false,
                 stream, "matmul_nf4");
  }
}

} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_LINALG_CUH
