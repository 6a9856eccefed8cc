// tilecraft-split-padded-taps: a dilated convolution on a zero-padded input becomes one
// convolution per run of output rows (and of output columns, where at least 30 % of their
// taps read padding) that reads the input through the same taps, each on the unpadded
// input's slice those taps reach and the filter's slice of those taps, written in place into
// its slice of the accumulator. Undilated convolutions and other pad values are left alone.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-split-padded-taps | FileCheck %s

// 8 x 8 at dilation 6: rows and columns 0-1 read taps 1-2, 2-5 tap 1 alone, 6-7 taps 0-1
// (half the taps read padding): 3 x 3 parts, no padded copy of the input.
// CHECK-LABEL: func.func @rows_and_columns
// CHECK-SAME: (%[[X:.*]]: tensor<1x8x8x4xf32>, %[[W:.*]]: tensor<3x3x4x8xf32>)
// CHECK-NOT: tensor.pad
// CHECK: %[[DEST:.*]] = tensor.empty() : tensor<1x8x8x8xf32>
// CHECK: %[[OUT0:.*]] = tensor.extract_slice %[[DEST]][0, 0, 0, 0] [1, 2, 2, 8]
// CHECK: %[[ACC0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[OUT0]] : tensor<1x2x2x8xf32>)
// CHECK: %[[W0:.*]] = tensor.extract_slice %[[W]][1, 1, 0, 0] [2, 2, 4, 8]
// CHECK: %[[P0:.*]] = linalg.conv_2d_nhwc_hwcf {dilations = dense<6> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%[[X]], %[[W0]] : tensor<1x8x8x4xf32>, tensor<2x2x4x8xf32>) outs(%[[ACC0]] : tensor<1x2x2x8xf32>)
// CHECK: %[[R0:.*]] = tensor.insert_slice %[[P0]] into %[[DEST]][0, 0, 0, 0] [1, 2, 2, 8]
// CHECK: tensor.extract_slice %[[R0]][0, 0, 2, 0] [1, 2, 4, 8]
// The centre: tap (1, 1) alone, a 1x1 convolution of the centre's 4 x 4 pixels.
// CHECK: %[[XC:.*]] = tensor.extract_slice %[[X]][0, 2, 2, 0] [1, 4, 4, 4]
// CHECK: %[[WC:.*]] = tensor.extract_slice %[[W]][1, 1, 0, 0] [1, 1, 4, 8]
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[XC]], %[[WC]] : tensor<1x4x4x4xf32>, tensor<1x1x4x8xf32>) outs(%{{.*}} : tensor<1x4x4x8xf32>)
// CHECK-COUNT-4: linalg.conv_2d_nhwc_hwcf
// CHECK-NOT: linalg.conv_2d_nhwc_hwcf
// CHECK: %[[LAST:.*]] = tensor.insert_slice %{{.*}}[0, 6, 6, 0] [1, 2, 2, 8]
// CHECK: return %[[LAST]]
func.func @rows_and_columns(%x: tensor<1x8x8x4xf32>, %w: tensor<3x3x4x8xf32>) -> tensor<1x8x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 6, 6, 0] high[0, 6, 6, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %zero : f32
  } : tensor<1x8x8x4xf32> to tensor<1x20x20x4xf32>
  %empty = tensor.empty() : tensor<1x8x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<6> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%padded, %w : tensor<1x20x20x4xf32>, tensor<3x3x4x8xf32>) outs(%init : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  return %y : tensor<1x8x8x8xf32>
}

// -----

// 16 x 16 at dilation 6: a quarter of the taps read padding in each dim; rows only, on the
// input padded in its columns alone. A non-zero accumulator (a bias) is carried through.
// CHECK-LABEL: func.func @rows_only
// CHECK-SAME: (%[[X:.*]]: tensor<1x16x16x4xf32>, %[[W:.*]]: tensor<3x3x4x8xf32>, %[[B:.*]]: tensor<1x16x16x8xf32>)
// CHECK: %[[PADDED:.*]] = tensor.pad %[[X]] low[0, 0, 6, 0] high[0, 0, 6, 0]
// CHECK: } : tensor<1x16x16x4xf32> to tensor<1x16x28x4xf32>
// CHECK: %[[TOP:.*]] = tensor.extract_slice %[[B]][0, 0, 0, 0] [1, 6, 16, 8]
// CHECK: %[[XT:.*]] = tensor.extract_slice %[[PADDED]][0, 0, 0, 0] [1, 12, 28, 4]
// CHECK: %[[WT:.*]] = tensor.extract_slice %[[W]][1, 0, 0, 0] [2, 3, 4, 8]
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[XT]], %[[WT]] : tensor<1x12x28x4xf32>, tensor<2x3x4x8xf32>) outs(%[[TOP]] : tensor<1x6x16x8xf32>)
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[PADDED]], %[[W]] : tensor<1x16x28x4xf32>, tensor<3x3x4x8xf32>) outs(%{{.*}} : tensor<1x4x16x8xf32>)
// CHECK: %[[XB:.*]] = tensor.extract_slice %[[PADDED]][0, 4, 0, 0] [1, 12, 28, 4]
// CHECK: %[[WB:.*]] = tensor.extract_slice %[[W]][0, 0, 0, 0] [2, 3, 4, 8]
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[XB]], %[[WB]] : tensor<1x12x28x4xf32>, tensor<2x3x4x8xf32>) outs(%{{.*}} : tensor<1x6x16x8xf32>)
// CHECK-NOT: linalg.conv_2d_nhwc_hwcf
func.func @rows_only(%x: tensor<1x16x16x4xf32>, %w: tensor<3x3x4x8xf32>, %b: tensor<1x16x16x8xf32>) -> tensor<1x16x16x8xf32> {
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 6, 6, 0] high[0, 6, 6, 0] {
  ^bb0(%a: index, %bb: index, %c: index, %d: index):
    tensor.yield %zero : f32
  } : tensor<1x16x16x4xf32> to tensor<1x28x28x4xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<6> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%padded, %w : tensor<1x28x28x4xf32>, tensor<3x3x4x8xf32>) outs(%b : tensor<1x16x16x8xf32>) -> tensor<1x16x16x8xf32>
  return %y : tensor<1x16x16x8xf32>
}

