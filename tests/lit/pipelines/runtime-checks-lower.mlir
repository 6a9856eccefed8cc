// tilecraft-lower-runtime-checks: the shape check that reads arguments only moves to the
// function's start and branches to a block that reports and returns an empty result; a
// dynamic allocation is checked against max-bytes first and for a NULL result after (a
// failure frees what was allocated and would be freed or returned later); an index check
// reports and goes on.
// Never cf.assert.
// RUN: tilecraft-opt %s --tilecraft-lower-runtime-checks="max-bytes=1024" | FileCheck %s

// CHECK: module attributes {tilecraft.runtime_checks = ["shape\09f node 'copy': size {value} where {bound} is needed", "alloc\09{{.*}}needs {value} bytes{{.*}}", "alloc\09{{.*}}failed (out of memory)", "alloc\09{{.*}}", "alloc\09{{.*}}", "index\09index {value} out of range for axis 0 of size {bound}"]
// CHECK: func.func private @tilecraft_check_failed(i64, i64, i64)
// CHECK-LABEL: func.func @f(
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[DIM:.*]] = memref.dim %arg0, %[[C0]]
// CHECK-NEXT: %[[OK:.*]] = arith.cmpi eq, %[[DIM]], %arg1
// CHECK: cf.cond_br %[[OK]], ^[[ON:.*]], ^[[SHAPE_FAIL:bb[0-9]+]]
// CHECK: ^[[ON]]:
// CHECK: %[[LIMIT:.*]] = arith.constant 1024 : index
// CHECK: cf.cond_br %{{.*}}, ^[[ALLOC1:.*]], ^[[SIZE_FAIL1:bb[0-9]+]]
// CHECK: ^[[ALLOC1]]:
// CHECK-NEXT: %[[BUF:.*]] = memref.alloc(%arg1)
// CHECK-NEXT: %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %[[BUF]]
// CHECK: cf.cond_br %{{.*}}, ^{{.*}}, ^[[NULL_FAIL1:bb[0-9]+]]
// CHECK: cf.cond_br %{{.*}}, ^[[ALLOC2:.*]], ^[[SIZE_FAIL2:bb[0-9]+]]
// CHECK: ^[[ALLOC2]]:
// CHECK-NEXT: %[[TMP:.*]] = memref.alloc(%arg1)
// CHECK: cf.cond_br %{{.*}}, ^{{.*}}, ^{{bb[0-9]+}}
// CHECK: scf.if
// CHECK: func.call @tilecraft_check_failed(%c5_i64{{.*}}, %arg2, %{{.*}})
// CHECK: memref.copy
// CHECK: return %[[BUF]]
// CHECK: call @tilecraft_check_failed
// CHECK-NEXT: memref.dealloc %[[BUF]]
// CHECK-NEXT: memref.dealloc %[[TMP]]
// CHECK: return
// CHECK: ^[[SIZE_FAIL2]]:
// CHECK-NEXT: %[[ID3:.*]] = arith.constant 3 : i64
// CHECK-NEXT: call @tilecraft_check_failed(%[[ID3]]
// CHECK-NEXT: memref.dealloc %[[BUF]]
// CHECK: memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK-NEXT: return
// CHECK: ^[[NULL_FAIL1]]:
// CHECK: ^[[SIZE_FAIL1]]:
// CHECK-NOT: memref.dealloc
// CHECK: return
// CHECK: ^[[SHAPE_FAIL]]:
// CHECK-NEXT: %[[ID0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: call @tilecraft_check_failed(%[[ID0]], %{{.*}}, %{{.*}})
// CHECK-NOT: memref.dealloc
// CHECK: return
// CHECK-NOT: cf.assert
// CHECK-NOT: tilecraft_runtime_check
module attributes {tilecraft.runtime_checks_enabled} {
  func.func private @tilecraft_runtime_check(i1, i64, i64)
  func.func @f(%a: memref<?xf32>, %n: index, %i: i64) -> memref<?xf32> {
    %c0 = arith.constant 0 : index
    %buf = memref.alloc(%n) : memref<?xf32>
    %tmp = memref.alloc(%n) : memref<?xf32>
    %d = memref.dim %a, %c0 : memref<?xf32>
    %ok = arith.cmpi eq, %d, %n : index
    %v = arith.index_cast %d : index to i64
    %b = arith.index_cast %n : index to i64
    call @tilecraft_runtime_check(%ok, %v, %b) {tilecraft.check_kind = "shape", tilecraft.check_message = "size {value} where {bound} is needed"} : (i1, i64, i64) -> () loc("copy(f)")
    %c5 = arith.constant 5 : i64
    %in = arith.cmpi slt, %i, %c5 : i64
    call @tilecraft_runtime_check(%in, %i, %c5) {tilecraft.check_kind = "index", tilecraft.check_message = "index {value} out of range for axis 0 of size {bound}"} : (i1, i64, i64) -> ()
    memref.copy %a, %tmp : memref<?xf32> to memref<?xf32>
    memref.copy %tmp, %buf : memref<?xf32> to memref<?xf32>
    memref.dealloc %tmp : memref<?xf32>
    return %buf : memref<?xf32>
  }
}
