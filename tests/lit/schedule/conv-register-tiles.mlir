// Convolution register tiles sized from the register file, not from the row's divisors
// (schedule/conv_plan.py ``conv_register_tile``, ``register_row_tile``): on AVX2 (16
// registers of 8 lanes) a 32-pixel row takes 6 pixels x 2 vectors (12 accumulators), not
// 8 x 1; the last, partial pixel tile is peeled off the accumulator tile's loop
// (schedule/conv_kernels.py) and keeps its fused epilogue (bias, ReLU) on its own
// accumulators, vectorized too. AVX-512 keeps its 8 x 2-vector tile where 8 divides the row.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-mark-groups --tilecraft-schedule="vector-bits=256 num-threads=2 fuse-groups=1" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-mark-groups --tilecraft-schedule="vector-bits=512 num-threads=2 fuse-groups=1" | FileCheck %s --check-prefix=AVX512
// RUN: tilecraft-opt %s --split-input-file --tilecraft-lower-cpu="num-threads=2 cpu=haswell" | FileCheck %s --check-prefix=LLVM

// CHECK-LABEL: func.func @conv_bias_relu
// 32 rows in 8 bands of 4 (at least 4 tasks per thread, schedule/op_schedule.py).
// CHECK: scf.forall ({{.*}}) in (8)
// Whole tiles: pixels 0-29 in steps of 6, two 8-lane vectors (16 channels) each.
// CHECK: scf.for %{{.*}} = %c0 to %c30 step %c6
// CHECK: scf.for {{.*}} -> (vector<1x6x16xf32>)
// CHECK: vector.contract {{.*}} : vector<6x1xf32>, vector<1x16xf32> into vector<6x16xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: arith.addf {{.*}} : vector<6x16xf32>
// CHECK: arith.maximumf {{.*}} : vector<6x16xf32>
// CHECK: vector.transfer_write {{.*}} : vector<6x16xf32>, tensor<1x1x6x16xf32>
// The peeled remainder, pixels 30-31: the same conv and epilogue on a 2-pixel tile.
// CHECK: scf.for {{.*}} -> (vector<1x2x16xf32>)
// CHECK: vector.contract {{.*}} : vector<2x1xf32>, vector<1x16xf32> into vector<2x16xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: arith.maximumf {{.*}} : vector<2x16xf32>
// CHECK: vector.transfer_write {{.*}} : vector<2x16xf32>, tensor<1x1x2x16xf32>
// CHECK-NOT: linalg.conv_2d
// CHECK-NOT: linalg.generic
// AVX512-LABEL: func.func @conv_bias_relu
// AVX512: scf.for %{{.*}} = %c0 to %c32 step %c8
// AVX512: vector.contract {{.*}} into vector<8x32xf32>
// AVX512: arith.maximumf {{.*}} : vector<8x32xf32>
// AVX512-NOT: vector.contract
// AVX512-NOT: linalg.generic
// AVX512: return
// In LLVM, the whole tile's hot loop: 6 FMAs on vector<16xf32> (each two AVX2 ymm FMAs: 6 x
// 2 x vector<8xf32>), the remainder's: 2.
// LLVM-LABEL: llvm.func @conv_bias_relu
// LLVM-COUNT-6: llvm.intr.fmuladd({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// LLVM-NOT: llvm.intr.fmuladd
// LLVM: llvm.br {{.*}} !llvm.array<1 x array<6 x vector<16xf32>>>
// LLVM-COUNT-2: llvm.intr.fmuladd({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// LLVM-NOT: llvm.intr.fmuladd
// LLVM: llvm.br {{.*}} !llvm.array<1 x array<2 x vector<16xf32>>>
func.func @conv_bias_relu(%x: tensor<1x34x34x32xf32>, %w: tensor<3x3x32x32xf32>, %b: tensor<32xf32>) -> tensor<1x32x32x32xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x32x32x32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x34x34x32xf32>, tensor<3x3x32x32xf32>) outs(%init : tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(n,i,j,c)->(n,i,j,c)>, affine_map<(n,i,j,c)->(c)>, affine_map<(n,i,j,c)->(n,i,j,c)>], iterator_types = ["parallel","parallel","parallel","parallel"]}
      ins(%y, %b : tensor<1x32x32x32xf32>, tensor<32xf32>) outs(%empty : tensor<1x32x32x32xf32>) {
    ^bb0(%a: f32, %bb: f32, %out: f32):
      %t = arith.addf %a, %bb : f32
      %m = arith.maximumf %t, %zero : f32
      linalg.yield %m : f32
  } -> tensor<1x32x32x32xf32>
  return %o : tensor<1x32x32x32xf32>
}

// -----

// Depthwise 3x3 on a 65-pixel row: 8 tiles of 8 pixels and a peeled 1-pixel tile (not 13
// tiles of 5: a depthwise tile of one filter vector waits on its accumulators' latency, so
// the fewest tiles win), both vector FMAs.
// CHECK-LABEL: func.func @depthwise_65
// CHECK: scf.for %{{.*}} = %c0 to %c64 step %c8
// CHECK: vector.fma {{.*}} : vector<1x8x8xf32>
// CHECK: vector.fma {{.*}} : vector<1x1x8xf32>
// CHECK-NOT: linalg.depthwise_conv
// AVX512-LABEL: func.func @depthwise_65
// AVX512: scf.for %{{.*}} = %c0 to %c64 step %c8
// AVX512: vector.fma {{.*}} : vector<1x8x16xf32>
// AVX512: vector.fma {{.*}} : vector<1x1x16xf32>
// AVX512-NOT: linalg.depthwise_conv
// LLVM-LABEL: llvm.func @depthwise_65
func.func @depthwise_65(%x: tensor<1x6x67x32xf32>, %w: tensor<3x3x32xf32>) -> tensor<1x4x65x32xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x4x65x32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x4x65x32xf32>) -> tensor<1x4x65x32xf32>
  %y = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x6x67x32xf32>, tensor<3x3x32xf32>) outs(%init : tensor<1x4x65x32xf32>) -> tensor<1x4x65x32xf32>
  return %y : tensor<1x4x65x32xf32>
}
