//===- Printing.cpp - C++ spellings shared by the emitter's printers -----===//
//
// See Printing.h.
//
//===----------------------------------------------------------------------===//

#include "codegen/Printing.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace mlir::ztc::codegen {

std::string storageType(Type type) {
  if (type.isF32())
    return "float";
  if (type.isF64())
    return "double";
  if (type.isF16())
    return "ztc::f16";
  if (type.isBF16())
    return "ztc::bf16";
  if (type.isSignlessInteger(64))
    return "int64_t";
  if (type.isSignlessInteger(32))
    return "int32_t";
  if (type.isSignlessInteger(8))
    return "int8_t";
  return "bool";
}

std::string computeType(Type type) {
  if (type.isF16() || type.isBF16())
    return "float";
  return storageType(type);
}

bool isHalf(Type type) { return type.isF16() || type.isBF16(); }

std::string intLiteral(int64_t value) {
  if (value == std::numeric_limits<int64_t>::min())
    return "INT64_MIN";
  return std::to_string(value);
}

std::string floatLiteral(double value, Type type) {
  if (std::isnan(value))
    return "NAN";
  if (std::isinf(value))
    return value > 0 ? "INFINITY" : "(-INFINITY)";
  std::string text = llvm::formatv("{0:e16}", value).str();
  return type.isF64() ? text : "static_cast<float>(" + text + ")";
}

bool readsInnermost(MemRefType input, MemRefType output) {
  ArrayRef<int64_t> in = input.getShape(), out = output.getShape();
  for (int64_t k = int64_t(out.size()) - 1; k >= 0; --k)
    if (out[k] != 1) {
      int64_t at = k - int64_t(out.size() - in.size());
      return at >= 0 && in[at] == out[k];
    }
  return false;
}

int64_t broadcastRun(ValueRange inputs, MemRefType output) {
  ArrayRef<int64_t> out = output.getShape();
  int64_t run = 1;
  for (int64_t k = int64_t(out.size()) - 1; k >= 0; --k) {
    if (out[k] == 1)
      continue;
    for (Value input : inputs) {
      auto type = cast<MemRefType>(input.getType());
      ArrayRef<int64_t> in = type.getShape();
      int64_t at = k - int64_t(out.size() - in.size());
      if ((at >= 0 && in[at] == out[k]) != readsInnermost(type, output))
        return run;
    }
    run *= out[k];
  }
  return run;
}

} // namespace mlir::ztc::codegen
