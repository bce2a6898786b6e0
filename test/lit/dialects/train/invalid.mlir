// RUN: ztc-opt %s -split-input-file -verify-diagnostics

// Every train diagnostic, one case each: the op verifiers and the
// verification of train.* attributes on functions, arguments and results.

func.func @sgd_grad_type(%p: tensor<4xf32>, %g: tensor<3xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd' op expects grad of the parameter's type 'tensor<4xf32>', got 'tensor<3xf32>'}}
  %0 = train.sgd %p, %g, %lr : tensor<4xf32>, tensor<3xf32>, tensor<f32> -> tensor<4xf32>
  return
}

// -----

func.func @sgd_lr_rank(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<1xf32>) {
  // expected-error @+1 {{'train.sgd' op operand #2 must be 0D tensor of 32-bit float values}}
  %0 = train.sgd %p, %g, %lr : tensor<4xf32>, tensor<4xf32>, tensor<1xf32> -> tensor<4xf32>
  return
}

// -----

func.func @sgd_missing_buffer(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd' op with momentum expects a momentum_buffer operand}}
  %0 = train.sgd %p, %g, %lr {momentum = 0.9 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return
}

// -----

func.func @sgd_extra_buffer(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'train.sgd' op without momentum takes no momentum_buffer}}
  %0:2 = train.sgd %p, %g, %lr, %b : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @sgd_buffer_result(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'train.sgd' op returns a new momentum buffer exactly when it takes one}}
  %0 = train.sgd %p, %g, %lr, %b {momentum = 0.9 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @sgd_nesterov(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd' op nesterov needs a positive momentum}}
  %0 = train.sgd %p, %g, %lr {nesterov} : tensor<4xf32>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return
}

// -----

func.func @sgd_negative(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd' op expects non-negative momentum and weight_decay}}
  %0 = train.sgd %p, %g, %lr {weight_decay = -1.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return
}

// -----

func.func @adam_state_type(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf16>, %v: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<f32>) {
  // expected-error @+1 {{'train.adam' op expects exp_avg of the parameter's type 'tensor<4xf32>', got 'tensor<4xf16>'}}
  %0:3 = train.adam %p, %g, %m, %v, %lr, %t : tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<f32>, tensor<f32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @adam_beta(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.adam' op expects betas in [0, 1), got 1}}
  %0:3 = train.adam %p, %p, %p, %p, %lr, %lr {beta2 = 1.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @adam_eps(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.adam' op expects a positive eps}}
  %0:3 = train.adam %p, %p, %p, %p, %lr, %lr {eps = 0.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @adam_decay(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.adam' op expects a non-negative weight_decay}}
  %0:3 = train.adam %p, %p, %p, %p, %lr, %lr {weight_decay = -0.5 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @clip_empty() {
  // expected-error @+1 {{'train.clip_by_global_norm' op expects at least one gradient}}
  %0 = "train.clip_by_global_norm"() {max_norm = 1.0 : f64} : () -> tensor<f32>
  return
}

// -----

func.func @clip_count(%a: tensor<4xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'train.clip_by_global_norm' op expects one result per gradient, got 1 for 2}}
  %0:2 = train.clip_by_global_norm %a, %b {max_norm = 1.0 : f64} : tensor<4xf32>, tensor<2xf32> -> tensor<f32>, tensor<4xf32>
  return
}

// -----

func.func @clip_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{'train.clip_by_global_norm' op result 0 of type 'tensor<4xf64>' differs from its gradient's type 'tensor<4xf32>'}}
  %0:2 = train.clip_by_global_norm %a {max_norm = 1.0 : f64} : tensor<4xf32> -> tensor<f32>, tensor<4xf64>
  return
}

// -----

func.func @clip_norm(%a: tensor<4xf32>) {
  // expected-error @+1 {{'train.clip_by_global_norm' op expects a positive max_norm}}
  %0:2 = train.clip_by_global_norm %a {max_norm = 0.0 : f64} : tensor<4xf32> -> tensor<f32>, tensor<4xf32>
  return
}

// -----

func.func @clip_norm_shape(%a: tensor<4xf32>) {
  // expected-error @+1 {{'train.clip_by_global_norm' op expects a scalar norm, got 'tensor<1xf32>'}}
  %0:2 = train.clip_by_global_norm %a {max_norm = 1.0 : f64} : tensor<4xf32> -> tensor<1xf32>, tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{unknown argument attribute 'train.param'}}
func.func @unknown_arg(%a: tensor<4xf32> {train.param}) {
  return
}

// -----

// expected-error @+1 {{'train.binding' on argument 0 must be a #train.binding}}
func.func @binding_not_binding(%a: tensor<4xf32> {train.binding = 1 : i64}) {
  return
}

// -----

// expected-error @+1 {{hyper argument 0 must be rank 0, got 'tensor<1xf32>'}}
func.func @hyper_rank(%a: tensor<1xf32> {train.binding = #train.binding<hyper "lr">}) {
  return
}

// -----

// A binding holds numbers.
// expected-error @+1 {{argument 0 ('x') has element type 'index'; a binding holds integers or floats}}
func.func @not_a_number(%a: tensor<4xindex> {train.binding = #train.binding<input "x">}) {
  return
}

// -----

// Two arguments of one name would be one binding to the runtime.
// expected-error @+1 {{arguments 0 and 1 are both bound as 'w'}}
func.func @same_name(%a: tensor<4xf32> {train.binding = #train.binding<param "w">},
                     %b: tensor<4xf32> {train.binding = #train.binding<state "w">}) {
  return
}

// -----

// expected-error @+1 {{argument 0 has an empty name}}
func.func @empty_name(%a: tensor<4xf32> {train.binding = #train.binding<input "">}) {
  return
}

// -----

// expected-error @+2 {{expected ::mlir::ztc::train::BindingRole to be one of: input, label, param, buffer, state, hyper}}
// expected-error @+1 {{failed to parse Train_BindingAttr parameter 'role'}}
func.func @unknown_role(%a: tensor<4xf32> {train.binding = #train.binding<weight "w">}) {
  return
}

// -----

// expected-error @+1 {{unknown result attribute 'train.grad'}}
func.func @unknown_result(%a: tensor<4xf32>) -> (tensor<4xf32> {train.grad = "a"}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{'train.grad_of' on result 0 must be a string}}
func.func @grad_of_not_string(%a: tensor<4xf32>) -> (tensor<4xf32> {train.grad_of = 1 : i64}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{result 0 updates 'w', which names no argument}}
func.func @update_unknown(%a: tensor<4xf32> {train.binding = #train.binding<input "a">}) -> (tensor<4xf32> {train.update_of = "w"}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{result 0 updates 'a' of type 'tensor<4xf32>' with a value of type 'tensor<4xf16>'}}
func.func @update_type(%a: tensor<4xf32> {train.binding = #train.binding<input "a">}, %b: tensor<4xf16>) -> (tensor<4xf16> {train.update_of = "a"}) {
  return %b : tensor<4xf16>
}

// -----

// expected-error @+1 {{'train.loss' must be a string}}
func.func @loss_kind() attributes {train.loss = 1 : i64} {
  return
}

// -----

// expected-error @+1 {{'train.buffers' must be an array of strings}}
func.func @buffers() attributes {train.buffers = [1]} {
  return
}

// -----

// An entry kind outside the list the emitter and runtime know.
// expected-error @+1 {{'train.entry' must be one of forward, train_step, accumulate, loss_and_grads, loss}}
func.func @entry_kind() attributes {train.entry = "eval"} {
  return
}

// -----

// expected-error @+1 {{unknown function attribute 'train.schedule'}}
func.func @unknown_function_attr() attributes {train.schedule = "cosine"} {
  return
}

// -----

// expected-error @+1 {{'train.loss' belongs on a function}}
module attributes {train.loss = "mse"} {
}

// -----

func.func @adam8bit_codes(%p: tensor<4096xf32>, %c: tensor<4096xi8>, %c2: tensor<2048xi8>, %s: tensor<16xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.adam8bit' op expects exp_avg_sq of 'tensor<4096xi8>' (a code per element), got 'tensor<2048xi8>'}}
  %0:5 = train.adam8bit %p, %p, %c, %s, %c2, %s, %lr, %lr : tensor<4096xf32>, tensor<4096xf32>, tensor<4096xi8>, tensor<16xf32>, tensor<2048xi8>, tensor<16xf32>, tensor<f32>, tensor<f32> -> tensor<4096xf32>, tensor<4096xi8>, tensor<16xf32>, tensor<4096xi8>, tensor<16xf32>
  return
}

// -----

func.func @adam8bit_scales(%p: tensor<70x100xf32>, %c: tensor<7000xi8>, %s: tensor<27xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.adam8bit' op expects exp_avg_absmax of 'tensor<28xf32>' (a scale per 256 elements), got 'tensor<27xf32>'}}
  %0:5 = train.adam8bit %p, %p, %c, %s, %c, %s, %lr, %lr : tensor<70x100xf32>, tensor<70x100xf32>, tensor<7000xi8>, tensor<27xf32>, tensor<7000xi8>, tensor<27xf32>, tensor<f32>, tensor<f32> -> tensor<70x100xf32>, tensor<7000xi8>, tensor<27xf32>, tensor<7000xi8>, tensor<27xf32>
  return
}
