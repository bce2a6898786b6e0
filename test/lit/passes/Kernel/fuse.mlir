// RUN: ztc-opt %s -split-input-file -ztc-fuse | FileCheck %s

// add then relu over the same shape fuse into one kernel, and the sum's
// buffer disappears.
// CHECK-LABEL: func.func @chain
// CHECK: %[[OUT:.+]] = kernel.alloc : memref<4xf32>
// CHECK-NOT: kernel.alloc
// CHECK: kernel.elementwise ins(%[[A:.+]], %[[B:.+]] : memref<4xf32>, memref<4xf32>) outs(%[[OUT]] : memref<4xf32>)
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK-NOT: kernel.elementwise
func.func @chain(%a: memref<4xf32>, %b: memref<4xf32>) -> memref<4xf32> {
  %s = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%a, %b : memref<4xf32>, memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.addf %x, %y : f32
    kernel.yield %0 : f32
  }
  %out = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%s : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%x: f32):
    %c0 = arith.constant 0.0 : f32
    %0 = arith.maximumf %x, %c0 : f32
    kernel.yield %0 : f32
  }
  return %out : memref<4xf32>
}

// -----

// Loops over the same elements fuse whatever their element types: the
// one-hot comparison of a cross-entropy's backward (i1) into the selection
// that reads it (f32), and the bool buffer disappears.
// CHECK-LABEL: func.func @other_element_type
// CHECK: %[[OUT:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK-NOT: kernel.alloc
// CHECK: kernel.elementwise ins(%{{.+}} : memref<4x1xf32>, memref<1x8xi64>, memref<4x1xi64>) outs(%[[OUT]] : memref<4x8xf32>)
// CHECK: arith.cmpi eq
// CHECK: arith.select
// CHECK-NOT: kernel.elementwise
func.func @other_element_type(%iota: memref<1x8xi64>, %labels: memref<4x1xi64>, %w: memref<4x1xf32>) -> memref<4x8xf32> {
  %hot = kernel.alloc : memref<4x8xi1>
  kernel.elementwise ins(%iota, %labels : memref<1x8xi64>, memref<4x1xi64>) outs(%hot : memref<4x8xi1>) {
  ^bb0(%i: i64, %l: i64):
    %0 = arith.cmpi eq, %i, %l : i64
    kernel.yield %0 : i1
  }
  %out = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%hot, %w : memref<4x8xi1>, memref<4x1xf32>) outs(%out : memref<4x8xf32>) {
  ^bb0(%h: i1, %x: f32):
    %c0 = arith.constant 0.0 : f32
    %0 = arith.select %h, %x, %c0 : f32
    kernel.yield %0 : f32
  }
  return %out : memref<4x8xf32>
}

// -----

// A producer whose result is also read after the consumer (here returned,
// as an activation kept for the backward is) runs inside the consumer's
// loop and still stores its values: one kernel writing both buffers,
// nothing computed twice.
// CHECK-LABEL: func.func @shared
// CHECK-SAME: (%[[A:[^:]+]]: memref<4xf32>)
// CHECK-NEXT: %[[S:.+]] = kernel.alloc : memref<4xf32>
// CHECK-NEXT: %[[OUT:.+]] = kernel.alloc : memref<4xf32>
// CHECK-NEXT: kernel.elementwise ins(%[[A]] : memref<4xf32>) outs(%[[S]], %[[OUT]] : memref<4xf32>, memref<4xf32>)
// CHECK-NEXT: ^bb0(%[[X:.+]]: f32)
// CHECK-NEXT: %[[E:.+]] = math.exp %[[X]]
// CHECK-NEXT: %[[N:.+]] = arith.negf %[[E]]
// CHECK-NEXT: kernel.yield %[[E]], %[[N]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[S]], %[[OUT]]
func.func @shared(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %s = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%a : memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = math.exp %x : f32
    kernel.yield %0 : f32
  }
  %out = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%s : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = arith.negf %x : f32
    kernel.yield %0 : f32
  }
  return %s, %out : memref<4xf32>, memref<4xf32>
}

// -----

