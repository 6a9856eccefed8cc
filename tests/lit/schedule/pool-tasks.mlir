// The tasks of NHWC pooling ops on two threads (schedule/conv_plan.py ``plan_convolution``):
// bands of output rows, also where the rows split neither in 2 nor in 4, never tasks of a
// channel slice (each of which would read one cache line per input pixel, strided by the
// whole pixel: docs/performance.md, "Round 29: pooling at two threads").
// RUN: tilecraft-opt %s --split-input-file --tilecraft-mark-groups --tilecraft-schedule="vector-bits=512 num-threads=2 fuse-groups=1" | FileCheck %s

// SqueezeNet's 3x3/2 max pool, 55x55x128 -> 27x27x128: 9 bands of 3 rows (``busiest_chunk``),
// each task's tiles running over all 128 channels of its rows; it was 8 tasks of 16 channels.
// CHECK-LABEL: func.func @max_pool_odd_rows
// CHECK: scf.forall ({{.*}}) in (9)
// CHECK: tensor.extract_slice {{.*}} [1, 3, 27, 128]
// CHECK: arith.maximumf {{.*}} : vector<1x1x16xf32>
func.func @max_pool_odd_rows(%x: tensor<1x55x55x128xf32>) -> tensor<1x27x27x128xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %window = tensor.empty() : tensor<3x3xf32>
  %empty = tensor.empty() : tensor<1x27x27x128xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%empty : tensor<1x27x27x128xf32>) -> tensor<1x27x27x128xf32>
  %y = linalg.pooling_nhwc_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
       ins(%x, %window : tensor<1x55x55x128xf32>, tensor<3x3xf32>) outs(%init : tensor<1x27x27x128xf32>) -> tensor<1x27x27x128xf32>
  return %y : tensor<1x27x27x128xf32>
}

// -----

// A sum pool (average pooling before its division) on 13 rows: 13 one-row bands.
// CHECK-LABEL: func.func @sum_pool_prime_rows
// CHECK: scf.forall ({{.*}}) in (13)
// CHECK: tensor.extract_slice {{.*}} [1, 1, 13, 256]
// CHECK: arith.addf {{.*}} : vector<1x1x16xf32>
func.func @sum_pool_prime_rows(%x: tensor<1x27x27x256xf32>) -> tensor<1x13x13x256xf32> {
  %zero = arith.constant 0.0 : f32
  %window = tensor.empty() : tensor<3x3xf32>
  %empty = tensor.empty() : tensor<1x13x13x256xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x13x13x256xf32>) -> tensor<1x13x13x256xf32>
  %y = linalg.pooling_nhwc_sum {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
       ins(%x, %window : tensor<1x27x27x256xf32>, tensor<3x3xf32>) outs(%init : tensor<1x13x13x256xf32>) -> tensor<1x13x13x256xf32>
  return %y : tensor<1x13x13x256xf32>
}
