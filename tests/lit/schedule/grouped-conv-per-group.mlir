// A grouped convolution as ir/conv.py's _grouped_per_group writes it: a loop over the
// groups, each group's channel slice of the NHWC input convolved by its packed filter
// (G, KH, KW, Cg, Fg) into its slice of the result. The group's named NHWC convolution
// takes the plain convolutions' kernel (schedule/conv_plan.py): on AVX2 a register tile of
// 5 output pixels x the group's 16 filters (two 8-lane vectors; the 14-pixel row is two
// whole tiles and a peeled 4-pixel one) whose accumulators stay in registers across all
// 3x3 taps and the group's input channels, read once and written once.
// RUN: tilecraft-opt %s --tilecraft-mark-groups --tilecraft-schedule="vector-bits=256 num-threads=1 fuse-groups=1" | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-lower-cpu="num-threads=1" | FileCheck %s --check-prefix=LLVM

// CHECK-LABEL: func.func @grouped
// CHECK: scf.for %[[G:.*]] = %c0 to %c4
// CHECK: scf.for {{.*}} to %c10 step %c5
// CHECK: %[[ACC:.*]] = vector.transfer_read {{.*}} vector<1x5x16xf32>
// CHECK: scf.for {{.*}} to %c3 {{.*}} %{{.*}} = %[[ACC]]) -> ({{.*}}vector<1x5x16xf32>)
// CHECK: scf.for {{.*}} to %c3 {{.*}} -> ({{.*}}vector<1x5x16xf32>)
// CHECK: scf.for {{.*}} to %c16 step %c1 {{.*}} -> ({{.*}}vector<1x5x16xf32>)
// CHECK: vector.transfer_read {{.*}} vector<1x5x1xf32>
// CHECK: vector.transfer_read {{.*}} vector<1x1x16xf32>
// CHECK: vector.contract {{.*}} into vector<1x5x16xf32>
// CHECK: vector.transfer_write {{.*}} vector<1x5x16xf32>
// CHECK: vector.transfer_read {{.*}} vector<1x4x16xf32>
// CHECK: vector.contract {{.*}} into vector<1x4x16xf32>
// CHECK-NOT: linalg.conv
// LLVM-LABEL: llvm.func @grouped
// LLVM: llvm.intr.fmuladd{{.*}}vector<16xf32>
func.func @grouped(%x: tensor<1x16x16x64xf32>, %w: tensor<4x3x3x16x16xf32>) -> tensor<1x14x14x64xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %empty = tensor.empty() : tensor<1x14x14x64xf32>
  %y = scf.for %g = %c0 to %c4 step %c1 iter_args(%acc = %empty) -> (tensor<1x14x14x64xf32>) {
    %channel = arith.muli %g, %c16 : index
    %gx = tensor.extract_slice %x[0, 0, 0, %channel] [1, 16, 16, 16] [1, 1, 1, 1]
        : tensor<1x16x16x64xf32> to tensor<1x16x16x16xf32>
    %gw = tensor.extract_slice %w[%g, 0, 0, 0, 0] [1, 3, 3, 16, 16] [1, 1, 1, 1, 1]
        : tensor<4x3x3x16x16xf32> to tensor<3x3x16x16xf32>
    %out = tensor.extract_slice %acc[0, 0, 0, %channel] [1, 14, 14, 16] [1, 1, 1, 1]
        : tensor<1x14x14x64xf32> to tensor<1x14x14x16xf32>
    %init = linalg.fill ins(%zero : f32) outs(%out : tensor<1x14x14x16xf32>) -> tensor<1x14x14x16xf32>
    %gy = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
        ins(%gx, %gw : tensor<1x16x16x16xf32>, tensor<3x3x16x16xf32>) outs(%init : tensor<1x14x14x16xf32>) -> tensor<1x14x14x16xf32>
    %next = tensor.insert_slice %gy into %acc[0, 0, 0, %channel] [1, 14, 14, 16] [1, 1, 1, 1]
        : tensor<1x14x14x16xf32> into tensor<1x14x14x64xf32>
    scf.yield %next : tensor<1x14x14x64xf32>
  }
  return %y : tensor<1x14x14x64xf32>
}
