// Checked builds: tilecraft-verify-vector-accesses asserts that an in-bounds vector transfer
// stays inside its buffer (upstream's generate-runtime-verification checks memref ops only);
// tilecraft-route-runtime-verification turns each verification cf.assert into a report of a
// "verify" check and an early return (empty results), never abort(). Other asserts stay.
// RUN: tilecraft-opt %s --tilecraft-verify-vector-accesses | FileCheck %s --check-prefix=VECTOR
// RUN: tilecraft-opt %s --generate-runtime-verification --tilecraft-verify-vector-accesses --convert-scf-to-cf --tilecraft-route-runtime-verification | FileCheck %s

// VECTOR-LABEL: func.func @gather_row
// VECTOR: %[[DIM:.*]] = memref.dim %arg0, %{{.*}} : memref<?xf32>
// VECTOR: %[[END:.*]] = arith.addi %arg1, %{{.*}} : index
// VECTOR: arith.cmpi sge, %arg1, %{{.*}} : index
// VECTOR: arith.cmpi sle, %[[END]], %[[DIM]] : index
// VECTOR: cf.assert %{{.*}}, "ERROR: Runtime op verification failed\0A%{{[0-9]+}} = vector.transfer_read %arg0[%arg1]{{.*}}^ out-of-bounds access (a vector of [8] elements)
// VECTOR-NEXT: vector.transfer_read
// VECTOR-LABEL: func.func @constant_index
// VECTOR-NOT: cf.assert
// VECTOR-LABEL: func.func @other_asserts

// CHECK: module attributes {tilecraft.runtime_checks = ["verify\09run-time verification failed: out-of-bounds access (a vector of [8] elements) in `%{{[0-9]+}} = vector.transfer_read %arg0[%arg1], %cst {{[{][{]}}in_bounds = [true]{{[}][}]}} : memref<?xf32>, vector<8xf32>` at loc(
// CHECK-SAME: "verify\09run-time verification failed: out-of-bounds access in `%0 = memref.load %arg0[%arg1] : memref<16xf32>`
// CHECK: func.func private @tilecraft_check_failed(i64, i64, i64)
// CHECK-LABEL: func.func @gather_row
// CHECK-NOT: cf.assert
// CHECK: cf.cond_br %{{.*}}, ^[[CONT:bb[0-9]+]], ^[[FAIL:bb[0-9]+]]
// CHECK: ^[[FAIL]]:
// CHECK: call @tilecraft_check_failed(%{{.*}}, %{{.*}}, %{{.*}}) : (i64, i64, i64) -> ()
// CHECK: %[[EMPTY:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: return %[[EMPTY]] : f32
// CHECK: ^[[CONT]]:
// CHECK: vector.transfer_read
func.func @gather_row(%m: memref<?xf32>, %i: index) -> f32 {
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %m[%i], %pad {in_bounds = [true]} : memref<?xf32>, vector<8xf32>
  %s = vector.extract %v[0] : f32 from vector<8xf32>
  return %s : f32
}

// CHECK-LABEL: func.func @scalar_load
// CHECK: cf.cond_br
// CHECK: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK: call @tilecraft_check_failed(%[[ONE]],
// CHECK: memref.load %arg0[%arg1] : memref<16xf32>
func.func @scalar_load(%m: memref<16xf32>, %i: index) -> f32 {
  %v = memref.load %m[%i] : memref<16xf32>
  return %v : f32
}

// CHECK-LABEL: func.func @constant_index
// CHECK-NOT: tilecraft_check_failed
func.func @constant_index(%m: memref<16xf32>) -> vector<8xf32> {
  %c8 = arith.constant 8 : index
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %m[%c8], %pad {in_bounds = [true]} : memref<16xf32>, vector<8xf32>
  return %v : vector<8xf32>
}

// CHECK-LABEL: func.func @other_asserts
// CHECK: cf.assert %arg0, "not a verification"
func.func @other_asserts(%ok: i1) {
  cf.assert %ok, "not a verification"
  return
}
