#!/usr/bin/env bash
# Compiles and links, without running, the CUDA that ztc generates for the
# example models (MLP, CNN with BatchNorm, small GPT; the training steps of
# the CNN and the GPT through ztc compile itself) with the nvcc command
# line of runtime/Compile.cpp (a shared object for sm_80 and sm_90 against
# the shared cudart and cuBLAS; the training steps' variants for sm_90
# alone, ZTC_CUDA_ARCHS=90), plus one translation unit that instantiates
# every template of runtime/kernels/CudaKernels.cuh, so errors in code no
# example reaches show up too. Each shared object must also resolve every
# symbol (ldd -r). Needs nvcc, not a GPU; without nvcc it prints SKIP and
# succeeds.
# Usage: cuda_compile.sh ZTC REPO_ROOT
set -uo pipefail
ZTC="$1"
ROOT="$2"

# The runtime's lookup ($CUDA_HOME/bin/nvcc, then nvcc on PATH), then the
# default install location.
NVCC=""
if [[ -n "${CUDA_HOME:-}" && -x "$CUDA_HOME/bin/nvcc" ]]; then
  NVCC="$CUDA_HOME/bin/nvcc"
elif command -v nvcc >/dev/null 2>&1; then
  NVCC="$(command -v nvcc)"
elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
  NVCC=/usr/local/cuda/bin/nvcc
fi
if [[ -z "$NVCC" ]]; then
  echo "SKIP cuda-compile: nvcc not found (no \$CUDA_HOME/bin/nvcc, no nvcc" \
    "on PATH, no /usr/local/cuda/bin/nvcc)"
  exit 0
fi

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
"$ROOT/examples/onnx/make_all.sh" "$OUT/models" || exit 1

# Keep in step with compileCommand in runtime/Compile.cpp (its unit test,
# CompileTest.CudaCommandLine, pins that command line).
compile() {
  "$NVCC" -std=c++17 -O2 -shared -Xcompiler -fPIC -cudart shared \
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
    "-I$ROOT/runtime" "$1" -o "$2" -lcublasLt -lcublas
}

passed=0
failed=0

# check_so NAME SO ENTRY START: checks the symbols of a compiled step.
check_so() {
  local name="$1" so="$2" entry="$3" start="$4"
  local missing
  missing="$(ldd -r "$so" 2>&1 | grep -E 'undefined symbol|not found')"
  if [[ -n "$missing" ]]; then
    echo "FAIL $name: unresolved after linking:"
    echo "$missing" | head -10
    failed=$((failed + 1))
    return
  fi
  # (The table first: grep -q stopping early would fail nm with SIGPIPE
  # under pipefail.)
  local symbols
  symbols="$(nm -D --defined-only "$so")"
  for symbol in ztc_cuda_last_error ztc_cuda_clear_error; do
    if ! grep -qw "$symbol" <<<"$symbols"; then
      echo "FAIL $name: $symbol is not exported"
      failed=$((failed + 1))
      return
    fi
  done
  if [[ -n "$entry" ]] && ! grep -qw "$entry" <<<"$symbols"; then
    echo "FAIL $name: $entry is not exported"
    failed=$((failed + 1))
    return
  fi
  echo "ok   $name ($((SECONDS - start)) s)"
  passed=$((passed + 1))
}

# check NAME SOURCE [ENTRY]: compiles SOURCE into NAME.so and checks its
# symbols (ENTRY: ztc_forward; empty for none).
check() {
  local name="$1" source="$2" entry="${3-ztc_forward}" so="$OUT/$1.so"
  local log="$OUT/$1.log" start=$SECONDS
  if ! compile "$source" "$so" >"$log" 2>&1; then
    echo "FAIL $name: nvcc failed:"
    head -30 "$log"
    failed=$((failed + 1))
    return
  fi
  check_so "$name" "$so" "$entry" "$start"
}

