// RUN: ztc-opt %s -split-input-file -verify-diagnostics

// kernel.collective's verifier: one case per message. The runtime's
// collectives move floats (ztc_comm's dtypes) and take the smaller side's
// element count, so the sides must be whole blocks of each other.

func.func @integer(%x: memref<4xi32>, %y: memref<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped memref of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values}}
  kernel.collective all_reduce ins(%x : memref<4xi32>) outs(%y : memref<4xi32>) {world_size = 2 : i64}
  return
}

// -----

func.func @cast(%x: memref<4xf32>, %y: memref<4xbf16>) {
  // expected-error @+1 {{'all_reduce' changes the element type from 'f32' to 'bf16'}}
  kernel.collective all_reduce ins(%x : memref<4xf32>) outs(%y : memref<4xbf16>) {world_size = 2 : i64}
  return
}

// -----

func.func @no_ranks(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{world_size must be at least 1, got 0}}
  kernel.collective all_reduce ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) {world_size = 0 : i64}
  return
}

// -----

func.func @all_reduce_count(%x: memref<4xf32>, %y: memref<2xf32>) {
  // expected-error @+1 {{'all_reduce' writes as many elements as it reads, got 4 in and 2 out}}
  kernel.collective all_reduce ins(%x : memref<4xf32>) outs(%y : memref<2xf32>) {world_size = 2 : i64}
  return
}

// -----

func.func @reduce_scatter_blocks(%x: memref<6xf32>, %y: memref<2xf32>) {
  // expected-error @+1 {{'reduce_scatter' reads 2 blocks of its output's 2 elements (4), got 6}}
  kernel.collective reduce_scatter ins(%x : memref<6xf32>) outs(%y : memref<2xf32>) {world_size = 2 : i64}
  return
}

// -----

func.func @shard_blocks(%x: memref<8xf32>, %y: memref<2xf32>) {
  // expected-error @+1 {{'shard' reads 2 blocks of its output's 2 elements (4), got 8}}
  kernel.collective shard ins(%x : memref<8xf32>) outs(%y : memref<2xf32>) {world_size = 2 : i64}
  return
}

// -----

func.func @all_gather_blocks(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'all_gather' writes 2 blocks of its input's 4 elements (8), got 4}}
  kernel.collective all_gather ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) {world_size = 2 : i64}
  return
}

// -----

func.func @unknown_kind(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [all_reduce, reduce_scatter, all_gather, shard]}}
  kernel.collective broadcast ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) {world_size = 2 : i64}
  return
}
