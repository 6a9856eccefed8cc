"""Symbolic shapes (``te.var``): one build, called at several sizes; what is refused."""

import numpy as np
import pytest

import tilecraft as tc
import tilecraft.scheduling as te
from tilecraft.errors import ArgumentValueError

SIZES = (1, 7, 16, 33)


def test_vector_add_split_parallel_vectorize(arrays):
    n = te.var("n")
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    sch = te.Schedule(C)
    (i,) = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, factor=16)
    assert repr(io.extent) == "ceildiv(n, 16)" and ii.extent == 16
    sch.parallel(io)
    sch.vectorize(ii)
    f = te.build(sch)
    for size in SIZES:
        a, b = arrays(size), arrays(size)
        np.testing.assert_allclose(f(a, b), a + b, rtol=1e-6)
    with pytest.raises(ArgumentValueError, match="must equal dimension 0 of argument 'A'"):
        f(arrays(5), arrays(6))


def test_matmul_symbolic_and_static_dims(arrays):
    n, m, k = te.var("n"), te.var("m"), te.var("k")
    A, B = te.placeholder((n, k), name="A"), te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), "r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch = te.Schedule(C)
    i, j, kk = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, factor=4)
    jo, ji = sch.split(j, factor=8)
    ko, ki = sch.split(kk, factor=4)
    sch.reorder(io, jo, ko, ki, ii, ji)
    sch.parallel(io)
    sch.vectorize(ji)
    f = te.build(sch)
    for shape in ((1, 1, 1), (7, 5, 3), (16, 16, 16), (33, 17, 9)):
        N, M, K = shape
        a, b = arrays(N, K), arrays(K, M)
        np.testing.assert_allclose(f(a, b), a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentValueError, match="must equal dimension 1 of argument 'A'"):
        f(arrays(4, 5), arrays(6, 3))


def test_row_sum_over_a_symbolic_axis(arrays):
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    r = te.reduce_axis(m, "r")
    S = te.compute((n,), lambda i: te.sum(A[i, r], axis=r), name="S")
    sch = te.Schedule(S)
    i, rr = sch.get_loops(sch.get_block("S"))
    sch.split(rr, factor=4)
    io, _ = sch.split(i, factor=8)
    sch.parallel(io)
    f = te.build(sch)
    for rows, cols in ((1, 1), (7, 3), (33, 65)):
        a = arrays(rows, cols)
        np.testing.assert_allclose(f(a), a.sum(1), rtol=1e-5, atol=1e-6)


def test_a_var_read_only_by_a_constant_index_is_still_checked(arrays):
    # B's only dim is n, read at B[0]: no loop relates it to A, the var does.
    n = te.var("n")
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] * B[0], name="C")
    f = te.build(te.Schedule(C))
    a, b = arrays(7), arrays(7)
    np.testing.assert_allclose(f(a, b), a * b[0], rtol=1e-6)
    with pytest.raises(ArgumentValueError, match="dimension 0 is 0"):
        f(a, np.zeros(0, np.float32))


def test_definition_errors():
    n, m = te.var("n"), te.var("m")
    A, P = te.placeholder((n,), name="A"), te.placeholder((4,), name="P")
    C = te.compute((m,), lambda i: P[0] + 1.0, name="C")
    with pytest.raises(te.ScheduleError, match=r"var\(s\) \['m'\] size no placeholder"):
        te.Schedule(C)
    with pytest.raises(te.ScheduleError, match=r"A\[0\]: index 0 ranges over \[0, 0\], which cannot be proved"):
        te.compute((m,), lambda i: A[0] + 1.0, name="C")  # n may be 0 while m is not
    with pytest.raises(te.ScheduleError, match="cannot be proved inside dimension 0 of A"):
        te.compute((n,), lambda i: A[i + 1], name="D")
    with pytest.raises(te.ScheduleError, match="two different vars are named 'n'"):
        n2 = te.var("n")
        B = te.placeholder((n2,), name="B")
        E, F = te.compute((n,), lambda i: A[i], name="E"), te.compute((n2,), lambda i: B[i], name="F")
        te.create_func([A, B, E, F])


def test_primitive_errors_on_symbolic_loops():
    n = te.var("n")
    A = te.placeholder((n, 32), name="A")
    B = te.compute((n, 32), lambda i, j: A[i, j] * 2.0, name="B")
    sch = te.Schedule(B)
    blk = sch.get_block("B")
    i, j = sch.get_loops(blk)
    with pytest.raises(te.ScheduleError, match="symbolic trip count n"):
        sch.unroll(i)
    with pytest.raises(te.ScheduleError, match="nparts= on loop 'i' of symbolic extent n"):
        sch.split(i, nparts=4)
    with pytest.raises(te.ScheduleError, match="a vector has a constant length"):
        sch.reorder(j, i)
        sch.vectorize(i)
    with pytest.raises(te.ScheduleError, match="dynamic shapes are not supported for cache_write"):
        sch.cache_write(blk)
    io, ii = sch.split(i, factor=8)
    with pytest.raises(te.ScheduleError, match="partial last tile"):
        sch.unroll(ii)
    sch.unroll(j)  # a static loop of a symbolic block unrolls


def test_trace_names_the_symbols():
    n = te.var("n")
    A = te.placeholder((n, 8), name="A")
    B = te.compute((n, 8), lambda i, j: A[i, j] + 1.0, name="B")
    sch = te.Schedule(B)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, factor=4)
    assert "// symbolic extents: n = A.shape[0]" in str(sch.trace)
    assert "tensor<?x8xf32>" in sch.ir() and 'tilecraft.symbols = ["n", ""]' in sch.ir()
    assert tc.var is te.var


def test_fuse_and_tile_of_symbolic_loops(arrays):
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    fused = te.Schedule(B)
    loop = fused.fuse(*fused.get_loops(fused.get_block("B")))
    assert repr(loop.extent) == "m * n"
    fused.parallel(loop)
    tiled = te.Schedule(B)
    _, _, _, yi = tiled.tile(*tiled.get_loops(tiled.get_block("B")), 4, 8)
    tiled.vectorize(yi)
    for sch in (fused, tiled):
        f = te.build(sch)
        for shape in ((1, 1), (7, 3), (5, 33)):
            a = arrays(*shape)
            np.testing.assert_allclose(f(a), a * 2)
