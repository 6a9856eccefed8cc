// tilecraft-pad-matmul-extents: a matmul whose rows have no divisor near the register
// tile's 8 (197) runs on rows padded to a multiple of 24, one whose constant weights have a
// column count that is no multiple of 8 (500) on columns padded to a multiple of 16. The
// slice back to the real extent moves past ops that keep the padded lines apart (a bias
// add) and stops before one that would sum them in (a reduction over the rows). An input B
// (its padding would be a copy per call) and small extents are left as they are.
// Rows are padded only with pad-rows=1 (PAD_ROWS, off by default: the schedule peels the
// partial row tile, docs/performance.md "Transformers at odd token counts").
// RUN: tilecraft-opt %s --tilecraft-pad-matmul-extents="pad-rows=1" --canonicalize | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-pad-matmul-extents --canonicalize | FileCheck %s --check-prefix=PEELED

// PEELED-LABEL: func.func @rows
// PEELED-NOT: tensor.pad
// PEELED: linalg.matmul ins(%arg0, %arg1 : tensor<197x64xf32>, tensor<64x32xf32>)

// CHECK-LABEL: func.func @rows
// CHECK: %[[A:.*]] = tensor.pad %arg0 low[0, 0] high[19, 0]
// CHECK: %[[C:.*]] = linalg.matmul ins(%[[A]], %arg1 : tensor<216x64xf32>, tensor<64x32xf32>) outs(%{{.*}} : tensor<216x32xf32>)
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[C]], %arg2 : tensor<216x32xf32>, tensor<32xf32>) outs(%{{.*}} : tensor<216x32xf32>)
// CHECK: %[[S:.*]] = tensor.extract_slice %[[R]][0, 0] [197, 32] [1, 1] : tensor<216x32xf32> to tensor<197x32xf32>
// CHECK: return %[[S]]
func.func @rows(%a: tensor<197x64xf32>, %b: tensor<64x32xf32>, %bias: tensor<32xf32>) -> tensor<197x32xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<197x32xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<197x32xf32>) -> tensor<197x32xf32>
  %c = linalg.matmul ins(%a, %b : tensor<197x64xf32>, tensor<64x32xf32>) outs(%i : tensor<197x32xf32>) -> tensor<197x32xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%c, %bias : tensor<197x32xf32>, tensor<32xf32>) outs(%e : tensor<197x32xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<197x32xf32>
  return %r : tensor<197x32xf32>

// CHECK-LABEL: func.func @mixed
// CHECK: %[[C:.*]] = linalg.matmul {{.*}} -> tensor<216x32xf32>
// CHECK: %[[S:.*]] = tensor.extract_slice %[[C]][0, 0] [197, 32] [1, 1]
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[S]] : tensor<197x32xf32>)
}
func.func @mixed(%a: tensor<197x64xf32>, %b: tensor<64x32xf32>) -> tensor<32xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<197x32xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<197x32xf32>) -> tensor<197x32xf32>
  %c = linalg.matmul ins(%a, %b : tensor<197x64xf32>, tensor<64x32xf32>) outs(%i : tensor<197x32xf32>) -> tensor<197x32xf32>
  %e1 = tensor.empty() : tensor<32xf32>
  %i1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<32xf32>) -> tensor<32xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%c : tensor<197x32xf32>) outs(%i1 : tensor<32xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = arith.addf %x, %o : f32
    linalg.yield %t : f32
  } -> tensor<32xf32>
  return %s : tensor<32xf32>
}

// CHECK-LABEL: func.func @columns
// CHECK: %[[W:.*]] = tensor.pad %{{.*}} low[0, 0] high[0, 12]
// CHECK: %[[C:.*]] = linalg.matmul ins(%arg0, %[[W]] : tensor<32x64xf32>, tensor<64x512xf32>)
// CHECK: tensor.extract_slice %[[C]][0, 0] [32, 500] [1, 1] : tensor<32x512xf32> to tensor<32x500xf32>
func.func @columns(%a: tensor<32x64xf32>) -> tensor<32x500xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<1.0> : tensor<64x500xf32>
  %e = tensor.empty() : tensor<32x500xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<32x500xf32>) -> tensor<32x500xf32>
  %c = linalg.matmul ins(%a, %w : tensor<32x64xf32>, tensor<64x500xf32>) outs(%i : tensor<32x500xf32>) -> tensor<32x500xf32>
  return %c : tensor<32x500xf32>
}

// CHECK-LABEL: func.func @left
// CHECK-NOT: tensor.pad
// CHECK: linalg.matmul ins(%arg0, %arg1 : tensor<32x64xf32>, tensor<64x500xf32>)
// CHECK: linalg.matmul ins(%arg2, %arg1 : tensor<10x64xf32>, tensor<64x500xf32>)
func.func @left(%a: tensor<32x64xf32>, %b: tensor<64x500xf32>, %c10: tensor<10x64xf32>) -> (tensor<32x500xf32>, tensor<10x500xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x500xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<32x500xf32>) -> tensor<32x500xf32>
  %c = linalg.matmul ins(%a, %b : tensor<32x64xf32>, tensor<64x500xf32>) outs(%i : tensor<32x500xf32>) -> tensor<32x500xf32>
  %e2 = tensor.empty() : tensor<10x500xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<10x500xf32>) -> tensor<10x500xf32>
  %d = linalg.matmul ins(%c10, %b : tensor<10x64xf32>, tensor<64x500xf32>) outs(%i2 : tensor<10x500xf32>) -> tensor<10x500xf32>
  return %c, %d : tensor<32x500xf32>, tensor<10x500xf32>
}
