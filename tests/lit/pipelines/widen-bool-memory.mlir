// tilecraft-widen-bool-memory: i1 buffers stored one byte per element. Loads are followed
// by a truncation to i1, stores preceded by a zero extension, and ops that only pass the
// address along (a subview, a prefetch of a mask's cache line) are retyped as they stand.
// RUN: tilecraft-opt %s --tilecraft-widen-bool-memory | FileCheck %s

// CHECK-LABEL: func.func @masks(
// CHECK-SAME: %[[ARG:.*]]: memref<64xi8>) -> i1
func.func @masks(%mask: memref<64xi1>) -> i1 {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %true = arith.constant true
  // CHECK: %[[VIEW:.*]] = memref.subview %[[ARG]][16] [16] [1] : memref<64xi8> to memref<16xi8, strided<[1], offset: 16>>
  %view = memref.subview %mask[16] [16] [1] : memref<64xi1> to memref<16xi1, strided<[1], offset: 16>>
  // CHECK: memref.prefetch %[[VIEW]][%{{.*}}], read, locality<3>, data : memref<16xi8, strided<[1], offset: 16>>
  memref.prefetch %view[%c0], read, locality<3>, data : memref<16xi1, strided<[1], offset: 16>>
  // CHECK: %[[BYTE:.*]] = arith.extui %{{.*}} : i1 to i8
  // CHECK: memref.store %[[BYTE]], %[[ARG]][%{{.*}}] : memref<64xi8>
  memref.store %true, %mask[%c16] : memref<64xi1>
  // CHECK: %[[LOADED:.*]] = memref.load %[[ARG]][%{{.*}}] : memref<64xi8>
  // CHECK: %[[BIT:.*]] = arith.trunci %[[LOADED]] : i8 to i1
  // CHECK: return %[[BIT]] : i1
  %bit = memref.load %mask[%c0] : memref<64xi1>
  return %bit : i1
}
