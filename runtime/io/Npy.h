//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Reads and writes NumPy's .npy format (versions 1.0, 2.0 and 3.0) for the
// element types of the runtime: '<f4', '<f8', '<f2', '<i8', '<i4', '|i1' and
// '|b1'. Arrays must be little-endian and in C order. bfloat16 has no .npy
// type, so writing one is an error. Every failure throws ztc::rt::Error whose
// message starts with the file's path.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_NPY_H
#define ZTC_RUNTIME_NPY_H

#include "runtime/Tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ztc::rt {

/// Reads the .npy file at `path`.
Tensor readNpy(const std::string &path);

/// What a .npy file holds and where: its element type and shape, and the
/// data's byte offset (the file holds exactly the data after it).
struct NpyHeader {
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  uint64_t dataOffset = 0;
};

/// Reads and checks the header of the .npy file at `path` (the data is not
/// read: memory-mapped readers take it from dataOffset).
NpyHeader readNpyHeader(const std::string &path);

/// Writes `tensor` to `path` (format 1.0, or 2.0 when the header is too long
/// for 1.0), atomically.
void writeNpy(const std::string &path, const Tensor &tensor);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_NPY_H
