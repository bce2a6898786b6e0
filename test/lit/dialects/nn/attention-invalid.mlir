// RUN: ztc-opt %s -split-input-file -verify-diagnostics

// Every diagnostic of nn.attention and nn.attention_backward, one case
// each.

// q is [..., Tq, D].
func.func @q_rank(%q: tensor<8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op expects q of rank at least 2 ([..., Tq, D]), got 'tensor<8xf32>'}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f64}
         : tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8xf32>
  return
}

// -----

// k has q's element type.
func.func @k_type(%q: tensor<4x8xf32>, %k: tensor<4x8xf16>, %v: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op expects k element type 'f32', got 'tensor<4x8xf16>'}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f64}
         : tensor<4x8xf32>, tensor<4x8xf16>, tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// v has q's element type.
func.func @v_type(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xbf16>) {
  // expected-error @+1 {{'nn.attention' op expects v element type 'f32', got 'tensor<4x8xbf16>'}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f64}
         : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16> -> tensor<4x8xf32>
  return
}

// -----

// No broadcasting of the batch dimensions: one rank for all three.
func.func @ranks(%q: tensor<2x4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op expects q, k and v of one rank, got 'tensor<2x4x8xf32>', 'tensor<4x8xf32>' and 'tensor<4x8xf32>'}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f64}
         : tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
  return
}

// -----

// ... and the same batch dimensions.
func.func @batch(%q: tensor<2x4x8xf32>, %k: tensor<3x4x8xf32>, %v: tensor<3x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op expects q, k and v with the same batch dimensions (k and v may share fewer heads, dividing q's), got 'tensor<2x4x8xf32>', 'tensor<3x4x8xf32>' and 'tensor<3x4x8xf32>'}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f64}
         : tensor<2x4x8xf32>, tensor<3x4x8xf32>, tensor<3x4x8xf32> -> tensor<2x4x8xf32>
  return
}

// -----

// q and k have one head size.
func.func @head_size(%q: tensor<4x8xf32>, %k: tensor<4x6xf32>, %v: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op expects k of head size 8 (q's), got 'tensor<4x6xf32>'}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f64}
         : tensor<4x8xf32>, tensor<4x6xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// v has one row per key.
func.func @keys(%q: tensor<4x8xf32>, %k: tensor<5x8xf32>, %v: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op expects v with 5 keys (k's), got 'tensor<4x8xf32>'}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f64}
         : tensor<4x8xf32>, tensor<5x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// The mask has q's element type.
func.func @mask_type(%q: tensor<4x8xf32>, %k: tensor<5x8xf32>, %v: tensor<5x8xf32>,
                     %m: tensor<4x5xf16>) {
  // expected-error @+1 {{'nn.attention' op expects mask element type 'f32', got 'tensor<4x5xf16>'}}
  %o = nn.attention %q, %k, %v, %m {scale = 1.0 : f64}
         : tensor<4x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>, tensor<4x5xf16>
         -> tensor<4x8xf32>
  return
}

// -----

// The mask broadcasts to the scores in place: a dimension of 1 repeats,
// nothing else does.
func.func @mask_shape(%q: tensor<4x8xf32>, %k: tensor<5x8xf32>, %v: tensor<5x8xf32>,
                      %m: tensor<4x3xf32>) {
  // expected-error @+1 {{'nn.attention' op expects a mask that broadcasts to the scores [4, 5] in place (same rank, each dimension 1 or the scores'), got 'tensor<4x3xf32>'}}
  %o = nn.attention %q, %k, %v, %m {scale = 1.0 : f64}
         : tensor<4x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>, tensor<4x3xf32>
         -> tensor<4x8xf32>
  return
}

// -----

// The backward's `out` is the forward's result.
func.func @backward_out(%q: tensor<4x8xf32>, %k: tensor<5x8xf32>,
                        %v: tensor<5x2xf32>, %o: tensor<4x8xf32>,
                        %g: tensor<4x2xf32>) {
  // expected-error @+1 {{'nn.attention_backward' op expects out of type 'tensor<4x2xf32>' (the forward result), got 'tensor<4x8xf32>'}}
  %dq, %dk, %dv = nn.attention_backward %q, %k, %v, %o, %g {scale = 1.0 : f64}
         : tensor<4x8xf32>, tensor<5x8xf32>, tensor<5x2xf32>, tensor<4x8xf32>,
           tensor<4x2xf32> -> tensor<4x8xf32>, tensor<5x8xf32>, tensor<5x2xf32>
  return
}

// -----

// ... and so is its gradient's type.
func.func @backward_grad(%q: tensor<4x8xf32>, %k: tensor<5x8xf32>,
                         %v: tensor<5x2xf32>, %o: tensor<4x2xf32>,
                         %g: tensor<4x2xbf16>) {
  // expected-error @+1 {{'nn.attention_backward' op expects grad_output of type 'tensor<4x2xf32>' (the forward result), got 'tensor<4x2xbf16>'}}
  %dq, %dk, %dv = nn.attention_backward %q, %k, %v, %o, %g {scale = 1.0 : f64}
         : tensor<4x8xf32>, tensor<5x8xf32>, tensor<5x2xf32>, tensor<4x2xf32>,
           tensor<4x2xbf16> -> tensor<4x8xf32>, tensor<5x8xf32>, tensor<5x2xf32>
  return
}

// -----

// Grouped-query heads: k's and v's heads divide q's ...
func.func @grouped_heads(%q: tensor<1x4x3x8xf32>, %k: tensor<1x3x3x8xf32>, %v: tensor<1x3x3x8xf32>) {
  // expected-error @+1 {{'nn.attention' op expects q, k and v with the same batch dimensions (k and v may share fewer heads, dividing q's), got 'tensor<1x4x3x8xf32>', 'tensor<1x3x3x8xf32>' and 'tensor<1x3x3x8xf32>'}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f64}
         : tensor<1x4x3x8xf32>, tensor<1x3x3x8xf32>, tensor<1x3x3x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

// ... and k and v have the same heads.
func.func @grouped_kv(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x1x3x8xf32>) {
  // expected-error @+1 {{'nn.attention' op expects q, k and v with the same batch dimensions (k and v may share fewer heads, dividing q's), got 'tensor<1x4x3x8xf32>', 'tensor<1x2x3x8xf32>' and 'tensor<1x1x3x8xf32>'}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f64}
         : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x1x3x8xf32> -> tensor<1x4x3x8xf32>
  return
}

// -----

// A softcap is positive.
func.func @softcap_zero(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op expects a positive finite softcap, got 0}}
  %o = nn.attention %q, %k, %v {scale = 1.0 : f64, softcap = 0.0 : f64}
         : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// So is the backward's.
func.func @backward_softcap(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>, %o: tensor<4x8xf32>, %g: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.attention_backward' op expects a positive finite softcap, got -3}}
  %dq, %dk, %dv = nn.attention_backward %q, %k, %v, %o, %g {scale = 1.0 : f64, softcap = -3.0 : f64}
         : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
         -> tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  return
}
