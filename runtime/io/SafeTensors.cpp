//===- SafeTensors.cpp - safetensors files --------------------------------===//
//
// The header is parsed with nlohmann::json; tensor data is read straight from
// the file into each tensor's buffer, so loading a model needs no second copy
// of the whole file.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/SafeTensors.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace ztc::rt {

namespace {

using nlohmann::json;

/// Headers beyond this size are corrupt rather than large models.
constexpr uint64_t kMaxHeaderSize = 100u << 20;

struct SafeTensorsType {
  const char *name;
  DType dtype;
};

constexpr SafeTensorsType kTypes[] = {
    {"F32", DType::Float32},   {"F64", DType::Float64}, {"F16", DType::Float16},
    {"BF16", DType::BFloat16}, {"I64", DType::Int64},   {"I32", DType::Int32},
    {"I8", DType::Int8},       {"BOOL", DType::Bool},
};

const char *typeName(DType dtype) {
  for (const SafeTensorsType &type : kTypes)
    if (type.dtype == dtype)
      return type.name;
  return "?";
}

/// Reads one tensor's entry of the header (not its data).
Tensor parseEntry(const std::string &path, const std::string &name,
                  const json &entry, uint64_t dataSize, uint64_t &begin,
                  bool allocate = true) {
  auto bad = [&](const std::string &what) {
    return Error(path + ": tensor '" + printable(name) + "': " + what);
  };
  if (!entry.is_object())
    throw bad("header entry is not an object");
  auto dtypeIt = entry.find("dtype");
  auto shapeIt = entry.find("shape");
  auto offsetsIt = entry.find("data_offsets");
  if (dtypeIt == entry.end() || !dtypeIt->is_string())
    throw bad("missing 'dtype'");
  if (shapeIt == entry.end() || !shapeIt->is_array())
    throw bad("missing 'shape'");
  if (offsetsIt == entry.end() || !offsetsIt->is_array() ||
      offsetsIt->size() != 2 || !(*offsetsIt)[0].is_number_unsigned() ||
      !(*offsetsIt)[1].is_number_unsigned())
    throw bad("missing or invalid 'data_offsets'");

  Tensor tensor;
  std::string dtype = dtypeIt->get<std::string>();
  bool known = false;
  for (const SafeTensorsType &type : kTypes)
    if (dtype == type.name) {
      tensor.dtype = type.dtype;
      known = true;
    }
  if (!known)
    throw bad("unsupported dtype '" + printable(dtype) +
              "' (supported: F32, F64, F16, BF16, I64, I32, I8, BOOL)");
  for (const json &dim : *shapeIt) {
    if (!dim.is_number_unsigned())
      throw bad("shape entries must be non-negative integers");
    tensor.shape.push_back(dim.get<int64_t>());
  }
  begin = (*offsetsIt)[0].get<uint64_t>();
  uint64_t end = (*offsetsIt)[1].get<uint64_t>();
  std::optional<int64_t> size =
      checkedByteSize(tensor.shape, dtypeSize(tensor.dtype));
  if (!size)
    throw bad("shape is too large");
  if (end < begin || end > dataSize)
    throw bad("data_offsets [" + std::to_string(begin) + ", " +
              std::to_string(end) + "] lie outside the " +
              std::to_string(dataSize) + " data bytes (truncated file?)");
  if (end - begin != static_cast<uint64_t>(*size))
    throw bad(tensor.describe() + " needs " + std::to_string(*size) +
              " bytes, data_offsets span " + std::to_string(end - begin));
  if (allocate)
    tensor.bytes.resize(static_cast<size_t>(*size));
  return tensor;
}

} // namespace

SafeTensorsReader::SafeTensorsReader(const std::string &path)
    : path_(path),
      in_(requireRegularFile(path), std::ios::binary | std::ios::ate) {
  if (!in_)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  const uint64_t fileSize = static_cast<uint64_t>(in_.tellg());
  in_.seekg(0);
  unsigned char lengthBytes[8];
  in_.read(reinterpret_cast<char *>(lengthBytes), 8);
  if (in_.gcount() != 8)
    throw Error(path + ": not a safetensors file (shorter than 8 bytes)");
  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i)
    headerSize |= static_cast<uint64_t>(lengthBytes[i]) << (8 * i);
  if (headerSize > kMaxHeaderSize || headerSize > fileSize - 8)
    throw Error(path + ": not a safetensors file or truncated (header size " +
                std::to_string(headerSize) + ", file size " +
                std::to_string(fileSize) + ")");
  std::string headerText(headerSize, '\0');
  in_.read(headerText.data(), static_cast<std::streamsize>(headerSize));

  json header;
  try {
    header = json::parse(headerText);
  } catch (const json::exception &error) {
    throw Error(
        path + ": invalid safetensors header: " + printable(error.what(), 200));
  }
  if (!header.is_object())
    throw Error(path + ": invalid safetensors header: not a JSON object");

  dataStart_ = 8 + headerSize;
  const uint64_t dataSize = fileSize - dataStart_;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object())
        throw Error(path + ": '__metadata__' is not an object");
      for (auto meta = it->begin(); meta != it->end(); ++meta) {
        if (!meta->is_string())
          throw Error(path + ": metadata '" + printable(meta.key()) +
                      "' is not a string");
        metadata_[meta.key()] = meta->get<std::string>();
      }
      continue;
    }
    uint64_t begin = 0;
    Tensor tensor = parseEntry(path, it.key(), *it, dataSize, begin,
                               /*allocate=*/false);
    entries_[it.key()] = {
        tensor.dtype, tensor.shape, begin,
        uint64_t(*checkedByteSize(tensor.shape, dtypeSize(tensor.dtype)))};
  }
}

