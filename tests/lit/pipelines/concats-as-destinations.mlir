// tilecraft-concats-as-destinations: a function-level tensor.concat becomes a fresh tensor
// with each part inserted at its offset along the concatenated dim. With
// eliminate-empty-tensors and bufferization after it, each part's producer (a fusion group's
// scf.forall, a linalg op) stores straight into its slice of the result: no copy is left.
// A part that is a function argument is one copy into its slice; a concat of dynamic shape,
// or inside a loop, is left alone.
// RUN: tilecraft-opt %s --tilecraft-concats-as-destinations | FileCheck %s
// RUN: tilecraft-opt %s --pass-pipeline='builtin.module(tilecraft-concats-as-destinations,eliminate-empty-tensors,one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops},cse,canonicalize)' | FileCheck %s --check-prefix=BUF

#id = affine_map<(n, h, w, c) -> (n, h, w, c)>

// CHECK-LABEL: func.func @branches
// CHECK-NOT: tensor.concat
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<1x4x4x24xf32>
// CHECK: %[[A:.*]] = tensor.insert_slice %{{.*}} into %[[EMPTY]][0, 0, 0, 0] [1, 4, 4, 8] [1, 1, 1, 1]
// CHECK: %[[B:.*]] = tensor.insert_slice %{{.*}} into %[[A]][0, 0, 0, 8] [1, 4, 4, 16] [1, 1, 1, 1]
// CHECK: return %[[B]]

// BUF-LABEL: func.func @branches
// BUF: %[[ALLOC:.*]] = memref.alloc() {{.*}} : memref<1x4x4x24xf32>
// BUF: %[[FIRST:.*]] = memref.subview %[[ALLOC]][0, 0, 0, 0] [1, 4, 4, 8] [1, 1, 1, 1]
// BUF: scf.forall
// BUF: memref.subview %[[FIRST]]
// BUF: %[[SECOND:.*]] = memref.subview %[[ALLOC]][0, 0, 0, 8] [1, 4, 4, 16] [1, 1, 1, 1]
// BUF: linalg.generic
// BUF-SAME: outs(%[[SECOND]]
// BUF-NOT: memref.copy
// BUF: return %[[ALLOC]]
func.func @branches(%x: tensor<1x4x4x8xf32>, %y: tensor<1x4x4x16xf32>) -> tensor<1x4x4x24xf32> {
  %one = arith.constant 1.0 : f32
  %e1 = tensor.empty() : tensor<1x4x4x8xf32>
  %a = scf.forall (%i) in (4) shared_outs(%o = %e1) -> (tensor<1x4x4x8xf32>) {
    %row = tensor.extract_slice %x[0, %i, 0, 0] [1, 1, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> to tensor<1x1x4x8xf32>
    %out = tensor.extract_slice %o[0, %i, 0, 0] [1, 1, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> to tensor<1x1x4x8xf32>
    %r = linalg.map { math.exp } ins(%row : tensor<1x1x4x8xf32>) outs(%out : tensor<1x1x4x8xf32>)
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %r into %o[0, %i, 0, 0] [1, 1, 4, 8] [1, 1, 1, 1] : tensor<1x1x4x8xf32> into tensor<1x4x4x8xf32>
    }
  }
  %e2 = tensor.empty() : tensor<1x4x4x16xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y : tensor<1x4x4x16xf32>) outs(%e2 : tensor<1x4x4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %one : f32
    linalg.yield %s : f32
  } -> tensor<1x4x4x16xf32>
  %c = tensor.concat dim(3) %a, %b : (tensor<1x4x4x8xf32>, tensor<1x4x4x16xf32>) -> tensor<1x4x4x24xf32>
  return %c : tensor<1x4x4x24xf32>
}

// CHECK-LABEL: func.func @argument_part
// CHECK-NOT: tensor.concat
// CHECK: tensor.insert_slice %arg0 into %{{.*}}[0, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<9x8xf32>
// CHECK: tensor.insert_slice %arg1 into %{{.*}}[4, 0] [5, 8] [1, 1] : tensor<5x8xf32> into tensor<9x8xf32>

