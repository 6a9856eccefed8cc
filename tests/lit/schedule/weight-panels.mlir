// A matmul on weight panels (graph/weight_panels.py: C'[m, nb, j] += A[m, k] * B'[nb, k, j])
// with its bias epilogue and the collapse back to 2-D: one scf.forall over tasks of 64 rows x
// 4 whole panels (2 x 6 tasks; the panel count per task follows the L2 size, here the
// conservative default hierarchy), an 8 x 32 register tile of accumulators (8 rows, one panel)
// reading 32 contiguous weights per step of K, the epilogue applied in the same task, and the
// collapse left after the loop (it moves no data).
// RUN: tilecraft-opt %s --tilecraft-mark-groups --tilecraft-schedule="vector-bits=512 num-threads=2 fuse-groups=1" | FileCheck %s

// CHECK-LABEL: func.func @panels_bias
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in (2, 6)
// CHECK: tensor.extract_slice %{{.*}} [64, 4, 32] [1, 1, 1]
// CHECK: scf.for
// CHECK: vector.transfer_read {{.*}} : tensor<8x1x32xf32>, vector<8x1x32xf32>
// CHECK: scf.for {{.*}} -> ({{.*}}vector<8x1x32xf32>)
// CHECK: vector.transfer_read {{.*}} : tensor<128x768xf32>, vector<8x1xf32>
// CHECK: vector.transfer_read {{.*}} : tensor<24x768x32xf32>, vector<1x1x32xf32>
// CHECK: vector.contract {{.*}} : vector<8x1xf32>, vector<1x1x32xf32> into vector<8x1x32xf32>
// CHECK-NOT: scf.forall
// CHECK: arith.addf {{.*}} : vector<1x1x32xf32>
// CHECK: scf.forall.in_parallel
// CHECK-NOT: scf.forall
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2]] {{.*}}: tensor<128x24x32xf32> into tensor<128x768xf32>
func.func @panels_bias(%a: tensor<128x768xf32>, %w: tensor<24x768x32xf32>, %bias: tensor<24x32xf32>) -> tensor<128x768xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x24x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<128x24x32xf32>) -> tensor<128x24x32xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(m, nb, j, k) -> (m, k)>, affine_map<(m, nb, j, k) -> (nb, k, j)>, affine_map<(m, nb, j, k) -> (m, nb, j)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
       ins(%a, %w : tensor<128x768xf32>, tensor<24x768x32xf32>) outs(%f : tensor<128x24x32xf32>) attrs = {tilecraft.weight_panels = 32 : i64} {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<128x24x32xf32>
  %e2 = tensor.empty() : tensor<128x24x32xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, nb, j) -> (m, nb, j)>, affine_map<(m, nb, j) -> (nb, j)>, affine_map<(m, nb, j) -> (m, nb, j)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
       ins(%c, %bias : tensor<128x24x32xf32>, tensor<24x32xf32>) outs(%e2 : tensor<128x24x32xf32>) {
  ^bb0(%x: f32, %b: f32, %o: f32):
    %s = arith.addf %x, %b : f32
    linalg.yield %s : f32
  } -> tensor<128x24x32xf32>
  %flat = tensor.collapse_shape %r [[0], [1, 2]] : tensor<128x24x32xf32> into tensor<128x768xf32>
  return %flat : tensor<128x768xf32>
}
