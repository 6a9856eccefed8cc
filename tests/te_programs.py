"""Small TE programs the schedule-primitive tests apply primitives to, and their numpy checks.

Why a module: test_schedule_primitives.py (each primitive's loops and transform ops) and
test_schedule_each_step.py (each primitive changes the script and the IR at once) schedule
the same matmul and relu-matmul-affine chain; one definition keeps their checks equal."""

import numpy as np

import tilecraft.scheduling as tc


def matmul(M=64, N=64, K=64):
    """C = A @ B with A of M x K and B of K x N."""
    A = tc.placeholder((M, K), name="A")
    B = tc.placeholder((K, N), name="B")
    k = tc.reduce_axis(K, "k")
    return tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C")


def chain():
    """R = relu(X); C = R @ W; D = 2 * C + 1."""
    X, W = tc.placeholder((64, 64), name="X"), tc.placeholder((64, 64), name="W")
    R = tc.compute((64, 64), lambda i, j: tc.maximum(X[i, j], 0.0), name="R")
    k = tc.reduce_axis(64, "k")
    C = tc.compute((64, 64), lambda i, j: tc.sum(R[i, k] * W[k, j], axis=k), name="C")
    D = tc.compute((64, 64), lambda i, j: C[i, j] * 2.0 + 1.0, name="D")
    return [X, W, D]


def check_matmul(sch, arrays):
    """The built 64 x 64 x 64 matmul equals numpy's."""
    a, b = arrays(64, 64), arrays(64, 64)
    np.testing.assert_allclose(tc.build(sch)(a, b), a @ b, rtol=1e-4, atol=1e-4)


def check_chain(sch, arrays):
    """The built chain equals numpy's relu, matmul, 2x + 1."""
    x, w = arrays(64, 64), arrays(64, 64)
    np.testing.assert_allclose(tc.build(sch)(x, w), (np.maximum(x, 0) @ w) * 2 + 1, rtol=1e-4, atol=1e-4)
