// tilecraft-slice-channel-shuffles (pipelines/graph/channel_shuffles.py): a channel shuffle
// (expand_shape, transpose of the split channels, collapse_shape) that only channel splits
// read becomes one shuffle per split, of the channels it keeps: ShuffleNet's halves of a
// 116-channel shuffle in 2 groups are each a transpose of a (2, 29) slice of the source.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-slice-channel-shuffles | FileCheck %s

// CHECK-LABEL: func.func @halves
// CHECK-SAME: (%[[X:.*]]: tensor<1x28x28x116xf32>)
// CHECK: %[[E:.*]] = tensor.expand_shape %[[X]] {{\[}}[0], [1], [2], [3, 4]] output_shape [1, 28, 28, 2, 58]
// CHECK: %[[S0:.*]] = tensor.extract_slice %[[E]][0, 0, 0, 0, 0] [1, 28, 28, 2, 29] [1, 1, 1, 1, 1] : tensor<1x28x28x2x58xf32> to tensor<1x28x28x2x29xf32>
// CHECK: %[[T0:.*]] = linalg.transpose ins(%[[S0]] : tensor<1x28x28x2x29xf32>) outs(%{{.*}} : tensor<1x28x28x29x2xf32>) permutation = [0, 1, 2, 4, 3]
// CHECK: %[[H0:.*]] = tensor.collapse_shape %[[T0]] {{\[}}[0], [1], [2], [3, 4]] : tensor<1x28x28x29x2xf32> into tensor<1x28x28x58xf32>
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[E]][0, 0, 0, 0, 29] [1, 28, 28, 2, 29] [1, 1, 1, 1, 1]
// CHECK: %[[T1:.*]] = linalg.transpose ins(%[[S1]] : tensor<1x28x28x2x29xf32>)
// CHECK: %[[H1:.*]] = tensor.collapse_shape %[[T1]]
// CHECK-NOT: tensor<1x28x28x58x2xf32>
// CHECK: return %[[H0]], %[[H1]]
func.func @halves(%x: tensor<1x28x28x116xf32>) -> (tensor<1x28x28x58xf32>, tensor<1x28x28x58xf32>) {
  %e = tensor.expand_shape %x [[0], [1], [2], [3, 4]] output_shape [1, 28, 28, 2, 58] : tensor<1x28x28x116xf32> into tensor<1x28x28x2x58xf32>
  %te = tensor.empty() : tensor<1x28x28x58x2xf32>
  %t = linalg.transpose ins(%e : tensor<1x28x28x2x58xf32>) outs(%te : tensor<1x28x28x58x2xf32>) permutation = [0, 1, 2, 4, 3]
  %m = tensor.collapse_shape %t [[0], [1], [2], [3, 4]] : tensor<1x28x28x58x2xf32> into tensor<1x28x28x116xf32>
  %a = tensor.extract_slice %m[0, 0, 0, 0] [1, 28, 28, 58] [1, 1, 1, 1] : tensor<1x28x28x116xf32> to tensor<1x28x28x58xf32>
  %b = tensor.extract_slice %m[0, 0, 0, 58] [1, 28, 28, 58] [1, 1, 1, 1] : tensor<1x28x28x116xf32> to tensor<1x28x28x58xf32>
  return %a, %b : tensor<1x28x28x58xf32>, tensor<1x28x28x58xf32>
}

// -----

