"""Operator definition: placeholder/compute/einsum emit the right linalg.generic and compute
what numpy computes (built without any schedule)."""

import numpy as np
import pytest

import tilecraft.scheduling as tc


def run(tensors, *args):
    return tc.build(tc.Schedule(tensors))(*args)


def matmul(M=8, N=6, K=4):
    A = tc.placeholder((M, K), name="A")
    B = tc.placeholder((K, N), name="B")
    k = tc.reduce_axis((0, K), "k")
    return A, B, tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")


def test_matmul_is_a_generic_with_a_reduction_iterator(check):
    A, B, C = matmul()
    text = str(tc.create_func([A, B, C]))
    check(text, """
CHECK-DAG: #[[A:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
CHECK-DAG: #[[B:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
CHECK-DAG: #[[C:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
CHECK: func.func @main(%{{.*}}: tensor<8x4xf32> {tilecraft.name = "A"}, %{{.*}}: tensor<4x6xf32> {tilecraft.name = "B"}) -> tensor<8x6xf32>
CHECK: %[[INIT:.*]] = linalg.fill {tilecraft.block = "C.init"}
CHECK: linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[C]]], iterator_types = ["parallel", "parallel", "reduction"]}
CHECK-SAME: outs(%[[INIT]]
CHECK-SAME: tilecraft.block = "C", tilecraft.dims = ["i", "j", "k"]
CHECK: arith.mulf
CHECK: arith.addf
""")


def test_matmul_and_einsum_compute_the_product(arrays):
    A, B, C = matmul()
    E = tc.einsum("ik,kj->ij", A, B, name="E")
    a, b = arrays(8, 4), arrays(4, 6)
    np.testing.assert_allclose(run([A, B, C], a, b), a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run([A, B, E], a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_elementwise_math_casts_and_select(arrays):
    X = tc.placeholder((4, 16), name="X")
    Y = tc.compute((4, 16), lambda i, j: tc.if_then_else(
        X[i, j] > 0.0, tc.sqrt(X[i, j]) + tc.exp(X[i, j]), tc.maximum(X[i, j] * 2.0, -0.5)), name="Y")
    Z = tc.compute((4, 16), lambda i, j: (Y[i, j] * 8.0).astype("int32"), name="Z")
    x = arrays(4, 16)
    y = np.where(x > 0, np.sqrt(np.abs(x)) + np.exp(x), np.maximum(x * 2, -0.5))
    np.testing.assert_allclose(run([X, Y], x), y, rtol=1e-5)
    np.testing.assert_array_equal(run([X, Z], x), (y * 8).astype(np.int32))


def test_max_reduction_over_two_axes_and_a_window(arrays):
    X = tc.placeholder((6, 5, 4), name="X")
    r, s = tc.reduce_axis(5, "r"), tc.reduce_axis(4, "s")
    M = tc.compute((6,), lambda i: tc.max(X[i, r, s], axis=[r, s]), name="M")
    W, F = tc.placeholder((10,), name="W"), tc.placeholder((3,), name="F")
    k = tc.reduce_axis(3, "k")
    conv = tc.compute((8,), lambda i: tc.sum(W[i + k] * F[k], axis=k), name="conv")
    x, w, f = arrays(6, 5, 4), arrays(10), arrays(3)
    np.testing.assert_allclose(run([X, M], x), x.max(axis=(1, 2)))
    expected = np.array([w[i:i + 3] @ f for i in range(8)])
    np.testing.assert_allclose(run([W, F, conv], w, f), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make, message", [
    (lambda A, k: tc.compute((8,), lambda i: A[i]), "has rank 2, indexed with 1"),
    (lambda A, k: tc.compute((8, 4), lambda i, j: A[i + 1, j]), "ranges over [1, 8]"),
    (lambda A, k: tc.compute((8, 4), lambda i, j: A[i, k]), "not an axis of this compute"),
    (lambda A, k: tc.compute((8,), lambda i: tc.sum(A[i, 0], axis=k)), "indexes no tensor"),
    (lambda A, k: tc.compute((8,), lambda i: tc.sum(A[i, k], axis=k) + 1.0), "whole body"),
    (lambda A, k: tc.compute((8, 4), lambda i, j: A[i, j] + A[i, j].astype("int32")), "different dtypes"),
    (lambda A, k: tc.compute((8, 4), lambda i, j: A[i * j, j]), "not affine"),
    (lambda A, k: tc.compute((8,), lambda i: tc.sum(A[i, k], axis=i)), "not a reduction axis"),
    (lambda A, k: tc.einsum("ij,jk", A, A), "write the output explicitly"),
    (lambda A, k: tc.compute((8, 4), lambda i, j: A[i - 1, j]), "must be guarded: if_then_else"),
])
def test_definition_errors(make, message):
    A = tc.placeholder((8, 4), name="A")
    k = tc.reduce_axis(4, "k")
    with pytest.raises(tc.ScheduleError, match=message.replace("[", r"\[").replace("]", r"\]")):
        C = make(A, k)
        tc.create_func([A, C])
