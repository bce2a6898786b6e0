//===- Nf4.h - 4-bit NormalFloat weights, as bitsandbytes stores them -----===//
//
// The storage of QLoRA's frozen base weights (`ztc compile --base-dtype
// nf4`, nn.matmul_nf4): bitsandbytes' NF4 with
// double quantization, so that weights quantized here are the bytes
// bitsandbytes.functional.quantize_4bit gives (test/fixtures/bnb_nf4,
// recorded from the real package by test/models/make_bnb_nf4.py; Nf4Test).
//
// A weight of n elements, taken flat (row-major, blocks crossing rows), is:
//   - n 4-bit codes, two per byte, the even element in the high nibble (an
//     odd n is padded with the code of 0); code c stands for kNf4Codes[c]
//     times its block's scale;
//   - one scale per block of 64 elements: the block's largest magnitude
//     (at least 1e-38). The scales are stored in 8 bits themselves: their
//     mean (the offset) is taken off, and the rest quantized block-wise in
//     blocks of 256 with the signed dynamic code book of the 8-bit
//     optimizer states (Blockwise8bit.h: same code book, same quantizer).
// That is 4 bits per element plus 8 bits per 64 and 32 per 16384: about
// 0.516 bytes per element.
//
// Quantizing an element: s = x / scale clamped to [-1, 1], computed as
// x * (1 / scale) in a whole block and as x / scale in a last, partial one
// (as bitsandbytes does), and the code is the number of midpoints between
// consecutive NF4 values that lie strictly below s (the nearest value; a
// tie goes to the lower code).
//
// Dequantizing: scale = code8[q] * scale2 + offset (float32, two
// roundings), element = kNf4Codes[c] * scale (one rounding).
//
// The offset is the mean of the scales. bitsandbytes takes it with
// PyTorch's float32 sum, whose order of additions depends on the vector
// width and thread count; meanOf here sums in double and rounds once, which
// can differ from it in the last bits. Given the same offset, every byte
// is bitsandbytes'.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_NF4_H
#define ZTC_RUNTIME_KERNELS_NF4_H

#include "Blockwise8bit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ztc::nf4 {

/// Elements per scale, and scales per second-level scale.
constexpr int64_t kBlock = 64;
constexpr int64_t kScaleBlock = blockwise8bit::kBlock;

/// The 16 NF4 values (QLoRA's quantiles of a normal distribution, scaled
/// to [-1, 1]), in float32.
inline constexpr float kNf4Codes[16] = {-1.0f,
                                        -0.6961928009986877f,
                                        -0.5250730514526367f,
                                        -0.39491748809814453f,
                                        -0.28444138169288635f,
                                        -0.18477343022823334f,
                                        -0.09105003625154495f,
                                        0.0f,
                                        0.07958029955625534f,
                                        0.16093020141124725f,
                                        0.24611230194568634f,
                                        0.33791524171829224f,
                                        0.44070982933044434f,
                                        0.5626170039176941f,
                                        0.7229568362236023f,
                                        1.0f};

/// A weight held in NF4 is four tensors: the packed codes under the
/// weight's own name, then these (bitsandbytes' Linear4bit state-dict
/// names), for the compiler and the runtime alike.
inline constexpr const char *kPartSuffixes[3] = {".absmax", ".nested_absmax",
                                                 ".offset"};

/// Blocks of kBlock elements in a weight of n (the last may be partial).
inline int64_t blocksOf(int64_t n) { return (n + kBlock - 1) / kBlock; }

/// The packed codes' bytes of a weight of n elements: two codes a byte.
inline int64_t packedBytes(int64_t n) { return (n + 1) / 2; }

/// The elements of each part of kPartSuffixes for a weight of n: one 8-bit
/// scale code per block, one float32 scale per kScaleBlock of those, and
/// the float32 offset.
struct PartElements {
  int64_t absmax, nestedAbsmax, offset;
};
inline PartElements partElements(int64_t n) {
  int64_t blocks = blocksOf(n);
  return {blocks, (blocks + kScaleBlock - 1) / kScaleBlock, 1};
}

/// The 4-bit code of s in [-1, 1].
inline uint8_t codeOf(float s) {
  uint8_t code = 0;
  for (int k = 0; k < 15; ++k)
    code += (kNf4Codes[k] + kNf4Codes[k + 1]) * 0.5f < s;
  return code;
}

