// tilecraft-lower-layout-converts: graph.layout_convert becomes linalg.transpose, or a
// reshape when only unit dims move (pipelines/graph/layout.py).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-lower-layout-converts | FileCheck %s
// RUN: not tilecraft-opt %s --tilecraft-convert-layout="layout=NCHW16c" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: unknown layout 'NCHW16c' (supported: NHWC

// CHECK-LABEL: func.func @transpose
// CHECK-NOT: graph.layout_convert
// CHECK: %[[T:.*]] = linalg.transpose ins(%arg0 : tensor<1x2x3x4xf32>) outs(%{{.*}} : tensor<1x3x4x2xf32>) permutation = [0, 2, 3, 1]
// CHECK: return %[[T]]
func.func @transpose(%x: tensor<1x2x3x4xf32>) -> tensor<1x3x4x2xf32> {
  %a = "graph.layout_convert"(%x) {src_layout = #graph.layout<"NCHW">, dst_layout = #graph.layout<"NHWC">} : (tensor<1x2x3x4xf32>) -> tensor<1x3x4x2xf32>
  return %a : tensor<1x3x4x2xf32>
}

// -----

// The pooled 1x1x1xC of a ResNet in NCHW order holds the same bytes: a reshape, no copy.
// CHECK-LABEL: func.func @unit_dims
// CHECK-NOT: linalg.transpose
// CHECK: tensor.collapse_shape %arg0
// CHECK: tensor.expand_shape
func.func @unit_dims(%x: tensor<1x1x1x16xf32>) -> tensor<1x16x1x1xf32> {
  %a = "graph.layout_convert"(%x) {src_layout = #graph.layout<"NHWC">, dst_layout = #graph.layout<"NCHW">} : (tensor<1x1x1x16xf32>) -> tensor<1x16x1x1xf32>
  return %a : tensor<1x16x1x1xf32>
}
