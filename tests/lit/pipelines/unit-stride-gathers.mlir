// tilecraft-unit-stride-gathers: a vector.gather from a memref whose innermost stride is not
// 1 (one column of a buffer, collapsed: what F.pad(mode="circular") bufferizes to) reads a
// unit-stride reinterpret_cast of the same memory at offsets and indices scaled by the
// strides; convert-vector-to-llvm then lowers it (it could not before: the JIT failed). A
// gather from a contiguous memref is left alone.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-unit-stride-gathers | FileCheck %s
// RUN: tilecraft-opt %s --split-input-file --tilecraft-unit-stride-gathers --convert-vector-to-llvm --convert-to-llvm --reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM

// CHECK-LABEL: func.func @column
// CHECK-SAME: (%[[BASE:.*]]: memref<12xf32, strided<[7], offset: 4>>, %[[I:.*]]: index, %[[V:.*]]: vector<7xindex>
// CHECK-DAG: %[[SEVEN:.*]] = arith.constant dense<7> : vector<7xindex>
// CHECK-DAG: %[[FLAT:.*]] = memref.reinterpret_cast %[[BASE]] to offset: [4], sizes: [78], strides: [1] : memref<12xf32, strided<[7], offset: 4>> to memref<78xf32, strided<[1], offset: 4>>
// CHECK-DAG: %[[SCALED:.*]] = arith.muli %[[V]], %[[SEVEN]] : vector<7xindex>
// CHECK: %[[G:.*]] = vector.gather %[[FLAT]][%{{.*}}] [%[[SCALED]]], %{{.*}}, %{{.*}} : memref<78xf32, strided<[1], offset: 4>>
// CHECK: return %[[G]]
// LLVM-LABEL: llvm.func @column
// LLVM: llvm.intr.masked.gather
// LLVM-NOT: unrealized_conversion_cast
func.func @column(%base: memref<12xf32, strided<[7], offset: 4>>, %i: index, %v: vector<7xindex>,
                  %mask: vector<7xi1>, %pass: vector<7xf32>) -> vector<7xf32> {
  %g = vector.gather %base[%i] [%v], %mask, %pass : memref<12xf32, strided<[7], offset: 4>>, vector<7xindex>, vector<7xi1>, vector<7xf32> into vector<7xf32>
  return %g : vector<7xf32>
}

// -----

// Two dims: the base offsets are linearized with the strides (i * 14 + j * 2).
// CHECK-LABEL: func.func @every_other
// CHECK-SAME: (%[[BASE:.*]]: memref<3x6xf32, strided<[14, 2], offset: 1>>, %[[I:[^:]*]]: index, %[[J:[^:]*]]: index
// CHECK-DAG: memref.reinterpret_cast %[[BASE]] to offset: [1], sizes: [39], strides: [1]
// CHECK-DAG: %[[C14:.*]] = arith.constant 14 : index
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG: arith.muli %[[I]], %[[C14]] : index
// CHECK-DAG: arith.muli %[[J]], %[[C2]] : index
// CHECK: vector.gather {{.*}} : memref<39xf32, strided<[1], offset: 1>>, vector<4xindex>
// LLVM-LABEL: llvm.func @every_other
// LLVM: llvm.intr.masked.gather
func.func @every_other(%base: memref<3x6xf32, strided<[14, 2], offset: 1>>, %i: index, %j: index,
                       %v: vector<4xindex>, %mask: vector<4xi1>, %pass: vector<4xf32>) -> vector<4xf32> {
  %g = vector.gather %base[%i, %j] [%v], %mask, %pass : memref<3x6xf32, strided<[14, 2], offset: 1>>, vector<4xindex>, vector<4xi1>, vector<4xf32> into vector<4xf32>
  return %g : vector<4xf32>
}

// -----

// CHECK-LABEL: func.func @contiguous
// CHECK-NOT: reinterpret_cast
// CHECK: vector.gather %{{.*}}[%{{.*}}] [%{{.*}}], %{{.*}}, %{{.*}} : memref<24xf32>
func.func @contiguous(%base: memref<24xf32>, %i: index, %v: vector<4xindex>, %mask: vector<4xi1>,
                      %pass: vector<4xf32>) -> vector<4xf32> {
  %g = vector.gather %base[%i] [%v], %mask, %pass : memref<24xf32>, vector<4xindex>, vector<4xi1>, vector<4xf32> into vector<4xf32>
  return %g : vector<4xf32>
}
