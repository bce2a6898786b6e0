//===- Tensor.cpp - host tensors and element types ------------------------===//
//
// Element-type tables and the host tensor.
//
//===----------------------------------------------------------------------===//

#include "runtime/Tensor.h"

#include "runtime/kernels/Half.h"

#include <cstring>
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

float loadFloat(const uint8_t *p, DType dtype) {
  switch (dtype) {
  case DType::Float64: {
    double value;
    std::memcpy(&value, p, sizeof value);
    return static_cast<float>(value);
  }
  case DType::Float16:
  case DType::BFloat16: {
    uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return dtype == DType::Float16 ? half_detail::halfBitsToFloat(bits)
                                   : half_detail::bfloat16BitsToFloat(bits);
  }
  default: {
    float value;
    std::memcpy(&value, p, sizeof value);
    return value;
  }
  }
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

bool isFloat(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 ||
         dtype == DType::Float16 || dtype == DType::BFloat16;
}

std::vector<uint8_t> convertFloats(const std::vector<uint8_t> &bytes,
                                   DType from, DType to) {
  if (from == to)
    return bytes;
  size_t count = bytes.size() / dtypeSize(from);
  std::vector<uint8_t> out(count * dtypeSize(to));
  for (size_t i = 0; i < count; ++i) {
    float value = loadFloat(bytes.data() + i * dtypeSize(from), from);
    if (to == DType::Float32) {
      std::memcpy(out.data() + 4 * i, &value, 4);
    } else if (to == DType::Float64) {
      double wide = value;
      std::memcpy(out.data() + 8 * i, &wide, 8);
    } else {
      uint16_t bits = to == DType::Float16
                          ? half_detail::floatToHalfBits(value)
                          : half_detail::floatToBFloat16Bits(value);
      std::memcpy(out.data() + 2 * i, &bits, 2);
    }
  }
  return out;
}

} // namespace ztc::rt
