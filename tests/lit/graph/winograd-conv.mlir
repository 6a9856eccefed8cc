// tilecraft-winograd-conv: a 3x3 stride-1 convolution with a constant filter becomes
// Winograd's F(m x m, 3 x 3): the filter transform (two contractions with G on the constant,
// which tilecraft-fold-constants evaluates), the input transform (rows, then columns: each an
// elementwise sum of m+2 one-row views times per-row coefficients), one matmul per transform
// point, and the output transform accumulated into the convolution's init. Strided
// convolutions and non-constant filters are left as they are.
// The inputs are a few tiles each: min-tiles=1 rewrites every candidate; the default
// (32 tiles) leaves these small ones as they are (DEFAULT).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-winograd-conv="tile=2 min-tiles=1" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-winograd-conv="tile=2" | FileCheck %s --check-prefix=DEFAULT
// RUN: not tilecraft-opt %s --tilecraft-winograd-conv="tile=3" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: no transforms for tile 3 (supported: 2, 4)
// DEFAULT-LABEL: func.func @conv
// DEFAULT: linalg.conv_2d_nhwc_hwcf

// CHECK-LABEL: func.func @conv
// CHECK-NOT: linalg.conv_2d_nhwc_hwcf
// Filter transform: G (4x3) applied to the constant's rows, then its columns.
// CHECK: %[[G:.*]] = arith.constant dense<{{\[\[}}1.000000e+00, 0.000000e+00, 0.000000e+00], [5.000000e-01, 5.000000e-01, 5.000000e-01]{{.*}}> : tensor<4x3xf32>
// CHECK: linalg.generic {{.*}} ins(%[[G]], %{{.*}} : tensor<4x3xf32>, tensor<3x3x4x8xf32>) outs(%{{.*}} : tensor<4x3x4x8xf32>)
// CHECK: } -> tensor<4x4x4x8xf32>
// CHECK: %[[U:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2], [3]] : tensor<4x4x4x8xf32> into tensor<16x4x8xf32>
// Input rows: tile rows 0-1 from the tiles view, the overlap rows 2-3 from the view one tile on.
// CHECK: tensor.extract_slice %arg0[0, 0, 0, 0] [1, 4, 6, 4] [1, 1, 1, 1]
// CHECK: tensor.extract_slice %arg0[0, 2, 0, 0] [1, 4, 6, 4] [1, 1, 1, 1]
// B^T's columns as per-row coefficients.
// CHECK: arith.constant dense<[0.000000e+00, 1.000000e+00, -1.000000e+00, 1.000000e+00]> : tensor<4xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
// CHECK: } -> tensor<1x2x4x6x4xf32>
// CHECK: } -> tensor<4x4x1x2x2x4xf32>
// CHECK: %[[V:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2, 3, 4], [5]] : tensor<4x4x1x2x2x4xf32> into tensor<16x4x4xf32>
// One 4x4 @ 4x8 matmul per transform point.
// CHECK: %[[M:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[V]], %[[U]] : tensor<16x4x4xf32>, tensor<16x4x8xf32>)
// The output transform accumulates into the init (the zero fill) viewed as tiles.
// CHECK: %[[INIT:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2], [3, 4], [5]] output_shape [1, 2, 2, 2, 2, 8] : tensor<1x4x4x8xf32> into tensor<1x2x2x2x2x8xf32>
// CHECK: tensor.expand_shape %[[M]]
// CHECK: } -> tensor<1x2x2x2x4x8xf32>
// CHECK: linalg.generic {{.*}}, %[[INIT]] : {{.*}}) outs(%{{.*}} : tensor<1x2x2x2x2x8xf32>)
// CHECK: %[[OUT:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2], [3, 4], [5]] : tensor<1x2x2x2x2x8xf32> into tensor<1x4x4x8xf32>
// CHECK: return %[[OUT]]
func.func @conv(%x: tensor<1x6x6x4xf32>) -> tensor<1x4x4x8xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<3x3x4x8xf32>
  %e = tensor.empty() : tensor<1x4x4x8xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x6x6x4xf32>, tensor<3x3x4x8xf32>) outs(%i : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %c : tensor<1x4x4x8xf32>
}

// -----

// An output of 3x3 is not whole 2x2 tiles: the input is padded to (tiles + 1) * m = 6 rows
// and columns, the init to 4x4, and the result sliced back to 3x3.
// CHECK-LABEL: func.func @partial_tiles
// CHECK-NOT: linalg.conv_2d_nhwc_hwcf
// CHECK: tensor.pad %arg0 low[0, 0, 0, 0] high[0, 1, 1, 0]
// CHECK: tensor.pad %{{.*}} low[0, 0, 0, 0] high[0, 1, 1, 0]
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0, 0] [1, 3, 3, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> to tensor<1x3x3x8xf32>
func.func @partial_tiles(%x: tensor<1x5x5x4xf32>) -> tensor<1x3x3x8xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<3x3x4x8xf32>
  %e = tensor.empty() : tensor<1x3x3x8xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x3x3x8xf32>) -> tensor<1x3x3x8xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x5x5x4xf32>, tensor<3x3x4x8xf32>) outs(%i : tensor<1x3x3x8xf32>) -> tensor<1x3x3x8xf32>
  return %c : tensor<1x3x3x8xf32>
}

// -----

// An input larger than the output needs: only the rows and columns the convolution reads
// are transformed (no negative pad).
// CHECK-LABEL: func.func @larger_input
// CHECK-NOT: high[0, -
// CHECK: tensor.extract_slice %arg0[0, 0, 0, 0] [1, 6, 6, 4] [1, 1, 1, 1] : tensor<1x9x9x4xf32> to tensor<1x6x6x4xf32>
// CHECK-NOT: high[0, -
// CHECK: return
func.func @larger_input(%x: tensor<1x9x9x4xf32>) -> tensor<1x4x4x8xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<3x3x4x8xf32>
  %e = tensor.empty() : tensor<1x4x4x8xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x9x9x4xf32>, tensor<3x3x4x8xf32>) outs(%i : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %c : tensor<1x4x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @left_alone
// CHECK: linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
// CHECK: linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%arg0, %arg1
func.func @left_alone(%x: tensor<1x6x6x4xf32>, %wi: tensor<3x3x4x8xf32>) -> (tensor<1x2x2x8xf32>, tensor<1x4x4x8xf32>) {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<3x3x4x8xf32>
  %e2 = tensor.empty() : tensor<1x2x2x8xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32>
  %strided = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%x, %w : tensor<1x6x6x4xf32>, tensor<3x3x4x8xf32>) outs(%i2 : tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32>
  %e = tensor.empty() : tensor<1x4x4x8xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %input_filter = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %wi : tensor<1x6x6x4xf32>, tensor<3x3x4x8xf32>) outs(%i : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %strided, %input_filter : tensor<1x2x2x8xf32>, tensor<1x4x4x8xf32>
}
