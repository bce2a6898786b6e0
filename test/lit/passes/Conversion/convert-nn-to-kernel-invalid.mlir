// RUN: ztc-opt %s -split-input-file -ztc-convert-nn-to-kernel -verify-diagnostics

// A finite check names the part of the step its op belongs to, one of
// kernel.check_finite's passes (forward, backward, "recomputed forward",
// update).
func.func @unknown_pass(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'train.finite_check' names no pass of a step: 'sideways'}}
  %y = nn.neg %x {train.finite_check = {node = "n", op = "neg", pass = "sideways"}} : tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}
