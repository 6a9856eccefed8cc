// Elementwise fusion must not move a producer into a contraction that would recompute it per
// reduction step (TVM's "no duplicated work"), but still fuses elementwise chains and
// elementwise producers a reduction reads once per iteration.
// RUN: tilecraft-opt %s --split-input-file --pass-pipeline='builtin.module(tilecraft-fusion-barriers,func.func(linalg-fuse-elementwise-ops),tilecraft-drop-fusion-barriers,canonicalize)' | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-fusion-barriers | FileCheck %s --check-prefix=BARRIER

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// GELU-like producer of a matmul's left operand, behind a reshape the fusion pass folds.
// CHECK-LABEL: func.func @activation_then_matmul
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]
// CHECK: math.tanh
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK-NOT: math.tanh
// CHECK: return
// CHECK-NOT: __tilecraft_fusion_barrier
// BARRIER: func.func private @__tilecraft_fusion_barrier_0(tensor<2x4x8xf32>)
// BARRIER: call @__tilecraft_fusion_barrier_0(%{{.*}}) : (tensor<2x4x8xf32>) -> ()
func.func @activation_then_matmul(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>) -> tensor<2x4x16xf32> {
  %e = tensor.empty() : tensor<2x4x8xf32>
  %t = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x4x8xf32>) outs(%e : tensor<2x4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8xf32>
  %c = tensor.collapse_shape %t [[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<8x16xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m = linalg.matmul ins(%c, %w : tensor<8x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r = tensor.expand_shape %m [[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xf32> into tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// A row sum reads each producer element once: fusing the exp into it duplicates nothing.
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @exp_then_row_sum
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: math.exp
// CHECK-NOT: linalg.generic
// BARRIER-LABEL: func.func @exp_then_row_sum
// BARRIER-NOT: call @__tilecraft_fusion_barrier
func.func @exp_then_row_sum(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%t : tensor<4x8xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// Attention heads collapsed into the output projection's K: folding the reshape into the
// matmul would make it a generic with two reduction loops (heads x head_dim), whose
// vector.contract lowered element by element. The reshape keeps a barrier; the matmul stays.
// CHECK-LABEL: func.func @heads_into_projection
// CHECK: tensor.collapse_shape {{.*}} into tensor<16x32xf32>
// CHECK: linalg.matmul
// CHECK-NOT: "reduction", "reduction"
// BARRIER-LABEL: func.func @heads_into_projection
// BARRIER: %[[C:.*]] = tensor.collapse_shape
// BARRIER: call @__tilecraft_fusion_barrier_{{[0-9]+}}(%[[C]]) : (tensor<16x32xf32>) -> ()
func.func @heads_into_projection(%ctx: tensor<16x4x8xf32>, %w: tensor<32x32xf32>) -> tensor<16x32xf32> {
  %c = tensor.collapse_shape %ctx [[0], [1, 2]] : tensor<16x4x8xf32> into tensor<16x32xf32>
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<16x32xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<16x32xf32>) -> tensor<16x32xf32>
  %m = linalg.matmul ins(%c, %w : tensor<16x32xf32>, tensor<32x32xf32>) outs(%acc : tensor<16x32xf32>) -> tensor<16x32xf32>
  return %m : tensor<16x32xf32>
}
