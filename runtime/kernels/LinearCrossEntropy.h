//===- LinearCrossEntropy.h - the fused loss's shape and chunks -*- C++ -*-===//
//
// The one reading of nn.linear_cross_entropy's operands that both kernel
// libraries share: hidden states x [N, D], the classifier's weight w stored
// [D, V] (the product's right operand) or, with `transpose_b`, [V, D] (a
// tied embedding), and N class indices. The kernels never hold the [N, V]
// logits: they work through the rows in chunks, and the chunk's rows are
// fixed here, so the CUDA library's planned scratch (cuda/Scratch.h) and
// its kernels agree on them.
//
// Only the C++17 standard library is used; under nvcc every member is also
// a device function (ZTC_HOST_DEVICE).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_LINEARCROSSENTROPY_H
#define ZTC_RUNTIME_KERNELS_LINEARCROSSENTROPY_H

#include "Dims.h"
#include "Library.h"

#include <cstdint>

namespace ztc {

struct LinearCrossEntropyShape {
  /// N rows, D features, V classes.
  int64_t rows = 0, width = 0, classes = 0;
  /// w is stored [V, D].
  bool transposed = false;

  ZTC_HOST_DEVICE LinearCrossEntropyShape(const Dims &x, const Dims &w,
                                          const LinearCrossEntropyParams &p)
      : rows(x.d[0]), width(x.d[1]), classes(p.transpose_b ? w.d[0] : w.d[1]),
        transposed(p.transpose_b) {}

  /// The stored row length of w, for a product with w as [D, V] (transB:
  /// read it transposed) or as [V, D] (the gradient's products).
  ZTC_HOST_DEVICE int64_t weightStride() const {
    return transposed ? width : classes;
  }

  /// Rows per chunk: about as many logits as x has elements (so a chunk
  /// costs what one more activation of the last layer would), in whole
  /// 16s of rows, at least `floorRows` (a product needs rows to be fast),
  /// at most N. For GPT-2 small at 8 x 1024 tokens: 128 rows, 26 MB of f32
  /// logits instead of 1.6 GB.
  ZTC_HOST_DEVICE int64_t chunkRows(int64_t floorRows) const {
    if (rows == 0)
      return 0;
    int64_t chunk = classes > 0 ? (rows * width + classes - 1) / classes : rows;
    chunk = (chunk + 15) / 16 * 16;
    if (chunk < floorRows)
      chunk = floorRows;
    return chunk > rows ? rows : chunk < 1 ? 1 : chunk;
  }
};

} // namespace ztc

#endif // ZTC_RUNTIME_KERNELS_LINEARCROSSENTROPY_H
