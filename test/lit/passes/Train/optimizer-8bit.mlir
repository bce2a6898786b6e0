// RUN: ztc-opt %s --ztc-optimizer="optimizer=adamw8bit" | FileCheck %s
// RUN: ztc-opt %s --ztc-optimizer="optimizer=adamw_bnb_8bit" | FileCheck %s
// RUN: ztc-opt %s --ztc-optimizer="optimizer=adam8bit" | FileCheck %s --check-prefix=ADAM
// RUN: ztc-opt %s --ztc-optimizer="optimizer=adamw8bit" --ztc-zero="stage=2 world-size=2 shard-alignment=256" | FileCheck %s --check-prefix=ZERO
// RUN: not ztc-opt %s --ztc-optimizer="optimizer=adamw8bit" --ztc-zero="stage=2 world-size=2" 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: ztc-opt %s --ztc-optimizer="optimizer=adamw8bit" --ztc-lower-train --ztc-convert-nn-to-kernel | FileCheck %s --check-prefix=KERNEL

// bitsandbytes' 8-bit Adam: a parameter of 4096 elements or more (w, 7000)
// gets each moment as one i8 code per element and one f32 scale per 256
// elements (28: the last block is partial) and a train.adam8bit; a smaller
// one (b) keeps f32 moments and train.adam, whose weight decay is
// decoupled as bitsandbytes' is. The Hugging Face Trainer's name
// (adamw_bnb_8bit) is the same optimizer.

// CHECK-LABEL: func.func @step
// CHECK-SAME: tensor<7000xi8> {train.binding = #train.binding<state "w.exp_avg">}
// CHECK-SAME: tensor<28xf32> {train.binding = #train.binding<state "w.exp_avg_absmax">}
// CHECK-SAME: tensor<7000xi8> {train.binding = #train.binding<state "w.exp_avg_sq">}
// CHECK-SAME: tensor<28xf32> {train.binding = #train.binding<state "w.exp_avg_sq_absmax">}
// CHECK-SAME: tensor<100xf32> {train.binding = #train.binding<state "b.exp_avg">}
// CHECK-SAME: tensor<100xf32> {train.binding = #train.binding<state "b.exp_avg_sq">}
// CHECK-SAME: tensor<70x100xf32> {train.update_of = "w"}, tensor<7000xi8> {train.update_of = "w.exp_avg"}, tensor<28xf32> {train.update_of = "w.exp_avg_absmax"}, tensor<7000xi8> {train.update_of = "w.exp_avg_sq"}, tensor<28xf32> {train.update_of = "w.exp_avg_sq_absmax"}
// CHECK: train.adam8bit %{{.+}} {weight_decay = 1.000000e-02 : f64} : tensor<70x100xf32>, tensor<70x100xf32>, tensor<7000xi8>, tensor<28xf32>, tensor<7000xi8>, tensor<28xf32>, tensor<f32>, tensor<f32> -> tensor<70x100xf32>, tensor<7000xi8>, tensor<28xf32>, tensor<7000xi8>, tensor<28xf32>
// CHECK: train.adam %{{.+}} {decoupled, weight_decay = 1.000000e-02 : f64} : tensor<100xf32>

// ADAM: train.adam8bit %{{[^{]+}} : tensor<70x100xf32>
// ADAM: train.adam %{{.+}} {decoupled} : tensor<100xf32>

// ZeRO: each rank's block of w is 3584 elements (3500 rounded up to whole
// blocks of 256), its codes 3584 and its scales 14.
// ZERO-LABEL: func.func @step
// ZERO-SAME: tensor<3584xi8> {dist.full_shape = array<i64: 7000>, train.binding = #train.binding<state "w.exp_avg">}
// ZERO-SAME: tensor<14xf32> {dist.full_shape = array<i64: 28>, train.binding = #train.binding<state "w.exp_avg_absmax">}
// ZERO: dist.reduce_scatter
// ZERO: train.adam8bit %{{.+}} : tensor<3584xf32>, tensor<3584xf32>, tensor<3584xi8>, tensor<14xf32>, tensor<3584xi8>, tensor<14xf32>, tensor<f32>, tensor<f32> -> tensor<3584xf32>, tensor<3584xi8>, tensor<14xf32>, tensor<3584xi8>, tensor<14xf32>
// ZERO: dist.all_gather

// SPLIT: error: ztc-zero: a block of 3500 elements splits the 8-bit state's blocks of 256; run with shard-alignment=256

// The update is one library call writing the parameter, codes and scales.
// KERNEL: kernel.call "adam8bit" ins(%{{.+}} : memref<70x100xf32>, memref<70x100xf32>, memref<7000xi8>, memref<28xf32>, memref<7000xi8>, memref<28xf32>, memref<f32>, memref<f32>) outs(%{{.+}} : memref<70x100xf32>, memref<7000xi8>, memref<28xf32>, memref<7000xi8>, memref<28xf32>) {config = {beta1 = {{.+}}, weight_decay = 1.000000e-02 : f64}}
func.func @step(%x: tensor<70x100xf32> {train.binding = #train.binding<input "x">},
                %w: tensor<70x100xf32> {train.binding = #train.binding<param "w">},
                %b: tensor<100xf32> {train.binding = #train.binding<param "b">})
    -> (tensor<f32>, tensor<70x100xf32> {train.grad_of = "w"},
        tensor<100xf32> {train.grad_of = "b"})
    attributes {train.entry = "train_step"} {
  %loss = nn.reduce_sum %b {axes = array<i64: 0>, keepdims = false} : tensor<100xf32> -> tensor<f32>
  %gw = nn.mul %x, %w : tensor<70x100xf32>, tensor<70x100xf32> -> tensor<70x100xf32>
  %gb = nn.neg %b : tensor<100xf32> -> tensor<100xf32>
  return %loss, %gw, %gb : tensor<f32>, tensor<70x100xf32>, tensor<100xf32>
}
