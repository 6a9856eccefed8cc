"""ONNX reductions and normalizations against onnx.reference (or onnxruntime / numpy where
the reference departs from the spec): Reduce*, ArgMax/ArgMin, TopK, CumSum, Softmax,
LogSoftmax, Hardmax, BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization, LRN, MeanVarianceNormalization, LpNormalization."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import tilecraft
from tilecraft.frontend.onnx import import_model

from onnx_testing import check_node, make_model, reference_outputs

RNG_DET = np.random.default_rng(41)

F16 = dict(rtol=2e-3, atol=2e-3)


def rand(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-9 if np.dtype(dtype).kind == "i" else 0, 10, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def compile_and_run(model, **inputs):
    got = tilecraft.compile(model)(**inputs)
    return list(got) if isinstance(got, tuple) else [got]


def onnxruntime_outputs(model, inputs):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, dict(inputs))


def declare_output(model, dims, index=0, elem_type=None):
    """Give an output a type where shape inference cannot (a runtime input decides the
    rank, a function op, an invalid attribute); by default the input's element type."""
    output = model.graph.output[index]
    elem_type = elem_type or output.type.tensor_type.elem_type or model.graph.input[0].type.tensor_type.elem_type
    output.CopyFrom(onnx.helper.make_tensor_value_info(output.name, elem_type, dims))


# --- Reduce* -----------------------------------------------------------------------------

# (op, opset, axes, keepdims): axes are an attribute before opset 13 (ReduceSum) / 18 (the
# others) and an initializer input after; each row also covers negative axes or defaults.
REDUCE_CASES = [
    ("ReduceSum", 11, [1], 1), ("ReduceSum", 13, [-1, 0], 0),
    ("ReduceMean", 13, [1, 2], 1), ("ReduceMean", 18, None, 0),
    ("ReduceMax", 12, [-2], 0), ("ReduceMax", 18, [0, 2], 1),
    ("ReduceMin", 18, [1], 0), ("ReduceProd", 18, [2], 1),
    ("ReduceL1", 11, [0], 1), ("ReduceL2", 18, [-1], 0),
    ("ReduceLogSum", 13, [1], 1), ("ReduceLogSumExp", 18, [0, 1], 0),
    ("ReduceSumSquare", 18, None, 1),
]


@pytest.mark.parametrize("op, opset, axes, keepdims", REDUCE_CASES)
def test_reduce(op, opset, axes, keepdims):
    x = rand((3, 4, 5))
    if op in ("ReduceLogSum", "ReduceProd"):
        x = np.abs(x) + 0.5
    axes_as_input = opset >= (13 if op == "ReduceSum" else 18)
    attributes = {"keepdims": keepdims}
    constants = {}
    if axes is not None and axes_as_input:
        constants["axes"] = np.array(axes, np.int64)
    elif axes is not None:
        attributes["axes"] = axes
    check_node(op, {"x": x}, constants=constants, attributes=attributes, opset=opset, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op, dtype", [
    ("ReduceSum", np.int32), ("ReduceMax", np.int64), ("ReduceMin", np.int32), ("ReduceProd", np.int64),
    ("ReduceMean", np.int32), ("ReduceSum", np.float16), ("ReduceMean", np.float64),
])
def test_reduce_element_types(op, dtype):
    x = rand((4, 6), dtype)
    check_node(op, {"x": x}, constants={"axes": np.array([1], np.int64)}, opset=18,
               **(F16 if dtype == np.float16 else {}))


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_max_min_unsigned_and_bool(op):
    """uint8 max/min compare unsigned (200 > 100 although 200 is -56 as a signed i8);
    bool max/min are any/all."""
    axes = {"axes": np.array([1], np.int64)}
    check_node(op, {"x": np.array([[200, 100, 3], [0, 255, 7]], np.uint8)}, constants=axes, opset=18)
    check_node(op, {"x": np.array([[True, False], [True, True]])}, constants=axes, opset=20)


def test_reduce_noop_with_empty_axes_and_empty_set():
    x = rand((2, 3))
    check_node("ReduceL2", {"x": x}, constants={"axes": np.array([], np.int64)},
               attributes={"noop_with_empty_axes": 1}, opset=18)
    empty = np.zeros((2, 0, 3), np.float32)
    check_node("ReduceMax", {"x": empty}, constants={"axes": np.array([1], np.int64)}, opset=18)