// The producer's input is a planned buffer read last by the producer:
// moved to the consumer, the producer would keep it live longer, past the
// library call between, so the kernels stay apart.
// CHECK-LABEL: func.func @shared_input_dies
// CHECK: kernel.call "softmax" ins(%{{.+}} : memref<4xf32>) outs(%[[T:.+]] : memref<4xf32>)
// CHECK: kernel.elementwise ins(%[[T]] : memref<4xf32>) outs(%[[S:.+]] : memref<4xf32>)
// CHECK: kernel.call "softmax"
// CHECK: kernel.elementwise ins(%[[S]] : memref<4xf32>) outs(%{{.+}} : memref<4xf32>)
func.func @shared_input_dies(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>, memref<4xf32>) {
  %t = kernel.alloc : memref<4xf32>
  kernel.call "softmax" ins(%a : memref<4xf32>) outs(%t : memref<4xf32>) {config = {axis = 0 : i64}}
  %s = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%t : memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = math.log %x : f32
    kernel.yield %0 : f32
  }
  %p = kernel.alloc : memref<4xf32>
  kernel.call "softmax" ins(%a : memref<4xf32>) outs(%p : memref<4xf32>) {config = {axis = 0 : i64}}
  %out = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%s : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = arith.negf %x : f32
    kernel.yield %0 : f32
  }
  return %p, %s, %out : memref<4xf32>, memref<4xf32>, memref<4xf32>
}

// -----

// A shared value read between its producer and the consumer (by a library
// call here) must be stored before that read: the kernels stay apart.
// CHECK-LABEL: func.func @shared_read_between
// CHECK: kernel.elementwise ins(%{{.+}} : memref<4xf32>) outs(%[[S:.+]] : memref<4xf32>)
// CHECK: kernel.call "softmax" ins(%[[S]]
// CHECK: kernel.elementwise ins(%[[S]] : memref<4xf32>) outs(%{{.+}} : memref<4xf32>)
func.func @shared_read_between(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %s = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%a : memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = math.exp %x : f32
    kernel.yield %0 : f32
  }
  %p = kernel.alloc : memref<4xf32>
  kernel.call "softmax" ins(%s : memref<4xf32>) outs(%p : memref<4xf32>) {config = {axis = 0 : i64}}
  %out = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%s : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = arith.negf %x : f32
    kernel.yield %0 : f32
  }
  return %p, %out : memref<4xf32>, memref<4xf32>
}

// -----

// A consumer that reads the shared value through a view as well would read
// that view's old elements inside the fused loop: the kernels stay apart.
// CHECK-LABEL: func.func @shared_read_through_view
// CHECK: kernel.elementwise ins(%{{.+}} : memref<4xf32>) outs(%[[S:.+]] : memref<4xf32>)
// CHECK: %[[V:.+]] = kernel.view %[[S]]
// CHECK: kernel.elementwise ins(%[[S]], %[[V]] : memref<4xf32>, memref<4xf32>) outs(%{{.+}} : memref<4xf32>)
func.func @shared_read_through_view(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %s = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%a : memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = math.exp %x : f32
    kernel.yield %0 : f32
  }
  %v = kernel.view %s : memref<4xf32> to memref<4xf32>
  %out = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%s, %v : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.subf %x, %y : f32
    kernel.yield %0 : f32
  }
  return %s, %out : memref<4xf32>, memref<4xf32>
}

// -----

// A producer over a smaller shape (broadcast by the consumer) is not fused:
// it would be recomputed for every broadcast element.
// CHECK-LABEL: func.func @broadcast
// CHECK-SAME: (%[[A:[^:]+]]: memref<4xf32>, %[[B:[^:]+]]: memref<3x4xf32>)
// CHECK-NEXT: %[[S:.+]] = kernel.alloc : memref<4xf32>
// CHECK-NEXT: kernel.elementwise ins(%[[A]] : memref<4xf32>) outs(%[[S]] : memref<4xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: math.exp
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[OUT:.+]] = kernel.alloc : memref<3x4xf32>
// CHECK-NEXT: kernel.elementwise ins(%[[S]], %[[B]] : memref<4xf32>, memref<3x4xf32>) outs(%[[OUT]] : memref<3x4xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[OUT]]
func.func @broadcast(%a: memref<4xf32>, %b: memref<3x4xf32>) -> memref<3x4xf32> {
  %s = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%a : memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = math.exp %x : f32
    kernel.yield %0 : f32
  }
  %out = kernel.alloc : memref<3x4xf32>
  kernel.elementwise ins(%s, %b : memref<4xf32>, memref<3x4xf32>) outs(%out : memref<3x4xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.mulf %x, %y : f32
    kernel.yield %0 : f32
  }
  return %out : memref<3x4xf32>
}

