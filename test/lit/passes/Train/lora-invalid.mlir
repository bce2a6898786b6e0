// RUN: ztc-opt %s -split-input-file --ztc-lora="targets=q" -verify-diagnostics
// RUN: not ztc-opt %s -split-input-file --ztc-lora="targets=^q" 2>&1 | FileCheck %s --check-prefix=WHOLE
// RUN: not ztc-opt %s -split-input-file --ztc-lora="r=0 targets=q" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not ztc-opt %s -split-input-file --ztc-lora="targets=q bias=some" 2>&1 | FileCheck %s --check-prefix=BIAS
// RUN: not ztc-opt %s -split-input-file --ztc-lora="targets=q[" 2>&1 | FileCheck %s --check-prefix=BADRE
// RUN: not ztc-opt %s -split-input-file --ztc-lora="targets=q dropout=1" 2>&1 | FileCheck %s --check-prefix=DROPOUT
// RUN: not ztc-opt %s -split-input-file --ztc-lora 2>&1 | FileCheck %s --check-prefix=NONE

// Every ztc-lora diagnostic, one case each.

// ^ anchors the whole name: `q` is no module's whole name.
// WHOLE: error: --lora targets '^q' match no parameter's module (names such as 'blk.q')
// RANK: error: --lora r must be at least 1, got 0
// BIAS: for the --bias option: Cannot find option named 'some'!
// BADRE: error: invalid regular expression 'q[' in --lora targets: brackets ([ ]) not balanced
// DROPOUT: error: --lora dropout must be in [0, 1), got 1
// NONE: error: --lora needs targets=REGEX: the modules to adapt (for example q_proj|v_proj, or c_attn for GPT-2)
func.func @block(%x: tensor<4x8xf32> {train.binding = #train.binding<input "x">},
                 %wq: tensor<16x8xf32> {train.binding = #train.binding<param "blk.q.weight">})
    -> tensor<4x16xf32> {
  %t = nn.transpose %wq {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %y = nn.matmul %x, %t : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Nothing matches.
// expected-error @+1 {{--lora targets 'q' match no parameter's module (names such as 'blk.k')}}
func.func @nothing(%x: tensor<4x8xf32> {train.binding = #train.binding<input "x">},
                   %wk: tensor<16x8xf32> {train.binding = #train.binding<param "blk.k.weight">})
    -> tensor<4x16xf32> {
  %t = nn.transpose %wk {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %y = nn.matmul %x, %t : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// A target that no matrix product reads (a norm's scale).
// expected-error @+1 {{--lora targets 'q' match 'norm.q.weight' ('tensor<8xf32>'), which is not the weight of a matrix product (a Linear's [out, in] or a Conv1D's [in, out]); narrow targets to the projections}}
func.func @not_a_product(%x: tensor<4x8xf32> {train.binding = #train.binding<input "x">},
                         %g: tensor<8xf32> {train.binding = #train.binding<param "norm.q.weight">})
    -> tensor<4x8xf32> {
  %y = nn.mul %x, %g : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// An adapter's name is taken: the model is already adapted.
// expected-error @+1 {{--lora: the model already has a tensor named 'blk.q.lora_A.weight'; is it already adapted?}}
func.func @adapted(%x: tensor<4x8xf32> {train.binding = #train.binding<input "x">},
                   %wq: tensor<16x8xf32> {train.binding = #train.binding<param "blk.q.weight">},
                   %a: tensor<2x8xf32> {train.binding = #train.binding<param "blk.q.lora_A.weight">})
    -> tensor<4x16xf32> {
  %t = nn.transpose %wq {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %y = nn.matmul %x, %t : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// One weight read both ways.
// expected-error @+1 {{--lora: 'blk.q.weight' is read both as [in, out] and as [out, in]}}
func.func @both_ways(%x: tensor<4x8xf32> {train.binding = #train.binding<input "x">},
                     %wq: tensor<8x8xf32> {train.binding = #train.binding<param "blk.q.weight">})
    -> tensor<4x8xf32> {
  %t = nn.transpose %wq {perm = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %y = nn.matmul %x, %t : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %z = nn.matmul %y, %wq : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}
