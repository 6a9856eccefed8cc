// tilecraft-slice-concat-parts: a slice of a tensor.concat that is whole along the concat's
// dim is the concat of that slice of each part. torch.roll over two dims (Swin's shifted
// windows) is two Slice + Concat pairs, each a copy of the whole map; once the second roll's
// slices read the first roll's parts, the first concat is gone and the roll is a concat of
// concats of four blocks of the source (concats-as-destinations then builds them in one
// buffer: one copy). A concat with another reader, or a slice that cuts the concat's dim
// (a channel split), is left alone.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-slice-concat-parts | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --pass-pipeline='builtin.module(tilecraft-slice-concat-parts,tilecraft-concats-as-destinations,eliminate-empty-tensors,one-shot-bufferize{bufferize-function-boundaries},cse,canonicalize)' | FileCheck %s --check-prefix=BUF

// A roll by (3, 2) of a 8 x 9 map (odd sizes, unequal shifts).
// CHECK-LABEL: func.func @roll_two_dims
// CHECK-SAME: (%[[X:.*]]: tensor<1x8x9x4xf32>)
// CHECK-DAG: %[[A:.*]] = tensor.extract_slice %[[X]][0, 3, 2, 0] [1, 5, 7, 4] [1, 1, 1, 1]
// CHECK-DAG: %[[B:.*]] = tensor.extract_slice %[[X]][0, 0, 2, 0] [1, 3, 7, 4] [1, 1, 1, 1]
// CHECK-DAG: %[[C:.*]] = tensor.extract_slice %[[X]][0, 3, 0, 0] [1, 5, 2, 4] [1, 1, 1, 1]
// CHECK-DAG: %[[D:.*]] = tensor.extract_slice %[[X]][0, 0, 0, 0] [1, 3, 2, 4] [1, 1, 1, 1]
// CHECK-DAG: %[[AB:.*]] = tensor.concat dim(1) %[[A]], %[[B]] : (tensor<1x5x7x4xf32>, tensor<1x3x7x4xf32>) -> tensor<1x8x7x4xf32>
// CHECK-DAG: %[[CD:.*]] = tensor.concat dim(1) %[[C]], %[[D]] : (tensor<1x5x2x4xf32>, tensor<1x3x2x4xf32>) -> tensor<1x8x2x4xf32>
// CHECK: %[[R:.*]] = tensor.concat dim(2) %[[AB]], %[[CD]]
// CHECK-NOT: tensor.concat
// CHECK: return %[[R]]

// Bufferized: one buffer, four copies of blocks of the argument into it, no other buffer.
// BUF-LABEL: func.func @roll_two_dims
// BUF: %[[ALLOC:.*]] = memref.alloc() {{.*}}: memref<1x8x9x4xf32>
// BUF-NOT: memref.alloc
// BUF-COUNT-4: memref.copy
// BUF-NOT: memref.copy
// BUF: return %[[ALLOC]]
func.func @roll_two_dims(%x: tensor<1x8x9x4xf32>) -> tensor<1x8x9x4xf32> {
  %a = tensor.extract_slice %x[0, 3, 0, 0] [1, 5, 9, 4] [1, 1, 1, 1] : tensor<1x8x9x4xf32> to tensor<1x5x9x4xf32>
  %b = tensor.extract_slice %x[0, 0, 0, 0] [1, 3, 9, 4] [1, 1, 1, 1] : tensor<1x8x9x4xf32> to tensor<1x3x9x4xf32>
  %h = tensor.concat dim(1) %a, %b : (tensor<1x5x9x4xf32>, tensor<1x3x9x4xf32>) -> tensor<1x8x9x4xf32>
  %c = tensor.extract_slice %h[0, 0, 2, 0] [1, 8, 7, 4] [1, 1, 1, 1] : tensor<1x8x9x4xf32> to tensor<1x8x7x4xf32>
  %d = tensor.extract_slice %h[0, 0, 0, 0] [1, 8, 2, 4] [1, 1, 1, 1] : tensor<1x8x9x4xf32> to tensor<1x8x2x4xf32>
  %w = tensor.concat dim(2) %c, %d : (tensor<1x8x7x4xf32>, tensor<1x8x2x4xf32>) -> tensor<1x8x9x4xf32>
  return %w : tensor<1x8x9x4xf32>
}

