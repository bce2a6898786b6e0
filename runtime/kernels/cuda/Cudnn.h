//===- Cudnn.h - cuDNN 9, loaded when a step convolves ---------*- C++ -*-===//
//
// The CUDA convolutions (Conv.cuh) run on cuDNN when the process can load
// it, and on ztc's own im2col + cuBLAS kernels when it cannot. cuDNN is
// loaded with dlopen on a step's first convolution, not linked: a step
// built here then runs on a machine whose cuDNN lives elsewhere (a Python
// environment's nvidia-cudnn wheel: point ZTC_CUDNN_LIBRARY or
// LD_LIBRARY_PATH at it), or has none, and builds where cuDNN's headers are
// not installed. So this file declares the part of cuDNN 9's C interface
// the convolutions call (the legacy convolution API of cudnn_cnn.h and the
// descriptors of cudnn_ops.h): opaque handles, the enumerators as the ints
// they are, and the algorithm-performance record. test/unit/runtime's
// CudnnTest checks every value and layout here against cuDNN's own headers
// where they are installed, and calls the loaded library.
//
// Environment: ZTC_CUDNN=0 keeps the convolutions on ztc's kernels;
// ZTC_CUDNN_LIBRARY names the library to load (default libcudnn.so.9, found
// as the dynamic loader finds libraries).
//
// Plain host C++ (no CUDA, no MLIR).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_CUDNN_H
#define ZTC_RUNTIME_KERNELS_CUDA_CUDNN_H

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ztc::cuda::cudnn {

//===----------------------------------------------------------------------===//
// cuDNN 9's interface, as far as the convolutions use it
//===----------------------------------------------------------------------===//

using Status = int;
using Handle = struct Context *;
using TensorDesc = struct TensorStruct *;
using FilterDesc = struct FilterStruct *;
using ConvDesc = struct ConvolutionStruct *;

constexpr Status kSuccess = 0;       // CUDNN_STATUS_SUCCESS
constexpr int kDataFloat = 0;        // CUDNN_DATA_FLOAT
constexpr int kDataDouble = 1;       // CUDNN_DATA_DOUBLE
constexpr int kDataHalf = 2;         // CUDNN_DATA_HALF
constexpr int kDataBfloat16 = 9;     // CUDNN_DATA_BFLOAT16
constexpr int kNchw = 0;             // CUDNN_TENSOR_NCHW
constexpr int kNhwc = 1;             // CUDNN_TENSOR_NHWC
constexpr int kDefaultMath = 0;      // CUDNN_DEFAULT_MATH
constexpr int kFmaMath = 3;          // CUDNN_FMA_MATH
constexpr int kDeterministic = 1;    // CUDNN_DETERMINISTIC
constexpr int kCrossCorrelation = 1; // CUDNN_CROSS_CORRELATION

/// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t: the three records
/// are laid out alike (an algorithm enumerator first).
struct AlgoPerf {
  int algo;
  Status status;
  float time;
  size_t memory;
  int determinism;
  int mathType;
  int reserved[3];
};

/// The entry points, resolved from the loaded library.
struct Api {
  size_t (*getVersion)();
  const char *(*getErrorString)(Status);
  Status (*create)(Handle *);
  Status (*setStream)(Handle, void *stream);
  Status (*createTensorDescriptor)(TensorDesc *);
  Status (*destroyTensorDescriptor)(TensorDesc);
  Status (*setTensor4dDescriptor)(TensorDesc, int format, int dataType, int n,
                                  int c, int h, int w);
  Status (*createFilterDescriptor)(FilterDesc *);
  Status (*destroyFilterDescriptor)(FilterDesc);
  Status (*setFilter4dDescriptor)(FilterDesc, int dataType, int format, int k,
                                  int c, int h, int w);
  Status (*createConvolutionDescriptor)(ConvDesc *);
  Status (*destroyConvolutionDescriptor)(ConvDesc);
  Status (*setConvolution2dDescriptor)(ConvDesc, int padH, int padW,
                                       int strideH, int strideW, int dilationH,
                                       int dilationW, int mode,
                                       int computeType);
  Status (*setConvolutionGroupCount)(ConvDesc, int groups);
  Status (*setConvolutionMathType)(ConvDesc, int mathType);
  Status (*forwardAlgorithms)(Handle, TensorDesc x, FilterDesc w, ConvDesc,
                              TensorDesc y, int requested, int *returned,
                              AlgoPerf *perfs);
  Status (*backwardDataAlgorithms)(Handle, FilterDesc w, TensorDesc dy,
                                   ConvDesc, TensorDesc dx, int requested,
                                   int *returned, AlgoPerf *perfs);
  Status (*backwardFilterAlgorithms)(Handle, TensorDesc x, TensorDesc dy,
                                     ConvDesc, FilterDesc dw, int requested,
                                     int *returned, AlgoPerf *perfs);
  Status (*forward)(Handle, const void *alpha, TensorDesc, const void *x,
                    FilterDesc, const void *w, ConvDesc, int algo,
                    void *workspace, size_t workspaceBytes, const void *beta,
                    TensorDesc, void *y);
  Status (*backwardData)(Handle, const void *alpha, FilterDesc, const void *w,
                         TensorDesc, const void *dy, ConvDesc, int algo,
                         void *workspace, size_t workspaceBytes,
                         const void *beta, TensorDesc, void *dx);
  Status (*backwardFilter)(Handle, const void *alpha, TensorDesc, const void *x,
                           TensorDesc, const void *dy, ConvDesc, int algo,
                           void *workspace, size_t workspaceBytes,
                           const void *beta, FilterDesc, void *dw);
};

/// The cuDNN versions whose interface this file declares: 9.x
/// (cudnnGetVersion gives major * 10000 + minor * 100 + patch).
constexpr size_t kFirstVersion = 90000, kEndVersion = 100000;

/// The library a process loaded, or why it has none.
struct Library {
  Api api{};
  bool loaded = false;
  /// Why not loaded ("" when asked not to load it: ZTC_CUDNN=0).
  std::string why;
  size_t version = 0;
};

namespace detail {

/// Resolves `name` into `slot`; false, with `why` set, when it is missing.
template <typename Fn>
bool resolve(void *lib, const char *name, Fn &slot, std::string &why) {
  slot = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!slot)
    why = std::string("it has no ") + name;
  return slot != nullptr;
}

/// Loads `path` (a name the dynamic loader looks up, or a file).
inline Library loadFrom(const char *path) {
  Library out;
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *error = dlerror();
    out.why = error ? error : (std::string("cannot load ") + path);
    return out;
  }
  Api &a = out.api;
  std::string why;
  bool all =
      resolve(lib, "cudnnGetVersion", a.getVersion, why) &&
      resolve(lib, "cudnnGetErrorString", a.getErrorString, why) &&
      resolve(lib, "cudnnCreate", a.create, why) &&
      resolve(lib, "cudnnSetStream", a.setStream, why) &&
      resolve(lib, "cudnnCreateTensorDescriptor", a.createTensorDescriptor,
              why) &&
      resolve(lib, "cudnnDestroyTensorDescriptor", a.destroyTensorDescriptor,
              why) &&
      resolve(lib, "cudnnSetTensor4dDescriptor", a.setTensor4dDescriptor,
              why) &&
      resolve(lib, "cudnnCreateFilterDescriptor", a.createFilterDescriptor,
              why) &&
      resolve(lib, "cudnnDestroyFilterDescriptor", a.destroyFilterDescriptor,
              why) &&
      resolve(lib, "cudnnSetFilter4dDescriptor", a.setFilter4dDescriptor,
              why) &&
      resolve(lib, "cudnnCreateConvolutionDescriptor",
              a.createConvolutionDescriptor, why) &&
      resolve(lib, "cudnnDestroyConvolutionDescriptor",
              a.destroyConvolutionDescriptor, why) &&
      resolve(lib, "cudnnSetConvolution2dDescriptor",
              a.setConvolution2dDescriptor, why) &&
      resolve(lib, "cudnnSetConvolutionGroupCount", a.setConvolutionGroupCount,
              why) &&
      resolve(lib, "cudnnSetConvolutionMathType", a.setConvolutionMathType,
              why) &&
      resolve(lib, "cudnnGetConvolutionForwardAlgorithm_v7",
              a.forwardAlgorithms, why) &&
      resolve(lib, "cudnnGetConvolutionBackwardDataAlgorithm_v7",
              a.backwardDataAlgorithms, why) &&
      resolve(lib, "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
              a.backwardFilterAlgorithms, why) &&
      resolve(lib, "cudnnConvolutionForward", a.forward, why) &&
      resolve(lib, "cudnnConvolutionBackwardData", a.backwardData, why) &&
      resolve(lib, "cudnnConvolutionBackwardFilter", a.backwardFilter, why);
  if (!all) {
    out.why = std::string(path) + ": " + why;
    dlclose(lib);
    return out;
  }
  out.version = a.getVersion();
  if (out.version < kFirstVersion || out.version >= kEndVersion) {
    out.why = std::string(path) + " is cuDNN " +
              std::to_string(out.version / 10000) + "." +
              std::to_string(out.version / 100 % 100) +
              ": ztc's convolutions call cuDNN 9";
    dlclose(lib);
    return out;
  }
  out.loaded = true;
  return out;
}