# compile_training NAME BATCH [TAG FLAG...]: ztc compile --target cuda builds
# the training step (forward, backward, optimizer) with nvcc itself, with
# the extra compile flags (TAG names the artifact: NAME-TAG.ztc).
compile_training() {
  local name="$1" batch="$2" tag="${3:-train}"
  shift $(($# < 3 ? $# : 3))
  local art="$OUT/$name-$tag.ztc" start=$SECONDS
  if ! ZTC_CACHE_DIR="$OUT/cache" ZTC_CUDA_ARCHS="$ARCHS" "$ZTC" compile "$OUT/models/$name.onnx" \
    -o "$art" --target cuda --batch-size "$batch" --loss cross_entropy "$@" \
    >"$OUT/$name-$tag.log" 2>&1; then
    echo "FAIL $name-$tag: ztc compile --target cuda $* failed:"
    head -30 "$OUT/$name-$tag.log"
    failed=$((failed + 1))
    return
  fi
  check_so "$name-$tag" "$art/step.so" ztc_train_step "$start"
}

emit_and_check() {
  local name="$1" shape="$2"
  if ! "$ZTC" emit "$OUT/models/$name.onnx" --input-shape "$shape" \
    --target cuda >"$OUT/$name.cu" 2>"$OUT/$name.emit.log"; then
    echo "FAIL $name: ztc emit --target cuda failed:"
    head -10 "$OUT/$name.emit.log"
    failed=$((failed + 1))
    return
  fi
  check "$name" "$OUT/$name.cu"
}

emit_and_check mlp x=8x64
emit_and_check cnn x=8x1x8x8
emit_and_check gpt tokens=4x16
# Training steps: the backward kernels (convolution and pooling gradients,
# scatter_add, insert_slice, attention) on the CNN and the GPT.
# The first two with the default architectures (sm_80 and sm_90), as users
# build; the variants for sm_90 alone (ZTC_CUDA_ARCHS), in half the time.
ARCHS=""
compile_training cnn 8
compile_training gpt 4
ARCHS=90
# Mixed precision: bf16 products and convolutions, f32 master weights.
compile_training gpt 4 bf16 --precision bf16
# The GPT's attention as one kernel is the CUDA default (--fuse-attention
# auto); the unfused step too.
compile_training gpt 4 unfused --fuse-attention off
compile_training cnn 8 bf16 --precision bf16
# Channels-last convolutions (cuDNN's NHWC descriptors, the direct sums
# where it declines) and the NHWC BatchNorm statistics between them.
compile_training cnn 8 nhwc --conv-layout nhwc
compile_training cnn 8 bf16-nhwc --precision bf16 --conv-layout nhwc
# Data parallelism and ZeRO: the collectives through the context's
# communicator, on a second stream ordered by events (--overlap-comm), or
# on the step's one stream.
compile_training gpt 4 zero2 --world-size 2 --zero 2 --clip-grad-norm 1
compile_training mlp 8 zero0 --world-size 4 --precision bf16
compile_training gpt 4 zero3-prefetch --world-size 2 --zero 3 \
  --param-persistence-threshold 0 --precision bf16 --prefetch-bytes 65536
compile_training gpt 4 zero2-one-stream --world-size 2 --zero 2 \
  --overlap-comm=false
# fp16 with dynamic loss scaling under ZeRO 2 (the finite check's
# all-reduce, the skipped updates, the scale's rule) and --check-finite.
compile_training mlp 8 fp16-zero2 --world-size 2 --zero 2 --precision fp16 \
  --check-finite
# bitsandbytes' 8-bit AdamW: the library's adam8bit on the MLP's two
# weights of 8192 elements.
compile_training mlp 8 adamw8bit --optimizer adamw8bit
# QLoRA: the GPT's projections in NF4 (matmul_nf4, bf16 compute), LoRA
# adapters on the attention's qkv.
compile_training gpt 4 qlora --lora 'r=4,alpha=8,targets=qkv' \
  --base-dtype nf4 --precision bf16
# The Llama-family fixture: rotary kernels, grouped-query attention,
# RMSNorm as a layer norm, bias-less residuals in the products'
# epilogues; in f32 and bf16.
cp "$ROOT/test/fixtures/modern/llama/model.onnx" "$OUT/models/llama.onnx"
compile_training llama 8
compile_training llama 8 bf16 --precision bf16

# Every entry point for every element type it is meant for.
cat >"$OUT/kernels.cu" <<'EOF'
#include "kernels/CudaKernels.cuh"

namespace {
using namespace ztc::cuda;

// Calls as the emitter prints them (runtime/kernels/Library.def): each
// operand as (pointer, dims), then the parameters, the planned scratch of
// the kernels of a ZTC_SCRATCH row, then the stream.
template <typename T, typename I> void indexed(T *p, I *i, cudaStream_t s) {
  Dims d{2, 3, 4, 5};
  gather<T, I>(p, d, i, d, p, d, ztc::AxisParams{1}, s);
  nllLoss<T, I>(p, d, i, d, p, d, p, d,
                ztc::NllLossParams{ztc::Reduction::Mean, {true, -100}}, s);
  scatterAdd<T, I>(p, d, i, d, p, d, p, d, ztc::AxisParams{1},
                   ztc::Scratch{p, 1024}, s);
}

template <typename T> void instantiate(T *p, cudaStream_t s) {
  static const int64_t two[] = {1, 1}, four[] = {0, 0, 0, 0};
  static const int64_t perm[] = {3, 2, 1, 0};
  const ztc::Ints t(two), f(four), none;
  const auto *codes = reinterpret_cast<const int8_t *>(p);
  const auto *scales = reinterpret_cast<const float *>(p);
  Dims d{2, 3, 4, 5};
  const ztc::Scratch z{p, 1024};
  matmul<T>(p, d, p, d, p, d, ztc::MatmulParams{false, true}, s);
  matmulNf4<T>(p, d, codes, d, codes, d, scales, d, scales, d, p, d,
               ztc::MatmulNf4Params{ztc::Ints{perm, 2}, true}, z, s);
  conv2d<T>(p, d, p, d, p, d, p, d, ztc::Conv2dParams{t, f, t, 1, false, true},
            z, s);
  maxPool2d<T>(p, d, p, d, ztc::MaxPool2dParams{t, t, f, t, false}, s);
  avgPool2d<T>(p, d, p, d, ztc::AvgPool2dParams{t, t, f, false, true}, s);
  softmax<T>(p, d, p, d, ztc::AxisParams{1}, s);
  logSoftmax<T>(p, d, p, d, ztc::AxisParams{1}, s);
  layerNorm<T>(p, d, p, d, p, d, p, d, ztc::LayerNormParams{1, 1e-5}, s);
  auto *wide = reinterpret_cast<ztc::numeric::ComputeT<T> *>(p);
  layerNormNarrow<T>(wide, d, wide, d, wide, d, p, d,
                     ztc::LayerNormParams{1, 1e-5}, s);
  layerNormBackward<T>(p, d, p, d, p, d, p, d, p, d, p, d, p, d,
                       ztc::LayerNormParams{1, 1e-5}, z, s);
  layerNormBackwardNarrow<T>(wide, d, wide, d, p, d, wide, d, wide, d, wide, d,
                             wide, d, p, d, ztc::LayerNormParams{1, 1e-5}, z,
                             s);
  batchNorm<T>(p, d, p, d, p, d, p, d, p, d, p, d, ztc::BatchNormParams{1e-5},
               s);
  reduceSum<T>(p, d, p, d, ztc::ReduceParams{ztc::Ints{perm, 1}, false}, z, s);
  reduceMean<T>(p, d, p, d, ztc::ReduceParams{ztc::Ints{perm, 1}, false}, z,
                s);
  reduceMax<T>(p, d, p, d, ztc::ReduceParams{ztc::Ints{perm, 1}, false}, z, s);
  transpose<T>(p, d, p, d, ztc::TransposeParams{perm}, s);
  slice<T>(p, d, p, d, ztc::SliceParams{f, f, t}, s);
  copyInto<T>(p, d, p, d, ztc::CopyIntoParams{0, 0}, s);
  trilu<T>(p, d, p, d, ztc::TriluParams{true, 0}, s);
  rotateHalf<T>(p, d, p, d, ztc::RotateHalfParams{true}, s);
  rotary<T>(p, d, p, d, p, d, p, d, ztc::RotaryParams{false}, s);
  conv2dBackwardData<T>(p, d, p, d, p, d,
                        ztc::Conv2dBackwardDataParams{none, t, f, t, 1, false},
                        z, s);
  conv2dBackwardFilter<T>(
      p, d, p, d, p, d,
      ztc::Conv2dBackwardFilterParams{none, t, f, t, 1, false}, z, s);
  maxPool2dBackward<T>(p, d, p, d, p, d, ztc::MaxPool2dParams{t, t, f, t, false},
                       s);
  avgPool2dBackward<T>(p, d, p, d,
                       ztc::AvgPool2dBackwardParams{none, t, t, f, false, true},
                       s);
  insertSlice<T>(p, d, p, d, p, d, ztc::InsertSliceParams{f, t}, s);
  indexed<T, int64_t>(p, reinterpret_cast<int64_t *>(p), s);
  indexed<T, int32_t>(p, reinterpret_cast<int32_t *>(p), s);
}

/// The kernels for floating-point types alone.
template <typename T> void floats(T *p, cudaStream_t s) {
  Dims d{2, 3, 4, 5};
  const ztc::Scratch z{p, 1024};
  attention<T>(p, d, p, d, p, d, p, d, p, d, ztc::AttentionParams{0.5, true},
               z, s);
  attentionBackward<T>(p, d, p, d, p, d, p, d, p, d, p, d, p, d, p, d, p, d,
                       ztc::AttentionParams{0.5, false}, z, s);
  // The loss and its gradient in T's compute type (f32 for the halves).
  auto *acc = reinterpret_cast<ztc::numeric::ComputeT<T> *>(p);
  auto *classes = reinterpret_cast<const int64_t *>(p);
  const ztc::LinearCrossEntropyParams lce{true, {true, -100}};
  linearCrossEntropy<T, int64_t>(p, d, p, d, classes, d, acc, d, acc, d, lce, z,
                                 s);
  linearCrossEntropyBackward<T, int64_t>(p, d, p, d, classes, d, acc, d, p, d,
                                         p, d, acc, d, lce, z, s);
  linearCrossEntropyBackwardX<T, int64_t>(p, d, p, d, classes, d, acc, d, p, d,
                                          acc, d, lce, z, s);
}

/// The 16-bit storage types in device code, as generated kernels use them.
__global__ void halves(const ztc::f16 *a, const ztc::bf16 *b, ztc::f16 *c,
                       ztc::bf16 *d) {
  float x = static_cast<float>(a[threadIdx.x]);
  float y = static_cast<float>(b[threadIdx.x]);
  c[threadIdx.x] = ztc::f16(x * y);
  d[threadIdx.x] = ztc::bf16(x + y);
}
} // namespace

extern "C" void ztc_instantiate_all(void *p, cudaStream_t s) {
  instantiate(static_cast<float *>(p), s);
  instantiate(static_cast<double *>(p), s);
  instantiate(static_cast<ztc::f16 *>(p), s);
  instantiate(static_cast<ztc::bf16 *>(p), s);
  instantiate(static_cast<int64_t *>(p), s);
  instantiate(static_cast<int32_t *>(p), s);
  floats(static_cast<float *>(p), s);
  floats(static_cast<double *>(p), s);
  floats(static_cast<ztc::f16 *>(p), s);
  floats(static_cast<ztc::bf16 *>(p), s);
  const auto *key = static_cast<const int64_t *>(p);
  randomUniform<float>(key, Dims{}, static_cast<float *>(p), Dims{2, 3},
                       ztc::RandomUniformParams{1}, s);
  randomUniform<double>(key, Dims{}, static_cast<double *>(p), Dims{2, 3},
                        ztc::RandomUniformParams{1}, s);
  auto *f32 = static_cast<float *>(p);
  auto *i8 = static_cast<int8_t *>(p);
  adam8bit(f32, Dims{16}, f32, Dims{16}, i8, Dims{16}, f32, Dims{1}, i8,
           Dims{16}, f32, Dims{1}, f32, Dims{}, f32, Dims{}, f32, Dims{16}, i8,
           Dims{16}, f32, Dims{1}, i8, Dims{16}, f32, Dims{1},
           ztc::Adam8bitParams{0.9, 0.999, 1e-8, 0.01}, s);
  halves<<<1, 32, 0, s>>>(nullptr, nullptr, nullptr, nullptr);
}
EOF
check kernels "$OUT/kernels.cu" ""

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
