//===- Dnnl.h - oneDNN primitives behind the CPU kernels --------*- C++ -*-===//
//
// oneDNN's primitives (convolutions and their gradients, half-precision
// matrix products), made once per shape and kept for the life of the step
// library. The CPU kernels keep their tensors in the plain row-major
// layout the step's arena plans; a primitive may prefer another (blocked
// channels, nChw16c): its inputs are reordered into a buffer of that layout
// before it runs and its outputs reordered back after. Convolutions over
// NHWC activations (channels last) take them as they are, only their
// weights reordered. Those buffers and
// the scratchpad are each thread's own, kept for its next call; like the
// im2col columns of the fallback path, they are not part of the arena.
//
// Every function here answers false when oneDNN cannot do the operation
// (a shape or layout it refuses, or no memory): the caller then computes it
// itself, so the result never depends on oneDNN being able to.
//
// Header-only, like CpuKernels.h, which includes it.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_DNNL_H
#define ZTC_RUNTIME_KERNELS_DNNL_H

#include "Dims.h"

#include <oneapi/dnnl/dnnl.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace ztc::dnnl {

/// The CPU engine, made on first use; null when oneDNN could not make it.
struct Engine {
  dnnl_engine_t engine = nullptr;
};

inline const Engine &engine() {
  static const Engine made = [] {
    Engine e;
    if (dnnl_engine_create(&e.engine, dnnl_cpu, 0) != dnnl_success)
      return Engine{};
    return e;
  }();
  return made;
}

/// This thread's stream on the engine (null if it cannot be made): a
/// batch of products runs one primitive per OpenMP thread at once. Like
/// the primitives (cachedOp), the streams are kept for the library's life,
/// in a registry that is never destroyed.
inline dnnl_stream_t stream() {
  static std::mutex mutex;
  static std::vector<dnnl_stream_t> *streams = new std::vector<dnnl_stream_t>;
  thread_local dnnl_stream_t mine = nullptr;
  if (!mine && engine().engine &&
      dnnl_stream_create(&mine, engine().engine, dnnl_stream_default_flags) ==
          dnnl_success) {
    std::lock_guard<std::mutex> lock(mutex);
    streams->push_back(mine);
  }
  return mine;
}

/// Primitive attributes whose scratchpad the caller passes (with each
/// execution, see `run`): with the library's default, every primitive
/// shares one global scratchpad, and two products run at once by the
/// threads of a batch corrupted each other's results. `attr` is null if
/// oneDNN could not make it.
struct UserScratchpad {
  dnnl_primitive_attr_t attr = nullptr;
  UserScratchpad() {
    if (dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(
            attr, dnnl_scratchpad_mode_user) == dnnl_success)
      return;
    if (attr)
      dnnl_primitive_attr_destroy(attr);
    attr = nullptr;
  }
  ~UserScratchpad() {
    if (attr)
      dnnl_primitive_attr_destroy(attr);
  }
  UserScratchpad(const UserScratchpad &) = delete;
  UserScratchpad &operator=(const UserScratchpad &) = delete;
};

/// One argument of a primitive: the plain layout the kernel holds it in,
/// the layout the primitive takes, and the reorder between them when they
/// differ (plain to chosen for an input, chosen to plain for an output).
struct Arg {
  int which = 0; // DNNL_ARG_*
  bool output = false;
  dnnl_memory_desc_t plain{}, chosen{};
  dnnl_primitive_t reorder = nullptr;
};

/// A primitive and its arguments, in the order `run` takes their data, and
/// the scratchpad each execution needs (made with userScratchpadAttr).
struct Op {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t scratchpad{};
  size_t scratchpadBytes = 0;
  std::vector<Arg> args;
};

/// The plain (row-major) descriptor of a float tensor of `dims`.
inline dnnl_memory_desc_t plainDesc(std::vector<int64_t> dims,
                                    dnnl_data_type_t type = dnnl_f32) {
  dnnl_memory_desc_t desc{};
  dnnl_dims_t shape{};
  for (size_t i = 0; i < dims.size(); ++i)
    shape[i] = dims[i];
  static const dnnl_format_tag_t tags[] = {
      dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde};
  dnnl_memory_desc_init_by_tag(&desc, int(dims.size()), shape, type,
                               tags[dims.size()]);
  return desc;
}

