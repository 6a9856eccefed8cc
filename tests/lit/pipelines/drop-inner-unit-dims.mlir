// The unit dims a generic's result ends with are dropped from the op (reshape folding in
// linalg-fuse-elementwise-ops leaves them innermost: PyTorch's adaptive_avg_pool2d(1) made
// SqueezeNet's classifier [1, 13, 13, 1000, 1, 1]); leading and middle unit dims, dynamic
// shapes and bodies that read linalg.index are left as they are.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-drop-inner-unit-dims --canonicalize | FileCheck %s

#x = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d6)>
#w = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d6, d3, d4, d5)>
#mm_out = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3, d4, d5)>
#id6 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>
#pool_in = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d4, d5, d1, d2, d3)>
#pool_out = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
// The 1x1 convolution as a matmul of the pixels, the ReLU and the pooling sum, as the
// PyTorch route's SqueezeNet reached the schedule: all three carry the two unit dims.
// CHECK-LABEL: func.func @classifier
// CHECK-SAME: (%[[X:.*]]: tensor<1x13x13x512xf32>, %[[W:.*]]: tensor<512x1000x1x1xf32>)
// CHECK: %[[W2:.*]] = tensor.collapse_shape %[[W]] {{\[}}[0], [1, 2, 3]] : tensor<512x1000x1x1xf32> into tensor<512x1000xf32>
// CHECK: %[[MM:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%[[X]], %[[W2]] : tensor<1x13x13x512xf32>, tensor<512x1000xf32>)
// CHECK-SAME: outs(%{{.*}} : tensor<1x13x13x1000xf32>)
// CHECK: %[[RELU:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK-SAME: ins(%[[MM]] : tensor<1x13x13x1000xf32>)
// CHECK: %[[POOL:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction", "reduction"]
// CHECK-SAME: ins(%[[RELU]] : tensor<1x13x13x1000xf32>)
// CHECK-SAME: outs(%{{.*}} : tensor<1x1000xf32>)
// CHECK-NOT: x1x1xf32>
// CHECK: return %[[POOL]] : tensor<1x1000xf32>
func.func @classifier(%x: tensor<1x13x13x512xf32>, %w: tensor<512x1000x1x1xf32>) -> tensor<1x1000xf32> {
  %zero = arith.constant 0.0 : f32
  %e6 = tensor.empty() : tensor<1x13x13x1000x1x1xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e6 : tensor<1x13x13x1000x1x1xf32>) -> tensor<1x13x13x1000x1x1xf32>
  %mm = linalg.generic {indexing_maps = [#x, #w, #mm_out],
                        iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<1x13x13x512xf32>, tensor<512x1000x1x1xf32>) outs(%acc : tensor<1x13x13x1000x1x1xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x13x13x1000x1x1xf32>
  %relu = linalg.generic {indexing_maps = [#id6, #id6],
                          iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%mm : tensor<1x13x13x1000x1x1xf32>) outs(%e6 : tensor<1x13x13x1000x1x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<1x13x13x1000x1x1xf32>
  %e4 = tensor.empty() : tensor<1x1000x1x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e4 : tensor<1x1000x1x1xf32>) -> tensor<1x1000x1x1xf32>
  %pool = linalg.generic {indexing_maps = [#pool_in, #pool_out],
                          iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%relu : tensor<1x13x13x1000x1x1xf32>) outs(%init : tensor<1x1000x1x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<1x1000x1x1xf32>
  %flat = tensor.collapse_shape %pool [[0], [1, 2, 3]] : tensor<1x1000x1x1xf32> into tensor<1x1000xf32>
  return %flat : tensor<1x1000xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// Leading unit dims (a batch of one) and a middle one (sequence-first tokens) stay.
// CHECK-LABEL: func.func @leading_and_middle_units
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}} : tensor<1x1x8xf32>)
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}} : tensor<197x1x768xf32>)
func.func @leading_and_middle_units(%a: tensor<1x1x8xf32>, %b: tensor<197x1x768xf32>)
    -> (tensor<1x1x8xf32>, tensor<197x1x768xf32>) {
  %ea = tensor.empty() : tensor<1x1x8xf32>
  %ra = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a : tensor<1x1x8xf32>) outs(%ea : tensor<1x1x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<1x1x8xf32>
  %eb = tensor.empty() : tensor<197x1x768xf32>
  %rb = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%b : tensor<197x1x768xf32>) outs(%eb : tensor<197x1x768xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<197x1x768xf32>
  return %ra, %rb : tensor<1x1x8xf32>, tensor<197x1x768xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// Dynamic shapes, and a body that reads its loops' positions, are left alone.
// CHECK-LABEL: func.func @dynamic_and_indexed
// CHECK: linalg.generic
// CHECK-SAME: outs(%{{.*}} : tensor<?x4x1xf32>)
// CHECK: linalg.generic
// CHECK-SAME: outs(%{{.*}} : tensor<2x4x1xf32>)
// CHECK: linalg.index 1
func.func @dynamic_and_indexed(%a: tensor<?x4x1xf32>, %b: tensor<2x4x1xf32>) -> (tensor<?x4x1xf32>, tensor<2x4x1xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x4x1xf32>
  %ea = tensor.empty(%n) : tensor<?x4x1xf32>
  %ra = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a : tensor<?x4x1xf32>) outs(%ea : tensor<?x4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.negf %v : f32
    linalg.yield %m : f32
  } -> tensor<?x4x1xf32>
  %eb = tensor.empty() : tensor<2x4x1xf32>
  %rb = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%b : tensor<2x4x1xf32>) outs(%eb : tensor<2x4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %i = linalg.index 1 : index
    %k = arith.index_cast %i : index to i32
    %f = arith.sitofp %k : i32 to f32
    %s = arith.addf %v, %f : f32
    linalg.yield %s : f32
  } -> tensor<2x4x1xf32>
  return %ra, %rb : tensor<?x4x1xf32>, tensor<2x4x1xf32>
}
