// tilecraft-contraction-operand-layout: a contraction operand carrying the output's innermost
// dim elsewhere (B^T) gets a linalg.transpose where that is free (a constant: folded next)
// or done once per element (a batched contraction: tasks split the batch); an input B of an
// unbatched matmul is left as it is (its row-block tasks would each transpose it again).
// RUN: tilecraft-opt %s --tilecraft-contraction-operand-layout | FileCheck %s

// CHECK-LABEL: func.func @f
// CHECK: linalg.matmul indexing_maps = [#map, #map1, #map2] ins(%arg0, %arg1 : tensor<128x768xf32>, tensor<256x768xf32>)
// CHECK: %[[WT:.*]] = linalg.transpose ins(%{{.*}} : tensor<256x768xf32>) outs(%{{.*}} : tensor<768x256xf32>) permutation = [1, 0]
// CHECK: linalg.matmul ins(%arg0, %[[WT]] : tensor<128x768xf32>, tensor<768x256xf32>)
// CHECK: %[[KT:.*]] = linalg.transpose ins(%arg3 : tensor<4x96x32xf32>) outs(%{{.*}} : tensor<4x32x96xf32>) permutation = [0, 2, 1]
// CHECK: linalg.generic {indexing_maps = [#map3, #map4, #map5], {{.*}} ins(%arg2, %[[KT]] : tensor<4x64x32xf32>, tensor<4x32x96xf32>)
func.func @f(%a: tensor<128x768xf32>, %b: tensor<256x768xf32>, %q: tensor<4x64x32xf32>, %k: tensor<4x96x32xf32>) -> (tensor<128x256xf32>, tensor<128x256xf32>, tensor<4x64x96xf32>) {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<1.0> : tensor<256x768xf32>
  %e = tensor.empty() : tensor<128x256xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<128x256xf32>) -> tensor<128x256xf32>
  %c = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%a, %b : tensor<128x768xf32>, tensor<256x768xf32>) outs(%i : tensor<128x256xf32>) -> tensor<128x256xf32>
  %d = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%a, %w : tensor<128x768xf32>, tensor<256x768xf32>) outs(%i : tensor<128x256xf32>) -> tensor<128x256xf32>
  %e2 = tensor.empty() : tensor<4x64x96xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<4x64x96xf32>) -> tensor<4x64x96xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
       ins(%q, %k : tensor<4x64x32xf32>, tensor<4x96x32xf32>) outs(%i2 : tensor<4x64x96xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x64x96xf32>
  return %c, %d, %s : tensor<128x256xf32>, tensor<128x256xf32>, tensor<4x64x96xf32>
}
