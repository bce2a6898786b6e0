//===- SafeTensors.h - safetensors files ------------------------*- C++ -*-===//
//
// Reads and writes the safetensors format: an 8-byte little-endian header
// length, a JSON header mapping each tensor name to {dtype, shape,
// data_offsets} (plus an optional "__metadata__" string map), then the raw
// little-endian data. Used for an artifact's init.safetensors and for
// checkpoints. Writing is atomic (File.h): a reader never sees a partial
// file. Errors throw ztc::rt::Error naming the file.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_SAFETENSORS_H
#define ZTC_RUNTIME_SAFETENSORS_H

#include "runtime/Tensor.h"

#include <map>
#include <string>

namespace ztc::rt {

/// The contents of a safetensors file.
struct SafeTensors {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// Reads every tensor of the file at `path`. Supported dtypes: F32, F64, F16,
/// BF16, I64, I32, I8, BOOL.
SafeTensors readSafeTensors(const std::string &path);

/// Writes `contents` to `path` atomically; tensors are laid out in name
/// order and the header is padded to a multiple of 8 bytes.
void writeSafeTensors(const std::string &path, const SafeTensors &contents);

} // namespace ztc::rt

#endif // ZTC_RUNTIME_SAFETENSORS_H
