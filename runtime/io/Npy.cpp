//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
//
// The header is a Python dict literal ("{'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), }"); a small parser for exactly the literals NumPy
// writes (strings, booleans, integers, tuples) reads it.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Npy.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

namespace ztc::rt {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct NpyType {
  const char *descr;
  DType dtype;
};

constexpr NpyType kNpyTypes[] = {
    {"<f4", DType::Float32}, {"<f8", DType::Float64}, {"<f2", DType::Float16},
    {"<i8", DType::Int64},   {"<i4", DType::Int32},   {"|i1", DType::Int8},
    {"|b1", DType::Bool},
};

/// A parsed Python literal from a .npy header.
struct PyValue {
  enum Kind { String, Bool, Int, Tuple } kind = String;
  std::string text;
  bool flag = false;
  int64_t number = 0;
  std::vector<PyValue> items;
};

/// Parses the dict literal of a .npy header.
class HeaderParser {
public:
  HeaderParser(const std::string &text, const std::string &path)
      : text_(text), path_(path) {}

  std::map<std::string, PyValue> parseDict() {
    std::map<std::string, PyValue> dict;
    expect('{');
    while (!consume('}')) {
      PyValue key = parseValue();
      if (key.kind != PyValue::String)
        fail("dict keys must be strings");
      expect(':');
      dict[key.text] = parseValue();
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    return dict;
  }

private:
  [[noreturn]] void fail(const std::string &what) {
    // The header can be 4 GiB of anything: show the text at the problem.
    throw Error(path_ + ": malformed .npy header (" + what + ") at character " +
                std::to_string(pos_) + ": " +
                printable(text_.substr(std::min(pos_, text_.size())), 60));
  }

  void skipSpace() {
    while (pos_ < text_.size() &&
           std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }

  bool consume(char c) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!consume(c))
      fail(std::string("expected '") + c + "'");
  }

  bool consumeWord(const char *word) {
    skipSpace();
    size_t length = std::strlen(word);
    if (text_.compare(pos_, length, word) != 0)
      return false;
    pos_ += length;
    return true;
  }

  PyValue parseValue() {
    skipSpace();
    if (pos_ >= text_.size())
      fail("unexpected end");
    PyValue value;
    char c = text_[pos_];
    if (c == '\'' || c == '"') {
      size_t end = text_.find(c, pos_ + 1);
      if (end == std::string::npos)
        fail("unterminated string");
      value.kind = PyValue::String;
      value.text = text_.substr(pos_ + 1, end - pos_ - 1);
      pos_ = end + 1;
    } else if (consumeWord("True")) {
      value.kind = PyValue::Bool;
      value.flag = true;
    } else if (consumeWord("False")) {
      value.kind = PyValue::Bool;
      value.flag = false;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      value.kind = PyValue::Int;
      size_t start = pos_;
      while (pos_ < text_.size() &&
             std::isdigit(static_cast<unsigned char>(text_[pos_])))
        ++pos_;
      if (pos_ - start > 18)
        fail("dimension too large");
      value.number = std::stoll(text_.substr(start, pos_ - start));
      if (pos_ < text_.size() && text_[pos_] == 'L') // Python 2 long
        ++pos_;
    } else if (c == '(') {
      ++pos_;
      value.kind = PyValue::Tuple;
      while (!consume(')')) {
        value.items.push_back(parseValue());
        if (!consume(',')) {
          expect(')');
          break;
        }
      }
    } else {
      fail("unexpected '" + printable(std::string(1, c)) + "'");
    }
    return value;
  }

