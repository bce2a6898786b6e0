// RUN: ztc-opt %s --ztc-fuse-attention | FileCheck %s

// ztc-fuse-attention: softmax(q kᵀ * scale + mask) v as one nn.attention,
// only when the scores and probabilities have no other reader and the
// scale and mask are constants. Each rewrite has its positive case, then
// the negative ones.

// GPT's attention as imported (examples/onnx/make_gpt.py): kᵀ is one
// transpose of the heads' reshape, the scale a multiplication, the causal
// mask a where over the constant upper triangle with -inf. The transpose
// that made kᵀ becomes the one that makes k.
// CHECK-LABEL: func.func @causal
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x2x4x8xf32>, %[[KR:[^:]+]]: tensor<2x4x2x8xf32>, %[[V:[^:]+]]: tensor<2x2x4x8xf32>)
// CHECK-NOT: nn.transpose
// CHECK: %[[K:.+]] = nn.transpose %[[KR]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
// CHECK-NEXT: %[[O:.+]] = nn.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @causal(%q: tensor<2x2x4x8xf32>, %kr: tensor<2x4x2x8xf32>,
                  %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %scale = arith.constant dense<2.500000e-01> : tensor<f32>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %future = arith.constant dense<[[[[false, true, true, true],
                                    [false, false, true, true],
                                    [false, false, false, true],
                                    [false, false, false, false]]]]>
      : tensor<1x1x4x4xi1>
  %kt = nn.transpose %kr {perm = array<i64: 0, 2, 3, 1>}
      : tensor<2x4x2x8xf32> -> tensor<2x2x8x4xf32>
  %t = nn.matmul %q, %kt : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>
      -> tensor<2x2x4x4xf32>
  %s = nn.mul %t, %scale : tensor<2x2x4x4xf32>, tensor<f32>
      -> tensor<2x2x4x4xf32>
  %m = nn.where %future, %ninf, %s
      : tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>
      -> tensor<2x2x4x4xf32>
  %p = nn.softmax %m {axis = 3 : i64}
      : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %o = nn.matmul %p, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>
      -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// The keep-mask form, where(past, s, fill), with the float minimum Hugging
// Face fills with, and no scale at all (1).
// CHECK-LABEL: func.func @causal_keep_mask
// CHECK: nn.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 1.000000e+00 : f64}
// CHECK-NOT: nn.softmax
func.func @causal_keep_mask(%q: tensor<3x3x4xf32>, %k: tensor<3x3x4xf32>,
                            %v: tensor<3x3x4xf32>) -> tensor<3x3x4xf32> {
  %min = arith.constant dense<-3.40282347E+38> : tensor<f32>
  %past = arith.constant dense<[[[true, false, false],
                                  [true, true, false],
                                  [true, true, true]]]> : tensor<1x3x3xi1>
  %kt = nn.transpose %k {perm = array<i64: 0, 2, 1>}
      : tensor<3x3x4xf32> -> tensor<3x4x3xf32>
  %t = nn.matmul %q, %kt : tensor<3x3x4xf32>, tensor<3x4x3xf32>
      -> tensor<3x3x3xf32>
  %m = nn.where %past, %t, %min
      : tensor<1x3x3xi1>, tensor<3x3x3xf32>, tensor<f32> -> tensor<3x3x3xf32>
  %p = nn.softmax %m {axis = 2 : i64} : tensor<3x3x3xf32> -> tensor<3x3x3xf32>
  %o = nn.matmul %p, %v : tensor<3x3x3xf32>, tensor<3x3x4xf32>
      -> tensor<3x3x4xf32>
  return %o : tensor<3x3x4xf32>
}

// A constant additive mask and a division by a constant; kᵀ is not a
// transpose, so a new one makes k.
// CHECK-LABEL: func.func @additive_mask
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x3x4xf32>, %[[KT:[^:]+]]: tensor<2x4x5xf32>, %[[V:[^:]+]]: tensor<2x5x6xf32>)
// CHECK: %[[MASK:.+]] = arith.constant dense<{{.+}}> : tensor<2x1x5xf32>
// CHECK: %[[K:.+]] = nn.transpose %[[KT]] {perm = array<i64: 0, 2, 1>}
// CHECK-NEXT: nn.attention %[[Q]], %[[K]], %[[V]], %[[MASK]] {scale = 5.000000e-01 : f64} : tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<2x1x5xf32> -> tensor<2x3x6xf32>
func.func @additive_mask(%q: tensor<2x3x4xf32>, %kt: tensor<2x4x5xf32>,
                         %v: tensor<2x5x6xf32>) -> tensor<2x3x6xf32> {
  %two = arith.constant dense<2.0> : tensor<f32>
  %mask = arith.constant dense<[[[0.0, 0.0, 0.0, -1.0e9, -1.0e9]],
                                [[0.0, 0.0, 0.0, 0.0, -1.0e9]]]>
      : tensor<2x1x5xf32>
  %t = nn.matmul %q, %kt : tensor<2x3x4xf32>, tensor<2x4x5xf32>
      -> tensor<2x3x5xf32>
  %s = nn.div %t, %two : tensor<2x3x5xf32>, tensor<f32> -> tensor<2x3x5xf32>
  %m = nn.add %mask, %s : tensor<2x1x5xf32>, tensor<2x3x5xf32>
      -> tensor<2x3x5xf32>
  %p = nn.softmax %m {axis = 2 : i64} : tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %o = nn.matmul %p, %v : tensor<2x3x5xf32>, tensor<2x5x6xf32>
      -> tensor<2x3x6xf32>
  return %o : tensor<2x3x6xf32>
}

