// tilecraft-offload{backends=blas}: which linalg ops become cblas_sgemm calls, which stay
// compiled (too small, dynamic, f64, a 3x3 or strided convolution), and that a bias in the
// accumulator stays a compiled add after the call.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-offload="backends=blas num-threads=2" | FileCheck %s

// CHECK-LABEL: module attributes
// CHECK-SAME: tilecraft.externs = ["tilecraft_blas_matmul"]
// CHECK-SAME: tilecraft.offload = {blas = {declined = 0 : i64, linalg.matmul = 1 : i64}}
// CHECK: func.func private @tilecraft_blas_matmul(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, i32, i32, i32, memref<?x?xf32, strided<[?, ?], offset: ?>>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @matmul
// CHECK-NOT: linalg.fill
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<64x48xf32>
// CHECK: call @tilecraft_blas_matmul({{.*}}) {tilecraft.offload = "blas:linalg.matmul"}
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK-NOT: linalg.matmul
// CHECK: return %[[T]]
func.func @matmul(%a: tensor<64x32xf32>, %b: tensor<32x48xf32>) -> tensor<64x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x48xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x48xf32>) -> tensor<64x48xf32>
  %m = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x48xf32>) outs(%f : tensor<64x48xf32>) -> tensor<64x48xf32>
  return %m : tensor<64x48xf32>
}

// -----

// A transposed B (through the indexing maps) is passed as is, with trans_b = 1; a non-zero
// accumulator becomes an add after the call.
// CHECK-LABEL: func.func @transposed_b_with_bias
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK: call @tilecraft_blas_matmul(%{{.*}}, %{{.*}}, %[[ZERO]], %[[ONE]], %{{.*}}, %{{.*}}) {tilecraft.offload = "blas:linalg.matmul"}
// CHECK: %[[T:.*]] = bufferization.to_tensor
// CHECK: linalg.add ins(%[[T]], %arg2 : tensor<64x48xf32>, tensor<64x48xf32>)
func.func @transposed_b_with_bias(%a: tensor<64x32xf32>, %b: tensor<48x32xf32>, %bias: tensor<64x48xf32>) -> tensor<64x48xf32> {
  %m = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
       ins(%a, %b : tensor<64x32xf32>, tensor<48x32xf32>) outs(%bias : tensor<64x48xf32>) -> tensor<64x48xf32>
  return %m : tensor<64x48xf32>
}

// -----

// CHECK-LABEL: func.func @batch_matmul
// CHECK: call @tilecraft_blas_batch_matmul({{.*}}) {tilecraft.offload = "blas:linalg.batch_matmul"}
// CHECK-NOT: linalg.batch_matmul
func.func @batch_matmul(%a: tensor<4x32x32xf32>, %b: tensor<4x32x32xf32>) -> tensor<4x32x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x32x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x32x32xf32>) -> tensor<4x32x32xf32>
  %m = linalg.batch_matmul ins(%a, %b : tensor<4x32x32xf32>, tensor<4x32x32xf32>) outs(%f : tensor<4x32x32xf32>) -> tensor<4x32x32xf32>
  return %m : tensor<4x32x32xf32>
}

// -----

// A 1x1 stride-1 NHWC convolution is a matmul on collapsed views; a 3x3 one stays.
// CHECK-LABEL: func.func @convs
// CHECK: tensor.collapse_shape %arg0 {{\[}}[0, 1, 2], [3]] : tensor<1x16x16x64xf32> into tensor<256x64xf32>
// CHECK: tensor.collapse_shape %arg1 {{\[}}[0, 1, 2], [3]] : tensor<1x1x64x32xf32> into tensor<64x32xf32>
// CHECK: call @tilecraft_blas_matmul({{.*}}) {tilecraft.offload = "blas:linalg.conv_2d_nhwc_hwcf"}
// CHECK: tensor.expand_shape {{.*}} : tensor<256x32xf32> into tensor<1x16x16x32xf32>
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%{{.*}}, %arg2 : tensor<1x16x16x32xf32>, tensor<3x3x32x32xf32>)
func.func @convs(%x: tensor<1x16x16x64xf32>, %w1: tensor<1x1x64x32xf32>, %w3: tensor<3x3x32x32xf32>) -> tensor<1x14x14x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<1x16x16x32xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x16x16x32xf32>) -> tensor<1x16x16x32xf32>
  %c1 = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
        ins(%x, %w1 : tensor<1x16x16x64xf32>, tensor<1x1x64x32xf32>) outs(%f1 : tensor<1x16x16x32xf32>) -> tensor<1x16x16x32xf32>
  %e3 = tensor.empty() : tensor<1x14x14x32xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<1x14x14x32xf32>) -> tensor<1x14x14x32xf32>
  %c3 = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
        ins(%c1, %w3 : tensor<1x16x16x32xf32>, tensor<3x3x32x32xf32>) outs(%f3 : tensor<1x14x14x32xf32>) -> tensor<1x14x14x32xf32>
  return %c3 : tensor<1x14x14x32xf32>
}

// -----

// Not eligible: below 32^3 multiply-accumulates, dynamic shapes, f64.
// CHECK-LABEL: module attributes
// CHECK-SAME: tilecraft.offload = {blas = {declined = 3 : i64}}
// CHECK-NOT: call
// CHECK-COUNT-3: linalg.matmul
func.func @declined(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>, %c: tensor<8x8xf32>,
                    %d: tensor<?x64xf32>, %e: tensor<64x64xf32>, %f: tensor<?x64xf32>,
                    %g: tensor<64x64xf64>, %h: tensor<64x64xf64>, %i: tensor<64x64xf64>)
    -> (tensor<8x8xf32>, tensor<?x64xf32>, tensor<64x64xf64>) {
  %0 = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%c : tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = linalg.matmul ins(%d, %e : tensor<?x64xf32>, tensor<64x64xf32>) outs(%f : tensor<?x64xf32>) -> tensor<?x64xf32>
  %2 = linalg.matmul ins(%g, %h : tensor<64x64xf64>, tensor<64x64xf64>) outs(%i : tensor<64x64xf64>) -> tensor<64x64xf64>
  return %0, %1, %2 : tensor<8x8xf32>, tensor<?x64xf32>, tensor<64x64xf64>
}
