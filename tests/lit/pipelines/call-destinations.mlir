// tilecraft-call-destinations: a kernel call (kernels kept as functions, tilecraft-schedule's
// keep-kernels) whose destination argument is a static slice of a larger tensor, inserted
// back at the same place, takes the larger tensor; a copy of the kernel extracts and inserts
// the slice. Bufferized across function boundaries, the kernel then writes in place into the
// padded buffer, through a call with memref arguments, with no copy in or out. Two calls with
// the same kernel and slice share the copy; a slice only one call writes is inlined instead;
// a call whose result is read elsewhere too is left alone.
// RUN: tilecraft-opt %s --tilecraft-call-destinations | FileCheck %s
// RUN: tilecraft-opt %s --pass-pipeline='builtin.module(tilecraft-call-destinations,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},cse,canonicalize,drop-equivalent-buffer-results)' | FileCheck %s --check-prefix=BUF

#id = affine_map<(n, h, w, c) -> (n, h, w, c)>

func.func private @relu(%x: tensor<1x4x4x8xf32>, %out: tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : tensor<1x4x4x8xf32>) outs(%out : tensor<1x4x4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x4x4x8xf32>
  return %r : tensor<1x4x4x8xf32>
}

// CHECK-LABEL: func.func private @relu(
// CHECK-SAME: tensor<1x4x4x8xf32>, %{{.*}}: tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
// CHECK-LABEL: func.func private @relu__into_0(
// CHECK-SAME: %[[X:.*]]: tensor<1x4x4x8xf32>, %[[BIG:.*]]: tensor<1x6x6x8xf32>) -> tensor<1x6x6x8xf32>
// CHECK: %[[SLICE:.*]] = tensor.extract_slice %[[BIG]][0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1]
// CHECK: %[[R:.*]] = linalg.generic {{.*}} outs(%[[SLICE]]
// CHECK: %[[IN:.*]] = tensor.insert_slice %[[R]] into %[[BIG]][0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1]
// CHECK: return %[[IN]]

// CHECK-LABEL: func.func @padded_twice
// CHECK: %[[D:.*]] = linalg.fill
// CHECK-NOT: tensor.extract_slice
// CHECK: %[[P:.*]] = call @relu__into_0(%arg0, %[[D]]) : (tensor<1x4x4x8xf32>, tensor<1x6x6x8xf32>) -> tensor<1x6x6x8xf32>
// CHECK: %[[E:.*]] = linalg.fill
// CHECK: %[[Q:.*]] = call @relu__into_0(%arg1, %[[E]])
// CHECK-NOT: tensor.insert_slice
// CHECK: return %[[P]], %[[Q]]

