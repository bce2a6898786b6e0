// The emitter prints every library call the one way runtime/kernels/
// Library.def declares: each operand as (pointer, dims), inputs then
// outputs, an absent optional input as (nullptr, {}), then the kernel's
// parameter struct with its fields in the row's order; the template
// parameters are T (the element type of the first output lettered T,
// else of the first such input) when a letter is T or C, and I (the first
// integer operand's type) when one is I; CUDA appends the planned scratch
// of the kernels that take it, and the stream. Collectives
// (kernel.collective) take the step context instead.
//
// RUN: ztc-translate %s --ztc-kernel-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: ztc-translate %s --ztc-kernel-to-cuda | FileCheck %s --check-prefix=CUDA

func.func @calls(
    %logp: memref<4x3xf32> {train.binding = #train.binding<input "logp">},
    %labels: memref<4xi32> {train.binding = #train.binding<label "labels">},
    %x: memref<2x8xbf16> {train.binding = #train.binding<input "x">},
    %codes: memref<8xi8> {train.binding = #train.binding<param "w">},
    %absmax: memref<1xi8> {train.binding = #train.binding<param "w.absmax">},
    %nested: memref<1xf32> {train.binding = #train.binding<param "w.nested_absmax">},
    %offset: memref<f32> {train.binding = #train.binding<param "w.offset">},
    %key: memref<i64> {train.binding = #train.binding<hyper "rng">},
    %p: memref<16xf32> {train.binding = #train.binding<param "p">},
    %g: memref<16xf32> {train.binding = #train.binding<param "g">},
    %m: memref<16xi8> {train.binding = #train.binding<state "p.m">},
    %ms: memref<1xf32> {train.binding = #train.binding<state "p.m.scale">},
    %v: memref<16xi8> {train.binding = #train.binding<state "p.v">},
    %vs: memref<1xf32> {train.binding = #train.binding<state "p.v.scale">},
    %lr: memref<f32> {train.binding = #train.binding<hyper "lr">},
    %step: memref<f32> {train.binding = #train.binding<hyper "step">},
    %w3: memref<3x3xf32> {train.binding = #train.binding<param "w3">},
    %b3: memref<3xf32> {train.binding = #train.binding<param "b3">},
    %t2: memref<2xi32> {train.binding = #train.binding<label "t2">})
    attributes {kernel.arena_bytes = 4096 : i64} {
  // nll_loss: I from the labels; the reduction an enum, ignore_index absent;
  // the optional weight absent.
  // CPU: ztc::cpu::nllLoss<float, int32_t>(b0, ztc::cpu::Dims{4, 3}, b1, ztc::cpu::Dims{4}, nullptr, ztc::cpu::Dims{}, [[LOSS:v[0-9]+]], ztc::cpu::Dims{}, ztc::NllLossParams{ztc::Reduction::Sum, ztc::MaybeInt{}});
  // CUDA: ztc::cuda::nllLoss<float, int32_t>(b0, ztc::cuda::Dims{4, 3}, b1, ztc::cuda::Dims{4}, nullptr, ztc::cuda::Dims{}, v{{[0-9]+}}, ztc::cuda::Dims{}, ztc::NllLossParams{ztc::Reduction::Sum, ztc::MaybeInt{}}, stream);
  %0 = kernel.alloc {offset = 0 : i64} : memref<f32>
  kernel.call "nll_loss" ins(%logp, %labels : memref<4x3xf32>, memref<4xi32>) outs(%0 : memref<f32>) {config = {reduction = "sum"}}
  // An absent reduction is the mean; a present ignore_index is set.
  // CPU: ztc::NllLossParams{ztc::Reduction::Mean, ztc::MaybeInt{true, -100}});
  %1 = kernel.alloc {offset = 64 : i64} : memref<f32>
  kernel.call "nll_loss" ins(%logp, %labels : memref<4x3xf32>, memref<4xi32>) outs(%1 : memref<f32>) {config = {ignore_index = -100 : i64}}
  // matmul_nf4: i8 codes and f32 scales have fixed types; the weight's
  // shape is an array field.
  // CPU: static const int64_t c0[] = {8, 2};
  // CPU-NEXT: ztc::cpu::matmulNf4<ztc::bf16>(b2, ztc::cpu::Dims{2, 8}, b3, ztc::cpu::Dims{8}, b4, ztc::cpu::Dims{1}, b5, ztc::cpu::Dims{1}, b6, ztc::cpu::Dims{}, v{{[0-9]+}}, ztc::cpu::Dims{2, 2}, ztc::MatmulNf4Params{ztc::Ints{c0, 2}, false});
  %2 = kernel.alloc {offset = 128 : i64} : memref<2x2xbf16>
  kernel.call "matmul_nf4" ins(%x, %codes, %absmax, %nested, %offset : memref<2x8xbf16>, memref<8xi8>, memref<1xi8>, memref<1xf32>, memref<f32>) outs(%2 : memref<2x2xbf16>) {config = {transpose_b = false, weight_shape = array<i64: 8, 2>}}
  // The random key is an i64 tensor, not a template parameter.
  // CPU: ztc::cpu::randomUniform<float>(b7, ztc::cpu::Dims{}, v{{[0-9]+}}, ztc::cpu::Dims{2, 3}, ztc::RandomUniformParams{7});
  %3 = kernel.alloc {offset = 256 : i64} : memref<2x3xf32>
  kernel.call "random_uniform" ins(%key : memref<i64>) outs(%3 : memref<2x3xf32>) {config = {stream = 7 : i64}}
  // reduce_sum: one entry per kind, the axes an array.
  // CPU: ztc::cpu::reduceSum<float>(b0, ztc::cpu::Dims{4, 3}, v{{[0-9]+}}, ztc::cpu::Dims{3}, ztc::ReduceParams{ztc::Ints{c0, 1}, false});
  // CUDA: ztc::cuda::reduceSum<float>(b0, ztc::cuda::Dims{4, 3}, v{{[0-9]+}}, ztc::cuda::Dims{3}, ztc::ReduceParams{ztc::Ints{c0, 1}, false}, ztc::Scratch{}, stream);
  %4 = kernel.alloc {offset = 512 : i64} : memref<3xf32>
  kernel.call "reduce_sum" ins(%logp : memref<4x3xf32>) outs(%4 : memref<3xf32>) {config = {axes = array<i64: 0>, keepdims = false}}
  // adam8bit: no T letter, no template; five outputs (here in place).
  // CPU: ztc::cpu::adam8bit(b8, ztc::cpu::Dims{16}, b9, ztc::cpu::Dims{16}, b10, ztc::cpu::Dims{16}, b11, ztc::cpu::Dims{1}, b12, ztc::cpu::Dims{16}, b13, ztc::cpu::Dims{1}, b14, ztc::cpu::Dims{}, b15, ztc::cpu::Dims{}, b8, ztc::cpu::Dims{16}, b10, ztc::cpu::Dims{16}, b11, ztc::cpu::Dims{1}, b12, ztc::cpu::Dims{16}, b13, ztc::cpu::Dims{1}, ztc::Adam8bitParams{9.0000000000000002e-01, 9.9900000000000000e-01, 1.0000000000000000e-08, 0.0000000000000000e+00});
  kernel.call "adam8bit" ins(%p, %g, %m, %ms, %v, %vs, %lr, %step : memref<16xf32>, memref<16xf32>, memref<16xi8>, memref<1xf32>, memref<16xi8>, memref<1xf32>, memref<f32>, memref<f32>) outs(%p, %m, %ms, %v, %vs : memref<16xf32>, memref<16xi8>, memref<1xf32>, memref<16xi8>, memref<1xf32>) {config = {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64}}
  // Planned scratch (ztc-plan-scratch): CUDA passes it after the
  // parameters, a kernel of a ZTC_SCRATCH row given none gets an empty one
  // (reduce_sum above); the CPU's kernels take none.
  // CPU: ztc::cpu::reduceMax<float>(b0, ztc::cpu::Dims{4, 3}, v{{[0-9]+}}, ztc::cpu::Dims{3}, ztc::ReduceParams{ztc::Ints{c0, 1}, false});
  // CUDA: ztc::cuda::reduceMax<float>(b0, ztc::cuda::Dims{4, 3}, v{{[0-9]+}}, ztc::cuda::Dims{3}, ztc::ReduceParams{ztc::Ints{c0, 1}, false}, ztc::Scratch{v{{[0-9]+}}, 512}, stream);
  %s = kernel.alloc {offset = 3072 : i64} : memref<512xi8>
  %r = kernel.alloc {offset = 3584 : i64} : memref<3xf32>
  kernel.call "reduce_max" ins(%logp : memref<4x3xf32>) outs(%r : memref<3xf32>) scratch(%s : memref<512xi8>) {config = {axes = array<i64: 0>, keepdims = false}}
  // A collective: the context, the two buffers, the smaller side's count.
  // CPU: ztc::cpu::allReduce<float>(ctx, b8, v{{[0-9]+}}, 16);
  // CUDA: ztc::cuda::allReduce<float>(ctx, b8, v{{[0-9]+}}, 16, stream);
  %5 = kernel.alloc {offset = 1024 : i64} : memref<16xf32>
  kernel.collective all_reduce ins(%p : memref<16xf32>) outs(%5 : memref<16xf32>) {world_size = 2 : i64}
  // A shard calls its function the same way, without communicating.
  // CPU: ztc::cpu::shard<float>(ctx, v{{[0-9]+}}, v{{[0-9]+}}, 8);
  // CUDA: ztc::cuda::shard<float>(ctx, v{{[0-9]+}}, v{{[0-9]+}}, 8, stream);
  %6 = kernel.alloc {offset = 2048 : i64} : memref<8xf32>
  kernel.collective shard ins(%5 : memref<16xf32>) outs(%6 : memref<8xf32>) {world_size = 2 : i64}
  // A product with an epilogue (ztc-matmul-epilogues): matmul_add takes
  // the addend, then the optional bias; matmul's optional bias, absent, is
  // (nullptr, {}).
  // CPU: ztc::cpu::matmulAdd<float>(b0, ztc::cpu::Dims{4, 3}, b16, ztc::cpu::Dims{3, 3}, b0, ztc::cpu::Dims{4, 3}, b17, ztc::cpu::Dims{3}, v{{[0-9]+}}, ztc::cpu::Dims{4, 3}, ztc::MatmulParams{false, true, false});
  // CUDA: ztc::cuda::matmulAdd<float>(b0, ztc::cuda::Dims{4, 3}, b16, ztc::cuda::Dims{3, 3}, b0, ztc::cuda::Dims{4, 3}, b17, ztc::cuda::Dims{3}, v{{[0-9]+}}, ztc::cuda::Dims{4, 3}, ztc::MatmulParams{false, true, false}, stream);
  %7 = kernel.alloc {offset = 2304 : i64} : memref<4x3xf32>
  kernel.call "matmul_add" ins(%logp, %w3, %logp, %b3 : memref<4x3xf32>, memref<3x3xf32>, memref<4x3xf32>, memref<3xf32>) outs(%7 : memref<4x3xf32>) {config = {transpose_b = true}}
  // CPU: ztc::cpu::matmul<float>(b0, ztc::cpu::Dims{4, 3}, b16, ztc::cpu::Dims{3, 3}, nullptr, ztc::cpu::Dims{}, v{{[0-9]+}}, ztc::cpu::Dims{4, 3}, ztc::MatmulParams{false, false, false});
  %8 = kernel.alloc {offset = 2560 : i64} : memref<4x3xf32>
  kernel.call "matmul" ins(%logp, %w3 : memref<4x3xf32>, memref<3x3xf32>) outs(%8 : memref<4x3xf32>)
  // Two outputs, the product's and the bias gradient's; on CUDA the
  // scratch for its sum where cuBLASLt's epilogue does not run.
  // CPU: ztc::cpu::matmulBiasGrad<float>(b0, ztc::cpu::Dims{4, 3}, b0, ztc::cpu::Dims{4, 3}, v{{[0-9]+}}, ztc::cpu::Dims{3, 3}, v{{[0-9]+}}, ztc::cpu::Dims{3}, ztc::MatmulParams{true, false, false});
  // CUDA: ztc::cuda::matmulBiasGrad<float>(b0, ztc::cuda::Dims{4, 3}, b0, ztc::cuda::Dims{4, 3}, v{{[0-9]+}}, ztc::cuda::Dims{3, 3}, v{{[0-9]+}}, ztc::cuda::Dims{3}, ztc::MatmulParams{true, false, false}, ztc::Scratch{v{{[0-9]+}}, 512}, stream);
  %9 = kernel.alloc {offset = 4096 : i64} : memref<3x3xf32>
  %10 = kernel.alloc {offset = 4160 : i64} : memref<3xf32>
  %s2 = kernel.alloc {offset = 4224 : i64} : memref<512xi8>
  kernel.call "matmul_bias_grad" ins(%logp, %logp : memref<4x3xf32>, memref<4x3xf32>) outs(%9, %10 : memref<3x3xf32>, memref<3xf32>) scratch(%s2 : memref<512xi8>) {config = {transpose_a = true}}
  // No output lettered T: T is the first T input's bf16, and the f32
  // outputs are its compute type (C).
  // CPU: ztc::cpu::linearCrossEntropy<ztc::bf16, int32_t>(b2, ztc::cpu::Dims{2, 8}, b2, ztc::cpu::Dims{2, 8}, b18, ztc::cpu::Dims{2}, v{{[0-9]+}}, ztc::cpu::Dims{}, v{{[0-9]+}}, ztc::cpu::Dims{}, ztc::LinearCrossEntropyParams{true, ztc::MaybeInt{}});
  // CUDA: ztc::cuda::linearCrossEntropy<ztc::bf16, int32_t>(b2, ztc::cuda::Dims{2, 8}, b2, ztc::cuda::Dims{2, 8}, b18, ztc::cuda::Dims{2}, v{{[0-9]+}}, ztc::cuda::Dims{}, v{{[0-9]+}}, ztc::cuda::Dims{}, ztc::LinearCrossEntropyParams{true, ztc::MaybeInt{}}, ztc::Scratch{}, stream);
  %11 = kernel.alloc {offset = 4800 : i64} : memref<f32>
  %12 = kernel.alloc {offset = 4864 : i64} : memref<f32>
  kernel.call "linear_cross_entropy" ins(%x, %x, %t2 : memref<2x8xbf16>, memref<2x8xbf16>, memref<2xi32>) outs(%11, %12 : memref<f32>, memref<f32>) {config = {transpose_b = true}}
  return
}
