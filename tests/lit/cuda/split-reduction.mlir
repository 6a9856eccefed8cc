// Split reductions (targets/cuda/split_reduction.py): a convolution or contraction whose
// output points cannot fill the GPU splits its reduction loop over the threads of a block;
// the partial sums meet in workgroup memory and a few threads of the block add them up.
// Off by default (measured slower on an H200): asked for with split-below=135168.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-gpu-schedule="split-below=135168" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-gpu-schedule | FileCheck %s --check-prefix=NOSPLIT

// A 3x3 convolution over 128 channels onto 64 channels of 7x7: 448 rows of 7 output points
// (the default plan: 3,136 threads, each reducing 1,152 products). Split: one block per
// output row (64 x 7 blocks), its 32 threads each reducing 4 channels x 3 x 3 for the whole
// row (a vector of 7 accumulators) into their slot of a 7 x 32 partials buffer in workgroup
// memory; then 7 threads each add one point's 32 partials (a vector read) into the output.
// CHECK-LABEL: func.func @conv7x7
// CHECK: scf.forall ({{.*}}) in (64, 7, 1)
// CHECK: memref.alloc() : memref<1x1x1x7x32xf32, #gpu.address_space<workgroup>>
// CHECK: scf.forall ({{.*}}) in (32)
// CHECK: linalg.fill
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: scf.forall ({{.*}}) in (32)
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> ({{.*}}vector<1x1x7xf32>)
// CHECK: vector.contract {{.*}} : vector<1x4x7xf32>, vector<4x1xf32> into vector<1x1x7xf32>
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: scf.forall ({{.*}}) in (7)
// CHECK: vector.transfer_read {{.*}} vector<1x1x1x1x32xf32>
// CHECK: vector.multi_reduction <add>
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: } {mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
// CHECK-NOT: linalg.conv
// With split-below=0 the convolution keeps one thread per output point.
// NOSPLIT-LABEL: func.func @conv7x7
// NOSPLIT-NOT: workgroup
// NOSPLIT: scf.forall ({{.*}}) in (16, 1, 1)
// NOSPLIT: } {mapping = [#gpu.thread<z>, #gpu.thread<y>, #gpu.thread<x>]}
func.func @conv7x7(%x: tensor<1x128x9x9xf32>, %w: tensor<64x128x3x3xf32>) -> tensor<1x64x7x7xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x64x7x7xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x64x7x7xf32>) -> tensor<1x64x7x7xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x128x9x9xf32>, tensor<64x128x3x3xf32>)
         outs(%acc : tensor<1x64x7x7xf32>) -> tensor<1x64x7x7xf32>
  return %y : tensor<1x64x7x7xf32>
}

// -----

// A batch-1 classifier (a matrix-vector product, 1,000 outputs, K = 2,048): 250 blocks of 4
// columns, 256 threads each reducing 8 rows of K into their slot of a 4 x 256 partials
// buffer; 4 threads then add one column's 256 partials, 32 at a time, in a register.
// CHECK-LABEL: func.func @gemv
// CHECK: scf.forall ({{.*}}) in (250)
// CHECK: memref.alloc() : memref<1x4x256xf32, #gpu.address_space<workgroup>>
// CHECK: scf.forall ({{.*}}) in (256)
// CHECK: vector.contract {{.*}} : vector<1x8xf32>, vector<8x4xf32> into vector<1x4xf32>
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: scf.forall ({{.*}}) in (4)
// CHECK: scf.for {{.*}} step %c32 iter_args({{.*}}) -> ({{.*}}vector<1x1xf32>)
// CHECK: vector.multi_reduction <add>
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: } {mapping = [#gpu.block<x>]}
// Without the split: the contraction plan, 25 blocks of 10 threads.
// NOSPLIT-LABEL: func.func @gemv
// NOSPLIT: scf.forall ({{.*}}) in (1, 25)
// NOSPLIT: memref<16x40xf32, #gpu.address_space<workgroup>>
func.func @gemv(%a: tensor<1x2048xf32>, %b: tensor<2048x1000xf32>) -> tensor<1x1000xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x1000xf32>
  %c = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x1000xf32>) -> tensor<1x1000xf32>
  %r = linalg.matmul ins(%a, %b : tensor<1x2048xf32>, tensor<2048x1000xf32>)
                     outs(%c : tensor<1x1000xf32>) -> tensor<1x1000xf32>
  return %r : tensor<1x1000xf32>
}