// BUF-LABEL: func.func @argument_part
// BUF-COUNT-2: memref.copy %arg
func.func @argument_part(%x: tensor<4x8xf32>, %y: tensor<5x8xf32>) -> tensor<9x8xf32> {
  %c = tensor.concat dim(0) %x, %y : (tensor<4x8xf32>, tensor<5x8xf32>) -> tensor<9x8xf32>
  return %c : tensor<9x8xf32>
}

// CHECK-LABEL: func.func @dynamic_stays
// CHECK: tensor.concat
func.func @dynamic_stays(%x: tensor<?x8xf32>, %y: tensor<5x8xf32>) -> tensor<?x8xf32> {
  %c = tensor.concat dim(0) %x, %y : (tensor<?x8xf32>, tensor<5x8xf32>) -> tensor<?x8xf32>
  return %c : tensor<?x8xf32>
}

// CHECK-LABEL: func.func @in_a_loop_stays
// CHECK: scf.for
// CHECK: tensor.concat
func.func @in_a_loop_stays(%x: tensor<4x8xf32>, %n: index) -> tensor<8x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %init = tensor.empty() : tensor<8x8xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init) -> (tensor<8x8xf32>) {
    %c = tensor.concat dim(0) %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    scf.yield %c : tensor<8x8xf32>
  }
  return %r : tensor<8x8xf32>
}

// A dense block: each concat's first part is the previous concat, which its layer also reads
// (two ops per layer, as DenseNet's bottleneck and 3x3 conv: an op that read a prefix and
// wrote the next slice of one buffer would be bufferized out of place). The previous concat is
// built in its slice of the next one, so the chain is one buffer (the last concat's) whose
// channel prefixes the layers read: nothing is copied from one concat to the next.
// CHECK-LABEL: func.func @dense_block
// CHECK-NOT: tensor.concat
// CHECK: %[[LAST:.*]] = tensor.empty() : tensor<1x4x4x32xf32>
// CHECK: %[[MID:.*]] = tensor.extract_slice %[[LAST]][0, 0, 0, 0] [1, 4, 4, 16] [1, 1, 1, 1]
// CHECK: %[[FIRST:.*]] = tensor.extract_slice %[[MID]][0, 0, 0, 0] [1, 4, 4, 8] [1, 1, 1, 1]
// CHECK-NOT: tensor.empty() : tensor<1x4x4x16xf32>
// CHECK: tensor.insert_slice %{{.*}} into %[[FIRST]][0, 0, 0, 0] [1, 4, 4, 4] [1, 1, 1, 1]

// BUF-LABEL: func.func @dense_block
// BUF: %[[ALLOC:.*]] = memref.alloc() {{.*}} : memref<1x4x4x32xf32>
// BUF-NOT: memref.copy
// BUF: return %[[ALLOC]]
func.func @dense_block(%x: tensor<1x4x4x4xf32>) -> tensor<1x4x4x32xf32> {
  %one = arith.constant 1.0 : f32
  %e0 = tensor.empty() : tensor<1x4x4x4xf32>
  %f0 = linalg.map { math.absf } ins(%x : tensor<1x4x4x4xf32>) outs(%e0 : tensor<1x4x4x4xf32>)
  %e1 = tensor.empty() : tensor<1x4x4x4xf32>
  %f1 = linalg.map { math.exp } ins(%x : tensor<1x4x4x4xf32>) outs(%e1 : tensor<1x4x4x4xf32>)
  %c1 = tensor.concat dim(3) %f0, %f1 : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x8xf32>
  %e2 = tensor.empty() : tensor<1x4x4x8xf32>
  %b2 = linalg.map { math.exp } ins(%c1 : tensor<1x4x4x8xf32>) outs(%e2 : tensor<1x4x4x8xf32>)
  %e2b = tensor.empty() : tensor<1x4x4x8xf32>
  %f2 = linalg.map { math.absf } ins(%b2 : tensor<1x4x4x8xf32>) outs(%e2b : tensor<1x4x4x8xf32>)
  %c2 = tensor.concat dim(3) %c1, %f2 : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x16xf32>
  %e3 = tensor.empty() : tensor<1x4x4x16xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c2 : tensor<1x4x4x16xf32>) outs(%e3 : tensor<1x4x4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %one : f32
    linalg.yield %s : f32
  } -> tensor<1x4x4x16xf32>
  %e3b = tensor.empty() : tensor<1x4x4x16xf32>
  %f3 = linalg.map { math.absf } ins(%g : tensor<1x4x4x16xf32>) outs(%e3b : tensor<1x4x4x16xf32>)
  %c3 = tensor.concat dim(3) %c2, %f3 : (tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32>) -> tensor<1x4x4x32xf32>
  return %c3 : tensor<1x4x4x32xf32>
}

