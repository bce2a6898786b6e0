//===- AttentionShape.h - attention's operand shapes ------------*- C++ -*-===//
//
// The one reading of nn.attention's operand shapes that both kernel
// libraries share: q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv], all
// contiguous with the same batch dimensions (batch and heads, flattened to
// one index), and the optional additive mask of the scores' rank, each
// dimension 1 (repeated) or the scores'. Which keys a query sees (causal or
// not) is stated here too, so the CPU and CUDA kernels skip the same ones.
//
// A rank-4 operand may instead be stored [B, T, H, D], tokens before heads,
// as a model's projections leave it: the `bthd` bit of its role
// (AttentionRole) in the call's configuration says so, and ztc-fold-
// transposes sets it where it removes the transpose a head split copied.
// And a rank-4 operand may be a window of heads of a larger tensor (q, k
// and v inside one fused projection, their gradients inside its
// gradient): `head_starts` gives each role's first head, `heads` the
// logical head count, and ztc-fold-head-windows sets them where it removes
// the slices and concats that copied the windows. The kernels reach every
// operand's rows through AttentionRows.
//
// Rank-4 k and v may have fewer heads than q (grouped-query attention):
// `group` query heads read each key/value head, head h its head h / group.
// Batch entries count q's heads; key/value entry kb is read by the query
// entries kb * group + g (queryEntry), and its gradients sum theirs.
//
// Only the C++17 standard library is used; under nvcc every member is also
// a device function (ZTC_HOST_DEVICE).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_KERNELS_ATTENTIONSHAPE_H
#define ZTC_RUNTIME_KERNELS_ATTENTIONSHAPE_H

#include "Dims.h"
#include "Library.h"

#include <cstdint>

namespace ztc {

/// The operands of attention and attentionBackward by role, each role one
/// bit of the configuration's `bthd`: q, k, v and the forward's result,
/// then the backward's result gradient and its gradients of q, k and v.
enum AttentionRole : int {
  kAttentionQ,
  kAttentionK,
  kAttentionV,
  kAttentionOut,
  kAttentionGradOut,
  kAttentionGradQ,
  kAttentionGradK,
  kAttentionGradV,
  kAttentionRoles
};

/// Where one operand's rows lie: `rows` rows of `length` elements per
/// entry of the flattened batch, stored [..., storedHeads, rows, length]
/// or, with `tokensOuter`, [B, rows, storedHeads, length], the operand's
/// `heads` heads being those from `headStart` on (all of them unless the
/// operand is a window); `group` of the query heads `heads` read each of
/// its heads (k and v of grouped-query attention; 1 otherwise).
struct AttentionRows {
  int64_t rows = 0, length = 0, heads = 1, storedHeads = 1, headStart = 0;
  bool tokensOuter = false;
  int64_t group = 1;
  /// The offset of row `row` of batch entry `b` (b = batch * heads + head,
  /// in query heads).
  ZTC_HOST_DEVICE int64_t at(int64_t b, int64_t row) const {
    const int64_t batch = b / heads, head = headStart + b % heads / group;
    if (!tokensOuter)
      return ((batch * storedHeads + head) * rows + row) * length;
    return ((batch * rows + row) * storedHeads + head) * length;
  }
};

/// The dimensions an operand stored [B, T, H, D] has as [B, H, T, D].
inline Dims headsBeforeTokens(const Dims &dims) {
  Dims logical = dims;
  logical.d[1] = dims.d[2];
  logical.d[2] = dims.d[1];
  return logical;
}

struct AttentionShape {
  /// The flattened batch dimensions, the queries, the keys, the head sizes
  /// of q and k (d) and of v (dv).
  int64_t batch = 1, tq = 0, tk = 0, d = 0, dv = 0;
  /// The query heads that read each key/value head, and the key/value
  /// entries of the flattened batch (batch / group).
  int64_t group = 1, kvBatch = 1;
  /// The scores' batch dimensions, for the mask's offsets.
  Dims batchDims;
  /// The mask's element strides: per batch dimension, then along the
  /// queries and the keys; 0 where the mask repeats. `hasMask` false: none.
  int64_t maskBatchStride[kMaxRank] = {0};
  int64_t maskRowStride = 0, maskColStride = 0;
  bool hasMask = false;

  /// Each role's rows (AttentionRole).
  AttentionRows role[kAttentionRoles];

