// RUN: ztc-opt %s -split-input-file --ztc-lora="r=2 alpha=4 targets=q|fc" | FileCheck %s
// RUN: ztc-opt %s -split-input-file --ztc-lora="r=2 alpha=4 targets=q|fc rslora=true bias=lora_only modules-to-save=norm seed=3" | FileCheck %s --check-prefix=OPTS
// RUN: ztc-opt %s -split-input-file --ztc-lora="r=2 alpha=4 targets=q dropout=0.25" | FileCheck %s --check-prefix=DROP
// RUN: ztc-opt %s -split-input-file --ztc-lora="r=2 alpha=4 targets=^blk\.q" | FileCheck %s --check-prefix=WHOLE
// RUN: ztc-opt %s -split-input-file --ztc-lora="r=2 alpha=4 targets=q base-dtype=nf4" | FileCheck %s --check-prefix=NF4

// ztc-lora: adapters on the matrix products of the target modules, the
// rest frozen. A Linear's [out, in] weight read through a transpose
// (blk.q) and a Conv1D's [in, out] weight read directly (blk.fc), each
// gets lora_A [r, in] (uniform in +-1/sqrt(in)) and lora_B [out, r]
// (zeros); the product gains (x A^T) B^T times alpha / r = 2. Everything
// else is frozen, the biases too (bias=none). The adapters are listed on
// the function for the manifest.
// CHECK-LABEL: func.func @block
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x8xf32> {train.binding = #train.binding<input "x">}
// CHECK-SAME: tensor<16x8xf32> {train.binding = #train.binding<param "blk.q.weight">, train.frozen}
// CHECK-SAME: tensor<16xf32> {train.binding = #train.binding<param "blk.q.bias">, train.frozen}
// CHECK-SAME: tensor<16x6xf32> {train.binding = #train.binding<param "blk.fc.weight">, train.frozen}
// CHECK-SAME: tensor<16xf32> {train.binding = #train.binding<param "blk.norm.weight">, train.frozen}
// CHECK-SAME: %[[QA:[^:]+]]: tensor<2x8xf32> {train.binding = #train.binding<param "blk.q.lora_A.weight">, train.initial_uniform = {bound = 0.35355339059327373 : f64, seed = {{-?[0-9]+}} : i64}}
// CHECK-SAME: %[[QB:[^:]+]]: tensor<16x2xf32> {train.binding = #train.binding<param "blk.q.lora_B.weight">, train.initial_uniform = {bound = 0.000000e+00 : f64, seed = {{-?[0-9]+}} : i64}}
// CHECK-SAME: tensor<2x16xf32> {train.binding = #train.binding<param "blk.fc.lora_A.weight">, train.initial_uniform = {bound = 2.500000e-01 : f64
// CHECK-SAME: tensor<6x2xf32> {train.binding = #train.binding<param "blk.fc.lora_B.weight">
// CHECK-SAME: train.lora = {adapters = {{\[}}["blk.q.weight", "blk.q.lora_A.weight", "blk.q.lora_B.weight", "out_in"], ["blk.fc.weight", "blk.fc.lora_A.weight", "blk.fc.lora_B.weight", "in_out"]], alpha = 4.000000e+00 : f64, bias = "none", dropout = 0.000000e+00 : f64, r = 2 : i64, rslora = false, scale = 2.000000e+00 : f64}
// CHECK: %[[Y:.+]] = nn.matmul %[[X]], %{{.+}} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK: %[[AT:.+]] = nn.transpose %[[QA]] {perm = array<i64: 1, 0>}
// CHECK: %[[BT:.+]] = nn.transpose %[[QB]] {perm = array<i64: 1, 0>}
// CHECK: %[[DOWN:.+]] = nn.matmul %[[X]], %[[AT]] : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK: %[[UP:.+]] = nn.matmul %[[DOWN]], %[[BT]] : tensor<4x2xf32>, tensor<2x16xf32> -> tensor<4x16xf32>
// CHECK: %[[S:.+]] = arith.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[SCALED:.+]] = nn.mul %[[UP]], %[[S]]
// CHECK: %[[SUM:.+]] = nn.add %[[Y]], %[[SCALED]]
// CHECK: nn.add %[[SUM]], %{{.+}} : tensor<4x16xf32>, tensor<16xf32>
// The Conv1D: no transpose of the weight, [in, out] = [16, 6].
// CHECK: nn.matmul %{{.+}}, %{{.+}} : tensor<4x16xf32>, tensor<16x6xf32> -> tensor<4x6xf32>
// CHECK: nn.matmul %{{.+}}, %{{.+}} : tensor<4x16xf32>, tensor<16x2xf32> -> tensor<4x2xf32>
// CHECK: nn.matmul %{{.+}}, %{{.+}} : tensor<4x2xf32>, tensor<2x6xf32> -> tensor<4x6xf32>

// rslora scales by alpha / sqrt(r); bias=lora_only trains the adapted
// modules' biases; modules-to-save trains blk.norm whole; the seed moves
// the draws.
// OPTS-LABEL: func.func @block
// OPTS-SAME: {train.binding = #train.binding<param "blk.q.weight">, train.frozen}
// OPTS-SAME: {train.binding = #train.binding<param "blk.q.bias">}
// OPTS-SAME: {train.binding = #train.binding<param "blk.fc.weight">, train.frozen}
// OPTS-SAME: {train.binding = #train.binding<param "blk.norm.weight">}
// OPTS-SAME: scale = 2.82842712474618{{[0-9]*}} : f64
// OPTS: arith.constant dense<2.82842708> : tensor<f32>

// dropout > 0: the adapters' input is dropped in training (a stream per
// module, under the random key `rng` it adds), kept in evaluation.
// DROP-LABEL: func.func @block
// DROP-SAME: tensor<i64> {train.binding = #train.binding<hyper "rng">}
// DROP: %[[U:.+]] = nn.random_uniform %{{.+}} {stream = {{-?[0-9]+}} : i64} : tensor<i64> -> tensor<4x8xf32>
// DROP: nn.less %[[U]]
// DROP: %[[KEEP:.+]] = nn.not
// DROP: %[[SCALED:.+]] = nn.mul %{{.+}}, %{{.+}} : tensor<4x8xf32>, tensor<f32>
// DROP: %[[W:.+]] = nn.where %[[KEEP]], %[[SCALED]]
// DROP: %[[XD:.+]] = nn.mode_select %[[W]], %{{.+}} : tensor<4x8xf32>
// DROP: nn.matmul %[[XD]], %{{.+}} : tensor<4x8xf32>, tensor<8x2xf32>

// A `targets` starting with ^ matches whole names: ^blk\.q adapts blk.q
// (the anchored form of peft's string target_modules).
// WHOLE-LABEL: func.func @block
// WHOLE-SAME: "blk.q.lora_A.weight"
// WHOLE-NOT: "blk.fc.lora_A.weight"
// base-dtype=nf4 (QLoRA): the frozen weights only products read are
// tagged for ztc-nf4-weights, with their shape, but the output layer's
// (blk.fc's product is the result: Hugging Face keeps lm_head).
// NF4-LABEL: func.func @block
// NF4-SAME: tensor<16x8xf32> {train.binding = #train.binding<param "blk.q.weight">, train.frozen, train.nf4 = array<i64: 16, 8>}
// NF4-SAME: tensor<16xf32> {train.binding = #train.binding<param "blk.q.bias">, train.frozen}
// NF4-SAME: tensor<16x6xf32> {train.binding = #train.binding<param "blk.fc.weight">, train.frozen}
// NF4-SAME: tensor<16xf32> {train.binding = #train.binding<param "blk.norm.weight">, train.frozen}
func.func @block(%x: tensor<4x8xf32> {train.binding = #train.binding<input "x">},
                 %wq: tensor<16x8xf32> {train.binding = #train.binding<param "blk.q.weight">},
                 %bq: tensor<16xf32> {train.binding = #train.binding<param "blk.q.bias">},
                 %wfc: tensor<16x6xf32> {train.binding = #train.binding<param "blk.fc.weight">},
                 %g: tensor<16xf32> {train.binding = #train.binding<param "blk.norm.weight">})
    -> tensor<4x6xf32> {
  %t = nn.transpose %wq {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %y = nn.matmul %x, %t : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %yb = nn.add %y, %bq : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %n = nn.mul %yb, %g : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %z = nn.matmul %n, %wfc : tensor<4x16xf32>, tensor<16x6xf32> -> tensor<4x6xf32>
  return %z : tensor<4x6xf32>
}
