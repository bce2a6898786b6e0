// RUN: ztc-opt %s --ztc-check-finite | FileCheck %s
// RUN: ztc-opt %s --ztc-check-finite --ztc-convert-nn-to-kernel | FileCheck %s --check-prefix=KERNEL

// Every op with a float result is marked with its ONNX node, its op and
// its pass: forward when the loss depends on it, backward after the loss,
// "recomputed forward" for a forward op ztc-recompute cloned, update for
// ztc's own arithmetic (the optimizer); a reshape (a view) and integer
// results are not.
// CHECK-LABEL: func.func @train_step
// CHECK: nn.mul {{.*}} {train.finite_check = {node = "/h/Mul", op = "mul", pass = "forward"}}
// CHECK: nn.pow {{.*}} {train.finite_check = {node = "/h/Pow", op = "pow", pass = "forward"}}
// CHECK: nn.cast {{.*}} {train.finite_check = {node = "/h/Pow", op = "cast to f16", pass = "forward"}}
// CHECK: nn.cast {{.*}} {train.finite_check = {node = "/h/Pow", op = "cast to f32", pass = "forward"}}
// CHECK-NEXT: nn.reshape %{{[0-9]+}} : tensor<2x4xf32> -> tensor<8xf32>
// CHECK-NEXT: nn.reduce_sum {{.*}} train.finite_check = {node = "loss", op = "reduce_sum", pass = "forward"}}
// CHECK: nn.mul {{.*}} {train.finite_check = {node = "/h/Pow", op = "mul", pass = "backward"}}
// CHECK: nn.mul {{.*}} {train.finite_check = {node = "/h/Mul", op = "mul", pass = "recomputed forward"}, train.recomputed}
// CHECK: nn.sub {{.*}} {train.finite_check = {node = "", op = "sub", pass = "update"}}

// Bufferized, each marked op's result is scanned right after its kernel.
// KERNEL-LABEL: func.func @train_step
// KERNEL: kernel.elementwise
// KERNEL: kernel.check_finite forward %{{.+}} {node = "/h/Mul", op = "mul"} : memref<2x4xf32>
// KERNEL: math.powf
// KERNEL: kernel.check_finite forward %{{.+}} {node = "/h/Pow", op = "pow"} : memref<2x4xf32>
// KERNEL: kernel.check_finite forward %{{.+}} {node = "/h/Pow", op = "cast to f16"} : memref<2x4xf16>
// KERNEL: kernel.call "reduce_sum"
// KERNEL-NEXT: kernel.check_finite forward %{{.+}} {node = "loss", op = "reduce_sum"} : memref<f32>
// KERNEL: kernel.check_finite backward %{{.+}} {node = "/h/Pow", op = "mul"} : memref<2x4xf32>
// KERNEL: kernel.check_finite "recomputed forward" %{{.+}} {node = "/h/Mul", op = "mul"} : memref<2x4xf32>
// KERNEL: kernel.check_finite update %{{.+}} {node = "", op = "sub"} : memref<2x4xf32>
func.func @train_step(%x: tensor<2x4xf32> {train.binding = #train.binding<input "x">},
                      %w: tensor<2x4xf32> {train.binding = #train.binding<param "w">})
    -> (tensor<f32>, tensor<2x4xf32> {train.update_of = "w"})
    attributes {train.entry = "train_step"} {
  %m = nn.mul %x, %w : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32> loc("/h/Mul")
  %c = arith.constant dense<3.0> : tensor<f32>
  %p = nn.pow %m, %c : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32> loc("/h/Pow")
  %h = nn.cast %p : tensor<2x4xf32> -> tensor<2x4xf16> loc("/h/Pow")
  %back = nn.cast %h : tensor<2x4xf16> -> tensor<2x4xf32> loc("/h/Pow")
  %flat = nn.reshape %back : tensor<2x4xf32> -> tensor<8xf32> loc("/h/Pow")
  %l = nn.reduce_sum %flat {axes = array<i64: 0>, keepdims = false} : tensor<8xf32> -> tensor<f32> loc("loss")
  %g = nn.mul %x, %c : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32> loc("/h/Pow")
  %again = nn.mul %x, %w {train.recomputed} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32> loc("/h/Mul")
  %new = nn.sub %w, %g : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32> loc("optimizer")
  return %l, %new : tensor<f32>, tensor<2x4xf32>
}