  const std::string &text_;
  const std::string &path_;
  size_t pos_ = 0;
};

DType dtypeForDescr(const std::string &descr, const std::string &path) {
  for (const NpyType &type : kNpyTypes)
    if (descr == type.descr)
      return type.dtype;
  // One-byte types have no byte order; accept '<' as NumPy would.
  if (descr == "<i1")
    return DType::Int8;
  if (descr == "<b1")
    return DType::Bool;
  if (!descr.empty() && descr[0] == '>' && descr != ">i1" && descr != ">b1")
    throw Error(path + ": big-endian dtype '" + printable(descr) +
                "' is not supported; save a little-endian array "
                "(arr.astype(arr.dtype.newbyteorder('<')))");
  throw Error(path + ": unsupported dtype '" + printable(descr) +
              "' (supported: float32, float64, float16, int64, int32, int8, "
              "bool)");
}

const char *descrForDType(DType dtype) {
  for (const NpyType &type : kNpyTypes)
    if (type.dtype == dtype)
      return type.descr;
  return nullptr;
}

uint32_t readLittleEndian(const unsigned char *bytes, size_t count) {
  uint32_t value = 0;
  for (size_t i = 0; i < count; ++i)
    value |= static_cast<uint32_t>(bytes[i]) << (8 * i);
  return value;
}

} // namespace

namespace {

/// Reads the header of the open file `in` (positioned at its start) and
/// checks the data's size; returns the header with `in` at the data.
NpyHeader readHeader(std::ifstream &in, const std::string &path,
                     int64_t fileSize);

/// Opens the regular file at `path` at its start; `fileSize` is its size.
std::ifstream openAtStart(const std::string &path, int64_t &fileSize) {
  std::ifstream in(requireRegularFile(path), std::ios::binary | std::ios::ate);
  if (!in)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  fileSize = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  return in;
}

} // namespace

NpyHeader readNpyHeader(const std::string &path) {
  int64_t fileSize = 0;
  std::ifstream in = openAtStart(path, fileSize);
  return readHeader(in, path, fileSize);
}

Tensor readNpy(const std::string &path) {
  int64_t fileSize = 0;
  std::ifstream in = openAtStart(path, fileSize);
  NpyHeader header = readHeader(in, path, fileSize);
  Tensor tensor;
  tensor.dtype = header.dtype;
  tensor.shape = header.shape;
  size_t dataSize = size_t(fileSize) - size_t(header.dataOffset);
  tensor.bytes.resize(dataSize);
  in.read(reinterpret_cast<char *>(tensor.bytes.data()),
          static_cast<std::streamsize>(dataSize));
  if (in.gcount() != static_cast<std::streamsize>(dataSize))
    throw Error(path + ": read error");
  return tensor;
}

