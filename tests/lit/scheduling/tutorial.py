# Each step of examples/matmul_schedule.py (TVM's GEMM tutorial), at 64x64x64: the
# transform ops each step adds, and the shape of the loops.
# RUN: %PYTHON %s | FileCheck %s

import importlib.util
from pathlib import Path

from tilecraft.scheduling import Schedule

path = Path(__file__).resolve().parents[3] / "examples" / "matmul_schedule.py"
spec = importlib.util.spec_from_file_location("matmul_schedule", path)
tutorial = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tutorial)

for title, apply in tutorial.STEPS:
    # Register blocking's parallel tasks are 64-row blocks: two of them at 128.
    sch = Schedule(tutorial.define(128 if title == "register blocking" else 64)[-1])
    apply(sch)
    print(f"\nSTEP: {title}")
    print(sch.script[sch.script.index("module attributes"):sch.script.index("transform.include @cleanup")])
    print(sch.ir())

# CHECK-LABEL: STEP: default
# CHECK-NOT: transform.structured.tile
# CHECK: linalg.generic

# CHECK-LABEL: STEP: blocking
# CHECK: tile_using_for %{{.*}} tile_sizes [32, 32, 4]
# CHECK: tile_using_for %{{.*}} tile_sizes [0, 0, 1]
# CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<32x32xf32>)

# CHECK-LABEL: STEP: vectorization
# CHECK: transform.structured.vectorize
# CHECK: vector.contract {{.*}} into vector<1x32xf32>

# CHECK-LABEL: STEP: loop permutation
# CHECK: tile_using_for %{{.*}} tile_sizes [1, 0, 1] interchange = [0, 2, 1]
# CHECK: vector.contract

# CHECK-LABEL: STEP: array packing
# CHECK: transform.structured.pack %{{.*}} packed_sizes = [0, 32, 0]
# CHECK: transform.structured.pack_transpose %{{.*}} outer_perm = [1, 0]
# CHECK: scf.forall (%{{.*}}) in (2) {{.*}} -> (tensor<2x64x32xf32>)
# CHECK: vector.contract {{.*}} into vector<1x1x32xf32>

# CHECK-LABEL: STEP: write cache
# CHECK: transform.structured.pad
# CHECK: transform.loop.unroll %{{.*}} {factor = 4}
# CHECK: tensor.pad {{.*}} nofold
# CHECK-COUNT-4: vector.contract
# CHECK: linalg.copy {tilecraft.block = "C"}

# CHECK-LABEL: STEP: parallelization
# CHECK: tile_using_forall %{{.*}} tile_sizes [32, 0, 0, 0]
# CHECK: scf.forall (%{{.*}}) in (2) {{.*}} -> (tensor<64x2x32xf32>)
# CHECK: tensor.pad {{.*}} nofold

# Register blocking (at 128): 8 rows of C unrolled inside the k loop, their 8 vectors hoisted
# out of it as loop-carried values (accumulators in registers), written back after it.
# CHECK-LABEL: STEP: register blocking
# CHECK: transform.loop.unroll %{{.*}} {factor = 8}
# CHECK: transform.loop.hoist_loop_invariant_subsets
# CHECK: scf.forall (%{{.*}}) in (2) {{.*}} -> (tensor<128x4x32xf32>)
# CHECK-COUNT-8: vector.transfer_read {{.*}} : tensor<8x1x32xf32>, vector<1x1x32xf32>
# CHECK: scf.for {{.*}} iter_args({{.*}}) -> (tensor<8x1x32xf32>, vector<1x1x32xf32>, vector<1x1x32xf32>, vector<1x1x32xf32>, vector<1x1x32xf32>, vector<1x1x32xf32>, vector<1x1x32xf32>, vector<1x1x32xf32>, vector<1x1x32xf32>)
# CHECK-COUNT-8: vector.contract
# CHECK: scf.yield
# CHECK-COUNT-8: vector.transfer_write {{.*}} : vector<1x1x32xf32>, tensor<8x1x32xf32>
