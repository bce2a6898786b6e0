//===- CudnnTest.cpp - cuDNN as the CUDA convolutions load it
//--------------===//
//
// runtime/kernels/cuda/Cudnn.h declares the part of cuDNN 9 the convolutions
// call, so that steps build without cuDNN's headers. Here: each declared
// value and the performance record's layout against cuDNN's own headers
// (where installed), the loader and its environment, the library's
// host-side descriptor calls with the declared values (they need no GPU),
// the algorithm choice, which windows go to cuDNN, and the scratch the plan
// gives a convolution for cuDNN's workspace.
//
//===----------------------------------------------------------------------===//

#define ZTC_CUDA_HOST_EMULATION 1
#include "kernels/CudaKernels.cuh"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <string>

#if __has_include(<cudnn.h>)
// The legacy convolution API is deprecated in cuDNN 9, and its types warn.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cudnn.h>
namespace {
namespace c = ztc::cuda::cudnn;
static_assert(c::kSuccess == CUDNN_STATUS_SUCCESS);
static_assert(c::kDataFloat == CUDNN_DATA_FLOAT);
static_assert(c::kDataDouble == CUDNN_DATA_DOUBLE);
static_assert(c::kDataHalf == CUDNN_DATA_HALF);
static_assert(c::kDataBfloat16 == CUDNN_DATA_BFLOAT16);
static_assert(c::kNchw == CUDNN_TENSOR_NCHW);
static_assert(c::kNhwc == CUDNN_TENSOR_NHWC);
static_assert(c::kDefaultMath == CUDNN_DEFAULT_MATH);
static_assert(c::kFmaMath == CUDNN_FMA_MATH);
static_assert(c::kDeterministic == CUDNN_DETERMINISTIC);
static_assert(c::kCrossCorrelation == CUDNN_CROSS_CORRELATION);
static_assert(c::kFirstVersion <= CUDNN_VERSION &&
              CUDNN_VERSION < c::kEndVersion);
static_assert(sizeof(cudnnDataType_t) == sizeof(int) &&
              sizeof(cudnnMathType_t) == sizeof(int) &&
              sizeof(cudnnConvolutionFwdAlgo_t) == sizeof(int));
template <typename Perf> constexpr bool sameLayout() {
  return sizeof(Perf) == sizeof(c::AlgoPerf) &&
         offsetof(Perf, algo) == offsetof(c::AlgoPerf, algo) &&
         offsetof(Perf, status) == offsetof(c::AlgoPerf, status) &&
         offsetof(Perf, time) == offsetof(c::AlgoPerf, time) &&
         offsetof(Perf, memory) == offsetof(c::AlgoPerf, memory) &&
         offsetof(Perf, determinism) == offsetof(c::AlgoPerf, determinism) &&
         offsetof(Perf, mathType) == offsetof(c::AlgoPerf, mathType);
}
static_assert(sameLayout<cudnnConvolutionFwdAlgoPerf_t>());
static_assert(sameLayout<cudnnConvolutionBwdDataAlgoPerf_t>());
static_assert(sameLayout<cudnnConvolutionBwdFilterAlgoPerf_t>());
} // namespace
#pragma GCC diagnostic pop
#endif

namespace {

namespace cudnn = ztc::cuda::cudnn;
namespace scratch = ztc::cuda::scratch;
using ztc::cuda::detail::ConvPlan;

/// Sets (or, with nullptr, unsets) an environment variable for one test.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    const char *old = std::getenv(name);
    had = old != nullptr;
    if (had)
      saved = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name, saved.c_str(), 1);
    else
      unsetenv(name);
  }

private:
  const char *name;
  bool had = false;
  std::string saved;
};

cudnn::AlgoPerf perf(int algo, size_t memory, bool deterministic,
                     cudnn::Status status = cudnn::kSuccess) {
  return {algo,
          status,
          1.0f,
          memory,
          deterministic ? cudnn::kDeterministic : 0,
          cudnn::kDefaultMath,
          {}};
}

TEST(CudnnTest, ChoosesTheFirstDeterministicAlgorithmThatFits) {
  const cudnn::AlgoPerf perfs[] = {
      perf(1, 0, /*deterministic=*/false), // cuDNN's first: atomics
      perf(6, 1 << 20, true),              // more workspace than planned
      perf(7, 0, true, /*status=*/3),      // cannot run this convolution
      perf(2, 4096, true),                 // the one
      perf(0, 0, true)};
  EXPECT_EQ(cudnn::chooseAlgorithm(perfs, 5, 8192), 3);
  // With the megabyte planned, the faster one that needs it.
  EXPECT_EQ(cudnn::chooseAlgorithm(perfs, 5, 1 << 20), 1);
  // Nothing deterministic within no workspace but the last.
  EXPECT_EQ(cudnn::chooseAlgorithm(perfs, 5, 0), 4);
  EXPECT_EQ(cudnn::chooseAlgorithm(perfs, 3, 0), -1);
  EXPECT_EQ(cudnn::chooseAlgorithm(perfs, 0, 1 << 30), -1);
}

