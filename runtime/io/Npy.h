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

#include <string>

namespace ztc::rt {

/// Reads the .npy file at `path`.
Tensor readNpy(const std::string &path);

/// Writes `tensor` to `path` (format 1.0, or 2.0 when the header is too long
/// for 1.0), atomically.
void writeNpy(const std::string &path, const Tensor &tensor);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_NPY_H