def test_reduce_axes_known_only_at_run_time():
    """Axes as a graph input: the model is compiled once and serves every axes value."""
    x = rand((3, 4))
    model = make_model("ReduceMean", {"x": x, "axes": np.array([1], np.int64)}, attributes={"keepdims": 0}, opset=18)
    declare_output(model, ["r0"])
    compiled = tilecraft.compile(model)
    for axes in ([1], [-2], [0]):
        got = compiled(x=x, axes=np.array(axes, np.int64))
        np.testing.assert_allclose(got, x.mean(axis=tuple(axes)), rtol=1e-5, atol=1e-6)


def test_reduce_log_sum_exp_keeps_large_values_finite():
    x = np.array([[1000.0, 1000.0, -np.inf], [-1000.0, 0.0, 1.0]], np.float32)
    check_node("ReduceLogSumExp", {"x": x}, constants={"axes": np.array([1], np.int64)}, opset=18)


def test_reduce_mean_dynamic_batch():
    x = rand((3, 8))
    model = make_model("ReduceMean", {"x": x}, constants={"axes": np.array([0], np.int64)},
                       opset=18, dynamic=["x"], attributes={"keepdims": 0})
    assert "tensor<?x8xf32>" in str(import_model(model))
    compiled = tilecraft.compile(model)
    for batch in (1, 5):
        value = rand((batch, 8), seed=batch)
        np.testing.assert_allclose(compiled(x=value), value.mean(axis=0), rtol=1e-5, atol=1e-6)


# --- ArgMax / ArgMin / TopK --------------------------------------------------------------

@pytest.mark.parametrize("op, axis, keepdims, select_last", [
    ("ArgMax", 1, 1, 0), ("ArgMax", -1, 0, 1), ("ArgMin", 0, 1, 1), ("ArgMin", 2, 0, 0),
])
def test_arg_max_min_with_ties(op, axis, keepdims, select_last):
    x = np.random.default_rng(1).integers(0, 3, size=(3, 4, 5)).astype(np.float32)  # many ties
    check_node(op, {"x": x}, attributes={"axis": axis, "keepdims": keepdims, "select_last_index": select_last},
               opset=13)


def test_arg_max_integers_and_old_opset():
    check_node("ArgMax", {"x": rand((4, 6), np.int64)}, attributes={"axis": 1}, opset=11)
    check_node("ArgMin", {"x": np.array([[130, 7, 255], [0, 128, 1]], np.uint8)}, attributes={"axis": 1}, opset=13)


@pytest.mark.parametrize("largest, axis", [(1, -1), (0, 0)])
def test_top_k_ties_keep_lower_index_first(largest, axis):
    """Ties keep the lower index first; NaN sorts above +inf; -0.0 and 0.0 tie and keep
    their sign (the values are selected, not recomputed)."""
    x = np.random.default_rng(2).integers(0, 4, size=(5, 6)).astype(np.float32)
    x[0, :4] = [np.nan, -0.0, np.inf, 0.0]
    options = dict(constants={"k": np.array([3], np.int64)}, attributes={"axis": axis, "largest": largest},
                   opset=11, num_outputs=2)
    values, _ = check_node("TopK", {"x": x}, **options)
    expected, _ = reference_outputs(make_model("TopK", {"x": x}, **options), {"x": x})
    np.testing.assert_array_equal(np.signbit(values), np.signbit(expected))


