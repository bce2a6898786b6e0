//===- TestUtil.h - helpers shared by the runtime tests ---------*- C++ -*-===//
//
// A self-deleting temporary directory and small file helpers.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_TEST_UNIT_RUNTIME_TESTUTIL_H
#define ZTC_TEST_UNIT_RUNTIME_TESTUTIL_H

#include "runtime/Tensor.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>

namespace ztc::rt::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "ztc-rt-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return path_; }
  std::string operator/(const std::string &name) const {
    return path_ + "/" + name;
  }

private:
  std::string path_;
};

inline void writeText(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

/// A tensor of random bytes (0 or 1 for bool).
inline Tensor randomTensor(DType dtype, std::vector<int64_t> shape,
                           unsigned seed) {
  Tensor tensor(dtype, std::move(shape));
  std::mt19937 rng(seed);
  for (uint8_t &byte : tensor.bytes)
    byte = static_cast<uint8_t>(dtype == DType::Bool ? rng() & 1 : rng());
  return tensor;
}

/// The message of the ztc::rt::Error `statement` throws ("" if none).
#define ZTC_ERROR_MESSAGE(statement)                                           \
  [&]() -> std::string {                                                       \
    try {                                                                      \
      statement;                                                               \
    } catch (const ::ztc::rt::Error &error) {                                  \
      return error.what();                                                     \
    }                                                                          \
    return std::string();                                                      \
  }()

/// How many floats lie between `a` and `b` (0: the same bits), for
/// comparisons against libraries whose square roots round otherwise.
inline int64_t ulpDistance(float a, float b) {
  int32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return std::abs(int64_t(x) - int64_t(y));
}

} // namespace ztc::rt::test

#endif // ZTC_TEST_UNIT_RUNTIME_TESTUTIL_H
