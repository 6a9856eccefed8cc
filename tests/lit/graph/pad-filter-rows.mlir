// tilecraft-pad-filter-rows: an NHWC convolution whose constant filter rows (output channels)
// are a multiple of 1 KB long reads its filter from a copy with 16 more channels per row, as
// a slice that the constant folder keeps a view (tilecraft.strided_view); after the folder,
// the pad is one constant and the slice stays. Rows of 64 channels (256 bytes) and filters
// that are arguments are left alone.
// RUN: tilecraft-opt %s --tilecraft-pad-filter-rows | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-pad-filter-rows --tilecraft-fold-constants --canonicalize | FileCheck %s --check-prefix=FOLD
// RUN: tilecraft-opt %s --tilecraft-pad-filter-rows --tilecraft-lower-cpu="num-threads=1" | FileCheck %s --check-prefix=LLVM

// CHECK-LABEL: func.func @f
// CHECK: %[[PAD:.*]] = tensor.pad %{{.*}} low[0, 0, 0, 0] high[0, 0, 0, 16]
// CHECK: tensor<3x3x8x256xf32> to tensor<3x3x8x272xf32>
// CHECK: %[[VIEW:.*]] = tensor.extract_slice %[[PAD]][0, 0, 0, 0] [3, 3, 8, 256] [1, 1, 1, 1] {tilecraft.strided_view}
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{.*}}, %[[VIEW]] : tensor<1x9x9x8xf32>, tensor<3x3x8x256xf32>)
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{.*}}, %arg1 : tensor<1x9x9x8xf32>, tensor<3x3x8x256xf32>)
// CHECK-NOT: tensor.pad
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x9x9x8xf32>, tensor<3x3x8x64xf32>)

// FOLD-LABEL: func.func @f
// FOLD-NOT: tensor.pad
// FOLD: %[[VIEW:.*]] = tensor.extract_slice %{{.*}}[0, 0, 0, 0] [3, 3, 8, 256] [1, 1, 1, 1] {tilecraft.strided_view} : tensor<3x3x8x272xf32> to tensor<3x3x8x256xf32>
// FOLD: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{.*}}, %[[VIEW]]

// The filter is read through a strided view of the padded global: rows 272 floats apart.
// LLVM-LABEL: llvm.func @f
// LLVM: llvm.mlir.constant(272 : index)
func.func @f(%x: tensor<1x9x9x8xf32>, %b: tensor<3x3x8x256xf32>) -> (tensor<1x7x7x256xf32>, tensor<1x7x7x256xf32>, tensor<1x7x7x64xf32>) {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<3x3x8x256xf32>
  %w64 = arith.constant dense<0.5> : tensor<3x3x8x64xf32>
  %e = tensor.empty() : tensor<1x7x7x256xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x7x7x256xf32>) -> tensor<1x7x7x256xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<1x9x9x8xf32>, tensor<3x3x8x256xf32>) outs(%i : tensor<1x7x7x256xf32>) -> tensor<1x7x7x256xf32>
  %d = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %b : tensor<1x9x9x8xf32>, tensor<3x3x8x256xf32>) outs(%i : tensor<1x7x7x256xf32>) -> tensor<1x7x7x256xf32>
  %e64 = tensor.empty() : tensor<1x7x7x64xf32>
  %i64 = linalg.fill ins(%z : f32) outs(%e64 : tensor<1x7x7x64xf32>) -> tensor<1x7x7x64xf32>
  %g = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w64 : tensor<1x9x9x8xf32>, tensor<3x3x8x64xf32>) outs(%i64 : tensor<1x7x7x64xf32>) -> tensor<1x7x7x64xf32>
  return %c, %d, %g : tensor<1x7x7x256xf32>, tensor<1x7x7x256xf32>, tensor<1x7x7x64xf32>
}
