// tilecraft-materialize-weight-fills: a fill read as a contraction's or convolution's input
// (directly, or through a transpose or reshape) becomes a dense_resource constant of the
// same value; the accumulator's zero fill (a destination), a fill read only by elementwise
// ops, a small fill and a fill of a non-constant value stay fills.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-materialize-weight-fills | FileCheck %s

// CHECK-LABEL: func.func @conv_filter
// CHECK-DAG: %[[W:.*]] = arith.constant dense_resource<{{.*}}> : tensor<8x4x3x3xf32>
// CHECK-DAG: %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x8x6x6xf32>)
// CHECK: linalg.conv_2d_nchw_fchw {{.*}} ins(%arg0, %[[W]] : tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) outs(%[[INIT]] : tensor<1x8x6x6xf32>)
// CHECK-NOT: linalg.fill
func.func @conv_filter(%x: tensor<1x4x8x8xf32>) -> tensor<1x8x6x6xf32> {
  %c = arith.constant 2.0e-02 : f32
  %z = arith.constant 0.0 : f32
  %we = tensor.empty() : tensor<8x4x3x3xf32>
  %w = linalg.fill ins(%c : f32) outs(%we : tensor<8x4x3x3xf32>) -> tensor<8x4x3x3xf32>
  %oe = tensor.empty() : tensor<1x8x6x6xf32>
  %o = linalg.fill ins(%z : f32) outs(%oe : tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) outs(%o : tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  return %y : tensor<1x8x6x6xf32>
}

// -----

// A Gemm's B read through a transpose: the fill before the transpose is materialized.
// CHECK-LABEL: func.func @transposed_matmul_weight
// CHECK: %[[W:.*]] = arith.constant dense_resource<{{.*}}> : tensor<32x16xf32>
// CHECK: linalg.transpose ins(%[[W]] : tensor<32x16xf32>)
// CHECK: linalg.matmul
func.func @transposed_matmul_weight(%x: tensor<2x16xf32>) -> tensor<2x32xf32> {
  %c = arith.constant 5.0e-01 : f32
  %z = arith.constant 0.0 : f32
  %we = tensor.empty() : tensor<32x16xf32>
  %w = linalg.fill ins(%c : f32) outs(%we : tensor<32x16xf32>) -> tensor<32x16xf32>
  %te = tensor.empty() : tensor<16x32xf32>
  %t = linalg.transpose ins(%w : tensor<32x16xf32>) outs(%te : tensor<16x32xf32>) permutation = [1, 0]
  %oe = tensor.empty() : tensor<2x32xf32>
  %o = linalg.fill ins(%z : f32) outs(%oe : tensor<2x32xf32>) -> tensor<2x32xf32>
  %y = linalg.matmul ins(%x, %t : tensor<2x16xf32>, tensor<16x32xf32>) outs(%o : tensor<2x32xf32>) -> tensor<2x32xf32>
  return %y : tensor<2x32xf32>
}

// -----

// Left alone: an elementwise input (a fused scalar is cheaper than a load), a fill below
// 64 elements, and a fill of a value computed at run time.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: dense_resource
// CHECK-COUNT-3: linalg.fill ins
// CHECK-NOT: dense_resource
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @left_alone(%x: tensor<16x16xf32>, %s: f32, %v: tensor<16x4xf32>) -> (tensor<16x16xf32>, tensor<16x4xf32>, tensor<16x16xf32>) {
  %c = arith.constant 3.0 : f32
  %e = tensor.empty() : tensor<16x16xf32>
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %f : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<16x16xf32>
  %se = tensor.empty() : tensor<4x4xf32>
  %small = linalg.fill ins(%c : f32) outs(%se : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = linalg.matmul ins(%v, %small : tensor<16x4xf32>, tensor<4x4xf32>) outs(%v : tensor<16x4xf32>) -> tensor<16x4xf32>
  %dyn = linalg.fill ins(%s : f32) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %n = linalg.matmul ins(%x, %dyn : tensor<16x16xf32>, tensor<16x16xf32>) outs(%x : tensor<16x16xf32>) -> tensor<16x16xf32>
  return %sum, %m, %n : tensor<16x16xf32>, tensor<16x4xf32>, tensor<16x16xf32>
}
