// tilecraft-fuse-attention with bf16=1 (precision="bf16" on AVX512-BF16 targets): the kernel's
// two products are bf16 dot products, the softmax and every sum in f32. Each task rounds its
// operands to bf16 once and packs them for the dot products: Q's rows (D = 5 padded to a
// vector), K^T's rows in pairs interleaved along the keys (the odd last row paired with
// zeros), V's keys in pairs interleaved along Dv. Q K^T is then, per pair of d, one 4-byte
// broadcast of Q's pair per row and a load of K^T's pairs per key vector; p @ V is, per pair
// of keys, p rounded to bf16 and its pair broadcast, a load of V's pairs per output vector.
// Each product is the vector.contract that tilecraft-bf16-dot-products makes vdpbf16ps.
// RUN: tilecraft-opt %s --tilecraft-fuse-attention="lanes=16 bf16=1" | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-fuse-attention="lanes=16 bf16=1" --tilecraft-bf16-dot-products | FileCheck %s --check-prefix=DOTS
// RUN: tilecraft-opt %s --tilecraft-fuse-attention="lanes=16" | FileCheck %s --check-prefix=F32
// RUN: not tilecraft-opt %s --tilecraft-fuse-attention="lanes=8 bf16=1" 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK-LABEL: func.func @attention_bf16
// CHECK-NOT: linalg.batch_matmul
// CHECK: call @tilecraft_attention_2x8x20x5x16_bf16_0(%{{.*}}) : (tensor<2x8x5xf32>, tensor<2x5x32xf32>, tensor<2x32x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
// CHECK-LABEL: func.func private @tilecraft_attention_2x8x20x5x16_bf16_0
// CHECK: scf.forall
// Q's rows of the task, rounded a vector at a time.
// CHECK: tensor.empty() : tensor<8x16xbf16>
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// K^T: two pairs of rows, then the fifth row with zeros.
// CHECK: %[[KEYS:.*]] = tensor.empty() : tensor<3x64xbf16>
// CHECK: scf.for %{{.*}} = %c0 to %c2 step %c1
// CHECK: vector.interleave %{{.*}}, %{{.*}} : vector<16xf32> -> vector<32xf32>
// CHECK: arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// CHECK: vector.interleave %{{.*}}, %cst{{.*}} : vector<16xf32> -> vector<32xf32>
// V: 16 pairs of keys (20 padded to 32).
// CHECK: tensor.empty() : tensor<16x32xbf16>
// CHECK: scf.for %{{.*}} = %c0 to %c16 step %c1
// CHECK: vector.interleave
// Q K^T: 3 pairs of d, 4 rows x 2 key vectors of f32 accumulators.
// CHECK: scf.for %{{.*}} = %c0 to %c3 step %c1 iter_args({{([^,]*, ){7}[^,]*}}) -> ({{(vector<16xf32>, ){7}vector<16xf32>}})
// CHECK: vector.transfer_read %{{.*}} : tensor<3x64xbf16>, vector<32xbf16>
// CHECK: vector.transfer_read %{{.*}} : tensor<8x16xbf16>, vector<2xbf16>
// CHECK: vector.broadcast %{{.*}} : i32 to vector<16xi32>
// CHECK: vector.contract {{.*}} : vector<16x2xf32>, vector<16x2xf32> into vector<16xf32>
// CHECK-NOT: vector.fma
// The online softmax in f32, then p @ V on p rounded to bf16.
// CHECK: math.exp %{{.*}} : vector<16xf32>
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.bitcast %{{.*}} : vector<16xbf16> to vector<8xi32>
// CHECK: vector.transfer_read %{{.*}} : tensor<16x32xbf16>, vector<32xbf16>
// CHECK: vector.contract {{.*}} : vector<16x2xf32>, vector<16x2xf32> into vector<16xf32>
// CHECK-NOT: vector.fma
// CHECK: scf.forall.in_parallel

// DOTS-LABEL: func.func private @tilecraft_attention_2x8x20x5x16_bf16_0
// DOTS-NOT: vector.contract
// DOTS: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// DOTS-NOT: vector.contract

// F32-LABEL: func.func private @tilecraft_attention_2x8x20x5x16_0
// F32-NOT: bf16
// F32: vector.fma
// F32-NOT: bf16

// BAD: bf16=1 needs lanes=16

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
func.func @attention_bf16(%q: tensor<2x8x5xf32>, %kt: tensor<2x5x20xf32>, %v: tensor<2x20x16xf32>) -> tensor<2x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant dense<0.25> : tensor<f32>
  %e0 = tensor.empty() : tensor<2x8x20xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x8x20xf32>) -> tensor<2x8x20xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x8x5xf32>, tensor<2x5x20xf32>) outs(%f0 : tensor<2x8x20xf32>) -> tensor<2x8x20xf32>
  %x = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %scale : tensor<2x8x20xf32>, tensor<f32>) outs(%e0 : tensor<2x8x20xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x8x20xf32>
  %e1 = tensor.empty() : tensor<2x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<2x8x20xf32>) outs(%f1 : tensor<2x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %max1 = tensor.expand_shape %max [[0], [1, 2]] output_shape [2, 8, 1] : tensor<2x8xf32> into tensor<2x8x1xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %max1 : tensor<2x8x20xf32>, tensor<2x8x1xf32>) outs(%e0 : tensor<2x8x20xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<2x8x20xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x8xf32>) -> tensor<2x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%exp : tensor<2x8x20xf32>) outs(%f2 : tensor<2x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %sum1 = tensor.expand_shape %sum [[0], [1, 2]] output_shape [2, 8, 1] : tensor<2x8xf32> into tensor<2x8x1xf32>
  %p = linalg.generic {indexing_maps = [#id, #row_bcast, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%exp, %sum1 : tensor<2x8x20xf32>, tensor<2x8x1xf32>) outs(%e0 : tensor<2x8x20xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %inv = arith.divf %one, %t : f32
    %r = arith.mulf %a, %inv : f32
    linalg.yield %r : f32
  } -> tensor<2x8x20xf32>
  %e3 = tensor.empty() : tensor<2x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %y = linalg.batch_matmul ins(%p, %v : tensor<2x8x20xf32>, tensor<2x20x16xf32>) outs(%f3 : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}
