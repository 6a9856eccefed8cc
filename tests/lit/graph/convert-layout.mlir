// tilecraft-convert-layout: NCHW convolutions and pooling run in NHWC, the layout propagates
// through pads, elementwise ops and reductions, back-to-back conversions cancel
// (pipelines/graph/layout.py).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-convert-layout | FileCheck %s

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#bias = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>

// pad -> conv -> bias -> relu -> pad -> conv -> residual add of the input: one conversion
// of the argument (before the first pad) and one of the result, nothing in between; the
// per-channel bias is read as a 1-D view of its channels, through the last loop (its 8x1x1
// form would be read as a vector<Nx1x1> and transposed per vector).
// CHECK-DAG: #[[$ID:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$BIAS:.*]] = affine_map<(d0, d1, d2, d3) -> (d3)>
// CHECK-LABEL: func.func @block
// CHECK: %[[X:.*]] = "graph.layout_convert"(%arg0) {dst_layout = #graph.layout<"NHWC">, src_layout = #graph.layout<"NCHW">} : (tensor<1x8x6x6xf32>) -> tensor<1x6x6x8xf32>
// CHECK: %[[P:.*]] = tensor.pad %[[X]] low[0, 1, 1, 0] high[0, 1, 1, 0]
// CHECK: linalg.transpose ins(%arg1 : tensor<8x8x3x3xf32>) outs(%{{.*}} : tensor<3x3x8x8xf32>) permutation = [2, 3, 1, 0]
// CHECK: %[[C:.*]] = linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[P]], %{{.*}} : tensor<1x8x8x8xf32>, tensor<3x3x8x8xf32>) outs(%{{.*}} : tensor<1x6x6x8xf32>)
// CHECK: %[[BV:.*]] = tensor.collapse_shape %arg2 {{\[\[}}0, 1, 2]] : tensor<8x1x1xf32> into tensor<8xf32>
// CHECK: %[[B:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$BIAS]], #[[$ID]]], {{.*}} ins(%[[C]], %[[BV]] : tensor<1x6x6x8xf32>, tensor<8xf32>)
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<1x6x6x8xf32>)
// CHECK: %[[P2:.*]] = tensor.pad %[[R]] low[0, 1, 1, 0]
// CHECK: %[[C2:.*]] = linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[P2]],
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[C2]], %[[X]] : tensor<1x6x6x8xf32>, tensor<1x6x6x8xf32>)
// CHECK: %[[Y:.*]] = "graph.layout_convert"(%[[S]]) {dst_layout = #graph.layout<"NCHW">, src_layout = #graph.layout<"NHWC">}
// CHECK-NOT: graph.layout_convert
// CHECK: return %[[Y]] : tensor<1x8x6x6xf32>
func.func @block(%x: tensor<1x8x6x6xf32>, %w: tensor<8x8x3x3xf32>, %b: tensor<8x1x1xf32>) -> tensor<1x8x6x6xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x8x6x6xf32> to tensor<1x8x8x8xf32>
  %e = tensor.empty() : tensor<1x8x6x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%p, %w : tensor<1x8x8x8xf32>, tensor<8x8x3x3xf32>) outs(%f : tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %bc = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c, %b : tensor<1x8x6x6xf32>, tensor<8x1x1xf32>) outs(%e : tensor<1x8x6x6xf32>) {
  ^bb0(%in: f32, %bb: f32, %out: f32):
    %s = arith.addf %in, %bb : f32
    linalg.yield %s : f32
  } -> tensor<1x8x6x6xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%bc : tensor<1x8x6x6xf32>) outs(%e : tensor<1x8x6x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x8x6x6xf32>
  %p2 = tensor.pad %r low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x8x6x6xf32> to tensor<1x8x8x8xf32>
  %c2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%p2, %w : tensor<1x8x8x8xf32>, tensor<8x8x3x3xf32>) outs(%f : tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c2, %x : tensor<1x8x6x6xf32>, tensor<1x8x6x6xf32>) outs(%e : tensor<1x8x6x6xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %s = arith.addf %in, %in2 : f32
    linalg.yield %s : f32
  } -> tensor<1x8x6x6xf32>
  return %sum : tensor<1x8x6x6xf32>
}

// -----

#in = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#out = affine_map<(d0, d1, d2, d3) -> (d0, d1)>

