// tilecraft-c-out-params: a result that is a fresh allocation is written in place through
// the new output argument; a result that is an input is copied (linalg.copy, later loops).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-c-out-params | FileCheck %s

// CHECK-LABEL: func.func @fresh(%arg0: memref<4xf32>, %arg1: memref<4xf32> {tilecraft.c_output = 0 : i64})
// CHECK-NOT: memref.alloc
// CHECK: linalg.copy {{.*}}ins(%arg0 : memref<4xf32>) outs(%arg1 : memref<4xf32>)
// CHECK: return{{$}}
func.func @fresh(%x: memref<4xf32>) -> memref<4xf32> {
  %a = memref.alloc() : memref<4xf32>
  memref.copy %x, %a : memref<4xf32> to memref<4xf32>
  return %a : memref<4xf32>
}

// -----

// CHECK-LABEL: func.func @passthrough(%arg0: memref<2x3xf32>, %arg1: memref<2x3xf32> {tilecraft.c_output = 0 : i64}, %arg2: memref<6xf32> {tilecraft.c_output = 1 : i64})
// CHECK: %[[FLAT:.*]] = memref.collapse_shape %arg0
// CHECK: linalg.copy {{.*}}ins(%arg0 : memref<2x3xf32>) outs(%arg1 : memref<2x3xf32>)
// CHECK: linalg.copy {{.*}}ins(%[[FLAT]] : memref<6xf32>) outs(%arg2 : memref<6xf32>)
// CHECK: return{{$}}
func.func @passthrough(%x: memref<2x3xf32>) -> (memref<2x3xf32>, memref<6xf32>) {
  %f = memref.collapse_shape %x [[0, 1]] : memref<2x3xf32> into memref<6xf32>
  return %x, %f : memref<2x3xf32>, memref<6xf32>
}
