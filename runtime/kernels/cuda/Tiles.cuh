//===- Tiles.cuh - kernels that share tiles in shared memory ----*- C++ -*-===//
//
// A tile kernel runs one body per block of kTileThreads threads, which
// loads tiles of its operands into the block's shared memory and works on
// them in phases separated by barriers. The body is written once for the
// device and for the host emulation (test/unit/runtime/CudaKernelsTest.cpp):
//
//   threads.each([&](int t) { ... });  // every thread t, one phase
//   threads.sync();                    // the barrier between phases
//
// On the device each() runs its function once, for the calling thread, and
// sync() is __syncthreads(); the host runs each() for every t in turn and
// sync() does nothing. That is the same computation as long as a phase
// never reads what another thread of the block writes in that phase, which
// is what the barriers are for. What a thread keeps from one phase to the
// next lives in a PerThread value: the thread's registers on the device,
// an array indexed by t on the host. The host fills shared memory with NaN
// before each block, so a phase that reads what no phase wrote shows.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_TILES_CUH
#define ZTC_RUNTIME_KERNELS_CUDA_TILES_CUH

#include "Common.cuh"

#include <cuda_runtime_api.h>
#if defined(__CUDACC__) && !defined(ZTC_CUDA_HOST_EMULATION)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#endif

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ztc::cuda::detail {

constexpr int kTileThreads = 256;

/// Shared memory a block may use without asking for more.
constexpr int64_t kDefaultSharedBytes = 48 * 1024;

/// The threads of a tile kernel's block (see the file comment).
struct TileThreads {
  template <typename F> ZTC_HOST_DEVICE void each(F &&f) const {
#if defined(__CUDA_ARCH__)
    f(static_cast<int>(threadIdx.x));
#else
    for (int t = 0; t < kTileThreads; ++t)
      f(t);
#endif
  }
  ZTC_HOST_DEVICE void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
};

/// A value each thread keeps across phases: registers on the device, one
/// per thread on the host.
template <typename S> struct PerThread {
#if defined(__CUDA_ARCH__)
  S value;
  __device__ S &operator[](int) { return value; }
#else
  S values[kTileThreads];
  S &operator[](int t) { return values[t]; }
#endif
};

/// A value each warp keeps across phases (warp-wide values: WarpAccumulator):
/// its threads' registers on the device, one per warp on the host.
template <typename S> struct PerWarp {
#if defined(__CUDA_ARCH__)
  S value;
  __device__ S &operator[](int) { return value; }
#else
  S values[kTileThreads / 32];
  S &operator[](int t) { return values[t / 32]; }
#endif
};

/// Byte offsets of a block's shared arrays, each 32-byte aligned (as the
/// tensor cores' loads and stores need).
struct SharedLayout {
  int64_t bytes = 0;
  /// Reserves `count` elements of E and returns their offset.
  template <typename E> int64_t take(int64_t count) {
    const int64_t at = (bytes + 31) / 32 * 32;
    bytes = at + count * int64_t(sizeof(E));
    return at;
  }
};

template <typename E>
ZTC_HOST_DEVICE E *sharedAt(unsigned char *base, int64_t offset) {
  return reinterpret_cast<E *>(base + offset);
}

#if !defined(ZTC_CUDA_HOST_EMULATION)
extern __shared__ __align__(128) unsigned char tileShared[];

template <typename Body>
__global__ void __launch_bounds__(kTileThreads)
    tileBlocksKernel(int64_t blocks, Body body) {
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    body(block, tileShared, TileThreads{});
    __syncthreads(); // the next block's loads overwrite this one's tiles
  }
}
#endif

/// Whether the device gives one block `bytes` of shared memory (asking for
/// more than kDefaultSharedBytes where it must). The host emulation has no
/// limit.
inline bool tileSharedFits(int64_t bytes) {
#if defined(ZTC_CUDA_HOST_EMULATION)
  (void)bytes;
  return true;
#else
  if (bytes <= kDefaultSharedBytes)
    return true;
  int device = 0, optIn = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optIn, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                             device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return bytes <= optIn;
#endif
}

