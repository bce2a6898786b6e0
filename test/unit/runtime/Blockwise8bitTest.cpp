//===- Blockwise8bitTest.cpp - 8-bit optimizer states ---------------------===//
//
// runtime/kernels/Blockwise8bit.h against what bitsandbytes itself does on
// the CPU (test/fixtures/bnb8bit, recorded by test/models/make_bnb8bit.py
// from bitsandbytes 0.50.2): its code books bit for bit; 6 steps of its
// AdamW8bit and Adam8bit on a parameter of 600 elements (three blocks, the
// last partial), gradients of three scales and a block of zeros, leave the
// same state bytes and scales after every step, and the parameter within
// one unit in the last place (PyTorch's CPU square root is MKL's, not
// correctly rounded).
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/Blockwise8bit.h"

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
  return readNpy(std::string(ZTC_TEST_FIXTURES_DIR) + "/bnb8bit/" + name +
                 ".npy");
}

/// Row `row` of a stacked fixture, as T (the code bytes are stored as
/// int8).
template <typename T> std::vector<T> rowOf(const Tensor &stacked, int64_t row) {
  int64_t width = stacked.shape.at(1);
  const T *at = reinterpret_cast<const T *>(stacked.bytes.data()) + row * width;
  return std::vector<T>(at, at + width);
}

} // namespace

TEST(Blockwise8bitTest, CodeBooksAreBitsandbytes) {
  for (const auto &[name, codes] :
       {std::pair{"qmap_signed", b8::kSignedCodes},
        std::pair{"qmap_unsigned", b8::kUnsignedCodes}}) {
    Tensor expected = fixture(name);
    ASSERT_EQ(expected.numElements(), 256);
    EXPECT_EQ(std::memcmp(expected.data<float>(), codes, 256 * 4), 0) << name;
  }
}

TEST(Blockwise8bitTest, QuantizesABlockOfZerosToZeros) {
  auto table = std::make_unique<b8::CodeTable>();
  b8::buildTable(b8::kSignedCodes, *table);
  std::vector<float> zeros(100, 0.0f);
  std::vector<uint8_t> q(100, 7);
  EXPECT_EQ(b8::quantizeBlock(zeros.data(), 100, *table, q.data()), 0.0f);
  EXPECT_EQ(q, std::vector<uint8_t>(100, 0));
  // The largest value keeps itself (code 255 is 1), and every value comes
  // back within the gap between its neighbouring codes.
  std::vector<float> x = {0.25f, 2.0f, -1.0f, 0.0f, 1e-3f};
  float absmax = b8::quantizeBlock(x.data(), 5, *table, q.data());
  EXPECT_EQ(absmax, 2.0f);
  EXPECT_EQ(q[1], 255);
  EXPECT_EQ(b8::dequantize(q[1], absmax, *table), 2.0f);
  for (int i = 0; i < 5; ++i) {
    float back = b8::dequantize(q[i], absmax, *table) / absmax;
    int c = q[i];
    float gap = std::max(
        c > 0 ? b8::kSignedCodes[c] - b8::kSignedCodes[c - 1] : 0.0f,
        c < 255 ? b8::kSignedCodes[c + 1] - b8::kSignedCodes[c] : 0.0f);
    EXPECT_LE(std::fabs(back - x[i] / absmax), gap) << "element " << i;
  }
}

TEST(Blockwise8bitTest, AdamStepsLeaveBitsandbytesStates) {
  auto signedTable = std::make_unique<b8::CodeTable>();
  auto unsignedTable = std::make_unique<b8::CodeTable>();
  b8::buildTable(b8::kSignedCodes, *signedTable);
  b8::buildTable(b8::kUnsignedCodes, *unsignedTable);
  Tensor start = fixture("param0"), grads = fixture("grads");
  int64_t n = start.numElements(), blocks = (n + b8::kBlock - 1) / b8::kBlock;
  ASSERT_EQ(n, 600);
  for (const auto &[name, decay] : {std::pair{"adamw", 0.01}, {"adam", 0.0}}) {
    std::string prefix = std::string(name) + "_";
    Tensor params = fixture(prefix + "param"),
           state1 = fixture(prefix + "state1"),
           state2 = fixture(prefix + "state2"),
           scale1 = fixture(prefix + "absmax1"),
           scale2 = fixture(prefix + "absmax2");
    std::vector<float> p(start.data<float>(), start.data<float>() + n);
    std::vector<uint8_t> m1(n, 0), m2(n, 0);
    std::vector<float> s1(blocks, 0.0f), s2(blocks, 0.0f);
    int64_t worst = 0, differing = 0;
    for (int64_t step = 0; step < grads.shape[0]; ++step) {
      b8::AdamStep hyper;
      hyper.step = step + 1;
      hyper.weightDecay = decay;
      std::vector<float> g = rowOf<float>(grads, step);
      b8::adamStep(p.data(), g.data(), m1.data(), m2.data(), s1.data(),
                   s2.data(), n, hyper, *signedTable, *unsignedTable);
      EXPECT_EQ(m1, rowOf<uint8_t>(state1, step))
          << name << " step " << step + 1;
      EXPECT_EQ(m2, rowOf<uint8_t>(state2, step))
          << name << " step " << step + 1;
      EXPECT_EQ(s1, rowOf<float>(scale1, step)) << name << " step " << step + 1;
      EXPECT_EQ(s2, rowOf<float>(scale2, step)) << name << " step " << step + 1;
      std::vector<float> expected = rowOf<float>(params, step);
      for (int64_t i = 0; i < n; ++i) {
        worst = std::max(worst, ulpDistance(p[i], expected[i]));
        differing += p[i] != expected[i];
      }
    }
    EXPECT_LE(worst, 1) << name;
    // MKL's square root is off by one unit now and then, not often.
    EXPECT_LE(differing, 6 * n / 100) << name;
  }
}
