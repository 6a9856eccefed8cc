// Matmul columns that no multiple of the vector lanes divides (issue #43): the register tile
// takes whole vectors anyway, the column loop runs whole tiles and its last, partial tile is
// peeled off as a smaller static tile, vectorized too (schedule/matmul_plan.py
// ``peels_columns``, script.py ``peel_partial_tiles``). The former rule took N's widest
// power-of-two part: one-lane columns (vector<8x1xf32> tiles) for an odd N.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=256 num-threads=1" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=512 num-threads=1" | FileCheck %s --check-prefix=AVX512

// AVX2, 37 columns: two 16-column tiles (2 x 8 lanes) over columns 0-31, then a 5-column
// tile; 6 rows divide 24, so only the columns are peeled.
// CHECK-LABEL: func.func @columns_37
// CHECK: scf.for %{{.*}} = %c0 to %c24 step %c6
// CHECK: scf.for %{{.*}} = %c0 to %c32 step %c16
// CHECK: vector.contract {{.*}} : vector<6x1xf32>, vector<1x16xf32> into vector<6x16xf32>
// CHECK: vector.contract {{.*}} : vector<6x1xf32>, vector<1x5xf32> into vector<6x5xf32>
// CHECK-NOT: vector<6x1xf32>, vector<1x1xf32>
// CHECK-NOT: linalg.matmul
// CHECK: return
// AVX-512: a 32-column tile (2 x 16 lanes), 8 rows, and the same 5-column remainder.
// AVX512-LABEL: func.func @columns_37
// AVX512: scf.for %{{.*}} = %c0 to %c24 step %c8
// AVX512: into vector<8x32xf32>
// AVX512: into vector<8x5xf32>
// AVX512-NOT: linalg.matmul
// AVX512: return
func.func @columns_37(%a: tensor<24x16xf32>, %b: tensor<16x37xf32>) -> tensor<24x37xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<24x37xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<24x37xf32>) -> tensor<24x37xf32>
  %c = linalg.matmul ins(%a, %b : tensor<24x16xf32>, tensor<16x37xf32>) outs(%init : tensor<24x37xf32>) -> tensor<24x37xf32>
  return %c : tensor<24x37xf32>
}

// -----

// Attention-shaped scores, 2 heads x 29 queries x 29 keys (a prime) over 16, AVX2: a
// 16-column tile would leave a 13-column remainder, wider than a register, so the tile is
// one vector (8 x 8: 3 x 8 + 5 columns and rows). Rows and columns are both peeled: four
// static tiles per head, 8 x 8, 8 x 5, 5 x 8 and 5 x 5.
// CHECK-LABEL: func.func @scores_29
// CHECK: into vector<1x8x8xf32>
// CHECK: into vector<1x8x5xf32>
// CHECK: into vector<1x5x8xf32>
// CHECK: into vector<1x5x5xf32>
// CHECK-NOT: linalg.batch_matmul
// CHECK: return
func.func @scores_29(%q: tensor<2x29x16xf32>, %kt: tensor<2x16x29xf32>) -> tensor<2x29x29xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<2x29x29xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<2x29x29xf32>) -> tensor<2x29x29xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x29x16xf32>, tensor<2x16x29xf32>) outs(%init : tensor<2x29x29xf32>) -> tensor<2x29x29xf32>
  return %s : tensor<2x29x29xf32>
}
