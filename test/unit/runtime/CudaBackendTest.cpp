//===- CudaBackendTest.cpp - the CUDA backend and kernels on a device -----===//
//
// Without a usable CUDA device these tests check the backend's message and
// skip. With one, a hand-written step.cu calling the CUDA kernel library
// (cuBLAS products, block reductions, im2col convolution, f16) is compiled
// with compileSharedObject and run through the backend, and its results are
// compared with CpuKernels.h; a second entry with a bad gather index must
// come back as the backend's Error, and the step must run cleanly after it;
// replayed as a CUDA graph on uploaded inputs, it must write the same bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"

#include "TestUtil.h"
#include "kernels/CpuKernels.h"
#include "runtime/Error.h"
#include "runtime/backend/Compile.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace ztc::rt;
using ztc::f16;
using ztc::rt::test::TempDir;
using ztc::rt::test::writeText;

namespace {

// Bindings: 0 x f32[2,3,300], 1 w f32[300,70], 2 targets i64[6],
// 3 x16 f16[6,10,30], 4 w16 f16[30,7], then one per result (5..14).
constexpr char kStep[] = R"(#include "kernels/CudaKernels.cuh"
namespace k = ztc::cuda;
extern "C" void ztc_forward(const ztc_step_context *ctx) {
  void *const *b = ctx->bindings;
  cudaStream_t s = static_cast<cudaStream_t>(ctx->streams[0]);
  const float *x = static_cast<const float *>(b[0]);
  const float *w = static_cast<const float *>(b[1]);
  const int64_t *targets = static_cast<const int64_t *>(b[2]);
  const ztc::f16 *x16 = static_cast<const ztc::f16 *>(b[3]);
  const ztc::f16 *w16 = static_cast<const ztc::f16 *>(b[4]);
  static const int64_t ones[] = {1, 1}, pads[] = {1, 2, 1, 2};
  static const int64_t lastAxis[] = {2}, firstTwo[] = {0, 1};
  k::softmax<float>(x, {2, 3, 300}, static_cast<float *>(b[5]), {2, 3, 300},
                    ztc::AxisParams{2}, s);
  k::layerNorm<float>(x, {2, 3, 300}, w, {300}, w + 300, {300},
                      static_cast<float *>(b[6]), {2, 3, 300},
                      ztc::LayerNormParams{2, 1e-5}, s);
  k::matmul<float>(x, {2, 3, 300}, w, {300, 70}, static_cast<float *>(b[7]),
                   {2, 3, 70}, ztc::MatmulParams{false, false}, s);
  k::matmul<float>(x, {6, 10, 30}, w, {6, 30, 7}, static_cast<float *>(b[8]),
                   {6, 10, 7}, ztc::MatmulParams{false, false}, s);
  k::reduceSum<float>(x, {2, 3, 300}, static_cast<float *>(b[9]), {2, 3},
                      ztc::ReduceParams{ztc::Ints{lastAxis, 1}, false}, s);
  k::reduceMax<float>(x, {2, 3, 300}, static_cast<float *>(b[10]), {300},
                      ztc::ReduceParams{ztc::Ints{firstTwo, 2}, false}, s);
  k::conv2d<float>(x, {2, 3, 20, 15}, w, {4, 3, 3, 5}, w + 1000, {4},
                   static_cast<float *>(b[11]), {2, 4, 20, 15},
                   ztc::Conv2dParams{ztc::Ints{ones, 2}, ztc::Ints{pads, 4},
                                     ztc::Ints{ones, 2}, 1, false},
                   s);
  float *logProbs = static_cast<float *>(b[12]);
  k::logSoftmax<float>(x, {6, 300}, logProbs, {6, 300}, ztc::AxisParams{1}, s);
  k::nllLoss<float, int64_t>(
      logProbs, {6, 300}, targets, {6}, nullptr, k::Dims{},
      static_cast<float *>(b[13]), k::Dims{},
      ztc::NllLossParams{ztc::Reduction::Mean, ztc::MaybeInt{}}, s);
  k::matmul<ztc::f16>(x16, {6, 10, 30}, w16, {30, 7},
                      static_cast<ztc::f16 *>(b[14]), {6, 10, 7},
                      ztc::MatmulParams{false, false}, s);
}
extern "C" void ztc_bad(const ztc_step_context *ctx) {
  void *const *b = ctx->bindings;
  cudaStream_t s = static_cast<cudaStream_t>(ctx->streams[0]);
  static const int64_t bad[] = {1, 9, 2};
  int64_t *indices = static_cast<int64_t *>(b[2]);
  cudaMemcpyAsync(indices, bad, sizeof(bad), cudaMemcpyHostToDevice, s);
  k::gather<float, int64_t>(static_cast<const float *>(b[0]), {4, 150},
                            indices, {3}, static_cast<float *>(b[5]), {3, 150},
                            ztc::AxisParams{0}, s);
}
)";

std::vector<float> randomFloats(size_t count, unsigned seed, float low,
                                float high) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(count);
  for (float &value : values)
    value = dist(rng);
  return values;
}

