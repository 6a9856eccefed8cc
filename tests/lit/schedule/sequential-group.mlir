// Fusion groups whose anchor has no thread level (a one-thread target, or too little work
// to split) are still one loop nest: the root is tiled with scf.for over bands of output
// rows (plan.sequential_tiles) and its producers are fused into that loop, so the
// convolution's result is consumed by its epilogue while it is in cache. No scf.forall:
// no async task per band.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-mark-groups --tilecraft-schedule="vector-bits=512 num-threads=1 fuse-groups=1 l2=1M" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-schedule="vector-bits=512 num-threads=1 fuse-groups=1" | FileCheck %s --check-prefix=PEROP

// MobileNetV2's expand convolution (1x1, 24 -> 144 channels at 56x56) with its folded
// batch norm and ReLU6: one band of 8 output rows at a time (8 x 56 x 144 floats, a quarter
// of a 1 MiB L2 as on the development machines), and inside it the conv's register tiles
// (8 pixels x one 16-lane channel vector) with the epilogue on the accumulators, as in a
// parallel group (conv_kernels.py): they start from a zero constant (no fill stored and
// reloaded), get the batch norm and the clamp in registers and are written once.
// CHECK-LABEL: func.func @expand_bn_relu6
// CHECK-NOT: scf.forall
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<1x8x16xf32>
// CHECK: %[[C8:.*]] = arith.constant 8 : index
// CHECK: {{^    %.* = scf.for %.* = %.* to %.* step }}%[[C8]] iter_args
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]]) -> (vector<1x8x16xf32>)
// CHECK: vector.contract {{.*}} : vector<8x4xf32>, vector<4x16xf32> into vector<8x16xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: arith.minimumf {{.*}} : vector<8x16xf32>
// CHECK: vector.transfer_write
// CHECK: tensor.insert_slice {{.*}} into tensor<1x56x56x144xf32>
// CHECK-NOT: {{^    %.* = scf.for}}
// CHECK: return
// Without the group tags: one loop nest per op (fill, conv, epilogue), each over the whole image.
// PEROP-LABEL: func.func @expand_bn_relu6
// PEROP-NOT: scf.forall
// PEROP: {{^    %.* = scf.for}}
// PEROP: vector.contract
// PEROP: {{^    %.* = scf.for}}
// PEROP: arith.minimumf {{.*}} : vector<
func.func @expand_bn_relu6(%x: tensor<1x56x56x24xf32>, %w: tensor<1x1x24x144xf32>, %scale: tensor<144xf32>, %shift: tensor<144xf32>) -> tensor<1x56x56x144xf32> {
  %zero = arith.constant 0.0 : f32
  %six = arith.constant 6.0 : f32
  %empty = tensor.empty() : tensor<1x56x56x144xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x56x56x144xf32>) -> tensor<1x56x56x144xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<1x56x56x24xf32>, tensor<1x1x24x144xf32>) outs(%init : tensor<1x56x56x144xf32>) -> tensor<1x56x56x144xf32>
  %out = tensor.empty() : tensor<1x56x56x144xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (c)>,
                                        affine_map<(n, h, w, c) -> (c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y, %scale, %shift : tensor<1x56x56x144xf32>, tensor<144xf32>, tensor<144xf32>) outs(%out : tensor<1x56x56x144xf32>) {
  ^bb0(%v: f32, %s: f32, %b: f32, %o: f32):
    %m = arith.mulf %v, %s : f32
    %a = arith.addf %m, %b : f32
    %lo = arith.maximumf %a, %zero : f32
    %hi = arith.minimumf %lo, %six : f32
    linalg.yield %hi : f32
  } -> tensor<1x56x56x144xf32>
  return %r : tensor<1x56x56x144xf32>
}

// -----

