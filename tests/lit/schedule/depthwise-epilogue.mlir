// A depthwise convolution's fusion group (bias or folded batch norm, ReLU6) runs its
// epilogue on the depthwise register tile's accumulators (schedule/group.py
// ``_accumulator_epilogue``, schedule/conv_kernels.py), as a convolution with output
// channels does: no scratch tile of the depthwise result, no zero fill read back as its
// first accumulators, no second loop nest over the tile for the epilogue. Stride 1 and 2,
// a row whose 8-pixel tiles divide it and one (15 pixels) whose last tile is peeled.
// On AVX-512 each reduction step takes a whole kw row of the window (schedule/conv_plan.py
// ``depthwise_window_fits``): the input row is read once as one vector per input pixel
// and each tap's pixels are slices of it; on AVX2 the window does not fit the 16 registers
// and each step is one tap.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-mark-groups --tilecraft-schedule="vector-bits=512 num-threads=2 fuse-groups=1" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-mark-groups --tilecraft-schedule="vector-bits=256 num-threads=2 fuse-groups=1" | FileCheck %s --check-prefix=AVX2

// 56x56 rows, 32 channels: 7 tiles of 8 pixels x one 16-lane vector, accumulated over the
// 3x3 window in registers, biased and clamped there, stored once.
// CHECK-LABEL: func.func @depthwise_bias_relu6
// CHECK: scf.forall
// CHECK: scf.for %{{.*}} = %c0 to %c56 step %c8
// CHECK: scf.for %{{.*}} = %c0 to %c3 step %c1 {{.*}} -> (vector<1x8x16xf32>)
// The 10 input pixels the 8 outputs' three taps span, and the three taps' filter vectors.
// CHECK-NOT: scf.for
// CHECK: vector.transfer_read {{.*}} vector<10x16xf32>
// CHECK: vector.transfer_read {{.*}} vector<3x16xf32>
// CHECK-COUNT-3: vector.extract_strided_slice {{.*}} : vector<10x16xf32> to vector<8x16xf32>
// CHECK-COUNT-3: vector.fma {{.*}} : vector<8x16xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: arith.addf {{.*}} : vector<8x16xf32>
// CHECK: arith.maximumf {{.*}} : vector<8x16xf32>
// CHECK: arith.minimumf {{.*}} : vector<8x16xf32>
// CHECK: vector.transfer_write {{.*}} : vector<8x16xf32>, tensor<1x1x8x16xf32>
// CHECK-NOT: linalg.depthwise_conv_2d
// CHECK-NOT: linalg.generic
// CHECK: return
// AVX2-LABEL: func.func @depthwise_bias_relu6
// AVX2: scf.for %{{.*}} = %c0 to %c3 step %c1 {{.*}} -> (vector<1x8x8xf32>)
// AVX2-NEXT: affine.apply
// AVX2-NEXT: scf.for %{{.*}} = %c0 to %c3 step %c1 {{.*}} -> (vector<1x8x8xf32>)
// AVX2-NOT: vector.extract_strided_slice
// AVX2: vector.fma {{.*}} : vector<8x8xf32>
// AVX2-NOT: vector.transfer_write
// AVX2: arith.minimumf {{.*}} : vector<8x8xf32>
// AVX2: vector.transfer_write {{.*}} : vector<8x8xf32>, tensor<1x1x8x8xf32>
// AVX2-NOT: linalg.depthwise_conv_2d
// AVX2-NOT: linalg.generic
// AVX2: return
func.func @depthwise_bias_relu6(%x: tensor<1x58x58x32xf32>, %w: tensor<3x3x32xf32>, %b: tensor<32xf32>) -> tensor<1x56x56x32xf32> {
  %zero = arith.constant 0.0 : f32
  %six = arith.constant 6.0 : f32
  %empty = tensor.empty() : tensor<1x56x56x32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x56x56x32xf32>) -> tensor<1x56x56x32xf32>
  %y = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x58x58x32xf32>, tensor<3x3x32xf32>) outs(%init : tensor<1x56x56x32xf32>) -> tensor<1x56x56x32xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(n,i,j,c)->(n,i,j,c)>, affine_map<(n,i,j,c)->(c)>, affine_map<(n,i,j,c)->(n,i,j,c)>], iterator_types = ["parallel","parallel","parallel","parallel"]}
      ins(%y, %b : tensor<1x56x56x32xf32>, tensor<32xf32>) outs(%empty : tensor<1x56x56x32xf32>) {
    ^bb0(%a: f32, %bb: f32, %out: f32):
      %t = arith.addf %a, %bb : f32
      %m = arith.maximumf %t, %zero : f32
      %n = arith.minimumf %m, %six : f32
      linalg.yield %n : f32
  } -> tensor<1x56x56x32xf32>
  return %o : tensor<1x56x56x32xf32>
}

