//===- MatmulPlan.h - batched matmul as row-major GEMMs ---------*- C++ -*-===//
//
// How a numpy-style matmul (batch dimensions broadcast, 1-D operands
// promoted) maps onto row-major GEMMs, shared by the CPU and CUDA kernel
// libraries. An operand may be stored transposed (its last two dimensions
// swapped): ztc-fold-transposes hands the matmul a weight as it is stored
// instead of copying its transpose first. Host code only.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_MATMULPLAN_H
#define ZTC_RUNTIME_KERNELS_MATMULPLAN_H

#include "Dims.h"

#include <cstdint>

namespace ztc {

/// C[m, n] = op(A)[m, k] * op(B)[k, n] for every batch of C, where op
/// transposes an operand stored transposed. Leading dimensions are those of
/// the stored matrices. The products run in `outer` groups of `inner`;
/// within a group A and B advance by strideA and strideB, C by m * n.
struct MatmulPlan {
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 1, ldb = 1, ldc = 1;
  bool transA = false, transB = false;
  /// The number of products (C's batch size); 0: nothing to do.
  int64_t batches = 0;
  /// Every product is one [batches * m, k] x [k, n] product: B is shared
  /// and A's rows are contiguous across batches.
  bool single = false;
  int64_t inner = 1, outer = 1, strideA = 0, strideB = 0;

  /// The offsets of group `o`'s first A and B.
  void offsets(int64_t o, int64_t &aOffset, int64_t &bOffset) const {
    stridedOffsets(o, cBatch, split, aStride, bStride, aOffset, bOffset);
  }

  // C's batch dimensions before the inner group, and per C batch dimension
  // the stride of A and B (0 where they broadcast).
  int64_t split = 0;
  int64_t cBatch[8] = {0}, aStride[8] = {0}, bStride[8] = {0};
};

/// The plan of matmul(A, B) -> C for stored shapes aDims, bDims (1-D
/// operands are never transposed).
inline MatmulPlan planMatmul(const Dims &aDims, const Dims &bDims,
                             const Dims &cDims, bool transA, bool transB) {
  MatmulPlan p;
  bool aVector = aDims.rank == 1, bVector = bDims.rank == 1;
  p.transA = transA && !aVector;
  p.transB = transB && !bVector;
  int64_t aLast = aDims.d[aDims.rank - 1];
  int64_t aPrev = aVector ? 1 : aDims.d[aDims.rank - 2];
  p.m = p.transA ? aLast : aPrev;
  p.k = p.transA ? aPrev : aLast;
  int64_t bLast = bVector ? 1 : bDims.d[bDims.rank - 1];
  int64_t bPrev = bVector ? bDims.d[0] : bDims.d[bDims.rank - 2];
  p.n = p.transB ? bPrev : bLast;
  auto atLeastOne = [](int64_t v) { return v > 1 ? v : int64_t(1); };
  p.lda = atLeastOne(p.transA ? p.m : p.k);
  p.ldb = atLeastOne(p.transB ? p.k : p.n);
  p.ldc = atLeastOne(p.n);

  int64_t aBatchRank = aDims.rank > 2 ? aDims.rank - 2 : 0;
  int64_t bBatchRank = bDims.rank > 2 ? bDims.rank - 2 : 0;
  int64_t cBatchRank = cDims.rank - (aVector ? 0 : 1) - (bVector ? 0 : 1);
  int64_t stride = p.m * p.k;
  for (int64_t i = 1; i <= aBatchRank; ++i) {
    int64_t size = aDims.d[aBatchRank - i];
    p.aStride[cBatchRank - i] = size == 1 ? 0 : stride;
    stride *= size;
  }
  stride = p.k * p.n;
  for (int64_t i = 1; i <= bBatchRank; ++i) {
    int64_t size = bDims.d[bBatchRank - i];
    p.bStride[cBatchRank - i] = size == 1 ? 0 : stride;
    stride *= size;
  }
  int64_t aBatches = 1, bBatches = 1;
  for (int64_t i = 0; i < aBatchRank; ++i)
    aBatches *= aDims.d[i];
  for (int64_t i = 0; i < bBatchRank; ++i)
    bBatches *= bDims.d[i];
  p.batches = 1;
  for (int64_t i = 0; i < cBatchRank; ++i) {
    p.cBatch[i] = cDims.d[i];
    p.batches *= cDims.d[i];
  }
  if (p.batches == 0)
    return p;
  p.single = bBatches == 1 && aBatches == p.batches && !p.transA;

  // The innermost batch dims over which A and B each advance by one stride
  // form a group; the outer ones (only broadcasts like [2,1] x [1,3] leave
  // any) are looped over.
  p.split = cBatchRank;
  for (int64_t i = cBatchRank - 1; i >= 0; --i) {
    int64_t size = cDims.d[i];
    if (size != 1) {
      if (p.inner == 1) {
        p.strideA = p.aStride[i];
        p.strideB = p.bStride[i];
      } else if (p.aStride[i] != p.strideA * p.inner ||
                 p.bStride[i] != p.strideB * p.inner) {
        break;
      }
      p.inner *= size;
    }
    p.split = i;
  }
  p.outer = p.batches / p.inner;
  return p;
}

} // namespace ztc

#endif // ZTC_RUNTIME_KERNELS_MATMULPLAN_H
