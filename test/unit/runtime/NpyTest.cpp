//===- NpyTest.cpp - .npy reading and writing -----------------------------===//
//
// Round trips for every dtype, byte-exact agreement with NumPy's np.save,
// and each malformed-file error.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Npy.h"

#include "TestUtil.h"
#include "runtime/Error.h"
#include "runtime/io/File.h"

using namespace ztc::rt;
using ztc::rt::test::randomTensor;
using ztc::rt::test::TempDir;
using ztc::rt::test::writeText;

namespace {

/// A .npy file as np.save writes it (format 1.0, header padded to 64).
std::string npyBytes(const std::string &dict, const std::string &data,
                     char major = 1) {
  size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += major;
  bytes += '\0';
  for (size_t i = 0; i < prefix - 8; ++i)
    bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return bytes + header + data;
}

std::string readError(const std::string &path) {
  return ZTC_ERROR_MESSAGE(readNpy(path));
}

} // namespace

TEST(NpyTest, RoundTripsEveryDType) {
  TempDir dir;
  const DType dtypes[] = {DType::Float32, DType::Float64, DType::Float16,
                          DType::Int64,   DType::Int32,   DType::Int8,
                          DType::Bool};
  const std::vector<int64_t> shapes[] = {
      {}, {7}, {2, 3}, {2, 0, 4}, {1, 2, 3, 4}};
  unsigned seed = 0;
  for (DType dtype : dtypes) {
    for (const std::vector<int64_t> &shape : shapes) {
      Tensor original = randomTensor(dtype, shape, ++seed);
      std::string path = dir / "t.npy";
      writeNpy(path, original);
      Tensor loaded = readNpy(path);
      EXPECT_EQ(loaded.dtype, dtype) << original.describe();
      EXPECT_EQ(loaded.shape, shape) << original.describe();
      EXPECT_EQ(loaded.bytes, original.bytes) << original.describe();
    }
  }
}

TEST(NpyTest, WritesExactlyWhatNumPyWrites) {
  TempDir dir;
  Tensor tensor(DType::Float32, {2, 3});
  for (int i = 0; i < 6; ++i)
    tensor.data<float>()[i] = static_cast<float>(i);
  writeNpy(dir / "a.npy", tensor);
  std::string data(reinterpret_cast<const char *>(tensor.bytes.data()), 24);
  std::string expected = npyBytes(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data);
  ASSERT_EQ(expected.size(), 152u); // np.save's size for this array
  EXPECT_EQ(ztc::rt::readFile(dir / "a.npy"), expected);

  Tensor vector(DType::Int64, {3});
  writeNpy(dir / "v.npy", vector);
  EXPECT_EQ(
      ztc::rt::readFile(dir / "v.npy"),
      npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
               std::string(24, '\0')));
}

// np.save leaves room for the first dimension to grow to 21 digits; the
// data offsets below are np.save's (NumPy 1.26) for these shapes.
TEST(NpyTest, HeaderPaddingMatchesNumPy) {
  TempDir dir;
  std::vector<int64_t> rank20(20, 3);
  rank20[0] = 0; // no data
  const std::pair<std::vector<int64_t>, size_t> cases[] = {
      {rank20, 192}, {{123456789, 0}, 128}, {{}, 128}};
  for (const auto &[shape, dataOffset] : cases) {
    writeNpy(dir / "p.npy", Tensor(DType::Float32, shape));
    std::string bytes = ztc::rt::readFile(dir / "p.npy");
    EXPECT_EQ(bytes.find('\n') + 1, dataOffset);
    EXPECT_EQ(readNpy(dir / "p.npy").shape, shape);
  }
}

TEST(NpyTest, ReadsVersions2And3AndOneByteVariants) {
  TempDir dir;
  std::string data(8, '\x01');
  writeText(
      dir / "v2.npy",
      npyBytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
               data, 2));
  Tensor v2 = readNpy(dir / "v2.npy");
  EXPECT_EQ(v2.dtype, DType::Int32);
  EXPECT_EQ(v2.shape, std::vector<int64_t>{2});
  EXPECT_EQ(v2.data<int32_t>()[1], 0x01010101);

  writeText(
      dir / "v3.npy",
      npyBytes("{'descr': '|i1', 'fortran_order': False, 'shape': (8,), }",
               data, 3));
  EXPECT_EQ(readNpy(dir / "v3.npy").dtype, DType::Int8);

  // Key order and quoting are free in the dict literal; rank-1 Fortran
  // order is the same bytes as C order.
  writeText(
      dir / "free.npy",
      npyBytes("{\"shape\": (8,), \"fortran_order\": True, \"descr\": \"<b1\"}",
               data));
  Tensor free = readNpy(dir / "free.npy");
  EXPECT_EQ(free.dtype, DType::Bool);
  EXPECT_EQ(free.shape, std::vector<int64_t>{8});
}