// BUF-LABEL: func.func private @relu__into_0(
// BUF-SAME: memref<1x4x4x8xf32>, %[[BIG:.*]]: memref<1x6x6x8xf32>) {
// BUF: %[[VIEW:.*]] = memref.subview %[[BIG]][0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1]
// BUF: linalg.generic {{.*}} outs(%[[VIEW]]
// BUF-NOT: memref.copy
// BUF: return
// BUF-LABEL: func.func @padded_twice
// BUF: %[[A:.*]] = memref.alloc() {{.*}} : memref<1x6x6x8xf32>
// BUF: call @relu__into_0(%{{.*}}, %[[A]]) : (memref<1x4x4x8xf32>, memref<1x6x6x8xf32>) -> ()
// BUF-NOT: memref.copy
// BUF: call @relu__into_0(
// BUF-NOT: memref.copy
// BUF: return
func.func @padded_twice(%x: tensor<1x4x4x8xf32>, %y: tensor<1x4x4x8xf32>) -> (tensor<1x6x6x8xf32>, tensor<1x6x6x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x6x6x8xf32>
  %d = linalg.fill ins(%zero : f32) outs(%e : tensor<1x6x6x8xf32>) -> tensor<1x6x6x8xf32>
  %s = tensor.extract_slice %d[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x6x6x8xf32> to tensor<1x4x4x8xf32>
  %r = call @relu(%x, %s) : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %p = tensor.insert_slice %r into %d[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> into tensor<1x6x6x8xf32>
  %e2 = tensor.empty() : tensor<1x6x6x8xf32>
  %d2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x6x6x8xf32>) -> tensor<1x6x6x8xf32>
  %s2 = tensor.extract_slice %d2[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x6x6x8xf32> to tensor<1x4x4x8xf32>
  %r2 = call @relu(%y, %s2) : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %q = tensor.insert_slice %r2 into %d2[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> into tensor<1x6x6x8xf32>
  return %p, %q : tensor<1x6x6x8xf32>, tensor<1x6x6x8xf32>
}

// CHECK-LABEL: func.func @result_read_twice
// CHECK: %[[S:.*]] = tensor.extract_slice
// CHECK: call @relu(%arg0, %[[S]])
// CHECK: tensor.insert_slice
func.func @result_read_twice(%x: tensor<1x4x4x8xf32>) -> (tensor<1x6x6x8xf32>, tensor<1x4x4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x6x6x8xf32>
  %d = linalg.fill ins(%zero : f32) outs(%e : tensor<1x6x6x8xf32>) -> tensor<1x6x6x8xf32>
  %s = tensor.extract_slice %d[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x6x6x8xf32> to tensor<1x4x4x8xf32>
  %r = call @relu(%x, %s) : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %p = tensor.insert_slice %r into %d[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> into tensor<1x6x6x8xf32>
  return %p, %r : tensor<1x6x6x8xf32>, tensor<1x4x4x8xf32>
}

// CHECK-LABEL: func.func @written_once
// CHECK-NOT: call
// CHECK: %[[S:.*]] = tensor.extract_slice %{{.*}}[0, 0, 0, 0] [1, 4, 4, 8]
// CHECK: %[[R:.*]] = linalg.generic {{.*}} outs(%[[S]]
// CHECK: tensor.insert_slice %[[R]]
func.func @written_once(%x: tensor<1x4x4x8xf32>) -> tensor<1x6x6x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x6x6x8xf32>
  %d = linalg.fill ins(%zero : f32) outs(%e : tensor<1x6x6x8xf32>) -> tensor<1x6x6x8xf32>
  %s = tensor.extract_slice %d[0, 0, 0, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x6x6x8xf32> to tensor<1x4x4x8xf32>
  %r = call @relu(%x, %s) : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %p = tensor.insert_slice %r into %d[0, 0, 0, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> into tensor<1x6x6x8xf32>
  return %p : tensor<1x6x6x8xf32>
}

// A kernel whose result is carried on before it is inserted (a max pool's -inf fill, then the
// pool accumulating into it, inserted into a padded buffer): the call takes the larger tensor,
// the carrying op reads the slice of the call's result, and the insert goes into that result.
// Bufferized, the fill and the accumulation both write the padded buffer's interior: no copy
// in or out.
func.func private @fill_ninf(%out: tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %r = linalg.fill ins(%ninf : f32) outs(%out : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %r : tensor<1x4x4x8xf32>
}

// CHECK-LABEL: func.func @carried_on
// CHECK: %[[P:.*]] = call @fill_ninf__into_{{[0-9]+}}(%{{.*}}) : (tensor<1x6x6x8xf32>) -> tensor<1x6x6x8xf32>
// CHECK-NEXT: %[[S:.*]] = tensor.extract_slice %[[P]][0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1]
// CHECK-NEXT: %[[M:.*]] = linalg.generic {{.*}} outs(%[[S]]
// CHECK: tensor.insert_slice %[[M]] into %[[P]][0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1]

// BUF-LABEL: func.func @carried_on
// BUF-NOT: memref.copy
// BUF: return
func.func @carried_on(%x: tensor<1x4x4x8xf32>, %y: tensor<1x4x4x8xf32>) -> (tensor<1x6x6x8xf32>, tensor<1x6x6x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x6x6x8xf32>
  %d = linalg.fill ins(%zero : f32) outs(%e : tensor<1x6x6x8xf32>) -> tensor<1x6x6x8xf32>
  %s = tensor.extract_slice %d[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x6x6x8xf32> to tensor<1x4x4x8xf32>
  %f = call @fill_ninf(%s) : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %m = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : tensor<1x4x4x8xf32>) outs(%f : tensor<1x4x4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %v = arith.maximumf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<1x4x4x8xf32>
  %p = tensor.insert_slice %m into %d[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> into tensor<1x6x6x8xf32>
  %e2 = tensor.empty() : tensor<1x6x6x8xf32>
  %d2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x6x6x8xf32>) -> tensor<1x6x6x8xf32>
  %s2 = tensor.extract_slice %d2[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x6x6x8xf32> to tensor<1x4x4x8xf32>
  %f2 = call @fill_ninf(%s2) : (tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %m2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y : tensor<1x4x4x8xf32>) outs(%f2 : tensor<1x4x4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %v = arith.maximumf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<1x4x4x8xf32>
  %p2 = tensor.insert_slice %m2 into %d2[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> into tensor<1x6x6x8xf32>
  return %p, %p2 : tensor<1x6x6x8xf32>, tensor<1x6x6x8xf32>
}

// A kernel writing a 5-D transpose whose destination is an expanded slice of a concat, its
// result collapsed back before the insert (concat_destinations.py's reshaped part: ShuffleNet's
// pass-through half): the copy of the kernel takes the concat, extracts and expands the slice
// on entry, collapses and inserts its result on return; bufferized, it transposes into the
// expanded view of the concat's channels, with no copy in or out.
func.func private @shuffle_half(%x: tensor<1x4x4x2x4xf32>, %out: tensor<1x4x4x4x2xf32>) -> tensor<1x4x4x4x2xf32> {
  %t = linalg.transpose ins(%x : tensor<1x4x4x2x4xf32>) outs(%out : tensor<1x4x4x4x2xf32>) permutation = [0, 1, 2, 4, 3]
  return %t : tensor<1x4x4x4x2xf32>
}

// CHECK-LABEL: func.func private @shuffle_half__into_{{[0-9]+}}(
// CHECK-SAME: %[[X:.*]]: tensor<1x4x4x2x4xf32>, %[[BIG:.*]]: tensor<1x4x4x24xf32>) -> tensor<1x4x4x24xf32>
// CHECK: %[[SLICE:.*]] = tensor.extract_slice %[[BIG]][0, 0, 0, 16] [1, 4, 4, 8] [1, 1, 1, 1]
// CHECK: %[[VIEW:.*]] = tensor.expand_shape %[[SLICE]] {{\[}}[0], [1], [2], [3, 4]] output_shape [1, 4, 4, 4, 2]
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[X]] : tensor<1x4x4x2x4xf32>) outs(%[[VIEW]] : tensor<1x4x4x4x2xf32>)
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0], [1], [2], [3, 4]]
// CHECK: %[[IN:.*]] = tensor.insert_slice %[[FLAT]] into %[[BIG]][0, 0, 0, 16] [1, 4, 4, 8] [1, 1, 1, 1]
// CHECK: return %[[IN]]

// CHECK-LABEL: func.func @expanded_twice
// CHECK: %[[P:.*]] = call @shuffle_half__into_{{[0-9]+}}(%arg0, %{{.*}}) : (tensor<1x4x4x2x4xf32>, tensor<1x4x4x24xf32>) -> tensor<1x4x4x24xf32>
// CHECK: %[[Q:.*]] = call @shuffle_half__into_{{[0-9]+}}(%arg1, %{{.*}})
// CHECK-NOT: tensor.collapse_shape
// CHECK: return %[[P]], %[[Q]]

// BUF-LABEL: func.func private @shuffle_half__into_{{[0-9]+}}(
// BUF-SAME: memref<1x4x4x2x4xf32>, %[[BIG:.*]]: memref<1x4x4x24xf32>) {
// BUF: %[[PART:.*]] = memref.subview %[[BIG]][0, 0, 0, 16] [1, 4, 4, 8] [1, 1, 1, 1]
// BUF: %[[VIEW:.*]] = memref.expand_shape %[[PART]]
// BUF: linalg.transpose ins(%{{.*}}) outs(%[[VIEW]]
// BUF-NOT: memref.copy
// BUF: return
// BUF-LABEL: func.func @expanded_twice
// BUF-NOT: memref.copy
// BUF: return
func.func @expanded_twice(%x: tensor<1x4x4x2x4xf32>, %y: tensor<1x4x4x2x4xf32>) -> (tensor<1x4x4x24xf32>, tensor<1x4x4x24xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x4x24xf32>
  %d = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x4x24xf32>) -> tensor<1x4x4x24xf32>
  %s = tensor.extract_slice %d[0, 0, 0, 16] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x24xf32> to tensor<1x4x4x8xf32>
  %v = tensor.expand_shape %s [[0], [1], [2], [3, 4]] output_shape [1, 4, 4, 4, 2] : tensor<1x4x4x8xf32> into tensor<1x4x4x4x2xf32>
  %r = func.call @shuffle_half(%x, %v) : (tensor<1x4x4x2x4xf32>, tensor<1x4x4x4x2xf32>) -> tensor<1x4x4x4x2xf32>
  %c = tensor.collapse_shape %r [[0], [1], [2], [3, 4]] : tensor<1x4x4x4x2xf32> into tensor<1x4x4x8xf32>
  %p = tensor.insert_slice %c into %d[0, 0, 0, 16] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> into tensor<1x4x4x24xf32>
  %f = tensor.empty() : tensor<1x4x4x24xf32>
  %g = linalg.fill ins(%zero : f32) outs(%f : tensor<1x4x4x24xf32>) -> tensor<1x4x4x24xf32>
  %t = tensor.extract_slice %g[0, 0, 0, 16] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x24xf32> to tensor<1x4x4x8xf32>
  %w = tensor.expand_shape %t [[0], [1], [2], [3, 4]] output_shape [1, 4, 4, 4, 2] : tensor<1x4x4x8xf32> into tensor<1x4x4x4x2xf32>
  %u = func.call @shuffle_half(%y, %w) : (tensor<1x4x4x2x4xf32>, tensor<1x4x4x4x2xf32>) -> tensor<1x4x4x4x2xf32>
  %k = tensor.collapse_shape %u [[0], [1], [2], [3, 4]] : tensor<1x4x4x4x2xf32> into tensor<1x4x4x8xf32>
  %q = tensor.insert_slice %k into %g[0, 0, 0, 16] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> into tensor<1x4x4x24xf32>
  return %p, %q : tensor<1x4x4x24xf32>, tensor<1x4x4x24xf32>
}
