//===- ElementTypes.h - facts about float element types ---------*- C++ -*-===//
//
// What the dialects and passes say about a float element type in one
// place: whether it is a half type, and the type its arithmetic runs in
// (Library.def's C, the runtime's numeric::ComputeT): f32 for f16 and
// bf16, the type itself otherwise.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_DIALECTS_ELEMENTTYPES_H
#define ZTC_DIALECTS_ELEMENTTYPES_H

#include "mlir/IR/BuiltinTypes.h"

namespace mlir::ztc {

/// Whether `type` is f16 or bf16.
inline bool isHalfFloat(Type type) { return type.isF16() || type.isBF16(); }

/// f32 for a half type, else `type`.
inline Type computeElementType(Type type) {
  return isHalfFloat(type) ? Float32Type::get(type.getContext()) : type;
}

} // namespace mlir::ztc

#endif // ZTC_DIALECTS_ELEMENTTYPES_H
