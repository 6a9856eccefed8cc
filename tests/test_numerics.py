"""Compiled kernels against numpy: contractions, convolutions, pooling, elementwise chains,
reductions, dynamic shapes and element types."""

import numpy as np
import pytest

import mlir_text as mt
import tilecraft

F32 = dict(rtol=1e-4, atol=1e-5)


def run(text, *args):
    return tilecraft.compile(text)(*args)


# --- contractions -------------------------------------------------------------------------

@pytest.mark.parametrize(
    "m, n, k",
    [(1, 1, 1), (7, 13, 5), (17, 33, 9), (64, 64, 64), (128, 96, 80), (64, 320, 64), (256, 256, 256)],
)
def test_matmul(rand, m, n, k):
    a, b = rand((m, k)), rand((k, n))
    np.testing.assert_allclose(run(mt.matmul(m, n, k), a, b), a @ b, **F32)


@pytest.mark.parametrize("m, n", [(1000, 1000), (1000, 1024), (680, 200)])
def test_every_parallel_task_runs_once(monkeypatch, rand, m, n):
    """Task grids of 25 x 5, 25 x 4 and 17: MLIR's async-parallel-for ran some blocks of a
    2-D loop twice (pipelines/buffer/parallel_loops.py collapses loops first). Accumulating into
    C, a task run twice adds its product twice."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    k = 32
    a_type, b_type, c_type = f"tensor<{m}x{k}xf32>", f"tensor<{k}x{n}xf32>", f"tensor<{m}x{n}xf32>"
    text = (f"func.func @main(%a: {a_type}, %b: {b_type}, %c: {c_type}) -> {c_type} {{\n"
            f"  %r = linalg.matmul ins(%a, %b : {a_type}, {b_type}) outs(%c : {c_type}) -> {c_type}\n"
            f"  return %r : {c_type}\n}}\n")
    a, b, c = rand((m, k)), rand((k, n)), rand((m, n))
    module = tilecraft.compile(text)
    for _ in range(3):
        np.testing.assert_allclose(module(a, b, c), c + a @ b, **F32)


@pytest.mark.parametrize("batch, m, n, k", [(1, 4, 4, 4), (3, 7, 13, 5), (4, 32, 48, 16)])
def test_batch_matmul(rand, batch, m, n, k):
    a, b = rand((batch, m, k)), rand((batch, k, n))
    np.testing.assert_allclose(run(mt.batch_matmul(batch, m, n, k), a, b), a @ b, **F32)


@pytest.mark.parametrize("m, n, k", [(5, 7, 3), (64, 48, 32)])
def test_matmul_bias_relu(rand, m, n, k):
    a, b, bias = rand((m, k)), rand((k, n)), rand((n,))
    expected = np.maximum(a @ b + bias, 0)
    np.testing.assert_allclose(run(mt.matmul_bias_relu(m, n, k), a, b, bias), expected, **F32)


# --- convolutions and pooling -------------------------------------------------------------

@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (1, 2), (2, 2)])
@pytest.mark.parametrize("pad", [0, 1])
def test_conv_2d_nchw_fchw(rand, stride, dilation, pad):
    x, w = rand((2, 3, 11, 10)), rand((8, 3, 3, 3))
    text = mt.conv_nchw(2, 3, 11, 10, 8, 3, 3, stride=stride, dilation=dilation, pad=pad)
    expected = mt.ref_conv_nchw(x, w, stride, dilation, pad)
    np.testing.assert_allclose(run(text, x, w), expected, **F32)


@pytest.mark.parametrize("n, c, hw, f", [(1, 16, 14, 32), (2, 5, 9, 7)])
def test_conv_2d_nchw_fchw_shapes(rand, n, c, hw, f):
    x, w = rand((n, c, hw, hw)), rand((f, c, 3, 3))
    text = mt.conv_nchw(n, c, hw, hw, f, 3, 3, pad=1)
    np.testing.assert_allclose(run(text, x, w), mt.ref_conv_nchw(x, w, pad=1), **F32)


@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (1, 2), (2, 2)])
def test_conv_2d_nhwc_hwcf(rand, stride, dilation):
    x, w = rand((1, 12, 11, 4)), rand((3, 3, 4, 16))
    text = mt.conv_nhwc(1, 12, 11, 4, 3, 3, 16, stride=stride, dilation=dilation)
    np.testing.assert_allclose(run(text, x, w), mt.ref_conv_nhwc(x, w, stride, dilation), **F32)


@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (1, 2), (2, 2)])
@pytest.mark.parametrize("channels", [16, 5])
def test_depthwise_conv_2d_nhwc_hwc(rand, stride, dilation, channels):
    x, w = rand((2, 10, 9, channels)), rand((3, 3, channels))
    text = mt.depthwise_nhwc(2, 10, 9, channels, 3, 3, stride=stride, dilation=dilation)
    expected = mt.ref_depthwise_nhwc(x, w, stride, dilation)
    np.testing.assert_allclose(run(text, x, w), expected, **F32)


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_conv_2d_nhwc_hwc_large(rand, stride):
    """Enough work to be split across threads."""
    x, w = rand((1, 32, 32, 32)), rand((3, 3, 32))
    text = mt.depthwise_nhwc(1, 32, 32, 32, 3, 3, stride=stride)
    np.testing.assert_allclose(run(text, x, w), mt.ref_depthwise_nhwc(x, w, stride), **F32)


@pytest.mark.parametrize("kind", ["max", "sum"])
@pytest.mark.parametrize("shape, window", [((1, 3, 8, 8), 2), ((2, 16, 13, 11), 3), ((2, 32, 32, 32), 2)])
def test_pooling_nchw(rand, kind, shape, window):
    x = rand(shape)
    expected = mt.ref_pooling_nchw(kind, x, window, stride=2)
    np.testing.assert_allclose(run(mt.pooling_nchw(kind, *shape, window), x), expected, **F32)


# --- elementwise ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (64, 48), (2, 3, 37), (256, 300), (3, 64, 200)])
def test_elementwise_chain(rand, shape):
    body = [
        "%e = math.exp %in0 : f32",
        "%s = arith.addf %e, %in1 : f32",
        "%p = arith.mulf %s, %in2 : f32",
        "%zero = arith.constant 0.0 : f32",
        "%m = arith.maximumf %p, %zero : f32",
        "%t = math.tanh %m : f32",
        "linalg.yield %t : f32",
    ]
    a, b, c = rand(shape), rand(shape), rand(shape)
    expected = np.tanh(np.maximum((np.exp(a) + b) * c, 0))
    np.testing.assert_allclose(run(mt.elementwise(shape, 3, body), a, b, c), expected, **F32)


@pytest.mark.parametrize("rows, cols", [(3, 7), (32, 100), (256, 64), (300, 257)])
def test_broadcast_row_and_column(rand, rows, cols):
    """out[i, j] = x[i, j] * col[i] + row[j]: operands broadcast along either axis."""
    text = mt.generic(
        [((rows, cols), "f32"), ((rows,), "f32"), ((cols,), "f32")],
        (rows, cols),
        [mt.identity_map(2), "affine_map<(d0, d1) -> (d0)>", "affine_map<(d0, d1) -> (d1)>",
         mt.identity_map(2)],
        ["parallel", "parallel"],
        ["%p = arith.mulf %in0, %in1 : f32", "%s = arith.addf %p, %in2 : f32",
         "linalg.yield %s : f32"],
    )
    x, col, row = rand((rows, cols)), rand((rows,)), rand((cols,))
    np.testing.assert_allclose(run(text, x, col, row), x * col[:, None] + row, **F32)


@pytest.mark.parametrize("rows, cols", [(5, 9), (200, 300)])
def test_transposed_operand(rand, rows, cols):
    """out[i, j] = a[j, i] - b[i, j]: one operand read through a transposing map."""
    text = mt.generic(
        [((cols, rows), "f32"), ((rows, cols), "f32")], (rows, cols),
        ["affine_map<(d0, d1) -> (d1, d0)>", mt.identity_map(2), mt.identity_map(2)],
        ["parallel", "parallel"],
        ["%s = arith.subf %in0, %in1 : f32", "linalg.yield %s : f32"],
    )
    a, b = rand((cols, rows)), rand((rows, cols))
    np.testing.assert_allclose(run(text, a, b), a.T - b, **F32)


@pytest.mark.parametrize("shape", [(7,), (1000,), (33, 65), (256, 512)])
def test_full_reduction_to_0d(rand, shape):
    """Every loop a reduction: the result is a 0-d tensor."""
    rank = len(shape)
    dims = ", ".join(f"d{i}" for i in range(rank))
    text = mt.generic(
        [(shape, "f32")], (), [mt.identity_map(rank), f"affine_map<({dims}) -> ()>"],
        ["reduction"] * rank,
        ["%r = arith.addf %in0, %out : f32", "linalg.yield %r : f32"], init="0.0",
    )
    x = rand(shape)
    result = run(text, x)
    assert result.shape == ()
    np.testing.assert_allclose(result, x.sum(), rtol=1e-4, atol=1e-3)


def test_elementwise_chain_of_generics_fuses_correctly(rand):
    """Two generics in a row (fused by the simplify stage) with a transposed operand."""
    shape = (24, 40)
    first = mt.elementwise(shape, 2, ["%s = arith.subf %in0, %in1 : f32", "linalg.yield %s : f32"])
    # Splice a second generic consuming %r with a transposed read of %arg1.
    second = (
        f"  %empty2 = tensor.empty() : {mt.tensor(shape)}\n"
        "  %r2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,"
        " affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],"
        f" iterator_types = [{mt.parallel(2)}]}}\n"
        f"      ins(%r, %arg1 : {mt.tensor(shape)}, {mt.tensor(shape)}) outs(%empty2 : {mt.tensor(shape)}) {{\n"
        "  ^bb0(%x: f32, %y: f32, %o: f32):\n"
        "    %m = arith.mulf %x, %y : f32\n    %e = math.exp %m : f32\n    linalg.yield %e : f32\n"
        f"  }} -> {mt.tensor(shape)}\n"
        f"  return %r2 : {mt.tensor(shape)}\n}}\n"
    )
    text = first[: first.rindex("  return")] + second
    a, b = rand(shape), rand(shape)
    np.testing.assert_allclose(run(text, a, b), np.exp((a - b) * b), **F32)


# --- reductions ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 7), (32, 1000), (1, 5), (64, 16), (128, 1000), (1000, 96)])
@pytest.mark.parametrize("axis", [0, 1])
def test_sum_reduction(rand, shape, axis):
    x = rand(shape)
    text = mt.reduce_2d(shape, axis, "arith.addf", "0.0")
    np.testing.assert_allclose(run(text, x), x.sum(axis=axis), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(3, 7), (32, 1000)])
@pytest.mark.parametrize("axis", [0, 1])
def test_max_reduction(rand, shape, axis):
    x = rand(shape)
    text = mt.reduce_2d(shape, axis, "arith.maximumf", mt.NEG_INF["f32"])
    np.testing.assert_allclose(run(text, x), x.max(axis=axis), **F32)


@pytest.mark.parametrize("shape", [(3, 7), (32, 1000), (2, 16), (64, 1000)])
def test_softmax(rand, shape):
    x = rand(shape) * 5
    result = run(mt.softmax(*shape), x)
    np.testing.assert_allclose(result, mt.ref_softmax(x), **F32)
    np.testing.assert_allclose(result.sum(axis=1), 1.0, rtol=1e-5)


def test_vector_exp_whole_f32_range():
    """Vectorized exp is a polynomial (pipelines/vector/vector_math.py), not libm: within 3 ulp over
    the f32 range, denormal results, overflow to inf, NaN and infinities kept."""
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, 88.73, -87.5, -103.0, -104.5, 1e-8]
    x = np.concatenate([np.linspace(-110, 90, 4096 - len(edges)), edges]).astype(np.float32)
    got = run(mt.elementwise(x.shape, 1, ["%r = math.exp %in0 : f32", "linalg.yield %r : f32"]), x)
    with np.errstate(over="ignore"):
        ref = np.exp(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    normal = np.isfinite(ref) & (ref >= np.finfo(np.float32).tiny)
    np.testing.assert_allclose(got[normal], ref[normal], rtol=3 * np.finfo(np.float32).eps)
    np.testing.assert_allclose(got[~normal & np.isfinite(ref)], ref[~normal & np.isfinite(ref)],
                               rtol=0, atol=np.finfo(np.float32).tiny)
    assert np.array_equal(got[np.isinf(ref)], ref[np.isinf(ref)])


def test_vector_tanh():
    """Vectorized tanh (Cephes tanhf on the polynomial exp): within 3 ulp, relative error
    kept for tiny inputs (no 1 - 2 / (exp(2x) + 1) cancellation), +-1 at the ends, NaN kept."""
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-6, 0.6249, 0.625, 9.0, -50.0]
    x = np.concatenate([np.linspace(-12, 12, 4096 - len(edges)), edges]).astype(np.float32)
    got = run(mt.elementwise(x.shape, 1, ["%r = math.tanh %in0 : f32", "linalg.yield %r : f32"]), x)
    ref = np.tanh(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    finite = ~np.isnan(ref)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=3 * np.finfo(np.float32).eps,
                               atol=np.finfo(np.float32).tiny)


@pytest.mark.parametrize("divisor", [3.0, 0.1, 0.0235294122, -0.3, 1.9999999, 6.0, 1e-30, 1e30])
def test_division_by_a_constant_is_divfs_quotient(divisor):
    """``x / d`` for a constant ``d`` is a multiplication by ``1/d`` and an FMA correction
    (pipelines/vector/vector_math.py): bit for bit divf's quotient over random f32 bit patterns with
    |x| >= 2^(emin + 2p) (below, within an ulp), signed zeros, infinities, NaN and overflow
    kept."""
    info = np.finfo(np.float32)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.max, -info.max, info.tiny, 1.0, 1e-25], np.float32)
    x = np.concatenate([np.random.default_rng(5).integers(0, 2**32, 1 << 16, dtype=np.uint32).view(np.float32), edges])
    source = mt.elementwise(x.shape, 1, [f"%d = arith.constant {divisor:.9e} : f32", "%r = arith.divf %in0, %d : f32",
                                         "linalg.yield %r : f32"])
    compiled = tilecraft.compile(source)
    assert "divf" not in compiled.ir("vector")
    got = compiled(x)
    with np.errstate(all="ignore"):
        ref = x / np.float32(divisor)
    same = (got.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(got) & np.isnan(ref))
    tiny = np.abs(x) < np.ldexp(np.float32(1), info.minexp + 2 * (info.nmant + 1))
    assert same[~tiny].all(), x[~same & ~tiny][:5]
    off = tiny & ~same
    assert (np.abs(got[off].astype(np.float64) - ref[off]) <= np.spacing(np.abs(ref[off]))).all()


def _matmul_transposed_b(m, n, k, weight=None) -> str:
    """``linalg.matmul`` reading B as [N, K] through its indexing map; B an argument, or the
    constant ``weight`` (a dense literal)."""
    b_type = mt.tensor((n, k))
    b_arg = "" if weight is not None else f", %b: {b_type}"
    constant = (f"  %b = arith.constant dense<{weight.tolist()}> : {b_type}\n" if weight is not None else "")
    return (f"func.func @main(%a: {mt.tensor((m, k))}{b_arg}) -> {mt.tensor((m, n))} {{\n{constant}"
            + mt.filled("init", (m, n), "0.0")
            + f"  %c = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, "
              f"affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]\n"
              f"      ins(%a, %b : {mt.tensor((m, k))}, {b_type}) outs(%init : {mt.tensor((m, n))}) -> {mt.tensor((m, n))}\n"
              f"  return %c : {mt.tensor((m, n))}\n}}\n")


@pytest.mark.parametrize("constant", [False, True])
def test_matmul_transposed_b(rand, constant):
    """B^T through the map: an input is read in place, a constant is transposed at compile
    time (tilecraft-contraction-operand-layout, then constant folding)."""
    a, b = rand((64, 48)), rand((32, 48))
    if constant:
        result = run(_matmul_transposed_b(64, 32, 48, weight=b), a)
    else:
        result = run(_matmul_transposed_b(64, 32, 48), a, b)
    np.testing.assert_allclose(result, a @ b.T, **F32)


def test_batched_contraction_transposed_operand(rand):
    """bmk,bnk->bmn as a generic: B transposed per batch before the contraction."""
    q, k = rand((4, 64, 32)), rand((4, 96, 32))
    text = mt.generic(
        [((4, 64, 32), "f32"), ((4, 96, 32), "f32")], (4, 64, 96),
        ["affine_map<(b, m, n, k) -> (b, m, k)>", "affine_map<(b, m, n, k) -> (b, n, k)>",
         "affine_map<(b, m, n, k) -> (b, m, n)>"],
        ["parallel", "parallel", "parallel", "reduction"],
        ["%p = arith.mulf %in0, %in1 : f32", "%s = arith.addf %out, %p : f32", "linalg.yield %s : f32"],
        init="0.0",
    )
    np.testing.assert_allclose(run(text, q, k), q @ k.transpose(0, 2, 1), **F32)


# --- dynamic shapes ------------------------------------------------------------------------

def test_dynamic_rows_elementwise(rand):
    body = ["%s = arith.addf %in0, %in1 : f32", "%e = math.exp %s : f32", "linalg.yield %e : f32"]
    module = tilecraft.compile(mt.elementwise((None, 8), 2, body))
    for rows in (1, 2, 7, 64, 1000, 0):
        a, b = rand((rows, 8)), rand((rows, 8))
        result = module(a, b)
        assert result.shape == (rows, 8)
        np.testing.assert_allclose(result, np.exp(a + b), **F32)


def test_dynamic_matmul_several_sizes(rand):
    module = tilecraft.compile(mt.dynamic_matmul())
    for m, n, k in [(1, 1, 1), (7, 13, 5), (64, 64, 64), (3, 100, 17), (40, 1, 9)]:
        a, b = rand((m, k)), rand((k, n))
        np.testing.assert_allclose(module(a, b), a @ b, **F32)


def test_dynamic_reduction(rand):
    text = mt.reduce_2d((None, 16), 1, "arith.addf", "0.0")
    text = text.replace(  # a dynamic-size fill: its empty takes the dim of the input
        "%acc_empty = tensor.empty() : tensor<?xf32>",
        "%zero_index = arith.constant 0 : index\n  %rows = tensor.dim %arg0, %zero_index : tensor<?x16xf32>\n"
        "  %acc_empty = tensor.empty(%rows) : tensor<?xf32>",
    )
    module = tilecraft.compile(text)
    for rows in (1, 5, 33):
        x = rand((rows, 16))
        np.testing.assert_allclose(module(x), x.sum(axis=1), rtol=1e-4, atol=1e-5)


# --- element types -------------------------------------------------------------------------

ADD = {"f": "arith.addf", "i": "arith.addi"}


@pytest.mark.parametrize("element", ["f32", "f64", "f16", "i8", "i16", "i32", "i64"])
@pytest.mark.parametrize("shape", [(5,), (3, 37), (200, 300)])
def test_add_dtypes(rand, element, shape):
    dtype = mt.NP_DTYPE[element]
    op = ADD[element[0]]
    text = mt.elementwise(shape, 2, [f"%s = {op} %in0, %in1 : {element}", f"linalg.yield %s : {element}"], element)
    a, b = rand(shape, dtype), rand(shape, dtype)
    result = run(text, a, b)
    assert result.dtype == dtype and result.shape == shape
    tolerance = dict(rtol=1e-3) if element == "f16" else dict(rtol=1e-6)
    np.testing.assert_allclose(result, a + b, **tolerance)


@pytest.mark.parametrize("element", ["i8", "i32"])
def test_integer_wraparound(element):
    """Integer adds wrap like numpy's fixed-width integers."""
    dtype = mt.NP_DTYPE[element]
    text = mt.elementwise((4,), 2, [f"%s = arith.addi %in0, %in1 : {element}", f"linalg.yield %s : {element}"], element)
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, 1, -1], dtype)
    b = np.array([1, -1, info.max, info.min], dtype)
    np.testing.assert_array_equal(run(text, a, b), a + b)


