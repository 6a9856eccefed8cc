// RUN: tilecraft-opt %s --tilecraft-strided-copies-to-linalg | FileCheck %s

// A copy into the interior of a padded buffer (what bufferization makes of a tensor.pad)
// becomes linalg.copy: loops LLVM vectorizes instead of the runtime's memrefCopy.
// CHECK-LABEL: func.func @pad_interior
// CHECK: linalg.copy {{.*}}ins(%{{.*}} : memref<1x?x56x144xf32, strided<[451584, 8064, 144, 1], offset: ?>>) outs(%{{.*}} : memref<1x?x56x144xf32, strided<[133632, 8352, 144, 1], offset: ?>>)
// CHECK-NOT: memref.copy
func.func @pad_interior(%x: memref<1x56x56x144xf32>, %buffer: memref<1x16x58x144xf32>, %row: index, %rows: index) {
  %source = memref.subview %x[0, %row, 0, 0] [1, %rows, 56, 144] [1, 1, 1, 1] : memref<1x56x56x144xf32> to memref<1x?x56x144xf32, strided<[451584, 8064, 144, 1], offset: ?>>
  %target = memref.subview %buffer[0, %row, 1, 0] [1, %rows, 56, 144] [1, 1, 1, 1] : memref<1x16x58x144xf32> to memref<1x?x56x144xf32, strided<[133632, 8352, 144, 1], offset: ?>>
  memref.copy %source, %target : memref<1x?x56x144xf32, strided<[451584, 8064, 144, 1], offset: ?>> to memref<1x?x56x144xf32, strided<[133632, 8352, 144, 1], offset: ?>>
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
