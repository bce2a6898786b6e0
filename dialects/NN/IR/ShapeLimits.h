//===- ShapeLimits.h - the largest tensor ztc accepts -----------*- C++ -*-===//
//
// Shapes come from model files, and a damaged or hostile file can declare a
// dimension of 2^63 - 1. Every shape ztc builds (at import, and each result
// of the conversion to nn) stays within 2^48 elements, counting every
// dimension as at least 1 so that no product of some of its dimensions
// overflows either. Beyond that, int64 arithmetic on sizes and byte offsets
// could overflow; no real tensor comes near (2^48 floats are 1 PiB).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_NN_IR_SHAPELIMITS_H
#define ZTC_DIALECTS_NN_IR_SHAPELIMITS_H

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace mlir::ztc::nn {

constexpr int64_t kMaxTensorElements = int64_t(1) << 48;

/// The most dimensions a tensor may have: what the kernel libraries' shape
/// type holds (runtime/kernels/Dims.h's kMaxRank; ShapeLimitsTest checks
/// that the two agree). A higher rank is refused where it first appears, at
/// import or at the node whose result would have it.
constexpr int64_t kMaxRank = 8;

/// Whether `shape` has at most kMaxRank dimensions.
inline bool isWithinRankLimit(ArrayRef<int64_t> shape) {
  return int64_t(shape.size()) <= kMaxRank;
}

/// Whether each static dimension of `shape` is non-negative and their
/// product, each counted as at least 1, is at most kMaxTensorElements.
/// Dynamic dimensions are skipped.
inline bool isWithinSizeLimit(ArrayRef<int64_t> shape) {
  int64_t elements = 1;
  for (int64_t dim : shape) {
    if (ShapedType::isDynamic(dim))
      continue;
    if (dim < 0 || std::max<int64_t>(dim, 1) > kMaxTensorElements / elements)
      return false;
    elements *= std::max<int64_t>(dim, 1);
  }
  return true;
}

/// The bytes a tensor or buffer of static shape `type` holds, a whole byte
/// per element narrower than one (bools): how buffers are laid out.
inline int64_t storageBytes(ShapedType type) {
  return type.getNumElements() *
         int64_t((type.getElementTypeBitWidth() + 7) / 8);
}

/// "[2, 3, ?]", for the messages that refuse a shape; past rank 8,
/// "[1, 2, 3, 4, ..., 9, 10] (rank 10)".
inline std::string describeShape(ArrayRef<int64_t> shape) {
  // A shape from a file has any rank: past 8 dimensions, the first 4 and
  // the last 2, and the rank, keep the message short.
  constexpr size_t kHead = 4, kTail = 2;
  bool elide = shape.size() > 8;
  std::string text = "[";
  for (auto [i, dim] : llvm::enumerate(shape)) {
    if (elide && i >= kHead && i < shape.size() - kTail) {
      if (i == kHead)
        text += ", ...";
      continue;
    }
    text +=
        (i ? ", " : "") +
        (ShapedType::isDynamic(dim) ? std::string("?") : std::to_string(dim));
  }
  text += "]";
  if (elide)
    text += " (rank " + std::to_string(shape.size()) + ")";
  return text;
}

} // namespace mlir::ztc::nn

#endif // ZTC_DIALECTS_NN_IR_SHAPELIMITS_H
