// tilecraft-fuse-attention with 140 keys: rather than padding N to whole blocks (3 blocks of 48
// or 64: 144 or 192 keys), the kernel loops over two whole blocks of 64 keys and then runs one
// narrower block of the last 16 (a single vector: 4 keys past N at -inf), K^T and V padded to
// 144 keys (AttentionShape.tail_vectors). With a causal mask (key ranges per row) the
// kernel keeps whole blocks: its register tiles choose the blocks they loop over.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-fuse-attention="num-threads=2" | FileCheck %s

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2) -> ()>
#rows = affine_map<(d0, d1, d2) -> (d0, d1)>
#row_bcast = affine_map<(d0, d1, d2) -> (d0, d1, 0)>

// CHECK-LABEL: func.func @attention
// CHECK: %[[KT:.*]] = tensor.pad %arg1 low[0, 0, 0] high[0, 0, 4]
// CHECK: %[[V:.*]] = tensor.pad %arg2 low[0, 0, 0] high[0, 4, 0]
// CHECK: call @tilecraft_attention_3x8x140x16x16_0(%arg0, %[[KT]], %[[V]], %{{.*}}) : (tensor<3x8x16xf32>, tensor<3x16x144xf32>, tensor<3x144x16xf32>, tensor<f32>) -> tensor<3x8x16xf32>
// CHECK-LABEL: func.func private @tilecraft_attention_3x8x140x16x16_0
// The whole blocks of 64 keys, 4 vectors of scores per row of a 4-row register tile.
// Whole blocks have no keys past N: no mask.
// CHECK: %[[WHOLE:.*]]:{{[0-9]+}} = scf.for %{{.*}} = %c0 to %c128 step %c64 iter_args(
// CHECK-NOT: vector.create_mask
// CHECK: scf.for %{{.*}} = %c0 to %c16 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-NOT: vector.create_mask
// CHECK: scf.yield
// The tail after the loop, from key 128, on the loop's results: one vector of scores per row.
// CHECK: scf.for %{{.*}} = %c0 to %c16 step %c1 iter_args(%{{[^,]*}} = %cst{{[_0-9]*}}, %{{[^,]*}} = %cst{{[_0-9]*}}, %{{[^,]*}} = %cst{{[_0-9]*}}, %{{[^,]*}} = %cst{{[_0-9]*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: vector.constant_mask [12] : vector<16xi1>
// CHECK: %[[WHOLE]]#0
// CHECK: arith.divf
func.func @attention(%q: tensor<3x8x16xf32>, %kt: tensor<3x16x140xf32>, %v: tensor<3x140x16xf32>) -> tensor<3x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant dense<0.25> : tensor<f32>
  %e0 = tensor.empty() : tensor<3x8x140xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<3x8x140xf32>) -> tensor<3x8x140xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<3x8x16xf32>, tensor<3x16x140xf32>) outs(%f0 : tensor<3x8x140xf32>) -> tensor<3x8x140xf32>
  %x = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %scale : tensor<3x8x140xf32>, tensor<f32>) outs(%e0 : tensor<3x8x140xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<3x8x140xf32>
  %e1 = tensor.empty() : tensor<3x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<3x8xf32>) -> tensor<3x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<3x8x140xf32>) outs(%f1 : tensor<3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<3x8xf32>
  %max1 = tensor.expand_shape %max [[0], [1, 2]] output_shape [3, 8, 1] : tensor<3x8xf32> into tensor<3x8x1xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %max1 : tensor<3x8x140xf32>, tensor<3x8x1xf32>) outs(%e0 : tensor<3x8x140xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<3x8x140xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<3x8xf32>) -> tensor<3x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%exp : tensor<3x8x140xf32>) outs(%f2 : tensor<3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<3x8xf32>
  %sum1 = tensor.expand_shape %sum [[0], [1, 2]] output_shape [3, 8, 1] : tensor<3x8xf32> into tensor<3x8x1xf32>
  %p = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%exp, %sum1 : tensor<3x8x140xf32>, tensor<3x8x1xf32>) outs(%e0 : tensor<3x8x140xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %inv = arith.divf %one, %t : f32
    %r = arith.mulf %a, %inv : f32
    linalg.yield %r : f32
  } -> tensor<3x8x140xf32>
  %e3 = tensor.empty() : tensor<3x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<3x8x16xf32>) -> tensor<3x8x16xf32>
  %y = linalg.batch_matmul ins(%p, %v : tensor<3x8x140xf32>, tensor<3x140x16xf32>) outs(%f3 : tensor<3x8x16xf32>) -> tensor<3x8x16xf32>
  return %y : tensor<3x8x16xf32>
}

