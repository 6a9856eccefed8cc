// tilecraft-combine-parallel-matmul: Q/K/V-style matmuls sharing their input become one.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-combine-parallel-matmul --tilecraft-fold-constants --canonicalize --cse | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// Two projections with biases: one matmul over [W1 W2], one bias add over [b1 b2], slices.
// CHECK-LABEL: func.func @two_projections
// CHECK-DAG: %[[W:.*]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 5.000000e+00, 6.000000e+00], [3.000000e+00, 4.000000e+00, 7.000000e+00, 8.000000e+00]]> : tensor<2x4xf32>
// CHECK-DAG: %[[B:.*]] = arith.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK: %[[M:.*]] = linalg.matmul ins(%arg0, %[[W]] : tensor<3x2xf32>, tensor<2x4xf32>)
// CHECK-NOT: linalg.matmul
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%[[M]], %[[B]] :
// CHECK-DAG: tensor.extract_slice %[[Y]][0, 0] [3, 2] [1, 1]
// CHECK-DAG: tensor.extract_slice %[[Y]][0, 2] [3, 2] [1, 1]
func.func @two_projections(%x: tensor<3x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %w1 = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b1 = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %e = tensor.empty() : tensor<3x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<3x2xf32>) -> tensor<3x2xf32>
  %m1 = linalg.matmul ins(%x, %w1 : tensor<3x2xf32>, tensor<2x2xf32>) outs(%f : tensor<3x2xf32>) -> tensor<3x2xf32>
  %y1 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%m1, %b1 : tensor<3x2xf32>, tensor<2xf32>) outs(%e : tensor<3x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<3x2xf32>
  %w2 = arith.constant dense<[[5.0, 6.0], [7.0, 8.0]]> : tensor<2x2xf32>
  %b2 = arith.constant dense<[3.0, 4.0]> : tensor<2xf32>
  %m2 = linalg.matmul ins(%x, %w2 : tensor<3x2xf32>, tensor<2x2xf32>) outs(%f : tensor<3x2xf32>) -> tensor<3x2xf32>
  %y2 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%m2, %b2 : tensor<3x2xf32>, tensor<2xf32>) outs(%e : tensor<3x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<3x2xf32>
  return %y1, %y2 : tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// Negative: different inputs, or a weight that is an argument, are not combined.
// CHECK-LABEL: func.func @not_parallel
// CHECK-COUNT-3: linalg.matmul
// CHECK-NOT: tensor.extract_slice
func.func @not_parallel(%x: tensor<3x2xf32>, %z: tensor<3x2xf32>, %v: tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %w1 = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %e = tensor.empty() : tensor<3x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<3x2xf32>) -> tensor<3x2xf32>
  %m1 = linalg.matmul ins(%x, %w1 : tensor<3x2xf32>, tensor<2x2xf32>) outs(%f : tensor<3x2xf32>) -> tensor<3x2xf32>
  %m2 = linalg.matmul ins(%z, %w1 : tensor<3x2xf32>, tensor<2x2xf32>) outs(%f : tensor<3x2xf32>) -> tensor<3x2xf32>
  %m3 = linalg.matmul ins(%x, %v : tensor<3x2xf32>, tensor<2x2xf32>) outs(%f : tensor<3x2xf32>) -> tensor<3x2xf32>
  return %m1, %m2, %m3 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
}