@pytest.mark.parametrize("shape", [(7,), (4, 33), (256, 200)])
def test_bool_andi(rand, shape):
    text = mt.elementwise(shape, 2, ["%s = arith.andi %in0, %in1 : i1", "linalg.yield %s : i1"], "i1")
    a, b = rand(shape, np.bool_), rand(shape, np.bool_)
    result = run(text, a, b)
    assert result.dtype == np.bool_
    np.testing.assert_array_equal(result, a & b)


@pytest.mark.parametrize("shape", [(9,), (5, 40), (256, 200)])
@pytest.mark.parametrize("predicate, reference", [("olt", np.less), ("oge", np.greater_equal), ("oeq", np.equal)])
def test_cmpf_returns_bool(rand, shape, predicate, reference):
    text = mt.elementwise(
        shape, 2, [f"%c = arith.cmpf {predicate}, %in0, %in1 : f32", "linalg.yield %c : i1"],
        "f32", output_element="i1",
    )
    a, b = rand(shape), rand(shape)
    b.flat[::3] = a.flat[::3]  # some equal pairs
    result = run(text, a, b)
    assert result.dtype == np.bool_
    np.testing.assert_array_equal(result, reference(a, b))


@pytest.mark.parametrize("shape", [(6,), (8, 35), (256, 200)])
@pytest.mark.parametrize("element", ["f32", "i64", "i8"])
def test_select(rand, shape, element):
    dtype = mt.NP_DTYPE[element]
    text = mt.generic(
        [(shape, "i1"), (shape, element), (shape, element)], shape,
        [mt.identity_map(len(shape))] * 4, ["parallel"] * len(shape),
        [f"%s = arith.select %in0, %in1, %in2 : {element}", f"linalg.yield %s : {element}"],
        output_element=element,
    )
    cond, a, b = rand(shape, np.bool_), rand(shape, dtype), rand(shape, dtype)
    np.testing.assert_array_equal(run(text, cond, a, b), np.where(cond, a, b))


