// RUN: ztc-opt %s -split-input-file --ztc-autodiff | FileCheck %s
// RUN: ztc-opt %s -split-input-file --ztc-autodiff="frozen=w,he.*" | FileCheck %s --check-prefix=FROZEN

// ztc-autodiff: the gradient structure per op family, pruning, accumulation
// over several uses, and the frozen option. The numbers themselves are
// checked against finite differences by autodiff-numeric.test.

// A linear layer and a squared loss. The gradients of w and b come back as
// extra results tagged with their names, in argument order. `head` only
// feeds a second output, not the loss: it gets no gradient (train.no_grad)
// and its branch no backward work; the integer param is skipped. The
// squared value's two uses are accumulated; the bias gradient is summed
// over the broadcast batch dimension.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: %[[X:[^:]+]]: tensor<8x4xf32> {train.binding = #train.binding<input "x">}
// CHECK-SAME: -> (tensor<f32>, tensor<8x3xf32>, tensor<4x3xf32> {train.grad_of = "w"}, tensor<3xf32> {train.grad_of = "b"})
// CHECK-SAME: attributes {train.no_grad = ["head"]}
// CHECK: %[[Z:.+]] = nn.add
// CHECK: %[[LOSS:.+]] = nn.reduce_mean
// CHECK: %[[OUT:.+]] = nn.mul
// CHECK: %[[ONE:.+]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[SEED:.+]] = nn.reshape %[[ONE]] : tensor<f32> -> tensor<1x1xf32>
// CHECK: %[[MEAN:.+]] = nn.div %[[SEED]], %{{.+}} : tensor<1x1xf32>, tensor<f32> -> tensor<1x1xf32>
// CHECK: %[[G2:.+]] = nn.broadcast_to %[[MEAN]] {shape = array<i64: 8, 3>}
// CHECK: %[[D1:.+]] = nn.mul %[[G2]], %[[Z]]
// CHECK: %[[D2:.+]] = nn.mul %[[G2]], %[[Z]]
// CHECK: %[[GZ:.+]] = nn.add %[[D1]], %[[D2]]
// CHECK: %[[GB:.+]] = nn.reduce_sum %[[GZ]] {axes = array<i64: 0>, keepdims = false} : tensor<8x3xf32> -> tensor<3xf32>
// CHECK: %[[XT:.+]] = nn.transpose %[[X]] {perm = array<i64: 1, 0>}
// CHECK: %[[GW:.+]] = nn.matmul %[[XT]], %[[GZ]] : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
// CHECK-NEXT: return %[[LOSS]], %[[OUT]], %[[GW]], %[[GB]]
// Frozen parameters (whole-name regular expressions) get no gradient, and
// are not reported as unused.
// FROZEN-LABEL: func.func @linear
// FROZEN-SAME: -> (tensor<f32>, tensor<8x3xf32>, tensor<3xf32> {train.grad_of = "b"}) {
// FROZEN-NOT: nn.transpose
// FROZEN: return
func.func @linear(%x: tensor<8x4xf32> {train.binding = #train.binding<input "x">},
                  %w: tensor<4x3xf32> {train.binding = #train.binding<param "w">},
                  %b: tensor<3xf32> {train.binding = #train.binding<param "b">},
                  %h: tensor<3xf32> {train.binding = #train.binding<param "head">},
                  %steps: tensor<i64> {train.binding = #train.binding<param "steps">})
    -> (tensor<f32>, tensor<8x3xf32>) {
  %0 = nn.matmul %x, %w : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x3xf32>
  %1 = nn.add %0, %b : tensor<8x3xf32>, tensor<3xf32> -> tensor<8x3xf32>
  %2 = nn.mul %1, %1 : tensor<8x3xf32>, tensor<8x3xf32> -> tensor<8x3xf32>
  %l = nn.reduce_mean %2 {axes = array<i64: 0, 1>, keepdims = false}
         : tensor<8x3xf32> -> tensor<f32>
  %o = nn.mul %1, %h : tensor<8x3xf32>, tensor<3xf32> -> tensor<8x3xf32>
  return %l, %o : tensor<f32>, tensor<8x3xf32>
}

// -----

// Unary VJPs reuse the forward results where PyTorch does: exp's gradient
// is g * exp(x), relu's is 0 where its result is not positive.
// CHECK-LABEL: func.func @saved_results
// CHECK: %[[E:.+]] = nn.exp
// CHECK: %[[R:.+]] = nn.relu %[[E]]
// CHECK: %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[POS:.+]] = nn.greater %[[R]], %[[ZERO]]
// CHECK: %[[GR:.+]] = nn.where %[[POS]], %{{.+}}, %[[ZERO]]
// CHECK: %[[GX:.+]] = nn.mul %[[GR]], %[[E]]
// CHECK: return %{{.+}}, %[[GX]]
func.func @saved_results(%x: tensor<4xf32> {train.binding = #train.binding<param "x">})
    -> tensor<f32> {
  %0 = nn.exp %x : tensor<4xf32> -> tensor<4xf32>
  %1 = nn.relu %0 : tensor<4xf32> -> tensor<4xf32>
  %l = nn.reduce_sum %1 {axes = array<i64: 0>, keepdims = false}
         : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// max/min: between two variables ties split the gradient in halves and the
// loser gets 0 (PyTorch's maximum); against a constant bound (Clip) the
// variable keeps the whole gradient strictly inside the bound and none at
// it (PyTorch 2's clamp, hardtanh, relu6).
// CHECK-LABEL: func.func @extremum
// CHECK-SAME: %[[A:[^:]+]]: tensor<4xf32> {train.binding = #train.binding<param "a">}, %[[B:[^:]+]]: tensor<4xf32>
// CHECK: %[[LO:.+]] = arith.constant dense<0.000000e+00>
// CHECK: %[[M:.+]] = nn.max %[[A]], %[[B]]
// CHECK: %[[IN:.+]] = nn.less %[[M]], %[[LO]]
// CHECK: %[[GM:.+]] = nn.where %[[IN]]
// CHECK: %[[TIE:.+]] = nn.equal %[[A]], %[[B]]
// CHECK: %[[HALF:.+]] = nn.mul %[[GM]], %{{.+}} : tensor<4xf32>, tensor<f32>
// CHECK: %[[SHARED:.+]] = nn.where %[[TIE]], %[[HALF]], %[[GM]]
// CHECK: %[[ALOSES:.+]] = nn.less %[[A]], %[[B]]
// CHECK: %[[GA:.+]] = nn.where %[[ALOSES]], %{{.+}}, %[[SHARED]]
// CHECK: %[[BLOSES:.+]] = nn.less %[[B]], %[[A]]
// CHECK: %[[GB:.+]] = nn.where %[[BLOSES]], %{{.+}}, %[[SHARED]]
// CHECK: return %{{.+}}, %[[GA]], %[[GB]]
func.func @extremum(%a: tensor<4xf32> {train.binding = #train.binding<param "a">},
                    %b: tensor<4xf32> {train.binding = #train.binding<param "b">})
    -> tensor<f32> {
  %lo = arith.constant dense<0.0> : tensor<f32>
  %0 = nn.max %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %1 = nn.min %0, %lo : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %l = nn.reduce_sum %1 {axes = array<i64: 0>, keepdims = false}
         : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A weight shared by a batch gets one product over all rows; an operand
// broadcast along a batch dimension gets its gradient summed over it.
// CHECK-LABEL: func.func @batched_matmul
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x8x4xf32>
// CHECK: %[[VT:.+]] = nn.transpose %{{.+}} {perm = array<i64: 0, 2, 1>} : tensor<1x3x5xf32> -> tensor<1x5x3xf32>
// CHECK: %[[GH:.+]] = nn.matmul %{{.+}}, %[[VT]] : tensor<2x8x5xf32>, tensor<1x5x3xf32> -> tensor<2x8x3xf32>
// CHECK: %[[GVB:.+]] = nn.matmul %{{.+}}, %{{.+}} : tensor<2x3x8xf32>, tensor<2x8x5xf32> -> tensor<2x3x5xf32>
// CHECK: %[[GVS:.+]] = nn.reduce_sum %[[GVB]] {axes = array<i64: 0>, keepdims = false} : tensor<2x3x5xf32> -> tensor<3x5xf32>
// CHECK: %[[GV:.+]] = nn.reshape %[[GVS]] : tensor<3x5xf32> -> tensor<1x3x5xf32>
// CHECK: %[[ROWS:.+]] = nn.reshape %[[X]] : tensor<2x8x4xf32> -> tensor<16x4xf32>
// CHECK: %[[GROWS:.+]] = nn.reshape %[[GH]] : tensor<2x8x3xf32> -> tensor<16x3xf32>
// CHECK: %[[RT:.+]] = nn.transpose %[[ROWS]] {perm = array<i64: 1, 0>}
// CHECK: %[[GW:.+]] = nn.matmul %[[RT]], %[[GROWS]] : tensor<4x16xf32>, tensor<16x3xf32> -> tensor<4x3xf32>
// CHECK: return %{{.+}}, %[[GW]], %[[GV]]
func.func @batched_matmul(%x: tensor<2x8x4xf32> {train.binding = #train.binding<input "x">},
                          %w: tensor<4x3xf32> {train.binding = #train.binding<param "w">},
                          %v: tensor<1x3x5xf32> {train.binding = #train.binding<param "v">})
    -> tensor<f32> {
  %0 = nn.matmul %x, %w : tensor<2x8x4xf32>, tensor<4x3xf32> -> tensor<2x8x3xf32>
  %1 = nn.matmul %0, %v : tensor<2x8x3xf32>, tensor<1x3x5xf32> -> tensor<2x8x5xf32>
  %l = nn.reduce_sum %1 {axes = array<i64: 0, 1, 2>, keepdims = false}
         : tensor<2x8x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Convolution and pooling use the backward ops. The input is data, so no
// conv2d_backward_data is left; the bias gradient is a sum.
// CHECK-LABEL: func.func @conv
// CHECK-SAME: %[[X:[^:]+]]: tensor<1x3x8x8xf32>
// CHECK: %[[C:.+]] = nn.conv2d
// CHECK: %[[GP:.+]] = nn.avg_pool2d_backward %{{.+}} {ceil_mode = false, count_include_pad = false, input_size = array<i64: 2, 2>, kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<1x4x1x1xf32> -> tensor<1x4x2x2xf32>
// CHECK: %[[GC:.+]] = nn.max_pool2d_backward %[[C]], %[[GP]] {{{.*}}} : tensor<1x4x4x4xf32>, tensor<1x4x2x2xf32> -> tensor<1x4x4x4xf32>
// CHECK-NOT: nn.conv2d_backward_data
// CHECK: %[[GW:.+]] = nn.conv2d_backward_filter %[[X]], %[[GC]] {dilations = array<i64: 1, 1>, group = 1 : i64, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x3x8x8xf32>, tensor<1x4x4x4xf32> -> tensor<4x3x3x3xf32>
// CHECK: %[[GB:.+]] = nn.reduce_sum %[[GC]] {axes = array<i64: 0, 2, 3>, keepdims = false} : tensor<1x4x4x4xf32> -> tensor<4xf32>
// CHECK: return %{{.+}}, %[[GW]], %[[GB]]
func.func @conv(%x: tensor<1x3x8x8xf32> {train.binding = #train.binding<input "x">},
                %w: tensor<4x3x3x3xf32> {train.binding = #train.binding<param "w">},
                %b: tensor<4xf32> {train.binding = #train.binding<param "b">}) -> tensor<f32> {
  %0 = nn.conv2d %x, %w, %b {strides = array<i64: 2, 2>,
         pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>,
         group = 1 : i64}
         : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>
         -> tensor<1x4x4x4xf32>
  %1 = nn.max_pool2d %0 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>,
         ceil_mode = false} : tensor<1x4x4x4xf32> -> tensor<1x4x2x2xf32>
  %2 = nn.avg_pool2d %1 {kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>,
         pads = array<i64: 0, 0, 0, 0>, ceil_mode = false,
         count_include_pad = false} : tensor<1x4x2x2xf32> -> tensor<1x4x1x1xf32>
  %l = nn.reduce_sum %2 {axes = array<i64: 0, 1, 2, 3>, keepdims = false}
         : tensor<1x4x1x1xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Channels-last poolings (ztc-channels-last's NHWC) have channels-last
// gradients: the average pool's takes its input's [H, W] = [3, 2] from
// the NHWC [1, 3, 2, 3].
// CHECK-LABEL: func.func @pool_channels_last
// CHECK-SAME: %[[X:[^:]+]]: tensor<1x6x4x3xf32>
// CHECK: %[[P:.+]] = nn.max_pool2d %[[X]] {ceil_mode = false, channels_last, {{.*}}} : tensor<1x6x4x3xf32> -> tensor<1x3x2x3xf32>
// CHECK: %[[GP:.+]] = nn.avg_pool2d_backward %{{.+}} {ceil_mode = false, channels_last, count_include_pad = false, input_size = array<i64: 3, 2>, {{.*}}} : tensor<1x1x1x3xf32> -> tensor<1x3x2x3xf32>
// CHECK: %[[GX:.+]] = nn.max_pool2d_backward %[[X]], %[[GP]] {ceil_mode = false, channels_last, {{.*}}} : tensor<1x6x4x3xf32>, tensor<1x3x2x3xf32> -> tensor<1x6x4x3xf32>
// CHECK: return %{{.+}}, %[[GX]]
func.func @pool_channels_last(%x: tensor<1x6x4x3xf32> {train.binding = #train.binding<param "x">}) -> tensor<f32> {
  %0 = nn.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>,
         ceil_mode = false, channels_last} : tensor<1x6x4x3xf32> -> tensor<1x3x2x3xf32>
  %1 = nn.avg_pool2d %0 {kernel = array<i64: 3, 2>, strides = array<i64: 1, 1>,
         pads = array<i64: 0, 0, 0, 0>, ceil_mode = false,
         count_include_pad = false, channels_last} : tensor<1x3x2x3xf32> -> tensor<1x1x1x3xf32>
  %l = nn.reduce_sum %1 {axes = array<i64: 0, 1, 2, 3>, keepdims = false}
         : tensor<1x1x1x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A channels-last inference batch norm's gradient broadcasts its
// per-channel vectors as [1, 1, 1, C] and sums over N, H, W (the NHWC
// axes 0, 1, 2).
// CHECK-LABEL: func.func @batch_norm_channels_last
// CHECK: nn.reshape %{{.+}} : tensor<3xf32> -> tensor<1x1x1x3xf32>
// CHECK: nn.reduce_sum %{{.+}} {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x4x4x3xf32> -> tensor<3xf32>
// CHECK-NOT: tensor<1x3x1x1xf32>
// CHECK: return
func.func @batch_norm_channels_last(%x: tensor<2x4x4x3xf32> {train.binding = #train.binding<input "x">},
                                    %s: tensor<3xf32> {train.binding = #train.binding<param "bn.weight">},
                                    %b: tensor<3xf32> {train.binding = #train.binding<param "bn.bias">},
                                    %m: tensor<3xf32> {train.binding = #train.binding<param "bn.running_mean">},
                                    %v: tensor<3xf32> {train.binding = #train.binding<param "bn.running_var">})
    -> tensor<f32> {
  %0 = nn.batch_norm %x, %s, %b, %m, %v {epsilon = 1.000000e-05 : f64, channels_last}
         : tensor<2x4x4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>,
           tensor<3xf32> -> tensor<2x4x4x3xf32>
  %1 = nn.mul %0, %0 : tensor<2x4x4x3xf32>, tensor<2x4x4x3xf32> -> tensor<2x4x4x3xf32>
  %l = nn.reduce_sum %1 {axes = array<i64: 0, 1, 2, 3>, keepdims = false}
         : tensor<2x4x4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A slice's gradient is written into zeros, a gather's is added into zeros
// at the indices (repeated ids accumulate); zeros are a broadcast scalar.
// CHECK-LABEL: func.func @embedding
// CHECK-SAME: %[[IDS:[^:]+]]: tensor<2x3xi64>
// CHECK: %[[Z:.+]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[ZS:.+]] = nn.broadcast_to %[[Z]] {shape = array<i64: 2, 3, 4>}
// CHECK: %[[GG:.+]] = nn.insert_slice %[[ZS]], %{{.+}} {starts = array<i64: 0, 0, 1>, steps = array<i64: 1, 1, 2>} : tensor<2x3x4xf32>, tensor<2x3x2xf32> -> tensor<2x3x4xf32>
// CHECK: %[[ZT:.+]] = nn.broadcast_to %{{.+}} {shape = array<i64: 10, 4>}
// CHECK: %[[GT:.+]] = nn.scatter_add %[[ZT]], %[[IDS]], %[[GG]] {axis = 0 : i64} : tensor<10x4xf32>, tensor<2x3xi64>, tensor<2x3x4xf32> -> tensor<10x4xf32>
// CHECK: return %{{.+}}, %[[GT]]
func.func @embedding(%ids: tensor<2x3xi64> {train.binding = #train.binding<input "ids">},
                     %table: tensor<10x4xf32> {train.binding = #train.binding<param "table">})
    -> tensor<f32> {
  %0 = nn.gather %table, %ids {axis = 0 : i64}
         : tensor<10x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %1 = nn.slice %0 {starts = array<i64: 0, 0, 1>, sizes = array<i64: 2, 3, 2>,
         steps = array<i64: 1, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x3x2xf32>
  %l = nn.reduce_sum %1 {axes = array<i64: 0, 1, 2>, keepdims = false}
         : tensor<2x3x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Cross entropy: nll_loss's gradient is -1/count at each row's label (a
// one-hot mask from the class indices), 0 on ignored rows; log_softmax's
// is g - softmax * sum(g).
// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: %[[LABELS:[^:]+]]: tensor<4xi64>
// CHECK: %[[LP:.+]] = nn.log_softmax
// CHECK: %[[IGNORE:.+]] = arith.constant dense<-100> : tensor<i64>
// CHECK: %[[IGNORED:.+]] = nn.equal %[[LABELS]], %[[IGNORE]]
// CHECK: %[[VALID:.+]] = nn.not %[[IGNORED]]
// CHECK: %[[W:.+]] = nn.cast %[[VALID]] : tensor<4xi1> -> tensor<4xf32>
// CHECK: %[[COUNT:.+]] = nn.reduce_sum %[[W]] {axes = array<i64: 0>, keepdims = false}
// CHECK: %[[MEAN:.+]] = nn.div %{{.+}}, %[[COUNT]]
// CHECK: %[[NEG:.+]] = nn.neg %[[MEAN]]
// CHECK: %[[COEF:.+]] = nn.mul %[[NEG]], %[[W]]
// CHECK: %[[MASKED:.+]] = nn.where %[[VALID]], %[[COEF]], %{{.+}}
// CHECK: %[[CLASSES:.+]] = arith.constant dense<{{\[}}[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]> : tensor<1x10xi64>
// CHECK: %[[COLUMN:.+]] = nn.reshape %[[LABELS]] : tensor<4xi64> -> tensor<4x1xi64>
// CHECK: %[[HOT:.+]] = nn.equal %[[CLASSES]], %[[COLUMN]] : tensor<1x10xi64>, tensor<4x1xi64> -> tensor<4x10xi1>
// CHECK: %[[C2:.+]] = nn.reshape %[[MASKED]] : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: %[[GLP:.+]] = nn.where %[[HOT]], %[[C2]], %{{.+}} : tensor<4x10xi1>, tensor<4x1xf32>, tensor<f32> -> tensor<4x10xf32>
// CHECK: %[[SUM:.+]] = nn.reduce_sum %[[GLP]] {axes = array<i64: 1>, keepdims = true}
// CHECK: %[[SM:.+]] = nn.exp %[[LP]]
// CHECK: %[[P:.+]] = nn.mul %[[SM]], %[[SUM]]
// CHECK: %[[GX:.+]] = nn.sub %[[GLP]], %[[P]]
// CHECK: return %{{.+}}, %[[GX]]
func.func @cross_entropy(%logits: tensor<4x10xf32> {train.binding = #train.binding<param "logits">},
                         %labels: tensor<4xi64> {train.binding = #train.binding<label "labels">})
    -> tensor<f32> {
  %0 = nn.log_softmax %logits {axis = 1 : i64}
         : tensor<4x10xf32> -> tensor<4x10xf32>
  %l = nn.nll_loss %0, %labels {reduction = "mean", ignore_index = -100 : i64}
         : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A parameter the step itself updates (a training-mode running statistic,
// returned tagged train.update_of) is a buffer: no gradient, even though
// the loss does not depend on it either way; its update stays a result.
// CHECK-LABEL: func.func @updated_statistics
// CHECK-SAME: -> (tensor<f32>, tensor<3xf32> {train.update_of = "bn.running_mean"}, tensor<3xf32> {train.grad_of = "w"})
// CHECK-SAME: attributes {train.buffers = ["bn.running_mean"]}
func.func @updated_statistics(%x: tensor<3xf32> {train.binding = #train.binding<input "x">},
                              %w: tensor<3xf32> {train.binding = #train.binding<param "w">},
                              %m: tensor<3xf32> {train.binding = #train.binding<param "bn.running_mean">})
    -> (tensor<f32>, tensor<3xf32> {train.update_of = "bn.running_mean"}) {
  %0 = nn.mul %x, %w : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %l = nn.reduce_sum %0 {axes = array<i64: 0>, keepdims = false}
         : tensor<3xf32> -> tensor<f32>
  %1 = nn.add %m, %x : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %l, %1 : tensor<f32>, tensor<3xf32>
}

// -----

// Batch-norm running statistics (parameters that only feed its mean and
// var) are buffers, not trained: no gradient, listed in train.buffers. A
// parameter with another use is trained.
// CHECK-LABEL: func.func @running_statistics
// CHECK-SAME: -> (tensor<f32>, tensor<3xf32> {train.grad_of = "bn.weight"}, tensor<3xf32> {train.grad_of = "bn.bias"}, tensor<3xf32> {train.grad_of = "shared"})
// CHECK-SAME: attributes {train.buffers = ["bn.running_mean", "bn.running_var"]}
func.func @running_statistics(%x: tensor<2x3xf32> {train.binding = #train.binding<input "x">},
                              %s: tensor<3xf32> {train.binding = #train.binding<param "bn.weight">},
                              %b: tensor<3xf32> {train.binding = #train.binding<param "bn.bias">},
                              %m: tensor<3xf32> {train.binding = #train.binding<param "bn.running_mean">},
                              %v: tensor<3xf32> {train.binding = #train.binding<param "bn.running_var">},
                              %u: tensor<3xf32> {train.binding = #train.binding<param "shared">})
    -> tensor<f32> {
  %0 = nn.batch_norm %x, %s, %b, %m, %v {epsilon = 1.000000e-05 : f64}
         : tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>,
           tensor<3xf32> -> tensor<2x3xf32>
  %1 = nn.batch_norm %0, %s, %b, %u, %v {epsilon = 1.000000e-05 : f64}
         : tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>,
           tensor<3xf32> -> tensor<2x3xf32>
  %2 = nn.mul %1, %u : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %l = nn.reduce_sum %2 {axes = array<i64: 0, 1>, keepdims = false}
         : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// layer_norm's scale and bias gradients come from the one
// nn.layer_norm_backward that also gives the input's (results 1 and 2:
// sums over the leading dimensions). reduce_max shares the gradient among
// the elements equal to the maximum.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x3x4xf32>
// CHECK-SAME: %[[G:[^:]+]]: tensor<4xf32>
// CHECK: %[[Y:.+]] = nn.layer_norm
// CHECK: %[[M:.+]] = nn.reduce_max %[[Y]]
// CHECK: %[[MK:.+]] = nn.reshape %[[M]] : tensor<f32> -> tensor<1x1x1xf32>
// CHECK: %[[WIN:.+]] = nn.equal %[[Y]], %[[MK]]
// CHECK: %[[WINF:.+]] = nn.cast %[[WIN]]
// CHECK: %[[COUNT:.+]] = nn.reduce_sum %[[WINF]] {axes = array<i64: 0, 1, 2>, keepdims = true}
// CHECK: %[[SHARE:.+]] = nn.div %{{.+}}, %[[COUNT]]
// CHECK: %[[GY:.+]] = nn.where %[[WIN]], %[[SHARE]], %{{.+}}
// CHECK: %{{.+}}, %[[GG:.+]], %[[GB:.+]] = nn.layer_norm_backward %[[X]], %[[G]], %[[GY]] {axis = 2 : i64, epsilon = 1.000000e-05 : f64} : tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>
// CHECK-NOT: nn.layer_norm
// CHECK: return %{{.+}}, %[[GG]], %[[GB]]
func.func @layer_norm(%x: tensor<2x3x4xf32> {train.binding = #train.binding<input "x">},
                      %g: tensor<4xf32> {train.binding = #train.binding<param "g">},
                      %b: tensor<4xf32> {train.binding = #train.binding<param "b">})
    -> tensor<f32> {
  %0 = nn.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
         : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
  %l = nn.reduce_max %0 {axes = array<i64: 0, 1, 2>, keepdims = false}
         : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The input's gradient, when something trains before the layer_norm, is one
// nn.layer_norm_backward with the forward's scale, axis and epsilon.
// CHECK-LABEL: func.func @layer_norm_input
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x3x4xf32>
// CHECK-SAME: %[[W:[^:]+]]: tensor<2x3x4xf32>
// CHECK-SAME: %[[G:[^:]+]]: tensor<4xf32>
// CHECK: %[[H:.+]] = nn.mul %[[X]], %[[W]]
// CHECK: %[[DH:[^,]+]], %{{.+}}, %{{.+}} = nn.layer_norm_backward %[[H]], %[[G]], %{{.+}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
// CHECK: %[[DW:.+]] = nn.mul %[[DH]], %[[X]]
// CHECK: return %{{.+}}, %[[DW]]
func.func @layer_norm_input(%x: tensor<2x3x4xf32> {train.binding = #train.binding<input "x">},
                            %w: tensor<2x3x4xf32> {train.binding = #train.binding<param "w">},
                            %g: tensor<4xf32> {train.binding = #train.binding<buffer "g">})
    -> tensor<f32> {
  %h = nn.mul %x, %w : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %0 = nn.layer_norm %h, %g {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
         : tensor<2x3x4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
  %l = nn.reduce_sum %0 {axes = array<i64: 0, 1, 2>, keepdims = false}
         : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// concat's gradient is one slice per input; transpose's is the inverse
// permutation.
// CHECK-LABEL: func.func @movement
// CHECK: %[[G:.+]] = nn.broadcast_to
// CHECK: %[[G0:.+]] = nn.slice %[[G]] {sizes = array<i64: 3, 2>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>}
// CHECK: %[[G1:.+]] = nn.slice %[[G]] {sizes = array<i64: 3, 1>, starts = array<i64: 0, 2>, steps = array<i64: 1, 1>}
// CHECK: %[[GX:.+]] = nn.transpose %[[G0]] {perm = array<i64: 1, 0>} : tensor<3x2xf32> -> tensor<2x3xf32>
// CHECK: return %{{.+}}, %[[GX]], %[[G1]]
func.func @movement(%x: tensor<2x3xf32> {train.binding = #train.binding<param "x">},
                    %y: tensor<3x1xf32> {train.binding = #train.binding<param "y">})
    -> tensor<f32> {
  %0 = nn.transpose %x {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = nn.concat %0, %y {axis = 1 : i64}
         : tensor<3x2xf32>, tensor<3x1xf32> -> tensor<3x3xf32>
  %l = nn.reduce_sum %1 {axes = array<i64: 0, 1>, keepdims = false}
         : tensor<3x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A float-to-float cast casts the gradient back; an integer cast is a
// constant to differentiation.
// CHECK-LABEL: func.func @casts
// CHECK-SAME: -> (tensor<f32>, tensor<4xf16> {train.grad_of = "x"})
// CHECK: %[[N:.+]] = nn.cast %{{.+}} : tensor<4xi32> -> tensor<4xf32>
// CHECK: %[[SEED:.+]] = nn.broadcast_to
// CHECK: %[[G:.+]] = nn.mul %[[SEED]], %[[N]]
// CHECK: %[[GX:.+]] = nn.cast %[[G]] : tensor<4xf32> -> tensor<4xf16>
// CHECK: return %{{.+}}, %[[GX]]
func.func @casts(%x: tensor<4xf16> {train.binding = #train.binding<param "x">},
                 %n: tensor<4xi32> {train.binding = #train.binding<input "n">}) -> tensor<f32> {
  %0 = nn.cast %x : tensor<4xf16> -> tensor<4xf32>
  %1 = nn.cast %n : tensor<4xi32> -> tensor<4xf32>
  %2 = nn.mul %0, %1 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %l = nn.reduce_sum %2 {axes = array<i64: 0>, keepdims = false}
         : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The loss may be a parameter itself (gradient: the seed).
// CHECK-LABEL: func.func @loss_is_param
// CHECK-SAME: -> (tensor<f64>, tensor<f64> {train.grad_of = "x"})
// CHECK: %[[ONE:.+]] = arith.constant dense<1.000000e+00> : tensor<f64>
// CHECK: return %{{.+}}, %[[ONE]]
func.func @loss_is_param(%x: tensor<f64> {train.binding = #train.binding<param "x">}) -> tensor<f64> {
  return %x : tensor<f64>
}

// -----

// Without parameters nothing changes.
// CHECK-LABEL: func.func @no_params
// CHECK-SAME: -> tensor<f32> {
// CHECK-NEXT: nn.reduce_sum
// CHECK-NEXT: return
func.func @no_params(%x: tensor<4xf32>) -> tensor<f32> {
  %l = nn.reduce_sum %x {axes = array<i64: 0>, keepdims = false}
         : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Dropout's random numbers depend on the integer key alone, off the gradient
// path: the mask drawn in the forward pass gates the gradient (nn.where's
// product), nothing is drawn again and the key gets no gradient.
// CHECK-LABEL: func.func @dropout
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32> {train.binding = #train.binding<input "x">}, %{{.+}}: tensor<4xf32> {train.binding = #train.binding<param "w">}, %{{.+}}: tensor<i64> {train.binding = #train.binding<hyper "rng">})
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"})
// CHECK: %[[U:.+]] = nn.random_uniform
// CHECK: %[[DROP:.+]] = nn.less %[[U]]
// CHECK: %[[KEEP:.+]] = nn.not %[[DROP]]
// CHECK: %[[SEED:.+]] = nn.broadcast_to
// CHECK: %[[GS:.+]] = nn.where %[[KEEP]], %[[SEED]], %{{.+}} : tensor<4xi1>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK: %[[GM:.+]] = nn.mul %[[GS]], %{{.+}} : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK: %[[GW:.+]] = nn.mul %[[GM]], %[[X]] : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK-NOT: nn.random_uniform
// CHECK: return %{{.+}}, %[[GW]]
func.func @dropout(%x: tensor<4xf32> {train.binding = #train.binding<input "x">},
                   %w: tensor<4xf32> {train.binding = #train.binding<param "w">},
                   %rng: tensor<i64> {train.binding = #train.binding<hyper "rng">})
    -> tensor<f32> {
  %half = arith.constant dense<0.5> : tensor<f32>
  %two = arith.constant dense<2.0> : tensor<f32>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %u = nn.random_uniform %rng {stream = 1 : i64} : tensor<i64> -> tensor<4xf32>
  %drop = nn.less %u, %half : tensor<4xf32>, tensor<f32> -> tensor<4xi1>
  %keep = nn.not %drop : tensor<4xi1> -> tensor<4xi1>
  %h = nn.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %s = nn.mul %h, %two : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %y = nn.where %keep, %s, %zero : tensor<4xi1>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false}
         : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