TEST(CudnnTest, ExactF32KeepsFmaArithmetic) {
  // As torch.backends.cudnn.allow_tf32 False: no TF32 whatever the
  // heuristics chose; with TF32 allowed, and for 16-bit types, theirs.
  EXPECT_EQ(cudnn::mathTypeFor(cudnn::kDataFloat, false, 1), cudnn::kFmaMath);
  EXPECT_EQ(cudnn::mathTypeFor(cudnn::kDataFloat, true, 1), 1);
  EXPECT_EQ(cudnn::mathTypeFor(cudnn::kDataHalf, false, 1), 1);
  EXPECT_EQ(cudnn::mathTypeFor(cudnn::kDataBfloat16, false, 2), 2);
  EXPECT_EQ(cudnn::mathTypeFor(cudnn::kDataDouble, false, 0),
            cudnn::kDefaultMath);
}

TEST(CudnnTest, ZtcCudnnZeroLoadsNothingAndSaysNothing) {
  ScopedEnv use("ZTC_CUDNN", "0");
  cudnn::Library lib = cudnn::loadLibrary();
  EXPECT_FALSE(lib.loaded);
  EXPECT_EQ(lib.why, "");
}

TEST(CudnnTest, AMissingLibraryIsNamed) {
  ScopedEnv use("ZTC_CUDNN", nullptr);
  ScopedEnv path("ZTC_CUDNN_LIBRARY", "/nonexistent/libcudnn.so.9");
  cudnn::Library lib = cudnn::loadLibrary();
  EXPECT_FALSE(lib.loaded);
  EXPECT_NE(lib.why.find("/nonexistent/libcudnn.so.9"), std::string::npos)
      << lib.why;
}

TEST(CudnnTest, ALibraryThatIsNotCudnnIsRefused) {
  // libcudart has none of cuDNN's entry points.
  ScopedEnv use("ZTC_CUDNN", nullptr);
  ScopedEnv path("ZTC_CUDNN_LIBRARY", ZTC_TEST_CUDART_LIBRARY);
  cudnn::Library lib = cudnn::loadLibrary();
  EXPECT_FALSE(lib.loaded);
  EXPECT_NE(lib.why.find("it has no cudnnGetVersion"), std::string::npos)
      << lib.why;
}

#ifdef ZTC_TEST_CUDNN_LIBRARY
/// The installed cuDNN, through the declarations of Cudnn.h: descriptor
/// calls are host-side, so they run without a GPU.
TEST(CudnnTest, TheInstalledLibraryTakesTheDeclaredValues) {
  ScopedEnv use("ZTC_CUDNN", nullptr);
  ScopedEnv path("ZTC_CUDNN_LIBRARY", ZTC_TEST_CUDNN_LIBRARY);
  cudnn::Library lib = cudnn::loadLibrary();
  ASSERT_TRUE(lib.loaded) << lib.why;
  EXPECT_GE(lib.version, cudnn::kFirstVersion);
  const cudnn::Api &api = lib.api;

  cudnn::TensorDesc x = nullptr;
  ASSERT_EQ(api.createTensorDescriptor(&x), cudnn::kSuccess);
  for (int type : {cudnn::kDataFloat, cudnn::kDataDouble, cudnn::kDataHalf,
                   cudnn::kDataBfloat16})
    for (int layout : {cudnn::kNchw, cudnn::kNhwc})
      EXPECT_EQ(api.setTensor4dDescriptor(x, layout, type, 2, 3, 8, 8),
                cudnn::kSuccess)
          << "data type " << type << ", layout " << layout;
  // The setter checks what it is given: a value cuDNN does not define fails.
  EXPECT_NE(api.setTensor4dDescriptor(x, cudnn::kNchw, 12345, 2, 3, 8, 8),
            cudnn::kSuccess);
  EXPECT_STRNE(api.getErrorString(3), "");

  cudnn::FilterDesc w = nullptr;
  ASSERT_EQ(api.createFilterDescriptor(&w), cudnn::kSuccess);
  EXPECT_EQ(api.setFilter4dDescriptor(w, cudnn::kDataBfloat16, cudnn::kNchw, 4,
                                      3, 3, 3),
            cudnn::kSuccess);

  cudnn::ConvDesc conv = nullptr;
  ASSERT_EQ(api.createConvolutionDescriptor(&conv), cudnn::kSuccess);
  EXPECT_EQ(api.setConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1,
                                           cudnn::kCrossCorrelation,
                                           cudnn::kDataFloat),
            cudnn::kSuccess);
  EXPECT_NE(api.setConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, 7,
                                           cudnn::kDataFloat),
            cudnn::kSuccess);
  EXPECT_EQ(api.setConvolutionGroupCount(conv, 3), cudnn::kSuccess);
  EXPECT_EQ(api.setConvolutionMathType(conv, cudnn::kFmaMath), cudnn::kSuccess);
  EXPECT_EQ(api.setConvolutionMathType(conv, cudnn::kDefaultMath),
            cudnn::kSuccess);

  EXPECT_EQ(api.destroyConvolutionDescriptor(conv), cudnn::kSuccess);
  EXPECT_EQ(api.destroyFilterDescriptor(w), cudnn::kSuccess);
  EXPECT_EQ(api.destroyTensorDescriptor(x), cudnn::kSuccess);
}
#endif