namespace {

NpyHeader readHeader(std::ifstream &in, const std::string &path,
                     int64_t fileSize) {
  unsigned char prefix[12];
  in.read(reinterpret_cast<char *>(prefix), 10);
  if (in.gcount() < static_cast<std::streamsize>(kMagicSize) ||
      std::memcmp(prefix, kMagic, kMagicSize) != 0)
    throw Error(path + ": not a .npy file (bad magic)");
  if (in.gcount() < 10)
    throw Error(path + ": truncated .npy header");
  unsigned major = prefix[6];
  size_t lengthBytes;
  if (major == 1)
    lengthBytes = 2;
  else if (major == 2 || major == 3)
    lengthBytes = 4;
  else
    throw Error(path + ": unsupported .npy format version " +
                std::to_string(major) + "." + std::to_string(prefix[7]));
  if (lengthBytes == 4) {
    in.read(reinterpret_cast<char *>(prefix + 10), 2);
    if (in.gcount() < 2)
      throw Error(path + ": truncated .npy header");
  }
  const int64_t headerLength = readLittleEndian(prefix + 8, lengthBytes);
  const int64_t dataStart =
      8 + static_cast<int64_t>(lengthBytes) + headerLength;
  if (dataStart > fileSize)
    throw Error(path + ": truncated .npy header (" + std::to_string(fileSize) +
                " bytes, header ends at " + std::to_string(dataStart) + ")");
  std::string header(static_cast<size_t>(headerLength), '\0');
  in.read(header.data(), headerLength);
  while (!header.empty() && (header.back() == '\n' || header.back() == ' ' ||
                             header.back() == '\0'))
    header.pop_back();

  std::map<std::string, PyValue> dict = HeaderParser(header, path).parseDict();
  auto field = [&](const char *name, PyValue::Kind kind) -> const PyValue & {
    auto it = dict.find(name);
    if (it == dict.end() || it->second.kind != kind)
      throw Error(path + ": malformed .npy header (no valid '" +
                  std::string(name) + "'): " + printable(header));
    return it->second;
  };
  const std::string &descr = field("descr", PyValue::String).text;
  bool fortranOrder = field("fortran_order", PyValue::Bool).flag;
  const PyValue &shapeValue = field("shape", PyValue::Tuple);

  Tensor tensor;
  tensor.dtype = dtypeForDescr(descr, path);
  for (const PyValue &dim : shapeValue.items) {
    if (dim.kind != PyValue::Int)
      throw Error(path + ": malformed .npy header (non-integer shape): " +
                  printable(header));
    tensor.shape.push_back(dim.number);
  }
  // A Fortran-order array of rank <= 1 has the same bytes as a C-order one.
  if (fortranOrder && tensor.shape.size() > 1)
    throw Error(path + ": Fortran-order arrays are not supported; save "
                       "np.ascontiguousarray(arr)");

  std::optional<int64_t> dataSize =
      checkedByteSize(tensor.shape, dtypeSize(tensor.dtype));
  if (!dataSize)
    throw Error(path + ": shape " + tensor.describe() + " is too large");
  int64_t available = fileSize - dataStart;
  if (available < *dataSize)
    throw Error(path + ": truncated data: " + tensor.describe() + " needs " +
                std::to_string(*dataSize) + " bytes, the file has " +
                std::to_string(available));
  if (available > *dataSize)
    throw Error(path + ": " + std::to_string(available - *dataSize) +
                " unexpected bytes after the data of " + tensor.describe());
  return NpyHeader{tensor.dtype, tensor.shape, uint64_t(dataStart)};
}

} // namespace

void writeNpy(const std::string &path, const Tensor &tensor) {
  const char *descr = descrForDType(tensor.dtype);
  if (!descr)
    throw Error(path + ": " + std::string(dtypeName(tensor.dtype)) +
                " cannot be stored in a .npy file");
  std::string dict = std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < tensor.shape.size(); ++i)
    dict += (i ? ", " : "") + std::to_string(tensor.shape[i]);
  dict += tensor.shape.size() == 1 ? ",), }" : "), }";

  // Like np.save, leave room for the first dimension to grow to 21 digits
  // (so the header can be rewritten in place), then pad with spaces so the
  // data starts at a multiple of 64 bytes; the header ends with a newline.
  // Version 1.0 stores the header length in 16 bits.
  if (!tensor.shape.empty())
    dict.append(21 - std::to_string(tensor.shape[0]).size(), ' ');
  auto paddedLength = [&](size_t prefixSize) {
    return (prefixSize + dict.size() + 1 + 63) / 64 * 64 - prefixSize;
  };
  bool version1 = paddedLength(10) <= 65535;
  size_t prefixSize = version1 ? 10 : 12;
  dict.append(paddedLength(prefixSize) - dict.size() - 1, ' ');
  dict += '\n';

  std::string prefix(kMagic, kMagicSize);
  prefix += static_cast<char>(version1 ? 1 : 2);
  prefix += '\0';
  size_t headerLength = dict.size();
  for (size_t i = 0; i < prefixSize - 8; ++i)
    prefix += static_cast<char>((headerLength >> (8 * i)) & 0xff);

  AtomicFileWriter writer(path);
  writer.write(prefix.data(), prefix.size());
  writer.write(dict.data(), dict.size());
  writer.write(tensor.bytes.data(), tensor.bytes.size());
  writer.commit();
}

} // namespace ztc::rt