// -----

// A consumer that reads a value its producer also reads reuses the
// producer's argument (2 inputs, not 3): a chain of kernels over one value
// does not grow an input per link (and fusing a chain stays linear in its
// length).
// CHECK-LABEL: func.func @shared_input
// CHECK: kernel.elementwise ins(%[[X:[a-z0-9]+]], %[[X]] : memref<4xf32>, memref<4xf32>) outs(%{{.+}} : memref<4xf32>)
// CHECK-NEXT: ^bb0(%[[A:.+]]: f32, %[[B:.+]]: f32):
// CHECK-NEXT: %[[S:.+]] = arith.addf %[[A]], %[[B]] : f32
// CHECK-NEXT: %[[T:.+]] = arith.mulf %[[S]], %[[A]] : f32
// CHECK-NEXT: kernel.yield %[[T]] : f32
func.func @shared_input(%x: memref<4xf32>) -> memref<4xf32> {
  %a = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%x, %x : memref<4xf32>, memref<4xf32>) outs(%a : memref<4xf32>) {
  ^bb0(%u: f32, %v: f32):
    %s = arith.addf %u, %v : f32
    kernel.yield %s : f32
  }
  %b = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%a, %x : memref<4xf32>, memref<4xf32>) outs(%b : memref<4xf32>) {
  ^bb0(%u: f32, %v: f32):
    %t = arith.mulf %u, %v : f32
    kernel.yield %t : f32
  }
  return %b : memref<4xf32>
}

// -----

// Adam's shape: the moment updated in place on its step argument, then the
// parameter's update reading it (and the gradient). The moment's kernel
// moves into the update, which writes both: one pass over the four
// buffers. The scalar kernel between touches neither.
// CHECK-LABEL: func.func @inplace_state
// CHECK-SAME: (%[[P:[^:]+]]: memref<8xf32>, %[[G:[^:]+]]: memref<8xf32>, %[[M:[^:]+]]: memref<8xf32>
// CHECK: kernel.elementwise ins({{.*}}) outs(%{{.+}} : memref<1xf32>)
// CHECK: kernel.elementwise ins({{.*}}) outs(%[[M]], %[[P]] : memref<8xf32>, memref<8xf32>)
// CHECK: %[[NEW:.+]] = arith.addf
// CHECK: %[[STEP:.+]] = arith.mulf %[[NEW]]
// CHECK: %[[UPDATED:.+]] = arith.subf %{{.+}}, %[[STEP]]
// CHECK: kernel.yield %[[NEW]], %[[UPDATED]] : f32, f32
// CHECK-NOT: kernel.elementwise
func.func @inplace_state(%p: memref<8xf32>, %g: memref<8xf32>, %m: memref<8xf32>, %lr: memref<1xf32>) {
  kernel.elementwise ins(%m, %g : memref<8xf32>, memref<8xf32>) outs(%m : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.addf %x, %y : f32
    kernel.yield %0 : f32
  }
  %half = kernel.alloc : memref<1xf32>
  kernel.elementwise ins(%lr : memref<1xf32>) outs(%half : memref<1xf32>) {
  ^bb0(%x: f32):
    %c = arith.constant 0.5 : f32
    %0 = arith.mulf %x, %c : f32
    kernel.yield %0 : f32
  }
  kernel.elementwise ins(%p, %m, %half : memref<8xf32>, memref<8xf32>, memref<1xf32>) outs(%p : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %0 = arith.mulf %y, %z : f32
    %1 = arith.subf %x, %0 : f32
    kernel.yield %1 : f32
  }
  return
}