// Depthwise conv -> max pooling -> global sum pooling written as a reduction generic: all
// NHWC; the reduction reads NHWC through its permuted input map and its 1x4 result needs no
// conversion.
// CHECK-DAG: #[[$IN:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>
// CHECK-DAG: #[[$OUT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1)>
// CHECK-LABEL: func.func @depthwise_pool_reduce
// CHECK: "graph.layout_convert"(%arg0)
// CHECK: linalg.transpose ins(%arg1 : tensor<4x3x3xf32>) outs(%{{.*}} : tensor<3x3x4xf32>) permutation = [1, 2, 0]
// CHECK: %[[D:.*]] = linalg.depthwise_conv_2d_nhwc_hwc {{.*}} -> tensor<1x6x6x4xf32>
// CHECK: %[[M:.*]] = linalg.pooling_nhwc_max {{.*}} ins(%[[D]], %{{.*}} : tensor<1x6x6x4xf32>, tensor<2x2xf32>) {{.*}} -> tensor<1x3x3x4xf32>
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #[[$OUT]]], {{.*}} ins(%[[M]] : tensor<1x3x3x4xf32>) outs(%{{.*}} : tensor<1x4xf32>)
// CHECK-NOT: graph.layout_convert
// CHECK: return
func.func @depthwise_pool_reduce(%x: tensor<1x4x8x8xf32>, %w: tensor<4x3x3xf32>) -> tensor<1x4xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<1x4x6x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %d = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x4x8x8xf32>, tensor<4x3x3xf32>) outs(%f : tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %pe = tensor.empty() : tensor<1x4x3x3xf32>
  %pf = linalg.fill ins(%ninf : f32) outs(%pe : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  %win = tensor.empty() : tensor<2x2xf32>
  %m = linalg.pooling_nchw_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%d, %win : tensor<1x4x6x6xf32>, tensor<2x2xf32>) outs(%pf : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  %re = tensor.empty() : tensor<1x4xf32>
  %rf = linalg.fill ins(%zero : f32) outs(%re : tensor<1x4xf32>) -> tensor<1x4xf32>
  %s = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%m : tensor<1x4x3x3xf32>) outs(%rf : tensor<1x4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  } -> tensor<1x4xf32>
  return %s : tensor<1x4xf32>
}

// -----

// Conversions written back to back cancel; a conversion between unrelated ops stays.
// CHECK-LABEL: func.func @cancel
// CHECK-NOT: graph.layout_convert
// CHECK: return %arg0
func.func @cancel(%x: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %a = "graph.layout_convert"(%x) {src_layout = #graph.layout<"NCHW">, dst_layout = #graph.layout<"NHWC">} : (tensor<1x2x3x4xf32>) -> tensor<1x3x4x2xf32>
  %b = "graph.layout_convert"(%a) {src_layout = #graph.layout<"NHWC">, dst_layout = #graph.layout<"NCHW">} : (tensor<1x3x4x2xf32>) -> tensor<1x2x3x4xf32>
  return %b : tensor<1x2x3x4xf32>
}

// -----

// Negative: a reshape of the NHWC result (not of unit dims) blocks the propagation, so an
// explicit conversion back to NCHW stays in front of it.
// CHECK-LABEL: func.func @blocked_by_reshape
// CHECK: %[[C:.*]] = linalg.conv_2d_nhwc_hwcf
// CHECK: %[[B:.*]] = "graph.layout_convert"(%[[C]]) {dst_layout = #graph.layout<"NCHW">, src_layout = #graph.layout<"NHWC">}
// CHECK: tensor.collapse_shape %[[B]] {{\[}}[0], [1, 2, 3]] : tensor<1x2x2x2xf32> into tensor<1x8xf32>
func.func @blocked_by_reshape(%x: tensor<1x2x2x2xf32>, %w: tensor<2x2x1x1xf32>) -> tensor<1x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x2x2x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) outs(%f : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %r = tensor.collapse_shape %c [[0], [1, 2, 3]] : tensor<1x2x2x2xf32> into tensor<1x8xf32>
  return %r : tensor<1x8xf32>
}

// -----

// Negative: an NHWC conv and a conv with dynamic shapes are left alone.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: graph.layout_convert
// CHECK: linalg.conv_2d_nhwc_hwcf
// CHECK: linalg.conv_2d_nchw_fchw {{.*}} -> tensor<?x2x2x2xf32>
// CHECK-NOT: graph.layout_convert
func.func @left_alone(%x: tensor<1x4x4x2xf32>, %w: tensor<3x3x2x2xf32>, %init: tensor<1x2x2x2xf32>,
                      %y: tensor<?x2x4x4xf32>, %v: tensor<2x2x3x3xf32>, %yinit: tensor<?x2x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<?x2x2x2xf32>) {
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x4x4x2xf32>, tensor<3x3x2x2xf32>) outs(%init : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %d = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%y, %v : tensor<?x2x4x4xf32>, tensor<2x2x3x3xf32>) outs(%yinit : tensor<?x2x2x2xf32>) -> tensor<?x2x2x2xf32>
  return %c, %d : tensor<1x2x2x2xf32>, tensor<?x2x2x2xf32>
}

