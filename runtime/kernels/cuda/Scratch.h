//===- Scratch.h - the CUDA kernels' scratch memory, planned ----*- C++ -*-===//
//
// Some CUDA library kernels need device memory beyond their operands: a
// convolution's columns, a long reduction's partial results, a dequantized
// tile of an NF4 weight, attention's accumulators. That memory is planned like
// every other buffer: ztc-plan-scratch gives each such `kernel.call` a scratch
// operand, which ztc-plan-memory places in the arena, so the planned peak
// counts it and no kernel allocates while a step runs. A kernel receives its
// scratch as a ztc::Scratch and works within it: given less than it asked for,
// it takes smaller chunks of the batch (or fails with an error naming the
// bytes).
//
// Each function below is the one definition of a kernel's scratch: the pass
// calls `<kernel>Bytes` with the call's element type, shapes and
// configuration (the ZTC_SCRATCH rows of Library.def name them), and the
// kernel calls the plan behind it to lay its scratch out. cuBLAS's
// workspace is not per call: every process gets kCublasWorkspaceBytes, once,
// and the plan counts it as reserved.
//
// Plain host C++ (no CUDA, no MLIR); under nvcc the plans' members are also
// device functions.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_CUDA_SCRATCH_H
#define ZTC_RUNTIME_KERNELS_CUDA_SCRATCH_H

#include "../AttentionShape.h"
#include "../Dims.h"
#include "../Library.h"
#include "../LinearCrossEntropy.h"
#include "../Nf4.h"
#include "../Numeric.h"
#include "../Window.h"

#include <cstdint>
#include <type_traits>

namespace ztc::cuda {

namespace detail {

/// The element types cuBLAS multiplies; other types take the library's own
/// product (GemmBody) or direct sums.
template <typename T>
constexpr bool kCublasType =
    std::is_same_v<T, float> || std::is_same_v<T, double> ||
    std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

} // namespace detail

namespace scratch {

/// The workspace cuBLAS gets on each device (cublasSetWorkspace), once per
/// process: NVIDIA's recommendation for Hopper, enough for its split-K and
/// stream-K kernels on earlier devices too.
constexpr int64_t kCublasWorkspaceBytes = int64_t(32) << 20;

/// The most bytes of columns a convolution plans for: it works through the
/// batch in chunks of images that fit.
constexpr int64_t kConvColumnsBytes = int64_t(256) << 20;

/// Where two parts of one scratch buffer start apart: cudaMalloc's own
/// alignment, so each part is aligned as a buffer of its own.
constexpr int64_t kAlignment = 256;

inline int64_t alignUp(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

/// How many of `batch` images, `perImage` bytes each, fit in `budget`: at
/// least 1, at most `batch`. A kernel given the bytes a plan asked for
/// finds the plan's count again.
inline int64_t imagesPerChunk(int64_t perImage, int64_t batch, int64_t budget) {
  int64_t chunk = perImage > 0 ? budget / perImage : batch;
  return chunk < 1 ? 1 : chunk > batch ? batch : chunk;
}

} // namespace scratch

namespace detail {

/// conv2d's geometry: its window (Window.h), its channels, and where its
/// activations keep them: NCHW, or NHWC with `channelsLast` (the weights
/// are [O, C/group, kH, kW] either way).
struct ConvPlan : Window2d {
  int64_t channels, outChannels, groupChannels, groupOut;
  bool channelsLast;