// -----

// CHECK-LABEL: func.func @undilated
// CHECK: tensor.pad
// CHECK-COUNT-1: linalg.conv_2d_nhwc_hwcf
// CHECK-NOT: linalg.conv_2d_nhwc_hwcf
func.func @undilated(%x: tensor<1x8x8x4xf32>, %w: tensor<3x3x4x8xf32>, %b: tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%a: index, %bb: index, %c: index, %d: index):
    tensor.yield %zero : f32
  } : tensor<1x8x8x4xf32> to tensor<1x10x10x4xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%padded, %w : tensor<1x10x10x4xf32>, tensor<3x3x4x8xf32>) outs(%b : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  return %y : tensor<1x8x8x8xf32>
}

// -----

// Padding with ones: the padded taps are not zero terms.
// CHECK-LABEL: func.func @padded_with_ones
// CHECK: tensor.pad
// CHECK-COUNT-1: linalg.conv_2d_nhwc_hwcf
// CHECK-NOT: linalg.conv_2d_nhwc_hwcf
func.func @padded_with_ones(%x: tensor<1x8x8x4xf32>, %w: tensor<3x3x4x8xf32>, %b: tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32> {
  %one = arith.constant 1.0 : f32
  %padded = tensor.pad %x low[0, 6, 6, 0] high[0, 6, 6, 0] {
  ^bb0(%a: index, %bb: index, %c: index, %d: index):
    tensor.yield %one : f32
  } : tensor<1x8x8x4xf32> to tensor<1x20x20x4xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<6> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%padded, %w : tensor<1x20x20x4xf32>, tensor<3x3x4x8xf32>) outs(%b : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  return %y : tensor<1x8x8x8xf32>
}

// -----

// A constant filter: each part's taps are a constant of their own (so that its kernel reads
// them block-major, pipelines/tensor/blocked_constants.py), not a view of the filter; the
// middle rows read all taps, the filter itself. 16 x 16 at dilation 6: rows only, as above.
// CHECK-LABEL: func.func @constant_filter
// CHECK: %[[W:.*]] = arith.constant dense<{{\[\[\[\[}}0.000000e+00, 1.000000e+00]]{{.*}}> : tensor<3x3x1x2xf32>
// CHECK-NOT: tensor.extract_slice %[[W]]
// CHECK: %[[WT:.*]] = arith.constant dense<{{\[\[\[\[}}6.000000e+00, 7.000000e+00]]{{.*}}1.600000e+01, 1.700000e+01]]]]> : tensor<2x3x1x2xf32>
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{.*}}, %[[WT]] : tensor<1x12x28x1xf32>, tensor<2x3x1x2xf32>)
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{.*}}, %[[W]] : tensor<1x16x28x1xf32>, tensor<3x3x1x2xf32>)
// CHECK: %[[WB:.*]] = arith.constant dense<{{\[\[\[\[}}0.000000e+00, 1.000000e+00]]{{.*}}1.000000e+01, 1.100000e+01]]]]> : tensor<2x3x1x2xf32>
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{.*}}, %[[WB]] : tensor<1x12x28x1xf32>, tensor<2x3x1x2xf32>)
// CHECK-NOT: linalg.conv_2d_nhwc_hwcf
func.func @constant_filter(%x: tensor<1x16x16x1xf32>, %b: tensor<1x16x16x2xf32>) -> tensor<1x16x16x2xf32> {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<[[[[0.0, 1.0]], [[2.0, 3.0]], [[4.0, 5.0]]], [[[6.0, 7.0]], [[8.0, 9.0]], [[10.0, 11.0]]],
                             [[[12.0, 13.0]], [[14.0, 15.0]], [[16.0, 17.0]]]]> : tensor<3x3x1x2xf32>
  %padded = tensor.pad %x low[0, 6, 6, 0] high[0, 6, 6, 0] {
  ^bb0(%a: index, %c: index, %d: index, %e: index):
    tensor.yield %zero : f32
  } : tensor<1x16x16x1xf32> to tensor<1x28x28x1xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<6> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%padded, %w : tensor<1x28x28x1xf32>, tensor<3x3x1x2xf32>) outs(%b : tensor<1x16x16x2xf32>) -> tensor<1x16x16x2xf32>
  return %y : tensor<1x16x16x2xf32>
}
