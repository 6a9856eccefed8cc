// tilecraft-fill-pad-borders: a buffer filled whole with one value and then copied into
// except for its borders (what bufferization makes of tensor.pad) fills only the borders:
// per dim the copy does not span, the slab before its offset and the slab after its end
// (dynamic offsets and sizes too), just before the copy. A buffer read before the copy
// keeps its whole fill.
// RUN: tilecraft-opt %s --tilecraft-fill-pad-borders | FileCheck %s

// CHECK-LABEL: func.func @pad
// CHECK-NOT: linalg.map
// CHECK: %[[LOW:.*]] = memref.subview %[[ALLOC:.*]][0, 0, 0, 0] [1, %arg1, 7, 8] [1, 1, 1, 1]
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[LOW]]
// CHECK: %[[END:.*]] = arith.addi %arg1, %arg2 : index
// CHECK: %[[HIGH:.*]] = arith.subi %{{.*}}, %[[END]] : index
// CHECK: %[[TAIL:.*]] = memref.subview %[[ALLOC]][0, %[[END]], 0, 0] [1, %[[HIGH]], 7, 8]
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[TAIL]]
// CHECK: %[[LEFT:.*]] = memref.subview %[[ALLOC]][0, 0, 0, 0] [1, 7, 1, 8]
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[LEFT]]
// CHECK-NOT: linalg.fill
// CHECK: memref.copy

// CHECK-LABEL: func.func @read_before_copy
// CHECK: linalg.map
// CHECK-NOT: linalg.fill
func.func @pad(%src: memref<1x4x6x8xf32>, %lo: index, %n: index) -> memref<1x7x7x8xf32> {
  %cst = arith.constant 0xFF800000 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x7x7x8xf32>
  linalg.map outs(%alloc : memref<1x7x7x8xf32>)
    (%init: f32) {
      linalg.yield %cst : f32
    }
  %in = memref.subview %src[0, 0, 0, 0] [1, %n, 6, 8] [1, 1, 1, 1] : memref<1x4x6x8xf32> to memref<1x?x6x8xf32, strided<[192, 48, 8, 1]>>
  %sv = memref.subview %alloc[0, %lo, 1, 0] [1, %n, 6, 8] [1, 1, 1, 1] : memref<1x7x7x8xf32> to memref<1x?x6x8xf32, strided<[392, 56, 8, 1], offset: ?>>
  memref.copy %in, %sv : memref<1x?x6x8xf32, strided<[192, 48, 8, 1]>> to memref<1x?x6x8xf32, strided<[392, 56, 8, 1], offset: ?>>
  return %alloc : memref<1x7x7x8xf32>
}
func.func @read_before_copy(%src: memref<1x6x6x8xf32>) -> (memref<1x8x8x8xf32>, f32) {
  %cst = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %alloc = memref.alloc() : memref<1x8x8x8xf32>
  linalg.map outs(%alloc : memref<1x8x8x8xf32>)
    (%init: f32) {
      linalg.yield %cst : f32
    }
  %x = memref.load %alloc[%c0, %c0, %c0, %c0] : memref<1x8x8x8xf32>
  %sv = memref.subview %alloc[0, 1, 1, 0] [1, 6, 6, 8] [1, 1, 1, 1] : memref<1x8x8x8xf32> to memref<1x6x6x8xf32, strided<[512, 64, 8, 1], offset: 72>>
  memref.copy %src, %sv : memref<1x6x6x8xf32> to memref<1x6x6x8xf32, strided<[512, 64, 8, 1], offset: 72>>
  return %alloc, %x : memref<1x8x8x8xf32>, f32
}
