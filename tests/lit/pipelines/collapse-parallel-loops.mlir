// tilecraft-collapse-parallel-loops: a multi-dimensional scf.parallel becomes one dimension
// (async-parallel-for ran some blocks of 2-D loops twice; see pipelines/buffer/parallel_loops.py).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-collapse-parallel-loops | FileCheck %s

// CHECK-LABEL: func.func @grid
// The loop's constants are created next to it (the originals are left to canonicalize).
// CHECK-DAG: %[[C1:c1_[0-9]+]] = arith.constant 1 : index
// CHECK-DAG: %[[C5:c5_[0-9]+]] = arith.constant 5 : index
// CHECK-DAG: %[[C25:c25_[0-9]+]] = arith.constant 25 : index
// CHECK-DAG: %[[C125:.*]] = arith.constant 125 : index
// CHECK: scf.parallel (%[[IV:.*]]) = (%{{.*}}) to (%[[C125]]) step (%[[C1]]) {
// CHECK: %[[Q:.*]] = arith.divui %[[IV]], %[[C5]]
// CHECK: %[[I:.*]] = arith.remui %[[Q]], %[[C25]]
// CHECK: %[[R:.*]] = arith.divui %[[IV]], %[[C1]]
// CHECK: %[[J:.*]] = arith.remui %[[R]], %[[C5]]
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]]
// CHECK-NOT: scf.parallel
func.func @grid(%m: memref<25x5xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c25 = arith.constant 25 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c25, %c5) step (%c1, %c1) {
    memref.store %v, %m[%i, %j] : memref<25x5xf32>
    scf.reduce
  }
  return
}

// -----

// Lower bounds and steps are kept: (2, 1) to (10, 7) step (4, 3) is 2 x 2 iterations.
// CHECK-LABEL: func.func @strided
// CHECK-DAG: %[[C4:c4_[0-9]+]] = arith.constant 4 : index
// CHECK-DAG: %[[C2:c2_[0-9]+]] = arith.constant 2 : index
// CHECK: scf.parallel (%[[IV:.*]]) = (%{{.*}}) to (%[[C4]]) step
// CHECK: %[[Q:.*]] = arith.divui %[[IV]], %[[C2]]
// CHECK: %[[P:.*]] = arith.remui %[[Q]], %[[C2]]
// CHECK: %[[S:.*]] = arith.muli %[[P]], %[[C4]]
// CHECK: %[[I:.*]] = arith.addi %[[S]], %[[C2]]
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[I]], %{{.*}}]
func.func @strided(%m: memref<16x16xf32>, %v: f32) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c7 = arith.constant 7 : index
  %c10 = arith.constant 10 : index
  scf.parallel (%i, %j) = (%c2, %c1) to (%c10, %c7) step (%c4, %c3) {
    memref.store %v, %m[%i, %j] : memref<16x16xf32>
    scf.reduce
  }
  return
}

// -----

// Negative: dynamic bounds and 1-D loops are left alone.
// CHECK-LABEL: func.func @dynamic
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) =
// CHECK: scf.parallel (%{{.*}}) =
func.func @dynamic(%m: memref<?x8xf32>, %n: index, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c8) step (%c1, %c1) {
    memref.store %v, %m[%i, %j] : memref<?x8xf32>
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    memref.store %v, %m[%c0, %i] : memref<?x8xf32>
    scf.reduce
  }
  return
}