/// What the environment asks for: nullptr when ZTC_CUDNN=0, else the
/// library to load.
inline const char *requestedLibrary() {
  const char *use = std::getenv("ZTC_CUDNN");
  if (use && std::strcmp(use, "0") == 0)
    return nullptr;
  const char *path = std::getenv("ZTC_CUDNN_LIBRARY");
  return path && *path ? path : "libcudnn.so.9";
}

} // namespace detail

/// Loads cuDNN as the environment says (the file's comment), without
/// caching: library() keeps the process's one answer.
inline Library loadLibrary() {
  const char *path = detail::requestedLibrary();
  return path ? detail::loadFrom(path) : Library{};
}

/// The process's cuDNN, loaded on first use and kept (never unloaded: its
/// handles live as long as the process).
inline const Library &library() {
  static const Library loaded = loadLibrary();
  return loaded;
}

/// The algorithm a convolution runs: the first of `perfs` (cuDNN's
/// heuristics give them best first) that cuDNN reports it can run, that is
/// deterministic (ztc's steps give the same result every run, as its own
/// kernels do), and whose workspace fits the `budget` bytes planned for the
/// call. Its index, or -1 when none qualifies.
inline int chooseAlgorithm(const AlgoPerf *perfs, int count, size_t budget) {
  for (int i = 0; i < count; ++i)
    if (perfs[i].status == kSuccess && perfs[i].determinism == kDeterministic &&
        perfs[i].memory <= budget)
      return i;
  return -1;
}

/// The math a convolution runs with, given the one cuDNN's heuristics chose
/// for its algorithm: f32 without TF32 (conv2d's tf32 flag unset) keeps
/// FMA arithmetic, as PyTorch does with torch.backends.cudnn.allow_tf32
/// False; everything else takes the heuristics' choice (tensor cores for
/// 16-bit types, TF32 for f32 when allowed).
inline int mathTypeFor(int dataType, bool tf32, int chosen) {
  return dataType == kDataFloat && !tf32 ? kFmaMath : chosen;
}

} // namespace ztc::cuda::cudnn

#endif // ZTC_RUNTIME_KERNELS_CUDA_CUDNN_H
