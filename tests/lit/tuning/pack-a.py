# Packing A (the space's pack_a knob): the M register loop moves outside, and each
# reg_m x cache_k sliver of A is copied to a contiguous buffer once, then read by every
# register tile across N. The script packs operand 0, and the payload replays it.
# RUN: %PYTHON %s %t.mlir | FileCheck %s --check-prefix=SCRIPT
# RUN: tilecraft-opt %t.mlir --transform-interpreter --canonicalize | FileCheck %s

import sys

from tilecraft.tuning import extract_tasks
from tilecraft.tuning.apply import reproducer

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

(task,) = extract_tasks(MATMUL, "llvm -mcpu=znver4")
config = {"par_m": 32, "par_n": 128, "cache_k": 64, "reg_m": 4, "reg_n": 32, "step_k": 1,
          "pack_a": 1, "pack_b": 0, "n_outer": 0}
text = reproducer(task, config, "llvm -mcpu=znver4")
with open(sys.argv[1], "w") as out:
    out.write(text)
print(text)

# SCRIPT: transform.named_sequence @schedule_op_1
# SCRIPT: tile_using_forall {{.*}} tile_sizes [32, 128, 0]
# SCRIPT: tile_using_for {{.*}} tile_sizes [0, 0, 64]
# SCRIPT: tile_using_for {{.*}} tile_sizes [4, 0, 0]
# SCRIPT: transform.structured.pad {{.*}} nofold_flags = [1]
# SCRIPT: get_producer_of_operand {{.*}}[0]
# SCRIPT: bufferize_to_allocation
# SCRIPT: tile_using_for {{.*}} tile_sizes [0, 32, 0]
# SCRIPT: transform.named_sequence @__transform_main

# CHECK-LABEL: func.func @task
# CHECK: scf.forall ({{.*}}) in (4)
# CHECK: scf.for {{.*}} = %c0 to %c256 step %c64
# CHECK: scf.for {{.*}} step %c4
# CHECK: memref.alloc() : memref<4x64xf32>
# CHECK: vector.transfer_read {{.*}} vector<1x64xf32>
# CHECK: %[[ACC:.*]] = vector.transfer_read {{.*}} : tensor<4x32xf32>, vector<4x32xf32>
# CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[ACC]]) -> (vector<4x32xf32>)
# CHECK: vector.contract {{.*}} : vector<4x1xf32>, vector<1x32xf32> into vector<4x32xf32>
# CHECK-NOT: linalg.matmul
