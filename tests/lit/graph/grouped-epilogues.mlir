// tilecraft-mark-groups moves a grouped convolution's elementwise consumer (batch norm,
// residual add, ReLU: one linalg.generic after elementwise fusion) into its loop over
// groups (pipelines/graph/grouped_epilogues.py): per group, on the group's slice right
// after its convolution, whose accumulator is a zero fill of its own; the loop's body is
// then a fusion group of its own (conv anchor, fill, epilogue).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-mark-groups | FileCheck %s

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#ch = affine_map<(d0, d1, d2, d3) -> (d3)>

// Bands of 7 output rows (scf.forall), 4 groups of 16 channels in each.
// CHECK-LABEL: func.func @bands
// CHECK: scf.forall (%[[B:.*]]) in (2)
// CHECK: %[[ROW:.*]] = arith.muli %[[B]], %c7
// CHECK: scf.for %[[G:.*]] = %c0 to %c4 step %c1 iter_args(%[[ACC:.*]] =
// CHECK: %[[CH:.*]] = arith.muli %[[G]], %c16
// CHECK: %[[OUT:.*]] = tensor.extract_slice %[[ACC]][0, 0, 0, %[[CH]]] [1, 7, 14, 16] {{.*}}{tilecraft.group = [[GROUP:[0-9]+]] : i64}
// CHECK: %[[EMPTY:.*]] = tensor.empty() {tilecraft.group = [[GROUP]] : i64} : tensor<1x7x14x16xf32>
// CHECK: %[[ZERO:.*]] = linalg.fill {tilecraft.group = [[GROUP]] : i64} {{.*}} outs(%[[EMPTY]] :
// CHECK: %[[CONV:.*]] = linalg.conv_2d_nhwc_hwcf {{.*}}tilecraft.group = [[GROUP]] : i64, tilecraft.group_anchor{{.*}} outs(%[[ZERO]] :
// CHECK: %[[SCALE:.*]] = tensor.extract_slice %{{.*}}[%[[CH]]] [16] [1] {{.*}}: tensor<64xf32> to tensor<16xf32>
// CHECK: %[[RES:.*]] = tensor.extract_slice %{{.*}}[0, %[[ROW]], 0, %[[CH]]] [1, 7, 14, 16]
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%[[CONV]], %[[SCALE]], %[[RES]] : {{.*}}) outs(%[[OUT]] : tensor<1x7x14x16xf32>) attrs = {tilecraft.group = [[GROUP]] : i64}
// CHECK: arith.maximumf
// CHECK: tensor.insert_slice %[[Y]] into %[[ACC]][0, 0, 0, %[[CH]]]
// CHECK: scf.forall.in_parallel
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @bands(%x: tensor<1x16x16x64xf32>, %w: tensor<4x3x3x16x16xf32>, %scale: tensor<64xf32>,
                 %residual: tensor<1x14x14x64xf32>) -> tensor<1x14x14x64xf32> {
  %zero = arith.constant 0.0 : f32
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c7 = arith.constant 7 : index
  %c16 = arith.constant 16 : index
  %empty = tensor.empty() : tensor<1x14x14x64xf32>
  %y = scf.forall (%b) in (2) shared_outs(%result = %empty) -> (tensor<1x14x14x64xf32>) {
    %row = arith.muli %b, %c7 : index
    %band = tensor.extract_slice %result[0, %row, 0, 0] [1, 7, 14, 64] [1, 1, 1, 1]
        : tensor<1x14x14x64xf32> to tensor<1x7x14x64xf32>
    %groups = scf.for %g = %c0 to %c4 step %c1 iter_args(%acc = %band) -> (tensor<1x7x14x64xf32>) {
      %channel = arith.muli %g, %c16 : index
      %gx = tensor.extract_slice %x[0, %row, 0, %channel] [1, 9, 16, 16] [1, 1, 1, 1]
          : tensor<1x16x16x64xf32> to tensor<1x9x16x16xf32>
      %gw = tensor.extract_slice %w[%g, 0, 0, 0, 0] [1, 3, 3, 16, 16] [1, 1, 1, 1, 1]
          : tensor<4x3x3x16x16xf32> to tensor<3x3x16x16xf32>
      %out = tensor.extract_slice %acc[0, 0, 0, %channel] [1, 7, 14, 16] [1, 1, 1, 1]
          : tensor<1x7x14x64xf32> to tensor<1x7x14x16xf32>
      %init = linalg.fill ins(%zero : f32) outs(%out : tensor<1x7x14x16xf32>) -> tensor<1x7x14x16xf32>
      %gy = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
          ins(%gx, %gw : tensor<1x9x16x16xf32>, tensor<3x3x16x16xf32>) outs(%init : tensor<1x7x14x16xf32>) -> tensor<1x7x14x16xf32>
      %next = tensor.insert_slice %gy into %acc[0, 0, 0, %channel] [1, 7, 14, 16] [1, 1, 1, 1]
          : tensor<1x7x14x16xf32> into tensor<1x7x14x64xf32>
      scf.yield %next : tensor<1x7x14x64xf32>
    }
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %groups into %result[0, %row, 0, 0] [1, 7, 14, 64] [1, 1, 1, 1]
          : tensor<1x7x14x64xf32> into tensor<1x14x14x64xf32>
    }
  }
  %e2 = tensor.empty() : tensor<1x14x14x64xf32>
  %r = linalg.generic {indexing_maps = [#id, #ch, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y, %scale, %residual : tensor<1x14x14x64xf32>, tensor<64xf32>, tensor<1x14x14x64xf32>) outs(%e2 : tensor<1x14x14x64xf32>) {
  ^bb0(%v: f32, %s: f32, %a: f32, %o: f32):
    %m = arith.mulf %v, %s : f32
    %p = arith.addf %m, %a : f32
    %q = arith.maximumf %p, %zero : f32
    linalg.yield %q : f32
  } -> tensor<1x14x14x64xf32>
  return %r : tensor<1x14x14x64xf32>
}