@pytest.mark.parametrize("element", ["i32", "i64", "f64"])
def test_matmul_other_dtypes(rand, element):
    dtype = mt.NP_DTYPE[element]
    if element[0] == "i":
        text = mt.matmul(9, 20, 7, element).replace("0.0 :", "0 :")
    else:
        text = mt.matmul(9, 20, 7, element)
    a, b = rand((9, 7), dtype), rand((7, 20), dtype)
    np.testing.assert_allclose(run(text, a, b), a @ b, rtol=1e-12)


def test_scalar_argument(rand):
    """A plain f32 argument (not a tensor) broadcast over a tensor."""
    text = (
        "func.func @main(%x: tensor<10xf32>, %s: f32) -> tensor<10xf32> {\n"
        "  %e = tensor.empty() : tensor<10xf32>\n"
        "  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],"
        ' iterator_types = ["parallel"]}\n'
        "      ins(%x : tensor<10xf32>) outs(%e : tensor<10xf32>) {\n"
        "  ^bb0(%in: f32, %out: f32):\n    %p = arith.mulf %in, %s : f32\n    linalg.yield %p : f32\n"
        "  } -> tensor<10xf32>\n  return %r : tensor<10xf32>\n}\n"
    )
    module = tilecraft.compile(text)
    x = rand((10,))
    np.testing.assert_allclose(module(x, 2.5), x * 2.5, **F32)
    np.testing.assert_allclose(module(x, np.float32(-1)), -x, **F32)
    np.testing.assert_allclose(module(x, 3), x * 3, **F32)