// Gemma 2's capped scores between the scale and the mask, c * tanh(s / c)
// (attn_logit_softcapping): the fused op's softcap.
// CHECK-LABEL: func.func @softcap
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x3x4xf32>, %[[KT:[^:]+]]: tensor<2x4x5xf32>, %[[V:[^:]+]]: tensor<2x5x6xf32>)
// CHECK-NOT: nn.tanh
// CHECK: nn.attention %[[Q]], %{{.+}}, %[[V]], %{{.+}} {scale = 2.500000e-01 : f64, softcap = 5.000000e+01 : f64}
// CHECK-NOT: nn.tanh
func.func @softcap(%q: tensor<2x3x4xf32>, %kt: tensor<2x4x5xf32>,
                   %v: tensor<2x5x6xf32>) -> tensor<2x3x6xf32> {
  %scale = arith.constant dense<0.25> : tensor<f32>
  %cap = arith.constant dense<50.0> : tensor<f32>
  %mask = arith.constant dense<[[[0.0, 0.0, 0.0, -1.0e9, -1.0e9]],
                                [[0.0, 0.0, 0.0, 0.0, -1.0e9]]]>
      : tensor<2x1x5xf32>
  %t = nn.matmul %q, %kt : tensor<2x3x4xf32>, tensor<2x4x5xf32>
      -> tensor<2x3x5xf32>
  %s = nn.mul %t, %scale : tensor<2x3x5xf32>, tensor<f32> -> tensor<2x3x5xf32>
  %d = nn.div %s, %cap : tensor<2x3x5xf32>, tensor<f32> -> tensor<2x3x5xf32>
  %h = nn.tanh %d : tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %c = nn.mul %h, %cap : tensor<2x3x5xf32>, tensor<f32> -> tensor<2x3x5xf32>
  %m = nn.add %c, %mask : tensor<2x3x5xf32>, tensor<2x1x5xf32>
      -> tensor<2x3x5xf32>
  %p = nn.softmax %m {axis = 2 : i64} : tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %o = nn.matmul %p, %v : tensor<2x3x5xf32>, tensor<2x5x6xf32>
      -> tensor<2x3x6xf32>
  return %o : tensor<2x3x6xf32>
}

// The cap's division as a product by 1 / c, constants on the left, and no
// mask.
// CHECK-LABEL: func.func @softcap_reciprocal
// CHECK: nn.attention %{{.+}}, %{{.+}}, %{{.+}} {scale = 1.000000e+00 : f64, softcap = 2.000000e+00 : f64}
// CHECK-NOT: nn.tanh
func.func @softcap_reciprocal(%q: tensor<2x3x4xf32>, %kt: tensor<2x4x5xf32>,
                              %v: tensor<2x5x6xf32>) -> tensor<2x3x6xf32> {
  %half = arith.constant dense<0.5> : tensor<f32>
  %cap = arith.constant dense<2.0> : tensor<f32>
  %t = nn.matmul %q, %kt : tensor<2x3x4xf32>, tensor<2x4x5xf32>
      -> tensor<2x3x5xf32>
  %d = nn.mul %half, %t : tensor<f32>, tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %h = nn.tanh %d : tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %c = nn.mul %cap, %h : tensor<f32>, tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %p = nn.softmax %c {axis = 2 : i64} : tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %o = nn.matmul %p, %v : tensor<2x3x5xf32>, tensor<2x5x6xf32>
      -> tensor<2x3x6xf32>
  return %o : tensor<2x3x6xf32>
}

// Negative: tanh(s / 2) * 3 is no cap (two constants), and a cap whose
// tanh is read elsewhere stays: nothing fuses.
// CHECK-LABEL: func.func @softcap_kept
// CHECK-NOT: nn.attention
// CHECK: return
func.func @softcap_kept(%q: tensor<2x3x4xf32>, %kt: tensor<2x4x5xf32>,
                        %v: tensor<2x5x6xf32>)
    -> (tensor<2x3x6xf32>, tensor<2x3x6xf32>, tensor<2x3x5xf32>) {
  %two = arith.constant dense<2.0> : tensor<f32>
  %three = arith.constant dense<3.0> : tensor<f32>
  %t = nn.matmul %q, %kt : tensor<2x3x4xf32>, tensor<2x4x5xf32>
      -> tensor<2x3x5xf32>
  %d = nn.div %t, %two : tensor<2x3x5xf32>, tensor<f32> -> tensor<2x3x5xf32>
  %h = nn.tanh %d : tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %c = nn.mul %h, %three : tensor<2x3x5xf32>, tensor<f32> -> tensor<2x3x5xf32>
  %p = nn.softmax %c {axis = 2 : i64} : tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %o = nn.matmul %p, %v : tensor<2x3x5xf32>, tensor<2x5x6xf32>
      -> tensor<2x3x6xf32>
  %t2 = nn.matmul %q, %kt : tensor<2x3x4xf32>, tensor<2x4x5xf32>
      -> tensor<2x3x5xf32>
  %d2 = nn.div %t2, %two : tensor<2x3x5xf32>, tensor<f32> -> tensor<2x3x5xf32>
  %h2 = nn.tanh %d2 : tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %c2 = nn.mul %h2, %two : tensor<2x3x5xf32>, tensor<f32> -> tensor<2x3x5xf32>
  %p2 = nn.softmax %c2 {axis = 2 : i64} : tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %o2 = nn.matmul %p2, %v : tensor<2x3x5xf32>, tensor<2x5x6xf32>
      -> tensor<2x3x6xf32>
  return %o, %o2, %h2 : tensor<2x3x6xf32>, tensor<2x3x6xf32>, tensor<2x3x5xf32>
}

