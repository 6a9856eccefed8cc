// tilecraft-fuse-attention and Swin's window attention: the shifted windows' mask is added per
// window with the scores regrouped from [windows x heads, M, N] to [windows, heads, M, N]
// and back. The matcher does not follow a score chain through such reshapes (fused, the
// whole Swin-T-style model ran at twice its unfused time: fused_attention.py's docstring),
// so those ops stay as they are; the same mask added without the reshapes (already
// broadcast over the heads) is fused, which shows the rest of the pattern matches.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-fuse-attention="num-threads=2" | FileCheck %s

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#rows = affine_map<(d0, d1, d2) -> (d0, d1)>
#row_bcast = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#window_mask = affine_map<(d0, d1, d2, d3) -> (d0, 0, d2, d3)>
#window_mask3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// CHECK-LABEL: func.func @regrouped_window_mask
// CHECK-NOT: call @tilecraft_attention
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2], [3]] output_shape [2, 2, 8, 16]
// CHECK: tensor.collapse_shape
// CHECK: linalg.batch_matmul
// CHECK-NOT: call @tilecraft_attention
func.func @regrouped_window_mask(%q: tensor<4x8x16xf32>, %kt: tensor<4x16x16xf32>, %v: tensor<4x16x16xf32>,
                                 %mask: tensor<2x1x8x16xf32>) -> tensor<4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<4x8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<4x8x16xf32>, tensor<4x16x16xf32>) outs(%f0 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %s4 = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 2, 8, 16] : tensor<4x8x16xf32> into tensor<2x2x8x16xf32>
  %e4 = tensor.empty() : tensor<2x2x8x16xf32>
  %m4 = linalg.generic {indexing_maps = [#id4, #window_mask, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s4, %mask : tensor<2x2x8x16xf32>, tensor<2x1x8x16xf32>) outs(%e4 : tensor<2x2x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x16xf32>
  %x = tensor.collapse_shape %m4 [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<4x8x16xf32>) outs(%f1 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %max1 = tensor.expand_shape %max [[0], [1, 2]] output_shape [4, 8, 1] : tensor<4x8xf32> into tensor<4x8x1xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %max1 : tensor<4x8x16xf32>, tensor<4x8x1xf32>) outs(%e0 : tensor<4x8x16xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<4x8x16xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%exp : tensor<4x8x16xf32>) outs(%f2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %sum1 = tensor.expand_shape %sum [[0], [1, 2]] output_shape [4, 8, 1] : tensor<4x8xf32> into tensor<4x8x1xf32>
  %p = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%exp, %sum1 : tensor<4x8x16xf32>, tensor<4x8x1xf32>) outs(%e0 : tensor<4x8x16xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %inv = arith.divf %one, %t : f32
    %r = arith.mulf %a, %inv : f32
    linalg.yield %r : f32
  } -> tensor<4x8x16xf32>
  %e3 = tensor.empty() : tensor<4x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.batch_matmul ins(%p, %v : tensor<4x8x16xf32>, tensor<4x16x16xf32>) outs(%f3 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %y : tensor<4x8x16xf32>
}

// -----

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#rows = affine_map<(d0, d1, d2) -> (d0, d1)>
#row_bcast = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#window_mask = affine_map<(d0, d1, d2, d3) -> (d0, 0, d2, d3)>
#window_mask3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// CHECK-LABEL: func.func @window_mask_per_batch_entry
// CHECK-NOT: linalg.batch_matmul
// CHECK: call @tilecraft_attention_4x8x16x16x16_0
func.func @window_mask_per_batch_entry(%q: tensor<4x8x16xf32>, %kt: tensor<4x16x16xf32>, %v: tensor<4x16x16xf32>,
                                       %mask: tensor<4x8x16xf32>) -> tensor<4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<4x8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<4x8x16xf32>, tensor<4x16x16xf32>) outs(%f0 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %x = linalg.generic {indexing_maps = [#id, #window_mask3, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %mask : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%e0 : tensor<4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8x16xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<4x8x16xf32>) outs(%f1 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %max1 = tensor.expand_shape %max [[0], [1, 2]] output_shape [4, 8, 1] : tensor<4x8xf32> into tensor<4x8x1xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %max1 : tensor<4x8x16xf32>, tensor<4x8x1xf32>) outs(%e0 : tensor<4x8x16xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<4x8x16xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%exp : tensor<4x8x16xf32>) outs(%f2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %sum1 = tensor.expand_shape %sum [[0], [1, 2]] output_shape [4, 8, 1] : tensor<4x8xf32> into tensor<4x8x1xf32>
  %p = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%exp, %sum1 : tensor<4x8x16xf32>, tensor<4x8x1xf32>) outs(%e0 : tensor<4x8x16xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %inv = arith.divf %one, %t : f32
    %r = arith.mulf %a, %inv : f32
    linalg.yield %r : f32
  } -> tensor<4x8x16xf32>
  %e3 = tensor.empty() : tensor<4x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.batch_matmul ins(%p, %v : tensor<4x8x16xf32>, tensor<4x16x16xf32>) outs(%f3 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %y : tensor<4x8x16xf32>
}
