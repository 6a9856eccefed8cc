"""Schedule steps a TVM user writes that tilecraft used to refuse: each now builds and
matches numpy, or (where MLIR's loop tiling truly cannot) says what to write instead."""

import numpy as np
from schedule_refusals import raises

import tilecraft.scheduling as te


def matmul(m, n, k, rows=None):
    A = te.placeholder((rows or m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "k")
    return A, B, te.compute((rows or m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")


def check_matmul(sch, m, n, k):
    rng = np.random.default_rng(0)
    a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    np.testing.assert_allclose(te.build(sch)(a, b), a @ b, rtol=1e-4)


def test_rfactor_with_tvm_default_factor_axis():
    A = te.placeholder((16, 64), name="A")
    k = te.reduce_axis(64, "k")
    B = te.compute((16,), lambda i: te.sum(A[i, k], axis=k), name="B")
    sch = te.Schedule([A, B])
    _, kk = sch.get_loops(sch.get_block("B"))
    _, ki = sch.split(kk, factor=8)
    rf = sch.rfactor(ki, factor_axis=0)
    assert rf.name == "B.rf"
    a = np.random.rand(16, 64).astype(np.float32)
    np.testing.assert_allclose(te.build(sch)(a), a.sum(axis=1), rtol=1e-5)


def test_tile_with_factors_that_do_not_divide():
    A, B, C = matmul(30, 20, 16)
    sch = te.Schedule([A, B, C])
    i, j, _ = sch.get_loops(sch.get_block("C"))
    io, jo, ii, ji = sch.tile(i, j, 8, 8)  # 30 and 20: partial last tiles, guarded
    assert (io.extent, jo.extent, ii.extent, ji.extent) == (4, 3, 8, 8)
    check_matmul(sch, 30, 20, 16)


def test_split_a_fused_loop_then_vectorize_and_parallelize():
    A = te.placeholder((32, 16), name="A")
    B = te.compute((32, 16), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    sch = te.Schedule([A, B])
    i, j = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(sch.fuse(i, j), factor=64)  # 64 = 4 rows of 16
    sch.parallel(outer)
    sch.vectorize(sch.split(inner, factor=16)[1])
    a = np.random.rand(32, 16).astype(np.float32)
    np.testing.assert_allclose(te.build(sch)(a), a * 2 + 1)
    X = te.placeholder((6, 10), name="X")
    Y = te.compute((6, 10), lambda i, j: X[i, j] + 1.0, name="Y")
    sch2 = te.Schedule([X, Y])
    fused = sch2.fuse(*sch2.get_loops(sch2.get_block("Y")))
    raises(sch2, r"inner factor 4 does not follow the fused extents \[6, 10\]", lambda: sch2.split(fused, factor=4))


def test_fuse_after_tile_on_a_symbolic_shape():
    n = te.var("n")
    A, B, C = matmul(None, 32, 16, rows=n)
    sch = te.Schedule([A, B, C])
    i, j, _ = sch.get_loops(sch.get_block("C"))
    io, jo, ii, ji = sch.tile(i, j, 8, 8)
    sch.parallel(sch.fuse(io, jo))
    check_matmul(sch, 21, 32, 16)


def test_compute_at_and_compute_inline_on_symbolic_shapes():
    n = te.var("n")
    A = te.placeholder((n, 32), name="A")
    B = te.compute((n, 32), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((n, 32), lambda i, j: B[i, j] * 2.0, name="C")
    a = np.random.rand(13, 32).astype(np.float32)
    at = te.Schedule([A, C])
    io, _ = at.split(at.get_loops(at.get_block("C"))[0], factor=4)
    at.compute_at(at.get_block("B"), io)
    np.testing.assert_allclose(te.build(at)(a), (a + 1) * 2)
    inline = te.Schedule([A, C])
    inline.compute_inline(inline.get_block("B"))
    assert [b.name for b in inline.get_blocks()] == ["C"]
    np.testing.assert_allclose(te.build(inline)(a), (a + 1) * 2)


def test_refusals_say_what_to_do_instead():
    A, B, C = matmul(32, 32, 32)
    sch = te.Schedule([A, B, C])
    i, j, _ = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, factor=8)
    raises(sch, r"reorder the split loops across dims instead", lambda: sch.reorder(ii, io))
    n = te.var("n")
    A, B, C = matmul(None, 32, 32, rows=n)
    sym = te.Schedule([A, B, C])
    raises(sym, "split with factor= instead", lambda: sym.split(sym.get_loops(sym.get_block("C"))[0], nparts=4))


def test_vectorizing_a_gather_is_refused_with_advice():
    A = te.placeholder((8, 8), name="A")
    P = te.compute((8, 10), lambda i, j: te.if_then_else(te.all(j >= 1, j < 9), A[i, j - 1], 0.0), name="P")
    sch = te.Schedule([A, P])
    raises(sch, "reads with tensor.extract .* keep it scalar and parallelize",
           lambda: sch.vectorize(sch.get_loops(sch.get_block("P"))[1]))
    sch.parallel(sch.get_loops(sch.get_block("P"))[0])
    a = np.random.rand(8, 8).astype(np.float32)
    np.testing.assert_array_equal(te.build(sch)(a), np.pad(a, ((0, 0), (1, 1))))


def test_compute_inline_of_a_padding_stage_into_a_convolution():
    """TVM's ``s[data_pad].compute_inline()``: neither block vectorizes (a gather, a window),
    so the padding is recomputed per tile in scalar loops, and its tensor disappears."""
    from tilecraft import topi
    X, W = te.placeholder((1, 4, 8, 8), name="X"), te.placeholder((4, 4, 3, 3), name="W")
    y = topi.nn.conv2d(X, W, 1, 1, 1)
    sch = te.Schedule([X, W, y])
    sch.parallel(sch.get_loops(sch.get_block("conv2d_nchw"))[1])
    sch.compute_inline(sch.get_block("pad_temp"))
    assert [b.name for b in sch.get_blocks()] == ["conv2d_nchw.init", "conv2d_nchw"]
    rng = np.random.default_rng(0)
    x, w = rng.random((1, 4, 8, 8), dtype=np.float32), rng.random((4, 4, 3, 3), dtype=np.float32)
    np.testing.assert_allclose(te.build(sch)(x, w), te.build(te.Schedule([X, W, y]))(x, w), rtol=1e-5)
