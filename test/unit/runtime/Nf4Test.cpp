//===- Nf4Test.cpp - 4-bit NormalFloat weights ----------------------------===//
//
// runtime/kernels/Nf4.h against bitsandbytes' own quantize_4bit and
// dequantize_4bit (NF4, blocks of 64, double quantization), recorded by
// test/models/make_bnb_nf4.py (test/fixtures/bnb_nf4) for a [96, 200]
// weight (300 blocks, their scales in 2 blocks of 256, the second
// partial) and a [7, 9] one (one partial block, an odd count): the code
// books, the packed codes, and the scales' codes and second-level scales
// given bitsandbytes' offset are bit for bit the package's, as is the
// weight dequantized from them; our own offset is within a few units in
// the last place of its (PyTorch sums in another order).
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/Nf4.h"

#include "TestUtil.h"
#include "runtime/io/Npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace ztc::rt;
using ztc::rt::test::ulpDistance;
namespace b8 = ztc::blockwise8bit;

namespace {

Tensor fixture(const std::string &name) {
  return readNpy(std::string(ZTC_TEST_FIXTURES_DIR) + "/bnb_nf4/" + name +
                 ".npy");
}

/// The bytes of a fixture (codes are stored as int8).
std::vector<uint8_t> bytesOf(const Tensor &tensor) {
  return std::vector<uint8_t>(tensor.bytes.begin(), tensor.bytes.end());
}

std::vector<float> floatsOf(const Tensor &tensor) {
  return std::vector<float>(tensor.data<float>(),
                            tensor.data<float>() + tensor.numElements());
}

} // namespace

TEST(Nf4Test, CodeBooksAreBitsandbytes) {
  Tensor nf4 = fixture("nf4_codes"), dynamic = fixture("dynamic_codes");
  ASSERT_EQ(nf4.numElements(), 16);
  EXPECT_EQ(std::memcmp(nf4.data<float>(), ztc::nf4::kNf4Codes, 16 * 4), 0);
  // The scales' code book is the 8-bit optimizer states' signed one.
  ASSERT_EQ(dynamic.numElements(), 256);
  EXPECT_EQ(std::memcmp(dynamic.data<float>(), b8::kSignedCodes, 256 * 4), 0);
}

TEST(Nf4Test, QuantizesAsBitsandbytes) {
  auto table = std::make_unique<b8::CodeTable>();
  b8::buildTable(b8::kSignedCodes, *table);
  for (const char *name : {"wide", "odd"}) {
    std::string prefix = std::string(name) + "_";
    std::vector<float> weight = floatsOf(fixture(prefix + "weight"));
    int64_t n = int64_t(weight.size()), blocks = ztc::nf4::blocksOf(n);
    std::vector<uint8_t> packed((n + 1) / 2);
    std::vector<float> scales(blocks);
    ztc::nf4::quantize(weight.data(), n, packed.data(), scales.data());
    EXPECT_EQ(packed, bytesOf(fixture(prefix + "packed"))) << name;

    float offset = fixture(prefix + "offset").data<float>()[0];
    EXPECT_LE(ulpDistance(ztc::nf4::meanOf(scales.data(), blocks), offset), 4)
        << name << ": our mean " << ztc::nf4::meanOf(scales.data(), blocks)
        << ", bitsandbytes' " << offset;
    std::vector<uint8_t> codes(blocks);
    std::vector<float> scales2((blocks + 255) / 256);
    ztc::nf4::quantizeScales(scales.data(), blocks, offset, *table,
                             codes.data(), scales2.data());
    EXPECT_EQ(codes, bytesOf(fixture(prefix + "scale_codes"))) << name;
    EXPECT_EQ(scales2, floatsOf(fixture(prefix + "scale_scales"))) << name;

    std::vector<float> back(n);
    ztc::nf4::dequantize(packed.data(), codes.data(), scales2.data(), offset, n,
                         *table, back.data());
    std::vector<float> expected = floatsOf(fixture(prefix + "dequantized"));
    EXPECT_EQ(std::memcmp(back.data(), expected.data(), n * 4), 0) << name;
    // 4 bits and a double-quantized scale: about 0.52 bytes an element.
    double bytes =
        double(packed.size() + codes.size() + 4 * scales2.size() + 4);
    if (n > 10000)
      EXPECT_LT(bytes / double(n), 0.53) << name;
  }
}
