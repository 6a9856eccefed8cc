// tilecraft-unpack-groups: fusion groups back to linalg ops, tagged with their group.
// RUN: tilecraft-opt %s --tilecraft-fuse-ops --tilecraft-unpack-groups | FileCheck %s
// Groups survive a round trip through text (tilecraft-opt loads the graph dialect).
// RUN: tilecraft-opt %s --tilecraft-fuse-ops | tilecraft-opt --tilecraft-unpack-groups | FileCheck %s
// Negative: without groups the pass changes nothing.
// RUN: tilecraft-opt %s --tilecraft-unpack-groups | FileCheck %s --check-prefix=NONE

// CHECK-LABEL: func.func @two_groups
// CHECK-NOT: graph.fusion_group
// CHECK: linalg.fill {tilecraft.group = 0 : i64}
// CHECK: linalg.matmul {tilecraft.group = 0 : i64, tilecraft.group_anchor}
// CHECK: linalg.matmul {tilecraft.group = 1 : i64, tilecraft.group_anchor}
// CHECK: attrs = {tilecraft.group = 1 : i64}
// CHECK: arith.negf
// NONE-NOT: tilecraft.group
func.func @two_groups(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f : tensor<8x16xf32>) -> tensor<8x16xf32>
  %n = linalg.matmul ins(%m, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f : tensor<8x16xf32>) -> tensor<8x16xf32>
  %e1 = tensor.empty() : tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%n : tensor<8x16xf32>) outs(%e1 : tensor<8x16xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.negf %p : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