// -----

// A library kernel between that reads the state after its update needs
// the new value in memory: the moment's kernel stays where it is. (An
// elementwise reader would take the moment's kernel in, as the update
// does.)
// CHECK-LABEL: func.func @state_read_between
// CHECK-SAME: (%[[P:[^:]+]]: memref<8xf32>, %[[G:[^:]+]]: memref<8xf32>, %[[M:[^:]+]]: memref<8xf32>, %[[COPY:[^:]+]]: memref<8xf32>)
// CHECK-NEXT: kernel.elementwise ins(%[[M]], %[[G]] : memref<8xf32>, memref<8xf32>) outs(%[[M]] : memref<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.addf
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: kernel.call "softmax" ins(%[[M]] : memref<8xf32>) outs(%[[COPY]] : memref<8xf32>)
// CHECK-NEXT: kernel.elementwise ins(%[[P]], %[[M]] : memref<8xf32>, memref<8xf32>) outs(%[[P]] : memref<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.subf
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @state_read_between(%p: memref<8xf32>, %g: memref<8xf32>, %m: memref<8xf32>, %copy: memref<8xf32>) {
  kernel.elementwise ins(%m, %g : memref<8xf32>, memref<8xf32>) outs(%m : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.addf %x, %y : f32
    kernel.yield %0 : f32
  }
  kernel.call "softmax" ins(%m : memref<8xf32>) outs(%copy : memref<8xf32>) {config = {axis = 0 : i64}}
  kernel.elementwise ins(%p, %m : memref<8xf32>, memref<8xf32>) outs(%p : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.subf %x, %y : f32
    kernel.yield %0 : f32
  }
  return
}

// -----

// Nor when a kernel between writes what the moment's update reads (here
// the gradient): moved later, it would read the new gradient.
// CHECK-LABEL: func.func @input_written_between
// CHECK-SAME: (%[[P:[^:]+]]: memref<8xf32>, %[[G:[^:]+]]: memref<8xf32>, %[[M:[^:]+]]: memref<8xf32>)
// CHECK-NEXT: kernel.elementwise ins(%[[M]], %[[G]] : memref<8xf32>, memref<8xf32>) outs(%[[M]] : memref<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.addf
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: kernel.elementwise ins(%[[G]] : memref<8xf32>) outs(%[[G]] : memref<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.addf
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: kernel.elementwise ins(%[[P]], %[[M]] : memref<8xf32>, memref<8xf32>) outs(%[[P]] : memref<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.subf
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @input_written_between(%p: memref<8xf32>, %g: memref<8xf32>, %m: memref<8xf32>) {
  kernel.elementwise ins(%m, %g : memref<8xf32>, memref<8xf32>) outs(%m : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.addf %x, %y : f32
    kernel.yield %0 : f32
  }
  kernel.elementwise ins(%g : memref<8xf32>) outs(%g : memref<8xf32>) {
  ^bb0(%x: f32):
    %0 = arith.addf %x, %x : f32
    kernel.yield %0 : f32
  }
  kernel.elementwise ins(%p, %m : memref<8xf32>, memref<8xf32>) outs(%p : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.subf %x, %y : f32
    kernel.yield %0 : f32
  }
  return
}

// -----

// The update also reads the state through a view: fused, that read would
// see the old elements, so the moment's kernel stays.
// CHECK-LABEL: func.func @state_read_through_view
// CHECK-SAME: (%[[P:[^:]+]]: memref<8xf32>, %[[G:[^:]+]]: memref<8xf32>, %[[M:[^:]+]]: memref<8xf32>)
// CHECK-NEXT: kernel.elementwise ins(%[[M]], %[[G]] : memref<8xf32>, memref<8xf32>) outs(%[[M]] : memref<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.addf
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[V:.+]] = kernel.view %[[M]]
// CHECK-NEXT: kernel.elementwise ins(%[[P]], %[[M]], %[[V]] : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%[[P]] : memref<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.subf
// CHECK-NEXT: arith.subf
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @state_read_through_view(%p: memref<8xf32>, %g: memref<8xf32>, %m: memref<8xf32>) {
  kernel.elementwise ins(%m, %g : memref<8xf32>, memref<8xf32>) outs(%m : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.addf %x, %y : f32
    kernel.yield %0 : f32
  }
  %v = kernel.view %m : memref<8xf32> to memref<8xf32>
  kernel.elementwise ins(%p, %m, %v : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%p : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %0 = arith.subf %x, %y : f32
    %1 = arith.subf %0, %z : f32
    kernel.yield %1 : f32
  }
  return
}

// -----

// A producer does not move past an in-place update of what it reads: fused
// into its consumer after the update, it would read the new values.
// CHECK-LABEL: func.func @producer_input_written_between
// CHECK: kernel.elementwise ins(%arg0 : memref<4xf32>) outs(%[[S:.+]] : memref<4xf32>)
// CHECK: math.exp
// CHECK: kernel.elementwise ins(%arg0, %arg1 : memref<4xf32>, memref<4xf32>) outs(%arg0 : memref<4xf32>)
// CHECK: kernel.elementwise ins(%[[S]] : memref<4xf32>)
// CHECK: arith.negf
func.func @producer_input_written_between(%w: memref<4xf32>, %g: memref<4xf32>) -> memref<4xf32> {
  %s = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%w : memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = math.exp %x : f32
    kernel.yield %0 : f32
  }
  kernel.elementwise ins(%w, %g : memref<4xf32>, memref<4xf32>) outs(%w : memref<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.subf %x, %y : f32
    kernel.yield %0 : f32
  }
  %out = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%s : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = arith.negf %x : f32
    kernel.yield %0 : f32
  }
  return %out : memref<4xf32>
}

