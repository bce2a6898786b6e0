// RUN: ztc-opt %s -split-input-file --ztc-build-entries="entries=train_step" -verify-diagnostics

// Entries come from exactly one model function.
// expected-error @+1 {{ztc-build-entries needs a module with one function (the model's step), found 2}}
module {
  func.func @a() { return }
  func.func @b() { return }
}

// -----

// A training entry needs the loss first: ztc-attach-loss has not run.
// expected-error @+1 {{entry 'train_step' needs a function returning a scalar float loss first; run ztc-attach-loss and ztc-autodiff}}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
