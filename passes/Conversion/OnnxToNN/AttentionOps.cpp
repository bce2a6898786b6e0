//===- AttentionOps.cpp - ONNX's transformer operators to nn --------------===//
//
// Converters for the operators opset 23 added for transformers:
// RMSNormalization, RotaryEmbedding and Attention. None is an nn op of its
// own: each becomes the products, reductions, slices and selections its
// ONNX function body describes (RotaryEmbedding's halves the `nn.rotary`
// a PyTorch export's rotary embedding also becomes), so its gradient is
// theirs and every pass below (recompute, precision, ZeRO, the kernels)
// sees ops it knows. The nn canonicalization, which runs right after the
// conversion, then finds in RMSNormalization's steps the `nn.layer_norm`
// with `rms` that a PyTorch export's RMSNorm also becomes (one kernel each
// way).
//
// Attention follows the operator as ONNX defines it today (the reference
// of onnx 1.22 and its node tests): 3-D inputs are split into heads as
// [batch, sequence, heads, size] and then transposed; grouped-query heads
// share key/value head h / (q_heads / kv_heads); softcap comes before the
// mask; the causal mask is aligned bottom-right (a query at i attends keys
// up to i + past_sequence_length). A query row that every key is masked
// from gives zeros (not NaN) in Y and in its gradient.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/OnnxToNN/NodeConverter.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::ztc;
using namespace mlir::ztc::onnx_to_nn;

namespace {

/// [B, S, H * D] viewed as [B, H, S, D] (heads first), or nothing after an
/// error naming `what`.
Value splitHeads(NodeContext &ctx, Value x, int64_t heads, StringRef what) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(x.getType()).getShape();
  if (heads <= 0 || shape[2] % heads != 0) {
    ctx.error() << what << "'s hidden size " << shape[2]
                << " is not a multiple of its " << heads << " heads";
    return nullptr;
  }
  Value split = ctx.reshape(x, {shape[0], shape[1], heads, shape[2] / heads});
  return split ? ctx.create<nn::TransposeOp>(
                     split, {ctx.i64ArrayAttr("perm", {0, 2, 1, 3})})
               : nullptr;
}

/// The inverse of splitHeads: [B, H, S, D] as [B, S, H * D].
Value mergeHeads(NodeContext &ctx, Value x) {
  Value t =
      ctx.create<nn::TransposeOp>(x, {ctx.i64ArrayAttr("perm", {0, 2, 1, 3})});
  if (!t)
    return nullptr;
  ArrayRef<int64_t> shape = cast<RankedTensorType>(t.getType()).getShape();
  return ctx.reshape(t, {shape[0], shape[1], shape[2] * shape[3]});
}

//===----------------------------------------------------------------------===//
// RMSNormalization
//===----------------------------------------------------------------------===//