// -----

// Stride 2, 5x5, 15 output pixels a row: one tile of 8 pixels and the peeled 7, each with
// its own epilogue on its accumulators (the FMAs unrolled to one per pixel).
// CHECK-LABEL: func.func @depthwise_5x5_stride2_peeled
// CHECK: scf.for {{.*}} -> (vector<1x8x16xf32>)
// 19 input pixels (7 x 2 + 5) for 8 outputs at stride 2: 40 FMAs on them.
// CHECK: vector.transfer_read {{.*}} vector<19x16xf32>
// CHECK: vector.transfer_read {{.*}} vector<5x16xf32>
// CHECK-COUNT-40: vector.fma {{.*}} : vector<16xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: arith.minimumf {{.*}} : vector<8x16xf32>
// CHECK: vector.transfer_write {{.*}} : vector<8x16xf32>, tensor<1x1x8x16xf32>
// CHECK: scf.for {{.*}} -> (vector<1x7x16xf32>)
// CHECK: vector.transfer_read {{.*}} vector<17x16xf32>
// CHECK-COUNT-35: vector.fma {{.*}} : vector<16xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: arith.minimumf {{.*}} : vector<7x16xf32>
// CHECK: vector.transfer_write {{.*}} : vector<7x16xf32>, tensor<1x1x7x16xf32>
// CHECK-NOT: linalg.depthwise_conv_2d
// CHECK-NOT: linalg.generic
// CHECK: return
// AVX2-LABEL: func.func @depthwise_5x5_stride2_peeled
// AVX2: arith.minimumf {{.*}} : vector<8x8xf32>
// AVX2: arith.minimumf {{.*}} : vector<7x8xf32>
// AVX2-NOT: linalg.depthwise_conv_2d
// AVX2-NOT: linalg.generic
// AVX2: return
func.func @depthwise_5x5_stride2_peeled(%x: tensor<1x33x33x48xf32>, %w: tensor<5x5x48xf32>, %b: tensor<48xf32>) -> tensor<1x15x15x48xf32> {
  %zero = arith.constant 0.0 : f32
  %six = arith.constant 6.0 : f32
  %empty = tensor.empty() : tensor<1x15x15x48xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x15x15x48xf32>) -> tensor<1x15x15x48xf32>
  %y = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%x, %w : tensor<1x33x33x48xf32>, tensor<5x5x48xf32>) outs(%init : tensor<1x15x15x48xf32>) -> tensor<1x15x15x48xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(n,i,j,c)->(n,i,j,c)>, affine_map<(n,i,j,c)->(c)>, affine_map<(n,i,j,c)->(n,i,j,c)>], iterator_types = ["parallel","parallel","parallel","parallel"]}
      ins(%y, %b : tensor<1x15x15x48xf32>, tensor<48xf32>) outs(%empty : tensor<1x15x15x48xf32>) {
    ^bb0(%a: f32, %bb: f32, %out: f32):
      %t = arith.addf %a, %bb : f32
      %m = arith.maximumf %t, %zero : f32
      %n = arith.minimumf %m, %six : f32
      linalg.yield %n : f32
  } -> tensor<1x15x15x48xf32>
  return %o : tensor<1x15x15x48xf32>
}