// Depthwise 3x3 with its zero pad and ReLU6: the pad stays before the loop (the buffer its
// source is written into, at bufferization: pipelines/tensor/pad_destinations.py); two bands of 28
// rows (28 x 56 x 32 floats fit the quarter of L2) read their rows plus the halo from it,
// run the register tiles of 8 pixels x one 16-lane channel vector accumulated over the 3x3
// window (a kh loop, each step's 10 input pixels read once), then the clamp.
// CHECK-LABEL: func.func @depthwise_relu6
// CHECK-NOT: scf.forall
// CHECK: %[[C28:.*]] = arith.constant 28 : index
// CHECK: tensor.pad {{.*}} low[0, 1, 1, 0] high[0, 1, 1, 0]
// CHECK: {{^    %.* = scf.for %.* = %.* to %.* step }}%[[C28]] iter_args
// CHECK-NOT: tensor.pad
// CHECK: scf.for {{.*}} -> ({{.*}}vector<1x8x16xf32>)
// CHECK: vector.transfer_read {{.*}} vector<10x16xf32>
// CHECK: vector.fma {{.*}} : vector<8x16xf32>
// CHECK: arith.minimumf {{.*}} : vector<
// CHECK: tensor.insert_slice {{.*}} into tensor<1x56x56x32xf32>
// CHECK-NOT: {{^    %.* = scf.for}}
// CHECK: return
func.func @depthwise_relu6(%x: tensor<1x56x56x32xf32>, %w: tensor<3x3x32xf32>) -> tensor<1x56x56x32xf32> {
  %zero = arith.constant 0.0 : f32
  %six = arith.constant 6.0 : f32
  %padded = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x56x56x32xf32> to tensor<1x58x58x32xf32>
  %empty = tensor.empty() : tensor<1x56x56x32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x56x56x32xf32>) -> tensor<1x56x56x32xf32>
  %y = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%padded, %w : tensor<1x58x58x32xf32>, tensor<3x3x32xf32>) outs(%init : tensor<1x56x56x32xf32>) -> tensor<1x56x56x32xf32>
  %out = tensor.empty() : tensor<1x56x56x32xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y : tensor<1x56x56x32xf32>) outs(%out : tensor<1x56x56x32xf32>) {
  ^bb0(%v: f32, %o: f32):
    %lo = arith.maximumf %v, %zero : f32
    %hi = arith.minimumf %lo, %six : f32
    linalg.yield %hi : f32
  } -> tensor<1x56x56x32xf32>
  return %r : tensor<1x56x56x32xf32>
}

// -----

// A filter-heavy 1x1 convolution (ResNet-50's 7x7 512 -> 2048 with bias and ReLU: 2048
// filter taps x channels against 49 pixels): bands of output channels, not of rows, so the
// 4 MB filter is read once, not once per row band. 1024 channels x 49 pixels fit the quarter
// of L2; inside a band the register tiles (7 pixels x 2 vectors) run the channels outermost
// and apply the epilogue on the accumulators.
// CHECK-LABEL: func.func @filter_heavy_pointwise
// CHECK-NOT: scf.forall
// CHECK: %[[C1024:.*]] = arith.constant 1024 : index
// CHECK: {{^    %.* = scf.for %.* = %.* to %.* step }}%[[C1024]] iter_args
// CHECK: scf.for {{.*}} step %c32
// CHECK: scf.for {{.*}} -> (vector<1x7x32xf32>)
// CHECK: vector.contract
// CHECK: arith.maximumf {{.*}} : vector<7x32xf32>
// CHECK: tensor.insert_slice {{.*}} into tensor<1x7x7x2048xf32>
// CHECK-NOT: {{^    %.* = scf.for}}
// CHECK: return
func.func @filter_heavy_pointwise(%x: tensor<1x7x7x512xf32>, %w: tensor<1x1x512x2048xf32>, %b: tensor<2048xf32>) -> tensor<1x7x7x2048xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x7x7x2048xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x7x7x2048xf32>) -> tensor<1x7x7x2048xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<1x7x7x512xf32>, tensor<1x1x512x2048xf32>) outs(%init : tensor<1x7x7x2048xf32>) -> tensor<1x7x7x2048xf32>
  %out = tensor.empty() : tensor<1x7x7x2048xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (c)>,
                                        affine_map<(n, h, w, c) -> (n, h, w, c)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y, %b : tensor<1x7x7x2048xf32>, tensor<2048xf32>) outs(%out : tensor<1x7x7x2048xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %a = arith.addf %v, %c : f32
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x7x7x2048xf32>
  return %r : tensor<1x7x7x2048xf32>
}

// -----

