# A tuner-generated schedule (payload + script) replays with tilecraft-opt, without Python:
# a matmul point with a K cache block and a 4x32 register tile, packing B (each 64x32 panel
# copied once before the M loop reuses it) or A (the M register loop moves outside, each
# 4x64 sliver copied once, then read by every register tile across N).
# RUN: %PYTHON %s b %t.b.mlir | FileCheck %s --check-prefix=SCRIPT-B
# RUN: tilecraft-opt %t.b.mlir --transform-interpreter --canonicalize | FileCheck %s --check-prefixes=CHECK,CHECK-B
# RUN: %PYTHON %s a %t.a.mlir | FileCheck %s --check-prefix=SCRIPT-A
# RUN: tilecraft-opt %t.a.mlir --transform-interpreter --canonicalize | FileCheck %s --check-prefixes=CHECK,CHECK-A

import sys

from tilecraft.tuning import extract_tasks
from tilecraft.schedule.apply import reproducer

MATMUL = """
func.func @mm(%a: tensor<128x256xf32>, %b: tensor<256x128xf32>) -> tensor<128x128xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<128x128xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<128x128xf32>) -> tensor<128x128xf32>
  %c = linalg.matmul ins(%a, %b : tensor<128x256xf32>, tensor<256x128xf32>)
                     outs(%init : tensor<128x128xf32>) -> tensor<128x128xf32>
  return %c : tensor<128x128xf32>
}
"""

packed, path = sys.argv[1], sys.argv[2]
(task,) = extract_tasks(MATMUL, "llvm -mcpu=znver4")
config = {"par_m": 32, "par_n": 128, "cache_k": 64, "reg_m": 4, "reg_n": 32, "step_k": 1,
          "pack_a": int(packed == "a"), "pack_b": int(packed == "b"), "n_outer": 0}
text = reproducer(task, config, "llvm -mcpu=znver4")
with open(path, "w") as out:
    out.write(text)
print(text)

# SCRIPT-B: transform.named_sequence @schedule_op_1
# SCRIPT-B: tile_using_forall {{.*}} tile_sizes [32, 128, 0]
# SCRIPT-B: tile_using_for {{.*}} tile_sizes [0, 0, 64]
# SCRIPT-B: tile_using_for {{.*}} tile_sizes [0, 32, 0]
# SCRIPT-B: transform.structured.pad {{.*}} nofold_flags = [0, 1]
# SCRIPT-B: bufferize_to_allocation
# SCRIPT-B: tile_using_for {{.*}} tile_sizes [4, 0, 0]
# SCRIPT-B: transform.named_sequence @__transform_main

# SCRIPT-A: transform.named_sequence @schedule_op_1
# SCRIPT-A: tile_using_forall {{.*}} tile_sizes [32, 128, 0]
# SCRIPT-A: tile_using_for {{.*}} tile_sizes [0, 0, 64]
# SCRIPT-A: tile_using_for {{.*}} tile_sizes [4, 0, 0]
# SCRIPT-A: transform.structured.pad {{.*}} nofold_flags = [1]
# SCRIPT-A: get_producer_of_operand {{.*}}[0]
# SCRIPT-A: bufferize_to_allocation
# SCRIPT-A: tile_using_for {{.*}} tile_sizes [0, 32, 0]
# SCRIPT-A: transform.named_sequence @__transform_main

# CHECK-LABEL: func.func @task
# CHECK: scf.forall ({{.*}}) in (4)
# CHECK: scf.for {{.*}} = %c0 to %c256 step %c64
# CHECK-B: scf.for {{.*}} step %c32
# CHECK-B: memref.alloc() : memref<64x32xf32>
# CHECK-B: vector.transfer_read {{.*}} vector<1x32xf32>
# CHECK-A: scf.for {{.*}} step %c4
# CHECK-A: memref.alloc() : memref<4x64xf32>
# CHECK-A: vector.transfer_read {{.*}} vector<1x64xf32>
# CHECK: %[[ACC:.*]] = vector.transfer_read {{.*}} : tensor<4x32xf32>, vector<4x32xf32>
# CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[ACC]]) -> (vector<4x32xf32>)
# CHECK: vector.contract {{.*}} : vector<4x1xf32>, vector<1x32xf32> into vector<4x32xf32>
# CHECK-NOT: linalg.matmul
