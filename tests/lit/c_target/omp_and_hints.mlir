// The C target's OpenMP pass and loop hints on outlined nests: a matmul nest (i, k, j) whose
// outer loop writes row i of its output gets the pragma and its body moved into a function
// of its own; a row-sum nest whose every iteration writes y[0] gets none; each innermost
// loop gets TC_MODEL_INNER_LOOP (not the one right after the pragma).
// RUN: tilecraft-opt %s --tilecraft-c-outline-nests --canonicalize --tilecraft-c-omp-parallel --tilecraft-c-loop-hints | FileCheck %s

// CHECK-LABEL: func.func private @tc_model_nest0_body(
// CHECK-SAME: %[[I:.*]]: index, %[[A:.*]]: memref<8x16xf32>, %[[B:.*]]: memref<16x32xf32>, %[[C:.*]]: memref<8x32xf32>)
// CHECK: scf.for %[[K:.*]] =
// CHECK-NEXT: emitc.verbatim "TC_MODEL_INNER_LOOP"
// CHECK-NEXT: scf.for %[[J:.*]] =
// CHECK: memref.load %[[A]][%[[I]], %[[K]]]
// CHECK-LABEL: func.func private @tc_model_nest0(
// CHECK: emitc.verbatim "#pragma omp parallel for"
// CHECK-NEXT: scf.for %[[I0:.*]] =
// CHECK-NEXT: func.call @tc_model_nest0_body(%[[I0]],
// CHECK-LABEL: func.func private @tc_model_nest1(
// CHECK-NOT: #pragma omp
// CHECK: emitc.verbatim "TC_MODEL_INNER_LOOP"
// CHECK-NEXT: scf.for
// CHECK-NOT: #pragma omp
// CHECK-LABEL: func.func @f(
// CHECK: call @tc_model_nest0(
// CHECK: call @tc_model_nest1(
func.func @f(%a: memref<8x16xf32>, %b: memref<16x32xf32>, %c: memref<8x32xf32>, %y: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %k = %c0 to %c16 step %c1 {
      scf.for %j = %c0 to %c32 step %c1 {
        %x = memref.load %a[%i, %k] : memref<8x16xf32>
        %w = memref.load %b[%k, %j] : memref<16x32xf32>
        %o = memref.load %c[%i, %j] : memref<8x32xf32>
        %m = arith.mulf %x, %w : f32
        %s = arith.addf %o, %m : f32
        memref.store %s, %c[%i, %j] : memref<8x32xf32>
      }
    }
  }
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %k = %c0 to %c16 step %c1 {
      %x = memref.load %a[%i, %k] : memref<8x16xf32>
      %o = memref.load %y[%c0] : memref<1xf32>
      %s = arith.addf %o, %x : f32
      memref.store %s, %y[%c0] : memref<1xf32>
    }
  }
  return
}
