// A matmul whose K is two loops: the ViT's second MLP Linear (nn.MultiheadAttention's
// sequence-first [tokens, 1, width] rows) reads the first Linear's weight-panel output
// C[m, 1, 192, 16] as A, so it reduces over (192 panels, 16 columns) = 3072, and its
// weights are panels B'[48, 192, 16, 16]. The K cache block tiles the outer K loop by
// whole panels: 16 x 16 = 256 elements of K per block (schedule/matmul_plan.py
// ``reduction_block``), outside the 6-row register loop, with the last 5 of 197 rows
// peeled; the weights are recognized as panels (``weight_panel_dims``), so column blocks
// of 8 panels make the tasks (6 on two threads) and, on one thread, the outer cache loop.
// Before, K counted as its inner 16 only: no K block, each register tile streamed all
// 3072 x 768 weights, and on two threads a prime M made one task.
// RUN: tilecraft-opt %s --tilecraft-schedule="vector-bits=256 num-threads=1" | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-schedule="vector-bits=256 num-threads=2" | FileCheck %s --check-prefix=TWO

// CHECK-LABEL: func.func @split_k
// CHECK: scf.for %{{.*}} = %c0 to %c48 step %c8
// CHECK: scf.for %{{.*}} = %c0 to %c192 step %c16
// CHECK: scf.for %{{.*}} = %c0 to %c192 step %c6
// CHECK: vector.contract {{.*}} : vector<6x1x1x1xf32>, vector<1x1x1x16xf32> into vector<6x1x1x16xf32>
// CHECK: vector.contract {{.*}} : vector<5x1x1x1xf32>, vector<1x1x1x16xf32> into vector<5x1x1x16xf32>
// CHECK-NOT: linalg.generic
// CHECK: return
// TWO-LABEL: func.func @split_k
// TWO: scf.forall (%{{.*}}) in (6)
// TWO: scf.for %{{.*}} = %c0 to %c192 step %c16
// TWO: scf.for %{{.*}} = %c0 to %c192 step %c6
// TWO: vector.contract {{.*}} into vector<6x1x1x16xf32>
// TWO: vector.contract {{.*}} into vector<5x1x1x16xf32>
// TWO-NOT: linalg.generic
// TWO: return
func.func @split_k(%a: tensor<197x1x192x16xf32>, %w: tensor<48x192x16x16xf32>) -> tensor<197x1x48x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<197x1x48x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<197x1x48x16xf32>) -> tensor<197x1x48x16xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(m, u, nb, j, kb, kj) -> (m, u, kb, kj)>,
                                        affine_map<(m, u, nb, j, kb, kj) -> (nb, kb, kj, j)>,
                                        affine_map<(m, u, nb, j, kb, kj) -> (m, u, nb, j)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
       ins(%a, %w : tensor<197x1x192x16xf32>, tensor<48x192x16x16xf32>) outs(%f : tensor<197x1x48x16xf32>)
       attrs = {tilecraft.weight_panels = 16 : i64} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<197x1x48x16xf32>
  return %c : tensor<197x1x48x16xf32>
}
