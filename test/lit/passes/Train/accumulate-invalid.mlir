// RUN: ztc-opt %s -split-input-file --ztc-accumulate="micro-batches=2" -verify-diagnostics

// Accumulation rewrites the training step: ztc-build-entries makes it.
// expected-error @+1 {{gradient accumulation needs a @train_step entry; run ztc-build-entries first}}
module {
  func.func @main() { return }
}

// -----

// Every result after the loss is a gradient or an update.
module {
  // expected-error @+1 {{result 1 is neither the loss, a gradient nor an update}}
  func.func @train_step(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>)
      attributes {train.entry = "train_step"} {
    %loss = arith.constant dense<1.0> : tensor<f32>
    return %loss, %x : tensor<f32>, tensor<4xf32>
  }
}