// An Inception concat: padded for a 3x3 max pool and read whole by a 1x1 conv (here a map).
// After the pad pass the concat is inserted whole into the padded tensor; it is then built
// there: its parts go into the padded tensor's interior (the pad's empty tensor and border
// fills moved before the concat), and the whole reader reads that interior as a slice. One
// buffer serves the pad and the reader, and no part or concat is copied.
// RUN: tilecraft-opt %s --pass-pipeline='builtin.module(tilecraft-pads-as-destinations,tilecraft-concats-as-destinations)' | FileCheck %s --check-prefix=PAD
// RUN: tilecraft-opt %s --pass-pipeline='builtin.module(tilecraft-pads-as-destinations,tilecraft-concats-as-destinations,eliminate-empty-tensors,one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops},cse,canonicalize)' | FileCheck %s --check-prefix=PADBUF

// PAD-LABEL: func.func @padded_and_read_whole
// PAD-NOT: tensor.concat
// PAD: tensor.empty() : tensor<1x6x6x24xf32>
// PAD-COUNT-4: linalg.fill
// PAD: %[[A:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1]
// PAD: %[[B:.*]] = tensor.insert_slice %{{.*}} into %[[A]][0, 1, 1, 8] [1, 4, 4, 16] [1, 1, 1, 1]
// PAD-NOT: tensor.insert_slice
// PAD: %[[VIEW:.*]] = tensor.extract_slice %[[B]][0, 1, 1, 0] [1, 4, 4, 24] [1, 1, 1, 1]
// PAD: linalg.map { math.absf } ins(%[[VIEW]]
// PAD: return %[[B]]

// PADBUF-LABEL: func.func @padded_and_read_whole
// PADBUF: %[[ALLOC:.*]] = memref.alloc() {{.*}} : memref<1x6x6x24xf32>
// PADBUF: %[[FIRST:.*]] = memref.subview %[[ALLOC]][0, 1, 1, 0] [1, 4, 4, 8] [1, 1, 1, 1]
// PADBUF: linalg.map { math.exp } ins(%arg0 {{.*}} outs(%[[FIRST]]
// PADBUF: %[[SECOND:.*]] = memref.subview %[[ALLOC]][0, 1, 1, 8] [1, 4, 4, 16] [1, 1, 1, 1]
// PADBUF: linalg.map { math.exp } ins(%arg1 {{.*}} outs(%[[SECOND]]
// PADBUF: %[[INTERIOR:.*]] = memref.subview %[[ALLOC]][0, 1, 1, 0] [1, 4, 4, 24] [1, 1, 1, 1]
// PADBUF: linalg.map { math.absf } ins(%[[INTERIOR]]
// PADBUF-NOT: memref.copy
// PADBUF: return %[[ALLOC]]
func.func @padded_and_read_whole(%x: tensor<1x4x4x8xf32>, %y: tensor<1x4x4x16xf32>) -> (tensor<1x6x6x24xf32>, tensor<1x4x4x24xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %e1 = tensor.empty() : tensor<1x4x4x8xf32>
  %a = linalg.map { math.exp } ins(%x : tensor<1x4x4x8xf32>) outs(%e1 : tensor<1x4x4x8xf32>)
  %e2 = tensor.empty() : tensor<1x4x4x16xf32>
  %b = linalg.map { math.exp } ins(%y : tensor<1x4x4x16xf32>) outs(%e2 : tensor<1x4x4x16xf32>)
  %c = tensor.concat dim(3) %a, %b : (tensor<1x4x4x8xf32>, tensor<1x4x4x16xf32>) -> tensor<1x4x4x24xf32>
  %e3 = tensor.empty() : tensor<1x4x4x24xf32>
  %r = linalg.map { math.absf } ins(%c : tensor<1x4x4x24xf32>) outs(%e3 : tensor<1x4x4x24xf32>)
  %p = tensor.pad %c low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %ninf : f32
  } : tensor<1x4x4x24xf32> to tensor<1x6x6x24xf32>
  return %p, %r : tensor<1x6x6x24xf32>, tensor<1x4x4x24xf32>
}

