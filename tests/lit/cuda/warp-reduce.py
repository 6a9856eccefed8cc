# Block-per-row reductions combined with warp shuffles (schedule option warp-reduce=1): the
# one-thread linalg.reduce over the shared partials becomes a uniform gpu.all_reduce, which
# NVVM lowers to shfl.sync butterflies; without the option no shuffle appears.
# REQUIRES: ptxas
# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t sm_80 | FileCheck %s
# RUN: ptxas -arch=sm_80 %t/softmax.ptx -o %t/softmax.cubin
# RUN: %PYTHON %s %t/90 sm_90 | FileCheck %s
# RUN: ptxas -arch=sm_90 %t/90/softmax.ptx -o %t/90/softmax.cubin

import sys
from pathlib import Path

from onnx import TensorProto, helper

import tilecraft
from tilecraft.targets.cuda import cuda_pipeline

OUT, ARCH = Path(sys.argv[1]), sys.argv[2]
TARGET = f"cuda -arch={ARCH}"
OUT.mkdir(parents=True, exist_ok=True)


def run(f):
    print(f"TEST: {f.__name__}")
    f()
    return f


def softmax(rows: int, columns: int):
    shape = [rows, columns]
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def compile_softmax(options: str):
    return tilecraft.compile(softmax(64, 1000), target=TARGET,
                             pipeline=cuda_pipeline(TARGET, schedule_options=options))


# The row max: each of the 125 threads reduces 8 elements into its shared partial; after
# the barrier every thread reads its own partial back and the block combines them in one
# uniform gpu.all_reduce whose body is the reduction's own (maximumf); thread 0 folds the
# total into the output. No linalg.reduce (the one-thread loop) is left.
# CHECK-LABEL: TEST: softmax_map_stage
# CHECK: gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c125, %{{.*}} = %c1, %{{.*}} = %c1) workgroup(%[[P:.*]] : memref<1x1x125xf32, #gpu.address_space<workgroup>>)
# CHECK: vector.multi_reduction <maximumf>
# CHECK: gpu.barrier
# CHECK: %[[OWN:.*]] = memref.load %[[P]][%{{.*}}, %{{.*}}, %thread_id_x]
# CHECK: %[[TOTAL:.*]] = gpu.all_reduce %[[OWN]] uniform {
# CHECK: arith.maximumf
# CHECK: gpu.yield
# CHECK: scf.if
# CHECK: %[[OLD:.*]] = memref.load
# CHECK: %[[NEW:.*]] = arith.maximumf %[[TOTAL]], %[[OLD]]
# CHECK: memref.store %[[NEW]]
# CHECK: gpu.terminator
# The row sum of the exponentials, likewise with addf.
# CHECK: gpu.all_reduce {{.*}} uniform {
# CHECK: arith.addf
# CHECK-NOT: linalg.reduce
@run
def softmax_map_stage():
    print(compile_softmax("warp-reduce=1").ir("map"))


# In PTX: butterflies over lane masks 1..16 for full warps, and the partial last warp (125 =
# 3 x 32 + 29) with its member mask; a 32-word shared buffer carries one value per warp.
# CHECK-LABEL: TEST: softmax_ptx
# CHECK: .maxntid 125, 1, 1
# CHECK: .shared .align 4 .b8 {{.*}}[128];
# CHECK: shfl.sync.bfly.b32 {{.*}}, 1,
# CHECK: shfl.sync.bfly.b32 {{.*}}, 2,
# CHECK: shfl.sync.bfly.b32 {{.*}}, 4,
# CHECK: shfl.sync.bfly.b32 {{.*}}, 8,
# CHECK: shfl.sync.bfly.b32 {{.*}}, 16,
# CHECK: max{{(.NaN)?}}.f32
# CHECK: shfl.sync.bfly.b32
# CHECK: add.rn.f32
@run
def softmax_ptx():
    modules = compile_softmax("warp-reduce=1").ptx_modules()
    # The module of the row max (the first with shuffles) is assembled again by hand.
    (OUT / "softmax.ptx").write_text(next(p for p in modules.values() if "shfl.sync" in p))
    print("\n".join(modules.values()))


# The default keeps the shared partials combined by one thread.
# CHECK-LABEL: TEST: softmax_default
# CHECK: linalg.reduce
# CHECK-NOT: gpu.all_reduce
# CHECK: shuffles: 0
@run
def softmax_default():
    module = compile_softmax("")
    print(module.ir("map"))
    print("shuffles:", module.ptx().count("shfl.sync"))
