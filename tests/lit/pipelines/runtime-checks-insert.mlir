// tilecraft-insert-runtime-checks: a marker call before each op whose dynamic sizes must
// agree (matmul inner dims, the output's rows), after an expand_shape (element counts); none
// for static shapes. enabled=0 removes every marker, the emitters' too.
// RUN: tilecraft-opt %s --tilecraft-insert-runtime-checks | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-insert-runtime-checks --resolve-ranked-shaped-type-result-dims --canonicalize | FileCheck %s --check-prefix=RESOLVED
// RUN: tilecraft-opt %s --tilecraft-insert-runtime-checks="enabled=0" | FileCheck %s --check-prefix=OFF

// CHECK: module attributes {tilecraft.runtime_checks_enabled}
// CHECK: func.func private @tilecraft_runtime_check(i1, i64, i64)
// CHECK-LABEL: func.func @matmul
// CHECK: %[[K_B:.*]] = tensor.dim %arg1, %{{.*}} : tensor<?x8xf32>
// CHECK: %[[K_A:.*]] = tensor.dim %arg0, %{{.*}} : tensor<?x?xf32>
// CHECK: %[[EQ:.*]] = arith.cmpi eq, %[[K_B]], %[[K_A]] : index
// CHECK: call @tilecraft_runtime_check(%[[EQ]], {{.*}}) {tilecraft.check_kind = "shape", tilecraft.check_message = "operand 1 has size {value} along axis 0 where operand 0 has {bound} (loop 2)"}
// CHECK-NEXT: linalg.matmul
// RESOLVED-LABEL: func.func @matmul
// RESOLVED-NOT: tensor.dim %{{[0-9]+}}
// RESOLVED: linalg.matmul
// OFF-NOT: tilecraft_runtime_check
func.func @matmul(%a: tensor<?x?xf32>, %b: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x8xf32>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// CHECK-LABEL: func.func @expand
// CHECK: tensor.expand_shape
// CHECK: arith.cmpi eq
// CHECK: call @tilecraft_runtime_check({{.*}}tilecraft.check_message = "a dimension of {value} elements is reshaped into {bound} elements (axis 0)"
// RESOLVED-LABEL: func.func @expand
// RESOLVED: %[[N4:.*]] = arith.muli %arg1, %c4
// RESOLVED: arith.cmpi eq, %{{.*}}, %[[N4]]
func.func @expand(%x: tensor<?xf32>, %n: index) -> tensor<?x4xf32> {
  %r = tensor.expand_shape %x [[0, 1]] output_shape [%n, 4] : tensor<?xf32> into tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}

// CHECK-LABEL: func.func @static
// CHECK-NOT: tilecraft_runtime_check
// CHECK: return
func.func @static(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>, %c: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x2xf32>) outs(%c : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}
