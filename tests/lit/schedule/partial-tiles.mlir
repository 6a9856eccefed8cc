// Matmul register tiles that do not divide M: the rows are the register file's cap, the
// loop runs whole tiles and its last, partial tile is peeled off as a smaller static tile,
// vectorized too (schedule/plan.py ``matmul_rows_tile``, script.py ``peel_partial_tiles``).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=256 num-threads=1" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=512 num-threads=1" | FileCheck %s --check-prefix=AVX512

// AVX2 (16 registers), 128 rows: 6-row tiles of 2 x 8 lanes (12 accumulators, a broadcast
// and a k step's 2 vectors of B) over rows 0-125, then one 2-row tile, both vector code; no
// 4-row tile (the largest divisor of 128 up to 6) and no scalar matmul left.
// CHECK-LABEL: func.func @rows_128
// CHECK: scf.for %{{.*}} = %c0 to %c126 step %c6
// CHECK: vector.contract {{.*}} : vector<6x1xf32>, vector<1x16xf32> into vector<6x16xf32>
// CHECK-NOT: scf.for %{{.*}} = %c126
// CHECK: vector.contract {{.*}} : vector<2x1xf32>, vector<1x16xf32> into vector<2x16xf32>
// CHECK-NOT: linalg.matmul
// CHECK-NOT: vector<4x16xf32>
// CHECK: return
// AVX-512 (32 registers): 8 divides 128, so its 8 x 2-vector tiles stay, with no remainder.
// AVX512-LABEL: func.func @rows_128
// AVX512: vector.contract {{.*}} : vector<8x1xf32>, vector<1x32xf32> into vector<8x32xf32>
// AVX512-NOT: vector.contract
// AVX512: return
func.func @rows_128(%a: tensor<128x64xf32>, %b: tensor<64x64xf32>) -> tensor<128x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<128x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<128x64xf32>) -> tensor<128x64xf32>
  %c = linalg.matmul ins(%a, %b : tensor<128x64xf32>, tensor<64x64xf32>) outs(%init : tensor<128x64xf32>) -> tensor<128x64xf32>
  return %c : tensor<128x64xf32>
}

// -----

// 100 rows: AVX2 takes 6-row tiles (16 and a 4-row remainder, not 20 tiles of 5 rows),
// AVX-512 8-row ones (12 and a 4-row remainder).
// CHECK-LABEL: func.func @rows_100
// CHECK: scf.for %{{.*}} = %c0 to %c96 step %c6
// CHECK: into vector<6x16xf32>
// CHECK: into vector<4x16xf32>
// CHECK-NOT: linalg.matmul
// AVX512-LABEL: func.func @rows_100
// AVX512: scf.for %{{.*}} = %c0 to %c96 step %c8
// AVX512: into vector<8x32xf32>
// AVX512: into vector<4x32xf32>
// AVX512-NOT: linalg.matmul
func.func @rows_100(%a: tensor<100x64xf32>, %b: tensor<64x64xf32>) -> tensor<100x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<100x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<100x64xf32>) -> tensor<100x64xf32>
  %c = linalg.matmul ins(%a, %b : tensor<100x64xf32>, tensor<64x64xf32>) outs(%init : tensor<100x64xf32>) -> tensor<100x64xf32>
  return %c : tensor<100x64xf32>
}

// -----

// 14 rows, AVX-512: two 7-row tiles make as few tiles as 8 rows would, so the divisor is
// kept and nothing is peeled.
// AVX512-LABEL: func.func @rows_14
// AVX512: scf.for %{{.*}} = %c0 to %c14 step %c7
// AVX512: into vector<7x32xf32>
// AVX512-NOT: vector.contract
// AVX512: return
func.func @rows_14(%a: tensor<14x64xf32>, %b: tensor<64x64xf32>) -> tensor<14x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<14x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<14x64xf32>) -> tensor<14x64xf32>
  %c = linalg.matmul ins(%a, %b : tensor<14x64xf32>, tensor<64x64xf32>) outs(%init : tensor<14x64xf32>) -> tensor<14x64xf32>
  return %c : tensor<14x64xf32>
}

// -----

// Weights as column panels (pipelines/graph/weight_panels.py), 128 rows, AVX2: 6 rows x
// the panel's 16 columns, the 2-row remainder peeled.
// CHECK-LABEL: func.func @panels_128
// CHECK: into vector<6x1x16xf32>
// CHECK: into vector<2x1x16xf32>
// CHECK-NOT: linalg.generic
func.func @panels_128(%a: tensor<128x64xf32>, %b: tensor<4x64x16xf32>) -> tensor<128x4x16xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x4x16xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<128x4x16xf32>) -> tensor<128x4x16xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<128x64xf32>, tensor<4x64x16xf32>) outs(%i : tensor<128x4x16xf32>) attrs = {tilecraft.weight_panels = 16 : i64} {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<128x4x16xf32>
  return %c : tensor<128x4x16xf32>
}