// -----

// A sum of an elementwise kernel's values that nothing else reads becomes
// one kernel.reduce over the kernel's space (BatchNorm's gradient: the sum
// of dy * xhat per channel), after the kernel has absorbed its own
// producer; the product's buffer goes.
// CHECK-LABEL: func.func @reduce_of_product
// CHECK: %[[G:.+]] = kernel.alloc : memref<4xf32>
// CHECK-NOT: kernel.alloc
// CHECK-NOT: kernel.call
// CHECK: kernel.reduce sum ins(%{{.+}}, %{{.+}}, %{{.+}} : memref<2x4x3x3xf32>, memref<2x4x3x3xf32>, memref<1x4x1x1xf32>) outs(%[[G]] : memref<4xf32>) attributes {axes = array<i64: 0, 2, 3>, space = array<i64: 2, 4, 3, 3>}
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK: kernel.yield
func.func @reduce_of_product(%dy: memref<2x4x3x3xf32>, %x: memref<2x4x3x3xf32>, %mean: memref<1x4x1x1xf32>) -> memref<4xf32> {
  %c = kernel.alloc : memref<2x4x3x3xf32>
  kernel.elementwise ins(%x, %mean : memref<2x4x3x3xf32>, memref<1x4x1x1xf32>) outs(%c : memref<2x4x3x3xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.subf %a, %b : f32
    kernel.yield %0 : f32
  }
  %p = kernel.alloc : memref<2x4x3x3xf32>
  kernel.elementwise ins(%dy, %c : memref<2x4x3x3xf32>, memref<2x4x3x3xf32>) outs(%p : memref<2x4x3x3xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.mulf %a, %b : f32
    kernel.yield %0 : f32
  }
  %g = kernel.alloc : memref<4xf32>
  kernel.call "reduce_sum" ins(%p : memref<2x4x3x3xf32>) outs(%g : memref<4xf32>) {config = {axes = array<i64: 0, 2, 3>, keepdims = false}}
  return %g : memref<4xf32>
}

// -----