/// Runs `body(block, shared, threads)` for block in [0, blocks), a block of
/// kTileThreads threads each with `sharedBytes` of shared memory (which
/// tileSharedFits said the device has).
template <typename Body>
void launchTileBlocks(int64_t blocks, int64_t sharedBytes, const Body &body,
                      cudaStream_t stream, const char *kernel) {
  if (blocks <= 0)
    return;
#if defined(ZTC_CUDA_HOST_EMULATION)
  (void)stream;
  (void)kernel;
  std::vector<float> shared((sharedBytes + 3) / 4);
  for (int64_t block = 0; block < blocks; ++block) {
    std::fill(shared.begin(), shared.end(), __builtin_nanf(""));
    body(block, reinterpret_cast<unsigned char *>(shared.data()),
         TileThreads{});
  }
#else
  if (sharedBytes > kDefaultSharedBytes &&
      !checkCuda(
          cudaFuncSetAttribute(tileBlocksKernel<Body>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(sharedBytes)),
          "cudaFuncSetAttribute", kernel))
    return;
  tileBlocksKernel<<<blockCount(blocks, 1), kTileThreads,
                     static_cast<size_t>(sharedBytes), stream>>>(blocks, body);
  checkCuda(cudaGetLastError(), "kernel launch", kernel);
#endif
}

//===----------------------------------------------------------------------===//
// Products of tiles
//===----------------------------------------------------------------------===//
//
// The two products every tile kernel here is made of, on a block of
// kTileThreads threads:
//  - TileDots: a [kTileRows, kTileCols] tile of dot products of rows of A
//    with rows of B (each thread 2 x 4 of them);
//  - TileSlice: a [kTileRows, n] accumulator (n <= kTileSliceCols) that
//    adds W X, W a [kTileRows, kTileCols] tile and X [kTileCols, n] (each
//    thread 4 rows by n / 16 columns, in registers).
// Rows of the shared tiles are padded by a 4-byte word (sharedRowLength) so
// that the threads of a warp that read different rows read different
// banks.

constexpr int kTileRows = 64, kTileCols = 32;
constexpr int kTileSliceCols = 128;

/// The padded row length of a shared tile of `length` elements of E.
template <typename E>
ZTC_HOST_DEVICE constexpr int64_t sharedRowLength(int64_t length) {
  return length + (sizeof(E) >= 4 ? 1 : int64_t(4 / sizeof(E)));
}

/// Thread t's entries of a [kTileRows, kTileCols] tile: rows t / 8 and
/// t / 8 + 32, columns t % 8 + 8 m.
struct TileDots {
  static constexpr int kRows = 2, kCols = 4;
  ZTC_HOST_DEVICE static int row(int t, int a) { return (t >> 3) + 32 * a; }
  ZTC_HOST_DEVICE static int col(int t, int m) { return (t & 7) + 8 * m; }

  /// out[a][m] = sum over e < n of A[row a][e] * B[col m][e], A and B
  /// shared tiles with rows of lda and ldb elements.
  template <typename Acc, typename TA, typename TB>
  ZTC_HOST_DEVICE static void compute(int t, const TA *A, int64_t lda,
                                      const TB *B, int64_t ldb, int64_t n,
                                      Acc (&out)[kRows][kCols]) {
    ZTC_UNROLL
    for (int a = 0; a < kRows; ++a)
      ZTC_UNROLL
    for (int m = 0; m < kCols; ++m)
      out[a][m] = 0;
    const TA *rowA[kRows];
    const TB *rowB[kCols];
    ZTC_UNROLL
    for (int a = 0; a < kRows; ++a)
      rowA[a] = A + row(t, a) * lda;
    ZTC_UNROLL
    for (int m = 0; m < kCols; ++m)
      rowB[m] = B + col(t, m) * ldb;
    for (int64_t e = 0; e < n; ++e) {
      Acc x[kRows], y[kCols];
      ZTC_UNROLL
      for (int a = 0; a < kRows; ++a)
        x[a] = load(rowA[a][e]);
      ZTC_UNROLL
      for (int m = 0; m < kCols; ++m)
        y[m] = load(rowB[m][e]);
      ZTC_UNROLL
      for (int a = 0; a < kRows; ++a)
        ZTC_UNROLL
      for (int m = 0; m < kCols; ++m)
        out[a][m] += x[a] * y[m];
    }
  }
};

