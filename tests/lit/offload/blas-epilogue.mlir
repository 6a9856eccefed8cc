// tilecraft-offload{backends=blas}: the regions the blas backend takes whole (a matmul or 1x1
// convolution from zero, then a per-column bias add, then clamps), and the consumers it leaves
// compiled after the call (a second user, a GELU, a row bias, a bias after the clamp).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-offload="backends=blas num-threads=2" | FileCheck %s

// Matmul + bias + ReLU: one call, the bias passed as a vector, bounds [0, +inf); nothing left.
// CHECK-LABEL: module attributes
// CHECK-SAME: tilecraft.externs = ["tilecraft_blas_matmul_epilogue"]
// CHECK-SAME: tilecraft.offload = {blas = {declined = 0 : i64, "epilogue ops" = 2 : i64, linalg.matmul = 1 : i64}}
// CHECK-LABEL: func.func @matmul_bias_relu
// CHECK-DAG: %[[LOW:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[HIGH:.*]] = arith.constant 0x7F800000 : f32
// CHECK: call @tilecraft_blas_matmul_epilogue(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LOW]], %[[HIGH]], %{{.*}}) {tilecraft.offload = "blas:linalg.matmul", tilecraft.offload_epilogue = "linalg.generic,linalg.generic"}
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.matmul
// CHECK: return
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#row = affine_map<(i, j) -> (i)>
func.func @matmul_bias_relu(%a: tensor<64x32xf32>, %b: tensor<32x48xf32>, %bias: tensor<48xf32>) -> tensor<64x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x48xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x48xf32>) -> tensor<64x48xf32>
  %m = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x48xf32>) outs(%f : tensor<64x48xf32>) -> tensor<64x48xf32>
  %add = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %bias : tensor<64x48xf32>, tensor<48xf32>) outs(%e : tensor<64x48xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
  } -> tensor<64x48xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%add : tensor<64x48xf32>) outs(%e : tensor<64x48xf32>) {
    ^bb0(%x: f32, %o: f32):
      %r = arith.maximumf %x, %zero : f32
      linalg.yield %r : f32
  } -> tensor<64x48xf32>
  return %relu : tensor<64x48xf32>
}

// -----

// A 1x1 convolution + a [C, 1, 1] bias (collapsed to a vector) + ReLU6 written as two clamps.
// CHECK-LABEL: func.func @conv_bias_relu6
// CHECK: tensor.collapse_shape %arg2 {{\[}}[0, 1, 2]] : tensor<32x1x1xf32> into tensor<32xf32>
// CHECK: %[[LOW:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[HIGH:.*]] = arith.constant 6.000000e+00 : f32
// CHECK: call @tilecraft_blas_matmul_epilogue(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LOW]], %[[HIGH]], %{{.*}}) {tilecraft.offload = "blas:linalg.conv_2d_nhwc_hwcf"
// CHECK: tensor.expand_shape {{.*}} : tensor<256x32xf32> into tensor<1x16x16x32xf32>
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @conv_bias_relu6(%x: tensor<1x16x16x64xf32>, %w: tensor<1x1x64x32xf32>, %bias: tensor<32x1x1xf32>) -> tensor<1x16x16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %six = arith.constant 6.0 : f32
  %e = tensor.empty() : tensor<1x16x16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x16x32xf32>) -> tensor<1x16x16x32xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
        ins(%x, %w : tensor<1x16x16x64xf32>, tensor<1x1x64x32xf32>) outs(%f : tensor<1x16x16x32xf32>) -> tensor<1x16x16x32xf32>
  %add = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (c, 0, 0)>,
                                          affine_map<(n, h, w, c) -> (n, h, w, c)>],
                         iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c, %bias : tensor<1x16x16x32xf32>, tensor<32x1x1xf32>) outs(%e : tensor<1x16x16x32xf32>) {
    ^bb0(%v: f32, %b: f32, %o: f32):
      %s = arith.addf %b, %v : f32
      linalg.yield %s : f32
  } -> tensor<1x16x16x32xf32>
  %relu = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>],
                          iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%add : tensor<1x16x16x32xf32>) outs(%e : tensor<1x16x16x32xf32>) {
    ^bb0(%v: f32, %o: f32):
      %r = arith.maximumf %v, %zero : f32
      linalg.yield %r : f32
  } -> tensor<1x16x16x32xf32>
  %relu6 = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>],
                           iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%relu : tensor<1x16x16x32xf32>) outs(%e : tensor<1x16x16x32xf32>) {
    ^bb0(%v: f32, %o: f32):
      %r = arith.minimumf %v, %six : f32
      linalg.yield %r : f32
  } -> tensor<1x16x16x32xf32>
  return %relu6 : tensor<1x16x16x32xf32>
}