def _numpy_top_k(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """numpy's order: stable on ties, NaN above every number (first when largest, last
    otherwise): a stable sort on the values, then a stable one on NaN-or-not."""
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        order = np.argsort(np.where(nan, 0, -x if largest else x), axis=axis, kind="stable")
        group = np.take_along_axis(nan != largest, order, axis=axis)  # NaNs: group 0 when largest
        order = np.take_along_axis(order, np.argsort(group, axis=axis, kind="stable"), axis=axis)
    else:
        order = np.argsort(-x.astype(np.int64) if largest else x, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, indices, axis=axis), indices


@pytest.mark.parametrize("k", [1, 5, 16, 17])  # 17: past the selection passes, ranked instead
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("dtype, axis", [(np.float32, -1), (np.float32, 1), (np.int32, -1), (np.uint8, 0)])
def test_top_k_matches_numpy_order(k, largest, dtype, axis):
    """Every k up to SELECTION_PASSES_AT_MOST is selected pass by pass (ir/reduction.py,
    _top_k_by_passes), beyond it ranked: both orders agree with numpy's stable sort on ties,
    NaN, infinities and integer extremes, on any axis."""
    rng = np.random.default_rng(k)
    if np.dtype(dtype).kind == "f":
        x = rng.integers(-5, 5, size=(3, 40, 20)).astype(dtype)  # many ties
        x[0, :6, 0] = [np.nan, np.inf, -np.inf, np.nan, 0.0, -0.0]
        x[1, 3:9, 1] = np.nan
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, int(info.max) + 1, size=(20, 3, 24), dtype=dtype)
        x[0, 0, :4] = [info.min, info.max, info.min, info.max]
    extent = x.shape[axis]
    options = dict(constants={"k": np.array([min(k, extent)], np.int64)},
                   attributes={"axis": axis, "largest": largest}, opset=11, num_outputs=2)
    compiled = tilecraft.compile(make_model("TopK", {"x": x}, **options))
    values, indices = compiled(x=x)
    expected_values, expected_indices = _numpy_top_k(x, min(k, extent), axis, bool(largest))
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(values, expected_values)


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("dtype, k", [(np.float32, 40), (np.int32, 30)])
def test_top_k_of_a_larger_k_selects_in_a_loop(largest, dtype, k):
    """k past SELECTION_PASSES_AT_MOST but at most a quarter of the axis: the same slots in
    an scf.for (_top_k_by_loop), in numpy's order."""
    x = np.random.default_rng(k).integers(-50, 50, size=(3, 200)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[0, [3, 9]] = np.nan
        x[1, :3] = [np.inf, -np.inf, -0.0]
    options = dict(constants={"k": np.array([k], np.int64)}, attributes={"axis": -1, "largest": largest},
                   opset=11, num_outputs=2)
    values, indices = tilecraft.compile(make_model("TopK", {"x": x}, **options))(x=x)
    expected_values, expected_indices = _numpy_top_k(x, k, -1, bool(largest))
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(values, expected_values)


def test_top_k_passes_over_an_axis_known_at_the_call():
    x = np.random.default_rng(7).integers(-3, 3, size=(30, 4)).astype(np.float32)
    x[2, 1] = np.nan
    options = dict(constants={"k": np.array([4], np.int64)}, attributes={"axis": 0, "largest": 0},
                   opset=11, num_outputs=2)
    compiled = tilecraft.compile(make_model("TopK", {"x": x}, dynamic=["x"], **options))
    for rows in (30, 9):
        values, indices = compiled(x=x[:rows])
        expected_values, expected_indices = _numpy_top_k(x[:rows], 4, 0, False)
        np.testing.assert_array_equal(indices, expected_indices)
        np.testing.assert_array_equal(values, expected_values)


def test_top_k_old_opset_and_runtime_k():
    x = rand((3, 7), np.int32)
    check_node("TopK", {"x": x}, attributes={"k": 2}, opset=9, num_outputs=2)
    model = make_model("TopK", {"x": rand((3, 7)), "k": np.array([2], np.int64)}, opset=11, num_outputs=2)
    compiled = tilecraft.compile(model)
    value = rand((3, 7), seed=4)
    for k in (1, 4):
        values, indices = compiled(x=value, k=np.array([k], np.int64))
        expected = np.argsort(-value, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(indices, expected)
        np.testing.assert_array_equal(values, np.take_along_axis(value, expected, axis=1))


# --- CumSum ------------------------------------------------------------------------------

def _numpy_scan(x: np.ndarray, axis: int, exclusive: bool, reverse: bool, kind: str) -> np.ndarray:
    scan, identity = (np.cumsum, 0) if kind == "sum" else (np.cumprod, 1)
    y = np.flip(x, axis) if reverse else x
    out = scan(y, axis=axis, dtype=x.dtype)
    if exclusive:
        out = np.concatenate([np.full_like(np.take(out, [0], axis=axis), identity),
                              np.take(out, np.arange(out.shape[axis] - 1), axis=axis)], axis=axis)
    return np.flip(out, axis) if reverse else out


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("shape, axis", [((2, 1001, 5), 1), ((3, 130), -1), ((129, 2), 0)])
def test_cum_sum_long_axes_in_blocks(shape, axis, exclusive, reverse):
    """Axes longer than SCAN_TRIANGLE_AT_MOST are scanned in blocks, recursively (1001: three
    levels, padded to whole blocks); every variant agrees with numpy."""
    x = np.random.default_rng(len(shape) + axis).integers(-4, 5, size=shape).astype(np.int64)
    model = make_model("CumSum", {"x": x}, constants={"axis": np.array(axis, np.int64)},
                       attributes={"exclusive": exclusive, "reverse": reverse}, opset=14)
    got = tilecraft.compile(model)(x=x)
    np.testing.assert_array_equal(got, _numpy_scan(x, axis, bool(exclusive), bool(reverse), "sum"))


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 1)])
def test_cum_prod_long_axis_in_blocks(exclusive, reverse):
    x = np.random.default_rng(5).choice([-1.0, 1.0, 0.5, 2.0], size=(3, 150)).astype(np.float32)
    model = make_model("CumProd", {"x": x}, constants={"axis": np.array(1, np.int64)},
                       attributes={"exclusive": exclusive, "reverse": reverse}, opset=26)
    got = tilecraft.compile(model)(x=x)
    np.testing.assert_allclose(got, _numpy_scan(x, 1, bool(exclusive), bool(reverse), "prod"), rtol=1e-6)


