//===- SafeTensorsTest.cpp - safetensors reading and writing --------------===//
//
// Round trips with metadata, the on-disk layout, malformed files, and the
// atomic-write guarantee under a concurrent reader.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/SafeTensors.h"

#include "TestUtil.h"
#include "runtime/Error.h"
#include "runtime/io/File.h"

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

using namespace ztc::rt;
using ztc::rt::test::randomTensor;
using ztc::rt::test::TempDir;
using ztc::rt::test::writeText;

namespace {

/// A file with the given header text and `dataBytes` zero bytes.
std::string rawFile(const std::string &header, size_t dataBytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return bytes + header + std::string(dataBytes, '\0');
}

std::string readError(const std::string &path) {
  return ZTC_ERROR_MESSAGE(readSafeTensors(path));
}

} // namespace

TEST(SafeTensorsTest, RoundTripsEveryDTypeAndMetadata) {
  TempDir dir;
  SafeTensors original;
  const DType dtypes[] = {DType::Float32,  DType::Float64, DType::Float16,
                          DType::BFloat16, DType::Int64,   DType::Int32,
                          DType::Int8,     DType::Bool};
  unsigned seed = 0;
  for (DType dtype : dtypes) {
    ++seed;
    original.tensors["t." + std::string(dtypeName(dtype))] =
        randomTensor(dtype, {3, static_cast<int64_t>(seed % 3) + 1}, seed);
  }
  original.tensors["scalar"] = randomTensor(DType::Float32, {}, 99);
  original.tensors["empty"] = randomTensor(DType::Float32, {0, 5}, 98);
  original.metadata = {{"format", "pt"}, {"step", "12"}};
  writeSafeTensors(dir / "a.safetensors", original);

  SafeTensors loaded = readSafeTensors(dir / "a.safetensors");
  EXPECT_EQ(loaded.metadata, original.metadata);
  ASSERT_EQ(loaded.tensors.size(), original.tensors.size());
  for (const auto &[name, tensor] : original.tensors) {
    const Tensor &copy = loaded.tensors.at(name);
    EXPECT_EQ(copy.dtype, tensor.dtype) << name;
    EXPECT_EQ(copy.shape, tensor.shape) << name;
    EXPECT_EQ(copy.bytes, tensor.bytes) << name;
  }
}

TEST(SafeTensorsTest, LayoutFollowsTheFormat) {
  TempDir dir;
  SafeTensors contents;
  Tensor w(DType::Float32, {2});
  w.data<float>()[0] = 1.5f;
  w.data<float>()[1] = -2.0f;
  contents.tensors["w"] = w;
  contents.tensors["b"] = Tensor(DType::BFloat16, {1});
  writeSafeTensors(dir / "l.safetensors", contents);
  std::string bytes = readFile(dir / "l.safetensors");

  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i)
    headerSize |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(headerSize % 8, 0u); // data starts 8-byte aligned
  std::string header = bytes.substr(8, headerSize);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"b":{"data_offsets":[0,2],"dtype":"BF16","shape":[1]},)"
            R"("w":{"data_offsets":[2,10],"dtype":"F32","shape":[2]}})");
  ASSERT_EQ(bytes.size(), 8 + headerSize + 10);
  float values[2];
  std::memcpy(values, bytes.data() + 8 + headerSize + 2, 8);
  EXPECT_EQ(values[0], 1.5f);
  EXPECT_EQ(values[1], -2.0f);
}

TEST(SafeTensorsTest, ReadsFilesFromOtherWriters) {
  // Unpadded header, metadata first, tensors out of data order.
  TempDir dir;
  writeText(
      dir / "o.safetensors",
      rawFile(R"({"__metadata__":{"k":"v"},"y":{"dtype":"I8","shape":[2],)"
              R"("data_offsets":[8,10]},"x":{"dtype":"I64","shape":[],)"
              R"("data_offsets":[0,8]}})",
              10));
  SafeTensors loaded = readSafeTensors(dir / "o.safetensors");
  EXPECT_EQ(loaded.metadata.at("k"), "v");
  EXPECT_EQ(loaded.tensors.at("x").dtype, DType::Int64);
  EXPECT_TRUE(loaded.tensors.at("x").shape.empty());
  EXPECT_EQ(loaded.tensors.at("y").shape, std::vector<int64_t>{2});
}

TEST(SafeTensorsTest, RejectsMalformedFiles) {
  TempDir dir;
  std::string path = dir / "bad.safetensors";
  writeText(path, "abc");
  EXPECT_EQ(readError(path),
            path + ": not a safetensors file (shorter than 8 bytes)");

  writeText(path, rawFile("{}", 0).substr(0, 9)); // header cut short
  EXPECT_NE(readError(path).find("not a safetensors file or truncated"),
            std::string::npos);

  writeText(path, rawFile("{not json", 0));
  EXPECT_NE(readError(path).find(path + ": invalid safetensors header: "),
            std::string::npos);

  writeText(
      path,
      rawFile(R"({"x":{"dtype":"U16","shape":[1],"data_offsets":[0,2]}})", 2));
  EXPECT_EQ(readError(path),
            path +
                ": tensor 'x': unsupported dtype 'U16' (supported: F32, F64, "
                "F16, BF16, I64, I32, I8, BOOL)");

  writeText(
      path,
      rawFile(R"({"x":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})",
              12));
  EXPECT_EQ(readError(path), path + ": tensor 'x': float32[2,2] needs 16 "
                                    "bytes, data_offsets span 12");

  // Data cut short: the offsets point past the end.
  writeText(
      path,
      rawFile(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
              10));
  EXPECT_EQ(readError(path), path +
                                 ": tensor 'x': data_offsets [0, 16] lie "
                                 "outside the 10 data bytes (truncated file?)");

  writeText(path, rawFile(R"({"x":{"dtype":"F32","shape":[1]}})", 4));
  EXPECT_EQ(readError(path),
            path + ": tensor 'x': missing or invalid 'data_offsets'");
}