// -----

// The first concat is also returned: it stays, and so do the slices of it.
// CHECK-LABEL: func.func @concat_read_whole
// CHECK: %[[H:.*]] = tensor.concat dim(1)
// CHECK: tensor.extract_slice %[[H]]
// CHECK: tensor.extract_slice %[[H]]
// CHECK: tensor.concat dim(2)
func.func @concat_read_whole(%x: tensor<1x8x9x4xf32>) -> (tensor<1x8x9x4xf32>, tensor<1x8x9x4xf32>) {
  %a = tensor.extract_slice %x[0, 3, 0, 0] [1, 5, 9, 4] [1, 1, 1, 1] : tensor<1x8x9x4xf32> to tensor<1x5x9x4xf32>
  %b = tensor.extract_slice %x[0, 0, 0, 0] [1, 3, 9, 4] [1, 1, 1, 1] : tensor<1x8x9x4xf32> to tensor<1x3x9x4xf32>
  %h = tensor.concat dim(1) %a, %b : (tensor<1x5x9x4xf32>, tensor<1x3x9x4xf32>) -> tensor<1x8x9x4xf32>
  %c = tensor.extract_slice %h[0, 0, 2, 0] [1, 8, 7, 4] [1, 1, 1, 1] : tensor<1x8x9x4xf32> to tensor<1x8x7x4xf32>
  %d = tensor.extract_slice %h[0, 0, 0, 0] [1, 8, 2, 4] [1, 1, 1, 1] : tensor<1x8x9x4xf32> to tensor<1x8x2x4xf32>
  %w = tensor.concat dim(2) %c, %d : (tensor<1x8x7x4xf32>, tensor<1x8x2x4xf32>) -> tensor<1x8x9x4xf32>
  return %w, %h : tensor<1x8x9x4xf32>, tensor<1x8x9x4xf32>
}

// -----

// A channel split of a concat cuts the concatenated dim: left alone.
// CHECK-LABEL: func.func @channel_split
// CHECK: %[[J:.*]] = tensor.concat dim(3)
// CHECK: tensor.extract_slice %[[J]][0, 0, 0, 2] [1, 4, 4, 4]
func.func @channel_split(%x: tensor<1x4x4x3xf32>, %y: tensor<1x4x4x5xf32>) -> tensor<1x4x4x4xf32> {
  %j = tensor.concat dim(3) %x, %y : (tensor<1x4x4x3xf32>, tensor<1x4x4x5xf32>) -> tensor<1x4x4x8xf32>
  %s = tensor.extract_slice %j[0, 0, 0, 2] [1, 4, 4, 4] [1, 1, 1, 1] : tensor<1x4x4x8xf32> to tensor<1x4x4x4xf32>
  return %s : tensor<1x4x4x4xf32>
}

// -----

// One part given twice (a repeat along a dim: concat(a, a)):
// its slices are taken once per use, and the dead part is dropped once.
// CHECK-LABEL: func.func @same_part_twice
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x6x2xf32>)
// CHECK: %[[S:.*]] = tensor.extract_slice %[[X]][0, 2, 1, 0] [1, 2, 5, 2] [1, 1, 1, 1]
// CHECK: %[[T:.*]] = tensor.extract_slice %[[X]][0, 2, 1, 0] [1, 2, 5, 2] [1, 1, 1, 1]
// CHECK: %[[J:.*]] = tensor.concat dim(1) %[[S]], %[[T]]
// CHECK: return %[[J]]
func.func @same_part_twice(%x: tensor<1x4x6x2xf32>) -> tensor<1x4x5x2xf32> {
  %a = tensor.extract_slice %x[0, 2, 0, 0] [1, 2, 6, 2] [1, 1, 1, 1] : tensor<1x4x6x2xf32> to tensor<1x2x6x2xf32>
  %j = tensor.concat dim(1) %a, %a : (tensor<1x2x6x2xf32>, tensor<1x2x6x2xf32>) -> tensor<1x4x6x2xf32>
  %s = tensor.extract_slice %j[0, 0, 1, 0] [1, 4, 5, 2] [1, 1, 1, 1] : tensor<1x4x6x2xf32> to tensor<1x4x5x2xf32>
  return %s : tensor<1x4x5x2xf32>
}
