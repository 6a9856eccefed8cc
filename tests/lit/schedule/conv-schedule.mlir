// Convolution-class ops in NHWC under the default schedule: vectors along the contiguous
// channels, accumulators carried in registers by the (kh, kw) reduction loops, and a pad
// that lowers to loops, not to the runtime's element-by-element memrefCopy.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-mark-groups --tilecraft-schedule="vector-bits=512 num-threads=2 fuse-groups=1" | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-lower-cpu="num-threads=2 cpu=skylake-avx512" | FileCheck %s --check-prefix=LLVM

// Depthwise 3x3 with its zero pad: the pad stays before the loop (the buffer its source is
// written into, at bufferization: pipelines/tensor/pad_destinations.py), tasks split the output
// rows (14 bands of 2 rows: at least 4 tasks per thread, schedule/op_schedule.py) and read their band of it; a register tile is 7 pixels x one
// 16-lane vector of channels, read once, carried through the kh loop; each kh step reads the
// 9 input pixels its kw taps span once and takes each tap's 7 as a slice (conv_plan.py
// ``depthwise_window_fits``), FMAs with a broadcast filter vector; written once.
// CHECK-LABEL: func.func @depthwise
// CHECK: tensor.pad
// CHECK: scf.forall ({{.*}}) in (14)
// CHECK-NOT: tensor.pad
// CHECK: %[[ACC:.*]] = vector.transfer_read {{.*}} : tensor<1x1x7x16xf32>, vector<1x7x16xf32>
// CHECK: scf.for {{.*}} iter_args({{.*}}%{{.*}} = %[[ACC]]) -> ({{.*}}vector<1x7x16xf32>)
// CHECK-NOT: scf.for
// CHECK: vector.transfer_read {{.*}} vector<1x9x16xf32>
// CHECK-COUNT-3: vector.fma {{.*}} : vector<1x7x16xf32>
// CHECK-NOT: linalg.depthwise_conv
// LLVM-LABEL: llvm.func @depthwise
// LLVM-NOT: memrefCopy
// LLVM: llvm.intr.fmuladd{{.*}}vector<16xf32>
func.func @depthwise(%x: tensor<1x28x28x96xf32>, %w: tensor<3x3x96xf32>) -> tensor<1x28x28x96xf32> {
  %zero = arith.constant 0.0 : f32
  %padded = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x28x28x96xf32> to tensor<1x30x30x96xf32>
  %empty = tensor.empty() : tensor<1x28x28x96xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x28x28x96xf32>) -> tensor<1x28x28x96xf32>
  %y = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%padded, %w : tensor<1x30x30x96xf32>, tensor<3x3x96xf32>) outs(%init : tensor<1x28x28x96xf32>) -> tensor<1x28x28x96xf32>
  return %y : tensor<1x28x28x96xf32>
}

// -----

// Stride 2, 24 channels (no multiple of 16): 8-lane vectors of channels. 42k multiply-adds
// (a few microseconds) run on one thread: no scf.forall, so no async dispatch.
// CHECK-LABEL: func.func @depthwise_stride2
// CHECK-NOT: scf.forall
// CHECK: scf.for {{.*}} -> ({{.*}}vector<1x7x8xf32>)
// CHECK: vector.fma {{.*}} : vector<1x1x8xf32>
// LLVM-LABEL: llvm.func @depthwise_stride2
// LLVM-NOT: memrefCopy
func.func @depthwise_stride2(%x: tensor<1x29x29x24xf32>, %w: tensor<3x3x24xf32>) -> tensor<1x14x14x24xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x14x14x24xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x14x14x24xf32>) -> tensor<1x14x14x24xf32>
  %y = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
       ins(%x, %w : tensor<1x29x29x24xf32>, tensor<3x3x24xf32>) outs(%init : tensor<1x14x14x24xf32>) -> tensor<1x14x14x24xf32>
  return %y : tensor<1x14x14x24xf32>
}

// -----

// Max pooling: channels are a batch dim to linalg, yet they get the vectors (one task per
// channel and scalar lanes before); tasks split the output rows.
// CHECK-LABEL: func.func @max_pool
// CHECK: scf.forall ({{.*}}) in (14)
// CHECK: scf.for {{.*}} -> ({{.*}}vector<1x7x16xf32>)
// CHECK: arith.maximumf {{.*}} : vector<1x1x16xf32>
func.func @max_pool(%x: tensor<1x56x56x64xf32>) -> tensor<1x28x28x64xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %window = tensor.empty() : tensor<2x2xf32>
  %empty = tensor.empty() : tensor<1x28x28x64xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%empty : tensor<1x28x28x64xf32>) -> tensor<1x28x28x64xf32>
  %y = linalg.pooling_nhwc_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
       ins(%x, %window : tensor<1x56x56x64xf32>, tensor<2x2xf32>) outs(%init : tensor<1x28x28x64xf32>) -> tensor<1x28x28x64xf32>
  return %y : tensor<1x28x28x64xf32>
}

// -----

// Global average pooling's sum over an NHWC image (a reduction generic): vectors along the
// channels, accumulated in registers over the rows and columns; tasks split the channels
// (8 tasks of 2 tiles).
// CHECK-LABEL: func.func @global_sum
// CHECK: scf.forall ({{.*}}) in (8)
// CHECK: %[[ACC:.*]] = vector.transfer_read {{.*}} vector<1x64xf32>
// CHECK: scf.for {{.*}} iter_args({{.*}}%{{.*}} = %[[ACC]]) -> ({{.*}}vector<1x64xf32>)
// CHECK: arith.addf {{.*}} : vector<1x64xf32>
#in = affine_map<(n, c, h, w) -> (n, h, w, c)>
#out = affine_map<(n, c, h, w) -> (n, c)>
func.func @global_sum(%x: tensor<1x7x7x1024xf32>) -> tensor<1x1024xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x1024xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x1024xf32>) -> tensor<1x1024xf32>
  %y = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
       ins(%x : tensor<1x7x7x1024xf32>) outs(%init : tensor<1x1024xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<1x1024xf32>
  return %y : tensor<1x1024xf32>
}