// Three groups of 15 channels (45, NCHW): the slices [0, 18) and [18, 45) are multiples of
// the 3 groups, so each keeps j in [0, 6) and [6, 15) of every group.
// CHECK-LABEL: func.func @three_groups_nchw
// CHECK: %[[E:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 3, 15, 5, 5]
// CHECK: tensor.extract_slice %[[E]][0, 0, 0, 0, 0] [1, 3, 6, 5, 5]
// CHECK: linalg.transpose ins(%{{.*}} : tensor<1x3x6x5x5xf32>) outs(%{{.*}} : tensor<1x6x3x5x5xf32>) permutation = [0, 2, 1, 3, 4]
// CHECK: tensor.extract_slice %[[E]][0, 0, 6, 0, 0] [1, 3, 9, 5, 5]
// CHECK: linalg.transpose ins(%{{.*}} : tensor<1x3x9x5x5xf32>) outs(%{{.*}} : tensor<1x9x3x5x5xf32>)
// CHECK-NOT: tensor<1x15x3x5x5xf32>
func.func @three_groups_nchw(%x: tensor<1x45x5x5xf32>) -> (tensor<1x18x5x5xf32>, tensor<1x27x5x5xf32>) {
  %e = tensor.expand_shape %x [[0], [1, 2], [3], [4]] output_shape [1, 3, 15, 5, 5] : tensor<1x45x5x5xf32> into tensor<1x3x15x5x5xf32>
  %te = tensor.empty() : tensor<1x15x3x5x5xf32>
  %t = linalg.transpose ins(%e : tensor<1x3x15x5x5xf32>) outs(%te : tensor<1x15x3x5x5xf32>) permutation = [0, 2, 1, 3, 4]
  %m = tensor.collapse_shape %t [[0], [1, 2], [3], [4]] : tensor<1x15x3x5x5xf32> into tensor<1x45x5x5xf32>
  %a = tensor.extract_slice %m[0, 0, 0, 0] [1, 18, 5, 5] [1, 1, 1, 1] : tensor<1x45x5x5xf32> to tensor<1x18x5x5xf32>
  %b = tensor.extract_slice %m[0, 18, 0, 0] [1, 27, 5, 5] [1, 1, 1, 1] : tensor<1x45x5x5xf32> to tensor<1x27x5x5xf32>
  return %a, %b : tensor<1x18x5x5xf32>, tensor<1x27x5x5xf32>
}

// -----

// Left alone: a slice across the groups (16 channels of a shuffle in 3 groups: no multiple
// of 3), and a shuffle that something besides its splits reads whole.
// CHECK-LABEL: func.func @misaligned
// CHECK: linalg.transpose ins(%{{.*}} : tensor<1x4x4x3x10xf32>)
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0, 0] [1, 4, 4, 16]
func.func @misaligned(%x: tensor<1x4x4x30xf32>) -> tensor<1x4x4x16xf32> {
  %e = tensor.expand_shape %x [[0], [1], [2], [3, 4]] output_shape [1, 4, 4, 3, 10] : tensor<1x4x4x30xf32> into tensor<1x4x4x3x10xf32>
  %te = tensor.empty() : tensor<1x4x4x10x3xf32>
  %t = linalg.transpose ins(%e : tensor<1x4x4x3x10xf32>) outs(%te : tensor<1x4x4x10x3xf32>) permutation = [0, 1, 2, 4, 3]
  %m = tensor.collapse_shape %t [[0], [1], [2], [3, 4]] : tensor<1x4x4x10x3xf32> into tensor<1x4x4x30xf32>
  %a = tensor.extract_slice %m[0, 0, 0, 0] [1, 4, 4, 16] [1, 1, 1, 1] : tensor<1x4x4x30xf32> to tensor<1x4x4x16xf32>
  return %a : tensor<1x4x4x16xf32>
}

// -----

