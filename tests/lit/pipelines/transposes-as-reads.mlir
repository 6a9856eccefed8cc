// tilecraft-transposes-as-reads: a linalg.transpose that keeps the innermost dim in place and
// that one elementwise linalg.generic reads becomes an equivalent generic, which
// linalg-fuse-elementwise-ops folds into the reader: Swin's window reverse before the
// residual add is then the add's read, not a copy. A transpose that moves the innermost dim,
// or that something else reads too, is left alone.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-transposes-as-reads | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --pass-pipeline='builtin.module(tilecraft-transposes-as-reads,func.func(linalg-fuse-elementwise-ops))' | FileCheck %s --check-prefix=FUSED

#id6 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>

// Window reverse [1, nh, nw, ws, ws, C] -> [1, nh, ws, nw, ws, C], then a residual add.
// CHECK-DAG: #[[$READ:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d3, d2, d4, d5)>
// CHECK-LABEL: func.func @window_reverse_add
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {indexing_maps = [#[[$READ]], #{{.*}}]
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[IN]]
// FUSED-DAG: #[[$READ:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d3, d2, d4, d5)>
// FUSED-LABEL: func.func @window_reverse_add
// FUSED-NOT: linalg.transpose
// FUSED: %[[R:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #[[$READ]], #{{.*}}]
// FUSED: arith.addf
// FUSED-NOT: linalg.generic
// FUSED: return %[[R]]
func.func @window_reverse_add(%x: tensor<1x3x5x3x5x8xf32>, %w: tensor<1x3x3x5x5x8xf32>) -> tensor<1x3x5x3x5x8xf32> {
  %e = tensor.empty() : tensor<1x3x5x3x5x8xf32>
  %t = linalg.transpose ins(%w : tensor<1x3x3x5x5x8xf32>) outs(%e : tensor<1x3x5x3x5x8xf32>) permutation = [0, 1, 3, 2, 4, 5]
  %o = tensor.empty() : tensor<1x3x5x3x5x8xf32>
  %r = linalg.generic {indexing_maps = [#id6, #id6, #id6], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %t : tensor<1x3x5x3x5x8xf32>, tensor<1x3x5x3x5x8xf32>) outs(%o : tensor<1x3x5x3x5x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x3x5x3x5x8xf32>
  return %r : tensor<1x3x5x3x5x8xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// The innermost dim moves: the transpose keeps its own plan.
// CHECK-LABEL: func.func @innermost_moves
// CHECK: linalg.transpose
func.func @innermost_moves(%x: tensor<4x6x8xf32>, %w: tensor<4x8x6xf32>) -> tensor<4x6x8xf32> {
  %e = tensor.empty() : tensor<4x6x8xf32>
  %t = linalg.transpose ins(%w : tensor<4x8x6xf32>) outs(%e : tensor<4x6x8xf32>) permutation = [0, 2, 1]
  %o = tensor.empty() : tensor<4x6x8xf32>
  %r = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %t : tensor<4x6x8xf32>, tensor<4x6x8xf32>) outs(%o : tensor<4x6x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x6x8xf32>
  return %r : tensor<4x6x8xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// Also returned: it is computed anyway, so it stays a transpose.
// CHECK-LABEL: func.func @read_twice
// CHECK: linalg.transpose
func.func @read_twice(%x: tensor<6x4x8xf32>, %w: tensor<4x6x8xf32>) -> (tensor<6x4x8xf32>, tensor<6x4x8xf32>) {
  %e = tensor.empty() : tensor<6x4x8xf32>
  %t = linalg.transpose ins(%w : tensor<4x6x8xf32>) outs(%e : tensor<6x4x8xf32>) permutation = [1, 0, 2]
  %o = tensor.empty() : tensor<6x4x8xf32>
  %r = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %t : tensor<6x4x8xf32>, tensor<6x4x8xf32>) outs(%o : tensor<6x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<6x4x8xf32>
  return %r, %t : tensor<6x4x8xf32>, tensor<6x4x8xf32>
}

// -----

#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// A permutation that is not its own inverse: the input is read at the inverse permutation
// ([A, B, C, D] -> [B, C, A, D]: loops (b, c, a, d) read the input at (a, b, c, d)).
// CHECK-DAG: #[[$CYCLE:.*]] = affine_map<(d0, d1, d2, d3) -> (d2, d0, d1, d3)>
// CHECK-LABEL: func.func @three_cycle
// CHECK: linalg.generic {indexing_maps = [#[[$CYCLE]], #{{.*}}]
func.func @three_cycle(%x: tensor<3x4x2x8xf32>, %w: tensor<2x3x4x8xf32>) -> tensor<3x4x2x8xf32> {
  %e = tensor.empty() : tensor<3x4x2x8xf32>
  %t = linalg.transpose ins(%w : tensor<2x3x4x8xf32>) outs(%e : tensor<3x4x2x8xf32>) permutation = [1, 2, 0, 3]
  %o = tensor.empty() : tensor<3x4x2x8xf32>
  %r = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %t : tensor<3x4x2x8xf32>, tensor<3x4x2x8xf32>) outs(%o : tensor<3x4x2x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.mulf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<3x4x2x8xf32>
  return %r : tensor<3x4x2x8xf32>
}
