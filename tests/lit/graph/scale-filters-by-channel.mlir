// tilecraft-scale-filters-by-channel: conv(x * s[c], W) becomes conv(x, W * s[c]) where the
// filter is the smaller (pipelines/graph/channel_scales.py).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-scale-filters-by-channel | FileCheck %s

// A squeeze-excite gate (1x1x1xC, read (0, 0, 0, c)) scaling EfficientNet's 144-channel
// activation before its 1x1 projection to 24 channels: the filter (144 x 24) is scaled, the
// convolution reads the unscaled activation and the activation's scale is gone.
// CHECK-DAG: #[[$ID:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$GATE:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (0, 0, 0, d2)>
// CHECK-LABEL: func.func @se_projection
// CHECK-SAME: (%[[X:.*]]: tensor<1x56x56x144xf32>, %[[S:.*]]: tensor<1x1x1x144xf32>, %[[W:.*]]: tensor<1x1x144x24xf32>)
// CHECK-NOT: outs(%{{.*}} : tensor<1x56x56x144xf32>)
// CHECK: %[[WS:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$GATE]], #[[$ID]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[W]], %[[S]] : tensor<1x1x144x24xf32>, tensor<1x1x1x144xf32>) outs(%{{.*}} : tensor<1x1x144x24xf32>)
// CHECK: arith.mulf
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[X]], %[[WS]] : tensor<1x56x56x144xf32>, tensor<1x1x144x24xf32>)
func.func @se_projection(%x: tensor<1x56x56x144xf32>, %s: tensor<1x1x1x144xf32>, %w: tensor<1x1x144x24xf32>) -> tensor<1x56x56x24xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x56x56x144xf32>
  %xs = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (n, 0, 0, c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>],
                        iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %s : tensor<1x56x56x144xf32>, tensor<1x1x1x144xf32>) outs(%e : tensor<1x56x56x144xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x56x56x144xf32>
  %oe = tensor.empty() : tensor<1x56x56x24xf32>
  %init = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x56x56x24xf32>) -> tensor<1x56x56x24xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%xs, %w : tensor<1x56x56x144xf32>, tensor<1x1x144x24xf32>) outs(%init : tensor<1x56x56x24xf32>) -> tensor<1x56x56x24xf32>
  return %y : tensor<1x56x56x24xf32>
}

// -----

// The gate as a plain [C] vector, the scale's operands swapped (s * x), a 3x3 convolution
// with stride 2: the filter (3 x 3 x 32 x 16) is still smaller than the image (28 x 28).
// CHECK-DAG: #[[$ID:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$VEC:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d2)>
// CHECK-LABEL: func.func @gate_vector_3x3
// CHECK: linalg.generic {indexing_maps = [#[[$ID]], #[[$VEC]], #[[$ID]]]
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%arg0, %{{.*}} : tensor<1x28x28x32xf32>, tensor<3x3x32x16xf32>)
func.func @gate_vector_3x3(%x: tensor<1x28x28x32xf32>, %s: tensor<32xf32>, %w: tensor<3x3x32x16xf32>) -> tensor<1x13x13x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x32xf32>
  %xs = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>],
                        iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s, %x : tensor<32xf32>, tensor<1x28x28x32xf32>) outs(%e : tensor<1x28x28x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x28x28x32xf32>
  %oe = tensor.empty() : tensor<1x13x13x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x13x13x16xf32>) -> tensor<1x13x13x16xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%xs, %w : tensor<1x28x28x32xf32>, tensor<3x3x32x16xf32>) outs(%init : tensor<1x13x13x16xf32>) -> tensor<1x13x13x16xf32>
  return %y : tensor<1x13x13x16xf32>
}

// -----

