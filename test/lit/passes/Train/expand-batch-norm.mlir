// RUN: ztc-opt %s --split-input-file --ztc-expand-batch-norm | FileCheck %s
// RUN: ztc-opt %s --split-input-file --ztc-lower-to-kernel-pipeline | FileCheck %s --check-prefix=KERNEL

// The forward: the channel means of x and of its squares in f64 (a cast
// for each, so each fuses into its reduction), the variance E[x^2] - E[x]^2
// in f64 (0 where rounding makes it negative), both rounded to f32, and
// the result from x again, scaled and shifted; the statistics as [C]
// vectors. Lowered, the two means are one reduction reading x alone (no
// centered input, no f64 copy stored) and the result, with the ReLU after
// it, one loop.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.+]]: tensor<8x4x6x6xf32>, %[[S:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<4xf32>)
// CHECK: %[[W1:.+]] = nn.cast %[[X]] : tensor<8x4x6x6xf32> -> tensor<8x4x6x6xf64>
// CHECK: %[[MEAN64:.+]] = nn.reduce_mean %[[W1]] {axes = array<i64: 0, 2, 3>, keepdims = true} : tensor<8x4x6x6xf64> -> tensor<1x4x1x1xf64>
// CHECK: %[[W2:.+]] = nn.cast %[[X]] : tensor<8x4x6x6xf32> -> tensor<8x4x6x6xf64>
// CHECK: %[[SQ:.+]] = nn.mul %[[W2]], %[[W2]]
// CHECK: %[[SQMEAN:.+]] = nn.reduce_mean %[[SQ]] {axes = array<i64: 0, 2, 3>, keepdims = true}
// CHECK: %[[MM:.+]] = nn.mul %[[MEAN64]], %[[MEAN64]]
// CHECK: %[[D:.+]] = nn.sub %[[SQMEAN]], %[[MM]]
// CHECK: %[[NEG:.+]] = nn.less %[[D]], %[[ZERO:.+]] :
// CHECK: %[[VAR64:.+]] = nn.where %[[NEG]], %[[ZERO]], %[[D]]
// CHECK: %[[MEAN:.+]] = nn.cast %[[MEAN64]] : tensor<1x4x1x1xf64> -> tensor<1x4x1x1xf32>
// CHECK: %[[VAR:.+]] = nn.cast %[[VAR64]] : tensor<1x4x1x1xf64> -> tensor<1x4x1x1xf32>
// CHECK: %[[SHIFT:.+]] = nn.add %[[VAR]], %{{.+}}
// CHECK: %[[ROOT:.+]] = nn.sqrt %[[SHIFT]]
// CHECK: %[[RSTD:.+]] = nn.reciprocal %[[ROOT]]
// CHECK: %[[C2:.+]] = nn.sub %[[X]], %[[MEAN]]
// CHECK: %[[N:.+]] = nn.mul %[[C2]], %[[RSTD]]
// CHECK: %[[S4:.+]] = nn.reshape %[[S]] : tensor<4xf32> -> tensor<1x4x1x1xf32>
// CHECK: %[[SN:.+]] = nn.mul %[[N]], %[[S4]]
// CHECK: %[[B4:.+]] = nn.reshape %[[B]] : tensor<4xf32> -> tensor<1x4x1x1xf32>
// CHECK: %[[Y:.+]] = nn.add %[[SN]], %[[B4]]
// CHECK: %[[M1:.+]] = nn.reshape %[[MEAN]] : tensor<1x4x1x1xf32> -> tensor<4xf32>
// CHECK: %[[V1:.+]] = nn.reshape %[[VAR]] : tensor<1x4x1x1xf32> -> tensor<4xf32>
// CHECK: %[[R:.+]] = nn.max %[[Y]]
// CHECK: return %[[R]], %[[M1]], %[[V1]]
// CHECK-NOT: batch_norm_training
// KERNEL-LABEL: func.func @forward
// KERNEL-SAME: (%[[KX:[^ ]+]]: memref<8x4x6x6xf32>
// KERNEL-NOT: kernel.call "reduce_mean"
// KERNEL-NOT: memref<8x4x6x6xf64>
// KERNEL: kernel.reduce mean ins(%[[KX]] : memref<8x4x6x6xf32>) outs(%{{.+}}, %{{.+}} : memref<1x4x1x1xf64>, memref<1x4x1x1xf64>)
// KERNEL: arith.extf
// KERNEL: arith.mulf {{.+}} : f64
// KERNEL: kernel.yield {{.+}} : f64, f64
// KERNEL-NOT: kernel.reduce
// KERNEL-NOT: memref<8x4x6x6xf64>
// KERNEL: kernel.elementwise ins({{.+}}) outs(%{{.+}} : memref<8x4x6x6xf32>)
// KERNEL: arith.maximumf
// KERNEL-NOT: kernel.elementwise {{.*}}outs({{.*}}memref<8x4x6x6xf32>
func.func @forward(%x: tensor<8x4x6x6xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>)
    -> (tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>) {
  %y, %m, %v = nn.batch_norm_training %x, %s, %b {epsilon = 1.0e-05 : f64}
      : tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>
      -> tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %r = nn.max %y, %zero : tensor<8x4x6x6xf32>, tensor<f32> -> tensor<8x4x6x6xf32>
  return %r, %m, %v : tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// In f64 the statistics take two passes, the mean and then the mean of the
// squared differences from it: there is no wider type to square in.
// CHECK-LABEL: func.func @forward_f64
// CHECK-NOT: nn.cast
// CHECK: %[[MEAN:.+]] = nn.reduce_mean %[[X:[^ ]+]] {axes = array<i64: 0, 2, 3>, keepdims = true} : tensor<8x4x6x6xf64> -> tensor<1x4x1x1xf64>
// CHECK: %[[C:.+]] = nn.sub %[[X]], %[[MEAN]]
// CHECK: %[[SQ:.+]] = nn.mul %[[C]], %[[C]]
// CHECK: nn.reduce_mean %[[SQ]] {axes = array<i64: 0, 2, 3>, keepdims = true}
func.func @forward_f64(%x: tensor<8x4x6x6xf64>, %s: tensor<4xf64>, %b: tensor<4xf64>)
    -> (tensor<8x4x6x6xf64>, tensor<4xf64>, tensor<4xf64>) {
  %y, %m, %v = nn.batch_norm_training %x, %s, %b {epsilon = 1.0e-05 : f64}
      : tensor<8x4x6x6xf64>, tensor<4xf64>, tensor<4xf64>
      -> tensor<8x4x6x6xf64>, tensor<4xf64>, tensor<4xf64>
  return %y, %m, %v : tensor<8x4x6x6xf64>, tensor<4xf64>, tensor<4xf64>
}

// -----

// The backward: sum(g) and sum(g * (x - mean)) over each channel, then
// the input's gradient elementwise from them; the scale's gradient is the
// second sum times rstd, the bias's the first. Lowered: one reduction
// reading g, x and the mean into both sums (ztc-fuse merges the two), one
// loop writing the gradient.
// CHECK-LABEL: func.func @backward
// CHECK-SAME: (%[[X:.+]]: tensor<8x4x6x6xf32>, %[[S:.+]]: tensor<4xf32>, %[[M:.+]]: tensor<4xf32>, %[[V:.+]]: tensor<4xf32>, %[[G:.+]]: tensor<8x4x6x6xf32>)
// CHECK: %[[M4:.+]] = nn.reshape %[[M]] : tensor<4xf32> -> tensor<1x4x1x1xf32>
// CHECK: %[[V4:.+]] = nn.reshape %[[V]] : tensor<4xf32> -> tensor<1x4x1x1xf32>
// CHECK: %[[RSTD:.+]] = nn.reciprocal
// CHECK: %[[SUM:.+]] = nn.reduce_sum %[[G]] {axes = array<i64: 0, 2, 3>, keepdims = true}
// CHECK: %[[C:.+]] = nn.sub %[[X]], %[[M4]]
// CHECK: %[[GC:.+]] = nn.mul %[[G]], %[[C]]
// CHECK: %[[SUMC:.+]] = nn.reduce_sum %[[GC]] {axes = array<i64: 0, 2, 3>, keepdims = true}
// CHECK: %[[S4:.+]] = nn.reshape %[[S]] : tensor<4xf32> -> tensor<1x4x1x1xf32>
// CHECK: %[[GAIN:.+]] = nn.mul %[[S4]], %[[RSTD]]
// CHECK: %[[C2:.+]] = nn.sub %[[X]], %[[M4]]
// CHECK: %[[DX:.+]] = nn.mul %{{.+}}, %[[GAIN]] : tensor<8x4x6x6xf32>, tensor<1x4x1x1xf32> -> tensor<8x4x6x6xf32>
// CHECK: %[[DS:.+]] = nn.mul %[[SUMC]], %[[RSTD]]
// CHECK: %[[DS1:.+]] = nn.reshape %[[DS]] : tensor<1x4x1x1xf32> -> tensor<4xf32>
// CHECK: %[[DB1:.+]] = nn.reshape %[[SUM]] : tensor<1x4x1x1xf32> -> tensor<4xf32>
// CHECK: return %[[DX]], %[[DS1]], %[[DB1]]
// KERNEL-LABEL: func.func @backward
// KERNEL-SAME: %[[KG:[^ ]+]]: memref<8x4x6x6xf32>) ->
// KERNEL-NOT: kernel.call "reduce_sum"
// KERNEL: kernel.reduce sum ins(%[[KG]], %{{.+}}, %{{.+}} : memref<8x4x6x6xf32>, memref<8x4x6x6xf32>, memref<1x4x1x1xf32>) outs(%{{.+}}, %{{.+}} : memref<1x4x1x1xf32>, memref<1x4x1x1xf32>)
// KERNEL: kernel.yield %{{.+}}, %{{.+}} : f32, f32
// KERNEL-NOT: kernel.call "reduce_sum"
// KERNEL: kernel.elementwise ins({{.+}}) outs(%{{.+}} : memref<8x4x6x6xf32>)
// KERNEL-NOT: kernel.elementwise {{.*}}outs({{.*}}memref<8x4x6x6xf32>
func.func @backward(%x: tensor<8x4x6x6xf32>, %s: tensor<4xf32>, %m: tensor<4xf32>,
                    %v: tensor<4xf32>, %g: tensor<8x4x6x6xf32>)
    -> (tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>) {
  %dx, %ds, %db = nn.batch_norm_training_backward %x, %s, %m, %v, %g {epsilon = 1.0e-05 : f64}
      : tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8x4x6x6xf32>
      -> tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>
  return %dx, %ds, %db : tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Left alone: the inference batch norm, a kernel of its own.
// CHECK-LABEL: func.func @inference
// CHECK: nn.batch_norm %{{.+}} {epsilon = 1.000000e-05 : f64}
// KERNEL-LABEL: func.func @inference
// KERNEL: kernel.call "batch_norm"
func.func @inference(%x: tensor<8x4x6x6xf32>, %c: tensor<4xf32>) -> tensor<8x4x6x6xf32> {
  %y = nn.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-05 : f64}
      : tensor<8x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
      -> tensor<8x4x6x6xf32>
  return %y : tensor<8x4x6x6xf32>
}
