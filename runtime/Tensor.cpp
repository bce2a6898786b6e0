//===- Tensor.cpp - host tensors and element types ------------------------===//
//
// Element-type tables and the host tensor.
//
//===----------------------------------------------------------------------===//

#include "runtime/Tensor.h"

#include <limits>

namespace ztc::rt {

namespace {
struct DTypeInfo {
  DType dtype;
  const char *name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::Float32, "float32", 4}, {DType::Float64, "float64", 8},
    {DType::Float16, "float16", 2}, {DType::BFloat16, "bfloat16", 2},
    {DType::Int64, "int64", 8},     {DType::Int32, "int32", 4},
    {DType::Int8, "int8", 1},       {DType::Bool, "bool", 1},
};

const DTypeInfo &info(DType dtype) {
  return kDTypes[static_cast<size_t>(dtype)];
}
} // namespace

size_t dtypeSize(DType dtype) { return info(dtype).size; }

const char *dtypeName(DType dtype) { return info(dtype).name; }

std::optional<DType> parseDType(const std::string &name) {
  for (const DTypeInfo &entry : kDTypes)
    if (name == entry.name)
      return entry.dtype;
  return std::nullopt;
}

std::string describeType(DType dtype, const std::vector<int64_t> &shape) {
  std::string text = dtypeName(dtype);
  text += '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ',';
    text += std::to_string(shape[i]);
  }
  text += ']';
  return text;
}

std::optional<int64_t> checkedByteSize(const std::vector<int64_t> &shape,
                                       size_t elementSize) {
  int64_t bytes = static_cast<int64_t>(elementSize);
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    if (dim != 0 && bytes > std::numeric_limits<int64_t>::max() / dim)
      return std::nullopt;
    bytes *= dim;
  }
  return bytes;
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape)
    : dtype(dtype), shape(std::move(shape)) {
  bytes.resize(static_cast<size_t>(
      checkedByteSize(this->shape, dtypeSize(dtype)).value_or(0)));
}

int64_t Tensor::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

} // namespace ztc::rt
