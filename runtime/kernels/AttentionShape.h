//===- AttentionShape.h - attention's operand shapes ------------*- C++ -*-===//
//
// The one reading of nn.attention's operand shapes that both kernel
// libraries share: q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv], all
// contiguous with the same batch dimensions (batch and heads, flattened to
// one index), and the optional additive mask of the scores' rank, each
// dimension 1 (repeated) or the scores'. Which keys a query sees (causal or
// not) is stated here too, so the CPU and CUDA kernels skip the same ones.
//
// Only the C++17 standard library is used; under nvcc every member is also
// a device function (ZTC_HOST_DEVICE).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_ATTENTIONSHAPE_H
#define ZTC_RUNTIME_KERNELS_ATTENTIONSHAPE_H

#include "Dims.h"

#include <cstdint>

namespace ztc {

struct AttentionShape {
  /// The flattened batch dimensions, the queries, the keys, the head sizes
  /// of q and k (d) and of v (dv).
  int64_t batch = 1, tq = 0, tk = 0, d = 0, dv = 0;
  /// The scores' batch dimensions, for the mask's offsets.
  Dims batchDims;
  /// The mask's element strides: per batch dimension, then along the
  /// queries and the keys; 0 where the mask repeats. `hasMask` false: none.
  int64_t maskBatchStride[kMaxRank] = {0};
  int64_t maskRowStride = 0, maskColStride = 0;
  bool hasMask = false;

  AttentionShape(const Dims &q, const Dims &k, const Dims &v, const Dims &mask,
                 bool withMask) {
    int64_t rank = q.rank;
    tq = q.d[rank - 2];
    d = q.d[rank - 1];
    tk = k.d[rank - 2];
    dv = v.d[rank - 1];
    batchDims.rank = rank - 2;
    for (int64_t i = 0; i < rank - 2; ++i) {
      batchDims.d[i] = q.d[i];
      batch *= q.d[i];
    }
    hasMask = withMask;
    if (!withMask)
      return;
    // Contiguous strides of the mask, zeroed where a dimension repeats.
    int64_t stride = 1;
    for (int64_t i = rank - 1; i >= 0; --i) {
      int64_t effective = mask.d[i] == 1 ? 0 : stride;
      if (i == rank - 1)
        maskColStride = effective;
      else if (i == rank - 2)
        maskRowStride = effective;
      else
        maskBatchStride[i] = effective;
      stride *= mask.d[i];
    }
  }

  /// The offset of batch entry `b`'s scores in the mask.
  ZTC_HOST_DEVICE int64_t maskBase(int64_t b) const {
    int64_t offset = 0;
    for (int64_t i = batchDims.rank - 1; i >= 0; --i) {
      offset += (b % batchDims.d[i]) * maskBatchStride[i];
      b /= batchDims.d[i];
    }
    return offset;
  }

  /// The keys query `i` sees: [0, keyEnd(i)); causal attention sees keys
  /// j <= i (PyTorch's is_causal, aligned at the top left).
  ZTC_HOST_DEVICE int64_t keyEnd(int64_t i, bool causal) const {
    return causal ? (i + 1 < tk ? i + 1 : tk) : tk;
  }
};

} // namespace ztc

#endif // ZTC_RUNTIME_KERNELS_ATTENTIONSHAPE_H