/// A 3x3 convolution of 8 channels into 16 over 10x12 images, stride 1,
/// padding 1 (the output as large as the input).
ConvPlan plan3x3() {
  ConvPlan p{};
  p.height = 10, p.width = 12, p.outH = 10, p.outW = 12;
  p.kH = p.kW = 3, p.strideH = p.strideW = 1, p.padH = p.padW = 1;
  p.dilationH = p.dilationW = 1;
  p.channels = 8, p.outChannels = 16, p.groupChannels = 8, p.groupOut = 16;
  return p;
}

TEST(CudnnTest, WindowsCudnnComputes) {
  ConvPlan p = plan3x3();
  EXPECT_TRUE(ztc::cuda::detail::cudnnTakesWindow(p, 4));
  // Output extents from end pads other than the begin ones: cuDNN's own
  // extents differ, so ztc's kernels take the call.
  ConvPlan longer = p;
  longer.outH = 11;
  EXPECT_FALSE(ztc::cuda::detail::cudnnTakesWindow(longer, 4));
  // An end pad that adds no window convolves as the symmetric one: stride 2
  // over 9 rows, begin pad 1, end pad 0 or 1, 5 rows either way.
  ConvPlan strided = p;
  strided.height = 9, strided.strideH = 2, strided.outH = 5;
  EXPECT_TRUE(ztc::cuda::detail::cudnnTakesWindow(strided, 4));
  EXPECT_FALSE(ztc::cuda::detail::cudnnTakesWindow(p, 0));
  // More elements than cuDNN's int counts.
  EXPECT_FALSE(ztc::cuda::detail::cudnnTakesWindow(p, int64_t(1) << 28));
}

TEST(CudnnTest, TheScratchHoldsCudnnsWorkspace) {
  // conv2d of f16 over a 1x1 window: ztc's own kernels multiply the input
  // as is and need no columns; cuDNN gets the batch's columns' worth.
  const int64_t strides[] = {1, 1}, pads[] = {0, 0, 0, 0}, dil[] = {1, 1};
  ztc::Conv2dParams params{
      ztc::Ints(strides), ztc::Ints(pads), ztc::Ints(dil), 1, false, false};
  ztc::Dims in[] = {{4, 32, 6, 6}, {64, 32, 1, 1}, {64}},
            out[] = {{4, 64, 6, 6}};
  EXPECT_EQ(scratch::conv2dColumns<ztc::f16>(in[0], in[1], out[0], params,
                                             scratch::kConvColumnsBytes)
                .bytes,
            0);
  EXPECT_EQ(scratch::conv2dBytes<ztc::f16>(in, out, params),
            4 * 32 * 6 * 6 * 2);
  // Integers never go to cuDNN: nothing for them.
  EXPECT_EQ(scratch::conv2dBytes<int32_t>(in, out, params), 0);
  // f32 3x3: the columns of the whole batch are both needs.
  ConvPlan p = plan3x3();
  EXPECT_EQ(scratch::cudnnWorkspaceBytes<float>(p, 4), 4 * 8 * 9 * 10 * 12 * 4);
  // Capped, as ztc's own columns are.
  EXPECT_EQ(scratch::cudnnWorkspaceBytes<float>(p, 1 << 20),
            scratch::kConvColumnsBytes);
}

} // namespace