  /// The shapes of q, k, v and the mask as a call passes them, laid out as
  /// `params` says (`bthd`, the windows of heads). A call's other operands
  /// give theirs to stored() when they may be windows.
  AttentionShape(const Dims &qStored, const Dims &kStored, const Dims &vStored,
                 const Dims &mask, bool withMask, const AttentionParams &params)
      : bthd(params.bthd) {
    if (params.head_starts.size == kAttentionRoles)
      for (int r = 0; r < kAttentionRoles; ++r)
        headStarts[r] = params.head_starts[r];
    windowHeads = params.heads.present ? params.heads.value : 0;
    auto logical = [&](const Dims &dims, AttentionRole r) {
      Dims result = bthd >> r & 1 ? headsBeforeTokens(dims) : dims;
      if (windowHeads > 0)
        result.d[1] = windowHeads;
      return result;
    };
    const Dims q = logical(qStored, kAttentionQ),
               k = logical(kStored, kAttentionK),
               v = logical(vStored, kAttentionV);
    int64_t rank = q.rank;
    tq = q.d[rank - 2];
    d = q.d[rank - 1];
    tk = k.d[rank - 2];
    dv = v.d[rank - 1];
    batchDims.rank = rank - 2;
    for (int64_t i = 0; i < rank - 2; ++i) {
      batchDims.d[i] = q.d[i];
      batch *= q.d[i];
    }
    const int64_t heads = rank == 4 ? q.d[1] : 1;
    const int64_t kvHeads = rank == 4 ? k.d[1] : 1;
    if (kvHeads > 0 && heads % kvHeads == 0)
      group = heads / kvHeads;
    kvBatch = batch / group;
    const int64_t rows[kAttentionRoles] = {tq, tk, tk, tq, tq, tq, tk, tk};
    const int64_t lengths[kAttentionRoles] = {d, d, dv, dv, dv, d, d, dv};
    const bool keyValue[kAttentionRoles] = {false, true,  true, false,
                                            false, false, true, true};
    for (int r = 0; r < kAttentionRoles; ++r)
      role[r] = {rows[r],
                 lengths[r],
                 heads,
                 keyValue[r] ? kvHeads : heads,
                 0,
                 (bthd >> r & 1) != 0,
                 keyValue[r] ? group : 1};
    stored(kAttentionQ, qStored);
    stored(kAttentionK, kStored);
    stored(kAttentionV, vStored);
    hasMask = withMask;
    if (!withMask)
      return;
    // Contiguous strides of the mask, zeroed where a dimension repeats.
    int64_t stride = 1;
    for (int64_t i = rank - 1; i >= 0; --i) {
      int64_t effective = mask.d[i] == 1 ? 0 : stride;
      if (i == rank - 1)
        maskColStride = effective;
      else if (i == rank - 2)
        maskRowStride = effective;
      else
        maskBatchStride[i] = effective;
      stride *= mask.d[i];
    }
  }

  /// Gives role `r` the stored shape `dims`: with windows of heads, its
  /// heads dimension holds the window.
  void stored(AttentionRole r, const Dims &dims) {
    if (windowHeads == 0 || dims.rank != 4)
      return;
    role[r].storedHeads = bthd >> r & 1 ? dims.d[2] : dims.d[1];
    role[r].headStart = headStarts[r];
  }

  /// Gives the backward's other operands their stored shapes (stored()):
  /// the forward's result, its gradient, and the gradients of q, k, v.
  void storedBackward(const Dims &out, const Dims &gradOut, const Dims &gradQ,
                      const Dims &gradK, const Dims &gradV) {
    stored(kAttentionOut, out);
    stored(kAttentionGradOut, gradOut);
    stored(kAttentionGradQ, gradQ);
    stored(kAttentionGradK, gradK);
    stored(kAttentionGradV, gradV);
  }

  /// The offset of batch entry `b`'s scores in the mask.
  ZTC_HOST_DEVICE int64_t maskBase(int64_t b) const {
    int64_t offset = 0;
    for (int64_t i = batchDims.rank - 1; i >= 0; --i) {
      offset += (b % batchDims.d[i]) * maskBatchStride[i];
      b /= batchDims.d[i];
    }
    return offset;
  }

  /// The query entry of the `g`th query head that reads key/value entry
  /// `kvEntry` (g < group).
  ZTC_HOST_DEVICE int64_t queryEntry(int64_t kvEntry, int64_t g) const {
    return kvEntry * group + g;
  }

  /// The keys query `i` sees: [0, keyEnd(i)); causal attention sees keys
  /// j <= i (PyTorch's is_causal, aligned at the top left).
  ZTC_HOST_DEVICE int64_t keyEnd(int64_t i, bool causal) const {
    return causal ? (i + 1 < tk ? i + 1 : tk) : tk;
  }

private:
  int64_t bthd = 0;
  /// The logical heads of windowed operands (0: no windows) and each
  /// role's first head.
  int64_t windowHeads = 0;
  int64_t headStarts[kAttentionRoles] = {0};
};

} // namespace ztc

#endif // ZTC_RUNTIME_KERNELS_ATTENTIONSHAPE_H
