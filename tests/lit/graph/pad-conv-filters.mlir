// tilecraft-pad-matmul-extents on NHWC convolutions: a constant filter whose output channels
// have no whole vector (71, a prime) gets zero filters up to 72 (80 would add more than an
// eighth); the bias add and ReLU run on the 72 channels and the slice back to 71 comes last.
// An input filter (its padding would be a copy per call) and 64 or 5 filters are left alone.
// On 16 lanes the 71 filters take 80 (5 vectors of 16, not 9 of 8: an 8-lane FMA is one
// instruction as a 16-lane one is).
// RUN: tilecraft-opt %s --tilecraft-pad-matmul-extents --canonicalize | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-pad-matmul-extents="lanes=16" --canonicalize | FileCheck %s --check-prefix=LANES16
// RUN: not tilecraft-opt %s --tilecraft-pad-matmul-extents="lanes=0" 2>&1 | FileCheck %s --check-prefix=BAD

// LANES16-LABEL: func.func @prime_filters
// LANES16: tensor.pad %{{.*}} low[0, 0, 0, 0] high[0, 0, 0, 9]
// LANES16: linalg.conv_2d_nhwc_hwcf {{.*}} outs(%{{.*}} : tensor<1x25x25x80xf32>)
// LANES16: tensor.extract_slice %{{.*}}[0, 0, 0, 0] [1, 25, 25, 71] [1, 1, 1, 1] : tensor<1x25x25x80xf32> to tensor<1x25x25x71xf32>
// LANES16-LABEL: func.func @left
// LANES16-NOT: tensor.pad
// BAD: option lanes must be a positive integer

// CHECK-LABEL: func.func @prime_filters
// CHECK: %[[W:.*]] = tensor.pad %{{.*}} low[0, 0, 0, 0] high[0, 0, 0, 1]
// CHECK: %[[C:.*]] = linalg.conv_2d_nhwc_hwcf {{.*}} ins(%arg0, %[[W]] : tensor<1x51x51x37xf32>, tensor<3x3x37x72xf32>) outs(%{{.*}} : tensor<1x25x25x72xf32>)
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[C]], %{{.*}} : tensor<1x25x25x72xf32>, tensor<72xf32>) outs(%{{.*}} : tensor<1x25x25x72xf32>)
// CHECK: %[[S:.*]] = tensor.extract_slice %[[R]][0, 0, 0, 0] [1, 25, 25, 71] [1, 1, 1, 1] : tensor<1x25x25x72xf32> to tensor<1x25x25x71xf32>
// CHECK: return %[[S]]
func.func @prime_filters(%x: tensor<1x51x51x37xf32>, %bias: tensor<71xf32>) -> tensor<1x25x25x71xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<3x3x37x71xf32>
  %e = tensor.empty() : tensor<1x25x25x71xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x25x25x71xf32>) -> tensor<1x25x25x71xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%x, %w : tensor<1x51x51x37xf32>, tensor<3x3x37x71xf32>) outs(%i : tensor<1x25x25x71xf32>) -> tensor<1x25x25x71xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c, %bias : tensor<1x25x25x71xf32>, tensor<71xf32>) outs(%e : tensor<1x25x25x71xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %m = arith.maximumf %s, %z : f32
    linalg.yield %m : f32
  } -> tensor<1x25x25x71xf32>
  return %r : tensor<1x25x25x71xf32>
}

// CHECK-LABEL: func.func @left
// CHECK-NOT: tensor.pad
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<3x3x8x71xf32>
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<3x3x8x64xf32>
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<3x3x8x5xf32>
func.func @left(%x: tensor<1x9x9x8xf32>, %w: tensor<3x3x8x71xf32>) -> (tensor<1x7x7x71xf32>, tensor<1x7x7x64xf32>, tensor<1x7x7x5xf32>) {
  %z = arith.constant 0.0 : f32
  %w64 = arith.constant dense<0.5> : tensor<3x3x8x64xf32>
  %w5 = arith.constant dense<0.5> : tensor<3x3x8x5xf32>
  %e = tensor.empty() : tensor<1x7x7x71xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x7x7x71xf32>) -> tensor<1x7x7x71xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x9x9x8xf32>, tensor<3x3x8x71xf32>) outs(%i : tensor<1x7x7x71xf32>) -> tensor<1x7x7x71xf32>
  %e64 = tensor.empty() : tensor<1x7x7x64xf32>
  %i64 = linalg.fill ins(%z : f32) outs(%e64 : tensor<1x7x7x64xf32>) -> tensor<1x7x7x64xf32>
  %c64 = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w64 : tensor<1x9x9x8xf32>, tensor<3x3x8x64xf32>) outs(%i64 : tensor<1x7x7x64xf32>) -> tensor<1x7x7x64xf32>
  %e5 = tensor.empty() : tensor<1x7x7x5xf32>
  %i5 = linalg.fill ins(%z : f32) outs(%e5 : tensor<1x7x7x5xf32>) -> tensor<1x7x7x5xf32>
  %c5 = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w5 : tensor<1x9x9x8xf32>, tensor<3x3x8x5xf32>) outs(%i5 : tensor<1x7x7x5xf32>) -> tensor<1x7x7x5xf32>
  return %c, %c64, %c5 : tensor<1x7x7x71xf32>, tensor<1x7x7x64xf32>, tensor<1x7x7x5xf32>
}
