// One filter tap of a grouped convolution as ir/conv.py's _grouped_by_taps
// writes it: a batch matmul over the groups (loops g, n, oh, ow, f | c) reading a strided
// NHWGC view of the input. The contraction planner gives it one task per group and a
// register tile of 7 output pixels x one 16-lane vector of the group's filters, carried
// through the group's input channels as FMAs.
// RUN: tilecraft-opt %s --tilecraft-mark-groups --tilecraft-schedule="vector-bits=512 num-threads=2 fuse-groups=1" | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-lower-cpu="num-threads=2" | FileCheck %s --check-prefix=LLVM

// CHECK-LABEL: func.func @grouped_tap
// CHECK: scf.forall ({{.*}}) in (16)
// CHECK: scf.for {{.*}} step %c7
// CHECK: %[[ACC:.*]] = vector.transfer_read {{.*}} vector<1x1x7x1x16xf32>
// CHECK: scf.for {{.*}} to %c16 step %c1 iter_args({{.*}}, %{{.*}} = %[[ACC]])
// CHECK: vector.transfer_read {{.*}} vector<1x1x7x1x1xf32>
// CHECK: vector.transfer_read {{.*}} vector<1x1x16xf32>
// CHECK: vector.contract {{.*}} into vector<1x1x7x1x16xf32>
// CHECK-NOT: linalg.generic
// LLVM-LABEL: llvm.func @grouped_tap
// LLVM: llvm.intr.fmuladd{{.*}}vector<16xf32>
#x = affine_map<(g, n, oh, ow, f, c) -> (n, oh, ow, g, c)>
#w = affine_map<(g, n, oh, ow, f, c) -> (g, c, f)>
#y = affine_map<(g, n, oh, ow, f, c) -> (n, oh, ow, g, f)>
func.func @grouped_tap(%x: tensor<1x16x16x16x16xf32>, %w: tensor<16x16x16xf32>) -> tensor<1x14x14x16x16xf32> {
  %zero = arith.constant 0.0 : f32
  %view = tensor.extract_slice %x[0, 1, 1, 0, 0] [1, 14, 14, 16, 16] [1, 1, 1, 1, 1]
      : tensor<1x16x16x16x16xf32> to tensor<1x14x14x16x16xf32>
  %empty = tensor.empty() : tensor<1x14x14x16x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x14x14x16x16xf32>) -> tensor<1x14x14x16x16xf32>
  %y = linalg.generic {indexing_maps = [#x, #w, #y],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%view, %w : tensor<1x14x14x16x16xf32>, tensor<16x16x16xf32>) outs(%init : tensor<1x14x14x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x14x14x16x16xf32>
  return %y : tensor<1x14x14x16x16xf32>
}