// Left alone: the filter (1152 x 320) outweighs the 7 x 7 image (EfficientNet's last
// blocks); two images (a gate per image would need a filter per image); a scale read by
// another op too; a scale that is not per channel (read (h, w)).
// CHECK-LABEL: func.func @filter_larger
// CHECK: linalg.generic
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{[0-9]+}}, %arg2
// CHECK-LABEL: func.func @two_images
// CHECK: linalg.generic
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{[0-9]+}}, %arg2
// CHECK-LABEL: func.func @scale_read_twice
// CHECK: linalg.generic
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{[0-9]+}}, %arg2
// CHECK-LABEL: func.func @not_per_channel
// CHECK: linalg.generic
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{[0-9]+}}, %arg2
#id = affine_map<(n, h, w, c) -> (n, h, w, c)>
#gate = affine_map<(n, h, w, c) -> (n, 0, 0, c)>
func.func @filter_larger(%x: tensor<1x7x7x1152xf32>, %s: tensor<1x1x1x1152xf32>, %w: tensor<1x1x1152x320xf32>) -> tensor<1x7x7x320xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x7x7x1152xf32>
  %xs = linalg.generic {indexing_maps = [#id, #gate, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %s : tensor<1x7x7x1152xf32>, tensor<1x1x1x1152xf32>) outs(%e : tensor<1x7x7x1152xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x7x7x1152xf32>
  %oe = tensor.empty() : tensor<1x7x7x320xf32>
  %init = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x7x7x320xf32>) -> tensor<1x7x7x320xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%xs, %w : tensor<1x7x7x1152xf32>, tensor<1x1x1152x320xf32>) outs(%init : tensor<1x7x7x320xf32>) -> tensor<1x7x7x320xf32>
  return %y : tensor<1x7x7x320xf32>
}
func.func @two_images(%x: tensor<2x28x28x32xf32>, %s: tensor<2x1x1x32xf32>, %w: tensor<1x1x32x16xf32>) -> tensor<2x28x28x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x28x28x32xf32>
  %xs = linalg.generic {indexing_maps = [#id, #gate, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %s : tensor<2x28x28x32xf32>, tensor<2x1x1x32xf32>) outs(%e : tensor<2x28x28x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<2x28x28x32xf32>
  %oe = tensor.empty() : tensor<2x28x28x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x28x28x16xf32>) -> tensor<2x28x28x16xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%xs, %w : tensor<2x28x28x32xf32>, tensor<1x1x32x16xf32>) outs(%init : tensor<2x28x28x16xf32>) -> tensor<2x28x28x16xf32>
  return %y : tensor<2x28x28x16xf32>
}
func.func @scale_read_twice(%x: tensor<1x28x28x32xf32>, %s: tensor<1x1x1x32xf32>, %w: tensor<1x1x32x16xf32>) -> (tensor<1x28x28x16xf32>, tensor<1x28x28x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x32xf32>
  %xs = linalg.generic {indexing_maps = [#id, #gate, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %s : tensor<1x28x28x32xf32>, tensor<1x1x1x32xf32>) outs(%e : tensor<1x28x28x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x28x28x32xf32>
  %oe = tensor.empty() : tensor<1x28x28x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x28x28x16xf32>) -> tensor<1x28x28x16xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%xs, %w : tensor<1x28x28x32xf32>, tensor<1x1x32x16xf32>) outs(%init : tensor<1x28x28x16xf32>) -> tensor<1x28x28x16xf32>
  return %y, %xs : tensor<1x28x28x16xf32>, tensor<1x28x28x32xf32>
}
func.func @not_per_channel(%x: tensor<1x28x28x32xf32>, %s: tensor<28x28xf32>, %w: tensor<1x1x32x16xf32>) -> tensor<1x28x28x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x32xf32>
  %xs = linalg.generic {indexing_maps = [#id, affine_map<(n, h, w, c) -> (h, w)>, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %s : tensor<1x28x28x32xf32>, tensor<28x28xf32>) outs(%e : tensor<1x28x28x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x28x28x32xf32>
  %oe = tensor.empty() : tensor<1x28x28x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x28x28x16xf32>) -> tensor<1x28x28x16xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%xs, %w : tensor<1x28x28x32xf32>, tensor<1x1x32x16xf32>) outs(%init : tensor<1x28x28x16xf32>) -> tensor<1x28x28x16xf32>
  return %y : tensor<1x28x28x16xf32>
}

// -----

// A padded 3x3 projection: the scale sits before the zero pad, which then pads the unscaled
// activation (0 * s = 0). A pad of another value would not commute with the scale: left alone.
// CHECK-LABEL: func.func @zero_padded
// CHECK: %[[P:.*]] = tensor.pad %arg0 low[0, 1, 1, 0] high[0, 1, 1, 0]
// CHECK: %[[WS:.*]] = linalg.generic {{.*}} ins(%arg2, %arg1 : tensor<3x3x32x16xf32>, tensor<1x1x1x32xf32>)
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[P]], %[[WS]] :
// CHECK-LABEL: func.func @one_padded
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 :
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{.*}}, %arg2 :
#id = affine_map<(n, h, w, c) -> (n, h, w, c)>
#gate = affine_map<(n, h, w, c) -> (n, 0, 0, c)>
func.func @zero_padded(%x: tensor<1x28x28x32xf32>, %s: tensor<1x1x1x32xf32>, %w: tensor<3x3x32x16xf32>) -> tensor<1x28x28x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x28x28x32xf32>
  %xs = linalg.generic {indexing_maps = [#id, #gate, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %s : tensor<1x28x28x32xf32>, tensor<1x1x1x32xf32>) outs(%e : tensor<1x28x28x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x28x28x32xf32>
  %p = tensor.pad %xs low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x28x28x32xf32> to tensor<1x30x30x32xf32>
  %oe = tensor.empty() : tensor<1x28x28x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x28x28x16xf32>) -> tensor<1x28x28x16xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%p, %w : tensor<1x30x30x32xf32>, tensor<3x3x32x16xf32>) outs(%init : tensor<1x28x28x16xf32>) -> tensor<1x28x28x16xf32>
  return %y : tensor<1x28x28x16xf32>
}
func.func @one_padded(%x: tensor<1x28x28x32xf32>, %s: tensor<1x1x1x32xf32>, %w: tensor<3x3x32x16xf32>) -> tensor<1x28x28x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<1x28x28x32xf32>
  %xs = linalg.generic {indexing_maps = [#id, #gate, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %s : tensor<1x28x28x32xf32>, tensor<1x1x1x32xf32>) outs(%e : tensor<1x28x28x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x28x28x32xf32>
  %p = tensor.pad %xs low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %one : f32
  } : tensor<1x28x28x32xf32> to tensor<1x30x30x32xf32>
  %oe = tensor.empty() : tensor<1x28x28x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x28x28x16xf32>) -> tensor<1x28x28x16xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%p, %w : tensor<1x30x30x32xf32>, tensor<3x3x32x16xf32>) outs(%init : tensor<1x28x28x16xf32>) -> tensor<1x28x28x16xf32>
  return %y : tensor<1x28x28x16xf32>
}