/// Thread t's part of a [kTileRows, n] accumulator: rows 4 (t / 16) + a,
/// columns t % 16 + 16 m.
struct TileSlice {
  static constexpr int kRows = 4, kCols = kTileSliceCols / 16;
  ZTC_HOST_DEVICE static int row(int t, int a) { return (t >> 4) * 4 + a; }
  ZTC_HOST_DEVICE static int col(int t, int m) { return (t & 15) + 16 * m; }

  template <typename Acc> using Values = Acc[kRows][kCols];

  template <typename Acc> ZTC_HOST_DEVICE static void zero(Values<Acc> &acc) {
    ZTC_UNROLL
    for (int a = 0; a < kRows; ++a)
      ZTC_UNROLL
    for (int m = 0; m < kCols; ++m)
      acc[a][m] = 0;
  }

  /// acc[a][m] += sum over c < kTileCols of W[row a][c] * X[c][col m], for
  /// the columns below n; W's rows hold ldw elements, X's ldx.
  template <typename Acc, typename TX>
  ZTC_HOST_DEVICE static void add(int t, const Acc *W, int64_t ldw, const TX *X,
                                  int64_t ldx, int64_t n, Values<Acc> &acc) {
    const Acc *rowW[kRows];
    ZTC_UNROLL
    for (int a = 0; a < kRows; ++a)
      rowW[a] = W + row(t, a) * ldw;
    for (int c = 0; c < kTileCols; ++c) {
      Acc w[kRows];
      ZTC_UNROLL
      for (int a = 0; a < kRows; ++a)
        w[a] = rowW[a][c];
      const TX *x = X + c * ldx;
      ZTC_UNROLL
      for (int m = 0; m < kCols; ++m) {
        if (col(t, m) >= n)
          continue;
        const Acc y = load(x[col(t, m)]);
        ZTC_UNROLL
        for (int a = 0; a < kRows; ++a)
          acc[a][m] += w[a] * y;
      }
    }
  }
};

//===----------------------------------------------------------------------===//
// Tensor cores
//===----------------------------------------------------------------------===//
//
// Products of 16-bit tiles in shared memory on the tensor cores (sm_80 and
// later, through nvcuda::wmma): a warp multiplies 16 x 16 x 16 pieces into
// a 16 x 16 f32 accumulator. A WarpAccumulator's functions are called by
// every thread of a warp (`lane` its rank), the same calls in the same
// order; the host emulation computes the same sums in f32, in order, once
// per warp (by its lane 0). Tiles' rows hold a multiple of 8 elements (4
// for f32), and each piece starts at a multiple of 16 rows and columns of
// an array that starts on 32 bytes.

/// The CUDA type of a 16-bit float on the tensor cores.
template <typename T> struct CudaHalf;
#if defined(__CUDACC__) && !defined(ZTC_CUDA_HOST_EMULATION)
template <> struct CudaHalf<ztc::bf16> { using type = __nv_bfloat16; };
template <> struct CudaHalf<ztc::f16> { using type = __half; };
#endif

/// How a product's second factor B [k, 16] is stored: by rows (RowMajor),
/// or as the rows of its transpose (ColMajor).
enum class FragmentLayout { RowMajor, ColMajor };