  /// Where element (n, c, h, w) of the input lies.
  ZTC_HOST_DEVICE int64_t inputAt(int64_t n, int64_t c, int64_t h,
                                  int64_t w) const {
    return channelsLast ? ((n * height + h) * width + w) * channels + c
                        : ((n * channels + c) * height + h) * width + w;
  }
  /// Where element (n, o, oh, ow) of the output lies.
  ZTC_HOST_DEVICE int64_t outputAt(int64_t n, int64_t o, int64_t oh,
                                   int64_t ow) const {
    return channelsLast ? ((n * outH + oh) * outW + ow) * outChannels + o
                        : ((n * outChannels + o) * outH + oh) * outW + ow;
  }
};

/// conv2d's plan from its input, weight and output dimensions (NHWC for
/// the activations when `params` asks for channels_last) and the window
/// and groups of `params` (any of the three convolutions' parameters).
template <typename Params>
ConvPlan convPlan(const Dims &xDims, const Dims &wDims, const Dims &yDims,
                  const Params &params) {
  const bool last = params.channels_last;
  const Dims x = last ? nchwOf(xDims) : xDims, y = last ? nchwOf(yDims) : yDims;
  return {window2d(x, y, wDims.d + 2, params.strides.data, params.pads.data,
                   params.dilations.data),
          x.d[1],
          wDims.d[0],
          wDims.d[1],
          wDims.d[0] / params.group,
          last};
}

/// The most elements per output a reduction gives one thread each: a
/// block's worth (Common.cuh's kThreads).
constexpr int64_t kReduceThreadElements = 256;

/// reduce's split of the dimensions into kept (outputs) and reduced ones.
/// Long reductions view each output's elements as rows: the innermost
/// reduced dimension (`inner` elements, `innerStride` apart) repeated over
/// the outer reduced dimensions (`outerCount` rows); `segments` blocks share
/// one output, each taking a range of rows, or of the one row when there
/// is only one (`splitInner`).
struct ReducePlan {
  int64_t keptRank, kept[8], keptStrides[8];
  int64_t reducedRank, reduced[8], reducedStrides[8];
  int64_t count; // elements per output
  int64_t outputs;
  int64_t inner, innerStride, outerCount, segments;
  bool splitInner;
  /// Over leading dimensions ([count, outputs] summed over its rows: bias
  /// gradients, statistics of NHWC data): a thread per output and segment
  /// of rows instead of a block per output, so that a warp reads
  /// neighbouring elements of each row (columnSegments).
  bool columns;
  ZTC_HOST_DEVICE int64_t offsetOf(int64_t rank, const int64_t *dims,
                                   const int64_t *strides, int64_t flat) const {
    int64_t offset = 0;
    for (int64_t i = rank - 1; i >= 0; --i) {
      offset += (flat % dims[i]) * strides[i];
      flat /= dims[i];
    }
    return offset;
  }
  ZTC_HOST_DEVICE int64_t keptOffset(int64_t output) const {
    return offsetOf(keptRank, kept, keptStrides, output);
  }
  ZTC_HOST_DEVICE int64_t reducedOffset(int64_t step) const {
    return offsetOf(reducedRank, reduced, reducedStrides, step);
  }
  /// The offset of outer row `row` (the reduced dimensions but the last).
  ZTC_HOST_DEVICE int64_t outerOffset(int64_t row) const {
    return offsetOf(reducedRank - 1, reduced, reducedStrides, row);
  }
  /// Whether each output's elements fit one thread (no blocks, no
  /// partial results): up to a block's worth of them.
  ZTC_HOST_DEVICE bool perThread() const {
    return count <= kReduceThreadElements;
  }
};

/// The bit mask of a reduction's axes (bit i: dimension i is reduced).
inline uint64_t axesMask(const Ints &axes) {
  uint64_t mask = 0;
  for (int64_t axis : axes)
    mask |= uint64_t(1) << axis;
  return mask;
}

/// Sums down the columns of a [rows, columns] matrix (reduce over leading
/// dimensions, layerNormBackward's scale and bias): a thread per column and
/// segment of rows, each summing its rows in order, with segments of
/// kRowsPerSegment rows or more, enough to give the device about
/// kColumnThreads threads; a second pass adds the segments in order.
constexpr int64_t kColumnThreads = int64_t(1) << 17, kRowsPerSegment = 64;

inline int64_t columnSegments(int64_t rows, int64_t columns) {
  if (columns <= 0)
    return 1;
  int64_t wanted = (kColumnThreads + columns - 1) / columns;
  int64_t most = (rows + kRowsPerSegment - 1) / kRowsPerSegment;
  int64_t segments = wanted < most ? wanted : most;
  return segments < 1 ? 1 : segments;
}

/// How many blocks share each of `outputs` outputs of `count` elements in
/// a reduction by blocks: enough that the blocks fill the device
/// (BatchNorm's statistics reduce N*H*W elements into each of a few dozen
/// channels), each still reading kSegmentElements or more.
inline int64_t blockSegments(int64_t outputs, int64_t count) {
  constexpr int64_t kBlocks = 1024, kSegmentElements = 4096;
  int64_t segments = (kBlocks + outputs - 1) / outputs;
  int64_t most = (count + kSegmentElements - 1) / kSegmentElements;
  segments = segments < most ? segments : most;
  return segments < 1 ? 1 : segments;
}

/// The plan of a reduction of `dims` over the dimensions whose bit is set in
/// `axesMask`.
inline ReducePlan reducePlan(const Dims &dims, uint64_t axesMask) {
  int64_t strides[8];
  contiguousStrides(dims, strides);
  ReducePlan p{};
  for (int64_t i = 0; i < dims.rank; ++i) {
    if (axesMask >> i & 1) {
      p.reducedStrides[p.reducedRank] = strides[i];
      p.reduced[p.reducedRank++] = dims.d[i];
    } else {
      p.keptStrides[p.keptRank] = strides[i];
      p.kept[p.keptRank++] = dims.d[i];
    }
  }
  // Reduced dimensions adjacent in memory are one: the same elements in the
  // same order, with longer rows.
  int64_t merged = 0;
  for (int64_t i = 0; i < p.reducedRank; ++i) {
    if (merged > 0 &&
        p.reducedStrides[merged - 1] == p.reducedStrides[i] * p.reduced[i]) {
      p.reduced[merged - 1] *= p.reduced[i];
      p.reducedStrides[merged - 1] = p.reducedStrides[i];
      continue;
    }
    p.reduced[merged] = p.reduced[i];
    p.reducedStrides[merged++] = p.reducedStrides[i];
  }
  p.reducedRank = merged;
  p.outputs = 1;
  for (int64_t i = 0; i < p.keptRank; ++i)
    p.outputs *= p.kept[i];
  p.count = 1;
  for (int64_t i = 0; i < p.reducedRank; ++i)
    p.count *= p.reduced[i];
  p.segments = 1;
  if (p.perThread())
    return p;
  // Leading dimensions reduced into a warp's width of outputs or more: the
  // kept dimensions are the trailing ones, so an output's rows are
  // `outputs` apart. (Fewer outputs would leave too few threads; their
  // rows are short, and blocks read them well enough.)
  if (p.reducedRank == 1 && p.outputs >= 32 &&
      p.reducedStrides[0] == p.outputs) {
    p.columns = true;
    p.segments = columnSegments(p.count, p.outputs);
    return p;
  }
  // Longer ones: a block per segment (blockSegments).
  p.inner = p.reduced[p.reducedRank - 1];
  p.innerStride = p.reducedStrides[p.reducedRank - 1];
  p.outerCount = p.count / p.inner;
  p.splitInner = p.outerCount == 1;
  int64_t segments = blockSegments(p.outputs, p.count);
  if (!p.splitInner && segments > p.outerCount)
    segments = p.outerCount;
  p.segments = segments < 1 ? 1 : segments;
  return p;
}

/// A fused reduction's plan (kernel.reduce, whose code the compiler writes):
/// its iteration space grouped as [outer, kept, inner], the outer and
/// inner groups reduced into `kept` outputs. An output's terms are indexed
/// by r = o * inner + i over [0, count), count = outer * inner. Short
/// ones (`perThread`) take a thread per output; with no inner group and a
/// warp's width of outputs or more (`columns`: statistics of NHWC data,
/// sums over a batch), a thread per output and segment of rows, so that a
/// warp reads neighbouring outputs; otherwise a block per output and
/// segment of the terms. With `segments` above 1, each segment's partial
/// result goes to scratch and a second pass adds each output's (in order,
/// or by a block in a fixed tree when there are more than a block's
/// threads of them).
struct GroupReducePlan {
  int64_t outer, kept, inner, count, segments;
  bool perThread, columns;
};

inline GroupReducePlan groupReducePlan(int64_t outer, int64_t kept,
                                       int64_t inner) {
  GroupReducePlan p{outer, kept, inner, outer * inner, 1, false, false};
  if (p.count <= kReduceThreadElements)
    p.perThread = true;
  else if (inner == 1 && kept >= 32) {
    p.columns = true;
    p.segments = columnSegments(outer, kept);
  } else
    p.segments = blockSegments(kept, p.count);
  return p;
}

/// layerNormBackward's work: a block per row for the input's gradient,
/// which also writes the row's statistics (mean and rstd, ComputeT) to
/// scratch; then the scale's and bias's gradients, summed down the columns
/// (columnSegments); with several segments, their sums are added in order
/// by a third kernel.
struct LayerNormBackwardPlan {
  int64_t rows, length, segments;
};

inline LayerNormBackwardPlan layerNormBackwardPlan(const Dims &dims,
                                                   int64_t axis) {
  NormalizedRows shape = normalizedRows(dims, axis);
  return {shape.rows, shape.length, columnSegments(shape.rows, shape.length)};
}

} // namespace detail

namespace scratch {

/// How a convolution works: by products (`product`; else it sums directly)
/// over `chunk` images at a time, whose columns take `bytes` of scratch (none
/// where the product reads the input as is); a filter gradient's images side
/// by side follow its columns at `gradsOffset`.
struct ConvColumns {
  bool product = false;
  int64_t chunk = 0;
  int64_t bytes = 0;
  int64_t gradsOffset = 0;
};

/// conv2d sums patches of at most this many elements directly.
constexpr int64_t kDirectPatch = 32;

/// conv2d's columns within `budget` bytes: integers and short patches
/// (depthwise, first layers) sum directly; 1x1 windows that read the input
/// as is multiply it without columns. Channels-last tensors, which cuDNN
/// convolves, sum directly where it does not: no columns either.
template <typename T>
ConvColumns conv2dColumns(const Dims &xDims, const Dims &wDims,
                          const Dims &yDims, const Conv2dParams &params,
                          int64_t budget) {
  detail::ConvPlan p = detail::convPlan(xDims, wDims, yDims, params);
  int64_t batch = xDims.d[0];
  int64_t patch = p.groupChannels * p.kH * p.kW;
  int64_t pixels = p.outH * p.outW;
  if (!detail::kCublasType<T> || patch <= kDirectPatch || batch == 0 ||
      p.outChannels == 0 || pixels == 0 || p.channelsLast)
    return {};
  if (p.readsInputAsIs())
    return {true, batch, 0, 0};
  int64_t imageCols = p.channels * p.kH * p.kW * pixels * int64_t(sizeof(T));
  int64_t chunk = imagesPerChunk(imageCols, batch, budget);
  return {true, chunk, chunk * imageCols, 0};
}

/// conv2dBackwardData's columns: f32 and f64 go through a product per
/// image and col2im; half types (the columns would round each partial
/// sum), integers and channels-last tensors sum directly.
template <typename T>
ConvColumns conv2dBackwardDataColumns(const Dims &gyDims, const Dims &wDims,
                                      const Dims &gxDims,
                                      const Conv2dBackwardDataParams &params,
                                      int64_t budget) {
  detail::ConvPlan p = detail::convPlan(gxDims, wDims, gyDims, params);
  int64_t batch = gxDims.d[0];
  int64_t pixels = p.outH * p.outW;
  constexpr bool kWide = std::is_same_v<T, float> || std::is_same_v<T, double>;
  if (!kWide || batch == 0 || pixels == 0 || p.groupOut == 0 || p.channelsLast)
    return {};
  int64_t perImage = p.channels * p.kH * p.kW * pixels * int64_t(sizeof(T));
  int64_t chunk = imagesPerChunk(perImage, batch, budget);
  return {true, chunk, chunk * perImage, 0};
}

/// conv2dBackwardFilter's columns and the output gradient's images side by
/// side: integers, and half types whose batch needs several chunks (each
/// would round the running sum to the half type), sum directly.
template <typename T>
ConvColumns conv2dBackwardFilterColumns(
    const Dims &xDims, const Dims &gyDims, const Dims &gwDims,
    const Conv2dBackwardFilterParams &params, int64_t budget) {
  detail::ConvPlan p = detail::convPlan(xDims, gwDims, gyDims, params);
  int64_t batch = xDims.d[0];
  int64_t pixels = p.outH * p.outW;
  int64_t rows = p.channels * p.kH * p.kW;
  int64_t colsImage = rows * pixels * int64_t(sizeof(T));
  int64_t gradsImage = p.outChannels * pixels * int64_t(sizeof(T));
  // The most images whose two parts, the second aligned, fit the budget
  // (at least one): the same count again when the budget is what it needs.
  auto need = [&](int64_t images) {
    return alignUp(images * colsImage) + images * gradsImage;
  };
  int64_t chunk = imagesPerChunk(colsImage + gradsImage, batch, budget);
  while (chunk > 1 && need(chunk) > budget)
    --chunk;
  constexpr bool kWide = std::is_same_v<T, float> || std::is_same_v<T, double>;
  if (!detail::kCublasType<T> || (!kWide && chunk < batch) || batch == 0 ||
      pixels == 0 || p.channelsLast)
    return {};
  return {true, chunk, need(chunk), alignUp(chunk * colsImage)};
}

/// The workspace cuDNN may take for a convolution of T (CudnnConv.cuh):
/// what im2col's columns would hold for the whole batch, at most
/// kConvColumnsBytes; none for the types cuDNN does not convolve. The
/// call's scratch is the larger of this and the columns of ztc's own
/// kernels, which run in it when cuDNN is not there.
template <typename T>
int64_t cudnnWorkspaceBytes(const detail::ConvPlan &p, int64_t batch) {
  if (!detail::kCublasType<T>)
    return 0;
  int64_t columns =
      batch * p.channels * p.kH * p.kW * p.outH * p.outW * int64_t(sizeof(T));
  return columns < kConvColumnsBytes ? columns : kConvColumnsBytes;
}

/// The larger of a call's two scratch needs.
inline int64_t largerOf(int64_t a, int64_t b) { return a > b ? a : b; }

/// A long reduction's partial results: one accumulator per segment of each
/// output (none when each output fits one thread or one segment).
template <typename Acc>
int64_t reducePartialsBytes(const detail::ReducePlan &p) {
  return p.segments > 1 ? p.outputs * p.segments * int64_t(sizeof(Acc)) : 0;
}

/// A fused reduction's partial results (GroupReducePlan), accumulators of
/// `accBytes` each.
inline int64_t groupReducePartialsBytes(const detail::GroupReducePlan &p,
                                        int64_t accBytes) {
  return p.segments > 1 ? p.kept * p.segments * accBytes : 0;
}

/// matmul_nf4's tile: K x tileColumns of op(W) dequantized at a time.
template <typename T>
int64_t matmulNf4TileBytes(const Dims &xDims, const MatmulNf4Params &params) {
  const int64_t rows = params.weight_shape[0], cols = params.weight_shape[1];
  const int64_t k = params.transpose_b ? cols : rows;
  const int64_t n = params.transpose_b ? rows : cols;
  const int64_t m = k ? xDims.numElements() / k : 0;
  if (m == 0 || n == 0)
    return 0;
  return k * nf4::tileColumns(k, n) * int64_t(sizeof(T));
}

/// Attention whose head sizes (d and dv) are at most this keeps its
/// accumulators in registers (a warp per row, 8 slots a lane); larger
/// heads keep them in the call's scratch (Attention.cuh).
constexpr int64_t kAttentionRegisterHead = 256;

inline bool attentionInRegisters(const AttentionShape &s) {
  return s.d <= kAttentionRegisterHead && s.dv <= kAttentionRegisterHead;
}

/// attention's accumulators: none in registers, else one row of dv per
/// query, in the compute type (the mask does not matter).
template <typename T>
int64_t attentionAccumulatorBytes(const AttentionShape &s) {
  if (attentionInRegisters(s))
    return 0;
  return s.batch * s.tq * s.dv * int64_t(sizeof(numeric::ComputeT<T>));
}

/// attentionBackward's: two statistics per query, which its second kernel
/// reads back; then, unless in registers, a row of dq per query, then a
/// row of dk and one of dv per key (of each key/value entry).
template <typename T>
int64_t attentionBackwardAccumulatorBytes(const AttentionShape &s) {
  int64_t values = s.batch * s.tq * 2;
  if (!attentionInRegisters(s))
    values += s.batch * s.tq * s.d + s.kvBatch * s.tk * (s.d + s.dv);
  return values * int64_t(sizeof(numeric::ComputeT<T>));
}

/// linearCrossEntropy's chunks: at least 512 rows, so each product has
/// rows enough to keep the device busy (GPT-2 small's 128 would not).
constexpr int64_t kLinearCrossEntropyFloorRows = 512;

/// What a linearCrossEntropy kernel computes: the loss (the forward), the
/// gradients of x and w, or that of x alone (a frozen w).
enum class LinearCrossEntropyWork { Loss, Gradients, InputGradient };

/// linearCrossEntropy's scratch and its gradients', in order: a chunk of
/// logits (T; a gradient turns it into theirs in place), each row's loss,
/// whether it scores its class highest and whether it counts (ComputeT
/// each, summed by one block in row order at the end), in a gradient the
/// count of rows that count, and then, for w's gradient of a half T, its
/// f32 sums over the chunks (width x classes, stored as w is), rounded once
/// at the end. Nothing when there are no rows.
template <typename T> struct LinearCrossEntropyLayout {
  using Acc = numeric::ComputeT<T>;
  int64_t logitsBytes = 0, statsOffset = 0, statsBytes = 0, sumsOffset = 0,
          sumsBytes = 0;

  LinearCrossEntropyLayout(const LinearCrossEntropyShape &s,
                           LinearCrossEntropyWork work) {
    bool gradient = work != LinearCrossEntropyWork::Loss;
    if (s.rows == 0)
      return;
    logitsBytes = s.chunkRows(kLinearCrossEntropyFloorRows) * s.classes *
                  int64_t(sizeof(T));
    statsOffset = alignUp(logitsBytes);
    statsBytes = (3 * s.rows + (gradient ? 1 : 0)) * int64_t(sizeof(Acc));
    sumsOffset = alignUp(statsOffset + statsBytes);
    if (work == LinearCrossEntropyWork::Gradients && !std::is_same_v<T, Acc>)
      sumsBytes = s.width * s.classes * int64_t(sizeof(float));
  }
  int64_t bytes() const {
    return sumsBytes ? sumsOffset + sumsBytes : statsOffset + statsBytes;
  }
};

//===----------------------------------------------------------------------===//
// The ZTC_SCRATCH functions: bytes a call plans, from its operands' shapes
// (inputs, then outputs, as the call passes them) and its configuration.
//===----------------------------------------------------------------------===//

template <typename T>
int64_t conv2dBytes(const Dims *in, const Dims *out, const Conv2dParams &p) {
  return largerOf(
      conv2dColumns<T>(in[0], in[1], out[0], p, kConvColumnsBytes).bytes,
      cudnnWorkspaceBytes<T>(detail::convPlan(in[0], in[1], out[0], p),
                             in[0].d[0]));
}

template <typename T>
int64_t conv2dBackwardDataBytes(const Dims *in, const Dims *out,
                                const Conv2dBackwardDataParams &p) {
  return largerOf(
      conv2dBackwardDataColumns<T>(in[0], in[1], out[0], p, kConvColumnsBytes)
          .bytes,
      cudnnWorkspaceBytes<T>(detail::convPlan(out[0], in[1], in[0], p),
                             out[0].d[0]));
}

template <typename T>
int64_t conv2dBackwardFilterBytes(const Dims *in, const Dims *out,
                                  const Conv2dBackwardFilterParams &p) {
  return largerOf(
      conv2dBackwardFilterColumns<T>(in[0], in[1], out[0], p, kConvColumnsBytes)
          .bytes,
      cudnnWorkspaceBytes<T>(detail::convPlan(in[0], out[0], in[1], p),
                             in[0].d[0]));
}

template <typename T>
int64_t reduceSumBytes(const Dims *in, const Dims *, const ReduceParams &p) {
  return reducePartialsBytes<numeric::SumT<T>>(
      detail::reducePlan(in[0], detail::axesMask(p.axes)));
}

/// The fallback's sum over the rows (where cuBLASLt's epilogue does not
/// apply or finds no algorithm).
template <typename T>
int64_t matmulBiasGradBytes(const Dims *in, const Dims *,
                            const MatmulParams &) {
  return reducePartialsBytes<numeric::SumT<T>>(
      detail::reducePlan(rowsOf(in[0]), 1));
}

/// The same for the sum of b's rows (matmul_bias_grad_b).
template <typename T>
int64_t matmulBiasGradBBytes(const Dims *in, const Dims *,
                             const MatmulParams &) {
  return reducePartialsBytes<numeric::SumT<T>>(
      detail::reducePlan(rowsOf(in[1]), 1));
}

template <typename T>
int64_t reduceMeanBytes(const Dims *in, const Dims *out,
                        const ReduceParams &p) {
  return reduceSumBytes<T>(in, out, p);
}

template <typename T>
int64_t reduceMaxBytes(const Dims *in, const Dims *, const ReduceParams &p) {
  return reducePartialsBytes<numeric::ComputeT<T>>(
      detail::reducePlan(in[0], detail::axesMask(p.axes)));
}

template <typename T>
int64_t attentionBytes(const Dims *in, const Dims *, const AttentionParams &p) {
  return attentionAccumulatorBytes<T>(
      AttentionShape(in[0], in[1], in[2], Dims{}, false, p));
}

template <typename T>
int64_t attentionBackwardBytes(const Dims *in, const Dims *,
                               const AttentionParams &p) {
  return attentionBackwardAccumulatorBytes<T>(
      AttentionShape(in[0], in[1], in[2], Dims{}, false, p));
}

/// linearCrossEntropy and its gradients: LinearCrossEntropyLayout.
template <typename T>
int64_t linearCrossEntropyLayoutBytes(const Dims *in,
                                      const LinearCrossEntropyParams &p,
                                      LinearCrossEntropyWork work) {
  return LinearCrossEntropyLayout<T>(LinearCrossEntropyShape(in[0], in[1], p),
                                     work)
      .bytes();
}

template <typename T>
int64_t linearCrossEntropyBytes(const Dims *in, const Dims *,
                                const LinearCrossEntropyParams &p) {
  return linearCrossEntropyLayoutBytes<T>(in, p, LinearCrossEntropyWork::Loss);
}

template <typename T>
int64_t linearCrossEntropyBackwardBytes(const Dims *in, const Dims *,
                                        const LinearCrossEntropyParams &p) {
  return linearCrossEntropyLayoutBytes<T>(in, p,
                                          LinearCrossEntropyWork::Gradients);
}

template <typename T>
int64_t linearCrossEntropyBackwardXBytes(const Dims *in, const Dims *,
                                         const LinearCrossEntropyParams &p) {
  return linearCrossEntropyLayoutBytes<T>(
      in, p, LinearCrossEntropyWork::InputGradient);
}

/// layerNormBackward's row statistics: two ComputeT per row.
template <typename T>
int64_t layerNormStatisticsBytes(const detail::LayerNormBackwardPlan &p) {
  return p.rows * 2 * int64_t(sizeof(numeric::ComputeT<T>));
}

/// layerNormBackward's scratch: the row statistics, then (with several
/// segments) each segment's sums of the scale's and bias's gradients.
template <typename T>
int64_t layerNormBackwardBytes(const Dims *in, const Dims *,
                               const LayerNormParams &p) {
  detail::LayerNormBackwardPlan plan =
      detail::layerNormBackwardPlan(in[0], p.axis);
  if (plan.length == 0)
    return 0;
  int64_t partials = plan.segments > 1 ? plan.segments * 2 * plan.length *
                                             int64_t(sizeof(numeric::SumT<T>))
                                       : 0;
  return alignUp(layerNormStatisticsBytes<T>(plan)) + partials;
}

/// layerNormBackwardNarrow's scratch: layerNormBackward's in T's compute
/// type, in which it works.
template <typename T>
int64_t layerNormBackwardNarrowBytes(const Dims *in, const Dims *out,
                                     const LayerNormParams &p) {
  return layerNormBackwardBytes<numeric::ComputeT<T>>(in, out, p);
}

/// The keys detail::sortKeys sorts for `count` of them: the next power of
/// two (1 for 0).
constexpr int64_t sortKeyCount(int64_t count) {
  int64_t n = 1;
  while (n < count)
    n <<= 1;
  return n;
}

/// scatterAdd's scratch: a sort key per position (Movement.cuh).
template <typename T>
int64_t scatterAddBytes(const Dims *in, const Dims *, const AxisParams &) {
  const int64_t count = in[1].numElements();
  return count > 0 ? sortKeyCount(count) * int64_t(sizeof(uint64_t)) : 0;
}

template <typename T>
int64_t matmulNf4Bytes(const Dims *in, const Dims *, const MatmulNf4Params &p) {
  return matmulNf4TileBytes<T>(in[0], p);
}

} // namespace scratch
} // namespace ztc::cuda

#endif // ZTC_RUNTIME_KERNELS_CUDA_SCRATCH_H