/// max |actual - expected| / max(1, |expected|) at most `tolerance`.
template <typename T>
void expectClose(const std::vector<T> &actual, const std::vector<T> &expected,
                 double tolerance, const char *what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = static_cast<float>(actual[i]);
    double e = static_cast<float>(expected[i]);
    EXPECT_NEAR(a, e, tolerance * std::max(1.0, std::fabs(e)))
        << what << " at " << i;
  }
}

/// The CUDA backend, or nullptr (the test skips) without a usable device.
std::unique_ptr<Backend> cudaBackendOrSkip() {
  try {
    return createCudaBackend();
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()).rfind("no usable CUDA device: ", 0), 0u)
        << error.what();
    return nullptr;
  }
}

TEST(CudaBackendTest, NoDeviceIsAClearError) {
  std::unique_ptr<Backend> backend = cudaBackendOrSkip();
  if (!backend)
    GTEST_SKIP() << "no usable CUDA device";
  EXPECT_EQ(backend->target(), Target::Cuda);
  EXPECT_EQ(createBackend(Target::Cuda)->target(), Target::Cuda);
}

TEST(CudaBackendTest, MemoryIsZeroedAndRoundTrips) {
  std::unique_ptr<Backend> backend = cudaBackendOrSkip();
  if (!backend)
    GTEST_SKIP() << "no usable CUDA device";
  DeviceBuffer empty(*backend, 0);
  EXPECT_NE(empty.data(), nullptr);
  DeviceBuffer buffer(*backend, 1000);
  std::vector<unsigned char> bytes(1000, 0xff);
  backend->copyOut(bytes.data(), buffer.data(), bytes.size());
  EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0), 1000);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<unsigned char>(i * 7);
  backend->copyIn(buffer.data(), bytes.data(), bytes.size());
  std::vector<unsigned char> back(1000);
  backend->copyOut(back.data(), buffer.data(), back.size());
  EXPECT_EQ(back, bytes);
}

