// RUN: not ztc-opt %s --ztc-autodiff --ztc-recompute=policy=checkpoint 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not ztc-opt %s --ztc-autodiff --ztc-recompute=policy=budget 2>&1 | FileCheck %s --check-prefix=NOBUDGET
// RUN: not ztc-opt %s --ztc-autodiff --ztc-recompute="policy=sqrt budget=1GiB" 2>&1 | FileCheck %s --check-prefix=NOTBUDGET
// RUN: not ztc-opt %s --ztc-autodiff --ztc-recompute="policy=budget budget=1GiB" 2>&1 | FileCheck %s --check-prefix=ALONE
// RUN: not ztc-opt %s --ztc-autodiff --ztc-recompute="policy=budget budget=3XB" 2>&1 | FileCheck %s --check-prefix=UNIT
// RUN: not ztc-opt %s --ztc-autodiff --ztc-recompute="policy=budget budget=150%" 2>&1 | FileCheck %s --check-prefix=SHARE
// RUN: not ztc-opt %s --ztc-autodiff --ztc-recompute="policy=budget budget=-2" 2>&1 | FileCheck %s --check-prefix=NUMBER
// RUN: not ztc-opt %s --ztc-autodiff --ztc-recompute=policy=full 2>&1 | FileCheck %s --check-prefix=NOBLOCK
// RUN: not ztc-opt %s --ztc-autodiff --ztc-recompute="policy=full blocks=/encoder" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not ztc-opt %s --ztc-autodiff --ztc-recompute="policy=full blocks=/h[" 2>&1 | FileCheck %s --check-prefix=REGEX

// Every ztc-recompute diagnostic, on a model whose node names have no
// numbered scope. The policy is an enum option: its parser names a value
// outside the set.

// POLICY: for the --policy option: Cannot find option named 'checkpoint'!
// NOBUDGET: error: --recompute 'budget=': expected budget=BYTES (such as 8GiB, 7.5GB, 512MiB or 6000000000) or a fraction of the peak without recomputation (0.6 or 60%)
// NOTBUDGET: error: ztc-recompute: budget applies to policy budget, not sqrt
// ALONE: error: --recompute budget=1GiB: budget mode measures each plan by planning the rest of the step; run it in the training pipeline (ztc compile, ztc inspect, or ztc-opt --ztc-training-pipeline)
// UNIT: error: --recompute 'budget=3XB': unknown unit 'XB'; expected budget=BYTES (such as 8GiB, 7.5GB, 512MiB or 6000000000) or a fraction of the peak without recomputation (0.6 or 60%)
// SHARE: error: --recompute 'budget=150%': a share of the peak is at most 100%
// NUMBER: error: --recompute 'budget=-2': expected budget=BYTES
// NOBLOCK: error: --recompute full: no block found: no node name has a numbered scope (such as /h.0/ or /layer1/) and no run of ops repeats; name the blocks with --recompute-blocks REGEX
// NOMATCH: error: --recompute-blocks '/encoder' matches no node name
// REGEX: error: --recompute-blocks '/h[' is not a valid regular expression: brackets ([ ]) not balanced

func.func @step(%x: tensor<4x8xf32> {train.binding = #train.binding<input "x">},
                %w: tensor<8x8xf32> {train.binding = #train.binding<param "w">})
    -> tensor<f32> {
  %h = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc("/fc/MatMul")
  %t = nn.tanh %h : tensor<4x8xf32> -> tensor<4x8xf32> loc("/act/Tanh")
  %l = nn.reduce_sum %t {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32> loc("/ReduceSum")
  return %l : tensor<f32>
}
