# PTX from the CUDA pipeline (LLVM's NVPTX backend), for sm_80 and sm_90.
# RUN: %PYTHON %s sm_80 | FileCheck %s --check-prefixes=CHECK,SM80
# RUN: %PYTHON %s sm_90 | FileCheck %s --check-prefixes=CHECK,SM90

import sys

import tilecraft
from tilecraft.targets.cuda import cuda_pipeline
from tilecraft.scheduling import compute, create_func, placeholder

ARCH = sys.argv[1]
TARGET = f"cuda -arch={ARCH}"


def run(f):
    print(f"TEST: {f.__name__}")
    f()
    return f


def vector_add(n):
    A, B = placeholder((n,), name="A"), placeholder((n,), name="B")
    return str(create_func([A, B, compute((n,), lambda i: A[i] + B[i], name="C")]))


# TVM's tutorial: split by 64, outer loop on blockIdx.x, inner on threadIdx.x.
# CHECK-LABEL: TEST: vector_add_bound_to_blocks_and_threads
# SM80: .version 7.0
# SM80: .target sm_80
# SM90: .version 7.8
# SM90: .target sm_90
# CHECK: .visible .entry [[KERNEL:[a-z_0-9]+]](
# CHECK: .maxntid 64, 1, 1
# CHECK-DAG: %ctaid.x
# CHECK-DAG: %tid.x
# CHECK: ld.global.{{[bf]}}32
# CHECK: ld.global.{{[bf]}}32
# CHECK: add.rn.f32
# CHECK: st.global.{{[bf]}}32
# CHECK: ret;
@run
def vector_add_bound_to_blocks_and_threads():
    pipeline = cuda_pipeline(TARGET, schedule_options="max-threads=64 vector=1")
    print(tilecraft.compile(vector_add(4096), target=TARGET, pipeline=pipeline).ptx())


# The default elementwise mapping: 4 floats per thread, 128-bit loads and stores.
# CHECK-LABEL: TEST: vector_add_vectorized
# CHECK: .maxntid 256, 1, 1
# CHECK: ld.global.v4.{{[bf]}}32
# CHECK: ld.global.v4.{{[bf]}}32
# CHECK-COUNT-4: add.rn.f32
# CHECK: st.global.v4.{{[bf]}}32
@run
def vector_add_vectorized():
    print(tilecraft.compile(vector_add(1 << 16), target=TARGET).ptx())


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

# Operand tiles staged in shared memory: two .shared arrays, stored with 128-bit
# st.shared, a barrier, 128-bit ld.shared feeding FMAs, a barrier before the next K slice
# (the 64 x 64 block tile: fill-blocks=1 keeps it from shrinking toward a full grid).
# CHECK-LABEL: TEST: matmul_shared_memory
# CHECK: .maxntid 16, 16, 1
# CHECK-DAG: .shared .align {{[0-9]+}} .b8 {{.*}}[4096];
# CHECK-DAG: .shared .align {{[0-9]+}} .b8 {{.*}}[4096];
# CHECK: ld.global.v4.{{[bf]}}32
# CHECK: st.shared.v4.{{[bf]}}32
# CHECK: bar.sync 0;
# CHECK: ld.shared.v4.{{[bf]}}32
# CHECK: fma.rn.f32
# CHECK: bar.sync 0;
@run
def matmul_shared_memory():
    pipeline = cuda_pipeline(TARGET, schedule_options="fill-blocks=1")
    print(tilecraft.compile(MATMUL, target=TARGET, pipeline=pipeline).ptx())


# Without staging: no shared memory, FMAs on global loads.
# CHECK-LABEL: TEST: matmul_global_only
# CHECK-NOT: .shared
# CHECK: fma.rn.f32
# CHECK-NOT: ld.shared
@run
def matmul_global_only():
    pipeline = cuda_pipeline(TARGET, schedule_options="shared=0")
    print(tilecraft.compile(MATMUL, target=TARGET, pipeline=pipeline).ptx())


# Softmax through the ONNX importer's decomposition: the max and the sum reduce one row per
# block with 125 threads into shared partials, combined after a barrier.
# CHECK-LABEL: TEST: softmax_block_per_row
# CHECK: .maxntid 125, 1, 1
# CHECK: .shared
# CHECK: ld.global
# CHECK: st.shared.{{[bf]}}32
# CHECK: bar.sync 0;
# CHECK: ld.shared.{{[bf]}}32
@run
def softmax_block_per_row():
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 1000])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 1000])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    print(tilecraft.compile(model, target=TARGET).ptx())