/// The same dimensions with the layout left to the primitive.
inline dnnl_memory_desc_t anyDesc(const dnnl_memory_desc_t &plain) {
  dnnl_memory_desc_t desc{};
  dnnl_memory_desc_init_by_tag(&desc, plain.ndims, plain.dims, plain.data_type,
                               dnnl_format_tag_any);
  return desc;
}

/// A reorder from `from` to `to`, or null if oneDNN has none.
inline dnnl_primitive_t makeReorder(const dnnl_memory_desc_t &from,
                                    const dnnl_memory_desc_t &to) {
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_primitive_t reorder = nullptr;
  if (dnnl_reorder_primitive_desc_create(&pd, &from, engine().engine, &to,
                                         engine().engine,
                                         nullptr) != dnnl_success)
    return nullptr;
  if (dnnl_primitive_create(&reorder, pd) != dnnl_success)
    reorder = nullptr;
  dnnl_primitive_desc_destroy(pd);
  return reorder;
}

/// Whether `pd` is one of oneDNN's reference implementations ("ref:any"):
/// plain loops, slower than the kernels' own paths (oneDNN 2.6 answers
/// with one for f16 on a processor without AVX512-FP16).
inline bool isReference(const_dnnl_primitive_desc_t pd) {
  const char *name = nullptr;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) !=
          dnnl_success ||
      !name)
    return true;
  return std::strncmp(name, "ref", 3) == 0;
}

/// The primitive of `pd` with `args` (which, output, plain layout); null
/// `primitive` if any part could not be made, or if oneDNN has only its
/// reference implementation for it. Takes ownership of `pd`.
inline Op makeOp(dnnl_primitive_desc_t pd,
                 std::vector<std::tuple<int, bool, dnnl_memory_desc_t>> args) {
  Op op;
  if (!pd)
    return op;
  if (isReference(pd)) {
    dnnl_primitive_desc_destroy(pd);
    return op;
  }
  for (auto &[which, output, plain] : args) {
    Arg arg;
    arg.which = which;
    arg.output = output;
    arg.plain = plain;
    const dnnl_memory_desc_t *chosen =
        dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, which);
    if (!chosen) {
      dnnl_primitive_desc_destroy(pd);
      return Op{};
    }
    arg.chosen = *chosen;
    if (!dnnl_memory_desc_equal(&arg.plain, &arg.chosen)) {
      arg.reorder = output ? makeReorder(arg.chosen, arg.plain)
                           : makeReorder(arg.plain, arg.chosen);
      if (!arg.reorder) {
        dnnl_primitive_desc_destroy(pd);
        return Op{};
      }
    }
    op.args.push_back(arg);
  }
  if (const dnnl_memory_desc_t *scratchpad =
          dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) {
    op.scratchpad = *scratchpad;
    op.scratchpadBytes = dnnl_memory_desc_get_size(scratchpad);
  }
  if (dnnl_primitive_create(&op.primitive, pd) != dnnl_success)
    op.primitive = nullptr;
  dnnl_primitive_desc_destroy(pd);
  return op;
}

