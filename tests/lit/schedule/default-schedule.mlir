// The default schedule: thread tiles (scf.forall), register tiles (scf.for) and vectors.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=512 num-threads=2" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=256 num-threads=1" | FileCheck %s --check-prefix=AVX2

// A matmul gets 128x128 tasks, an 8x32 accumulator tile (2 zmm per row) kept in registers
// across the reduction loop, and its zero-fill fused into each task. With the default
// 32K L1d, K = 128 needs no cache block; rows of A 512 B apart do not alias in L1d, so A is
// read in place (no packed copy). With the default 256K L2 a task's A block may hold 128
// rows (a quarter of L2); 2 row blocks of one 256-column block are too few tasks for 2
// threads, so the column block is halved (columns first: a task then rereads only its
// rows of A).
// CHECK-LABEL: func.func @matmul
// CHECK: scf.forall ({{.*}}) in (2, 2)
// CHECK: vector.transfer_write {{.*}} : vector<1x64xf32>
// CHECK-NOT: memref.alloc
// CHECK: %[[ACC:.*]] = vector.transfer_read {{.*}} : tensor<8x32xf32>, vector<8x32xf32>
// CHECK: scf.for {{.*}} iter_args({{.*}}%{{.*}} = %[[ACC]]) -> ({{.*}}vector<8x32xf32>)
// CHECK: vector.contract {{.*}} : vector<8x1xf32>, vector<1x32xf32> into vector<8x32xf32>
// CHECK-NOT: linalg.matmul
// One thread, 256-bit vectors: no forall, accumulators of 2 x 8 lanes by 6 rows (8 rows
// would be 16 accumulators, the whole AVX2 register file: they spilled); 6 does not divide
// 256, so 42 whole tiles run in the main loop and the last 4 rows are peeled.
// AVX2-LABEL: func.func @matmul
// AVX2-NOT: scf.forall
// AVX2: scf.for %{{.*}} = %c0 to %c252 step %c6
// AVX2: vector.contract {{.*}} into vector<6x16xf32>
// AVX2: vector.contract {{.*}} into vector<4x16xf32>
func.func @matmul(%a: tensor<256x128xf32>, %b: tensor<128x256xf32>) -> tensor<256x256xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<256x256xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<256x256xf32>) -> tensor<256x256xf32>
  %c = linalg.matmul ins(%a, %b : tensor<256x128xf32>, tensor<128x256xf32>) outs(%init : tensor<256x256xf32>) -> tensor<256x256xf32>
  return %c : tensor<256x256xf32>
}

// -----

// K = 1024: a K cache block of 256 (the 8x256 sliver takes a quarter of L1d), and rows 4 KB
// apart alias in L1d. B, the operand each k step streams (two vectors), is packed: every
// 256x32 panel of the K block is copied to a contiguous buffer, then the register tiles
// down M (8 of them) read it (matmul_plan.py packed_operand). The accumulators stay vector
// values carried by the K loop: loaded before it, stored after it.
// CHECK-LABEL: func.func @matmul_packed_b
// CHECK: scf.forall ({{.*}}) in (4, 2)
// CHECK: scf.for %{{.*}} = %{{.*}} to %c1024 step %c256
// CHECK: scf.for %{{.*}} = %{{.*}} to %c128 step %c32
// CHECK: memref.alloc() : memref<256x32xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %c64 step %c8
// CHECK: %[[ACC:.*]] = vector.transfer_read {{.*}} : tensor<8x32xf32>, vector<8x32xf32>
// CHECK: scf.for {{.*}} iter_args({{.*}}%{{.*}} = %[[ACC]]) -> ({{.*}}vector<8x32xf32>)
// CHECK: vector.transfer_read {{.*}} : tensor<256x32xf32>, vector<1x32xf32>
// CHECK: vector.contract {{.*}} : vector<8x1xf32>, vector<1x32xf32> into vector<8x32xf32>
// CHECK: vector.transfer_write {{.*}} : vector<8x32xf32>
func.func @matmul_packed_b(%a: tensor<256x1024xf32>, %b: tensor<1024x256xf32>) -> tensor<256x256xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<256x256xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<256x256xf32>) -> tensor<256x256xf32>
  %c = linalg.matmul ins(%a, %b : tensor<256x1024xf32>, tensor<1024x256xf32>) outs(%init : tensor<256x256xf32>) -> tensor<256x256xf32>
  return %c : tensor<256x256xf32>
}