// -----

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// Negative: the loop's result is read twice (the epilogue and the return), so the
// epilogue stays after the loop and the loop's ops stay untagged.
// CHECK-LABEL: func.func @shared_result
// CHECK: scf.for
// CHECK-NOT: tilecraft.group
// CHECK: scf.yield
// CHECK: linalg.generic
func.func @shared_result(%x: tensor<1x10x10x16xf32>, %w: tensor<2x3x3x8x8xf32>) -> (tensor<1x8x8x16xf32>, tensor<1x8x8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %empty = tensor.empty() : tensor<1x8x8x16xf32>
  %y = scf.for %g = %c0 to %c2 step %c1 iter_args(%acc = %empty) -> (tensor<1x8x8x16xf32>) {
    %channel = arith.muli %g, %c8 : index
    %gx = tensor.extract_slice %x[0, 0, 0, %channel] [1, 10, 10, 8] [1, 1, 1, 1] : tensor<1x10x10x16xf32> to tensor<1x10x10x8xf32>
    %gw = tensor.extract_slice %w[%g, 0, 0, 0, 0] [1, 3, 3, 8, 8] [1, 1, 1, 1, 1] : tensor<2x3x3x8x8xf32> to tensor<3x3x8x8xf32>
    %out = tensor.extract_slice %acc[0, 0, 0, %channel] [1, 8, 8, 8] [1, 1, 1, 1] : tensor<1x8x8x16xf32> to tensor<1x8x8x8xf32>
    %init = linalg.fill ins(%zero : f32) outs(%out : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
    %gy = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
        ins(%gx, %gw : tensor<1x10x10x8xf32>, tensor<3x3x8x8xf32>) outs(%init : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
    %next = tensor.insert_slice %gy into %acc[0, 0, 0, %channel] [1, 8, 8, 8] [1, 1, 1, 1] : tensor<1x8x8x8xf32> into tensor<1x8x8x16xf32>
    scf.yield %next : tensor<1x8x8x16xf32>
  }
  %e2 = tensor.empty() : tensor<1x8x8x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y : tensor<1x8x8x16xf32>) outs(%e2 : tensor<1x8x8x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %q = arith.maximumf %v, %zero : f32
    linalg.yield %q : f32
  } -> tensor<1x8x8x16xf32>
  return %r, %y : tensor<1x8x8x16xf32>, tensor<1x8x8x16xf32>
}
