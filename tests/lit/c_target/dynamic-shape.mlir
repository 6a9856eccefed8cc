// A dynamic shape stops here with the typed error.
// RUN: not tilecraft-opt %s --tilecraft-c-out-params 2>&1 | FileCheck %s --check-prefix=DYN
// DYN: CTargetShapeError: the C target needs static shapes
func.func @dynamic(%x: memref<?xf32>) -> memref<?xf32> {
  return %x : memref<?xf32>
}
