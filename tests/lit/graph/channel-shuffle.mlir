// tilecraft-convert-layout on a channel shuffle between two convolutions (ShuffleNet's
// reshape-transpose-reshape): the shuffle runs in NHWC, the channels split into (2, 8),
// their factors swapped by one transpose and merged, with no conversion back to NCHW between
// the convolutions.
// RUN: tilecraft-opt %s --tilecraft-convert-layout | FileCheck %s

// CHECK-LABEL: func.func @shuffle
// CHECK: %[[C:.*]] = linalg.conv_2d_nhwc_hwcf
// CHECK-NOT: graph.layout_convert
// CHECK: %[[E:.*]] = tensor.expand_shape %[[C]] {{\[}}[0], [1], [2], [3, 4]] output_shape [1, 6, 6, 2, 8] : tensor<1x6x6x16xf32> into tensor<1x6x6x2x8xf32>
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[E]] : tensor<1x6x6x2x8xf32>) outs(%{{.*}} : tensor<1x6x6x8x2xf32>) permutation = [0, 1, 2, 4, 3]
// CHECK: %[[M:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0], [1], [2], [3, 4]] : tensor<1x6x6x8x2xf32> into tensor<1x6x6x16xf32>
// CHECK-NOT: graph.layout_convert
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[M]],
func.func @shuffle(%x: tensor<1x16x6x6xf32>, %w1: tensor<16x16x1x1xf32>, %w2: tensor<16x16x1x1xf32>) -> tensor<1x16x6x6xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x6x6xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w1 : tensor<1x16x6x6xf32>, tensor<16x16x1x1xf32>) outs(%i : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %s = tensor.expand_shape %c [[0], [1, 2], [3], [4]] output_shape [1, 2, 8, 6, 6] : tensor<1x16x6x6xf32> into tensor<1x2x8x6x6xf32>
  %te = tensor.empty() : tensor<1x8x2x6x6xf32>
  %t = linalg.transpose ins(%s : tensor<1x2x8x6x6xf32>) outs(%te : tensor<1x8x2x6x6xf32>) permutation = [0, 2, 1, 3, 4]
  %m = tensor.collapse_shape %t [[0], [1, 2], [3], [4]] : tensor<1x8x2x6x6xf32> into tensor<1x16x6x6xf32>
  %c2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%m, %w2 : tensor<1x16x6x6xf32>, tensor<16x16x1x1xf32>) outs(%i : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  return %c2 : tensor<1x16x6x6xf32>
}