// A group whose whole output fits the quarter of L2 (SqueezeNet's squeeze 1x1 with bias and
// ReLU; 13 x 13 x 16 floats): no band to cut, so the band is the whole image and its loop
// folds away, but the group is still one loop nest with the epilogue on the accumulators
// (13-pixel rows of one 16-channel vector: the whole row as one tile, schedule/conv_plan.py
// ``one_vector_row_tile``), not a conv loop nest whose result a second loop nest rereads.
// Written whole, a padded consumer's interior can be its destination
// (pipelines/tensor/pad_destinations.py), not a copy of it.
// CHECK-LABEL: func.func @small_squeeze_relu
// CHECK-NOT: scf.forall
// CHECK: {{^    %.* = scf.for %.* = %c0 to %c13 step %c1 iter_args}}
// CHECK: vector.contract {{.*}} into vector<13x16xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: arith.maximumf {{.*}} : vector<13x16xf32>
// CHECK: vector.transfer_write
// CHECK-NOT: vector.contract
// CHECK-NOT: {{^    %.* = scf.for}}
// CHECK: return
func.func @small_squeeze_relu(%x: tensor<1x13x13x64xf32>, %w: tensor<1x1x64x16xf32>, %b: tensor<16xf32>) -> tensor<1x13x13x16xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x13x13x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x13x13x16xf32>) -> tensor<1x13x13x16xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<1x13x13x64xf32>, tensor<1x1x64x16xf32>) outs(%init : tensor<1x13x13x16xf32>) -> tensor<1x13x13x16xf32>
  %out = tensor.empty() : tensor<1x13x13x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (c)>,
                                        affine_map<(n, h, w, c) -> (n, h, w, c)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y, %b : tensor<1x13x13x16xf32>, tensor<16xf32>) outs(%out : tensor<1x13x13x16xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %a = arith.addf %v, %c : f32
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x13x13x16xf32>
  return %r : tensor<1x13x13x16xf32>
}

// -----

// A stem on an NCHW model input: the layout pass's transpose to NHWC is in the stem's
// group, but the convolution reads it through windows (2 * oh + kh), so a band has no
// slice of it to compute. It runs first, as an op of its own (one loop nest), and the
// group is the conv's bands of 3 rows with bias + ReLU on the accumulators. Fused into the
// band the transpose failed to vectorize and the group fell apart into one loop nest per
// op (fill, conv, epilogue).
// CHECK-LABEL: func.func @nchw_stem
// CHECK-NOT: scf.forall
// CHECK: {{^    %.* = scf.for %.* = %c0 to %c224 step %c1 iter_args.*tensor<1x224x224x3xf32>}}
// CHECK: {{^    %.* = scf.for %.* = %c0 to %c111 step %c3 iter_args}}
// CHECK-NOT: linalg.transpose
// CHECK: vector.contract
// CHECK-NOT: vector.transfer_write
// CHECK: arith.maximumf {{.*}} : vector<8x32xf32>
// CHECK-NOT: -> (tensor<1x111x111x64xf32>)
// CHECK: return
func.func @nchw_stem(%x: tensor<1x3x224x224xf32>, %w: tensor<3x3x3x64xf32>, %b: tensor<64xf32>) -> tensor<1x111x111x64xf32> {
  %zero = arith.constant 0.0 : f32
  %t0 = tensor.empty() : tensor<1x224x224x3xf32>
  %t = linalg.transpose ins(%x : tensor<1x3x224x224xf32>) outs(%t0 : tensor<1x224x224x3xf32>) permutation = [0, 2, 3, 1]
  %empty = tensor.empty() : tensor<1x111x111x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x111x111x64xf32>) -> tensor<1x111x111x64xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
       ins(%t, %w : tensor<1x224x224x3xf32>, tensor<3x3x3x64xf32>) outs(%init : tensor<1x111x111x64xf32>) -> tensor<1x111x111x64xf32>
  %out = tensor.empty() : tensor<1x111x111x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (c)>,
                                        affine_map<(n, h, w, c) -> (n, h, w, c)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y, %b : tensor<1x111x111x64xf32>, tensor<64xf32>) outs(%out : tensor<1x111x111x64xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %a = arith.addf %v, %c : f32
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x111x111x64xf32>
  return %r : tensor<1x111x111x64xf32>
}