// A writer replaces the file over and over with two different contents while
// a reader keeps loading it: every read must be one of the two, complete.
TEST(SafeTensorsTest, ReaderNeverSeesAPartialFile) {
  TempDir dir;
  std::string path = dir / "ckpt.safetensors";
  SafeTensors small, large;
  small.tensors["w"] = randomTensor(DType::Float32, {16}, 1);
  large.tensors["w"] = randomTensor(DType::Float32, {256, 1024}, 2); // 1 MiB
  large.tensors["v"] = randomTensor(DType::Int64, {1000}, 3);
  writeSafeTensors(path, small);

  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::string failure;
  std::thread reader([&] {
    while (!done.load()) {
      try {
        SafeTensors seen = readSafeTensors(path);
        const SafeTensors &expected = seen.tensors.size() == 1 ? small : large;
        for (const auto &[name, tensor] : expected.tensors)
          if (seen.tensors.at(name).bytes != tensor.bytes)
            throw Error("contents differ for '" + name + "'");
        ++reads;
      } catch (const std::exception &error) {
        failure = error.what();
        return;
      }
    }
  });
  for (int i = 0; i < 40 && failure.empty(); ++i)
    writeSafeTensors(path, i % 2 ? small : large);
  done = true;
  reader.join();
  EXPECT_EQ(failure, "");
  EXPECT_GT(reads.load(), 0);
  // No temporary file is left behind.
  int files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir.path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(SafeTensorsTest, FailedWriteLeavesTheOldFile) {
  TempDir dir;
  std::string path = dir / "keep.safetensors";
  SafeTensors first;
  first.tensors["a"] = randomTensor(DType::Int32, {4}, 5);
  writeSafeTensors(path, first);
  SafeTensors bad;
  bad.tensors["__metadata__"] = randomTensor(DType::Int32, {1}, 6);
  EXPECT_NE(ZTC_ERROR_MESSAGE(writeSafeTensors(path, bad)), "");
  EXPECT_EQ(readSafeTensors(path).tensors.at("a").bytes,
            first.tensors["a"].bytes);
}

// The piecewise writer and reader (ztc consolidate): tensors declared up
// front, appended in pieces, read back in ranges, equal to the whole-file
// functions' view; a writer that gets too few bytes publishes nothing.
TEST(SafeTensorsTest, PiecewiseWriterAndReaderAgreeWithTheWholeFile) {
  TempDir dir;
  Tensor a = randomTensor(DType::Float32, {4, 3}, 1);
  Tensor b = randomTensor(DType::BFloat16, {5}, 2);
  std::vector<std::pair<std::string, Tensor>> layout = {{"z.a", a}, {"b", b}};
  {
    SafeTensorsWriter writer(dir / "p.safetensors", layout, {{"step", "3"}});
    writer.append(a.bytes.data(), 20);
    writer.append(a.bytes.data() + 20, a.bytes.size() - 20);
    writer.append(b.bytes.data(), b.bytes.size());
    EXPECT_EQ(ZTC_ERROR_MESSAGE(writer.append(b.bytes.data(), 1)),
              (dir / "p.safetensors") +
                  ": more tensor bytes than the header declares");
    writer.commit();
  }
  SafeTensors whole = readSafeTensors(dir / "p.safetensors");
  EXPECT_EQ(whole.metadata.at("step"), "3");
  EXPECT_EQ(whole.tensors.at("z.a").bytes, a.bytes);
  EXPECT_EQ(whole.tensors.at("b").bytes, b.bytes);
  EXPECT_EQ(whole.tensors.at("b").dtype, DType::BFloat16);

  SafeTensorsReader reader(dir / "p.safetensors");
  ASSERT_EQ(reader.entries().size(), 2u);
  std::vector<unsigned char> middle(8);
  reader.read("z.a", 16, 8, middle.data());
  EXPECT_EQ(0, std::memcmp(middle.data(), a.bytes.data() + 16, 8));
  EXPECT_EQ(reader.read("b").bytes, b.bytes);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(reader.read("z.a", 40, 16, middle.data())),
            (dir / "p.safetensors") +
                ": tensor 'z.a' has 48 bytes, not [40, 56)");

  {
    SafeTensorsWriter writer(dir / "short.safetensors", layout, {});
    writer.append(a.bytes.data(), a.bytes.size());
    EXPECT_EQ(ZTC_ERROR_MESSAGE(writer.commit()),
              (dir / "short.safetensors") +
                  ": 48 tensor bytes written, the header declares 58");
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "short.safetensors"));
}
