//===- CpuKernels.h - kernels the generated CPU code calls ------*- C++ -*-===//
//
// Header-only library included by the C++ that ztc emits for the CPU
// target (step.cpp). Elementwise work is emitted inline as fused loops; the
// structured operators below are called by name. Every function takes raw
// pointers into the arena (or to bound inputs/parameters) plus static shapes
// as `Dims`; shapes were verified at compile time, so kernels do not check
// them. Matrix products go to oneDNN (f32) and OpenBLAS (f64).
//
// This file must compile with only the C++17 standard library, OpenMP,
// cblas.h and oneDNN's dnnl.h: no MLIR, no ztc headers outside kernels/
// (Half.h, Numeric.h, VecMath.h, Window.h and the others beside it are part
// of this library).
// Without -fopenmp the pragmas are ignored and everything runs serially.
//
// The kernels live in cpu/, one header per family (cpu/Common.h holds what
// they share); each includes what it uses. Generated code and tests include
// this file, which includes them all.
//
// Conventions shared by every kernel:
//  - Element types: float, double, ztc::f16, ztc::bf16, and the integer types
//    where an operator makes sense. f16/bf16 are computed in float and
//    rounded once when stored; float sums in reductions and losses
//    accumulate in double.
//  - Results are deterministic: a value is always reduced by one thread in a
//    fixed order, independent of the thread count (BLAS aside).
//  - Configuration comes in the kernel's parameter struct (Library.h, as
//    Library.def declares it); its int64 arrays (strides, pads, perm, ...)
//    are `ztc::Ints` with one entry per dimension they describe; axes are
//    non-negative.
//  - Invalid data that only shows at run time (a gather or scatter_add
//    index, a loss target out of range) never reads or writes out of
//    bounds: the element gets 0 (gather, nll_loss) or is skipped
//    (scatter_add), and the first such error since clearError() is kept in
//    an error slot ("gather: index 70 is outside [-64, 64)"), read with
//    lastError(); with several OpenMP threads finding bad data, one of them
//    wins. Nothing prints or aborts. The runtime clears the slot before
//    each call of a step and checks it after, through the C symbols
//    ztc_cpu_last_error and ztc_cpu_clear_error of the compiled step
//    (runtime/backend/CpuBackend.cpp), as it does for CudaKernels.cuh.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CPUKERNELS_H
#define ZTC_RUNTIME_KERNELS_CPUKERNELS_H

// The library's headers beside this one and the standard ones, which
// generated code may use directly (ztc::vecmath, <cmath>, <limits>).
#include "AttentionShape.h"
#include "Blockwise8bit.h"
#include "Dims.h"
#include "Dnnl.h"
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
#include "VecMath.h"
#include "Window.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

// The families, each after the ones it builds on.
#include "cpu/Common.h"

#include "cpu/Attention.h"
#include "cpu/Collectives.h"
#include "cpu/Linalg.h"
#include "cpu/Loss.h"
#include "cpu/Movement.h"
#include "cpu/Norm.h"
#include "cpu/Optim.h"
#include "cpu/Pool.h"
#include "cpu/Random.h"
#include "cpu/Reduce.h"

#include "cpu/Conv.h"
#include "cpu/LinearCrossEntropy.h"

