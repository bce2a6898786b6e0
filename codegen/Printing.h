//===- Printing.h - C++ spellings the printers share ------------*- C++ -*-===//
//
// How element types and literals are written in generated C++ and CUDA
// alike: used by the target-neutral emitter (Emit.cpp) and by each target's
// printer (TargetPrinter.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_CODEGEN_PRINTING_H
#define ZTC_CODEGEN_PRINTING_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/ValueRange.h"

#include <string>

namespace mlir::ztc::codegen {

/// The C++ type buffers of `type` store.
std::string storageType(Type type);
/// The C++ type scalars of `type` are computed in (f16 and bf16 in float).
std::string computeType(Type type);
bool isHalf(Type type);
/// An int64_t literal (INT64_MIN has none of its own; any other value is a
/// decimal literal of a type that holds it).
std::string intLiteral(int64_t value);
/// A literal of `value` in `type`'s computation (f64: double, else float).
std::string floatLiteral(double value, Type type);

/// Whether `input`, broadcast to `output`, has the output's innermost
/// dimension that is not 1 (false for an output of ones).
bool readsInnermost(MemRefType input, MemRefType output);

/// The elements of the innermost output dimensions over which every input
/// is either read in order (it has those dimensions) or not at all (they
/// are broadcast): in a run of that many consecutive outputs, each input's
/// index is its index at the run's start, plus the position in the run if
/// `readsInnermost`. A bias added to rows, a row statistic or a per-channel
/// scale of NCHW data runs over the row, the row or the image plane.
int64_t broadcastRun(ValueRange inputs, MemRefType output);

} // namespace mlir::ztc::codegen

#endif // ZTC_CODEGEN_PRINTING_H
