//===- Blockwise8bit.h - 8-bit optimizer states (bitsandbytes) --*- C++ -*-===//
//
// `--optimizer adamw8bit` and `adam8bit` (train.adam8bit, the library
// kernel adam8bit of CpuKernels.h and CudaKernels.cuh): Adam's moments held
// in 8 bits per element, block-wise dynamic quantization as bitsandbytes
// (0.50) does it on the CPU, so that a step here leaves the same bytes in
// the states as bnb.optim.AdamW8bit and Adam8bit do (test/fixtures/bnb8bit,
// recorded from the real package by test/models/make_bnb8bit.py;
// Blockwise8bitTest).
//
// A state of n elements is n codes (uint8) and one float32 scale per block
// of 256 elements (the last block may be shorter): element i stands for
// code[q[i]] * absmax[i / 256], where code is a code book of 256 values in
// [-1, 1] (the first moment's, signed) or [0, 1] (the second's, unsigned):
// bitsandbytes' "dynamic" maps, whose values are given below as that
// package computes them (they are not a simple closed form in float32).
//
// Quantizing a block: absmax = max |x| over the block (a block of zeros is
// all code 0 with absmax 0); each x * (1 / absmax), clamped to [-1, 1], is
// placed on a grid of 65536 points of [-1, 1] (t = (y + 1) / 2, the point
// floor(t * 65535 + 0.5) with one rounding, a fused multiply-add), and a
// table gives each grid point the code whose interval it falls in: the
// number of midpoints between consecutive codes that lie strictly below the
// point's value. That is not always the nearest code (bitsandbytes' CPU
// quantizer works so; so does this one).
//
// The Adam step, per element, in float32 with the roundings bitsandbytes'
// CPU path makes (std::fma where its kernels fuse):
//   m = fma(g, 1 - b1, m * b1)            v = fma((1 - b2) * g, g, v * b2)
//   c1 = 1 - b1^t, c2 = sqrt(1 - b2^t)    (double; t counts from 1)
//   denominator = sqrt(v) / c2 + eps
//   p = p * (1 - lr * wd)                 (AdamW's decoupled decay, first)
//   p = p + ((-lr / c1) * m) / denominator
// then m and v are quantized again. The states' bytes match bitsandbytes';
// the parameter matches it to within one unit in the last place, since
// PyTorch's CPU square root (MKL's) is not correctly rounded and this one
// is.
//
// bitsandbytes keeps tensors of fewer than kMinElements elements in
// float32 states; so does the compiler (ztc-optimizer).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_BLOCKWISE8BIT_H
#define ZTC_RUNTIME_KERNELS_BLOCKWISE8BIT_H

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ztc::blockwise8bit {

/// Elements per scale.
constexpr int64_t kBlock = 256;
/// Tensors with fewer elements keep float32 states (bitsandbytes'
/// min_8bit_size).
constexpr int64_t kMinElements = 4096;

/// The first moment's code book (bitsandbytes' signed dynamic map).
inline constexpr float kSignedCodes[256] = {
    -0x1.fc6666p-1f,  -0x1.f53334p-1f,  -0x1.eep-1f,      -0x1.e6ccccp-1f,
    -0x1.df999ap-1f,  -0x1.d86666p-1f,  -0x1.d13334p-1f,  -0x1.cap-1f,
    -0x1.c2ccccp-1f,  -0x1.bb999ap-1f,  -0x1.b46666p-1f,  -0x1.ad3334p-1f,
    -0x1.a6p-1f,      -0x1.9eccccp-1f,  -0x1.97999ap-1f,  -0x1.906666p-1f,
    -0x1.893334p-1f,  -0x1.82p-1f,      -0x1.7accccp-1f,  -0x1.73999ap-1f,
    -0x1.6c6668p-1f,  -0x1.653334p-1f,  -0x1.5ep-1f,      -0x1.56ccccp-1f,
    -0x1.4f999ap-1f,  -0x1.486668p-1f,  -0x1.413334p-1f,  -0x1.3ap-1f,
    -0x1.32ccccp-1f,  -0x1.2b999ap-1f,  -0x1.246668p-1f,  -0x1.1d3334p-1f,
    -0x1.16p-1f,      -0x1.0eccccp-1f,  -0x1.079998p-1f,  -0x1.006666p-1f,
    -0x1.f26664p-2f,  -0x1.e4p-2f,      -0x1.d59998p-2f,  -0x1.c73334p-2f,
    -0x1.b8ccccp-2f,  -0x1.aa6666p-2f,  -0x1.9cp-2f,      -0x1.8d9998p-2f,
    -0x1.7f3334p-2f,  -0x1.70ccccp-2f,  -0x1.626666p-2f,  -0x1.54p-2f,
    -0x1.459998p-2f,  -0x1.373334p-2f,  -0x1.28ccccp-2f,  -0x1.1a6668p-2f,
    -0x1.0cp-2f,      -0x1.fb3332p-3f,  -0x1.de6666p-3f,  -0x1.c1999ap-3f,
    -0x1.a4ccccp-3f,  -0x1.88p-3f,      -0x1.6b3334p-3f,  -0x1.4e6666p-3f,
    -0x1.31999ap-3f,  -0x1.14ccccp-3f,  -0x1.fp-4f,       -0x1.b66668p-4f,
    -0x1.93d70ap-4f,  -0x1.8851eep-4f,  -0x1.7ccccep-4f,  -0x1.7147aep-4f,
    -0x1.65c29p-4f,   -0x1.5a3d7p-4f,   -0x1.4eb854p-4f,  -0x1.433334p-4f,
    -0x1.37ae14p-4f,  -0x1.2c28f6p-4f,  -0x1.20a3d6p-4f,  -0x1.151ebap-4f,
    -0x1.09999ap-4f,  -0x1.fc28f6p-5f,  -0x1.e51ebap-5f,  -0x1.ce147ap-5f,
    -0x1.b70a3ep-5f,  -0x1.ap-5f,       -0x1.88f5c2p-5f,  -0x1.71eb86p-5f,
    -0x1.5ae146p-5f,  -0x1.43d70ap-5f,  -0x1.2ccccep-5f,  -0x1.15c29p-5f,
    -0x1.fd70a4p-6f,  -0x1.cf5c2ap-6f,  -0x1.a147aep-6f,  -0x1.733334p-6f,
    -0x1.451ebap-6f,  -0x1.170a3ep-6f,  -0x1.d1eb86p-7f,  -0x1.75c29p-7f,
    -0x1.3e76c8p-7f,  -0x1.2c083p-7f,   -0x1.19999ap-7f,  -0x1.072b02p-7f,
    -0x1.e978d4p-8f,  -0x1.c49ba6p-8f,  -0x1.9fbe76p-8f,  -0x1.7ae148p-8f,
    -0x1.56041ap-8f,  -0x1.3126e8p-8f,  -0x1.0c49bap-8f,  -0x1.ced914p-9f,
    -0x1.851eb8p-9f,  -0x1.3b645ap-9f,  -0x1.e353f8p-10f, -0x1.4fdf3ap-10f,
    -0x1.eecbfep-11f, -0x1.b3d07cp-11f, -0x1.78d5p-11f,   -0x1.3dd982p-11f,
    -0x1.02de02p-11f, -0x1.8fc506p-12f, -0x1.19ce0ap-12f, -0x1.47ae16p-13f,
    -0x1.743e96p-14f, -0x1.15df66p-14f, -0x1.6f0068p-15f, -0x1.64840cp-16f,
    -0x1.040bfep-17f, -0x1.b43528p-19f, -0x1.27476ep-21f, 0.0f,
    0x1.27476ep-21f,  0x1.b43528p-19f,  0x1.040bfep-17f,  0x1.64840cp-16f,
    0x1.6f0068p-15f,  0x1.15df66p-14f,  0x1.743e96p-14f,  0x1.47ae16p-13f,
    0x1.19ce0ap-12f,  0x1.8fc506p-12f,  0x1.02de02p-11f,  0x1.3dd982p-11f,
    0x1.78d5p-11f,    0x1.b3d07cp-11f,  0x1.eecbfep-11f,  0x1.4fdf3ap-10f,
    0x1.e353f8p-10f,  0x1.3b645ap-9f,   0x1.851eb8p-9f,   0x1.ced914p-9f,
    0x1.0c49bap-8f,   0x1.3126e8p-8f,   0x1.56041ap-8f,   0x1.7ae148p-8f,
    0x1.9fbe76p-8f,   0x1.c49ba6p-8f,   0x1.e978d4p-8f,   0x1.072b02p-7f,
    0x1.19999ap-7f,   0x1.2c083p-7f,    0x1.3e76c8p-7f,   0x1.75c29p-7f,
    0x1.d1eb86p-7f,   0x1.170a3ep-6f,   0x1.451ebap-6f,   0x1.733334p-6f,
    0x1.a147aep-6f,   0x1.cf5c2ap-6f,   0x1.fd70a4p-6f,   0x1.15c29p-5f,
    0x1.2ccccep-5f,   0x1.43d70ap-5f,   0x1.5ae146p-5f,   0x1.71eb86p-5f,
    0x1.88f5c2p-5f,   0x1.ap-5f,        0x1.b70a3ep-5f,   0x1.ce147ap-5f,
    0x1.e51ebap-5f,   0x1.fc28f6p-5f,   0x1.09999ap-4f,   0x1.151ebap-4f,
    0x1.20a3d6p-4f,   0x1.2c28f6p-4f,   0x1.37ae14p-4f,   0x1.433334p-4f,
    0x1.4eb854p-4f,   0x1.5a3d7p-4f,    0x1.65c29p-4f,    0x1.7147aep-4f,
    0x1.7ccccep-4f,   0x1.8851eep-4f,   0x1.93d70ap-4f,   0x1.b66668p-4f,
    0x1.fp-4f,        0x1.14ccccp-3f,   0x1.31999ap-3f,   0x1.4e6666p-3f,
    0x1.6b3334p-3f,   0x1.88p-3f,       0x1.a4ccccp-3f,   0x1.c1999ap-3f,
    0x1.de6666p-3f,   0x1.fb3332p-3f,   0x1.0cp-2f,       0x1.1a6668p-2f,
    0x1.28ccccp-2f,   0x1.373334p-2f,   0x1.459998p-2f,   0x1.54p-2f,
    0x1.626666p-2f,   0x1.70ccccp-2f,   0x1.7f3334p-2f,   0x1.8d9998p-2f,
    0x1.9cp-2f,       0x1.aa6666p-2f,   0x1.b8ccccp-2f,   0x1.c73334p-2f,
    0x1.d59998p-2f,   0x1.e4p-2f,       0x1.f26664p-2f,   0x1.006666p-1f,
    0x1.079998p-1f,   0x1.0eccccp-1f,   0x1.16p-1f,       0x1.1d3334p-1f,
    0x1.246668p-1f,   0x1.2b999ap-1f,   0x1.32ccccp-1f,   0x1.3ap-1f,
    0x1.413334p-1f,   0x1.486668p-1f,   0x1.4f999ap-1f,   0x1.56ccccp-1f,
    0x1.5ep-1f,       0x1.653334p-1f,   0x1.6c6668p-1f,   0x1.73999ap-1f,
    0x1.7accccp-1f,   0x1.82p-1f,       0x1.893334p-1f,   0x1.906666p-1f,
    0x1.97999ap-1f,   0x1.9eccccp-1f,   0x1.a6p-1f,       0x1.ad3334p-1f,
    0x1.b46666p-1f,   0x1.bb999ap-1f,   0x1.c2ccccp-1f,   0x1.cap-1f,
    0x1.d13334p-1f,   0x1.d86666p-1f,   0x1.df999ap-1f,   0x1.e6ccccp-1f,
    0x1.eep-1f,       0x1.f53334p-1f,   0x1.fc6666p-1f,   0x1p+0f,
};

/// The second moment's code book (bitsandbytes' unsigned dynamic map).
inline constexpr float kUnsignedCodes[256] = {
    0.0f,
    0x1.5cf754p-22f,
    0x1.a0133p-21f,
    0x1.1d367p-19f,
    0x1.2599ecp-18f,
    0x1.bc98a2p-18f,
    0x1.29cbaap-17f,
    0x1.0624dcp-16f,
    0x1.c2e34p-16f,
    0x1.3fd0dp-15f,
    0x1.9e3p-15f,
    0x1.fc8f34p-15f,
    0x1.2d7732p-14f,
    0x1.5ca6c8p-14f,
    0x1.8bd662p-14f,
    0x1.0cb296p-13f,
    0x1.82a994p-13f,
    0x1.f8a092p-13f,
    0x1.374bc8p-12f,
    0x1.724744p-12f,
    0x1.ad42c6p-12f,
    0x1.e83e44p-12f,
    0x1.119ce2p-11f,
    0x1.2f1aap-11f,
    0x1.4c986p-11f,
    0x1.6a162p-11f,
    0x1.8793dep-11f,
    0x1.a511ap-11f,
    0x1.c28f5ep-11f,
    0x1.e00d1cp-11f,
    0x1.fd8adcp-11f,
    0x1.2b020cp-10f,
    0x1.74bc6ap-10f,
    0x1.be76c8p-10f,
    0x1.041894p-9f,
    0x1.28f5c2p-9f,
    0x1.4dd2fp-9f,
    0x1.72b02p-9f,
    0x1.978d4ep-9f,
    0x1.bc6a8p-9f,
    0x1.e147aep-9f,
    0x1.03126ep-8f,
    0x1.158104p-8f,
    0x1.27ef9ep-8f,
    0x1.3a5e34p-8f,
    0x1.4cccccp-8f,
    0x1.5f3b64p-8f,
    0x1.71a9fap-8f,
    0x1.841894p-8f,
    0x1.96872ap-8f,
    0x1.a8f5c2p-8f,
    0x1.bb645cp-8f,
    0x1.cdd2fp-8f,
    0x1.e0418ap-8f,
    0x1.f2b01ep-8f,
    0x1.028f5cp-7f,
    0x1.0bc6a8p-7f,
    0x1.14fdf2p-7f,
    0x1.1e354p-7f,
    0x1.276c8ap-7f,
    0x1.30a3d6p-7f,
    0x1.39db24p-7f,
    0x1.43126ep-7f,
    0x1.5eb854p-7f,
    0x1.8ccccep-7f,
    0x1.bae146p-7f,
    0x1.e8f5c4p-7f,
    0x1.0b851ep-6f,
    0x1.228f5ep-6f,
    0x1.39999ap-6f,
    0x1.50a3d6p-6f,
    0x1.67ae16p-6f,
    0x1.7eb852p-6f,
    0x1.95c28ep-6f,
    0x1.accccep-6f,
    0x1.c3d70ep-6f,
    0x1.dae146p-6f,
    0x1.f1eb86p-6f,
    0x1.047aep-5f,
    0x1.1p-5f,
    0x1.1b851ep-5f,
    0x1.270a3ep-5f,
    0x1.328f5ep-5f,
    0x1.3e147ap-5f,
    0x1.49999ap-5f,
    0x1.551eb8p-5f,
    0x1.60a3d6p-5f,
    0x1.6c28f6p-5f,
    0x1.77ae14p-5f,
    0x1.833334p-5f,
    0x1.8eb85p-5f,
    0x1.9a3d7p-5f,
    0x1.a5c28ep-5f,
    0x1.b147aep-5f,
    0x1.bccccep-5f,
    0x1.c851eep-5f,
    0x1.d3d70ep-5f,
    0x1.df5c2ap-5f,
    0x1.eae146p-5f,
    0x1.f66666p-5f,
    0x1.00f5c4p-4f,
    0x1.06b854p-4f,
    0x1.0c7ae2p-4f,
    0x1.123d7p-4f,
    0x1.18p-4f,
    0x1.1dc29p-4f,
    0x1.23852p-4f,
    0x1.2947aep-4f,
    0x1.2f0a3ep-4f,
    0x1.34cccep-4f,
    0x1.3a8f5ep-4f,
    0x1.4051ecp-4f,
    0x1.46147cp-4f,
    0x1.4bd70ap-4f,
    0x1.51999ap-4f,
    0x1.575c2ap-4f,
    0x1.5d1eb8p-4f,
    0x1.62e148p-4f,
    0x1.68a3d6p-4f,
    0x1.6e6666p-4f,
    0x1.7428f6p-4f,
    0x1.79eb86p-4f,
    0x1.7fae16p-4f,
    0x1.8570a4p-4f,
    0x1.8b3334p-4f,
    0x1.90f5c4p-4f,
    0x1.96b852p-4f,
    0x1.a8p-4f,
    0x1.c4ccccp-4f,
    0x1.e1999ap-4f,
    0x1.fe6666p-4f,
    0x1.0d9998p-3f,
    0x1.1cp-3f,
    0x1.2a6668p-3f,
    0x1.38ccccp-3f,
    0x1.473334p-3f,
    0x1.559998p-3f,
    0x1.64p-3f,
    0x1.726668p-3f,
    0x1.80ccccp-3f,
    0x1.8f3334p-3f,
    0x1.9d9998p-3f,
    0x1.acp-3f,
    0x1.ba6668p-3f,
    0x1.c8ccccp-3f,
    0x1.d73334p-3f,
    0x1.e59998p-3f,
    0x1.f4p-3f,
    0x1.013332p-2f,
    0x1.086666p-2f,
    0x1.0f999ap-2f,
    0x1.16ccccp-2f,
    0x1.1ep-2f,
    0x1.253334p-2f,
    0x1.2c6666p-2f,
    0x1.339998p-2f,
    0x1.3accccp-2f,
    0x1.42p-2f,
    0x1.493334p-2f,
    0x1.506666p-2f,
    0x1.579998p-2f,
    0x1.5eccccp-2f,
    0x1.66p-2f,
    0x1.6d3334p-2f,
    0x1.746666p-2f,
    0x1.7b9998p-2f,
    0x1.82ccccp-2f,
    0x1.8ap-2f,
    0x1.913334p-2f,
    0x1.986666p-2f,
    0x1.9f9998p-2f,
    0x1.a6ccccp-2f,
    0x1.aep-2f,
    0x1.b53334p-2f,
    0x1.bc6666p-2f,
    0x1.c39998p-2f,
    0x1.caccccp-2f,
    0x1.d2p-2f,
    0x1.d93334p-2f,
    0x1.e06666p-2f,
    0x1.e79998p-2f,
    0x1.eeccccp-2f,
    0x1.f6p-2f,
    0x1.fd3332p-2f,
    0x1.023334p-1f,
    0x1.05ccccp-1f,
    0x1.096666p-1f,
    0x1.0dp-1f,
    0x1.109998p-1f,
    0x1.143334p-1f,
    0x1.17ccccp-1f,
    0x1.1b6668p-1f,
    0x1.1fp-1f,
    0x1.22999ap-1f,
    0x1.263334p-1f,
    0x1.29ccccp-1f,
    0x1.2d6668p-1f,
    0x1.31p-1f,
    0x1.34999ap-1f,
    0x1.383334p-1f,
    0x1.3bccccp-1f,
    0x1.3f6668p-1f,
    0x1.43p-1f,
    0x1.46999ap-1f,
    0x1.4a3334p-1f,
    0x1.4dccccp-1f,
    0x1.516668p-1f,
    0x1.55p-1f,
    0x1.58999ap-1f,
    0x1.5c3334p-1f,
    0x1.5fccccp-1f,
    0x1.636668p-1f,
    0x1.67p-1f,
    0x1.6a999ap-1f,
    0x1.6e3334p-1f,
    0x1.71ccccp-1f,
    0x1.756668p-1f,
    0x1.79p-1f,
    0x1.7c999ap-1f,
    0x1.803334p-1f,
    0x1.83ccccp-1f,
    0x1.876668p-1f,
    0x1.8bp-1f,
    0x1.8e9998p-1f,
    0x1.923334p-1f,
    0x1.95ccccp-1f,
    0x1.996668p-1f,
    0x1.9dp-1f,
    0x1.a09998p-1f,
    0x1.a43334p-1f,
    0x1.a7ccccp-1f,
    0x1.ab6668p-1f,
    0x1.afp-1f,
    0x1.b29998p-1f,
    0x1.b63334p-1f,
    0x1.b9ccccp-1f,
    0x1.bd6668p-1f,
    0x1.c1p-1f,
    0x1.c49998p-1f,
    0x1.c83334p-1f,
    0x1.cbccccp-1f,
    0x1.cf6668p-1f,
    0x1.d3p-1f,
    0x1.d69998p-1f,
    0x1.da3334p-1f,
    0x1.ddccccp-1f,
    0x1.e16668p-1f,
    0x1.e5p-1f,
    0x1.e89998p-1f,
    0x1.ec3334p-1f,
    0x1.efccccp-1f,
    0x1.f36668p-1f,
    0x1.f7p-1f,
    0x1.fa9998p-1f,
    0x1.fe3334p-1f,
    0x1p+0f,
};

/// A code book and the code of each of the 65536 grid points of [-1, 1].
struct CodeTable {
  const float *codes = nullptr;
  uint8_t code[65536];
};

/// Fills `table` for the code book `codes` (256 ascending values).
inline void buildTable(const float *codes, CodeTable &table) {
  table.codes = codes;
  float mid[255];
  for (int k = 0; k < 255; ++k)
    mid[k] = 0.5f * (codes[k] + codes[k + 1]);
  int below = 0;
  for (int i = 0; i < 65536; ++i) {
    // The grid values ascend, so the count of midpoints below only grows.
    float value = (float(i) + float(i)) / 65535.0f - 1.0f;
    while (below < 255 && mid[below] < value)
      ++below;
    table.code[i] = uint8_t(below);
  }
}

/// The tables of the two dynamic maps (signed: kSignedCodes, else
/// kUnsignedCodes), built once per process.
inline const CodeTable &codeTable(bool isSigned) {
  static const CodeTable *tables = [] {
    static CodeTable built[2];
    buildTable(kUnsignedCodes, built[0]);
    buildTable(kSignedCodes, built[1]);
    return built;
  }();
  return tables[isSigned ? 1 : 0];
}

/// The value `q` stands for in a block of scale `absmax`.
inline float dequantize(uint8_t q, float absmax, const CodeTable &table) {
  return table.codes[q] * absmax;
}

/// Quantizes x[0..n) (one block, n <= kBlock) into q, returning its scale.
inline float quantizeBlock(const float *x, int64_t n, const CodeTable &table,
                           uint8_t *q) {
  float absmax = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    absmax = std::max(absmax, std::fabs(x[i]));
  if (absmax == 0.0f) {
    std::fill(q, q + n, uint8_t(0));
    return 0.0f;
  }
  float inverse = 1.0f / absmax;
  for (int64_t i = 0; i < n; ++i) {
    float y = std::min(1.0f, std::max(-1.0f, x[i] * inverse));
    float t = (y + 1.0f) * 0.5f;
    int point = int(std::trunc(std::fma(t, 65535.0f, 0.5f))) & 0xFFFF;
    q[i] = table.code[point];
  }
  return absmax;
}

/// Adam's hyperparameters for one step; `step` counts from 1.
struct AdamStep {
  int64_t step = 1;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  /// Decoupled (AdamW) weight decay; 0 for Adam.
  double weightDecay = 0.0;
};

/// One Adam step of the parameter p[0..n) with gradient g on 8-bit
/// moments: m1 (signed codes, scales scale1) and m2 (unsigned, scale2),
/// each ceil(n / kBlock) scales. Blocks are independent: a caller may run
/// them on any threads, and a shard of whole blocks steps alike.
inline void adamStep(float *p, const float *g, uint8_t *m1, uint8_t *m2,
                     float *scale1, float *scale2, int64_t n,
                     const AdamStep &hyper, const CodeTable &signedTable,
                     const CodeTable &unsignedTable) {
  const float beta1 = float(hyper.beta1), beta2 = float(hyper.beta2);
  const float rest1 = float(1.0 - hyper.beta1),
              rest2 = float(1.0 - hyper.beta2);
  const double c1 = 1.0 - std::pow(hyper.beta1, double(hyper.step));
  const float c2 =
      float(std::sqrt(1.0 - std::pow(hyper.beta2, double(hyper.step))));
  const float stepSize = float(-hyper.lr / c1), eps = float(hyper.eps);
  const float decay = float(1.0 - hyper.lr * hyper.weightDecay);
  float m[kBlock], v[kBlock];
  for (int64_t start = 0; start < n; start += kBlock) {
    int64_t count = std::min(kBlock, n - start), b = start / kBlock;
    for (int64_t i = 0; i < count; ++i) {
      int64_t at = start + i;
      float first = dequantize(m1[at], scale1[b], signedTable) * beta1;
      first = std::fma(g[at], rest1, first);
      float second = dequantize(m2[at], scale2[b], unsignedTable) * beta2;
      second = std::fma(rest2 * g[at], g[at], second);
      float denominator = std::sqrt(second) / c2 + eps;
      float value = p[at];
      if (hyper.weightDecay > 0)
        value = value * decay;
      p[at] = value + (stepSize * first) / denominator;
      m[i] = first;
      v[i] = second;
    }
    scale1[b] = quantizeBlock(m, count, signedTable, m1 + start);
    scale2[b] = quantizeBlock(v, count, unsignedTable, m2 + start);
  }
}

} // namespace ztc::blockwise8bit

#endif // ZTC_RUNTIME_KERNELS_BLOCKWISE8BIT_H
