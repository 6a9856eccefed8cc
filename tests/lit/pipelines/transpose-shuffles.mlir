// tilecraft-transpose-shuffles: a vector.transpose of R rows of C lanes (powers of two, the
// other dims of size 1) becomes butterfly vector.shuffle stages: rows concatenated first
// where R > C, log2(min(R, C)) stages exchanging one row bit with one lane bit, the rows
// split last where R < C. Other extents are padded to the next powers of two; a transpose
// that keeps the lanes innermost is left to MLIR's lowering.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-transpose-shuffles | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-transpose-shuffles --convert-vector-to-llvm --convert-to-llvm --reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM

// 4 x 4: two stages of 4 shuffles; no element-wise moves.
// CHECK-LABEL: func.func @square
// CHECK-SAME: (%[[V:.*]]: vector<4x4xf32>)
// CHECK-DAG: %[[R0:.*]] = vector.extract %[[V]][0] : vector<4xf32> from vector<4x4xf32>
// CHECK-DAG: %[[R1:.*]] = vector.extract %[[V]][1] : vector<4xf32> from vector<4x4xf32>
// CHECK: %[[A:.*]] = vector.shuffle %[[R0]], %[[R1]] [0, 4, 2, 6]
// CHECK: %[[B:.*]] = vector.shuffle %[[R0]], %[[R1]] [1, 5, 3, 7]
// CHECK-COUNT-2: vector.shuffle
// CHECK: %[[T0:.*]] = vector.shuffle %[[A]], %{{.*}} [0, 1, 4, 5]
// CHECK-COUNT-3: vector.shuffle
// CHECK: vector.insert %[[T0]], %{{.*}} [0] : vector<4xf32> into vector<4x4xf32>
// CHECK-NOT: vector.transpose
// CHECK-NOT: vector.extract %{{.*}}[{{.*}}] : f32
// LLVM-LABEL: llvm.func @square
// LLVM-COUNT-8: llvm.shufflevector
// LLVM-NOT: llvm.extractelement
func.func @square(%v: vector<4x4xf32>) -> vector<4x4xf32> {
  %t = vector.transpose %v, [1, 0] : vector<4x4xf32> to vector<4x4xf32>
  return %t : vector<4x4xf32>
}

// -----

// NCHW -> NHWC's tile on AVX-512: 16 channel rows of 8 pixels, any rank. Rows r and r + 8
// are concatenated into 16 lanes, then three stages of 8 shuffles; the result rows are
// inserted at their pixel.
// CHECK-LABEL: func.func @channels_last
// CHECK: vector.extract %{{.*}}[0, 15, 0] : vector<8xf32> from vector<1x16x1x8xf32>
// CHECK-COUNT-8: vector.shuffle {{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
// CHECK-COUNT-24: vector.shuffle {{.*}} : vector<16xf32>, vector<16xf32>
// CHECK-NOT: vector.shuffle
// CHECK: vector.insert %{{.*}}, %{{.*}} [0, 0, 7] : vector<16xf32> into vector<1x1x8x16xf32>
// CHECK-NOT: vector.transpose
// LLVM-LABEL: llvm.func @channels_last
// LLVM-COUNT-32: llvm.shufflevector
// LLVM-NOT: llvm.extractelement
func.func @channels_last(%v: vector<1x16x1x8xf32>) -> vector<1x1x8x16xf32> {
  %t = vector.transpose %v, [0, 2, 3, 1] : vector<1x16x1x8xf32> to vector<1x1x8x16xf32>
  return %t : vector<1x1x8x16xf32>
}

// -----

// Fewer rows than lanes (2 x 8 bytes): one stage, then each row split in halves twice.
// CHECK-LABEL: func.func @wide_rows
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 8, 2, 10, 4, 12, 6, 14] : vector<8xi8>, vector<8xi8>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [1, 9, 3, 11, 5, 13, 7, 15] : vector<8xi8>, vector<8xi8>
// CHECK-COUNT-4: vector.shuffle {{.*}} : vector<8xi8>, vector<8xi8>
// CHECK-COUNT-8: vector.shuffle {{.*}} : vector<4xi8>, vector<4xi8>
// CHECK: vector.insert %{{.*}}, %{{.*}} [7] : vector<2xi8> into vector<8x2xi8>
// LLVM-LABEL: llvm.func @wide_rows
// LLVM-NOT: llvm.extractelement
func.func @wide_rows(%v: vector<2x8xi8>) -> vector<8x2xi8> {
  %t = vector.transpose %v, [1, 0] : vector<2x8xi8> to vector<8x2xi8>
  return %t : vector<8x2xi8>
}

// -----

// Other extents are padded to powers of two: a peeled remainder's 5 lanes read as 8 (the
// extra lanes poison), 16 x 8 shuffled, the first 5 result rows kept; 3 rows (an RGB
// image's channels) get a poison fourth row and each result row keeps 3 lanes.
// CHECK-LABEL: func.func @odd_lanes
// CHECK-COUNT-16: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, -1, -1, -1] : vector<5xf32>, vector<5xf32>
// CHECK: vector.insert %{{.*}}, %{{.*}} [4] : vector<16xf32> into vector<5x16xf32>
// CHECK-NOT: vector.insert
// CHECK-NOT: vector.transpose
// CHECK-LABEL: func.func @odd_rows
// CHECK: %[[PAD:.*]] = ub.poison : vector<16xf32>
// CHECK: vector.shuffle %{{.*}}, %[[PAD]]
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2] : vector<4xf32>, vector<4xf32>
// CHECK: vector.insert %{{.*}}, %{{.*}} [15] : vector<3xf32> into vector<16x3xf32>
// CHECK-NOT: vector.transpose
// LLVM-LABEL: llvm.func @odd_lanes
// LLVM-NOT: llvm.extractelement
// LLVM-LABEL: llvm.func @odd_rows
// LLVM-NOT: llvm.extractelement
func.func @odd_lanes(%v: vector<16x5xf32>) -> vector<5x16xf32> {
  %t = vector.transpose %v, [1, 0] : vector<16x5xf32> to vector<5x16xf32>
  return %t : vector<5x16xf32>
}
func.func @odd_rows(%v: vector<3x16xf32>) -> vector<16x3xf32> {
  %t = vector.transpose %v, [1, 0] : vector<3x16xf32> to vector<16x3xf32>
  return %t : vector<16x3xf32>
}

// -----

// Left alone: a transpose that keeps the lanes innermost (rows of the same lanes move).
// CHECK-LABEL: func.func @lanes_kept
// CHECK: vector.transpose %{{.*}}, [1, 0, 2] : vector<4x4x2xf32> to vector<4x4x2xf32>
func.func @lanes_kept(%v: vector<4x4x2xf32>) -> vector<4x4x2xf32> {
  %t = vector.transpose %v, [1, 0, 2] : vector<4x4x2xf32> to vector<4x4x2xf32>
  return %t : vector<4x4x2xf32>
}
