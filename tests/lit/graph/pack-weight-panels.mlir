// tilecraft-pack-weight-panels: a matmul with constant weights reads them as column panels
// B'[n / 16, k, n % 16] (the transpose of their expand_shape, which the constant folder
// evaluates) through a 3-D contraction on views of C; an input B, N not a multiple of the
// panel, or a single panel is left as it is.
// RUN: tilecraft-opt %s --tilecraft-pack-weight-panels | FileCheck %s

// The maps: A (m, k), B' (nb, k, j), C (m, nb, j).
// CHECK-DAG: #map = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
// CHECK-DAG: #map1 = affine_map<(d0, d1, d2, d3) -> (d1, d3, d2)>
// CHECK-DAG: #map2 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @f
// CHECK: %[[EXP:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2]] output_shape [768, 6, 16] : tensor<768x96xf32> into tensor<768x6x16xf32>
// CHECK: %[[PANELS:.*]] = linalg.transpose ins(%[[EXP]] : tensor<768x6x16xf32>) outs(%{{.*}} : tensor<6x768x16xf32>) permutation = [1, 0, 2]
// A zero-filled init becomes a fresh 3-D fill (a fusion group slices it by whole panels).
// CHECK: %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<128x6x16xf32>) -> tensor<128x6x16xf32>
// CHECK: %[[C3:.*]] = linalg.generic {indexing_maps = [#map, #map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%arg0, %[[PANELS]] : tensor<128x768xf32>, tensor<6x768x16xf32>) outs(%[[INIT]] : tensor<128x6x16xf32>) attrs = {tilecraft.weight_panels = 16 : i64}
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: tensor.collapse_shape %[[C3]] {{\[}}[0], [1, 2]] : tensor<128x6x16xf32> into tensor<128x96xf32>
// CHECK: linalg.matmul ins(%arg0, %arg1 : tensor<128x768xf32>, tensor<768x96xf32>)
// CHECK: linalg.matmul ins(%arg0, %{{.*}} : tensor<128x768xf32>, tensor<768x40xf32>)
// CHECK: linalg.matmul ins(%arg0, %{{.*}} : tensor<128x768xf32>, tensor<768x16xf32>)
func.func @f(%a: tensor<128x768xf32>, %b: tensor<768x96xf32>) -> (tensor<128x96xf32>, tensor<128x96xf32>, tensor<128x40xf32>, tensor<128x16xf32>) {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<1.0> : tensor<768x96xf32>
  %w40 = arith.constant dense<1.0> : tensor<768x40xf32>
  %w16 = arith.constant dense<1.0> : tensor<768x16xf32>
  %e = tensor.empty() : tensor<128x96xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<128x96xf32>) -> tensor<128x96xf32>
  %c = linalg.matmul ins(%a, %w : tensor<128x768xf32>, tensor<768x96xf32>) outs(%i : tensor<128x96xf32>) -> tensor<128x96xf32>
  %d = linalg.matmul ins(%a, %b : tensor<128x768xf32>, tensor<768x96xf32>) outs(%i : tensor<128x96xf32>) -> tensor<128x96xf32>
  %e40 = tensor.empty() : tensor<128x40xf32>
  %i40 = linalg.fill ins(%z : f32) outs(%e40 : tensor<128x40xf32>) -> tensor<128x40xf32>
  %f = linalg.matmul ins(%a, %w40 : tensor<128x768xf32>, tensor<768x40xf32>) outs(%i40 : tensor<128x40xf32>) -> tensor<128x40xf32>
  %e16 = tensor.empty() : tensor<128x16xf32>
  %i16 = linalg.fill ins(%z : f32) outs(%e16 : tensor<128x16xf32>) -> tensor<128x16xf32>
  %g = linalg.matmul ins(%a, %w16 : tensor<128x768xf32>, tensor<768x16xf32>) outs(%i16 : tensor<128x16xf32>) -> tensor<128x16xf32>
  return %c, %d, %f, %g : tensor<128x96xf32>, tensor<128x96xf32>, tensor<128x40xf32>, tensor<128x16xf32>
}
