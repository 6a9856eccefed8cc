// The matmul register tile on AVX2 (16 vector registers): rows from the innermost row loop
// wider than 1 (a sequence-first [216, 1, K] A, as the simplify stage leaves
// nn.MultiheadAttention's projections), as many as fit the register file with two 8-lane
// vectors per row: 6 (8 rows would be 16 accumulators, all 16 registers).
// RUN: tilecraft-opt %s --tilecraft-schedule="vector-bits=256 num-threads=1" | FileCheck %s

// CHECK-LABEL: func.func @sequence_first
// CHECK: vector.contract {{.*}} into vector<6x1x1x16xf32>
func.func @sequence_first(%a: tensor<216x1x64xf32>, %b: tensor<4x64x16xf32>) -> tensor<216x1x4x16xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<216x1x4x16xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<216x1x4x16xf32>) -> tensor<216x1x4x16xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d2, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<216x1x64xf32>, tensor<4x64x16xf32>) outs(%i : tensor<216x1x4x16xf32>) attrs = {tilecraft.weight_panels = 16 : i64} {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<216x1x4x16xf32>
  return %c : tensor<216x1x4x16xf32>
}