// API: one entry point per row of Library.def, called as that file says:
// each operand as (pointer, Dims), inputs then outputs, then the kernel's
// parameter struct (Library.h). Templates over the element type T and the
// index type I where the row's letters say. Layouts are row-major and
// contiguous. What each computes:
//
// matmul<T>: a [..., M, K] @ b [..., K, N] -> c [..., M, N]; batch dims
//   broadcast numpy-style (right-aligned; size-1 or missing dims repeat). A
//   rank-1 a is [K] -> [1, K] and a rank-1 b is [K] -> [K, 1], with the
//   unit dimension absent from c (numpy.matmul). transpose_a/_b: the
//   operand is stored with its last two dimensions swapped. An optional
//   bias [N] is added to every row of c as it is stored.
// matmulAdd<T>: matmul, then the bias (optional) and the addend (c's
//   shape, never c itself) added, each sum rounded to T: (a @ b + bias) +
//   addend, as the loop ztc-matmul-epilogues folds into it computed.
// matmulWide<T>, matmulAddWide<T>: matmul's product (with its bias) of a
//   half T, rounded to T, widened to f32 (plus an f32 addend, the sum in
//   f32): an f32 residual or gradient sum adding a half product.
// matmulBiasGrad<T>, matmulBiasGradB<T>: matmul, and the sum of a's (b's)
//   rows: a layer's weight and bias gradients.
// conv2d<T>: x [N,C,H,W], w [O,C/g,kH,kW], bias or nullptr -> y
//   [N,O,oH,oW]; pads (top, left, bottom, right).
// maxPool2d<T>: padding never wins. avgPool2d<T>: ONNX/PyTorch semantics,
//   including ceil_mode windows that run past the padded input.
//   Pooling output sizes come from y's dims, so ceil_mode is already in
//   them. count_include_pad divides by the full kernel size, as ONNX
//   (reference and onnxruntime) does even for a ceil_mode window that runs
//   past the padded input; PyTorch would clamp that window to the padded
//   input, but its exporter writes such pooling as Pad + AveragePool
//   without count_include_pad, where both agree. Without it the divisor is
//   the number of input elements in the window.
// softmax<T>, logSoftmax<T>: over `axis`.
// attention<T>: q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv], additive
//   mask or nullptr (the scores' rank, dimensions 1 or the scores') -> out
//   [..., Tq, Dv] = softmax(q kᵀ * scale + mask) v along the keys, causal:
//   query i sees keys j <= i. attentionBackward<T>: q, k, v, out, its
//   gradient, mask -> the gradients of q, k and v (AttentionShape.h reads
//   the shapes for both). A rank-4 operand whose role's bit is set in the
//   parameters' bthd is stored [B, T, H, D] instead.
// layerNorm<T>: x, scale, bias or nullptr; normalizes over dims[axis:],
//   scale/bias have shape dims[axis:]. layerNormBackward<T>: x, scale, gy,
//   an addend or nullptr -> the gradients of layerNorm's x (plus the
//   addend), scale and bias. layerNormBackwardNarrow<T>: the same in
//   ComputeT<T> with gy in T, and x's gradient stored again in T;
//   layerNormBackwardNarrowOut<T> with gy in ComputeT<T>.
// batchNorm<T>: x [N,C,...], scale, bias, mean, var: inference form with
//   the given running statistics.
// reduceSum<T>, reduceMean<T>, reduceMax<T>: over `axes`; y has the kept
//   dims (keepdims is a view). Mean of integers truncates. Max propagates
//   NaN. (reduce<T, Kind>(x, dims, axesMask, y) underneath.)
// transpose<T>: y.dims[i] = dims[perm[i]].
// slice<T>: y[i] = x[starts + i*steps]; starts are normalized
//   (0 <= start < dims) and steps may be negative.
// gather<T, I>: numpy take along `axis`; negative indices count from the
//   end.
// trilu<T>; rotateHalf<T>: the last dimension's halves x1, x2 as
//   [-x2, x1] (inverse: [x2, -x1]); rotary<T>: x * cos + rotateHalf(x) *
//   sin (inverse: x * cos + the inverse turn of x * sin), the tables
//   broadcast to x; copyInto<T> (concat): writes x into y
//   at `offset` along `axis`.
// nllLoss<T, I>: logProbs [N,C,d...], target, weight or nullptr. PyTorch
//   semantics: mean divides by the sum of weights of non-ignored targets
//   (0/0 = NaN when every target is ignored); ignored elements of
//   reduction none are 0.
// linearCrossEntropy<T, I>: x [N, D], w [D, V] (transpose_b: [V, D]),
//   target [N] -> the mean over counted rows of logsumexp(z) - z[t] with
//   z = x w, and the count of counted rows whose z[t] is the largest; rows
//   of ignore_index do not count (0/0 = NaN when none does). T is float or
//   double. linearCrossEntropyBackward<T, I>: x, w, target, the loss's
//   gradient g -> the gradients of x and w, and the forward's loss (the
//   same bits). Both work through chunks of rows (LinearCrossEntropy.h)
//   and never hold the [N, V] logits.
// randomUniform<T>: T float or double; y[i] = the value of element i of
//   stream `stream` under the key *key (Random.h): uniform in [0, 1) with
//   24 random bits, bit for bit the values of the CUDA library's.
// Collectives (allReduce, reduceScatter, allGather, shard) take the step
// context instead: (ctx, x, y, n).
//
// Errors (see the file comment): lastError() is the first data error
// recorded since clearError(), or "" when none.

//===----------------------------------------------------------------------===//
// C entry points for the runtime
//===----------------------------------------------------------------------===//
//
// The runtime finds these with dlsym in the compiled step (CpuBackend.cpp).
// Weak, so several translation units of one binary that include this header
// link; default visibility, so they stay exported whatever the flags.

/// ztc::cpu::lastError(): the step's first data error, or "".
extern "C" __attribute__((weak, visibility("default"))) const char *
ztc_cpu_last_error() {
  return ztc::cpu::lastError();
}

/// ztc::cpu::clearError().
extern "C" __attribute__((weak, visibility("default"))) void
ztc_cpu_clear_error() {
  ztc::cpu::clearError();
}

#endif // ZTC_RUNTIME_KERNELS_CPUKERNELS_H
