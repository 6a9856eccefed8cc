// A convolution's fusion group (conv -> bias -> residual add -> ReLU) under the default
// schedule: inside each task the group's root is tiled by the conv's register tile and the
// epilogue, the conv and its zero fill are fused into that loop (schedule/conv_kernels.py).
// The register tile is 7 pixels x 2 vectors of 16 channels (plan.py conv_register_tile).
// The accumulators start from a zero constant (no fill stored and reloaded), are carried
// through the kh, kw and input-channel loops as vectors, get the bias, the residual and the
// ReLU in registers, and are written once.
// RUN: tilecraft-opt %s --tilecraft-mark-groups --tilecraft-schedule="vector-bits=512 num-threads=2 fuse-groups=1" | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-lower-cpu="num-threads=2 cpu=skylake-avx512" | FileCheck %s --check-prefix=LLVM

// CHECK-LABEL: func.func @block
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<1x7x32xf32>
// CHECK: tensor.pad
// Its filter (3x3x64x64) outweighs the 14x14 image, so the two tasks split the output
// channels (32 each, one register tile's width: no channel loop inside a task).
// CHECK: scf.forall ({{.*}}) in (2)
// CHECK-NOT: tensor.pad
// CHECK: tensor.extract_slice {{.*}} [1, 14, 14, 32]
// CHECK: %[[BIAS:.*]] = vector.broadcast {{.*}} : vector<32xf32> to vector<7x32xf32>
// CHECK: scf.for
// CHECK: scf.for {{.*}} step %c7
// CHECK: %[[ACC:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]]) -> (vector<1x7x32xf32>)
// CHECK: scf.for {{.*}} -> (vector<1x7x32xf32>)
// CHECK: scf.for {{.*}} -> (vector<1x7x32xf32>)
// CHECK: vector.contract {{.*}} into vector<7x32xf32>
// CHECK: %[[TILE:.*]] = vector.extract %[[ACC]][0] : vector<7x32xf32> from vector<1x7x32xf32>
// CHECK-NOT: vector.transfer_write
// CHECK: %[[RES:.*]] = vector.transfer_read %arg3{{.*}} vector<7x32xf32>
// CHECK: %[[B:.*]] = arith.addf %[[TILE]], %[[BIAS]] : vector<7x32xf32>
// CHECK: %[[R:.*]] = arith.addf %[[B]], %[[RES]] : vector<7x32xf32>
// CHECK: %[[Y:.*]] = arith.maximumf %[[R]], %{{.*}} : vector<7x32xf32>
// CHECK: vector.transfer_write %[[Y]]
// CHECK-NOT: linalg.conv_2d
// CHECK-NOT: linalg.generic
// LLVM-LABEL: llvm.func @block
// LLVM-NOT: memrefCopy
// LLVM: llvm.intr.fmuladd{{.*}}vector<32xf32>
func.func @block(%x: tensor<1x14x14x64xf32>, %w: tensor<3x3x64x64xf32>, %b: tensor<64xf32>, %r: tensor<1x14x14x64xf32>) -> tensor<1x14x14x64xf32> {
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x14x14x64xf32> to tensor<1x16x16x64xf32>
  %empty = tensor.empty() : tensor<1x14x14x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x14x14x64xf32>) -> tensor<1x14x14x64xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%padded, %w : tensor<1x16x16x64xf32>, tensor<3x3x64x64xf32>) outs(%init : tensor<1x14x14x64xf32>) -> tensor<1x14x14x64xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(n,i,j,c)->(n,i,j,c)>, affine_map<(n,i,j,c)->(c)>, affine_map<(n,i,j,c)->(n,i,j,c)>, affine_map<(n,i,j,c)->(n,i,j,c)>], iterator_types = ["parallel","parallel","parallel","parallel"]}
      ins(%y, %b, %r : tensor<1x14x14x64xf32>, tensor<64xf32>, tensor<1x14x14x64xf32>) outs(%empty : tensor<1x14x14x64xf32>) {
    ^bb0(%a: f32, %bb: f32, %rr: f32, %out: f32):
      %t = arith.addf %a, %bb : f32
      %t2 = arith.addf %t, %rr : f32
      %m = arith.maximumf %t2, %zero : f32
      linalg.yield %m : f32
  } -> tensor<1x14x14x64xf32>
  return %o : tensor<1x14x14x64xf32>
}
