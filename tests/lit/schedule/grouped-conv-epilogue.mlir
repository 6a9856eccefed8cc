// A grouped convolution's epilogue (scale, residual add, ReLU), moved into its loop over
// groups by tilecraft-mark-groups (pipelines/graph/grouped_epilogues.py), runs on the
// group convolution's accumulators (schedule/group.py, conv_kernels.py): per register tile
// of 5 output pixels x the group's 16 filters, the 3x3 taps and 16 input channels are
// accumulated in registers from a zero vector (the fill is the accumulators' init), then
// scaled, added to the residual, rectified and stored once; the 14-pixel row's last
// 4-pixel tile is peeled with its own epilogue. No separate pass over the output, no fill.
// RUN: tilecraft-opt %s --tilecraft-mark-groups --tilecraft-schedule="vector-bits=256 num-threads=1 fuse-groups=1" | FileCheck %s

// CHECK-LABEL: func.func @bands
// CHECK: scf.forall
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1
// CHECK: scf.for %{{.*}} = %c0 to %c7 step %c1
// CHECK: scf.for %{{.*}} = %c0 to %c10 step %c5
// CHECK: scf.for {{.*}} -> (vector<1x5x16xf32>)
// CHECK: vector.contract {{.*}} into vector<5x16xf32>
// CHECK: vector.transfer_read {{.*}} vector<5x16xf32>
// CHECK: arith.mulf {{.*}} : vector<5x16xf32>
// CHECK: arith.addf {{.*}} : vector<5x16xf32>
// CHECK: arith.maximumf {{.*}} : vector<5x16xf32>
// CHECK: vector.transfer_write {{.*}} : vector<5x16xf32>
// CHECK: vector.contract {{.*}} into vector<4x16xf32>
// CHECK: arith.maximumf {{.*}} : vector<4x16xf32>
// CHECK: vector.transfer_write {{.*}} : vector<4x16xf32>
// CHECK: scf.forall.in_parallel
// CHECK-NOT: linalg.
// CHECK: return

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#ch = affine_map<(d0, d1, d2, d3) -> (d3)>

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

