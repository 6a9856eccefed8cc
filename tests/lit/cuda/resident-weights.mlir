// tilecraft-gpu-resident-weights: a weight's per-call upload (alloc, copy from a constant
// global, free) becomes one call of the runtime that uploads it once into a module slot.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-gpu-resident-weights | FileCheck %s

// CHECK-DAG: llvm.mlir.global internal @__tilecraft_resident_0(0 : i64) {{.*}}alignment = 8 : i64} : i64
// CHECK-DAG: llvm.func @tilecraft_cuda_resident(!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> !llvm.ptr
// CHECK-LABEL: llvm.func @main(
// CHECK-SAME: %[[ARG:.*]]: !llvm.ptr
// CHECK: %[[S:.*]] = llvm.call @mgpuStreamCreate()
// CHECK: llvm.mlir.addressof @weight
// CHECK: %[[W:.*]] = llvm.getelementptr
// CHECK: %[[SLOT:.*]] = llvm.mlir.addressof @__tilecraft_resident_0
// CHECK: %[[D:.*]] = llvm.call @tilecraft_cuda_resident(%[[SLOT]], %[[W]], %{{.*}}, %[[S]])
// CHECK: llvm.call @use(%[[D]])
// The argument's copy stays a per-call copy, freed at the end; the weight's is not freed.
// CHECK: %[[A:.*]] = llvm.call @mgpuMemAlloc
// CHECK: llvm.call @mgpuMemcpy(%[[A]], %[[ARG]]
// CHECK-NOT: llvm.call @mgpuMemFree(%[[D]]
// CHECK: llvm.call @mgpuMemFree(%[[A]]
// CHECK-NOT: llvm.call @mgpuMemFree
llvm.mlir.global internal constant @weight(dense<1.0> : tensor<16xf32>) {alignment = 64 : i64} : !llvm.array<16 x f32>
llvm.func @mgpuStreamCreate() -> !llvm.ptr
llvm.func @mgpuMemAlloc(i64, !llvm.ptr, i8) -> !llvm.ptr
llvm.func @mgpuMemcpy(!llvm.ptr, !llvm.ptr, i64, !llvm.ptr)
llvm.func @mgpuMemFree(!llvm.ptr, !llvm.ptr)
llvm.func @use(!llvm.ptr)
llvm.func @main(%arg: !llvm.ptr) {
  %bytes = llvm.mlir.constant(64 : i64) : i64
  %false = llvm.mlir.constant(0 : i8) : i8
  %stream = llvm.call @mgpuStreamCreate() : () -> !llvm.ptr
  %weight = llvm.mlir.addressof @weight : !llvm.ptr
  %first = llvm.getelementptr %weight[0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.array<16 x f32>
  %device = llvm.call @mgpuMemAlloc(%bytes, %stream, %false) : (i64, !llvm.ptr, i8) -> !llvm.ptr
  llvm.call @mgpuMemcpy(%device, %first, %bytes, %stream) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()
  llvm.call @use(%device) : (!llvm.ptr) -> ()
  %input = llvm.call @mgpuMemAlloc(%bytes, %stream, %false) : (i64, !llvm.ptr, i8) -> !llvm.ptr
  llvm.call @mgpuMemcpy(%input, %arg, %bytes, %stream) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()
  llvm.call @use(%input) : (!llvm.ptr) -> ()
  llvm.call @mgpuMemFree(%device, %stream) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.call @mgpuMemFree(%input, %stream) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.return
}

// -----

// Not weights: a mutable global, a constant global's slice at an offset, and a weight copy
// something writes into afterwards stay per-call copies.
// CHECK-LABEL: llvm.func @not_weights(
// CHECK-NOT: tilecraft_cuda_resident
// CHECK-COUNT-3: llvm.call @mgpuMemFree
llvm.mlir.global internal @state(dense<0.0> : tensor<16xf32>) : !llvm.array<16 x f32>
llvm.mlir.global internal constant @table(dense<1.0> : tensor<16xf32>) : !llvm.array<16 x f32>
llvm.func @mgpuMemAlloc(i64, !llvm.ptr, i8) -> !llvm.ptr
llvm.func @mgpuMemcpy(!llvm.ptr, !llvm.ptr, i64, !llvm.ptr)
llvm.func @mgpuMemFree(!llvm.ptr, !llvm.ptr)
llvm.func @not_weights(%stream: !llvm.ptr, %arg: !llvm.ptr) {
  %bytes = llvm.mlir.constant(32 : i64) : i64
  %false = llvm.mlir.constant(0 : i8) : i8
  %state = llvm.mlir.addressof @state : !llvm.ptr
  %a = llvm.call @mgpuMemAlloc(%bytes, %stream, %false) : (i64, !llvm.ptr, i8) -> !llvm.ptr
  llvm.call @mgpuMemcpy(%a, %state, %bytes, %stream) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()
  %table = llvm.mlir.addressof @table : !llvm.ptr
  %half = llvm.getelementptr %table[0, 8] : (!llvm.ptr) -> !llvm.ptr, !llvm.array<16 x f32>
  %b = llvm.call @mgpuMemAlloc(%bytes, %stream, %false) : (i64, !llvm.ptr, i8) -> !llvm.ptr
  llvm.call @mgpuMemcpy(%b, %half, %bytes, %stream) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()
  %c = llvm.call @mgpuMemAlloc(%bytes, %stream, %false) : (i64, !llvm.ptr, i8) -> !llvm.ptr
  llvm.call @mgpuMemcpy(%c, %table, %bytes, %stream) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()
  llvm.call @mgpuMemcpy(%c, %arg, %bytes, %stream) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()
  llvm.call @mgpuMemFree(%a, %stream) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.call @mgpuMemFree(%b, %stream) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.call @mgpuMemFree(%c, %stream) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.return
}
