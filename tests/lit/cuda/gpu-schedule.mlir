// The GPU schedule on tensors: block loops, thread loops, shared-memory staging, vectors.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-gpu-schedule="fill-blocks=1" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-gpu-schedule="shared=0 fill-blocks=1" | FileCheck %s --check-prefix=NOSHARED
// RUN: tilecraft-opt %s --split-input-file --tilecraft-gpu-schedule | FileCheck %s --check-prefix=FILL

// A matmul: 64x64 output tiles per block, 4x4 per thread (16x16 threads), K staged through
// shared memory 16 at a time, copied by the block's threads with vector transfers; the 4x4
// accumulators are a vector carried through the inner reduction loop (registers).
// By default (FILL) 12 blocks are too few for the GPU: the tiles halve to 32 x 32, 48 blocks.
// FILL-LABEL: func.func @matmul
// FILL: scf.forall ({{.*}}) in (8, 6)
// CHECK-LABEL: func.func @matmul
// CHECK: scf.forall ({{.*}}) in (4, 3)
// CHECK: scf.for
// CHECK: memref.alloc() : memref<64x16xf32, #gpu.address_space<workgroup>>
// CHECK: vector.transfer_write {{.*}} memref<{{.*}}#gpu.address_space<workgroup>>
// CHECK: } {mapping = [#gpu.thread<y>, #gpu.thread<x>]}
// CHECK: memref.alloc() : memref<16x64xf32, #gpu.address_space<workgroup>>
// CHECK: scf.forall ({{.*}}) in (16, 16)
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> ({{.*}}vector<4x4xf32>)
// CHECK: vector.contract
// CHECK: } {mapping = [#gpu.thread<y>, #gpu.thread<x>]}
// CHECK: } {mapping = [#gpu.block<y>, #gpu.block<x>]}
// CHECK-NOT: linalg.matmul
// Without staging the threads read global memory and the accumulators live across all of K.
// NOSHARED-LABEL: func.func @matmul
// NOSHARED-NOT: workgroup
// NOSHARED: scf.forall ({{.*}}) in (16, 16)
// NOSHARED: scf.for {{.*}} iter_args({{.*}}) -> ({{.*}}vector<4x4xf32>)
func.func @matmul(%a: tensor<256x128xf32>, %b: tensor<128x192xf32>) -> tensor<256x192xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<256x192xf32>
  %c = linalg.fill ins(%zero : f32) outs(%empty : tensor<256x192xf32>) -> tensor<256x192xf32>
  %r = linalg.matmul ins(%a, %b : tensor<256x128xf32>, tensor<128x192xf32>)
                     outs(%c : tensor<256x192xf32>) -> tensor<256x192xf32>
  return %r : tensor<256x192xf32>
}

// -----

// A row sum (softmax's denominator): one block per row, 125 threads each reducing 8
// elements into a partials buffer in shared memory, one thread combining them.
// CHECK-LABEL: func.func @row_sum
// CHECK: scf.forall ({{.*}}) in (64)
// CHECK: memref.alloc() : memref<1x125xf32, #gpu.address_space<workgroup>>
// CHECK: scf.forall ({{.*}}) in (125)
// CHECK: vector.multi_reduction <add>, {{.*}} : vector<1x8xf32> to vector<1xf32>
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: scf.forall ({{.*}}) in (1)
// CHECK: linalg.reduce
// CHECK: } {mapping = [#gpu.block<x>]}
func.func @row_sum(%x: tensor<64x1000xf32>) -> tensor<64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<64xf32>) -> tensor<64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x1000xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %e = math.exp %in : f32
    %s = arith.addf %e, %acc : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

// Elementwise: a 1-D mapping, 4 floats per thread (one 128-bit access), 256 threads.
// CHECK-LABEL: func.func @relu
// CHECK: scf.forall ({{.*}}) in (16)
// CHECK: scf.forall ({{.*}}) in (256)
// CHECK: vector.transfer_read {{.*}} vector<4xf32>
// CHECK: arith.maximumf {{.*}} : vector<4xf32>
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: } {mapping = [#gpu.block<x>]}
func.func @relu(%x: tensor<16384xf32>) -> tensor<16384xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<16384xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<16384xf32>) outs(%empty : tensor<16384xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<16384xf32>
  return %r : tensor<16384xf32>
}