/// Y = X / sqrt(mean(X^2 over [axis, rank)) + epsilon) * scale, the first
/// stage in the stash type (f32 unless stash_type says otherwise).
LogicalResult convertRMSNorm(NodeContext &ctx,
                             SmallVectorImpl<Value> &results) {
  RankedTensorType type = ctx.inputType(0);
  int64_t rank = type.getRank();
  if (rank == 0)
    return ctx.error() << "X must have rank 1 or more";
  FailureOr<int64_t> axis = ctx.normalizeAxis(ctx.intAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  int64_t stash = ctx.intAttr("stash_type", 1);
  Type stashType = onnxElementType(ctx.b.getContext(), stash);
  if (!stashType || !isa<FloatType>(stashType))
    return ctx.error() << "stash_type " << stash
                       << " is not a floating-point type ztc computes in";
  Value x = ctx.castTo(ctx.input(0), stashType);
  Value square = x ? ctx.create<nn::MulOp>({x, x}) : nullptr;
  Value mean =
      square
          ? ctx.create<nn::ReduceMeanOp>(
                square, {ctx.i64ArrayAttr(
                             "axes", llvm::to_vector(llvm::seq(*axis, rank))),
                         ctx.boolAttr("keepdims", true)})
          : nullptr;
  Value shifted =
      mean ? ctx.create<nn::AddOp>(
                 {mean, ctx.scalar(stashType, ctx.floatAttr("epsilon", 1e-5))})
           : nullptr;
  Value rms = shifted ? ctx.create<nn::SqrtOp>(shifted) : nullptr;
  Value normalized = rms ? ctx.create<nn::DivOp>({x, rms}) : nullptr;
  if (!normalized)
    return failure();
  Value scale = ctx.input(1);
  normalized =
      ctx.castTo(ctx.castTo(normalized, type.getElementType()),
                 cast<RankedTensorType>(scale.getType()).getElementType());
  Value y = normalized ? ctx.create<nn::MulOp>({normalized, scale}) : nullptr;
  if (y && cast<RankedTensorType>(y.getType()).getShape() != type.getShape())
    return ctx.error() << "scale " << scale.getType()
                       << " does not broadcast to X " << type;
  return produce(results, y);
}

//===----------------------------------------------------------------------===//
// RotaryEmbedding
//===----------------------------------------------------------------------===//

/// Rotates the first rotary_embedding_dim features of every head by the
/// angles of each token's position: pairs (x1, x2) of the two halves (or,
/// interleaved, of even and odd features) become (cos x1 - sin x2,
/// sin x1 + cos x2); the halves' form is one nn.rotary.
LogicalResult convertRotaryEmbedding(NodeContext &ctx,
                                     SmallVectorImpl<Value> &results) {
  RankedTensorType type = ctx.inputType(0);
  ArrayRef<int64_t> shape = type.getShape();
  Type elem = type.getElementType();
  int64_t heads = ctx.intAttr("num_heads", 0);
  // x as [B, S, H, D].
  Value x;
  if (shape.size() == 4) {
    x = ctx.create<nn::TransposeOp>(ctx.input(0),
                                    {ctx.i64ArrayAttr("perm", {0, 2, 1, 3})});
  } else if (shape.size() == 3) {
    if (heads <= 0 || shape[2] % heads != 0)
      return ctx.error() << "a 3-D X needs num_heads dividing its hidden size "
                         << shape[2] << ", got num_heads " << heads;
    x = ctx.reshape(ctx.input(0),
                    {shape[0], shape[1], heads, shape[2] / heads});
  } else {
    return ctx.error() << "X must be 3-D [batch, sequence, hidden] or 4-D "
                          "[batch, heads, sequence, head_size], got "
                       << type;
  }
  if (!x)
    return failure();
  ArrayRef<int64_t> xs = cast<RankedTensorType>(x.getType()).getShape();
  int64_t batch = xs[0], sequence = xs[1], headSize = xs[3];
  int64_t rotary = ctx.intAttr("rotary_embedding_dim", 0);
  if (rotary == 0)
    rotary = headSize;
  if (rotary < 0 || rotary > headSize || rotary % 2 != 0)
    return ctx.error() << "rotary_embedding_dim " << rotary
                       << " must be even and at most the head size "
                       << headSize;
  int64_t half = rotary / 2;

  // cos and sin as [B, S, 1, half].
  auto angles = [&](unsigned i, StringRef what) -> Value {
    Value cache = ctx.input(i);
    RankedTensorType t = ctx.inputType(i);
    if (t.getElementType() != elem) {
      ctx.error() << what << " is " << t << ", expected elements of X's type "
                  << elem;
      return nullptr;
    }
    if (Value positions = ctx.input(3)) {
      RankedTensorType p = ctx.inputType(3);
      if (t.getRank() != 2 || p.getRank() != 2 ||
          p.getShape() != ArrayRef<int64_t>{batch, sequence}) {
        ctx.error() << "with position_ids " << p << ", " << what
                    << " must be 2-D [max_position + 1, size] and "
                       "position_ids ["
                    << batch << ", " << sequence << "], got " << t;
        return nullptr;
      }
      cache = ctx.create<nn::GatherOp>({cache, ctx.input(3)},
                                       {ctx.i64Attr("axis", 0)});
    } else if (t.getRank() != 3 || t.getDimSize(0) != batch ||
               t.getDimSize(1) != sequence) {
      ctx.error() << "without position_ids, " << what << " must be [" << batch
                  << ", " << sequence << ", size], got " << t;
      return nullptr;
    }
    if (!cache)
      return nullptr;
    int64_t size = cast<RankedTensorType>(cache.getType()).getShape().back();
    if (size < half) {
      ctx.error() << what << " holds " << size << " angles per position, "
                  << "fewer than the " << half << " the rotation needs";
      return nullptr;
    }
    Value cut = ctx.sliceAlong(cache, 2, 0, half);
    return cut ? ctx.reshape(cut, {batch, sequence, 1, half}) : nullptr;
  };
  Value cos = angles(1, "cos_cache");
  Value sin = cos ? angles(2, "sin_cache") : nullptr;
  if (!sin)
    return failure();

  Value rotate = rotary == headSize ? x : ctx.sliceAlong(x, 3, 0, rotary);
  Value rotated;
  if (ctx.intAttr("interleaved", 0) == 0) {
    // The halves turn as Llama's rotate_half: one nn.rotary, whose tables
    // hold each angle twice ([B, S, 1, rotary]).
    auto twice = [&](Value angles) -> Value {
      return ctx.create<nn::ConcatOp>({angles, angles},
                                      {ctx.i64Attr("axis", 3)});
    };
    Value cosTable = rotate ? twice(cos) : nullptr;
    Value sinTable = cosTable ? twice(sin) : nullptr;
    rotated = sinTable
                  ? ctx.create<nn::RotaryOp>({rotate, cosTable, sinTable},
                                             {ctx.boolAttr("inverse", false)})
                  : nullptr;
  } else {
    // Pairs of even and odd features: (cos x1 - sin x2, sin x1 + cos x2).
    Value pairs = rotate
                      ? ctx.reshape(rotate, {batch, sequence, xs[2], half, 2})
                      : nullptr;
    Value even = pairs ? ctx.sliceAlong(pairs, 4, 0, 1) : nullptr;
    Value odd = even ? ctx.sliceAlong(pairs, 4, 1, 1) : nullptr;
    Value x1 =
        odd ? ctx.reshape(even, {batch, sequence, xs[2], half}) : nullptr;
    Value x2 = x1 ? ctx.reshape(odd, {batch, sequence, xs[2], half}) : nullptr;
    Value cx1 = x2 ? ctx.create<nn::MulOp>({cos, x1}) : nullptr;
    Value sx2 = cx1 ? ctx.create<nn::MulOp>({sin, x2}) : nullptr;
    Value real = sx2 ? ctx.create<nn::SubOp>({cx1, sx2}) : nullptr;
    Value sx1 = real ? ctx.create<nn::MulOp>({sin, x1}) : nullptr;
    Value cx2 = sx1 ? ctx.create<nn::MulOp>({cos, x2}) : nullptr;
    Value imag = cx2 ? ctx.create<nn::AddOp>({sx1, cx2}) : nullptr;
    SmallVector<int64_t> pairShape = {batch, sequence, xs[2], half, 1};
    Value r = imag ? ctx.reshape(real, pairShape) : nullptr;
    Value i = r ? ctx.reshape(imag, pairShape) : nullptr;
    Value joined =
        i ? ctx.create<nn::ConcatOp>({r, i}, {ctx.i64Attr("axis", 4)})
          : nullptr;
    rotated = joined ? ctx.reshape(joined, {batch, sequence, xs[2], rotary})
                     : nullptr;
  }
  if (rotated && rotary < headSize) {
    Value rest = ctx.sliceAlong(x, 3, rotary, headSize - rotary);
    rotated = rest ? ctx.create<nn::ConcatOp>({rotated, rest},
                                              {ctx.i64Attr("axis", 3)})
                   : nullptr;
  }
  if (!rotated)
    return failure();
  if (shape.size() == 3)
    return produce(results, ctx.reshape(rotated, shape));
  return produce(results,
                 ctx.create<nn::TransposeOp>(
                     rotated, {ctx.i64ArrayAttr("perm", {0, 2, 1, 3})}));
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// [B, Hkv, T, D] with every head repeated `groups` times in place
/// ([h0, h0, h1, h1, ...]), for grouped-query attention.
Value repeatHeads(NodeContext &ctx, Value x, int64_t groups) {
  if (groups == 1)
    return x;
  ArrayRef<int64_t> s = cast<RankedTensorType>(x.getType()).getShape();
  Value one = ctx.reshape(x, {s[0], s[1], 1, s[2], s[3]});
  Value many =
      one ? ctx.create<nn::BroadcastToOp>(
                one,
                {ctx.i64ArrayAttr("shape", {s[0], s[1], groups, s[2], s[3]})})
          : nullptr;
  return many ? ctx.reshape(many, {s[0], s[1] * groups, s[2], s[3]}) : nullptr;
}

/// The additive bias of the scores [.., Sq, T]: 0 where a query may attend
/// a key and -inf where not, from is_causal (aligned bottom-right, `past`
/// keys before the block) and attn_mask (boolean: true attends; or float:
/// added). A mask narrower than T is padded with masked keys. Null when
/// neither is given.
FailureOr<Value> attentionBias(NodeContext &ctx, Type elem, int64_t sq,
                               int64_t t, int64_t past) {
  const double negInf = -std::numeric_limits<double>::infinity();
  Value bias;
  if (ctx.intAttr("is_causal", 0)) {
    // Key j is masked from query i when j > i + past.
    SmallVector<int64_t> rows, cols;
    for (int64_t i = 0; i < sq; ++i)
      rows.push_back(i + past);
    for (int64_t j = 0; j < t; ++j)
      cols.push_back(j);
    Value after = ctx.create<nn::GreaterOp>(
        {ctx.i64Constant({1, t}, cols), ctx.i64Constant({sq, 1}, rows)});
    bias = after ? ctx.create<nn::WhereOp>(
                       {after, ctx.scalar(elem, negInf), ctx.scalar(elem, 0.0)})
                 : nullptr;
    if (!bias)
      return failure();
  }
  Value mask = ctx.input(3);
  if (!mask)
    return bias;
  RankedTensorType m = ctx.inputType(3);
  bool boolean = m.getElementType().isInteger(1);
  if (!boolean && m.getElementType() != elem)
    return ctx.error() << "attn_mask is " << m
                       << ", expected booleans or elements of Q's type "
                       << elem;
  if (m.getRank() == 0 || m.getRank() > 4)
    return ctx.error() << "attn_mask must have rank 1 to 4, got " << m;
  Value additive = boolean
                       ? ctx.create<nn::WhereOp>({mask, ctx.scalar(elem, 0.0),
                                                  ctx.scalar(elem, negInf)})
                       : mask;
  if (!additive)
    return failure();
  int64_t width = m.getShape().back();
  if (width != 1 && width < t) {
    SmallVector<int64_t> padShape(m.getShape());
    padShape.back() = t - width;
    Value pad = ctx.create<nn::BroadcastToOp>(
        ctx.scalar(elem, negInf), {ctx.i64ArrayAttr("shape", padShape)});
    additive =
        pad ? ctx.create<nn::ConcatOp>({additive, pad},
                                       {ctx.i64Attr("axis", m.getRank() - 1)})
            : nullptr;
    if (!additive)
      return failure();
  } else if (width != 1 && width != t) {
    return ctx.error() << "attn_mask " << m << " is wider than the " << t
                       << " keys (past and present)";
  }
  if (!bias)
    return additive;
  if (Value sum = ctx.create<nn::AddOp>({bias, additive}))
    return sum;
  return failure();
}

LogicalResult convertAttention(NodeContext &ctx,
                               SmallVectorImpl<Value> &results) {
  RankedTensorType qType = ctx.inputType(0);
  int64_t rank = qType.getRank();
  for (unsigned i : {1u, 2u})
    if (ctx.rank(i) != rank)
      return ctx.error() << "Q, K and V must have the same rank, got " << qType
                         << ", " << ctx.inputType(1) << " and "
                         << ctx.inputType(2);
  Type elem = qType.getElementType();
  if (!isa<FloatType>(elem))
    return ctx.error() << "Q must hold floats, got " << qType;
  Value q = ctx.input(0), k = ctx.input(1), v = ctx.input(2);
  if (rank == 3) {
    if (!ctx.hasAttr("q_num_heads") || !ctx.hasAttr("kv_num_heads"))
      return ctx.error() << "3-D Q, K and V need q_num_heads and kv_num_heads";
    int64_t qHeads = ctx.intAttr("q_num_heads", 0);
    int64_t kvHeads = ctx.intAttr("kv_num_heads", 0);
    if (!(q = splitHeads(ctx, q, qHeads, "Q")) ||
        !(k = splitHeads(ctx, k, kvHeads, "K")) ||
        !(v = splitHeads(ctx, v, kvHeads, "V")))
      return failure();
  } else if (rank != 4) {
    return ctx.error() << "Q must be 3-D [batch, sequence, hidden] or 4-D "
                          "[batch, heads, sequence, head_size], got "
                       << qType;
  }
  ArrayRef<int64_t> qs = cast<RankedTensorType>(q.getType()).getShape();
  ArrayRef<int64_t> ks = cast<RankedTensorType>(k.getType()).getShape();
  ArrayRef<int64_t> vs = cast<RankedTensorType>(v.getType()).getShape();
  if (ks[0] != qs[0] || vs[0] != qs[0] || ks[1] != vs[1] || ks[2] != vs[2] ||
      ks[3] != qs[3])
    return ctx.error() << "Q " << q.getType() << ", K " << k.getType()
                       << " and V " << v.getType()
                       << " (as [batch, heads, sequence, size]) do not agree";
  if (ks[1] <= 0 || qs[1] % ks[1] != 0)
    return ctx.error() << "the " << qs[1]
                       << " query heads are not a multiple of the " << ks[1]
                       << " key/value heads";

  // The cache: past keys and values before the new ones.
  Value pastKey = ctx.input(4), pastValue = ctx.input(5);
  if (bool(pastKey) != bool(pastValue))
    return ctx.error() << "past_key and past_value must be given together";
  int64_t past = 0;
  if (pastKey) {
    for (unsigned i : {4u, 5u})
      if (ctx.rank(i) != 4)
        return ctx.error() << (i == 4 ? "past_key" : "past_value")
                           << " must be 4-D [batch, kv_heads, past, size], got "
                           << ctx.inputType(i);
    past = ctx.inputType(4).getDimSize(2);
    if (!(k = ctx.create<nn::ConcatOp>({pastKey, k},
                                       {ctx.i64Attr("axis", 2)})) ||
        !(v = ctx.create<nn::ConcatOp>({pastValue, v},
                                       {ctx.i64Attr("axis", 2)})))
      return failure();
  }
  Value presentKey = k, presentValue = v;
  int64_t sq = qs[2], t = cast<RankedTensorType>(k.getType()).getDimSize(2);

  double scale = ctx.floatAttr("scale", 1.0 / std::sqrt(double(qs[3])));
  if (!(scale > 0))
    return ctx.error() << "scale must be positive, got " << scale;
  Value root = ctx.scalar(elem, std::sqrt(scale));
  Value qScaled = ctx.create<nn::MulOp>({q, root});
  // K scaled before its heads are repeated: fewer products, and the repeat
  // right before the transpose, where ztc-fuse-attention reads through it.
  Value kScaled = ctx.create<nn::MulOp>({k, root});
  Value kRepeated =
      kScaled ? repeatHeads(ctx, kScaled, qs[1] / ks[1]) : nullptr;
  Value vRepeated = kRepeated ? repeatHeads(ctx, v, qs[1] / ks[1]) : nullptr;
  Value kT = vRepeated
                 ? ctx.create<nn::TransposeOp>(
                       kRepeated, {ctx.i64ArrayAttr("perm", {0, 1, 3, 2})})
                 : nullptr;
  Value scores =
      kT && qScaled ? ctx.create<nn::MatMulOp>({qScaled, kT}) : nullptr;
  if (!scores)
    return failure();
  double softcap = ctx.floatAttr("softcap", 0.0);
  if (softcap > 0) {
    Value c = ctx.scalar(elem, softcap);
    Value shrunk = ctx.create<nn::DivOp>({scores, c});
    Value bent = shrunk ? ctx.create<nn::TanhOp>(shrunk) : nullptr;
    if (!bent || !(scores = ctx.create<nn::MulOp>({bent, c})))
      return failure();
  }
  Value capped = scores;

  FailureOr<Value> bias = attentionBias(ctx, elem, sq, t, past);
  if (failed(bias))
    return failure();
  // The scores with the mask added (qk_matmul_output_mode 2).
  Value withBias = scores;
  if (*bias && !(withBias = ctx.create<nn::AddOp>({scores, *bias})))
    return failure();
  if (cast<RankedTensorType>(withBias.getType()).getRank() != 4)
    return ctx.error() << "attn_mask does not broadcast to the scores "
                       << scores.getType();
  // A query row whose keys are all masked: its bias row is made 0 so that
  // the softmax (and its gradient) stays finite, and its probabilities are
  // set to 0 after.
  Value rowMasked;
  if (*bias && ctx.input(3)) {
    Value top = ctx.create<nn::ReduceMaxOp>(
        *bias,
        {ctx.i64ArrayAttr(
             "axes", {cast<RankedTensorType>((*bias).getType()).getRank() - 1}),
         ctx.boolAttr("keepdims", true)});
    rowMasked =
        top ? ctx.create<nn::EqualOp>(
                  {top,
                   ctx.scalar(elem, -std::numeric_limits<double>::infinity())})
            : nullptr;
    Value finite =
        rowMasked
            ? ctx.create<nn::WhereOp>({rowMasked, ctx.scalar(elem, 0.0), *bias})
            : nullptr;
    if (!finite || !(scores = ctx.create<nn::AddOp>({scores, finite})))
      return failure();
  } else {
    scores = withBias;
  }

  Type softmaxType = elem;
  if (ctx.hasAttr("softmax_precision")) {
    int64_t precision = ctx.intAttr("softmax_precision", 1);
    softmaxType = onnxElementType(ctx.b.getContext(), precision);
    if (!softmaxType || !isa<FloatType>(softmaxType))
      return ctx.error() << "softmax_precision " << precision
                         << " is not a floating-point type ztc computes in";
  }
  Value probs = ctx.castTo(scores, softmaxType);
  probs = probs ? ctx.create<nn::SoftmaxOp>(probs, {ctx.i64Attr("axis", 3)})
                : nullptr;
  probs = probs ? ctx.castTo(probs, elem) : nullptr;
  if (probs && rowMasked)
    probs = ctx.create<nn::WhereOp>({rowMasked, ctx.scalar(elem, 0.0), probs});
  Value y = probs ? ctx.create<nn::MatMulOp>({probs, vRepeated}) : nullptr;
  if (y && rank == 3)
    y = mergeHeads(ctx, y);
  if (!y)
    return failure();
  results.push_back(y);
  results.push_back(presentKey);
  results.push_back(presentValue);
  // The scores as qk_matmul_output_mode picks them: 0 and 1 after softcap,
  // 2 with the mask added, 3 the probabilities.
  int64_t mode = ctx.intAttr("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return ctx.error() << "qk_matmul_output_mode must be 0 to 3, got " << mode;
  results.push_back(mode <= 1 ? capped : mode == 2 ? withBias : probs);
  return success();
}

} // namespace

void onnx_to_nn::addAttentionConverters(ConverterRegistry &registry) {
  registry.addSince("RMSNormalization", 23, convertRMSNorm);
  registry.addSince("RotaryEmbedding", 23, convertRotaryEmbedding);
  registry.addSince("Attention", 23, convertAttention);
}
