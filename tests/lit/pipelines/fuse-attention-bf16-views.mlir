// tilecraft-fuse-attention with bf16=1 where K^T is a transpose of K as a projection makes it
// ([seq, heads, d], D = 32, no keys to pad): the kernel takes K itself and packs K^T's bf16
// pairs from it: per block of 16 keys, one read of each key's 32 d, rounded to 16 words of
// pairs, then the 16 x 16 block of words transposed in registers (4 rounds of 16 two-source
// shuffles), each transposed row (a pair of d, 16 keys) stored. The transpose is left dead
// for canonicalization.
// RUN: tilecraft-opt %s --tilecraft-fuse-attention="lanes=16 bf16=1" | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-fuse-attention="lanes=16" | FileCheck %s --check-prefix=F32

// CHECK-LABEL: func.func @attention_bf16_k_in_place
// CHECK: call @tilecraft_attention_2x8x32x32x16_bf16_0(%arg0, %arg1, %arg2, %{{.*}}) : (tensor<2x8x32xf32>, tensor<32x2x32xf32>, tensor<2x32x16xf32>, tensor<f32>)
// CHECK-LABEL: func.func private @tilecraft_attention_2x8x32x32x16_bf16_0
// CHECK: tensor.empty() : tensor<8x32xbf16>
// CHECK: %[[KEYS:.*]] = tensor.empty() : tensor<16x64xbf16>
// CHECK: scf.for %[[KEY:.*]] = %c0 to %c32 step %c16 iter_args(%{{.*}} = %[[KEYS]])
// CHECK: vector.transfer_read %arg1[%[[KEY]], %{{.*}}, %c0], {{.*}} : tensor<32x2x32xf32>, vector<32xf32>
// CHECK: arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// CHECK: vector.bitcast %{{.*}} : vector<32xbf16> to vector<16xi32>
// CHECK-COUNT-64: vector.shuffle {{.*}} : vector<16xi32>, vector<16xi32>
// CHECK: vector.transfer_write %{{.*}}[%c0, %{{.*}}] {{.*}} : vector<32xbf16>, tensor<16x64xbf16>
// CHECK: vector.transfer_write %{{.*}}[%c15, %{{.*}}] {{.*}} : vector<32xbf16>, tensor<16x64xbf16>
// CHECK: vector.contract

// F32: call @tilecraft_attention_2x8x32x32x16_0(%arg0, %transposed, %arg2, %{{.*}}) : (tensor<2x8x32xf32>, tensor<2x32x32xf32>, tensor<2x32x16xf32>, tensor<f32>)

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2) -> ()>
#rows = affine_map<(d0, d1, d2) -> (d0, d1)>
#row_bcast = affine_map<(d0, d1, d2) -> (d0, d1, 0)>

// The scratch, a row per query row of the block: 64 outputs, 40 p, the running max and sum, alpha.
// Two blocks of 40 keys; per block, register tiles of 2 rows.
// The scores micro-kernel: 2 rows x 5 vectors of keys.
// The row's max, sum and alpha, then its p; no p @ V in this loop.
// p @ V for the block's 4 rows, after their scores: each row's alpha...
// ... then chunks of 3 output vectors: a 4 x 3 register tile over the block's keys, a vector
// of keys at a time: 3 loads of V, then per row a broadcast of its p and 3 FMAs.
// The last 2 output vectors: a 4 x 2 tile.
func.func @attention_bf16_k_in_place(%q: tensor<2x8x32xf32>, %k: tensor<32x2x32xf32>, %v: tensor<2x32x16xf32>) -> tensor<2x8x16xf32> {
  %ek = tensor.empty() : tensor<2x32x32xf32>
  %kt = linalg.transpose ins(%k : tensor<32x2x32xf32>) outs(%ek : tensor<2x32x32xf32>) permutation = [1, 2, 0]
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant dense<0.25> : tensor<f32>
  %e0 = tensor.empty() : tensor<2x8x32xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x8x32xf32>, tensor<2x32x32xf32>) outs(%f0 : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %x = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %scale : tensor<2x8x32xf32>, tensor<f32>) outs(%e0 : tensor<2x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  %e1 = tensor.empty() : tensor<2x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<2x8x32xf32>) outs(%f1 : tensor<2x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %max1 = tensor.expand_shape %max [[0], [1, 2]] output_shape [2, 8, 1] : tensor<2x8xf32> into tensor<2x8x1xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %max1 : tensor<2x8x32xf32>, tensor<2x8x1xf32>) outs(%e0 : tensor<2x8x32xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%exp : tensor<2x8x32xf32>) outs(%f2 : tensor<2x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %sum1 = tensor.expand_shape %sum [[0], [1, 2]] output_shape [2, 8, 1] : tensor<2x8xf32> into tensor<2x8x1xf32>
  %p = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%exp, %sum1 : tensor<2x8x32xf32>, tensor<2x8x1xf32>) outs(%e0 : tensor<2x8x32xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %inv = arith.divf %one, %t : f32
    %r = arith.mulf %a, %inv : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  %e3 = tensor.empty() : tensor<2x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %y = linalg.batch_matmul ins(%p, %v : tensor<2x8x32xf32>, tensor<2x32x16xf32>) outs(%f3 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}
