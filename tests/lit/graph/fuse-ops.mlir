// tilecraft-fuse-ops: TVM FuseOps rules on linalg (pipelines/graph/fusion.py).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-fuse-ops | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// An anchor (matmul) takes its init and its elementwise consumers (bias add, ReLU): one group.
// CHECK-LABEL: func.func @matmul_bias_relu
// CHECK: %[[G:.*]] = "graph.fusion_group"() ({
// CHECK: linalg.fill
// CHECK: linalg.matmul
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: tosa.yield
// CHECK-NEXT: }) {anchor = "linalg.matmul", kind = "matmul", signature = "matmul-{{[0-9a-f]+}}"}
// CHECK-NOT: graph.fusion_group
// CHECK: return %[[G]]
func.func @matmul_bias_relu(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  %e1 = tensor.empty() : tensor<8x32xf32>
  %a = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%m, %b : tensor<8x32xf32>, tensor<32xf32>) outs(%e1 : tensor<8x32xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  %e2 = tensor.empty() : tensor<8x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<8x32xf32>) outs(%e2 : tensor<8x32xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.maximumf %p, %zero : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Negative: a producer with two consumers is not fused into either (no duplicated work):
// the matmul keeps its own group and each consumer gets one.
// CHECK-LABEL: func.func @shared_producer
// CHECK: %[[M:.*]] = "graph.fusion_group"() ({
// CHECK: linalg.matmul
// CHECK-NOT: arith.
// CHECK: }) {anchor = "linalg.matmul", kind = "matmul"
// CHECK: "graph.fusion_group"() ({
// CHECK: linalg.generic {{.*}} ins(%[[M]]
// CHECK: kind = "elementwise"
// CHECK: "graph.fusion_group"() ({
// CHECK: linalg.generic {{.*}} ins(%[[M]]
// CHECK: kind = "elementwise"
func.func @shared_producer(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  %e1 = tensor.empty() : tensor<8x32xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<8x32xf32>) outs(%e1 : tensor<8x32xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.maximumf %p, %zero : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  %e2 = tensor.empty() : tensor<8x32xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<8x32xf32>) outs(%e2 : tensor<8x32xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.negf %p : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  return %a, %n : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Negative: at most one anchor per group: matmul -> matmul stays two groups, even with a
// single use between them. The two compute the same thing: equal signatures (task keys).
// CHECK-LABEL: func.func @two_anchors
// CHECK: anchor = "linalg.matmul", kind = "matmul", signature = "[[SIG:matmul-[0-9a-f]+]]"
// CHECK: anchor = "linalg.matmul", kind = "matmul", signature = "[[SIG]]"
func.func @two_anchors(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f : tensor<8x16xf32>) -> tensor<8x16xf32>
  %n = linalg.matmul ins(%m, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %n : tensor<8x16xf32>
}

// -----

// A tensor.pad (injective) fuses into the convolution that reads it; the conv's ReLU
// consumer joins too: one kernel.
// CHECK-LABEL: func.func @pad_conv_relu
// CHECK: "graph.fusion_group"() ({
// CHECK: tensor.pad
// CHECK: linalg.conv_2d_nchw_fchw
// CHECK: arith.maximumf
// CHECK: anchor = "linalg.conv_2d_nchw_fchw", kind = "conv"
// CHECK-NOT: graph.fusion_group
func.func @pad_conv_relu(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x4x8x8xf32> to tensor<1x4x10x10xf32>
  %e = tensor.empty() : tensor<1x8x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%p, %w : tensor<1x4x10x10xf32>, tensor<8x4x3x3xf32>) outs(%f : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %e1 = tensor.empty() : tensor<1x8x8x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c : tensor<1x8x8x8xf32>) outs(%e1 : tensor<1x8x8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.maximumf %v, %zero : f32
    linalg.yield %s : f32
  } -> tensor<1x8x8x8xf32>
  return %r : tensor<1x8x8x8xf32>
}

// -----

// Negative: an elementwise producer is not fused into a convolution (it would be
// recomputed once per window): exp and conv stay two groups.
// CHECK-LABEL: func.func @elementwise_into_conv
// CHECK: math.exp
// CHECK: kind = "elementwise"
// CHECK: linalg.conv_2d_nchw_fchw
// CHECK: kind = "conv"
func.func @elementwise_into_conv(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<1x4x8x8xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<1x4x8x8xf32>) outs(%e0 : tensor<1x4x8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<1x4x8x8xf32>
  %e = tensor.empty() : tensor<1x8x6x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%ex, %w : tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) outs(%f : tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  return %c : tensor<1x8x6x6xf32>
}

// -----

#in = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Softmax as the ONNX importer emits it: max and sum reductions of the same rows share a
// group (the one exception to "one anchor"), with the exp and the division: one kernel.
// CHECK-LABEL: func.func @softmax
// CHECK: "graph.fusion_group"() ({
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: kind = "reduction"
// CHECK-NOT: graph.fusion_group
func.func @softmax(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4xf32>
  %f0 = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.generic {indexing_maps = [#in, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x16xf32>) outs(%f0 : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %m = arith.maximumf %v, %acc : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#in, #row, #row], iterator_types = ["parallel", "reduction"]} ins(%x, %max : tensor<4x16xf32>, tensor<4xf32>) outs(%f1 : tensor<4xf32>) {
  ^bb0(%v: f32, %m: f32, %acc: f32):
    %d = arith.subf %v, %m : f32
    %x2 = math.exp %d : f32
    %s = arith.addf %x2, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x16xf32>
  %y = linalg.generic {indexing_maps = [#in, #row, #row, #in], iterator_types = ["parallel", "parallel"]} ins(%x, %max, %sum : tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4x16xf32>) {
  ^bb0(%v: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %x2 = math.exp %d : f32
    %q = arith.divf %x2, %s : f32
    linalg.yield %q : f32
  } -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
