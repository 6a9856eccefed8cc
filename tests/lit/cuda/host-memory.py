# Host side of a CUDA module after the `map` stage: arguments copied to device buffers, one
# gpu.launch per kernel, the result copied back into a host allocation, device buffers freed.
# RUN: %PYTHON %s | FileCheck %s

import tilecraft
from tilecraft.scheduling import compute, create_func, placeholder

A, B = placeholder((4096,), name="A"), placeholder((4096,), name="B")
C = compute((4096,), lambda i: A[i] + B[i], name="C")
module = tilecraft.compile(str(create_func([A, B, C])), target="cuda -arch=sm_80")
print(module.ir("map"))

# CHECK-LABEL: func.func @main(
# CHECK-SAME: %[[A:[a-z0-9]+]]: memref<4096xf32> {{.*}}, %[[B:[a-z0-9]+]]: memref<4096xf32>
# CHECK-DAG: %[[DA:.*]] = gpu.alloc () : memref<4096xf32>
# CHECK-DAG: gpu.memcpy  %[[DA]], %[[A]] : memref<4096xf32>, memref<4096xf32>
# CHECK-DAG: %[[DB:.*]] = gpu.alloc () : memref<4096xf32>
# CHECK-DAG: gpu.memcpy  %[[DB]], %[[B]] : memref<4096xf32>, memref<4096xf32>
# CHECK: %[[DC:.*]] = gpu.alloc () : memref<4096xf32>
# CHECK: gpu.launch blocks
# CHECK: gpu.thread_id  x
# CHECK: gpu.terminator
# CHECK: %[[HC:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4096xf32>
# CHECK: gpu.memcpy  %[[HC]], %[[DC]]
# CHECK-DAG: gpu.dealloc  %[[DC]]
# CHECK-DAG: gpu.dealloc  %[[DA]]
# CHECK-DAG: gpu.dealloc  %[[DB]]
# CHECK: return %[[HC]]
