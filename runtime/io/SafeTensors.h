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

#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

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

/// Where one tensor's bytes lie in a file.
struct SafeTensorsEntry {
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  /// From the start of the data section, and how many.
  uint64_t offset = 0, bytes = 0;
};

/// A safetensors file read piece by piece: the header at construction
/// (with readSafeTensors' checks), then any byte range of a tensor on
/// demand, so memory holds one piece at a time however large the file.
class SafeTensorsReader {
public:
  explicit SafeTensorsReader(const std::string &path);
  const std::map<std::string, SafeTensorsEntry> &entries() const {
    return entries_;
  }
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// Bytes [from, from + count) of tensor `name` into `out`; throws Error
  /// naming the file and tensor when it has no such bytes.
  void read(const std::string &name, uint64_t from, uint64_t count, void *out);
  /// The whole tensor `name`.
  Tensor read(const std::string &name);

private:
  std::string path_;
  std::ifstream in_;
  uint64_t dataStart_ = 0;
  std::map<std::string, SafeTensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// A safetensors file written piece by piece: every tensor is declared up
/// front (the header comes first), then its bytes are appended in the
/// declared order; commit() checks that every byte came and publishes the
/// file atomically (File.h). Memory holds one piece at a time.
class SafeTensorsWriter {
public:
  /// `layout`: names with tensors whose dtype and shape (not bytes) are
  /// used, in file order.
  SafeTensorsWriter(const std::string &path,
                    const std::vector<std::pair<std::string, Tensor>> &layout,
                    const std::map<std::string, std::string> &metadata);
  ~SafeTensorsWriter();
  void append(const void *data, size_t size);
  void commit();

private:
  struct Impl;
  Impl *impl_;
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_SAFETENSORS_H