// -----

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// Transposes NCHW -> NHWC and back are layout conversions (int8 convolutions wrap their NHWC
// matmul in two): an elementwise op between them runs in NHWC, and a round trip cancels.
// CHECK-LABEL: func.func @transposes
// CHECK-NOT: linalg.transpose
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<1x5x5x4xf32>)
// CHECK-NOT: linalg.transpose
// CHECK-NOT: graph.layout_convert
// CHECK: return %[[R]] : tensor<1x5x5x4xf32>
func.func @transposes(%x: tensor<1x5x5x4xf32>) -> tensor<1x5x5x4xf32> {
  %e = tensor.empty() : tensor<1x4x5x5xf32>
  %nchw = linalg.transpose ins(%x : tensor<1x5x5x4xf32>) outs(%e : tensor<1x4x5x5xf32>) permutation = [0, 3, 1, 2]
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%nchw : tensor<1x4x5x5xf32>) outs(%e : tensor<1x4x5x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %zero = arith.constant 0.0 : f32
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x4x5x5xf32>
  %e2 = tensor.empty() : tensor<1x5x5x4xf32>
  %nhwc = linalg.transpose ins(%r : tensor<1x4x5x5xf32>) outs(%e2 : tensor<1x5x5x4xf32>) permutation = [0, 2, 3, 1]
  return %nhwc : tensor<1x5x5x4xf32>
}

// -----

// A channel concat of a converted value (a U-Net's skip connection) runs in NHWC along the
// last dim; its other part, an argument, is converted; one conversion of the result.
// CHECK-LABEL: func.func @skip_concat
// CHECK: %[[A:.*]] = "graph.layout_convert"(%arg0) {{.*}} : (tensor<1x4x6x6xf32>) -> tensor<1x6x6x4xf32>
// CHECK: %[[P:.*]] = linalg.pooling_nhwc_max {{.*}} ins(%[[A]],
// CHECK: %[[B:.*]] = "graph.layout_convert"(%arg1) {{.*}} : (tensor<1x2x6x6xf32>) -> tensor<1x6x6x2xf32>
// CHECK: %[[CAT:.*]] = tensor.concat dim(3) %[[P]], %[[B]] : (tensor<1x6x6x4xf32>, tensor<1x6x6x2xf32>) -> tensor<1x6x6x6xf32>
// CHECK: %[[Y:.*]] = "graph.layout_convert"(%[[CAT]]) {dst_layout = #graph.layout<"NCHW">, src_layout = #graph.layout<"NHWC">}
// CHECK: return %[[Y]] : tensor<1x6x6x6xf32>
func.func @skip_concat(%x: tensor<1x4x6x6xf32>, %y: tensor<1x2x6x6xf32>) -> tensor<1x6x6x6xf32> {
  %ninf = arith.constant -3.4e38 : f32
  %win = tensor.empty() : tensor<1x1xf32>
  %e = tensor.empty() : tensor<1x4x6x6xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %p = linalg.pooling_nchw_max {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %win : tensor<1x4x6x6xf32>, tensor<1x1xf32>) outs(%f : tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %c = tensor.concat dim(1) %p, %y : (tensor<1x4x6x6xf32>, tensor<1x2x6x6xf32>) -> tensor<1x6x6x6xf32>
  return %c : tensor<1x6x6x6xf32>
}

// -----

// A static slice of a converted value (a convolution computed on a row widened from 13 to 14
// pixels, cut back: ir/conv.py) runs in NHWC, offsets and sizes permuted; the
// result is converted once.
// CHECK-LABEL: func.func @widened_row_slice
// CHECK: %[[P:.*]] = linalg.pooling_nhwc_max
// CHECK: %[[S:.*]] = tensor.extract_slice %[[P]][0, 0, 0, 0] [1, 13, 13, 4] [1, 1, 1, 1] : tensor<1x13x14x4xf32> to tensor<1x13x13x4xf32>
// CHECK: %[[Y:.*]] = "graph.layout_convert"(%[[S]]) {dst_layout = #graph.layout<"NCHW">, src_layout = #graph.layout<"NHWC">}
// CHECK: return %[[Y]] : tensor<1x4x13x13xf32>
func.func @widened_row_slice(%x: tensor<1x4x13x14xf32>) -> tensor<1x4x13x13xf32> {
  %ninf = arith.constant -3.4e38 : f32
  %win = tensor.empty() : tensor<1x1xf32>
  %e = tensor.empty() : tensor<1x4x13x14xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x4x13x14xf32>) -> tensor<1x4x13x14xf32>
  %p = linalg.pooling_nchw_max {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %win : tensor<1x4x13x14xf32>, tensor<1x1xf32>) outs(%f : tensor<1x4x13x14xf32>) -> tensor<1x4x13x14xf32>
  %s = tensor.extract_slice %p[0, 0, 0, 0] [1, 4, 13, 13] [1, 1, 1, 1] : tensor<1x4x13x14xf32> to tensor<1x4x13x13xf32>
  return %s : tensor<1x4x13x13xf32>
}