// A part that is a reshape of a producer's result (ShuffleNet's pass-through half: a
// transpose of (2, 4) channel factors to (4, 2), collapsed to 8 channels), here the second
// part: the producer's 5-D destination becomes the expanded slice of the concat's tensor,
// inserted first, so the transpose writes its channels of the concatenation through an
// expanded view and nothing is copied (eliminate-empty-tensors does not follow reshapes).
// CHECK-LABEL: func.func @reshaped_part
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<1x4x4x24xf32>
// CHECK: %[[SLICE:.*]] = tensor.extract_slice %[[EMPTY]][0, 0, 0, 16] [1, 4, 4, 8] [1, 1, 1, 1]
// CHECK: %[[DEST:.*]] = tensor.expand_shape %[[SLICE]] {{\[}}[0], [1], [2], [3, 4]] output_shape [1, 4, 4, 4, 2]
// CHECK: %[[T:.*]] = linalg.transpose ins(%{{.*}} : tensor<1x4x4x2x4xf32>) outs(%[[DEST]] : tensor<1x4x4x4x2xf32>)
// CHECK: %[[A:.*]] = tensor.collapse_shape %[[T]]
// CHECK: %[[FIRST:.*]] = tensor.insert_slice %[[A]] into %[[EMPTY]][0, 0, 0, 16] [1, 4, 4, 8]
// CHECK: tensor.insert_slice %{{.*}} into %[[FIRST]][0, 0, 0, 0] [1, 4, 4, 16]

// BUF-LABEL: func.func @reshaped_part
// BUF: %[[ALLOC:.*]] = memref.alloc() {{.*}} : memref<1x4x4x24xf32>
// BUF: %[[PART:.*]] = memref.subview %[[ALLOC]][0, 0, 0, 16] [1, 4, 4, 8] [1, 1, 1, 1]
// BUF: %[[VIEW:.*]] = memref.expand_shape %[[PART]]
// BUF: linalg.transpose ins(%{{.*}}) outs(%[[VIEW]]
// BUF-NOT: memref.copy
// BUF: return %[[ALLOC]]
func.func @reshaped_part(%x: tensor<1x4x4x2x4xf32>, %y: tensor<1x4x4x16xf32>) -> tensor<1x4x4x24xf32> {
  %one = arith.constant 1.0 : f32
  %e1 = tensor.empty() : tensor<1x4x4x4x2xf32>
  %e2 = tensor.empty() : tensor<1x4x4x16xf32>
  %t = linalg.transpose ins(%x : tensor<1x4x4x2x4xf32>) outs(%e1 : tensor<1x4x4x4x2xf32>) permutation = [0, 1, 2, 4, 3]
  %a = tensor.collapse_shape %t [[0], [1], [2], [3, 4]] : tensor<1x4x4x4x2xf32> into tensor<1x4x4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y : tensor<1x4x4x16xf32>) outs(%e2 : tensor<1x4x4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %one : f32
    linalg.yield %s : f32
  } -> tensor<1x4x4x16xf32>
  %c = tensor.concat dim(3) %b, %a : (tensor<1x4x4x16xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x24xf32>
  return %c : tensor<1x4x4x24xf32>
}
