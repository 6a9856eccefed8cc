// tilecraft-pad-matmul-extents on 16 lanes (pipelines/graph/padded_extents.py, padded_filters):
// an odd multiple of 8 filters computes a multiple of 16 (24 -> 32: 2 16-lane FMAs per pixel,
// not 3 8-lane ones) unless the result is padded next (a 3x3 convolution's input, written
// into the pad's interior); wide layers with an odd count of vectors take an even one where
// that adds at most 1/32 (1008 -> 1024). Into a destination too where the 8-lane FMAs cost
// more than the copy (destination_padding_pays: ShuffleNet's 232 -> 232 into its concat,
// 240). On 8 lanes they are left as they are.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-pad-matmul-extents="lanes=16" --canonicalize | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-pad-matmul-extents --canonicalize | FileCheck %s --check-prefix=LANES8

// CHECK-LABEL: func.func @projection
// CHECK: %[[W:.*]] = tensor.pad %{{.*}} low[0, 0, 0, 0] high[0, 0, 0, 8]
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%arg0, %[[W]] : tensor<1x56x56x144xf32>, tensor<1x1x144x32xf32>) outs(%{{.*}} : tensor<1x56x56x32xf32>)
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0, 0] [1, 56, 56, 24] [1, 1, 1, 1] : tensor<1x56x56x32xf32> to tensor<1x56x56x24xf32>
// LANES8-LABEL: func.func @projection
// LANES8-NOT: tensor.pad
// LANES8: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<1x1x144x24xf32>
func.func @projection(%x: tensor<1x56x56x144xf32>, %bias: tensor<24xf32>) -> tensor<1x56x56x24xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<1x1x144x24xf32>
  %e = tensor.empty() : tensor<1x56x56x24xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x56x56x24xf32>) -> tensor<1x56x56x24xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x56x56x144xf32>, tensor<1x1x144x24xf32>) outs(%i : tensor<1x56x56x24xf32>) -> tensor<1x56x56x24xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c, %bias : tensor<1x56x56x24xf32>, tensor<24xf32>) outs(%e : tensor<1x56x56x24xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x56x56x24xf32>
  return %r : tensor<1x56x56x24xf32>
}

// -----

// The ReLU'd result is the zero-padded input of a 3x3 convolution: 24 filters stay.
// CHECK-LABEL: func.func @into_pad
// CHECK-NOT: high[0, 0, 0, 8]
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<1x1x144x24xf32>
// CHECK: tensor.pad %{{.*}} low[0, 1, 1, 0] high[0, 1, 1, 0]
func.func @into_pad(%x: tensor<1x56x56x144xf32>) -> tensor<1x58x58x24xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<1x1x144x24xf32>
  %e = tensor.empty() : tensor<1x56x56x24xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x56x56x24xf32>) -> tensor<1x56x56x24xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x56x56x144xf32>, tensor<1x1x144x24xf32>) outs(%i : tensor<1x56x56x24xf32>) -> tensor<1x56x56x24xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c : tensor<1x56x56x24xf32>) outs(%e : tensor<1x56x56x24xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %z : f32
    linalg.yield %m : f32
  } -> tensor<1x56x56x24xf32>
  %p = tensor.pad %r low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %z : f32
  } : tensor<1x56x56x24xf32> to tensor<1x58x58x24xf32>
  return %p : tensor<1x58x58x24xf32>
}

// -----

// SqueezeNet's classifier after the import's padding to 1008 (63 vectors): 1024.
// CHECK-LABEL: func.func @classifier
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} outs(%{{.*}} : tensor<1x13x13x1024xf32>)
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0, 0] [1, 13, 13, 1008] [1, 1, 1, 1]
// LANES8-LABEL: func.func @classifier
// LANES8-NOT: 1024
// LANES8: return
func.func @classifier(%x: tensor<1x13x13x512xf32>) -> tensor<1x13x13x1008xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<1x1x512x1008xf32>
  %e = tensor.empty() : tensor<1x13x13x1008xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x13x13x1008xf32>) -> tensor<1x13x13x1008xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x13x13x512xf32>, tensor<1x1x512x1008xf32>) outs(%i : tensor<1x13x13x1008xf32>) -> tensor<1x13x13x1008xf32>
  return %c : tensor<1x13x13x1008xf32>
}

// -----

// A branch of a concat (a Fire module's, an Inception's): written in place into the concat
// destination, so its 24 filters stay.
// CHECK-LABEL: func.func @into_concat
// CHECK-NOT: high[0, 0, 0, 8]
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<1x1x144x24xf32>
// CHECK: tensor.concat dim(3)
func.func @into_concat(%x: tensor<1x28x28x144xf32>, %y: tensor<1x28x28x16xf32>) -> tensor<1x28x28x40xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<1x1x144x24xf32>
  %e = tensor.empty() : tensor<1x28x28x24xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x28x28x24xf32>) -> tensor<1x28x28x24xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x28x28x144xf32>, tensor<1x1x144x24xf32>) outs(%i : tensor<1x28x28x24xf32>) -> tensor<1x28x28x24xf32>
  %r = tensor.concat dim(3) %c, %y : (tensor<1x28x28x24xf32>, tensor<1x28x28x16xf32>) -> tensor<1x28x28x40xf32>
  return %r : tensor<1x28x28x40xf32>
}

// -----

// ShuffleNet's branch, 232 -> 232 into the unit's concat: 29 one-vector 8-lane FMAs per
// pixel and input channel in place against 15 16-lane ones, over 232 input channels: padded
// to 240 and sliced, whatever the copy into the concat costs.
// CHECK-LABEL: func.func @wide_into_concat
// CHECK: %[[W:.*]] = tensor.pad %{{.*}} low[0, 0, 0, 0] high[0, 0, 0, 8]
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%arg0, %[[W]] : tensor<1x7x7x232xf32>, tensor<1x1x232x240xf32>) outs(%{{.*}} : tensor<1x7x7x240xf32>)
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0, 0] [1, 7, 7, 232] [1, 1, 1, 1] : tensor<1x7x7x240xf32> to tensor<1x7x7x232xf32>
// CHECK: tensor.concat dim(3)
// LANES8-LABEL: func.func @wide_into_concat
// LANES8-NOT: tensor.pad
// LANES8: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<1x1x232x232xf32>
func.func @wide_into_concat(%x: tensor<1x7x7x232xf32>, %y: tensor<1x7x7x232xf32>) -> tensor<1x7x7x464xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<1x1x232x232xf32>
  %e = tensor.empty() : tensor<1x7x7x232xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x7x7x232xf32>) -> tensor<1x7x7x232xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x7x7x232xf32>, tensor<1x1x232x232xf32>) outs(%i : tensor<1x7x7x232xf32>) -> tensor<1x7x7x232xf32>
  %r = tensor.concat dim(3) %y, %c : (tensor<1x7x7x232xf32>, tensor<1x7x7x232xf32>) -> tensor<1x7x7x464xf32>
  return %r : tensor<1x7x7x464xf32>
}