// -----

// Attention's batch matmul: 12 heads are tasks enough for 2 threads, so each task keeps all
// 128 rows; 8x32 accumulators carried in registers by the K loop, no scalar loop left.
// CHECK-LABEL: func.func @batch_matmul
// CHECK: scf.forall ({{.*}}) in (12)
// CHECK-NOT: memref.alloc
// CHECK: %[[ACC:.*]] = vector.transfer_read {{.*}} : tensor<1x8x32xf32>, vector<1x8x32xf32>
// CHECK: scf.for {{.*}} iter_args({{.*}}%{{.*}} = %[[ACC]]) -> ({{.*}}vector<1x8x32xf32>)
// CHECK: vector.contract {{.*}} into vector<1x8x32xf32>
// CHECK: vector.transfer_write {{.*}} : vector<1x8x32xf32>
// CHECK-NOT: linalg.batch_matmul
func.func @batch_matmul(%a: tensor<12x128x64xf32>, %b: tensor<12x64x128xf32>) -> tensor<12x128x128xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<12x128x128xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<12x128x128xf32>) -> tensor<12x128x128xf32>
  %c = linalg.batch_matmul ins(%a, %b : tensor<12x128x64xf32>, tensor<12x64x128xf32>) outs(%init : tensor<12x128x128xf32>) -> tensor<12x128x128xf32>
  return %c : tensor<12x128x128xf32>
}

// -----

// Elementwise: rows split across threads, 4 zmm vectors per innermost tile.
// CHECK-LABEL: func.func @exp
// CHECK: scf.forall
// CHECK: math.exp {{.*}} : vector<1x64xf32>
// CHECK-NOT: linalg.generic
func.func @exp(%x: tensor<512x256xf32>) -> tensor<512x256xf32> {
  %empty = tensor.empty() : tensor<512x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<512x256xf32>) outs(%empty : tensor<512x256xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    linalg.yield %e : f32
  } -> tensor<512x256xf32>
  return %r : tensor<512x256xf32>
}

// -----

// Dynamic extents: the outer parallel loop is distributed; nothing is vectorized.
// CHECK-LABEL: func.func @dynamic
// CHECK: scf.forall
// CHECK-NOT: vector.
// CHECK: linalg.generic
func.func @dynamic(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %x, %c0 : tensor<?x?xf32>
  %d1 = tensor.dim %x, %c1 : tensor<?x?xf32>
  %empty = tensor.empty(%d0, %d1) : tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%empty : tensor<?x?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    linalg.yield %e : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

// Row reduction: the reduction becomes a vector.multi_reduction (or contract) over a tile.
// CHECK-LABEL: func.func @row_sum
// CHECK: vector.multi_reduction <add>
// CHECK-NOT: linalg.generic
func.func @row_sum(%x: tensor<64x1000xf32>, %init: tensor<64xf32>) -> tensor<64xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x1000xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

// 2-D convolution: decomposed to 1-D after tiling, then vectorized.
// CHECK-LABEL: func.func @conv
// CHECK: scf.forall
// CHECK-NOT: linalg.conv_2d_nchw_fchw
// CHECK: vector.
func.func @conv(%x: tensor<1x16x34x34xf32>, %w: tensor<32x16x3x3xf32>, %init: tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32> {
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x16x34x34xf32>, tensor<32x16x3x3xf32>) outs(%init : tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
  return %r : tensor<1x32x32x32xf32>
}
