// tilecraft-call-destinations, a slice a kernel only reads (a split as views): a call whose
// input is a static slice of a larger tensor, and whose kernel only reads that argument,
// takes the larger tensor; a copy of the kernel, shared by the calls with the same kernel,
// argument and slice, extracts the slice on entry. Bufferized across function boundaries
// (identity layouts at the boundary), the kernel reads a strided view of the larger buffer
// and nothing is copied before the call. A slice only one call reads, and a kernel that
// writes into the argument (its init), are left alone.
// RUN: tilecraft-opt %s --tilecraft-call-destinations | FileCheck %s
// RUN: tilecraft-opt %s --pass-pipeline='builtin.module(tilecraft-call-destinations,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},cse,canonicalize,drop-equivalent-buffer-results)' | FileCheck %s --check-prefix=BUF

#id = affine_map<(n, h, w, c) -> (n, h, w, c)>

func.func private @__tilecraft_kernel_relu(%x: tensor<1x4x4x8xf32>, %out: tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : tensor<1x4x4x8xf32>) outs(%out : tensor<1x4x4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x4x4x8xf32>
  return %r : tensor<1x4x4x8xf32>
}

// The kernel writes its first argument (the generic's init): not a source.
func.func private @__tilecraft_kernel_inplace(%x: tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%x : tensor<1x4x4x8xf32>) {
  ^bb0(%b: f32):
    %m = arith.maximumf %b, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x4x4x8xf32>
  return %r : tensor<1x4x4x8xf32>
}

// CHECK-LABEL: func.func private @__tilecraft_kernel_relu(
// CHECK-LABEL: func.func private @__tilecraft_kernel_relu__from_0(
// CHECK-SAME: %[[BIG:.*]]: tensor<1x4x4x16xf32>, %{{.*}}: tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
// CHECK: %[[SLICE:.*]] = tensor.extract_slice %[[BIG]][0, 0, 0, 8] [1, 4, 4, 8] [1, 1, 1, 1]
// CHECK: linalg.generic {{.*}} ins(%[[SLICE]]

// CHECK-LABEL: func.func @split_halves
// CHECK: call @__tilecraft_kernel_relu__from_0(%arg0, %{{.*}}) : (tensor<1x4x4x16xf32>, tensor<1x4x4x8xf32>)
// CHECK: call @__tilecraft_kernel_relu__from_0(%arg1, %{{.*}}) : (tensor<1x4x4x16xf32>, tensor<1x4x4x8xf32>)
// CHECK: %[[ONCE:.*]] = tensor.extract_slice %arg0[0, 0, 0, 0] [1, 4, 4, 8]
// CHECK: call @__tilecraft_kernel_relu(%[[ONCE]],
// CHECK: %[[W:.*]] = tensor.extract_slice %arg1[0, 0, 0, 0] [1, 4, 4, 8]
// CHECK: call @__tilecraft_kernel_inplace(%[[W]])

// BUF-LABEL: func.func private @__tilecraft_kernel_relu__from_0(
// BUF-SAME: %[[BIG:.*]]: memref<1x4x4x16xf32>, %[[OUT:.*]]: memref<1x4x4x8xf32>) {
// BUF: %[[VIEW:.*]] = memref.subview %[[BIG]][0, 0, 0, 8] [1, 4, 4, 8] [1, 1, 1, 1]
// BUF: linalg.generic {{.*}} ins(%[[VIEW]] {{.*}} outs(%[[OUT]]
// BUF-LABEL: func.func @split_halves
// BUF-NOT: memref.copy
// BUF: call @__tilecraft_kernel_relu__from_0(%arg0,
// BUF-NOT: memref.copy
// BUF: call @__tilecraft_kernel_relu__from_0(%arg1,
// BUF: memref.copy
// BUF: call @__tilecraft_kernel_relu(
func.func @split_halves(%x: tensor<1x4x4x16xf32>, %y: tensor<1x4x4x16xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) {
  %e = tensor.empty() : tensor<1x4x4x8xf32>
  %xs = tensor.extract_slice %x[0, 0, 0, 8] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x16xf32> to tensor<1x4x4x8xf32>
  %a = call @__tilecraft_kernel_relu(%xs, %e) : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %ys = tensor.extract_slice %y[0, 0, 0, 8] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x16xf32> to tensor<1x4x4x8xf32>
  %b = call @__tilecraft_kernel_relu(%ys, %e) : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  // Read by one call only: left as it was.
  %xo = tensor.extract_slice %x[0, 0, 0, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x16xf32> to tensor<1x4x4x8xf32>
  %c = call @__tilecraft_kernel_relu(%xo, %e) : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  // Written by the kernel: left as it was, twice.
  %w1 = tensor.extract_slice %y[0, 0, 0, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x16xf32> to tensor<1x4x4x8xf32>
  %d = call @__tilecraft_kernel_inplace(%w1) : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %w2 = tensor.extract_slice %x[0, 0, 0, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x16xf32> to tensor<1x4x4x8xf32>
  %f = call @__tilecraft_kernel_inplace(%w2) : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %a, %b, %c, %d : tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>
}