// -----

// The region stops at what the shim cannot compute: the bias is taken, the GELU (erf) after
// it stays a compiled kernel reading the call's result.
// CHECK-LABEL: func.func @matmul_bias_gelu
// CHECK: %[[T:.*]] = bufferization.to_tensor
// CHECK: linalg.generic {{.*}} ins(%[[T]] : tensor<64x48xf32>)
// CHECK: math.erf
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#row = affine_map<(i, j) -> (i)>
func.func @matmul_bias_gelu(%a: tensor<64x32xf32>, %b: tensor<32x48xf32>, %bias: tensor<48xf32>) -> tensor<64x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x48xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x48xf32>) -> tensor<64x48xf32>
  %m = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x48xf32>) outs(%f : tensor<64x48xf32>) -> tensor<64x48xf32>
  %add = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %bias : tensor<64x48xf32>, tensor<48xf32>) outs(%e : tensor<64x48xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
  } -> tensor<64x48xf32>
  %gelu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%add : tensor<64x48xf32>) outs(%e : tensor<64x48xf32>) {
    ^bb0(%x: f32, %o: f32):
      %r = math.erf %x : f32
      %g = arith.mulf %x, %r : f32
      linalg.yield %g : f32
  } -> tensor<64x48xf32>
  return %gelu : tensor<64x48xf32>
}

// -----

// Not taken: a result with a second user (the matmul is returned too), a bias along rows, a
// bias after the clamp (the ReLU before it is taken), and an accumulating matmul's ReLU.
// CHECK-LABEL: func.func @not_taken
// CHECK: call @tilecraft_blas_matmul(
// CHECK: linalg.generic
// CHECK: call @tilecraft_blas_matmul(
// CHECK: linalg.generic
// CHECK: call @tilecraft_blas_matmul_epilogue({{.*}}) {tilecraft.offload = "blas:linalg.matmul", tilecraft.offload_epilogue = "linalg.generic"}
// CHECK: linalg.generic
// CHECK: call @tilecraft_blas_matmul(
// CHECK: linalg.add
// CHECK: linalg.generic
// CHECK: return
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#row = affine_map<(i, j) -> (i)>
func.func @not_taken(%a: tensor<64x32xf32>, %b: tensor<32x48xf32>, %bias: tensor<48xf32>, %rows: tensor<64xf32>,
                     %acc: tensor<64x48xf32>)
    -> (tensor<64x48xf32>, tensor<64x48xf32>, tensor<64x48xf32>, tensor<64x48xf32>, tensor<64x48xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x48xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x48xf32>) -> tensor<64x48xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x48xf32>) outs(%f : tensor<64x48xf32>) -> tensor<64x48xf32>
  %shared = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m1, %bias : tensor<64x48xf32>, tensor<48xf32>) outs(%e : tensor<64x48xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
  } -> tensor<64x48xf32>
  %m2 = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x48xf32>) outs(%f : tensor<64x48xf32>) -> tensor<64x48xf32>
  %by_row = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m2, %rows : tensor<64x48xf32>, tensor<64xf32>) outs(%e : tensor<64x48xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
  } -> tensor<64x48xf32>
  %m3 = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x48xf32>) outs(%f : tensor<64x48xf32>) -> tensor<64x48xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m3 : tensor<64x48xf32>) outs(%e : tensor<64x48xf32>) {
    ^bb0(%x: f32, %o: f32):
      %r = arith.maximumf %x, %zero : f32
      linalg.yield %r : f32
  } -> tensor<64x48xf32>
  %late_bias = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%relu, %bias : tensor<64x48xf32>, tensor<48xf32>) outs(%e : tensor<64x48xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
  } -> tensor<64x48xf32>
  %m4 = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x48xf32>) outs(%acc : tensor<64x48xf32>) -> tensor<64x48xf32>
  %acc_relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m4 : tensor<64x48xf32>) outs(%e : tensor<64x48xf32>) {
    ^bb0(%x: f32, %o: f32):
      %r = arith.maximumf %x, %zero : f32
      linalg.yield %r : f32
  } -> tensor<64x48xf32>
  return %m1, %shared, %by_row, %late_bias, %acc_relu
      : tensor<64x48xf32>, tensor<64x48xf32>, tensor<64x48xf32>, tensor<64x48xf32>, tensor<64x48xf32>
}