def test_bool_dynamic_shape(rand):
    """Dynamic extents stay scalar loops: bool loads and stores of single bytes."""
    text = mt.elementwise((None,), 2, ["%s = arith.xori %in0, %in1 : i1", "linalg.yield %s : i1"], "i1")
    module = tilecraft.compile(text)
    for size in (1, 13, 100):
        a, b = rand((size,), np.bool_), rand((size,), np.bool_)
        np.testing.assert_array_equal(module(a, b), a ^ b)


def test_bool_constant_operand(rand):
    """A dense bool constant becomes a global buffer; it must hold bytes, not packed bits."""
    text = (
        "func.func @main(%x: tensor<6xi1>) -> tensor<6xi1> {\n"
        "  %c = arith.constant dense<[true, false, true, true, false, true]> : tensor<6xi1>\n"
        "  %e = tensor.empty() : tensor<6xi1>\n"
        "  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,"
        ' affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}\n'
        "      ins(%x, %c : tensor<6xi1>, tensor<6xi1>) outs(%e : tensor<6xi1>) {\n"
        "  ^bb0(%a: i1, %b: i1, %o: i1):\n    %s = arith.ori %a, %b : i1\n    linalg.yield %s : i1\n"
        "  } -> tensor<6xi1>\n  return %r : tensor<6xi1>\n}\n"
    )
    x = np.array([0, 1, 0, 0, 1, 0], np.bool_)
    constant = np.array([1, 0, 1, 1, 0, 1], np.bool_)
    np.testing.assert_array_equal(run(text, x), x | constant)