/// Whether the tile kernel of `Body` that this device runs was compiled
/// with the tensor cores WarpAccumulator uses: from PTX for compute
/// capability 8.0 or later (ZTC_CUDA_ARCHS may name older ones), for a
/// device that has them. The host emulation has them. The driver is asked
/// once a process (a process runs on one device).
template <typename Body> bool tileKernelHasTensorCores() {
#if defined(ZTC_CUDA_HOST_EMULATION)
  return true;
#else
  static const bool compiled = [] {
    cudaFuncAttributes attributes{};
    if (cudaFuncGetAttributes(&attributes, tileBlocksKernel<Body>) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return attributes.ptxVersion >= 80 && attributes.binaryVersion >= 80;
  }();
  return compiled;
#endif
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define ZTC_TENSOR_CORES 1
#endif

/// A warp's 16 x 16 f32 accumulator (see above). Device code compiled for
/// an architecture without the tensor cores traps: the host never launches
/// it there (tileKernelHasTensorCores).
struct WarpAccumulator {
#if defined(ZTC_TENSOR_CORES)
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f;
#elif !defined(__CUDA_ARCH__)
  float v[16][16];
#endif

  ZTC_HOST_DEVICE void zero(int lane) {
    (void)lane;
#if defined(ZTC_TENSOR_CORES)
    nvcuda::wmma::fill_fragment(f, 0.0f);
#elif !defined(__CUDA_ARCH__)
    if (lane == 0)
      for (auto &row : v)
        for (float &x : row)
          x = 0;
#endif
  }

  /// this += A B: A [16, k] by rows of `lda` at `a`; B [k, 16] at `b`, by
  /// rows of `ldb` or (ColMajor) as 16 rows of `ldb` of its transpose. k
  /// a multiple of 16.
  template <FragmentLayout kB, typename H>
  ZTC_HOST_DEVICE void add(int lane, const H *a, int64_t lda, const H *b,
                           int64_t ldb, int64_t k) {
    (void)lane;
#if defined(ZTC_TENSOR_CORES)
    namespace wmma = nvcuda::wmma;
    using W = typename CudaHalf<H>::type;
    using BLayout = std::conditional_t<kB == FragmentLayout::RowMajor,
                                       wmma::row_major, wmma::col_major>;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, W, BLayout> fb;
    for (int64_t e = 0; e < k; e += 16) {
      wmma::load_matrix_sync(fa, reinterpret_cast<const W *>(a) + e,
                             static_cast<unsigned>(lda));
      const int64_t bOffset = kB == FragmentLayout::RowMajor ? e * ldb : e;
      wmma::load_matrix_sync(fb, reinterpret_cast<const W *>(b) + bOffset,
                             static_cast<unsigned>(ldb));
      wmma::mma_sync(f, fa, fb, f);
    }
#elif defined(__CUDA_ARCH__)
    __trap();
#else
    if (lane != 0)
      return;
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) {
        float sum = v[i][j];
        for (int64_t e = 0; e < k; ++e)
          sum += numeric::load(a[i * lda + e]) *
                 numeric::load(kB == FragmentLayout::RowMajor ? b[e * ldb + j]
                                                              : b[j * ldb + e]);
        v[i][j] = sum;
      }
#endif
  }

  /// Stores the accumulator into (loads it from) 16 rows of `ld` floats.
  ZTC_HOST_DEVICE void store(int lane, float *dst, int64_t ld) const {
    (void)lane;
#if defined(ZTC_TENSOR_CORES)
    nvcuda::wmma::store_matrix_sync(dst, f, static_cast<unsigned>(ld),
                                    nvcuda::wmma::mem_row_major);
#elif !defined(__CUDA_ARCH__)
    if (lane == 0)
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j)
          dst[i * ld + j] = v[i][j];
#endif
  }
  ZTC_HOST_DEVICE void load(int lane, const float *src, int64_t ld) {
    (void)lane;
#if defined(ZTC_TENSOR_CORES)
    nvcuda::wmma::load_matrix_sync(f, src, static_cast<unsigned>(ld),
                                   nvcuda::wmma::mem_row_major);
#elif !defined(__CUDA_ARCH__)
    if (lane == 0)
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j)
          v[i][j] = src[i * ld + j];
#endif
  }
};

} // namespace ztc::cuda::detail

#endif // ZTC_RUNTIME_KERNELS_CUDA_TILES_CUH
