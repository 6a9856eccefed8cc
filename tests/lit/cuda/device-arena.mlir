// tilecraft-gpu-plan-arena: a function's device buffers become views of one arena at planned
// offsets (lifetimes from the first to the last use; the deallocs at the end do not count),
// acquired from the runtime at the start and released before the return.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-gpu-plan-arena | FileCheck %s

// %a (in: 1024 B) is dead after the first kernel, so %c reuses its bytes; %b (out) lives on.
// CHECK-DAG: llvm.mlir.global internal @__tilecraft_arena_0(dense<0> : tensor<2xi64>) {{.*}} : !llvm.array<2 x i64>
// CHECK-DAG: llvm.func @tilecraft_cuda_arena_acquire(!llvm.ptr, i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @tilecraft_cuda_arena_release(!llvm.ptr, !llvm.ptr)
// CHECK-LABEL: func.func @main(
// CHECK-SAME: tilecraft.device_arena_bytes = 2048 : i64, tilecraft.device_buffer_bytes = 3072 : i64
// CHECK: %[[SLOT:.*]] = llvm.mlir.addressof @__tilecraft_arena_0
// CHECK: %[[BYTES:.*]] = llvm.mlir.constant(2048 : i64)
// CHECK: %[[BASE:.*]] = llvm.call @tilecraft_cuda_arena_acquire(%[[SLOT]], %[[BYTES]])
// CHECK: %[[ARENA:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<2048xi8>
// CHECK: memref.view %[[ARENA]][%c0{{(_[0-9]+)?}}][] : memref<2048xi8> to memref<256xf32>
// CHECK: memref.view %[[ARENA]][%c1024{{(_[0-9]+)?}}][] : memref<2048xi8> to memref<256xf32>
// CHECK: memref.view %[[ARENA]][%c0{{(_[0-9]+)?}}][] : memref<2048xi8> to memref<256xf32>
// CHECK-NOT: gpu.alloc
// CHECK-NOT: gpu.dealloc
// CHECK: llvm.call @tilecraft_cuda_arena_release(%[[SLOT]], %[[BASE]])
// CHECK-NEXT: return
func.func @main(%in: memref<256xf32>, %out: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %a = gpu.alloc () : memref<256xf32>
  gpu.memcpy %a, %in : memref<256xf32>, memref<256xf32>
  %b = gpu.alloc () : memref<256xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    %f = memref.load %a[%tx] : memref<256xf32>
    memref.store %f, %b[%tx] : memref<256xf32>
    gpu.terminator
  }
  %c = gpu.alloc () : memref<256xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    %f = memref.load %b[%tx] : memref<256xf32>
    memref.store %f, %c[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.memcpy %out, %c : memref<256xf32>, memref<256xf32>
  gpu.dealloc %a : memref<256xf32>
  gpu.dealloc %b : memref<256xf32>
  gpu.dealloc %c : memref<256xf32>
  return
}

// -----

// Kept as their own allocations: a weight's device copy (resident weights keep it), a
// buffer passed to a call, a dynamically sized one, one in a loop.
// CHECK-LABEL: func.func @kept(
// CHECK-NOT: tilecraft_cuda_arena_acquire
// CHECK-COUNT-4: gpu.alloc
memref.global "private" constant @w : memref<4xf32> = dense<1.0>
func.func private @helper(memref<4xf32>)
func.func @kept(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %g = memref.get_global @w : memref<4xf32>
  %weight = gpu.alloc () : memref<4xf32>
  gpu.memcpy %weight, %g : memref<4xf32>, memref<4xf32>
  %called = gpu.alloc () : memref<4xf32>
  func.call @helper(%called) : (memref<4xf32>) -> ()
  %dynamic = gpu.alloc (%n) : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %inner = gpu.alloc () : memref<4xf32>
    gpu.dealloc %inner : memref<4xf32>
  }
  gpu.dealloc %weight : memref<4xf32>
  gpu.dealloc %called : memref<4xf32>
  gpu.dealloc %dynamic : memref<?xf32>
  return
}
