//===- CudaKernels.cuh - kernels the generated CUDA code calls --*- C++ -*-===//
//
// Header-only library included by the CUDA source that ztc emits for the
// CUDA target (step.cu). It offers the API of CpuKernels.h in namespace
// ztc::cuda, with the same semantics (see that file's comment): one entry
// point per row of Library.def, called as that file says (each operand as
// (pointer, Dims), inputs then outputs, then the kernel's parameter struct
// from Library.h), plus one trailing `cudaStream_t stream` argument: every
// function enqueues its work on `stream` and returns without synchronizing.
// Data pointers are device pointers; `Dims` and the parameter structs (and
// the arrays their Ints fields point to) are host values, read before the
// launch.
//
// Where the CUDA library differs from the CPU one:
//  - Nothing throws or aborts (generated code is plain host code). The first
//    failing CUDA or cuBLAS call is recorded, with the call and the kernel
//    it served ("cublasGemmStridedBatchedEx in matmul: CUBLAS_STATUS_..."),
//    in a process-wide error state: lastError() / clearError(). Invalid
//    data that only shows on the device (a gather index or a loss target
//    out of range) writes 0 for that element and leaves a device-side record
//    that lastError() also reports, so call lastError() after synchronizing.
//    The runtime reaches both through the C symbols ztc_cuda_last_error and
//    ztc_cuda_clear_error of the compiled step.
//  - Sums reduce in parallel trees: deterministic for a given shape, but in
//    another order than on the CPU, so results agree to rounding error.
//  - Matrix products of float, double, f16 and bf16 run on cuBLAS
//    (cublasGemmStridedBatchedEx): f32 computes in f32 (never TF32), f16 and
//    bf16 accumulate in f32 and round once; integers use a plain kernel.
//    conv2d and its gradients run on cuDNN 9 (float, double, f16, bf16;
//    loaded at run time, cuda/Cudnn.h) with a deterministic algorithm that
//    fits the call's planned scratch. Without cuDNN, and for integers:
//    conv2d is im2col + the same product, or a direct kernel for integers and
//    for small patches (depthwise, first layers); its weight gradient is
//    im2col + one product over the images, its input gradient (f32 and
//    f64) a product per image + col2im.
//  - One cuBLAS handle and one cuDNN handle per device, created on first
//    use and kept for the process; calls on each are serialized by a mutex,
//    so generated code may run on several host threads.
//  - Convolutions and their gradients take NCHW tensors only: a call with
//    channels_last set records an error and computes nothing (the emitter
//    rejects such calls for this target first).
//
// Builds with nvcc -std=c++17 and no extended-lambda or relaxed-constexpr
// flags: kernels are function objects run by two generic launchers. One
// translation unit per shared object includes this file (the device-side
// data-error record is per translation unit). With ZTC_CUDA_HOST_EMULATION
// defined it compiles with a host compiler instead and runs every kernel
// body serially on the host with host pointers (cuBLAS replaced by the plain
// product), so the index arithmetic is tested on machines without a GPU.
//
// The kernels live in cuda/, one header per family (cuda/Common.cuh holds
// what they share); each includes what it uses. Generated code and tests
// include this file, which includes them all.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDAKERNELS_CUH
#define ZTC_RUNTIME_KERNELS_CUDAKERNELS_CUH

// The library's headers beside this one and the standard ones, which
// generated code may use directly (ztc::f16, <math.h>, <cstdint>).
#include "AttentionShape.h"
#include "Blockwise8bit.h"
#include "Dims.h"
#include "Half.h"
#include "Library.h"
#include "LinearCrossEntropy.h"
#include "MatmulPlan.h"
#include "Nf4.h"
#include "Numeric.h"
#include "Random.h"
#include "StepAbi.h"
#include "StepError.h"
#include "TrainState.h"
#include "Window.h"

#include <cuda_runtime_api.h>
#if !defined(ZTC_CUDA_HOST_EMULATION)
#include <cublas_v2.h>
#endif

#include <math.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

// The families, each after the ones it builds on.
#include "cuda/Common.cuh"

#include "cuda/Attention.cuh"
#include "cuda/Collectives.cuh"
#include "cuda/Linalg.cuh"
#include "cuda/Loss.cuh"
#include "cuda/Movement.cuh"
#include "cuda/Norm.cuh"
#include "cuda/Optim.cuh"
#include "cuda/Pool.cuh"
#include "cuda/Random.cuh"
#include "cuda/Reduce.cuh"

#include "cuda/Conv.cuh"
#include "cuda/LinearCrossEntropy.cuh"

//===----------------------------------------------------------------------===//
// C entry points for the runtime
//===----------------------------------------------------------------------===//
//
// The runtime loads the compiled step with dlopen and finds these with
// dlsym. Weak, so two translation units of one shared object link.

/// ztc::cuda::lastError(); the text stays valid until the next call on the
/// same thread.
extern "C" __attribute__((weak)) const char *ztc_cuda_last_error() {
  static thread_local std::string text;
  text = ztc::cuda::lastError();
  return text.c_str();
}

/// ztc::cuda::clearError().
extern "C" __attribute__((weak)) void ztc_cuda_clear_error() {
  ztc::cuda::clearError();
}

#endif // ZTC_RUNTIME_KERNELS_CUDAKERNELS_CUH