namespace detail {

/// Memory objects over caller-owned data; destroyed with the holder.
struct Memories {
  std::vector<dnnl_memory_t> all;
  ~Memories() {
    for (dnnl_memory_t memory : all)
      dnnl_memory_destroy(memory);
  }
  dnnl_memory_t make(const dnnl_memory_desc_t &desc, void *data) {
    dnnl_memory_t memory = nullptr;
    if (dnnl_memory_create(&memory, &desc, engine().engine, data) !=
        dnnl_success)
      return nullptr;
    all.push_back(memory);
    return memory;
  }
};

struct FreeAligned {
  void operator()(void *p) const { std::free(p); }
};

/// This thread's buffer number `slot` (a reordered argument's, or the
/// scratchpad), at least `bytes` long and 64-byte aligned; null if it
/// cannot be had. Each thread keeps the largest it has needed, since the
/// next step needs it again: allocated and freed on every call instead,
/// glibc gave the heap's top back to the kernel and faulted it in again
/// each time, a fifth of a small CNN's step.
inline void *threadBuffer(size_t slot, size_t bytes) {
  struct Buffer {
    std::unique_ptr<void, FreeAligned> memory;
    size_t bytes = 0;
  };
  thread_local std::vector<Buffer> buffers;
  if (buffers.size() <= slot)
    buffers.resize(slot + 1);
  Buffer &buffer = buffers[slot];
  if (buffer.bytes < bytes) {
    buffer.memory.reset(); // the old one first: no peak of both
    buffer.memory.reset(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    buffer.bytes = buffer.memory ? bytes : 0;
  }
  return buffer.memory.get();
}

inline bool reorder(dnnl_primitive_t reorder, dnnl_memory_t from,
                    dnnl_memory_t to) {
  dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  return dnnl_primitive_execute(reorder, stream(), 2, args) ==
         dnnl_success;
}

} // namespace detail

/// Runs `op` on `data` (one pointer per argument, in `op.args`' order):
/// inputs reordered into the primitive's layouts, outputs back out of them.
/// False if a buffer or a memory object could not be made or oneDNN failed;
/// the outputs are then undefined.
inline bool run(const Op &op, const std::vector<void *> &data) {
  detail::Memories memories;
  std::vector<dnnl_exec_arg_t> args;
  // Per argument, its memory over the caller's data and the one the
  // primitive reads or writes (the same unless reordered).
  std::vector<std::pair<dnnl_memory_t, dnnl_memory_t>> memory;
  for (size_t i = 0; i < op.args.size(); ++i) {
    const Arg &arg = op.args[i];
    dnnl_memory_t plain = memories.make(arg.plain, data[i]);
    dnnl_memory_t chosen = plain;
    if (plain && arg.reorder) {
      void *buffer =
          detail::threadBuffer(i + 1, dnnl_memory_desc_get_size(&arg.chosen));
      chosen = buffer ? memories.make(arg.chosen, buffer) : nullptr;
    }
    if (!chosen)
      return false;
    memory.push_back({plain, chosen});
    args.push_back({arg.which, chosen});
  }
  for (size_t i = 0; i < op.args.size(); ++i)
    if (op.args[i].reorder && !op.args[i].output &&
        !detail::reorder(op.args[i].reorder, memory[i].first,
                         memory[i].second))
      return false;
  // This thread's scratchpad: no other execution uses it meanwhile.
  if (op.scratchpadBytes) {
    void *scratchpad = detail::threadBuffer(0, op.scratchpadBytes);
    dnnl_memory_t scratch =
        scratchpad ? memories.make(op.scratchpad, scratchpad) : nullptr;
    if (!scratch)
      return false;
    args.push_back({DNNL_ARG_SCRATCHPAD, scratch});
  }
  if (!stream() ||
      dnnl_primitive_execute(op.primitive, stream(), int(args.size()),
                             args.data()) != dnnl_success)
    return false;
  for (size_t i = 0; i < op.args.size(); ++i)
    if (op.args[i].reorder && op.args[i].output &&
        !detail::reorder(op.args[i].reorder, memory[i].second,
                         memory[i].first))
      return false;
  return dnnl_stream_wait(stream()) == dnnl_success;
}

/// The op made by `make` for `key`, made on first use and kept for the life
/// of the library (a shape oneDNN refused too, as an op with no primitive);
/// null when oneDNN has no engine. The table is never destroyed: a map
/// destroyed at exit would drop the primitives it holds (Op does not own
/// them), which LeakSanitizer then reports, and a step library's OpenMP
/// threads may still run one.
template <typename Make>
const Op *cachedOp(const std::vector<int64_t> &key, Make make) {
  static std::mutex mutex;
  static auto *ops = new std::map<std::vector<int64_t>, Op>;
  if (!engine().engine)
    return nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = ops->find(key);
  if (found == ops->end())
    found = ops->emplace(key, make()).first;
  return found->second.primitive ? &found->second : nullptr;
}

//===----------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------===//

/// Which of a convolution's three computations.
enum class ConvPass { Forward, BackwardData, BackwardWeights };

/// A float 2-D convolution by oneDNN, in the CPU kernels' terms: `x` and
/// `y` of the NCHW dimensions `xDims` and `yDims`, stored NCHW or, with
/// `channelsLast`, NHWC; weights [O, C/group, kH, kW], `pads` starting with
/// top and left, `dilations` 1 for none. `data` holds, in order:
///   Forward:         x, w, bias (if `bias`), y      (y written)
///   BackwardData:    gy, w, gx                      (gx written)
///   BackwardWeights: x, gy, gw                      (gw written)
/// False if oneDNN could not compute it: the caller computes it instead.
inline bool convolution(ConvPass pass, const Dims &xDims, const Dims &wDims,
                        const Dims &yDims, const int64_t *strides,
                        const int64_t *pads, const int64_t *dilations,
                        int64_t group, bool bias, bool channelsLast,
                        const std::vector<void *> &data) {
  std::vector<int64_t> key = {int64_t(pass), group, bias, channelsLast};
  for (const Dims *dims : {&xDims, &wDims, &yDims})
    key.insert(key.end(), dims->d, dims->d + 4);
  key.insert(key.end(), strides, strides + 2);
  key.insert(key.end(), pads, pads + 2);
  key.insert(key.end(), dilations, dilations + 2);
  const Op *op = cachedOp(key, [&]() -> Op {
    dnnl_memory_desc_t x = plainDesc({xDims.d[0], xDims.d[1], xDims.d[2],
                                      xDims.d[3]});
    dnnl_memory_desc_t y = plainDesc({yDims.d[0], yDims.d[1], yDims.d[2],
                                      yDims.d[3]});
    // NHWC: the same dimensions, channels innermost in memory. oneDNN's
    // convolutions read and write it as they are, without the reorders
    // into and out of blocked channels that NCHW takes.
    if (channelsLast) {
      dnnl_memory_desc_init_by_tag(&x, 4, x.dims, dnnl_f32, dnnl_acdb);
      dnnl_memory_desc_init_by_tag(&y, 4, y.dims, dnnl_f32, dnnl_acdb);
    }
    // Grouped weights are [group, O/group, C/group, kH, kW]: the same bytes.
    dnnl_memory_desc_t w =
        group == 1 ? plainDesc({wDims.d[0], wDims.d[1], wDims.d[2], wDims.d[3]})
                   : plainDesc({group, wDims.d[0] / group, wDims.d[1],
                                wDims.d[2], wDims.d[3]});
    dnnl_memory_desc_t b = plainDesc({wDims.d[0]});
    dnnl_memory_desc_t xAny = channelsLast ? x : anyDesc(x),
                       yAny = channelsLast ? y : anyDesc(y), wAny = anyDesc(w),
                       bAny = anyDesc(b);
    // oneDNN counts dilation from 0 and wants the bottom and right padding
    // that make the output size exact (the rows a stride skips are not
    // padding).
    dnnl_dims_t stride = {strides[0], strides[1]};
    dnnl_dims_t dilate = {dilations[0] - 1, dilations[1] - 1};
    dnnl_dims_t padBegin = {pads[0], pads[1]}, padEnd{};
    for (int i = 0; i < 2; ++i)
      padEnd[i] = (yDims.d[2 + i] - 1) * strides[i] +
                  (wDims.d[2 + i] - 1) * dilations[i] + 1 - xDims.d[2 + i] -
                  pads[i];
    UserScratchpad scratchpad;
    if (!scratchpad.attr)
      return Op{};
    dnnl_convolution_desc_t forwardDesc;
    dnnl_primitive_desc_t forward = nullptr;
    if (dnnl_dilated_convolution_forward_desc_init(
            &forwardDesc, dnnl_forward_training, dnnl_convolution_direct,
            &xAny, &wAny, bias ? &bAny : nullptr, &yAny, stride, dilate,
            padBegin, padEnd) != dnnl_success ||
        dnnl_primitive_desc_create(&forward, &forwardDesc, scratchpad.attr,
                                   engine().engine, nullptr) != dnnl_success)
      return Op{};
    if (pass == ConvPass::Forward) {
      std::vector<std::tuple<int, bool, dnnl_memory_desc_t>> args = {
          {DNNL_ARG_SRC, false, x}, {DNNL_ARG_WEIGHTS, false, w}};
      if (bias)
        args.push_back({DNNL_ARG_BIAS, false, b});
      args.push_back({DNNL_ARG_DST, true, y});
      return makeOp(forward, args);
    }
    dnnl_convolution_desc_t desc;
    dnnl_primitive_desc_t backward = nullptr;
    bool described =
        pass == ConvPass::BackwardData
            ? dnnl_dilated_convolution_backward_data_desc_init(
                  &desc, dnnl_convolution_direct, &xAny, &wAny, &yAny, stride,
                  dilate, padBegin, padEnd) == dnnl_success
            : dnnl_dilated_convolution_backward_weights_desc_init(
                  &desc, dnnl_convolution_direct, &xAny, &wAny, nullptr,
                  &yAny, stride, dilate, padBegin, padEnd) == dnnl_success;
    if (!described ||
        dnnl_primitive_desc_create(&backward, &desc, scratchpad.attr,
                                   engine().engine, forward) != dnnl_success)
      backward = nullptr;
    dnnl_primitive_desc_destroy(forward);
    if (pass == ConvPass::BackwardData)
      return makeOp(backward, {{DNNL_ARG_DIFF_DST, false, y},
                               {DNNL_ARG_WEIGHTS, false, w},
                               {DNNL_ARG_DIFF_SRC, true, x}});
    return makeOp(backward, {{DNNL_ARG_SRC, false, x},
                             {DNNL_ARG_DIFF_DST, false, y},
                             {DNNL_ARG_DIFF_WEIGHTS, true, w}});
  });
  return op && run(*op, data);
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// A 2-D matrix of `rows` x `cols` elements of `type`, row-major with
/// leading dimension `ld`, or its transpose (stored [cols, rows]).
inline dnnl_memory_desc_t matrixDesc(int64_t rows, int64_t cols, int64_t ld,
                                     bool transposed, dnnl_data_type_t type) {
  dnnl_memory_desc_t desc{};
  dnnl_dims_t dims = {rows, cols};
  dnnl_dims_t strides = {transposed ? 1 : ld, transposed ? ld : 1};
  dnnl_memory_desc_init_by_strides(&desc, 2, dims, type, strides);
  return desc;
}

/// C[M,N] = op(A)[M,K] * op(B)[K,N] (+ rowBias[m] on row m; with
/// `accumulate`, + C itself instead) by oneDNN's matmul, A and B of `type`
/// and C (and the bias) of `cType` (f32 accumulation, each result rounded
/// once to `cType`), with gemm's arguments (runtime/kernels/cpu/Linalg.h).
/// On a processor with bf16 dot-product instructions (AVX512-BF16), a bf16
/// product runs on them. False if oneDNN has no matmul for it.
inline bool matmul(dnnl_data_type_t type, int64_t m, int64_t n, int64_t k,
                   const void *a, int64_t lda, bool transA, const void *b,
                   int64_t ldb, bool transB, void *c, int64_t ldc,
                   const void *rowBias, dnnl_data_type_t cType,
                   bool accumulate) {
  // oneDNN's fast matmuls take a bias per column only: a row bias is
  // written into C first and the product added to it (a "sum" post-op, in
  // f32 before the one rounding), as C itself is when accumulating.
  bool sum = rowBias || accumulate;
  std::vector<int64_t> key = {int64_t(type), m,      n,   k,
                              lda,           transA, ldb, transB,
                              ldc,           sum,    int64_t(cType)};
  const Op *op = cachedOp(key, [&]() -> Op {
    dnnl_memory_desc_t aDesc = matrixDesc(m, k, lda, transA, type);
    dnnl_memory_desc_t bDesc = matrixDesc(k, n, ldb, transB, type);
    dnnl_memory_desc_t cDesc = matrixDesc(m, n, ldc, false, cType);
    dnnl_matmul_desc_t desc;
    UserScratchpad scratchpad;
    dnnl_post_ops_t postOps = nullptr;
    dnnl_primitive_desc_t pd = nullptr;
    bool made =
        scratchpad.attr &&
        dnnl_matmul_desc_init(&desc, &aDesc, &bDesc, nullptr, &cDesc) ==
            dnnl_success &&
        dnnl_post_ops_create(&postOps) == dnnl_success &&
        (!sum || dnnl_post_ops_append_sum(postOps, 1.0f) == dnnl_success) &&
        dnnl_primitive_attr_set_post_ops(scratchpad.attr, postOps) ==
            dnnl_success &&
        dnnl_primitive_desc_create(&pd, &desc, scratchpad.attr,
                                   engine().engine, nullptr) == dnnl_success;
    if (postOps)
      dnnl_post_ops_destroy(postOps);
    if (!made)
      return Op{};
    return makeOp(pd, {{DNNL_ARG_SRC, false, aDesc},
                       {DNNL_ARG_WEIGHTS, false, bDesc},
                       {DNNL_ARG_DST, true, cDesc}});
  });
  if (!op)
    return false;
  if (rowBias && !accumulate) {
    size_t size = cType == dnnl_f32 ? 4 : 2;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(static_cast<char *>(c) + (i * ldc + j) * size,
                    static_cast<const char *>(rowBias) + i * size, size);
  }
  return run(*op, {const_cast<void *>(a), const_cast<void *>(b), c});
}

} // namespace ztc::dnnl

#endif // ZTC_RUNTIME_KERNELS_DNNL_H
