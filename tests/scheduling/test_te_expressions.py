"""TE expressions TVM users write: guards on index expressions (padding), boolean logic,
max/min and user-defined reducers, window reductions (pooling), constants, casts, indices
as values and data-dependent indices; each built and compared with numpy."""

import numpy as np
import pytest

import tilecraft.scheduling as te


def run(tensors, *args):
    return te.build(te.Schedule(tensors))(*args)


def test_padding_is_a_guarded_shifted_load(check):
    A = te.placeholder((4, 5), name="A")
    P = te.compute((8, 7), lambda i, j: te.if_then_else(
        te.all(i >= 2, i < 6, j >= 1, j < 6), A[i - 2, j - 1], te.const(0.0, "float32")), name="P")
    text = str(te.create_func([A, P]))
    check(text, """
CHECK: linalg.generic
CHECK: linalg.index 0
CHECK: arith.cmpi sge
CHECK: arith.andi
CHECK: tensor.extract
CHECK: arith.select
""")
    a = np.random.rand(4, 5).astype(np.float32)
    np.testing.assert_array_equal(run([A, P], a), np.pad(a, ((2, 2), (1, 1))))


def test_comparisons_and_boolean_logic_on_indices():
    A = te.placeholder((6, 6), name="A")
    B = te.compute((6, 6), lambda i, j: te.if_then_else(
        ((i == j) | (i + j == 5)) & ~(i % 2 == 0), A[i, j], -A[i, j]), name="B")
    C = te.compute((6, 6), lambda i, j: te.select(te.any(i < 1, j > 4, te.equal(i, j)), 1.0, A[i, j]), name="C")
    a = np.random.rand(6, 6).astype(np.float32)
    i, j = np.indices((6, 6))
    np.testing.assert_array_equal(run([A, B], a), np.where(((i == j) | (i + j == 5)) & (i % 2 != 0), a, -a))
    np.testing.assert_array_equal(run([A, C], a), np.where((i < 1) | (j > 4) | (i == j), 1.0, a))


def test_window_reduction_with_compound_indices_only():
    """A max-pool: the window axes appear only in ``2*i + r``; linalg gets a window operand."""
    X = te.placeholder((9, 8), name="X")
    r, s = te.reduce_axis(3, "r"), te.reduce_axis(2, "s")
    M = te.compute((4, 4), lambda i, j: te.max(X[2 * i + r, 2 * j + s], axis=[r, s]), name="M")
    k = te.reduce_axis(3, "k")
    W = te.compute((5,), lambda i: te.sum(X[i + k, 0], axis=k), name="W")  # was refused
    x = np.random.rand(9, 8).astype(np.float32)
    expected = np.array([[x[2 * i:2 * i + 3, 2 * j:2 * j + 2].max() for j in range(4)] for i in range(4)])
    np.testing.assert_array_equal(run([X, M], x), expected)
    np.testing.assert_allclose(run([X, W], x), [x[i:i + 3, 0].sum() for i in range(5)], rtol=1e-6)


def test_max_min_reducers_and_elementwise_max():
    X = te.placeholder((5, 7), name="X")
    k = te.reduce_axis(7, "k")
    hi = te.compute((5,), lambda i: te.max(X[i, k], axis=k), name="hi")
    lo = te.compute((5,), lambda i: te.min(X[i, k], axis=k, where=k < 3), name="lo")
    relu = te.compute((5, 7), lambda i, j: te.max(X[i, j], 0.0), name="relu")  # two values: elementwise
    x = np.random.rand(5, 7).astype(np.float32) - 0.5
    np.testing.assert_array_equal(run([X, hi], x), x.max(axis=1))
    np.testing.assert_array_equal(run([X, lo], x), x[:, :3].min(axis=1))
    np.testing.assert_array_equal(run([X, relu], x), np.maximum(x, 0))


def test_user_defined_comm_reducer():
    absmax = te.comm_reducer(lambda a, b: te.max(te.abs(a), te.abs(b)), lambda t: te.const(0, t), name="absmax")
    sumsq = te.comm_reducer(lambda acc, v: acc + v * v, lambda t: 0.0, name="sumsq")
    X = te.placeholder((4, 6), name="X")
    k = te.reduce_axis(6, "k")
    A = te.compute((4,), lambda i: absmax(X[i, k], axis=k), name="A")
    S = te.compute((4,), lambda i: sumsq(X[i, k], axis=k), name="S")
    x = np.random.rand(4, 6).astype(np.float32) - 0.5
    np.testing.assert_array_equal(run([X, A], x), np.abs(x).max(axis=1))
    np.testing.assert_allclose(run([X, S], x), (x * x).sum(axis=1), rtol=1e-6)
    with pytest.raises(te.ScheduleError, match="may only use its two arguments"):
        bad = te.comm_reducer(lambda a, b: a + X[0, 0], lambda t: 0.0, name="bad")
        te.compute((4,), lambda i: bad(X[i, k], axis=k))


def test_const_casts_and_indices_as_values():
    X = te.placeholder((3, 4), name="X", dtype="int32")
    Y = te.compute((3, 4), lambda i, j: X[i, j].astype("float32") * te.const(0.5, "float32")
                   + (i * 4 + j).astype("float32"), name="Y")
    Z = te.compute((3, 4), lambda i, j: te.cast(Y[i, j], "int64") + te.const(7, "int64"), name="Z")
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    y = x * 0.5 + np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(run([X, Y], x), y.astype(np.float32))
    np.testing.assert_array_equal(run([X, Z], x), y.astype(np.int64) + 7)


def test_data_dependent_index_and_symbolic_padding():
    n = te.var("n")
    A = te.placeholder((n, 3), name="A")
    I = te.placeholder((4,), name="I", dtype="int32")
    G = te.compute((4, 3), lambda i, j: A[I[i], j], name="G")  # a gather; clamped into range
    P = te.compute((n, 5), lambda i, j: te.if_then_else(te.all(j >= 1, j < 4), A[i, j - 1], -1.0), name="P")
    a = np.random.rand(6, 3).astype(np.float32)
    idx = np.array([5, 0, 3, 9], dtype=np.int32)
    np.testing.assert_array_equal(run([A, I, G], a, idx), a[np.clip(idx, 0, 5)])
    np.testing.assert_array_equal(run([A, P], a), np.pad(a, ((0, 0), (1, 1)), constant_values=-1.0))


@pytest.mark.parametrize("make, message", [
    (lambda A: te.compute((6,), lambda i: A[i - 1, 0]), r"ranges over \[-1, 4\].*must be guarded"),
    (lambda A: te.compute((5,), lambda i: te.if_then_else(A[i, 0], 1.0, 0.0)), "expected a boolean"),
    (lambda A: te.compute((5,), lambda i: A[A[i, 0], 0]), "must have an integer dtype"),
    (lambda A: te.comm_reducer(1, 2), "must be callables"),
    (lambda A: te.const("x"), "expected a number"),
])
def test_expression_errors(make, message):
    A = te.placeholder((5, 3), name="A")
    with pytest.raises(te.ScheduleError, match=message):
        make(A)
