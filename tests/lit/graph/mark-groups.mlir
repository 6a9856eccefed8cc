// tilecraft-mark-groups: the tilecraft-fuse-ops partition as tags, no op moved.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-mark-groups | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func @matmul_relu
// CHECK-NOT: graph.fusion_group
// CHECK: linalg.fill {tilecraft.group = 0 : i64}
// CHECK: linalg.matmul {tilecraft.group = 0 : i64, tilecraft.group_anchor}
// CHECK: attrs = {tilecraft.group = 0 : i64}
// CHECK: arith.maximumf
func.func @matmul_relu(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<8x32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.maximumf %p, %zero : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Negative: a producer with two consumers keeps its own group number.
// CHECK-LABEL: func.func @shared
// CHECK: linalg.matmul {tilecraft.group = 0 : i64, tilecraft.group_anchor}
// CHECK: attrs = {tilecraft.group = 1 : i64}
// CHECK: attrs = {tilecraft.group = 2 : i64}
func.func @shared(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<8x32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.maximumf %p, %zero : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<8x32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.negf %p : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  return %a, %n : tensor<8x32xf32>, tensor<8x32xf32>
}