TEST(CudaBackendTest, KernelsMatchTheCpuAndErrorsReachTheCaller) {
  std::unique_ptr<Backend> backend = cudaBackendOrSkip();
  if (!backend)
    GTEST_SKIP() << "no usable CUDA device";
  TempDir dir;
  writeText(dir / "step.cu", kStep);
  CompileOptions options;
  options.nvcc = ZTC_TEST_NVCC;
  std::string so = compileSharedObject(dir / "step.cu", Target::Cuda,
                                       dir / "cache", options);
  void *handle = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  auto forward = reinterpret_cast<EntryFn>(::dlsym(handle, "ztc_forward"));
  auto bad = reinterpret_cast<EntryFn>(::dlsym(handle, "ztc_bad"));
  ASSERT_TRUE(forward && bad);

  std::vector<float> x = randomFloats(1800, 1, -3, 3);
  std::vector<float> w = randomFloats(21000, 2, -1, 1);
  std::vector<int64_t> targets = {0, 299, 17, 150, 3, 42};
  std::vector<f16> x16(1800), w16(210);
  for (size_t i = 0; i < x16.size(); ++i)
    x16[i] = f16(x[i]);
  for (size_t i = 0; i < w16.size(); ++i)
    w16[i] = f16(w[i]);
  const size_t resultSizes[] = {1800, 1800, 420, 420, 6, 300, 2400, 1800, 1};
  std::vector<DeviceBuffer> buffers;
  auto upload = [&](const void *data, size_t bytes) {
    buffers.emplace_back(*backend, bytes);
    backend->copyIn(buffers.back().data(), data, bytes);
  };
  upload(x.data(), x.size() * sizeof(float));
  upload(w.data(), w.size() * sizeof(float));
  upload(targets.data(), targets.size() * sizeof(int64_t));
  upload(x16.data(), x16.size() * sizeof(f16));
  upload(w16.data(), w16.size() * sizeof(f16));
  for (size_t count : resultSizes)
    buffers.emplace_back(*backend, count * sizeof(float));
  buffers.emplace_back(*backend, 420 * sizeof(f16));
  std::vector<void *> bindings;
  for (DeviceBuffer &buffer : buffers)
    bindings.push_back(buffer.data());
  auto result = [&](size_t index, size_t count) {
    std::vector<float> values(count);
    backend->copyOut(values.data(), bindings[index], count * sizeof(float));
    return values;
  };

  std::vector<void *> streams = backend->streams(1);
  ztc_step_context context{};
  context.bindings = bindings.data();
  context.streams = streams.data();
  context.stream_count = 1;
  context.world_size = 1;
  // The call only enqueues; the failure surfaces when the host waits.
  backend->call(bad, context);
  EXPECT_EQ(ZTC_ERROR_MESSAGE(backend->synchronize()),
            "the CUDA step failed: gather: index 9 is outside [-4, 4)");
  // The error is cleared for the next call.
  backend->copyIn(bindings[2], targets.data(), targets.size() * 8);
  backend->call(forward, context);
  backend->synchronize();

  namespace cpu = ztc::cpu;
  std::vector<float> expected(2400);
  cpu::softmax<float>(x.data(), {2, 3, 300}, expected.data(), {2, 3, 300},
                      ztc::AxisParams{2});
  expectClose(result(5, 1800), {expected.begin(), expected.begin() + 1800},
              1e-5, "softmax");
  cpu::layerNorm<float>(x.data(), {2, 3, 300}, w.data(), {300}, w.data() + 300,
                        {300}, expected.data(), {2, 3, 300},
                        ztc::LayerNormParams{2, 1e-5});
  expectClose(result(6, 1800), {expected.begin(), expected.begin() + 1800},
              1e-4, "layerNorm");
  cpu::matmul<float>(x.data(), {2, 3, 300}, w.data(), {300, 70},
                     expected.data(), {2, 3, 70},
                     ztc::MatmulParams{false, false});
  expectClose(result(7, 420), {expected.begin(), expected.begin() + 420}, 1e-4,
              "matmul shared b");
  cpu::matmul<float>(x.data(), {6, 10, 30}, w.data(), {6, 30, 7},
                     expected.data(), {6, 10, 7},
                     ztc::MatmulParams{false, false});
  expectClose(result(8, 420), {expected.begin(), expected.begin() + 420}, 1e-4,
              "matmul batched");
  const int64_t lastAxis[] = {2}, firstTwo[] = {0, 1};
  cpu::reduceSum<float>(x.data(), {2, 3, 300}, expected.data(), {2, 3},
                        ztc::ReduceParams{ztc::Ints{lastAxis}, false});
  expectClose(result(9, 6), {expected.begin(), expected.begin() + 6}, 1e-4,
              "reduce sum");
  cpu::reduceMax<float>(x.data(), {2, 3, 300}, expected.data(), {300},
                        ztc::ReduceParams{ztc::Ints{firstTwo}, false});
  expectClose(result(10, 300), {expected.begin(), expected.begin() + 300}, 0,
              "reduce max");
  const int64_t ones[] = {1, 1}, pads[] = {1, 2, 1, 2};
  cpu::conv2d<float>(x.data(), {2, 3, 20, 15}, w.data(), {4, 3, 3, 5},
                     w.data() + 1000, {4}, expected.data(), {2, 4, 20, 15},
                     ztc::Conv2dParams{ztc::Ints{ones}, ztc::Ints{pads},
                                       ztc::Ints{ones}, 1, false});
  expectClose(result(11, 2400), expected, 1e-4, "conv2d");
  std::vector<float> logProbs(1800), loss(1);
  cpu::logSoftmax<float>(x.data(), {6, 300}, logProbs.data(), {6, 300},
                         ztc::AxisParams{1});
  cpu::nllLoss<float, int64_t>(
      logProbs.data(), {6, 300}, targets.data(), {6}, nullptr, cpu::Dims{},
      loss.data(), cpu::Dims{},
      ztc::NllLossParams{ztc::Reduction::Mean, ztc::MaybeInt{}});
  expectClose(result(13, 1), loss, 1e-5, "nllLoss");
  std::vector<f16> expected16(420), actual16(420);
  cpu::matmul<f16>(x16.data(), {6, 10, 30}, w16.data(), {30, 7},
                   expected16.data(), {6, 10, 7},
                   ztc::MatmulParams{false, false});
  backend->copyOut(actual16.data(), bindings[14], 420 * sizeof(f16));
  expectClose(actual16, expected16, 2e-3, "matmul f16");

  // Replayed (a direct call, then the CUDA graph captured at the second
  // call, then launches of it), the step writes the bits of a direct call,
  // on inputs uploaded from pinned memory on the upload stream, alternating
  // the two upload slots as the Runner does.
  auto results = [&] {
    std::vector<std::vector<float>> all;
    for (size_t i = 5; i < 14; ++i)
      all.push_back(result(i, resultSizes[i - 5]));
    return all;
  };
  auto clearResults = [&] {
    for (size_t i = 5; i < buffers.size(); ++i) {
      std::vector<unsigned char> zero(buffers[i].size());
      backend->copyIn(bindings[i], zero.data(), zero.size());
    }
  };
  std::vector<float> y = randomFloats(1800, 3, -3, 3);
  size_t yBytes = y.size() * sizeof(float);
  backend->copyIn(bindings[0], y.data(), yBytes);
  clearResults();
  backend->call(forward, context);
  backend->synchronize();
  std::vector<std::vector<float>> direct = results();
  HostBuffer pinned(*backend, yBytes);
  std::memcpy(pinned.data(), y.data(), yBytes);
  backend->copyIn(bindings[0], x.data(), yBytes); // replaced by the upload
  for (unsigned call = 0; call < 4; ++call) {
    clearResults();
    unsigned slot = call % 2;
    backend->waitUploadRead(slot);
    backend->upload(slot, {{bindings[0], pinned.data(), yBytes}});
    backend->replay(forward, context);
    backend->releaseUpload(slot);
    backend->synchronize();
    EXPECT_TRUE(results() == direct) << "call " << call;
  }
  EXPECT_EQ(backend->takeNotices(), std::vector<std::string>{});
  ::dlclose(handle);
}

} // namespace