void SafeTensorsReader::read(const std::string &name, uint64_t from,
                             uint64_t count, void *out) {
  auto it = entries_.find(name);
  if (it == entries_.end())
    throw Error(path_ + ": no tensor '" + printable(name) + "'");
  if (from > it->second.bytes || count > it->second.bytes - from)
    throw Error(path_ + ": tensor '" + printable(name) + "' has " +
                std::to_string(it->second.bytes) + " bytes, not [" +
                std::to_string(from) + ", " + std::to_string(from + count) +
                ")");
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(dataStart_ + it->second.offset + from));
  in_.read(static_cast<char *>(out), static_cast<std::streamsize>(count));
  if (static_cast<uint64_t>(in_.gcount()) != count)
    throw Error(path_ + ": tensor '" + printable(name) + "': read error");
}

Tensor SafeTensorsReader::read(const std::string &name) {
  auto it = entries_.find(name);
  if (it == entries_.end())
    throw Error(path_ + ": no tensor '" + printable(name) + "'");
  Tensor tensor(it->second.dtype, it->second.shape);
  read(name, 0, tensor.bytes.size(), tensor.bytes.data());
  return tensor;
}

SafeTensors readSafeTensors(const std::string &path) {
  SafeTensorsReader reader(path);
  SafeTensors contents;
  contents.metadata = reader.metadata();
  for (const auto &entry : reader.entries())
    contents.tensors.emplace(entry.first, reader.read(entry.first));
  return contents;
}

namespace {

/// The length prefix and the header (padded so data starts 8-byte
/// aligned, as the reference implementation does) of tensors laid out in
/// `layout` order.
std::string
headerBytes(const std::string &path,
            const std::vector<std::pair<std::string, Tensor>> &layout,
            const std::map<std::string, std::string> &metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto &[name, tensor] : layout) {
    if (name == "__metadata__")
      throw Error(path + ": '__metadata__' cannot name a tensor");
    uint64_t end = offset + uint64_t(*checkedByteSize(tensor.shape,
                                                      dtypeSize(tensor.dtype)));
    header[name] = {{"dtype", typeName(tensor.dtype)},
                    {"shape", tensor.shape},
                    {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::string headerText = header.dump();
  headerText.append((8 - headerText.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] =
        static_cast<char>((uint64_t(headerText.size()) >> (8 * i)) & 0xff);
  return bytes + headerText;
}

} // namespace

void writeSafeTensors(const std::string &path, const SafeTensors &contents) {
  std::vector<std::pair<std::string, Tensor>> layout;
  for (const auto &[name, tensor] : contents.tensors)
    layout.push_back({name, Tensor(tensor.dtype, {})});
  // Only dtype and shape matter for the header: keep shapes, not bytes.
  size_t i = 0;
  for (const auto &[name, tensor] : contents.tensors)
    layout[i++].second.shape = tensor.shape;
  std::string head = headerBytes(path, layout, contents.metadata);
  AtomicFileWriter writer(path);
  writer.write(head.data(), head.size());
  for (const auto &entry : contents.tensors)
    writer.write(entry.second.bytes.data(), entry.second.bytes.size());
  writer.commit();
}

struct SafeTensorsWriter::Impl {
  std::string path;
  AtomicFileWriter file;
  uint64_t expected = 0, written = 0;
  Impl(const std::string &path) : path(path), file(path) {}
};

SafeTensorsWriter::SafeTensorsWriter(
    const std::string &path,
    const std::vector<std::pair<std::string, Tensor>> &layout,
    const std::map<std::string, std::string> &metadata)
    : impl_(new Impl(path)) {
  std::string head = headerBytes(path, layout, metadata);
  impl_->file.write(head.data(), head.size());
  for (const auto &entry : layout)
    impl_->expected += uint64_t(
        *checkedByteSize(entry.second.shape, dtypeSize(entry.second.dtype)));
}

SafeTensorsWriter::~SafeTensorsWriter() { delete impl_; }

void SafeTensorsWriter::append(const void *data, size_t size) {
  if (impl_->written + size > impl_->expected)
    throw Error(impl_->path + ": more tensor bytes than the header declares");
  impl_->file.write(data, size);
  impl_->written += size;
}

void SafeTensorsWriter::commit() {
  if (impl_->written != impl_->expected)
    throw Error(impl_->path + ": " + std::to_string(impl_->written) +
                " tensor bytes written, the header declares " +
                std::to_string(impl_->expected));
  impl_->file.commit();
}

} // namespace ztc::rt
