// tilecraft-fuse-attention with AVX2's 8-lane vectors at Dv = 64: a row's 8 output vectors and
// its score vectors leave no room for a second row in 16 registers, so the kernel takes a
// block of 4 query rows per block of keys (AttentionShape.blocked) and keeps their outputs
// in an L1 scratch instead of registers: per key block, register tiles of 2 rows x 5 score
// vectors (one K^T load shared by both rows) and the online softmax's step per row (p,
// alpha, max and sum into the scratch); then O = O * alpha + p @ V for the 4 rows at once,
// in register tiles of 4 rows x 3 output vectors (value_columns), each V vector loaded once
// for the 4 rows: two chunks of 3 vectors in a loop, the last 2 after it.
// RUN: tilecraft-opt %s --tilecraft-fuse-attention="num-threads=2 lanes=8" | FileCheck %s

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2) -> ()>
#rows = affine_map<(d0, d1, d2) -> (d0, d1)>
#row_bcast = affine_map<(d0, d1, d2) -> (d0, d1, 0)>

// CHECK-LABEL: func.func @attention_blocks
// CHECK-NOT: linalg.batch_matmul
// CHECK: call @tilecraft_attention_3x8x80x16x64_0
// CHECK-LABEL: func.func private @tilecraft_attention_3x8x80x16x64_0
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in (3, 2)
// The scratch, a row per query row of the block: 64 outputs, 40 p, the running max and sum, alpha.
// CHECK: %[[SCRATCH:.*]] = tensor.empty() : tensor<4x107xf32>
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c4 iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %[[SCRATCH]])
// CHECK: tensor.insert %{{.*}} into %{{.*}}[%c3, %c104] : tensor<4x107xf32>
// Two blocks of 40 keys; per block, register tiles of 2 rows.
// CHECK: %{{.*}} = scf.for %[[J:.*]] = %c0 to %c80 step %c40 iter_args(%{{.*}}) -> (tensor<4x107xf32>)
// CHECK: scf.for %[[PAIR:.*]] = %c0 to %c4 step %c2 iter_args(%{{.*}}) -> (tensor<4x107xf32>)
// The scores micro-kernel: 2 rows x 5 vectors of keys.
// CHECK: scf.for %{{.*}} = %c0 to %c16 step %c1 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: vector.fma
// The row's max and sum: butterflies of 3 shuffles at 8 lanes, the max as compare and select.
// CHECK-NOT: vector.reduction
// CHECK: arith.cmpf ogt
// CHECK: vector.shuffle %{{.*}} [4, 5, 6, 7, 0, 1, 2, 3]
// CHECK: math.exp
// CHECK: vector.shuffle %{{.*}} [4, 5, 6, 7, 0, 1, 2, 3]
// The row's max, sum and alpha, then its p; no p @ V in this loop.
// CHECK: tensor.insert %{{.*}}[%[[PAIR]], %c104] : tensor<4x107xf32>
// CHECK: tensor.insert %{{.*}}[%[[PAIR]], %c106] : tensor<4x107xf32>
// CHECK: vector.transfer_write %{{.*}}[%[[PAIR]], %c64] {{.*}} tensor<4x107xf32>
// CHECK-NOT: vector.fma
// CHECK: scf.yield
// p @ V for the block's 4 rows, after their scores: each row's alpha...
// CHECK: tensor.extract %{{.*}}[%c3, %c106] : tensor<4x107xf32>
// ... then chunks of 3 output vectors: a 4 x 3 register tile over the block's keys, a vector
// of keys at a time: 3 loads of V, then per row a broadcast of its p and 3 FMAs.
// CHECK: scf.for %[[CHUNK:.*]] = %c0 to %c48 step %c24 iter_args(%{{.*}}) -> (tensor<4x107xf32>)
// CHECK: vector.transfer_read %{{.*}}[%c3, %[[CHUNK]]], {{.*}} tensor<4x107xf32>, vector<8xf32>
// CHECK: scf.for %{{.*}} = %c0 to %c40 step %c8 iter_args({{([^,]*, ){11}[^,]*}}) -> ({{(vector<8xf32>, ){11}vector<8xf32>}})
// CHECK: vector.transfer_read %{{.*}}[%{{.*}}, %{{.*}}, %[[CHUNK]]], {{.*}} tensor<3x80x64xf32>, vector<8xf32>
// CHECK-NEXT: vector.transfer_read {{.*}} tensor<3x80x64xf32>, vector<8xf32>
// CHECK-NEXT: vector.transfer_read {{.*}} tensor<3x80x64xf32>, vector<8xf32>
// CHECK-NEXT: tensor.extract %{{.*}}[%c0, %{{.*}}] : tensor<4x107xf32>
// CHECK-NEXT: vector.broadcast
// CHECK-NEXT: vector.fma
// CHECK-NEXT: vector.fma
// CHECK-NEXT: vector.fma
// CHECK-NEXT: tensor.extract %{{.*}}[%c1, %{{.*}}] : tensor<4x107xf32>
// CHECK: vector.transfer_write %{{.*}}[%c3, %{{.*}}] {{.*}} tensor<4x107xf32>
// The last 2 output vectors: a 4 x 2 tile.
// CHECK: scf.for %{{.*}} = %c0 to %c40 step %c8 iter_args({{([^,]*, ){7}[^,]*}}) -> ({{(vector<8xf32>, ){7}vector<8xf32>}})
// CHECK: scf.forall.in_parallel
func.func @attention_blocks(%q: tensor<3x8x16xf32>, %kt: tensor<3x16x80xf32>, %v: tensor<3x80x64xf32>) -> tensor<3x8x64xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant dense<0.25> : tensor<f32>
  %e0 = tensor.empty() : tensor<3x8x80xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<3x8x80xf32>) -> tensor<3x8x80xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<3x8x16xf32>, tensor<3x16x80xf32>) outs(%f0 : tensor<3x8x80xf32>) -> tensor<3x8x80xf32>
  %x = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %scale : tensor<3x8x80xf32>, tensor<f32>) outs(%e0 : tensor<3x8x80xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<3x8x80xf32>
  %e1 = tensor.empty() : tensor<3x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<3x8xf32>) -> tensor<3x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<3x8x80xf32>) outs(%f1 : tensor<3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<3x8xf32>
  %max1 = tensor.expand_shape %max [[0], [1, 2]] output_shape [3, 8, 1] : tensor<3x8xf32> into tensor<3x8x1xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %max1 : tensor<3x8x80xf32>, tensor<3x8x1xf32>) outs(%e0 : tensor<3x8x80xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<3x8x80xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<3x8xf32>) -> tensor<3x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%exp : tensor<3x8x80xf32>) outs(%f2 : tensor<3x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<3x8xf32>
  %sum1 = tensor.expand_shape %sum [[0], [1, 2]] output_shape [3, 8, 1] : tensor<3x8xf32> into tensor<3x8x1xf32>
  %p = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%exp, %sum1 : tensor<3x8x80xf32>, tensor<3x8x1xf32>) outs(%e0 : tensor<3x8x80xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %inv = arith.divf %one, %t : f32
    %r = arith.mulf %a, %inv : f32
    linalg.yield %r : f32
  } -> tensor<3x8x80xf32>
  %e3 = tensor.empty() : tensor<3x8x64xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<3x8x64xf32>) -> tensor<3x8x64xf32>
  %y = linalg.batch_matmul ins(%p, %v : tensor<3x8x80xf32>, tensor<3x80x64xf32>) outs(%f3 : tensor<3x8x64xf32>) -> tensor<3x8x64xf32>
  return %y : tensor<3x8x64xf32>
}