/// Quantizes w[0..n) into packed[(n + 1) / 2] and scales[blocksOf(n)].
inline void quantize(const float *w, int64_t n, uint8_t *packed,
                     float *scales) {
  auto put = [&](int64_t i, uint8_t code) {
    uint8_t &byte = packed[i / 2];
    byte = i % 2 ? uint8_t((byte & 0xF0) | code) : uint8_t(code << 4);
  };
  for (int64_t start = 0; start < n; start += kBlock) {
    int64_t count = std::min(kBlock, n - start);
    float largest = 0.0f;
    for (int64_t i = 0; i < count; ++i)
      largest = std::max(largest, std::fabs(w[start + i]));
    float scale = std::max(largest, 1e-38f);
    bool whole = count == kBlock;
    float inverse = 1.0f / scale;
    for (int64_t i = 0; i < count; ++i) {
      float s = whole ? w[start + i] * inverse : w[start + i] / scale;
      put(start + i, codeOf(std::min(1.0f, std::max(-1.0f, s))));
    }
    // A whole block keeps its largest magnitude, even 0.
    scales[start / kBlock] = whole ? largest : scale;
  }
  if (n % 2)
    put(n, codeOf(0.0f));
}

/// The mean of scales[0..count), summed in double, rounded once.
inline float meanOf(const float *scales, int64_t count) {
  double sum = 0;
  for (int64_t i = 0; i < count; ++i)
    sum += scales[i];
  return float(sum / double(count));
}

/// Quantizes the scales[0..count) again: codes[count] (8-bit, the signed
/// dynamic code book of `table`) and scales2[ceil(count / 256)], after
/// taking `offset` off each.
inline void quantizeScales(const float *scales, int64_t count, float offset,
                           const blockwise8bit::CodeTable &table,
                           uint8_t *codes, float *scales2) {
  float centred[kScaleBlock];
  for (int64_t start = 0; start < count; start += kScaleBlock) {
    int64_t size = std::min(kScaleBlock, count - start);
    for (int64_t i = 0; i < size; ++i)
      centred[i] = scales[start + i] - offset;
    scales2[start / kScaleBlock] =
        blockwise8bit::quantizeBlock(centred, size, table, codes + start);
  }
}

/// Scale `block` back from its 8-bit code.
inline float scaleOf(const uint8_t *codes, const float *scales2, float offset,
                     int64_t block, const blockwise8bit::CodeTable &table) {
  return blockwise8bit::dequantize(codes[block], scales2[block / kScaleBlock],
                                   table) +
         offset;
}

/// Element `i` of the weight.
inline float elementOf(const uint8_t *packed, int64_t i, float scale) {
  uint8_t byte = packed[i / 2];
  return kNf4Codes[i % 2 ? byte & 0x0F : byte >> 4] * scale;
}

/// The columns of op(W) a kernel dequantizes at a time for a product with
/// contraction K and N output columns: about 2^18 elements (at least 16
/// columns), so a tile stays in cache and W is never whole in memory.
inline int64_t tileColumns(int64_t k, int64_t n) {
  int64_t columns = (int64_t(1) << 18) / std::max<int64_t>(k, 1);
  return std::min(n, std::max<int64_t>(16, columns));
}

/// Elements [first, first + count) of the weight into out[0..count), each
/// block's scale computed once; `Store` rounds a float into `Out`.
template <typename Out, typename Store>
inline void dequantizeRange(const uint8_t *packed, const uint8_t *codes,
                            const float *scales2, float offset, int64_t first,
                            int64_t count,
                            const blockwise8bit::CodeTable &table, Out *out,
                            Store store) {
  for (int64_t i = first, end = first + count; i < end;) {
    const int64_t block = i / kBlock;
    const int64_t stop = std::min(end, (block + 1) * kBlock);
    const float scale = scaleOf(codes, scales2, offset, block, table);
    for (; i < stop; ++i)
      out[i - first] = store(elementOf(packed, i, scale));
  }
}

/// The whole weight back into w[0..n).
inline void dequantize(const uint8_t *packed, const uint8_t *codes,
                       const float *scales2, float offset, int64_t n,
                       const blockwise8bit::CodeTable &table, float *w) {
  dequantizeRange(packed, codes, scales2, offset, 0, n, table, w,
                  [](float value) { return value; });
}

} // namespace ztc::nf4

#endif // ZTC_RUNTIME_KERNELS_NF4_H