// -----

// 1-D convolutions (2-D ones over a unit row between reshapes, as the frontends give a
// Conv1d): the conversions at the reshapes become NCW <-> NWC ones and cancel across the
// ReLU between the convolutions, which runs NWC; the argument and the result are converted
// once each, as NCW <-> NWC.
// CHECK-LABEL: func.func @conv1d_chain
// CHECK: %[[X:.*]] = "graph.layout_convert"(%arg0) {dst_layout = #graph.layout<"NWC">, src_layout = #graph.layout<"NCW">} : (tensor<1x4x10xf32>) -> tensor<1x10x4xf32>
// CHECK: %[[XE:.*]] = tensor.expand_shape %[[X]] {{\[\[}}0], [1, 2], [3]] output_shape [1, 1, 10, 4]
// CHECK: %[[C:.*]] = linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[XE]],
// CHECK: %[[CC:.*]] = tensor.collapse_shape %[[C]] {{\[\[}}0], [1, 2], [3]] : tensor<1x1x8x4xf32> into tensor<1x8x4xf32>
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[CC]] : tensor<1x8x4xf32>) outs(%{{.*}} : tensor<1x8x4xf32>)
// CHECK: %[[RE:.*]] = tensor.expand_shape %[[R]] {{\[\[}}0], [1, 2], [3]] output_shape [1, 1, 8, 4]
// CHECK: %[[C2:.*]] = linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[RE]],
// CHECK: %[[C2C:.*]] = tensor.collapse_shape %[[C2]]
// CHECK: %[[Y:.*]] = "graph.layout_convert"(%[[C2C]]) {dst_layout = #graph.layout<"NCW">, src_layout = #graph.layout<"NWC">}
// CHECK: return %[[Y]] : tensor<1x4x6xf32>

func.func @conv1d_chain(%x: tensor<1x4x10xf32>, %w1: tensor<4x4x1x3xf32>, %w2: tensor<4x4x1x3xf32>) -> tensor<1x4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.expand_shape %x [[0], [1], [2, 3]] output_shape [1, 4, 1, 10] : tensor<1x4x10xf32> into tensor<1x4x1x10xf32>
  %i1 = tensor.empty() : tensor<1x4x1x8xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%i1 : tensor<1x4x1x8xf32>) -> tensor<1x4x1x8xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%e, %w1 : tensor<1x4x1x10xf32>, tensor<4x4x1x3xf32>) outs(%z1 : tensor<1x4x1x8xf32>) -> tensor<1x4x1x8xf32>
  %f = tensor.collapse_shape %c [[0], [1], [2, 3]] : tensor<1x4x1x8xf32> into tensor<1x4x8xf32>
  %ri = tensor.empty() : tensor<1x4x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%f : tensor<1x4x8xf32>) outs(%ri : tensor<1x4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x4x8xf32>
  %e2 = tensor.expand_shape %r [[0], [1], [2, 3]] output_shape [1, 4, 1, 8] : tensor<1x4x8xf32> into tensor<1x4x1x8xf32>
  %i2 = tensor.empty() : tensor<1x4x1x6xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%i2 : tensor<1x4x1x6xf32>) -> tensor<1x4x1x6xf32>
  %c2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%e2, %w2 : tensor<1x4x1x8xf32>, tensor<4x4x1x3xf32>) outs(%z2 : tensor<1x4x1x6xf32>) -> tensor<1x4x1x6xf32>
  %f2 = tensor.collapse_shape %c2 [[0], [1], [2, 3]] : tensor<1x4x1x6xf32> into tensor<1x4x6xf32>
  return %f2 : tensor<1x4x6xf32>
}
