# Operator definition: te.compute-style lambdas and einsum specs become linalg.generic.
# RUN: %PYTHON %s | FileCheck %s

import tilecraft.scheduling as tc


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


# CHECK-LABEL: TEST: matmul
# CHECK-DAG: #[[A:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
# CHECK-DAG: #[[B:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
# CHECK-DAG: #[[C:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
# CHECK: func.func @main(%{{.*}}: tensor<16x8xf32> {tilecraft.name = "A"}, %{{.*}}: tensor<8x32xf32> {tilecraft.name = "B"})
# CHECK: linalg.fill {tilecraft.block = "C.init"}
# CHECK: linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[C]]], iterator_types = ["parallel", "parallel", "reduction"]}
# CHECK-SAME: tilecraft.block = "C", tilecraft.dims = ["i", "j", "k"]
@run
def matmul():
    A = tc.placeholder((16, 8), name="A")
    B = tc.placeholder((8, 32), name="B")
    k = tc.reduce_axis((0, 8), "k")
    C = tc.compute((16, 32), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")
    print(tc.create_func([A, B, C]))


# CHECK-LABEL: TEST: einsum_batched
# CHECK: iterator_types = ["parallel", "parallel", "parallel", "reduction"]
# CHECK-SAME: tilecraft.dims = ["b", "i", "j", "k"]
@run
def einsum_batched():
    X = tc.placeholder((2, 4, 8), name="X")
    Y = tc.placeholder((2, 8, 4), name="Y")
    print(tc.create_func([X, Y, tc.einsum("bik,bkj->bij", X, Y, name="Z")]))


# CHECK-LABEL: TEST: window_and_max
# CHECK-DAG: affine_map<(d0, d1) -> (d0 + d1)>
# CHECK: arith.constant 0xFF800000 : f32
# CHECK: arith.maximumf
@run
def window_and_max():
    X = tc.placeholder((10,), name="X")
    F = tc.placeholder((3,), name="F")
    k = tc.reduce_axis(3, "k")
    M = tc.compute((8,), lambda i: tc.max(X[i + k] * F[k], axis=k), name="M")
    print(tc.create_func([X, F, M]))