// CHECK-LABEL: func.func @read_whole
// CHECK: linalg.transpose ins(%{{.*}} : tensor<1x4x4x2x8xf32>)
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0, 8] [1, 4, 4, 8]
// CHECK: return
func.func @read_whole(%x: tensor<1x4x4x16xf32>) -> (tensor<1x4x4x16xf32>, tensor<1x4x4x8xf32>) {
  %e = tensor.expand_shape %x [[0], [1], [2], [3, 4]] output_shape [1, 4, 4, 2, 8] : tensor<1x4x4x16xf32> into tensor<1x4x4x2x8xf32>
  %te = tensor.empty() : tensor<1x4x4x8x2xf32>
  %t = linalg.transpose ins(%e : tensor<1x4x4x2x8xf32>) outs(%te : tensor<1x4x4x8x2xf32>) permutation = [0, 1, 2, 4, 3]
  %m = tensor.collapse_shape %t [[0], [1], [2], [3, 4]] : tensor<1x4x4x8x2xf32> into tensor<1x4x4x16xf32>
  %b = tensor.extract_slice %m[0, 0, 0, 8] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x16xf32> to tensor<1x4x4x8xf32>
  return %m, %b : tensor<1x4x4x16xf32>, tensor<1x4x4x8xf32>
}

// -----

// A convolution reading the whole shuffle (ShuffleNet's last unit and its final 1x1
// convolution) and a split beside it: the convolution reads the source, its filter's input
// channels put in the source's order (the inverse shuffle: (4, 2) -> (2, 4)), and the split
// shuffles the channels it keeps.
// CHECK-LABEL: func.func @conv_and_split
// CHECK-SAME: (%[[X:.*]]: tensor<1x3x3x8xf32>)
// CHECK: %[[W:.*]] = arith.constant dense<
// CHECK: %[[WE:.*]] = tensor.expand_shape %[[W]] {{\[}}[0], [1], [2, 3], [4]] output_shape [1, 1, 4, 2, 5] : tensor<1x1x8x5xf32> into tensor<1x1x4x2x5xf32>
// CHECK: %[[WT:.*]] = linalg.transpose ins(%[[WE]] : tensor<1x1x4x2x5xf32>) outs(%{{.*}} : tensor<1x1x2x4x5xf32>) permutation = [0, 1, 3, 2, 4]
// CHECK: %[[WC:.*]] = tensor.collapse_shape %[[WT]] {{\[}}[0], [1], [2, 3], [4]] : tensor<1x1x2x4x5xf32> into tensor<1x1x8x5xf32>
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[X]], %[[WC]] : tensor<1x3x3x8xf32>, tensor<1x1x8x5xf32>)
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0, 0, 2] [1, 3, 3, 2, 2]
// CHECK-NOT: tensor<1x3x3x4x2xf32>
// CHECK: return
func.func @conv_and_split(%x: tensor<1x3x3x8xf32>) -> (tensor<1x3x3x5xf32>, tensor<1x3x3x4xf32>) {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<[[[[1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0], [0.5, 2.0, 3.0, 4.0, 5.0]]]]> : tensor<1x1x8x5xf32>
  %e = tensor.expand_shape %x [[0], [1], [2], [3, 4]] output_shape [1, 3, 3, 2, 4] : tensor<1x3x3x8xf32> into tensor<1x3x3x2x4xf32>
  %te = tensor.empty() : tensor<1x3x3x4x2xf32>
  %t = linalg.transpose ins(%e : tensor<1x3x3x2x4xf32>) outs(%te : tensor<1x3x3x4x2xf32>) permutation = [0, 1, 2, 4, 3]
  %m = tensor.collapse_shape %t [[0], [1], [2], [3, 4]] : tensor<1x3x3x4x2xf32> into tensor<1x3x3x8xf32>
  %o = tensor.empty() : tensor<1x3x3x5xf32>
  %i = linalg.fill ins(%z : f32) outs(%o : tensor<1x3x3x5xf32>) -> tensor<1x3x3x5xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%m, %w : tensor<1x3x3x8xf32>, tensor<1x1x8x5xf32>) outs(%i : tensor<1x3x3x5xf32>) -> tensor<1x3x3x5xf32>
  %b = tensor.extract_slice %m[0, 0, 0, 4] [1, 3, 3, 4] [1, 1, 1, 1] : tensor<1x3x3x8xf32> to tensor<1x3x3x4xf32>
  return %c, %b : tensor<1x3x3x5xf32>, tensor<1x3x3x4xf32>
}
