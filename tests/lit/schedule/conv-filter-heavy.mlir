// Convolutions whose filter outweighs their output image (schedule/plan.py filter_heavy):
// the output-channel loop runs outside the image loops, so each filter slice is read from
// cache for every output row, not streamed from memory once per row.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=512 num-threads=1" | FileCheck %s

// 1x1 on a 7x7 image, 256 filter taps x channels > 49 pixels: a register tile of 7 pixels
// x 2 vectors of 16 output channels (4 vectors, 28 accumulators, would not fit the 32
// registers beside the filter vectors: plan.py conv_register_tile); the channel loop
// (step 32) encloses the row loop (after the fill's own loops).
// CHECK-LABEL: func.func @pointwise
// CHECK-DAG: %[[C7:.*]] = arith.constant 7 : index
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : index
// CHECK: vector.transfer_write %{{.*}} : vector<1x1x1x{{[0-9]+}}xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[C32]] iter_args
// CHECK-NEXT: scf.for %{{.*}} = %{{.*}} to %[[C7]] step
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> ({{.*}}vector<1x7x32xf32>)
// CHECK: vector.contract {{.*}} into vector<1x7x32xf32>
// CHECK-NOT: linalg.conv_2d
func.func @pointwise(%x: tensor<1x7x7x32xf32>, %w: tensor<1x1x32x256xf32>) -> tensor<1x7x7x256xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x7x7x256xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x7x7x256xf32>) -> tensor<1x7x7x256xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x7x7x32xf32>, tensor<1x1x32x256xf32>) outs(%init : tensor<1x7x7x256xf32>) -> tensor<1x7x7x256xf32>
  return %y : tensor<1x7x7x256xf32>
}

// -----

// 3x3 on a 7x7 image: the channel loop encloses the row loop too, with two vectors of
// output channels per register tile (the kh, kw and input-channel loops inside).
// CHECK-LABEL: func.func @window
// CHECK-DAG: %[[C7:.*]] = arith.constant 7 : index
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : index
// CHECK: vector.transfer_write %{{.*}} : vector<1x1x1x{{[0-9]+}}xf32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[C32]] iter_args
// CHECK-NEXT: scf.for %{{.*}} = %{{.*}} to %[[C7]] step
// CHECK: scf.for {{.*}} -> ({{.*}}vector<1x7x32xf32>)
// CHECK-NOT: linalg.conv_2d
func.func @window(%x: tensor<1x9x9x32xf32>, %w: tensor<3x3x32x64xf32>) -> tensor<1x7x7x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x7x7x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x7x7x64xf32>) -> tensor<1x7x7x64xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x9x9x32xf32>, tensor<3x3x32x64xf32>) outs(%init : tensor<1x7x7x64xf32>) -> tensor<1x7x7x64xf32>
  return %y : tensor<1x7x7x64xf32>
}
