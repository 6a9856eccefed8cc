# A point of a generated space (schedule/sketch.py) replays with tilecraft-opt: a row
# reduction 64x96 with its parallel loop split over threads (16 rows each), a 2-row register
# tile, the reduction blocked by 32 and stepped by 8 (lanes-wide vectors).
# RUN: %PYTHON %s %t.mlir | FileCheck %s --check-prefix=SCRIPT
# RUN: tilecraft-opt %t.mlir --transform-interpreter --canonicalize | FileCheck %s

import sys

from tilecraft.schedule.apply import reproducer
from tilecraft.tuning import extract_tasks

ROW_SUM = """
func.func @rows(%x: tensor<64x96xf32>) -> tensor<64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<64xf32>) -> tensor<64xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x96xf32>) outs(%init : tensor<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %out : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  return %sum : tensor<64xf32>
}
"""

(task,) = extract_tasks(ROW_SUM, "llvm -mcpu=znver4")
config = {"sk_par_d0": 16, "sk_kc_d1": 32, "sk_reg_d0": 2, "sk_step_d1": 8, "sk_vectorize": 1}
text = reproducer(task, config, "llvm -mcpu=znver4")
with open(sys.argv[1], "w") as out:
    out.write(text)
print(text)

# SCRIPT: transform.named_sequence @schedule_op_1
# SCRIPT: tile_using_forall {{.*}} tile_sizes [16, 0]
# SCRIPT: tile_using_for {{.*}} tile_sizes [0, 32]
# SCRIPT: tile_using_for {{.*}} tile_sizes [2, 0]
# SCRIPT: tile_using_for {{.*}} tile_sizes [0, 8]
# SCRIPT: transform.structured.vectorize
# SCRIPT: transform.named_sequence @__transform_main

# CHECK-LABEL: func.func @task
# CHECK: scf.forall ({{.*}}) in (4)
# CHECK: scf.for {{.*}} = %c0 to %c96 step %c32
# CHECK: scf.for {{.*}} step %c2
# CHECK: scf.for {{.*}} step %c8
# CHECK: vector.transfer_read {{.*}} vector<2x8xf32>
