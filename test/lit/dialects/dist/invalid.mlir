// RUN: ztc-opt %s -split-input-file -verify-diagnostics

func.func @blocks(%x: tensor<10xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{needs 2 blocks of 4 elements (8), but the whole has 10}}
  %0 = dist.reduce_scatter %x {world_size = 2 : i64} : tensor<10xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @gather(%x: tensor<4xf32>) -> tensor<12xf32> {
  // expected-error @+1 {{needs 2 blocks of 4 elements (8), but the whole has 12}}
  %0 = dist.all_gather %x {world_size = 2 : i64} : tensor<4xf32> -> tensor<12xf32>
  return %0 : tensor<12xf32>
}

// -----

func.func @world(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{world_size must be at least 1, got 0}}
  %0 = dist.all_reduce %x {world_size = 0 : i64} : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @type(%x: tensor<8xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{changes the element type from 'f32' to 'bf16'}}
  %0 = dist.shard %x {world_size = 2 : i64} : tensor<8xf32> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// expected-error @+1 {{'dist.world_size' must be an integer >= 1}}
func.func @attr() attributes {dist.world_size = 0 : i64} {
  return
}
