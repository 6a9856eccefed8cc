# Host side of a CUDA module after the `map` stage: arguments copied to device buffers, one
# gpu.launch per kernel, the result copied into its destination, a trailing argument (the
# output-argument convention: the caller's buffer, device or host, or a null one and then a
# fresh host allocation); the device buffers at planned offsets of one arena that the runtime
# keeps across calls.
# RUN: %PYTHON %s | FileCheck %s

import tilecraft
from tilecraft.scheduling import compute, create_func, placeholder

A, B = placeholder((4096,), name="A"), placeholder((4096,), name="B")
C = compute((4096,), lambda i: A[i] + B[i], name="C")
module = tilecraft.compile(str(create_func([A, B, C])), target="cuda -arch=sm_80")
print(module.ir("map"))

# CHECK-LABEL: func.func @main(
# CHECK-SAME: %[[A:[a-z0-9]+]]: memref<4096xf32> {tilecraft.name = "A"},
# CHECK-SAME: %[[B:[a-z0-9]+]]: memref<4096xf32> {tilecraft.name = "B"},
# CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<4096xf32>) -> memref<4096xf32>
# CHECK-SAME: tilecraft.device_arena_bytes = 49152 : i64
# CHECK-SAME: tilecraft.output_arguments = 1 : i64
# The device buffers are views of the call's arena (tilecraft-gpu-plan-arena): all three live
# at once, so none shares bytes.
# CHECK: %[[SLOT:.*]] = llvm.mlir.addressof @__tilecraft_arena_0
# CHECK: %[[BASE:.*]] = llvm.call @tilecraft_cuda_arena_acquire(%[[SLOT]]
# CHECK: %[[ARENA:.*]] = builtin.unrealized_conversion_cast {{.*}} to memref<49152xi8>
# CHECK-DAG: %[[DA:.*]] = memref.view %[[ARENA]][%{{.*}}][] : memref<49152xi8> to memref<4096xf32>
# CHECK-DAG: gpu.memcpy  %[[DA]], %[[A]] : memref<4096xf32>, memref<4096xf32>
# CHECK-DAG: %[[DB:.*]] = memref.view %[[ARENA]][%{{.*}}][] : memref<49152xi8> to memref<4096xf32>
# CHECK-DAG: gpu.memcpy  %[[DB]], %[[B]] : memref<4096xf32>, memref<4096xf32>
# CHECK: %[[DC:.*]] = memref.view %[[ARENA]]
# CHECK: gpu.launch blocks
# CHECK: gpu.thread_id  x
# CHECK: gpu.terminator
# CHECK: %[[POINTER:.*]] = memref.extract_aligned_pointer_as_index %[[OUT]]
# CHECK: %[[NULL:.*]] = arith.cmpi eq, %[[POINTER]], %c0
# CHECK: %[[HC:.*]] = scf.if %[[NULL]] -> (memref<4096xf32>) {
# CHECK-NEXT: %[[HOST:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4096xf32>
# CHECK-NEXT: scf.yield %[[HOST]]
# CHECK-NEXT: } else {
# CHECK-NEXT: scf.yield %[[OUT]]
# CHECK: gpu.memcpy  %[[HC]], %[[DC]]
# CHECK-NOT: gpu.dealloc
# CHECK: llvm.call @tilecraft_cuda_arena_release(%[[SLOT]], %[[BASE]])
# CHECK: return %[[HC]]
