// Upstream and tilecraft passes mix, in order, as flags or as one --pass-pipeline.
// RUN: tilecraft-opt %s --tilecraft-prepare-entry --canonicalize | FileCheck %s
// RUN: tilecraft-opt %s --pass-pipeline='builtin.module(tilecraft-prepare-entry,canonicalize)' | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-prepare-entry --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=DUMP

// CHECK-LABEL: func.func @add_zero
// CHECK-SAME: {bufferization.writable = false}
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-NOT: arith.addi
// CHECK: return %arg0
func.func @add_zero(%x: tensor<4xi32>) -> tensor<4xi32> {
  %zero = arith.constant dense<0> : tensor<4xi32>
  %r = arith.addi %x, %zero : tensor<4xi32>
  return %r : tensor<4xi32>
}

// Private functions are not entry points: untouched.
// CHECK-LABEL: func.func private @helper
// CHECK-NOT: bufferization.writable
// CHECK-NOT: llvm.emit_c_interface
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// DUMP: IR Dump After tilecraft-prepare-entry