TEST(NpyTest, RejectsWrongMagic) {
  TempDir dir;
  writeText(dir / "x.npy", "PK\x03\x04 this is a zip file, not an array");
  EXPECT_EQ(readError(dir / "x.npy"),
            (dir / "x.npy") + ": not a .npy file (bad magic)");
  writeText(dir / "empty.npy", "");
  EXPECT_EQ(readError(dir / "empty.npy"),
            (dir / "empty.npy") + ": not a .npy file (bad magic)");
}

TEST(NpyTest, RejectsTruncatedFiles) {
  TempDir dir;
  std::string full =
      npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
               std::string(24, '\0'));
  writeText(dir / "data.npy", full.substr(0, full.size() - 5));
  EXPECT_EQ(
      readError(dir / "data.npy"),
      (dir / "data.npy") +
          ": truncated data: float32[2,3] needs 24 bytes, the file has 19");

  writeText(dir / "header.npy", full.substr(0, 40));
  EXPECT_NE(readError(dir / "header.npy").find("truncated .npy header"),
            std::string::npos);

  writeText(dir / "prefix.npy", full.substr(0, 8));
  EXPECT_EQ(readError(dir / "prefix.npy"),
            (dir / "prefix.npy") + ": truncated .npy header");

  writeText(dir / "long.npy", full + "junk");
  EXPECT_EQ(readError(dir / "long.npy"),
            (dir / "long.npy") +
                ": 4 unexpected bytes after the data of float32[2,3]");
}

TEST(NpyTest, RejectsUnsupportedDTypes) {
  TempDir dir;
  writeText(
      dir / "u2.npy",
      npyBytes("{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }",
               "ab"));
  EXPECT_EQ(readError(dir / "u2.npy"),
            (dir / "u2.npy") +
                ": unsupported dtype '<u2' (supported: float32, float64, "
                "float16, int64, int32, int8, bool)");
  writeText(dir / "obj.npy",
            npyBytes("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }",
                     "12345678"));
  EXPECT_NE(readError(dir / "obj.npy").find("unsupported dtype '|O'"),
            std::string::npos);
}

TEST(NpyTest, RejectsBigEndian) {
  TempDir dir;
  writeText(
      dir / "be.npy",
      npyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
               "abcd"));
  std::string message = readError(dir / "be.npy");
  EXPECT_EQ(message.rfind((dir / "be.npy") +
                              ": big-endian dtype '>f4' is not supported",
                          0),
            0u)
      << message;
}

TEST(NpyTest, RejectsFortranOrder) {
  TempDir dir;
  writeText(
      dir / "f.npy",
      npyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
               std::string(16, '\0')));
  EXPECT_EQ(readError(dir / "f.npy"),
            (dir / "f.npy") + ": Fortran-order arrays are not supported; save "
                              "np.ascontiguousarray(arr)");
}

TEST(NpyTest, RejectsMalformedHeaders) {
  TempDir dir;
  writeText(dir / "m.npy", npyBytes("{'descr': '<f4', 'shape': (2,), }",
                                    std::string(8, '\0')));
  EXPECT_NE(readError(dir / "m.npy").find("no valid 'fortran_order'"),
            std::string::npos);
  writeText(dir / "g.npy", npyBytes("{'descr': '<f4', garbage", ""));
  EXPECT_NE(readError(dir / "g.npy").find("malformed .npy header"),
            std::string::npos);
  EXPECT_NE(readError(dir / "absent.npy").find("cannot open"),
            std::string::npos);
}

TEST(NpyTest, RefusesToWriteBFloat16) {
  TempDir dir;
  EXPECT_EQ(
      ZTC_ERROR_MESSAGE(writeNpy(dir / "b.npy", Tensor(DType::BFloat16, {2}))),
      (dir / "b.npy") + ": bfloat16 cannot be stored in a .npy file");
}