@pytest.mark.parametrize("exclusive, reverse, dtype", [
    (0, 0, np.float32), (1, 0, np.int32), (0, 1, np.int64), (1, 1, np.float64),
])
def test_cum_sum(exclusive, reverse, dtype):
    check_node("CumSum", {"x": rand((3, 5), dtype)}, constants={"axis": np.array(1, np.int32)},
               attributes={"exclusive": exclusive, "reverse": reverse}, opset=14)


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 1)])
def test_cum_prod(exclusive, reverse):
    check_node("CumProd", {"x": rand((3, 5))}, constants={"axis": np.array(1, np.int32)},
               attributes={"exclusive": exclusive, "reverse": reverse}, opset=26, rtol=1e-5)


def test_cum_sum_axis_known_only_at_run_time():
    x = rand((3, 4))
    model = make_model("CumSum", {"x": x, "axis": np.array(0, np.int64)}, opset=14)
    compiled = tilecraft.compile(model)
    for axis in (0, 1, -1):
        np.testing.assert_allclose(compiled(x=x, axis=np.array(axis, np.int64)), np.cumsum(x, axis=axis), rtol=1e-5)


# --- Softmax / LogSoftmax / Hardmax ------------------------------------------------------

@pytest.mark.parametrize("op, opset, axis, dtype", [
    ("Softmax", 13, 1, np.float32), ("Softmax", 13, -1, np.float16), ("LogSoftmax", 13, 0, np.float64),
    ("Hardmax", 13, 1, np.float32),
])
def test_softmax_family_single_axis(op, opset, axis, dtype):
    x = rand((2, 3, 4), dtype) * 10
    if op == "Hardmax":
        x = np.round(x)  # ties: the first maximum wins
    check_node(op, {"x": x}, attributes={"axis": axis}, opset=opset, **(F16 if dtype == np.float16 else {}))


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_softmax_family_before_13_coerces_to_2d(op):
    """onnx.reference applies old opsets on one axis; the spec (and onnxruntime) flatten
    every axis from ``axis`` on."""
    x = np.round(rand((2, 3, 4)) * 4)
    model = make_model(op, {"x": x}, attributes={"axis": 1}, opset=11)
    (got,) = compile_and_run(model, x=x)
    np.testing.assert_allclose(got, onnxruntime_outputs(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_softmax_dynamic_batch():
    x = rand((2, 6))
    model = make_model("Softmax", {"x": x}, opset=13, dynamic=["x"])
    compiled = tilecraft.compile(model)
    for batch in (1, 4):
        value = rand((batch, 6), seed=batch) * 30
        expected = np.exp(value - value.max(axis=1, keepdims=True))
        expected /= expected.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(compiled(x=value), expected, rtol=1e-5, atol=1e-7)


def test_softmax_attention_shape_against_onnxruntime():
    """BERT-base's 12x128x128 attention softmax at opt_level 3: exp computed once (its own op,
    read by the row sum and the normalization in one fusion group), times 1 / sum."""
    x = rand((12, 128, 128)) * 8
    model = make_model("Softmax", {"x": x}, attributes={"axis": -1}, opset=17)
    got = tilecraft.compile(model, opt_level=3)(x=x)
    np.testing.assert_allclose(got, onnxruntime_outputs(model, {"x": x})[0], rtol=1e-5, atol=1e-7)


# --- normalizations ----------------------------------------------------------------------

@pytest.mark.parametrize("opset, dtype", [(15, np.float32), (9, np.float64), (7, np.float16)])
def test_batch_normalization_inference(opset, dtype):
    """Against the formula: onnx.reference mixes in momentum-updated batch statistics for
    opsets 7-9 even in test mode (one output), which the spec does not."""
    c = 3
    params = {"scale": rand((c,), dtype, 1), "B": rand((c,), dtype, 2), "mean": rand((c,), dtype, 3),
              "var": (np.abs(rand((c,), dtype, 4)) + 0.1).astype(dtype)}
    x = rand((2, c, 4, 5), dtype)
    model = make_model("BatchNormalization", {"x": x}, constants=params, attributes={"epsilon": 1e-3}, opset=opset)
    (got,) = compile_and_run(model, x=x)
    p = {name: value.astype(np.float64).reshape(-1, 1, 1) for name, value in params.items()}
    expected = (x - p["mean"]) / np.sqrt(p["var"] + np.float32(1e-3)) * p["scale"] + p["B"]
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, **(F16 if dtype == np.float16 else dict(rtol=1e-6, atol=1e-7)))


def test_instance_normalization():
    check_node("InstanceNormalization", {"x": rand((2, 3, 4, 5))},
               constants={"s": rand((3,), seed=1), "b": rand((3,), seed=2)}, attributes={"epsilon": 1e-4},
               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis, with_stats", [(-1, True), (1, False)])
def test_layer_normalization(axis, with_stats):
    x = rand((2, 3, 8))
    shape = x.shape[axis:]
    check_node("LayerNormalization", {"x": x}, constants={"scale": rand(shape, seed=1), "bias": rand(shape, seed=2)},
               attributes={"axis": axis}, opset=17, num_outputs=3 if with_stats else 1, rtol=1e-4, atol=1e-5)


def test_layer_normalization_bert_shape_against_onnxruntime():
    """BERT-base's 128x768 layer norm as compiled at opt_level 3 (one fusion group, rows
    split across tasks): its sum of squared deviations becomes a dot-product vector.contract
    whose lowered LLVM reduction is reassociated (pipelines/vector/vector_math.py)."""
    x = rand((128, 768)) * 4 + 1
    model = make_model("LayerNormalization", {"x": x}, constants={"scale": rand((768,), seed=1),
                       "bias": rand((768,), seed=2)}, attributes={"axis": -1}, opset=17)
    got = tilecraft.compile(model, opt_level=3)(x=x)
    np.testing.assert_allclose(got, onnxruntime_outputs(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_layer_normalization_dynamic_batch_without_bias():
    x = rand((2, 16))
    model = make_model("LayerNormalization", {"x": x}, constants={"scale": rand((16,), seed=1)},
                       opset=17, dynamic=["x"])
    compiled = tilecraft.compile(model)
    scale = rand((16,), seed=1)
    for batch in (1, 3):
        value = rand((batch, 16), seed=batch)
        centered = value - value.mean(axis=1, keepdims=True)
        expected = centered / np.sqrt(value.var(axis=1, keepdims=True) + 1e-5) * scale
        np.testing.assert_allclose(compiled(x=value), expected, rtol=1e-4, atol=1e-5)


def test_group_normalization():
    """Statistics per (instance, group of channels), then per-channel scale and bias
    (opset 21; the checker rejects the deprecated opset-18 form)."""
    n, c, groups = 2, 4, 2
    x = rand((n, c, 3, 3))
    scale, bias = rand((c,), seed=1), rand((c,), seed=2)
    model = make_model("GroupNormalization", {"x": x}, constants={"scale": scale, "bias": bias},
                       attributes={"num_groups": groups, "epsilon": 1e-5}, opset=21)
    declare_output(model, list(x.shape))
    (got,) = compile_and_run(model, x=x)
    grouped = x.reshape(n, groups, -1)
    normed = ((grouped - grouped.mean(-1, keepdims=True)) / np.sqrt(grouped.var(-1, keepdims=True) + 1e-5))
    expected = normed.reshape(x.shape) * scale[:, None, None] + bias[:, None, None]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [3, 4])
def test_lrn(size):
    """Against the spec's formula (onnx.reference's LRN loops over the batch, not the
    channels; onnxruntime accepts odd sizes only)."""
    x = rand((2, 5, 3, 3))
    alpha, beta, bias = 0.2, 0.6, 1.5
    model = make_model("LRN", {"x": x}, attributes={"size": size, "alpha": alpha, "beta": beta, "bias": bias}, opset=13)
    (got,) = compile_and_run(model, x=x)
    square_sum = np.zeros_like(x)
    for c in range(x.shape[1]):
        low, high = max(0, c - (size - 1) // 2), min(x.shape[1] - 1, c + size // 2)
        square_sum[:, c] = (x[:, low: high + 1] ** 2).sum(axis=1)
    np.testing.assert_allclose(got, x / (bias + alpha / size * square_sum) ** beta, rtol=1e-5, atol=1e-6)


def test_mean_variance_normalization():
    check_node("MeanVarianceNormalization", {"x": rand((2, 3, 4, 4))}, attributes={"axes": [0, 2, 3]},
               opset=13, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(p):
    """L1 uses |x| as the spec says (onnx.reference sums x itself); a zero row stays zero."""
    x = rand((3, 4))
    x[1] = 0
    model = make_model("LpNormalization", {"x": x}, attributes={"axis": 1, "p": p}, opset=13)
    (got,) = compile_and_run(model, x=x)
    norm = np.linalg.norm(x, ord=p, axis=1, keepdims=True)
    np.testing.assert_allclose(got, np.where(norm == 0, 0, x / np.where(norm == 0, 1, norm)), rtol=1e-5, atol=1e-6)


# --- what is refused, by name ------------------------------------------------------------

@pytest.mark.parametrize("op, inputs, constants, attributes, opset, message", [
    ("BatchNormalization", {"x": rand((2, 3, 4))}, {"s": rand((3,)), "b": rand((3,)), "m": rand((3,)), "v": rand((3,))},
     {"training_mode": 1}, 15, "training_mode=1"),
    ("GroupNormalization", {"x": rand((2, 3, 4))}, {"s": rand((3,)), "b": rand((3,))}, {"num_groups": 2}, 21,
     "does not divide"),
    ("LpNormalization", {"x": rand((2, 3))}, {}, {"p": 3}, 13, "p=3"),
    ("Softmax", {"x": rand((2, 3), np.int32)}, {}, {}, 13, "floating-point"),
    ("ReduceSum", {"x": rand((2, 3))}, {"axes": np.array([2], np.int64)}, {}, 13, "out of range"),
    ("TopK", {"x": rand((2, 3))}, {"k": np.array([4], np.int64)}, {}, 11, "k=4"),
])
def test_unsupported_attributes_name_the_node(op, inputs, constants, attributes, opset, message):
    model = make_model(op, inputs, constants=constants, attributes=attributes, opset=opset,
                       num_outputs=2 if op == "TopK" else 1)
    declare_output(model, ["d"] * len(next(iter(inputs.values())).shape))
    if op == "TopK":
        declare_output(model, ["d", "e"], index=1, elem_type=onnx.TensorProto.INT64)
    with pytest.raises(tilecraft.ModelImportError, match=message) as error:
        import_model(model)
    assert f"{op.lower()}_node" in str(error.value)


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (3, 1, 1), (2, 0, 0)])
def test_det_matches_numpy(shape):
    x = RNG_DET.standard_normal(shape).astype(np.float32)
    check_node("Det", {"x": x}, opset=11, rtol=1e-4, atol=1e-5)


def test_det_of_singular_and_permuted_matrices():
    """A zero pivot column (singular: 0, no division by zero), row swaps (the sign) and a
    NaN (propagated)."""
    singular = np.array([[1, 2, 3], [2, 4, 6], [0, 0, 1]], np.float32)
    permuted = np.array([[0, 1], [1, 0]], np.float32)
    zero_column = np.array([[0, 1], [0, 2]], np.float32)
    x = np.stack([np.pad(m, ((0, 3 - len(m)), (0, 3 - len(m)))) + np.diag([0] * len(m) + [1] * (3 - len(m)))
                  for m in (singular, permuted, zero_column)]).astype(np.float32)
    got = tilecraft.compile(make_model("Det", {"x": x}, opset=11))(x=x)
    np.testing.assert_allclose(got, [0.0, -1.0, 0.0], atol=1e-6)
    x[0, 0, 0] = np.nan
    assert np.isnan(tilecraft.compile(make_model("Det", {"x": x}, opset=11))(x=x)[0])


def test_det_of_non_square_matrices_is_an_error():
    with pytest.raises(tilecraft.ModelImportError):
        tilecraft.compile(make_model("Det", {"x": np.zeros((2, 3, 4), np.float32)}, opset=11))