// The same with the centered values returned too (shared): the product
// and the sum still become one kernel.reduce, which takes single-output
// kernels, so the centering stays a kernel of its own rather than joining
// the product's loop first.
// CHECK-LABEL: func.func @reduce_before_shared
// CHECK: kernel.elementwise ins(%{{.+}}, %{{.+}} : memref<2x4x3x3xf32>, memref<1x4x1x1xf32>) outs(%[[C:.+]] : memref<2x4x3x3xf32>)
// CHECK: kernel.reduce sum ins(%{{.+}}, %[[C]] : memref<2x4x3x3xf32>, memref<2x4x3x3xf32>)
// CHECK-NOT: kernel.call
func.func @reduce_before_shared(%dy: memref<2x4x3x3xf32>, %x: memref<2x4x3x3xf32>, %mean: memref<1x4x1x1xf32>) -> (memref<4xf32>, memref<2x4x3x3xf32>) {
  %c = kernel.alloc : memref<2x4x3x3xf32>
  kernel.elementwise ins(%x, %mean : memref<2x4x3x3xf32>, memref<1x4x1x1xf32>) outs(%c : memref<2x4x3x3xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.subf %a, %b : f32
    kernel.yield %0 : f32
  }
  %p = kernel.alloc : memref<2x4x3x3xf32>
  kernel.elementwise ins(%dy, %c : memref<2x4x3x3xf32>, memref<2x4x3x3xf32>) outs(%p : memref<2x4x3x3xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.mulf %a, %b : f32
    kernel.yield %0 : f32
  }
  %g = kernel.alloc : memref<4xf32>
  kernel.call "reduce_sum" ins(%p : memref<2x4x3x3xf32>) outs(%g : memref<4xf32>) {config = {axes = array<i64: 0, 2, 3>, keepdims = false}}
  return %g, %c : memref<4xf32>, memref<2x4x3x3xf32>
}

// -----

// A mean keeps its kind, negative axes their meaning, keepdims its shape.
// CHECK-LABEL: func.func @reduce_mean_keepdims
// CHECK: kernel.reduce mean ins(%{{.+}} : memref<6x5xf32>) outs(%{{.+}} : memref<6x1xf32>) attributes {axes = array<i64: 1>, space = array<i64: 6, 5>}
func.func @reduce_mean_keepdims(%x: memref<6x5xf32>) -> memref<6x1xf32> {
  %s = kernel.alloc : memref<6x5xf32>
  kernel.elementwise ins(%x : memref<6x5xf32>) outs(%s : memref<6x5xf32>) {
  ^bb0(%a: f32):
    %0 = arith.mulf %a, %a : f32
    kernel.yield %0 : f32
  }
  %m = kernel.alloc : memref<6x1xf32>
  kernel.call "reduce_mean" ins(%s : memref<6x5xf32>) outs(%m : memref<6x1xf32>) {config = {axes = array<i64: -1>, keepdims = true}}
  return %m : memref<6x1xf32>
}

// -----

