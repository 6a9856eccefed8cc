// tilecraft-fold-constants: per-channel affine epilogues into weights, constant
// subgraphs evaluated at compile time (pipelines/graph/constant_folding.py).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-fold-constants --canonicalize | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// y = (x @ W) * s + t with per-column constants: W' = W * s, then one bias add of t.
// W = [[1, 2], [3, 4]], s = [2, 10], t = [1, -1]  ->  W' = [[2, 20], [6, 40]].
// CHECK-LABEL: func.func @matmul_scale_shift
// CHECK-DAG: %[[W:.*]] = arith.constant dense<{{\[}}[2.000000e+00, 2.000000e+01], [6.000000e+00, 4.000000e+01]]> : tensor<2x2xf32>
// CHECK-DAG: %[[T:.*]] = arith.constant dense<[1.000000e+00, -1.000000e+00]> : tensor<2xf32>
// CHECK: %[[M:.*]] = linalg.matmul ins(%arg0, %[[W]] :
// CHECK: linalg.generic {{.*}} ins(%[[M]], %[[T]] :
// CHECK: arith.addf
// CHECK-NOT: arith.mulf
// CHECK: return
func.func @matmul_scale_shift(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %s = arith.constant dense<[2.0, 10.0]> : tensor<2xf32>
  %t = arith.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<3x2xf32>) -> tensor<3x2xf32>
  %m = linalg.matmul ins(%x, %w : tensor<3x2xf32>, tensor<2x2xf32>) outs(%f : tensor<3x2xf32>) -> tensor<3x2xf32>
  %e1 = tensor.empty() : tensor<3x2xf32>
  %y = linalg.generic {indexing_maps = [#id, #col, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%m, %s, %t : tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>) outs(%e1 : tensor<3x2xf32>) {
  ^bb0(%v: f32, %a: f32, %b: f32, %o: f32):
    %p = arith.mulf %v, %a : f32
    %q = arith.addf %p, %b : f32
    linalg.yield %q : f32
  } -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// The transpose of a constant weight is evaluated at compile time.
// CHECK-LABEL: func.func @transposed_weight
// CHECK: %[[W:.*]] = arith.constant dense<{{\[}}[1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NOT: linalg.transpose
// CHECK: linalg.matmul ins(%arg0, %[[W]] :
func.func @transposed_weight(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %e0 = tensor.empty() : tensor<2x2xf32>
  %wt = linalg.transpose ins(%w : tensor<2x2xf32>) outs(%e0 : tensor<2x2xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<3x2xf32>) -> tensor<3x2xf32>
  %m = linalg.matmul ins(%x, %wt : tensor<3x2xf32>, tensor<2x2xf32>) outs(%f : tensor<3x2xf32>) -> tensor<3x2xf32>
  return %m : tensor<3x2xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// Negative: a non-affine epilogue (ReLU) is not folded into the weights, and a weight
// that is a function argument is no constant: the IR stays as it is.
// CHECK-LABEL: func.func @not_foldable
// CHECK: linalg.matmul ins(%arg0, %arg1 :
// CHECK: arith.maximumf
// CHECK: linalg.matmul ins(%arg0, %arg2 :
// CHECK: arith.mulf
func.func @not_foldable(%x: tensor<3x2xf32>, %w: tensor<2x2xf32>, %v: tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %s = arith.constant dense<[2.0, 10.0]> : tensor<2xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<3x2xf32>) -> tensor<3x2xf32>
  %m = linalg.matmul ins(%x, %w : tensor<3x2xf32>, tensor<2x2xf32>) outs(%f : tensor<3x2xf32>) -> tensor<3x2xf32>
  %e1 = tensor.empty() : tensor<3x2xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<3x2xf32>) outs(%e1 : tensor<3x2xf32>) {
  ^bb0(%p: f32, %o: f32):
    %q = arith.maximumf %p, %zero : f32
    linalg.yield %q : f32
  } -> tensor<3x2xf32>
  %n = linalg.matmul ins(%x, %v : tensor<3x2xf32>, tensor<2x2xf32>) outs(%f : tensor<3x2xf32>) -> tensor<3x2xf32>
  %e2 = tensor.empty() : tensor<3x2xf32>
  %y = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%n, %s : tensor<3x2xf32>, tensor<2xf32>) outs(%e2 : tensor<3x2xf32>) {
  ^bb0(%p: f32, %a: f32, %o: f32):
    %q = arith.mulf %p, %a : f32
    linalg.yield %q : f32
  } -> tensor<3x2xf32>
  return %r, %y : tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// Weights stored as dense_resource blobs (how the ONNX importer stores them) are read
// back and passed to the folding JIT: the transpose of [[1, 2], [3, 4]] is folded.
// CHECK-LABEL: func.func @resource_weight
// CHECK: %[[W:.*]] = arith.constant dense<{{\[}}[1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NOT: linalg.transpose
// CHECK: linalg.matmul ins(%arg0, %[[W]] :
func.func @resource_weight(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense_resource<"model/w:0"> : tensor<2x2xf32>
  %e0 = tensor.empty() : tensor<2x2xf32>
  %wt = linalg.transpose ins(%w : tensor<2x2xf32>) outs(%e0 : tensor<2x2xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<3x2xf32>) -> tensor<3x2xf32>
  %m = linalg.matmul ins(%x, %wt : tensor<3x2xf32>, tensor<2x2xf32>) outs(%f : tensor<3x2xf32>) -> tensor<3x2xf32>
  return %m : tensor<3x2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      "model/w:0": "0x040000000000803F000000400000404000008040"
    }
  }
#-}
