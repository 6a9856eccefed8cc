// A contraction whose rows are several loops (Swin's window partition folded into its
// projections: windows x tokens, [8, 7, 2, 7] here): the register tile takes its rows from
// the innermost row loop (7), and the thread level splits the outer row loops until there
// are about 4 tasks per thread (schedule/matmul_plan.py ``split_outer_rows``). Before it,
// the only row loop the thread level split was the innermost, one register tile wide, so
// the whole matmul was one task and ran on one thread at any thread count.
// RUN: tilecraft-opt %s --tilecraft-schedule="vector-bits=512 num-threads=2" | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-schedule="vector-bits=512 num-threads=1" | FileCheck %s --check-prefix=ONE

// Two threads: 8 tasks, one per outer window row, each all its 7 x 2 x 7 tokens and 96
// columns; 7-row register tiles of three 16-column weight panels (one panel, 7 x 16, before
// weight_panel_dims took rows as several loops).
// CHECK-LABEL: func.func @window_rows
// CHECK: scf.forall (%{{.*}}) in (8)
// CHECK-NOT: scf.forall
// CHECK: vector.contract {{.*}} into vector<1x1x1x1x7x3x16xf32>
// CHECK: return
// One thread: no thread level, the same register tile.
// ONE-LABEL: func.func @window_rows
// ONE-NOT: scf.forall
// ONE: vector.contract {{.*}} into vector<1x1x1x1x7x3x16xf32>
// ONE: return
func.func @window_rows(%a: tensor<1x8x7x2x7x64xf32>, %b: tensor<6x64x16xf32>) -> tensor<1x8x7x2x7x6x16xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x7x2x7x6x16xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x8x7x2x7x6x16xf32>) -> tensor<1x8x7x2x7x6x16xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d5, d7, d6)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4, d5, d6)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : tensor<1x8x7x2x7x64xf32>, tensor<6x64x16xf32>) outs(%i : tensor<1x8x7x2x7x6x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x8x7x2x7x6x16xf32>
  return %c : tensor<1x8x7x2x7x6x16xf32>
}
