// RUN: tilecraft-opt %s --tilecraft-strided-copies-to-linalg | FileCheck %s

// A copy into the interior of a padded buffer (what bufferization makes of a tensor.pad):
// loops over the outer dims (the dynamic one bounded by the source's size), and along each
// 144-float row two 64-float transfers in a loop, then a 16-float tail. Not the runtime's
// element-by-element memrefCopy, and not scalar loops.
// CHECK-LABEL: func.func @pad_interior
// CHECK: %[[ROWS:.*]] = memref.dim %[[SOURCE:.*]], %{{.*}} : memref<1x?x56x144xf32
// CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %[[ROWS]]
// CHECK: scf.for %[[COL:.*]] = %{{.*}} to %c56
// CHECK: scf.for %[[AT:.*]] = %{{.*}} to %c128 step %c64
// CHECK: %[[CHUNK:.*]] = vector.transfer_read %[[SOURCE]][%{{.*}}, %[[ROW]], %[[COL]], %[[AT]]]{{.*}}in_bounds = [true]{{.*}}vector<64xf32>
// CHECK: vector.transfer_write %[[CHUNK]], %[[TARGET:.*]][%{{.*}}, %[[ROW]], %[[COL]], %[[AT]]]
// CHECK: %[[TAIL:.*]] = vector.transfer_read %[[SOURCE]][%{{.*}}, %[[ROW]], %[[COL]], %c128{{.*}}]{{.*}}vector<16xf32>
// CHECK: vector.transfer_write %[[TAIL]], %[[TARGET]]
// CHECK-NOT: memref.copy
// CHECK-NOT: linalg.copy
// CHECK: return
func.func @pad_interior(%x: memref<1x56x56x144xf32>, %buffer: memref<1x16x58x144xf32>, %row: index, %rows: index) {
  %source = memref.subview %x[0, %row, 0, 0] [1, %rows, 56, 144] [1, 1, 1, 1] : memref<1x56x56x144xf32> to memref<1x?x56x144xf32, strided<[451584, 8064, 144, 1], offset: ?>>
  %target = memref.subview %buffer[0, %row, 1, 0] [1, %rows, 56, 144] [1, 1, 1, 1] : memref<1x16x58x144xf32> to memref<1x?x56x144xf32, strided<[133632, 8352, 144, 1], offset: ?>>
  memref.copy %source, %target : memref<1x?x56x144xf32, strided<[451584, 8064, 144, 1], offset: ?>> to memref<1x?x56x144xf32, strided<[133632, 8352, 144, 1], offset: ?>>
  return
}

// A head's rows out of a fused Q/K/V projection (BERT): one 64-float transfer per row.
// CHECK-LABEL: func.func @head_rows
// CHECK: scf.for
// CHECK: scf.for
// CHECK-NOT: scf.for
// CHECK: vector.transfer_read {{.*}} vector<64xf32>
// CHECK: vector.transfer_write
func.func @head_rows(%qkv: memref<128x12x64xf32, strided<[2304, 64, 1], offset: 768>>, %k: memref<128x12x64xf32>) {
  memref.copy %qkv, %k : memref<128x12x64xf32, strided<[2304, 64, 1], offset: 768>> to memref<128x12x64xf32>
  return
}

// Rows that are not contiguous (a transposed view), or too short to fill a vector
// (two floats), stay loops of scalars: linalg.copy.
// CHECK-LABEL: func.func @strided_rows
// CHECK: linalg.copy
// CHECK-NOT: vector.transfer_read
func.func @strided_rows(%a: memref<4x8xf32, strided<[1, 4]>>, %b: memref<4x8xf32>) {
  memref.copy %a, %b : memref<4x8xf32, strided<[1, 4]>> to memref<4x8xf32>
  return
}
// CHECK-LABEL: func.func @short_rows
// CHECK: linalg.copy
// CHECK-NOT: vector.transfer_read
func.func @short_rows(%a: memref<16x2xf32, strided<[4, 1]>>, %b: memref<16x2xf32>) {
  memref.copy %a, %b : memref<16x2xf32, strided<[4, 1]>> to memref<16x2xf32>
  return
}

// Contiguous buffers keep memref.copy (it lowers to memcpy).
// CHECK-LABEL: func.func @contiguous
// CHECK: memref.copy
// CHECK-NOT: linalg.copy
func.func @contiguous(%a: memref<4x16xf32>, %b: memref<4x16xf32>) {
  memref.copy %a, %b : memref<4x16xf32> to memref<4x16xf32>
  return
}
