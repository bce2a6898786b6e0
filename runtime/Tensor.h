//===- Tensor.h - host tensors and element types ----------------*- C++ -*-===//
//
// The element types the runtime moves between files, the artifact and the
// backends, and a host tensor that owns its bytes. Names follow the
// manifest ("float32", "int64", ...); shapes print as `float32[8,64]` in
// every message, so users see one notation everywhere.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_TENSOR_H
#define ZTC_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ztc::rt {

/// Element types of the manifest, .npy and safetensors files.
enum class DType : uint8_t {
  Float32,
  Float64,
  Float16,
  BFloat16,
  Int64,
  Int32,
  Int8,
  Bool,
};

/// Bytes per element.
size_t dtypeSize(DType dtype);

/// The manifest name: "float32", "float64", "float16", "bfloat16", "int64",
/// "int32", "int8", "bool".
const char *dtypeName(DType dtype);

/// Parses a manifest name; nullopt for anything else.
std::optional<DType> parseDType(const std::string &name);

/// Whether `dtype` is float32, float64, float16 or bfloat16.
bool isFloat(DType dtype);

/// The elements `bytes` holds in `from` as `to`, both float types, each
/// rounded to nearest even (through float32 from float64).
std::vector<uint8_t> convertFloats(const std::vector<uint8_t> &bytes,
                                   DType from, DType to);

/// `float32[8,64]`; a scalar prints as `float32[]`.
std::string describeType(DType dtype, const std::vector<int64_t> &shape);

/// Product of `shape` (1 for a scalar); nullopt if a dimension is negative or
/// the product (times `elementSize`) overflows int64.
std::optional<int64_t> checkedByteSize(const std::vector<int64_t> &shape,
                                       size_t elementSize);

/// A dense row-major host tensor owning its bytes.
struct Tensor {
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  Tensor() = default;
  /// A zero-filled tensor of `shape` (the shape must be valid).
  Tensor(DType dtype, std::vector<int64_t> shape);

  int64_t numElements() const;
  size_t byteSize() const { return bytes.size(); }
  std::string describe() const { return describeType(dtype, shape); }

  template <typename T> T *data() {
    return reinterpret_cast<T *>(bytes.data());
  }
  template <typename T> const T *data() const {
    return reinterpret_cast<const T *>(bytes.data());
  }
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_TENSOR_H
