// tilecraft-fuse-attention: batch_matmul(Q, K^T), a scale, softmax over the keys (max, exp,
// sum, the product with 1/sum) and batch_matmul(P, V) become one call of a generated kernel
// that keeps the scores in registers: per block of keys, the scores are Q x K^T by FMAs,
// the scale is cloned onto them, the row max and sum are updated online (the accumulators
// rescaled by exp(old max - new max)) and P x V is added. K^T and V are padded from 20 keys
// to a block of 32; the padding keys are set to -inf by a mask.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-fuse-attention="num-threads=2" | FileCheck %s

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2) -> ()>
#rows = affine_map<(d0, d1, d2) -> (d0, d1)>
#row_bcast = affine_map<(d0, d1, d2) -> (d0, d1, 0)>

// CHECK-LABEL: func.func @attention
// CHECK-NOT: linalg.batch_matmul
// CHECK-NOT: math.exp
// CHECK: %[[KT:.*]] = tensor.pad %arg1 low[0, 0, 0] high[0, 0, 12]
// CHECK: %[[V:.*]] = tensor.pad %arg2 low[0, 0, 0] high[0, 12, 0]
// CHECK: %[[Y:.*]] = call @tilecraft_attention_3x8x20x16x16_0(%arg0, %[[KT]], %[[V]], %{{.*}}) : (tensor<3x8x16xf32>, tensor<3x16x32xf32>, tensor<3x32x16xf32>, tensor<f32>) -> tensor<3x8x16xf32>
// CHECK: return %[[Y]]
// CHECK-LABEL: func.func private @tilecraft_attention_3x8x20x16x16_0
// Two blocks of 4 query rows per batch entry: 3 entries alone are fewer than two tasks per thread.
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in (3, 2)
// CHECK: scf.for
// CHECK: vector.fma
// CHECK: arith.mulf
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : vector<16xi1>, vector<16xf32>
// The row max and sum as butterflies: max as compare and select (one vmaxps), 4 rounds of
// shuffles at 16 lanes, no vector.reduction (its ordered add was 16 dependent scalar adds).
// CHECK-NOT: vector.reduction
// CHECK: %[[C:.*]] = arith.cmpf ogt, %[[A:.*]], %[[B:.*]] : vector<16xf32>
// CHECK-NEXT: %[[M:.*]] = arith.select %[[C]], %[[A]], %[[B]] : vector<16xi1>, vector<16xf32>
// CHECK-NEXT: vector.shuffle %[[M]], %[[M]] [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7]
// CHECK-COUNT-3: vector.shuffle
// CHECK: math.exp
// CHECK: %[[S:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK-NEXT: vector.shuffle %[[S]], %[[S]] [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7]
// CHECK-NOT: vector.reduction
// CHECK: vector.fma
// CHECK: arith.divf
// CHECK: vector.transfer_write
func.func @attention(%q: tensor<3x8x16xf32>, %kt: tensor<3x16x20xf32>, %v: tensor<3x20x16xf32>) -> tensor<3x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant dense<0.25> : tensor<f32>
  %e0 = tensor.empty() : tensor<3x8x20xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<3x8x20xf32>) -> tensor<3x8x20xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<3x8x16xf32>, tensor<3x16x20xf32>) outs(%f0 : tensor<3x8x20xf32>) -> tensor<3x8x20xf32>
  %x = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %scale : tensor<3x8x20xf32>, tensor<f32>) outs(%e0 : tensor<3x8x20xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<3x8x20xf32>
  %e1 = tensor.empty() : tensor<3x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<3x8xf32>) -> tensor<3x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<3x8x20xf32>) outs(%f1 : tensor<3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<3x8xf32>
  %max1 = tensor.expand_shape %max [[0], [1, 2]] output_shape [3, 8, 1] : tensor<3x8xf32> into tensor<3x8x1xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %max1 : tensor<3x8x20xf32>, tensor<3x8x1xf32>) outs(%e0 : tensor<3x8x20xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<3x8x20xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<3x8xf32>) -> tensor<3x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%exp : tensor<3x8x20xf32>) outs(%f2 : tensor<3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<3x8xf32>
  %sum1 = tensor.expand_shape %sum [[0], [1, 2]] output_shape [3, 8, 1] : tensor<3x8xf32> into tensor<3x8x1xf32>
  %p = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%exp, %sum1 : tensor<3x8x20xf32>, tensor<3x8x1xf32>) outs(%e0 : tensor<3x8x20xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %inv = arith.divf %one, %t : f32
    %r = arith.mulf %a, %inv : f32
    linalg.yield %r : f32
  } -> tensor<3x8x20xf32>
  %e3 = tensor.empty() : tensor<3x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<3x8x16xf32>) -> tensor<3x8x16xf32>
  %y = linalg.batch_matmul ins(%p, %v : tensor<3x8x20xf32>, tensor<3x20x16xf32>) outs(%f3 : tensor<3x8x16xf32>) -> tensor<3x8x16xf32>
  return %y : tensor<3x8x16xf32>
}

// -----

// The probabilities are also returned: they must be stored, and nothing is fused.
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#rows = affine_map<(d0, d1, d2) -> (d0, d1)>
#row_bcast = affine_map<(d0, d1, d2) -> (d0, d1, 0)>

// CHECK-LABEL: func.func @probabilities_returned
// CHECK-COUNT-2: linalg.batch_matmul
// CHECK-NOT: call @tilecraft_attention
func.func @probabilities_returned(%q: tensor<3x8x16xf32>, %kt: tensor<3x16x20xf32>, %v: tensor<3x20x16xf32>) -> (tensor<3x8x16xf32>, tensor<3x8x20xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<3x8x20xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<3x8x20xf32>) -> tensor<3x8x20xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<3x8x16xf32>, tensor<3x16x20xf32>) outs(%f0 : tensor<3x8x20xf32>) -> tensor<3x8x20xf32>
  %e1 = tensor.empty() : tensor<3x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<3x8xf32>) -> tensor<3x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%s : tensor<3x8x20xf32>) outs(%f1 : tensor<3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<3x8xf32>
  %max1 = tensor.expand_shape %max [[0], [1, 2]] output_shape [3, 8, 1] : tensor<3x8xf32> into tensor<3x8x1xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %max1 : tensor<3x8x20xf32>, tensor<3x8x1xf32>) outs(%e0 : tensor<3x8x20xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<3x8x20xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<3x8xf32>) -> tensor<3x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%exp : tensor<3x8x20xf32>) outs(%f2 : tensor<3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<3x8xf32>
  %sum1 = tensor.expand_shape %sum [[0], [1, 2]] output_shape [3, 8, 1] : tensor<3x8xf32> into tensor<3x8x1xf32>
  %p = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%exp, %sum1 : tensor<3x8x20xf32>, tensor<3x8x1xf32>) outs(%e0 : tensor<3x8x20xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %r = arith.divf %a, %t : f32
    linalg.yield %r : f32
  } -> tensor<3x8x20xf32>
  %e3 = tensor.empty() : tensor<3x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<3x8x16xf32>) -> tensor<3x8x16xf32>
  %y = linalg.batch_matmul ins(%p, %v : tensor<3x8x20xf32>, tensor<3x20x16xf32>) outs(%f3 : tensor<3x8x16xf32>) -> tensor<3x8x16xf32>
  return %y, %p : tensor<3x8x16xf32>, tensor<3x8x20xf32>
}