@pytest.mark.parametrize("shape", [(4, 9), (16, 64)])
def test_bool_any_reduction(rand, shape):
    x = rand(shape, np.bool_)
    x[0] = False  # one row with nothing set
    text = mt.reduce_2d(shape, 1, "arith.ori", "0", element="i1")
    np.testing.assert_array_equal(run(text, x), x.any(axis=1))


def test_f16_and_bool_scalar_arguments():
    text = """
func.func @main(%x: tensor<10xf16>, %s: f16, %flag: i1) -> tensor<10xf16> {
  %e = tensor.empty() : tensor<10xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<10xf16>) outs(%e : tensor<10xf16>) {
  ^bb0(%in: f16, %out: f16):
    %p = arith.mulf %in, %s : f16
    %q = arith.select %flag, %p, %in : f16
    linalg.yield %q : f16
  } -> tensor<10xf16>
  return %r : tensor<10xf16>
}
"""
    module = tilecraft.compile(text)
    x = np.arange(10, dtype=np.float16)
    np.testing.assert_array_equal(module(x, np.float16(2.5), True), x * np.float16(2.5))
    np.testing.assert_array_equal(module(x, 2.5, np.bool_(False)), x)


# --- a wider sweep of odd shapes (slow) -------------------------------------------------------

ODD = [1, 3, 17, 31, 48, 100, 160]


@pytest.mark.slow
@pytest.mark.parametrize("m", ODD)
@pytest.mark.parametrize("n", ODD)
def test_matmul_sweep(rand, m, n):
    for k in (1, 19, 64):
        a, b = rand((m, k)), rand((k, n))
        np.testing.assert_allclose(run(mt.matmul(m, n, k), a, b), a @ b, **F32)


@pytest.mark.slow
@pytest.mark.parametrize("channels, filters", [(1, 1), (3, 20), (16, 32), (7, 64)])
@pytest.mark.parametrize("size", [5, 16, 23])
def test_conv_sweep(rand, channels, filters, size):
    for stride, dilation, pad in [(1, 1, 1), (2, 1, 0), (1, 2, 2), (2, 2, 1)]:
        x, w = rand((1, channels, size, size)), rand((filters, channels, 3, 3))
        text = mt.conv_nchw(1, channels, size, size, filters, 3, 3, stride=stride, dilation=dilation, pad=pad)
        expected = mt.ref_conv_nchw(x, w, stride, dilation, pad)
        np.testing.assert_allclose(run(text, x, w), expected, **F32)