// Negative: the probabilities are read by another op (returned), which
// would need them materialized.
// CHECK-LABEL: func.func @probabilities_read
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @probabilities_read(%q: tensor<3x4xf32>, %kt: tensor<4x5xf32>,
                              %v: tensor<5x4xf32>)
    -> (tensor<3x4xf32>, tensor<3x5xf32>) {
  %t = nn.matmul %q, %kt : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  %p = nn.softmax %t {axis = 1 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
  %o = nn.matmul %p, %v : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
  return %o, %p : tensor<3x4xf32>, tensor<3x5xf32>
}

// Negative: the scores are read by another op.
// CHECK-LABEL: func.func @scores_read
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @scores_read(%q: tensor<3x4xf32>, %kt: tensor<4x5xf32>,
                       %v: tensor<5x4xf32>)
    -> (tensor<3x4xf32>, tensor<3x5xf32>) {
  %half = arith.constant dense<5.000000e-01> : tensor<f32>
  %t = nn.matmul %q, %kt : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  %s = nn.mul %t, %half : tensor<3x5xf32>, tensor<f32> -> tensor<3x5xf32>
  %p = nn.softmax %s {axis = 1 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
  %o = nn.matmul %p, %v : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
  return %o, %t : tensor<3x4xf32>, tensor<3x5xf32>
}

// Negative: a softmax over the queries, not the keys.
// CHECK-LABEL: func.func @softmax_axis
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @softmax_axis(%q: tensor<2x3x4xf32>, %kt: tensor<2x4x3xf32>,
                        %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %t = nn.matmul %q, %kt : tensor<2x3x4xf32>, tensor<2x4x3xf32>
      -> tensor<2x3x3xf32>
  %p = nn.softmax %t {axis = 1 : i64} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x4xf32>
      -> tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// Negative: a scale that is not a constant.
// CHECK-LABEL: func.func @scale_not_constant
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @scale_not_constant(%q: tensor<3x4xf32>, %kt: tensor<4x5xf32>,
                              %v: tensor<5x4xf32>, %scale: tensor<f32>)
    -> tensor<3x4xf32> {
  %t = nn.matmul %q, %kt : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  %s = nn.mul %t, %scale : tensor<3x5xf32>, tensor<f32> -> tensor<3x5xf32>
  %p = nn.softmax %s {axis = 1 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
  %o = nn.matmul %p, %v : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
  return %o : tensor<3x4xf32>
}

// Negative: dropout with p > 0 between the softmax and the product (the
// kept probabilities scaled by 1 / (1 - p)).
// CHECK-LABEL: func.func @dropout
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @dropout(%q: tensor<3x4xf32>, %kt: tensor<4x5xf32>,
                   %v: tensor<5x4xf32>, %keep: tensor<3x5xf32>)
    -> tensor<3x4xf32> {
  %inv = arith.constant dense<1.25> : tensor<f32>
  %t = nn.matmul %q, %kt : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  %p = nn.softmax %t {axis = 1 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
  %kept = nn.mul %p, %keep : tensor<3x5xf32>, tensor<3x5xf32> -> tensor<3x5xf32>
  %d = nn.mul %kept, %inv : tensor<3x5xf32>, tensor<f32> -> tensor<3x5xf32>
  %o = nn.matmul %d, %v : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
  return %o : tensor<3x4xf32>
}

// Negative: an additive mask that is not a constant (it could need a
// gradient, which nn.attention does not give).
// CHECK-LABEL: func.func @mask_not_constant
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @mask_not_constant(%q: tensor<3x4xf32>, %kt: tensor<4x5xf32>,
                             %v: tensor<5x4xf32>, %mask: tensor<3x5xf32>)
    -> tensor<3x4xf32> {
  %t = nn.matmul %q, %kt : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  %m = nn.add %t, %mask : tensor<3x5xf32>, tensor<3x5xf32> -> tensor<3x5xf32>
  %p = nn.softmax %m {axis = 1 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
  %o = nn.matmul %p, %v : tensor<3x5xf32>, tensor<5x4xf32> -> tensor<3x4xf32>
  return %o : tensor<3x4xf32>
}

// Negative: a where over a constant that is not the causal triangle.
// CHECK-LABEL: func.func @where_not_causal
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @where_not_causal(%q: tensor<2x4xf32>, %kt: tensor<4x2xf32>,
                            %v: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %cond = arith.constant dense<[[false, true], [true, false]]>
      : tensor<2x2xi1>
  %t = nn.matmul %q, %kt : tensor<2x4xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
  %m = nn.where %cond, %ninf, %t
      : tensor<2x2xi1>, tensor<f32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %p = nn.softmax %m {axis = 1 : i64} : tensor<2x2xf32> -> tensor<2x2xf32>
  %o = nn.matmul %p, %v : tensor<2x2xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  return %o : tensor<2x4xf32>
}

// Llama as PyTorch's dynamo exporter writes it (test/fixtures/modern/llama):
// kᵀ merges the batch and heads, swaps the last two dimensions and splits
// them again; the scale is split over q and kᵀ (each times D^-1/4, here
// 0.5 twice); the mask is a constant added to the scores; the
// probabilities pass a NaN guard, where(not(equal(p, p)), 0, p). One
// nn.attention of q and k as they are, scale 0.25, and nothing of the
// exporter's transposes, reshapes or guard left.
// CHECK-LABEL: func.func @llama
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x2x4x8xf32>, %[[K:[^:]+]]: tensor<2x2x4x8xf32>, %[[V:[^:]+]]: tensor<2x2x4x8xf32>)
// CHECK: %[[MASK:.+]] = arith.constant dense<{{.+}}> : tensor<2x1x4x4xf32>
// CHECK-NOT: nn.
// CHECK: %[[O:.+]] = nn.attention %[[Q]], %[[K]], %[[V]], %[[MASK]] {scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @llama(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>,
                 %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %half = arith.constant dense<5.000000e-01> : tensor<f32>
  %zero = arith.constant dense<0.000000e+00> : tensor<f32>
  %mask = arith.constant dense<-3.40282347E+38> : tensor<2x1x4x4xf32>
  %km = nn.reshape %k : tensor<2x2x4x8xf32> -> tensor<4x4x8xf32>
  %kmt = nn.transpose %km {perm = array<i64: 0, 2, 1>}
      : tensor<4x4x8xf32> -> tensor<4x8x4xf32>
  %kt = nn.reshape %kmt : tensor<4x8x4xf32> -> tensor<2x2x8x4xf32>
  %qs = nn.mul %q, %half : tensor<2x2x4x8xf32>, tensor<f32>
      -> tensor<2x2x4x8xf32>
  %kts = nn.mul %kt, %half : tensor<2x2x8x4xf32>, tensor<f32>
      -> tensor<2x2x8x4xf32>
  %t = nn.matmul %qs, %kts : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>
      -> tensor<2x2x4x4xf32>
  %m = nn.add %t, %mask : tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>
      -> tensor<2x2x4x4xf32>
  %p = nn.softmax %m {axis = 3 : i64}
      : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %same = nn.equal %p, %p : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
      -> tensor<2x2x4x4xi1>
  %nan = nn.not %same : tensor<2x2x4x4xi1> -> tensor<2x2x4x4xi1>
  %g = nn.where %nan, %zero, %p
      : tensor<2x2x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>
      -> tensor<2x2x4x4xf32>
  %o = nn.matmul %g, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>
      -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// Negative: the guard replaces NaN with 1, not 0: not the exporter's
// guard, and not what nn.attention computes.
// CHECK-LABEL: func.func @guard_fills_one
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @guard_fills_one(%q: tensor<2x2x4x8xf32>, %kt: tensor<2x2x8x4xf32>,
                           %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %one = arith.constant dense<1.000000e+00> : tensor<f32>
  %t = nn.matmul %q, %kt : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>
      -> tensor<2x2x4x4xf32>
  %p = nn.softmax %t {axis = 3 : i64}
      : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %same = nn.equal %p, %p : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
      -> tensor<2x2x4x4xi1>
  %nan = nn.not %same : tensor<2x2x4x4xi1> -> tensor<2x2x4x4xi1>
  %g = nn.where %nan, %one, %p
      : tensor<2x2x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>
      -> tensor<2x2x4x4xf32>
  %o = nn.matmul %g, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>
      -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// Negative: the guard's test is returned too, so the probabilities are
// read beyond the guard.
// CHECK-LABEL: func.func @guard_read_elsewhere
// CHECK-NOT: nn.attention
// CHECK: nn.softmax
func.func @guard_read_elsewhere(%q: tensor<2x2x4x8xf32>,
                                %kt: tensor<2x2x8x4xf32>,
                                %v: tensor<2x2x4x8xf32>)
    -> (tensor<2x2x4x8xf32>, tensor<2x2x4x4xi1>) {
  %zero = arith.constant dense<0.000000e+00> : tensor<f32>
  %t = nn.matmul %q, %kt : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>
      -> tensor<2x2x4x4xf32>
  %p = nn.softmax %t {axis = 3 : i64}
      : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %same = nn.equal %p, %p : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
      -> tensor<2x2x4x4xi1>
  %nan = nn.not %same : tensor<2x2x4x4xi1> -> tensor<2x2x4x4xi1>
  %g = nn.where %nan, %zero, %p
      : tensor<2x2x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>
      -> tensor<2x2x4x4xf32>
  %o = nn.matmul %g, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>
      -> tensor<2x2x4x8xf32>
  return %o, %nan : tensor<2x2x4x8xf32>, tensor<2x2x4x4xi1>
}

// Grouped-query heads (Llama's repeat_kv): k and v of 2 heads, each
// repeated twice in place for the 4 query heads by a reshape, a broadcast
// and a reshape. The fused op reads the 2 heads; the repeats go.
// CHECK-LABEL: func.func @grouped_query
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<1x4x3x8xf32>, %[[K:[^:]+]]: tensor<1x2x3x8xf32>, %[[V:[^:]+]]: tensor<1x2x3x8xf32>)
// CHECK-NOT: nn.broadcast_to
// CHECK: %[[O:.+]] = nn.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f64} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x4x3x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @grouped_query(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>,
                         %v: tensor<1x2x3x8xf32>) -> tensor<1x4x3x8xf32> {
  %scale = arith.constant dense<2.500000e-01> : tensor<f32>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %future = arith.constant dense<[[[[false, true, true],
                                    [false, false, true],
                                    [false, false, false]]]]> : tensor<1x1x3x3xi1>
  %k1 = nn.reshape %k : tensor<1x2x3x8xf32> -> tensor<1x2x1x3x8xf32>
  %k2 = nn.broadcast_to %k1 {shape = array<i64: 1, 2, 2, 3, 8>} : tensor<1x2x1x3x8xf32> -> tensor<1x2x2x3x8xf32>
  %kr = nn.reshape %k2 : tensor<1x2x2x3x8xf32> -> tensor<1x4x3x8xf32>
  %v1 = nn.reshape %v : tensor<1x2x3x8xf32> -> tensor<1x2x1x3x8xf32>
  %v2 = nn.broadcast_to %v1 {shape = array<i64: 1, 2, 2, 3, 8>} : tensor<1x2x1x3x8xf32> -> tensor<1x2x2x3x8xf32>
  %vr = nn.reshape %v2 : tensor<1x2x2x3x8xf32> -> tensor<1x4x3x8xf32>
  %kt = nn.transpose %kr {perm = array<i64: 0, 1, 3, 2>} : tensor<1x4x3x8xf32> -> tensor<1x4x8x3xf32>
  %t = nn.matmul %q, %kt : tensor<1x4x3x8xf32>, tensor<1x4x8x3xf32> -> tensor<1x4x3x3xf32>
  %s = nn.mul %t, %scale : tensor<1x4x3x3xf32>, tensor<f32> -> tensor<1x4x3x3xf32>
  %m = nn.where %future, %ninf, %s : tensor<1x1x3x3xi1>, tensor<f32>, tensor<1x4x3x3xf32> -> tensor<1x4x3x3xf32>
  %p = nn.softmax %m {axis = 3 : i64} : tensor<1x4x3x3xf32> -> tensor<1x4x3x3xf32>
  %o = nn.matmul %p, %vr : tensor<1x4x3x3xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  return %o : tensor<1x4x3x8xf32>
}

// The repeats stay, and the fused op reads the repeated heads, when only
// k is repeated (v has its 4 heads), and when k and v repeat different
// heads counts (k 2 heads twice, v 1 head four times).
// CHECK-LABEL: func.func @grouped_query_kept
// CHECK: nn.attention %{{.+}}, %{{.+}}, %{{.+}} {scale = 2.500000e-01 : f64} : tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
// CHECK: nn.attention %{{.+}}, %{{.+}}, %{{.+}} {scale = 2.500000e-01 : f64} : tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
func.func @grouped_query_kept(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>,
                              %v: tensor<1x4x3x8xf32>, %w: tensor<1x1x3x8xf32>)
    -> (tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>) {
  %scale = arith.constant dense<2.500000e-01> : tensor<f32>
  %k1 = nn.reshape %k : tensor<1x2x3x8xf32> -> tensor<1x2x1x3x8xf32>
  %k2 = nn.broadcast_to %k1 {shape = array<i64: 1, 2, 2, 3, 8>} : tensor<1x2x1x3x8xf32> -> tensor<1x2x2x3x8xf32>
  %kr = nn.reshape %k2 : tensor<1x2x2x3x8xf32> -> tensor<1x4x3x8xf32>
  %kt = nn.transpose %kr {perm = array<i64: 0, 1, 3, 2>} : tensor<1x4x3x8xf32> -> tensor<1x4x8x3xf32>
  %t = nn.matmul %q, %kt : tensor<1x4x3x8xf32>, tensor<1x4x8x3xf32> -> tensor<1x4x3x3xf32>
  %s = nn.mul %t, %scale : tensor<1x4x3x3xf32>, tensor<f32> -> tensor<1x4x3x3xf32>
  %p = nn.softmax %s {axis = 3 : i64} : tensor<1x4x3x3xf32> -> tensor<1x4x3x3xf32>
  %a = nn.matmul %p, %v : tensor<1x4x3x3xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  %w1 = nn.reshape %w : tensor<1x1x3x8xf32> -> tensor<1x1x1x3x8xf32>
  %w2 = nn.broadcast_to %w1 {shape = array<i64: 1, 1, 4, 3, 8>} : tensor<1x1x1x3x8xf32> -> tensor<1x1x4x3x8xf32>
  %wr = nn.reshape %w2 : tensor<1x1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  %kt2 = nn.transpose %kr {perm = array<i64: 0, 1, 3, 2>} : tensor<1x4x3x8xf32> -> tensor<1x4x8x3xf32>
  %t2 = nn.matmul %q, %kt2 : tensor<1x4x3x8xf32>, tensor<1x4x8x3xf32> -> tensor<1x4x3x3xf32>
  %s2 = nn.mul %t2, %scale : tensor<1x4x3x3xf32>, tensor<f32> -> tensor<1x4x3x3xf32>
  %p2 = nn.softmax %s2 {axis = 3 : i64} : tensor<1x4x3x3xf32> -> tensor<1x4x3x3xf32>
  %b = nn.matmul %p2, %wr : tensor<1x4x3x3xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  return %a, %b : tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>
}

// The ONNX Attention conversion of keys an exporter already repeated: q
// and the repeated k each scaled by sqrt(scale). k's factor joins the
// scale (0.5 * 0.5) and the fused op reads the 2 heads; the factor, the
// transpose and the repeats go. A factor that is not a constant stays,
// and so do the repeats.
// CHECK-LABEL: func.func @grouped_query_scaled_keys
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<1x4x3x8xf32>, %[[K:[^:]+]]: tensor<1x2x3x8xf32>, %[[V:[^:]+]]: tensor<1x2x3x8xf32>, %[[F:[^:]+]]: tensor<f32>)
// CHECK: %[[A:.+]] = nn.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f64} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x4x3x8xf32>
// CHECK: %[[KS:.+]] = nn.mul %{{.+}}, %[[F]]
// CHECK: nn.attention %{{.+}}, %[[KS]], %{{.+}} {scale = 5.000000e-01 : f64} : tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
func.func @grouped_query_scaled_keys(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>,
                                     %v: tensor<1x2x3x8xf32>, %f: tensor<f32>)
    -> (tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>) {
  %half = arith.constant dense<5.000000e-01> : tensor<f32>
  %k1 = nn.reshape %k : tensor<1x2x3x8xf32> -> tensor<1x2x1x3x8xf32>
  %k2 = nn.broadcast_to %k1 {shape = array<i64: 1, 2, 2, 3, 8>} : tensor<1x2x1x3x8xf32> -> tensor<1x2x2x3x8xf32>
  %kr = nn.reshape %k2 : tensor<1x2x2x3x8xf32> -> tensor<1x4x3x8xf32>
  %v1 = nn.reshape %v : tensor<1x2x3x8xf32> -> tensor<1x2x1x3x8xf32>
  %v2 = nn.broadcast_to %v1 {shape = array<i64: 1, 2, 2, 3, 8>} : tensor<1x2x1x3x8xf32> -> tensor<1x2x2x3x8xf32>
  %vr = nn.reshape %v2 : tensor<1x2x2x3x8xf32> -> tensor<1x4x3x8xf32>
  %qs = nn.mul %q, %half : tensor<1x4x3x8xf32>, tensor<f32> -> tensor<1x4x3x8xf32>
  %ks = nn.mul %kr, %half : tensor<1x4x3x8xf32>, tensor<f32> -> tensor<1x4x3x8xf32>
  %kt = nn.transpose %ks {perm = array<i64: 0, 1, 3, 2>} : tensor<1x4x3x8xf32> -> tensor<1x4x8x3xf32>
  %t = nn.matmul %qs, %kt : tensor<1x4x3x8xf32>, tensor<1x4x8x3xf32> -> tensor<1x4x3x3xf32>
  %p = nn.softmax %t {axis = 3 : i64} : tensor<1x4x3x3xf32> -> tensor<1x4x3x3xf32>
  %a = nn.matmul %p, %vr : tensor<1x4x3x3xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  %qs2 = nn.mul %q, %half : tensor<1x4x3x8xf32>, tensor<f32> -> tensor<1x4x3x8xf32>
  %ks2 = nn.mul %kr, %f : tensor<1x4x3x8xf32>, tensor<f32> -> tensor<1x4x3x8xf32>
  %kt2 = nn.transpose %ks2 {perm = array<i64: 0, 1, 3, 2>} : tensor<1x4x3x8xf32> -> tensor<1x4x8x3xf32>
  %t2 = nn.matmul %qs2, %kt2 : tensor<1x4x3x8xf32>, tensor<1x4x8x3xf32> -> tensor<1x4x3x3xf32>
  %p2 = nn.softmax %t2 {axis = 3 : i64} : tensor<1x4x3x3xf32> -> tensor<1x4x3x3xf32>
  %b = nn.matmul %p2, %vr : tensor<1x4x3x3xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  return %a, %b : tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>
}

// ONNX Attention's is_causal as the conversion writes it: an additive
// [Tq, Tk] constant of 0 on and below the diagonal and -inf above it,
// of lower rank than the scores. The fused op is causal, with no mask.
// CHECK-LABEL: func.func @causal_bias
// CHECK: nn.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 5.000000e-01 : f64} : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
// CHECK-NOT: nn.softmax
func.func @causal_bias(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>,
                       %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %half = arith.constant dense<5.000000e-01> : tensor<f32>
  %bias = arith.constant dense<[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %kt = nn.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %t = nn.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %s = nn.mul %t, %half : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %m = nn.add %s, %bias : tensor<1x2x3x3xf32>, tensor<3x3xf32> -> tensor<1x2x3x3xf32>
  %p = nn.softmax %m {axis = 3 : i64} : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = nn.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// A constant additive mask of lower rank that is not causal (the first
// key hidden from the last query; a bias aligned bottom-right): the fused
// op's mask, reshaped with leading 1s to the scores' rank.
// CHECK-LABEL: func.func @low_rank_mask
// CHECK: %[[M:.+]] = nn.reshape %{{.+}} : tensor<3x3xf32> -> tensor<1x1x3x3xf32>
// CHECK: nn.attention %{{.+}}, %{{.+}}, %{{.+}}, %[[M]] {scale = 5.000000e-01 : f64}
// CHECK-NOT: nn.softmax
func.func @low_rank_mask(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>,
                         %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %half = arith.constant dense<5.000000e-01> : tensor<f32>
  %bias = arith.constant dense<[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0xFF800000, 0.0, 0.0]]> : tensor<3x3xf32>
  %kt = nn.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %t = nn.matmul %q, %kt : tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32> -> tensor<1x2x3x3xf32>
  %s = nn.mul %t, %half : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %m = nn.add %bias, %s : tensor<3x3xf32>, tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = nn.softmax %m {axis = 3 : i64} : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = nn.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// The factor on the keys before their repeat, as ONNX Attention's
// conversion writes it: it joins the scale (0.5 * 0.5), and the fused op
// reads k itself.
// CHECK-LABEL: func.func @grouped_query_keys_scaled_first
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<1x4x3x8xf32>, %[[K:[^:]+]]: tensor<1x2x3x8xf32>, %[[V:[^:]+]]: tensor<1x2x3x8xf32>)
// CHECK-NOT: nn.mul
// CHECK: %[[A:.+]] = nn.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
func.func @grouped_query_keys_scaled_first(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>,
                                           %v: tensor<1x2x3x8xf32>) -> tensor<1x4x3x8xf32> {
  %half = arith.constant dense<5.000000e-01> : tensor<f32>
  %qs = nn.mul %q, %half : tensor<1x4x3x8xf32>, tensor<f32> -> tensor<1x4x3x8xf32>
  %ks = nn.mul %k, %half : tensor<1x2x3x8xf32>, tensor<f32> -> tensor<1x2x3x8xf32>
  %k1 = nn.reshape %ks : tensor<1x2x3x8xf32> -> tensor<1x2x1x3x8xf32>
  %k2 = nn.broadcast_to %k1 {shape = array<i64: 1, 2, 2, 3, 8>} : tensor<1x2x1x3x8xf32> -> tensor<1x2x2x3x8xf32>
  %kr = nn.reshape %k2 : tensor<1x2x2x3x8xf32> -> tensor<1x4x3x8xf32>
  %v1 = nn.reshape %v : tensor<1x2x3x8xf32> -> tensor<1x2x1x3x8xf32>
  %v2 = nn.broadcast_to %v1 {shape = array<i64: 1, 2, 2, 3, 8>} : tensor<1x2x1x3x8xf32> -> tensor<1x2x2x3x8xf32>
  %vr = nn.reshape %v2 : tensor<1x2x2x3x8xf32> -> tensor<1x4x3x8xf32>
  %kt = nn.transpose %kr {perm = array<i64: 0, 1, 3, 2>} : tensor<1x4x3x8xf32> -> tensor<1x4x8x3xf32>
  %t = nn.matmul %qs, %kt : tensor<1x4x3x8xf32>, tensor<1x4x8x3xf32> -> tensor<1x4x3x3xf32>
  %p = nn.softmax %t {axis = 3 : i64} : tensor<1x4x3x3xf32> -> tensor<1x4x3x3xf32>
  %a = nn.matmul %p, %vr : tensor<1x4x3x3xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  return %a : tensor<1x4x3x8xf32>
}

// Step 8: Llama's rotary embeddings after the head splits of q and of the
// grouped-query k run before them, on the projections' [B, T, H, D], the
// tables' dimensions 1 and 2 swapped by a reshape; the splits then meet
// the fused op (which ztc-fold-transposes lets read them in place).
// CHECK-LABEL: func.func @rotary_before_split
// CHECK-SAME: (%[[XQ:[^:]+]]: tensor<1x3x4x8xf32>, %[[XK:[^:]+]]: tensor<1x3x2x8xf32>, %[[V:[^:]+]]: tensor<1x2x3x8xf32>, %[[C:[^:]+]]: tensor<1x1x3x8xf32>, %[[S:[^:]+]]: tensor<1x1x3x8xf32>)
// CHECK-DAG: %[[CQ:.+]] = nn.reshape %[[C]] : tensor<1x1x3x8xf32> -> tensor<1x3x1x8xf32>
// CHECK-DAG: %[[SQ:.+]] = nn.reshape %[[S]] : tensor<1x1x3x8xf32> -> tensor<1x3x1x8xf32>
// CHECK-DAG: %[[RQ:.+]] = nn.rotary %[[XQ]], %[[CQ]], %[[SQ]] {inverse = false} : tensor<1x3x4x8xf32>, tensor<1x3x1x8xf32>, tensor<1x3x1x8xf32> -> tensor<1x3x4x8xf32>
// CHECK-DAG: %[[Q:.+]] = nn.transpose %[[RQ]] {perm = array<i64: 0, 2, 1, 3>} : tensor<1x3x4x8xf32> -> tensor<1x4x3x8xf32>
// CHECK-DAG: %[[RK:.+]] = nn.rotary %[[XK]], %{{.+}}, %{{.+}} {inverse = false} : tensor<1x3x2x8xf32>, tensor<1x3x1x8xf32>, tensor<1x3x1x8xf32> -> tensor<1x3x2x8xf32>
// CHECK-DAG: %[[K:.+]] = nn.transpose %[[RK]] {perm = array<i64: 0, 2, 1, 3>} : tensor<1x3x2x8xf32> -> tensor<1x2x3x8xf32>
// CHECK: %[[O:.+]] = nn.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @rotary_before_split(%xq: tensor<1x3x4x8xf32>, %xk: tensor<1x3x2x8xf32>,
                               %v: tensor<1x2x3x8xf32>, %c: tensor<1x1x3x8xf32>,
                               %s: tensor<1x1x3x8xf32>) -> tensor<1x4x3x8xf32> {
  %scale = arith.constant dense<2.500000e-01> : tensor<f32>
  %tq = nn.transpose %xq {perm = array<i64: 0, 2, 1, 3>} : tensor<1x3x4x8xf32> -> tensor<1x4x3x8xf32>
  %q = nn.rotary %tq, %c, %s {inverse = false} : tensor<1x4x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32> -> tensor<1x4x3x8xf32>
  %tk = nn.transpose %xk {perm = array<i64: 0, 2, 1, 3>} : tensor<1x3x2x8xf32> -> tensor<1x2x3x8xf32>
  %k = nn.rotary %tk, %c, %s {inverse = false} : tensor<1x2x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32> -> tensor<1x2x3x8xf32>
  %k1 = nn.reshape %k : tensor<1x2x3x8xf32> -> tensor<1x2x1x3x8xf32>
  %k2 = nn.broadcast_to %k1 {shape = array<i64: 1, 2, 2, 3, 8>} : tensor<1x2x1x3x8xf32> -> tensor<1x2x2x3x8xf32>
  %kr = nn.reshape %k2 : tensor<1x2x2x3x8xf32> -> tensor<1x4x3x8xf32>
  %v1 = nn.reshape %v : tensor<1x2x3x8xf32> -> tensor<1x2x1x3x8xf32>
  %v2 = nn.broadcast_to %v1 {shape = array<i64: 1, 2, 2, 3, 8>} : tensor<1x2x1x3x8xf32> -> tensor<1x2x2x3x8xf32>
  %vr = nn.reshape %v2 : tensor<1x2x2x3x8xf32> -> tensor<1x4x3x8xf32>
  %kt = nn.transpose %kr {perm = array<i64: 0, 1, 3, 2>} : tensor<1x4x3x8xf32> -> tensor<1x4x8x3xf32>
  %t = nn.matmul %q, %kt : tensor<1x4x3x8xf32>, tensor<1x4x8x3xf32> -> tensor<1x4x3x3xf32>
  %sc = nn.mul %t, %scale : tensor<1x4x3x3xf32>, tensor<f32> -> tensor<1x4x3x3xf32>
  %p = nn.softmax %sc {axis = 3 : i64} : tensor<1x4x3x3xf32> -> tensor<1x4x3x3xf32>
  %o = nn.matmul %p, %vr : tensor<1x4x3x3xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  return %o : tensor<1x4x3x8xf32>
}

// Tables that vary along both the heads and the tokens are transposed
// with x. The rotary stays after its split when something else reads it
// (q, returned too), and where no head split precedes it (k, already
// [B, H, T, D]).
// CHECK-LABEL: func.func @rotary_split_kept
// CHECK-SAME: (%[[X:[^:]+]]: tensor<1x3x4x8xf32>, %[[K:[^:]+]]: tensor<1x4x3x8xf32>, %[[V:[^:]+]]: tensor<1x4x3x8xf32>, %[[C:[^:]+]]: tensor<1x4x3x8xf32>)
// CHECK: %[[CT:.+]] = nn.transpose %[[C]] {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x3x8xf32> -> tensor<1x3x4x8xf32>
// CHECK: nn.rotary %[[X]], %[[CT]], %[[CT]] {inverse = false} : tensor<1x3x4x8xf32>
// CHECK: %[[TQ:.+]] = nn.transpose %[[X]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK: %[[Q:.+]] = nn.rotary %[[TQ]], %[[C]], %[[C]] {inverse = false} : tensor<1x4x3x8xf32>
// CHECK: %[[RK:.+]] = nn.rotary %[[K]], %[[C]], %[[C]] {inverse = false}
// CHECK: nn.attention %[[Q]], %[[RK]], %[[V]]
func.func @rotary_split_kept(%x: tensor<1x3x4x8xf32>, %k: tensor<1x4x3x8xf32>,
                             %v: tensor<1x4x3x8xf32>, %c: tensor<1x4x3x8xf32>)
    -> (tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>) {
  %scale = arith.constant dense<2.500000e-01> : tensor<f32>
  %t0 = nn.transpose %x {perm = array<i64: 0, 2, 1, 3>} : tensor<1x3x4x8xf32> -> tensor<1x4x3x8xf32>
  %q0 = nn.rotary %t0, %c, %c {inverse = false} : tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  %kt0 = nn.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1x4x3x8xf32> -> tensor<1x4x8x3xf32>
  %s0 = nn.matmul %q0, %kt0 : tensor<1x4x3x8xf32>, tensor<1x4x8x3xf32> -> tensor<1x4x3x3xf32>
  %p0 = nn.softmax %s0 {axis = 3 : i64} : tensor<1x4x3x3xf32> -> tensor<1x4x3x3xf32>
  %a = nn.matmul %p0, %v : tensor<1x4x3x3xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  %t1 = nn.transpose %x {perm = array<i64: 0, 2, 1, 3>} : tensor<1x3x4x8xf32> -> tensor<1x4x3x8xf32>
  %q1 = nn.rotary %t1, %c, %c {inverse = false} : tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  %k1 = nn.rotary %k, %c, %c {inverse = false} : tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  %kt1 = nn.transpose %k1 {perm = array<i64: 0, 1, 3, 2>} : tensor<1x4x3x8xf32> -> tensor<1x4x8x3xf32>
  %s1 = nn.matmul %q1, %kt1 : tensor<1x4x3x8xf32>, tensor<1x4x8x3xf32> -> tensor<1x4x3x3xf32>
  %p1 = nn.softmax %s1 {axis = 3 : i64} : tensor<1x4x3x3xf32> -> tensor<1x4x3x3xf32>
  %b = nn.matmul %p1, %v : tensor<1x4x3x3xf32>, tensor<1x4x3x8xf32> -> tensor<1x4x3x8xf32>
  return %a, %b, %q1 : tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>
}

// Step 9: timm's head split of a fused projection, `qkv.reshape(B, T, 3,
// H, D).permute(2, 0, 3, 1, 4).unbind(0)`: each of q, k and v becomes a
// slice of the [B, T, 3C] projection at whole heads, seen as [B, T, H, D]
// by one reshape and transposed, as nanoGPT's split is (which
// ztc-fold-head-windows lets attention read in place); the permuted
// tensor and its slices go.
// CHECK-LABEL: func.func @fused_projection_split
// CHECK-SAME: (%[[QKV:[^:]+]]: tensor<2x5x192xf32>)
// CHECK-DAG: %[[SQ:.+]] = nn.slice %[[QKV]] {sizes = array<i64: 2, 5, 64>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : tensor<2x5x192xf32> -> tensor<2x5x64xf32>
// CHECK-DAG: %[[SK:.+]] = nn.slice %[[QKV]] {sizes = array<i64: 2, 5, 64>, starts = array<i64: 0, 0, 64>, steps = array<i64: 1, 1, 1>}
// CHECK-DAG: %[[SV:.+]] = nn.slice %[[QKV]] {sizes = array<i64: 2, 5, 64>, starts = array<i64: 0, 0, 128>, steps = array<i64: 1, 1, 1>}
// CHECK-DAG: %[[RQ:.+]] = nn.reshape %[[SQ]] : tensor<2x5x64xf32> -> tensor<2x5x2x32xf32>
// CHECK-DAG: %[[Q:.+]] = nn.transpose %[[RQ]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x32xf32> -> tensor<2x2x5x32xf32>
// CHECK-DAG: %[[RK:.+]] = nn.reshape %[[SK]] : tensor<2x5x64xf32> -> tensor<2x5x2x32xf32>
// CHECK-DAG: %[[K:.+]] = nn.transpose %[[RK]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-DAG: %[[RV:.+]] = nn.reshape %[[SV]] : tensor<2x5x64xf32> -> tensor<2x5x2x32xf32>
// CHECK-DAG: %[[V:.+]] = nn.transpose %[[RV]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK: nn.attention %[[Q]], %[[K]], %[[V]]
// CHECK-NOT: tensor<3x2x2x5x32xf32>
// CHECK-NOT: tensor<2x5x3x2x32xf32>
func.func @fused_projection_split(%qkv: tensor<2x5x192xf32>) -> tensor<2x2x5x32xf32> {
  %scale = arith.constant dense<0.176776692> : tensor<f32>
  %r = nn.reshape %qkv : tensor<2x5x192xf32> -> tensor<2x5x3x2x32xf32>
  %t = nn.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x32xf32> -> tensor<3x2x2x5x32xf32>
  %q1 = nn.slice %t {sizes = array<i64: 1, 2, 2, 5, 32>, starts = array<i64: 0, 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x5x32xf32> -> tensor<1x2x2x5x32xf32>
  %q = nn.reshape %q1 : tensor<1x2x2x5x32xf32> -> tensor<2x2x5x32xf32>
  %k1 = nn.slice %t {sizes = array<i64: 1, 2, 2, 5, 32>, starts = array<i64: 1, 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x5x32xf32> -> tensor<1x2x2x5x32xf32>
  %k = nn.reshape %k1 : tensor<1x2x2x5x32xf32> -> tensor<2x2x5x32xf32>
  %v1 = nn.slice %t {sizes = array<i64: 1, 2, 2, 5, 32>, starts = array<i64: 2, 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x5x32xf32> -> tensor<1x2x2x5x32xf32>
  %v = nn.reshape %v1 : tensor<1x2x2x5x32xf32> -> tensor<2x2x5x32xf32>
  %kt = nn.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x32xf32> -> tensor<2x2x32x5xf32>
  %s = nn.matmul %q, %kt : tensor<2x2x5x32xf32>, tensor<2x2x32x5xf32> -> tensor<2x2x5x5xf32>
  %sc = nn.mul %s, %scale : tensor<2x2x5x5xf32>, tensor<f32> -> tensor<2x2x5x5xf32>
  %p = nn.softmax %sc {axis = 3 : i64} : tensor<2x2x5x5xf32> -> tensor<2x2x5x5xf32>
  %o = nn.matmul %p, %v : tensor<2x2x5x5xf32>, tensor<2x2x5x32xf32> -> tensor<2x2x5x32xf32>
  return %o : tensor<2x2x5x32xf32>
}

// Step 9 leaves the permuted tensor where something else reads it (the
// transpose returned too): moving the slices would transpose twice.
// CHECK-LABEL: func.func @fused_projection_split_kept
// CHECK: %[[T:.+]] = nn.transpose %{{.+}} {perm = array<i64: 2, 0, 3, 1, 4>}
// CHECK-COUNT-3: nn.slice %[[T]]
// CHECK: nn.attention
func.func @fused_projection_split_kept(%qkv: tensor<2x5x192xf32>) -> (tensor<2x2x5x32xf32>, tensor<3x2x2x5x32xf32>) {
  %scale = arith.constant dense<0.176776692> : tensor<f32>
  %r = nn.reshape %qkv : tensor<2x5x192xf32> -> tensor<2x5x3x2x32xf32>
  %t = nn.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x32xf32> -> tensor<3x2x2x5x32xf32>
  %q1 = nn.slice %t {sizes = array<i64: 1, 2, 2, 5, 32>, starts = array<i64: 0, 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x5x32xf32> -> tensor<1x2x2x5x32xf32>
  %q = nn.reshape %q1 : tensor<1x2x2x5x32xf32> -> tensor<2x2x5x32xf32>
  %k1 = nn.slice %t {sizes = array<i64: 1, 2, 2, 5, 32>, starts = array<i64: 1, 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x5x32xf32> -> tensor<1x2x2x5x32xf32>
  %k = nn.reshape %k1 : tensor<1x2x2x5x32xf32> -> tensor<2x2x5x32xf32>
  %v1 = nn.slice %t {sizes = array<i64: 1, 2, 2, 5, 32>, starts = array<i64: 2, 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x5x32xf32> -> tensor<1x2x2x5x32xf32>
  %v = nn.reshape %v1 : tensor<1x2x2x5x32xf32> -> tensor<2x2x5x32xf32>
  %kt = nn.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x32xf32> -> tensor<2x2x32x5xf32>
  %s = nn.matmul %q, %kt : tensor<2x2x5x32xf32>, tensor<2x2x32x5xf32> -> tensor<2x2x5x5xf32>
  %sc = nn.mul %s, %scale : tensor<2x2x5x5xf32>, tensor<f32> -> tensor<2x2x5x5xf32>
  %p = nn.softmax %sc {axis = 3 : i64} : tensor<2x2x5x5xf32> -> tensor<2x2x5x5xf32>
  %o = nn.matmul %p, %v : tensor<2x2x5x5xf32>, tensor<2x2x5x32xf32> -> tensor<2x2x5x32xf32>
  return %o, %t : tensor<2x2x5x32xf32>, tensor<3x2x2x5x32xf32>
}
