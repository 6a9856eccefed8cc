// tilecraft-contiguous-reduction-loops: a reduction generic reading its input through a
// permutation of its loops runs them in the input's order (pipelines/graph/reduction_order.py).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-contiguous-reduction-loops | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-contiguous-reduction-loops --tilecraft-schedule="vector-bits=512 num-threads=1" | FileCheck %s --check-prefix=VEC

// A global average pool of an NHWC image with SiLU fused into its body, as the layout pass
// and elementwise fusion leave EfficientNet's head: loops (n, c, h, w) become (n, h, w, c),
// the input read in order, the output through (d0, d3). Vectorized along the channels, its
// vectors then end in the 64 channels, not in a unit reduced dim (vector<1x64x1x1xf32>,
// one lane per op once in LLVM). (Its schedule: tests/graph/test_reduction_order.py runs odd channel counts.)
// CHECK-DAG: #[[$IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
// CHECK-LABEL: func.func @silu_pool
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #[[$OUT]]], iterator_types = ["parallel", "reduction", "reduction", "parallel"]}
// CHECK: math.exp
// CHECK: arith.divf
// VEC-LABEL: func.func @silu_pool
// VEC-NOT: x1xf32>
// VEC: math.exp {{.*}} : vector<1x1x1x64xf32>
// VEC-NOT: x1xf32>
// VEC: return
func.func @silu_pool(%x: tensor<1x7x7x1280xf32>) -> tensor<1x1280xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<1x1280xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x1280xf32>) -> tensor<1x1280xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, h, w, c)>, affine_map<(n, c, h, w) -> (n, c)>],
                       iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%x : tensor<1x7x7x1280xf32>) outs(%init : tensor<1x1280xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %n = arith.negf %v : f32
    %ex = math.exp %n : f32
    %d = arith.addf %ex, %one : f32
    %s = arith.divf %v, %d : f32
    %a = arith.addf %s, %acc : f32
    linalg.yield %a : f32
  } -> tensor<1x1280xf32>
  return %r : tensor<1x1280xf32>
}

// -----

// Already in its input's order (a row sum): unchanged.
// CHECK-LABEL: func.func @row_sum
// CHECK: iterator_types = ["parallel", "reduction"]
// VEC-LABEL: func.func @row_sum
func.func @row_sum(%x: tensor<13x37xf32>) -> tensor<13xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<13xf32>) -> tensor<13xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<13x37xf32>) outs(%init : tensor<13xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %a = arith.addf %v, %acc : f32
    linalg.yield %a : f32
  } -> tensor<13xf32>
  return %r : tensor<13xf32>
}

// -----

// No reduction (a transpose): unchanged; its schedule reads it in square tiles instead.
// CHECK-LABEL: func.func @transpose
// CHECK: indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel"]
// CHECK-SAME: ins(%{{.*}} : tensor<37x13xf32>)
// VEC-LABEL: func.func @transpose
func.func @transpose(%x: tensor<37x13xf32>) -> tensor<13x37xf32> {
  %e = tensor.empty() : tensor<13x37xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<37x13xf32>) outs(%e : tensor<13x37xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  } -> tensor<13x37xf32>
  return %r : tensor<13x37xf32>
}
