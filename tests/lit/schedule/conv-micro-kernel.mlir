// Register-blocked convolution micro-kernels (schedule/conv_kernels.py): the register tile is
// up to 14 output pixels x 2 vectors of 16 output channels (28 accumulators + 2 filter
// vectors + 1 broadcast <= 32 zmm registers), read once before the (kh, kw, input channel)
// reduction loops, carried through them as loop-carried vectors, and written once after.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=512 num-threads=1" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=256 num-threads=1" | FileCheck %s --check-prefix=AVX2

// 3x3 on a 14x14 image (ResNet-50's third stage): 14 pixels x 32 channels; more than 16
// accumulators, so the input-channel step is 4 (a step of 8 spilled in LLVM's schedule).
// With 16 ymm registers (AVX2): 1 vector of 8 channels x 14 pixels (14 + 1 + 1 <= 16; two
// vectors would leave room for 6 pixels, and 14 has no divisor between 2 and 6 but 2).
// CHECK-LABEL: func.func @conv3x3_14
// CHECK: %[[ACC:.*]] = vector.transfer_read {{.*}} : tensor<1x1x14x32xf32>, vector<1x14x32xf32>
// CHECK: scf.for {{.*}} iter_args({{.*}}%{{.*}} = %[[ACC]]) -> ({{.*}}vector<1x14x32xf32>)
// CHECK: scf.for {{.*}} -> ({{.*}}vector<1x14x32xf32>)
// CHECK: scf.for {{.*}} -> ({{.*}}vector<1x14x32xf32>)
// CHECK: vector.transfer_read {{.*}} vector<1x14x4xf32>
// CHECK: vector.transfer_read {{.*}} vector<1x4x32xf32>
// CHECK: vector.contract {{.*}} into vector<1x14x32xf32>
// CHECK: vector.transfer_write {{.*}} : vector<1x14x32xf32>, tensor<1x1x14x32xf32>
// CHECK-NOT: linalg.conv_2d
// AVX2-LABEL: func.func @conv3x3_14
// AVX2: vector.contract {{.*}} : vector<1x14x8xf32>, vector<8x8xf32> into vector<1x14x8xf32>
func.func @conv3x3_14(%x: tensor<1x16x16x64xf32>, %w: tensor<3x3x64x64xf32>) -> tensor<1x14x14x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x14x14x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x14x14x64xf32>) -> tensor<1x14x14x64xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x16x16x64xf32>, tensor<3x3x64x64xf32>) outs(%init : tensor<1x14x14x64xf32>) -> tensor<1x14x14x64xf32>
  return %y : tensor<1x14x14x64xf32>
}

// -----

// Strided 1x1 (a projection shortcut) on a 7x7 output: 7 pixels x 32 channels (14
// accumulators: the input-channel step stays 8). The input is read as one contiguous
// run of 13 pixels; the strided ones are extracted, one outer product per output pixel.
// CHECK-LABEL: func.func @pointwise_stride2
// CHECK: scf.for {{.*}} -> ({{.*}}vector<1x7x32xf32>)
// CHECK: vector.transfer_read {{.*}} vector<1x13x8xf32>
// CHECK: vector.transfer_read {{.*}} vector<1x8x32xf32>
// CHECK-COUNT-7: vector.contract {{.*}} into vector<1x1x32xf32>
// CHECK-NOT: linalg.conv_2d
func.func @pointwise_stride2(%x: tensor<1x13x13x64xf32>, %w: tensor<1x1x64x128xf32>) -> tensor<1x7x7x128xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x7x7x128xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x7x7x128xf32>) -> tensor<1x7x7x128xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%x, %w : tensor<1x13x13x64xf32>, tensor<1x1x64x128xf32>) outs(%init : tensor<1x7x7x128xf32>) -> tensor<1x7x7x128xf32>
  return %y : tensor<1x7x7x128xf32>
}

// -----

// The 7x7 stride-2 stem (3 input channels, 64 output channels, 112 columns): 14 pixels x 32
// channels, the whole 3-channel reduction in one step.
// CHECK-LABEL: func.func @stem
// CHECK: scf.for {{.*}} -> ({{.*}}vector<1x14x32xf32>)
// CHECK: vector.transfer_read {{.*}} vector<1x27x3xf32>
// CHECK-COUNT-14: vector.contract {{.*}} into vector<1x1x32xf32>
// CHECK-NOT: linalg.conv_2d
func.func @stem(%x: tensor<1x229x229x3xf32>, %w: tensor<7x7x3x64xf32>) -> tensor<1x112x112x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x112x112x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x112x112x64xf32>) -> tensor<1x112x112x64xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%x, %w : tensor<1x229x229x3xf32>, tensor<7x7x3x64xf32>) outs(%init : tensor<1x112x112x64xf32>) -> tensor<1x112x112x64xf32>
  return %y : tensor<1x112x112x64xf32>
}

// -----

// NCHW (below opt_level 3): the vectors of the generic tile run along the output channels
// too, but the output's contiguous dim is the row of pixels: no micro-kernel, the generic
// tile (one vector of 16 channels by 7 pixels) is kept.
// CHECK-LABEL: func.func @nchw
// CHECK: vector.contract {{.*}} into vector<1x16x7xf32>
func.func @nchw(%x: tensor<1x64x16x16xf32>, %w: tensor<64x64x3x3xf32>) -> tensor<1x64x14x14xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x64x14x14xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x64x14x14xf32>) -> tensor<1x64x14x14xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x64x16x16xf32>, tensor<64x64x3x3xf32>) outs(%init : tensor<1x64x14x14xf32>) -> tensor<1x64x14x14xf32>
  return %y : tensor<1x64x14x14xf32>
}
