# A staged matmul keeps each thread's 4x4 accumulator tile in registers across the K loop:
# loaded once before it, carried as an iter_arg through the copies, barriers and FMAs,
# stored once after it (fill-blocks=1: the 64 x 64 block tile of 4 x 4 thread tiles, not
# shrunk toward a full grid).
# RUN: %PYTHON %s | FileCheck %s

import tilecraft
from tilecraft.targets.cuda import cuda_pipeline

MATMUL = """
func.func @matmul(%a: tensor<256x128xf32>, %b: tensor<128x192xf32>) -> tensor<256x192xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<256x192xf32>
  %c = linalg.fill ins(%zero : f32) outs(%empty : tensor<256x192xf32>) -> tensor<256x192xf32>
  %r = linalg.matmul ins(%a, %b : tensor<256x128xf32>, tensor<128x192xf32>)
                     outs(%c : tensor<256x192xf32>) -> tensor<256x192xf32>
  return %r : tensor<256x192xf32>
}
"""
PIPELINE = cuda_pipeline("cuda -arch=sm_80", schedule_options="fill-blocks=1")
print(tilecraft.compile(MATMUL, target="cuda -arch=sm_80", pipeline=PIPELINE).ir("map"))

# CHECK: gpu.launch
# CHECK: %[[C:.*]] = memref.subview {{.*}} to memref<4x4xf32
# CHECK: %[[ACC:.*]] = vector.transfer_read %[[C]]{{.*}} vector<4x4xf32>
# CHECK: %[[OUT:.*]] = scf.for {{.*}} iter_args(%[[CARRY:.*]] = %[[ACC]]) -> (vector<4x4xf32>)
# CHECK-NOT: vector.transfer_write {{.*}}, %[[C]]
# CHECK: #gpu.address_space<workgroup>
# CHECK: gpu.barrier
# CHECK: scf.for {{.*}} iter_args({{.*}} = %[[CARRY]]) -> (vector<4x4xf32>)
# CHECK: vector.contract
# CHECK: gpu.barrier
# CHECK: scf.yield
# CHECK: vector.transfer_write %[[OUT]], %[[C]]