// The values stay stored when another kernel reads them too, when the
// reduced axes do not group as [reduced, kept, reduced] (the emitter's
// loops), when an input broadcasts over part of a group only (here the
// kept [3, 4] by a [3, 1]), and when a
// kernel between writes what the producer reads.
// CHECK-LABEL: func.func @reduce_not_fused
// CHECK-NOT: kernel.reduce
// CHECK-COUNT-4: kernel.call "reduce_sum"
func.func @reduce_not_fused(%x: memref<2x3x4xf32>, %y: memref<3x1xf32>, %w: memref<2x3x4xf32>) -> (memref<2x3x4xf32>, memref<3xf32>, memref<2x4xf32>, memref<3x4xf32>, memref<3xf32>) {
  %shared = kernel.alloc : memref<2x3x4xf32>
  kernel.elementwise ins(%x : memref<2x3x4xf32>) outs(%shared : memref<2x3x4xf32>) {
  ^bb0(%a: f32):
    %0 = math.exp %a : f32
    kernel.yield %0 : f32
  }
  %r0 = kernel.alloc : memref<3xf32>
  kernel.call "reduce_sum" ins(%shared : memref<2x3x4xf32>) outs(%r0 : memref<3xf32>) {config = {axes = array<i64: 0, 2>, keepdims = false}}
  %middle = kernel.alloc : memref<2x3x4xf32>
  kernel.elementwise ins(%x : memref<2x3x4xf32>) outs(%middle : memref<2x3x4xf32>) {
  ^bb0(%a: f32):
    %0 = math.exp %a : f32
    kernel.yield %0 : f32
  }
  %r1 = kernel.alloc : memref<2x4xf32>
  kernel.call "reduce_sum" ins(%middle : memref<2x3x4xf32>) outs(%r1 : memref<2x4xf32>) {config = {axes = array<i64: 1>, keepdims = false}}
  %partial = kernel.alloc : memref<2x3x4xf32>
  kernel.elementwise ins(%x, %y : memref<2x3x4xf32>, memref<3x1xf32>) outs(%partial : memref<2x3x4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.mulf %a, %b : f32
    kernel.yield %0 : f32
  }
  %r2 = kernel.alloc : memref<3x4xf32>
  kernel.call "reduce_sum" ins(%partial : memref<2x3x4xf32>) outs(%r2 : memref<3x4xf32>) {config = {axes = array<i64: 0>, keepdims = false}}
  %late = kernel.alloc : memref<2x3x4xf32>
  kernel.elementwise ins(%w : memref<2x3x4xf32>) outs(%late : memref<2x3x4xf32>) {
  ^bb0(%a: f32):
    %0 = math.exp %a : f32
    kernel.yield %0 : f32
  }
  kernel.elementwise ins(%x : memref<2x3x4xf32>) outs(%w : memref<2x3x4xf32>) {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  %r3 = kernel.alloc : memref<3xf32>
  kernel.call "reduce_sum" ins(%late : memref<2x3x4xf32>) outs(%r3 : memref<3xf32>) {config = {axes = array<i64: 0, 2>, keepdims = false}}
  return %shared, %r0, %r1, %r2, %r3 : memref<2x3x4xf32>, memref<3xf32>, memref<2x4xf32>, memref<3x4xf32>, memref<3xf32>
}

// -----

// Sibling reductions over the same loops that read a buffer in common sum
// side by side in one kernel.reduce where the later one was: BatchNorm's
// backward sums the gradient (a library call) and its product with the
// centered input (fused above), reading the gradient once. The body keeps
// each one's values; the outputs are the earlier's then the later's.
// CHECK-LABEL: func.func @sibling_sums
// CHECK-SAME: (%[[DY:.+]]: memref<2x4x3x3xf32>, %[[X:.+]]: memref<2x4x3x3xf32>, %[[MEAN:.+]]: memref<1x4x1x1xf32>)
// CHECK: %[[G1:.+]] = kernel.alloc : memref<4xf32>
// CHECK: %[[G2:.+]] = kernel.alloc : memref<4xf32>
// CHECK-NOT: kernel.call
// CHECK: kernel.reduce sum ins(%[[DY]], %[[X]], %[[MEAN]] : memref<2x4x3x3xf32>, memref<2x4x3x3xf32>, memref<1x4x1x1xf32>) outs(%[[G1]], %[[G2]] : memref<4xf32>, memref<4xf32>) attributes {axes = array<i64: 0, 2, 3>, space = array<i64: 2, 4, 3, 3>}
// CHECK-NEXT: ^bb0(%[[A:.+]]: f32, %[[B:.+]]: f32, %[[C:.+]]: f32):
// CHECK-NEXT: %[[D:.+]] = arith.subf %[[B]], %[[C]] : f32
// CHECK-NEXT: %[[P:.+]] = arith.mulf %[[A]], %[[D]] : f32
// CHECK-NEXT: kernel.yield %[[A]], %[[P]] : f32, f32
// CHECK-NOT: kernel.reduce
func.func @sibling_sums(%dy: memref<2x4x3x3xf32>, %x: memref<2x4x3x3xf32>, %mean: memref<1x4x1x1xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %g1 = kernel.alloc : memref<4xf32>
  kernel.call "reduce_sum" ins(%dy : memref<2x4x3x3xf32>) outs(%g1 : memref<4xf32>) {config = {axes = array<i64: 0, 2, 3>, keepdims = false}}
  %c = kernel.alloc : memref<2x4x3x3xf32>
  kernel.elementwise ins(%x, %mean : memref<2x4x3x3xf32>, memref<1x4x1x1xf32>) outs(%c : memref<2x4x3x3xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.subf %a, %b : f32
    kernel.yield %0 : f32
  }
  %p = kernel.alloc : memref<2x4x3x3xf32>
  kernel.elementwise ins(%dy, %c : memref<2x4x3x3xf32>, memref<2x4x3x3xf32>) outs(%p : memref<2x4x3x3xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.mulf %a, %b : f32
    kernel.yield %0 : f32
  }
  %g2 = kernel.alloc : memref<4xf32>
  kernel.call "reduce_sum" ins(%p : memref<2x4x3x3xf32>) outs(%g2 : memref<4xf32>) {config = {axes = array<i64: 0, 2, 3>, keepdims = false}}
  return %g1, %g2 : memref<4xf32>, memref<4xf32>
}

// -----

// Siblings stay apart when the later reads what the earlier writes
// (BatchNorm's variance reads its mean), when their kinds differ (a mean
// and a sum), when they reduce along other axes, when they read nothing in
// common, and when a kernel between writes what the earlier reads.
// CHECK-LABEL: func.func @siblings_kept
// CHECK: kernel.call "reduce_mean"
// CHECK: kernel.reduce mean
// CHECK-COUNT-4: kernel.call "reduce_sum"
// CHECK-NOT: kernel.reduce
func.func @siblings_kept(%x: memref<2x4x3x3xf32>, %y: memref<2x4x3x3xf32>, %w: memref<2x4x3x3xf32>) -> (memref<1x4x1x1xf32>, memref<1x4x1x1xf32>, memref<4xf32>, memref<2xf32>, memref<4xf32>, memref<4xf32>) {
  %m = kernel.alloc : memref<1x4x1x1xf32>
  kernel.call "reduce_mean" ins(%x : memref<2x4x3x3xf32>) outs(%m : memref<1x4x1x1xf32>) {config = {axes = array<i64: 0, 2, 3>, keepdims = true}}
  %d = kernel.alloc : memref<2x4x3x3xf32>
  kernel.elementwise ins(%x, %m : memref<2x4x3x3xf32>, memref<1x4x1x1xf32>) outs(%d : memref<2x4x3x3xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.subf %a, %b : f32
    %1 = arith.mulf %0, %0 : f32
    kernel.yield %1 : f32
  }
  %v = kernel.alloc : memref<1x4x1x1xf32>
  kernel.call "reduce_mean" ins(%d : memref<2x4x3x3xf32>) outs(%v : memref<1x4x1x1xf32>) {config = {axes = array<i64: 0, 2, 3>, keepdims = true}}
  %s = kernel.alloc : memref<4xf32>
  kernel.call "reduce_sum" ins(%x : memref<2x4x3x3xf32>) outs(%s : memref<4xf32>) {config = {axes = array<i64: 0, 2, 3>, keepdims = false}}
  %n = kernel.alloc : memref<2xf32>
  kernel.call "reduce_sum" ins(%x : memref<2x4x3x3xf32>) outs(%n : memref<2xf32>) {config = {axes = array<i64: 1, 2, 3>, keepdims = false}}
  %t = kernel.alloc : memref<4xf32>
  kernel.call "reduce_sum" ins(%y : memref<2x4x3x3xf32>) outs(%t : memref<4xf32>) {config = {axes = array<i64: 0, 2, 3>, keepdims = false}}
  kernel.elementwise ins(%x : memref<2x4x3x3xf32>) outs(%y : memref<2x4x3x3xf32>) {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  %u = kernel.alloc : memref<4xf32>
  kernel.call "reduce_sum" ins(%y : memref<2x4x3x3xf32>) outs(%u : memref<4xf32>) {config = {axes = array<i64: 0, 2, 3>, keepdims = false}}
  return %m, %v, %s, %n, %t, %u : memref<1x4x1x1xf32>, memref<1x4x1x1xf32>, memref<4xf32>, memref<2xf32>, memref<4xf32>, memref<4xf32>
}
