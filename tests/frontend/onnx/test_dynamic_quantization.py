"""DynamicQuantizeLinear (frontend/onnx/ops/quantization.py) bit-exact against ONNX's reference
implementation, on the inputs that break a careless one: all zeros (the range is empty), all
of one sign (the range is widened to include zero, the zero point sits at an end), ties of
the rounding, NaN and infinities, sizes on the vectorized two-step min/max path and off it;
then a dynamically quantized BERT-shaped encoder layer against onnxruntime running the same
``quantize_dynamic`` model."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft

from onnx_testing import check_node, import_error, make_model
from pinned_targets import AVX2

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "graph"))
import graph_models  # noqa: E402

RNG = np.random.default_rng(3)
LARGE = (4, 96)  # 384 values: a multiple of the 64 lanes, so min/max take the two-step path


def _dql(x: np.ndarray, **options) -> list[np.ndarray]:
    """y, y_scale and y_zero_point of ``x`` from tilecraft, equal to the reference's."""
    return check_node("DynamicQuantizeLinear", {"x": x}, num_outputs=3, opset=11, rtol=0, atol=0, **options)


def _with(values: dict[int, float], shape=LARGE, scale: float = 3.0) -> np.ndarray:
    x = (RNG.standard_normal(shape) * scale).astype(np.float32)
    for index, value in values.items():
        x.flat[index] = value
    return x


@pytest.mark.parametrize("shape", [(7,), LARGE, (2, 3, 128)], ids=["small", "two-step", "rank-3"])
def test_random_values_are_exact(shape):
    y, scale, zero = _dql((RNG.standard_normal(shape) * 4).astype(np.float32))
    assert y.dtype == np.uint8 and scale.shape == () and zero.dtype == np.uint8
    assert 0 < zero < 255


def test_a_scalar_and_an_empty_input():
    y, scale, zero = _dql(np.array(-3.5, np.float32))
    assert y.shape == () and y == 0 and zero == 255
    # no values: the range is [0, 0], as for all zeros (the reference's numpy min refuses it)
    model = make_model("DynamicQuantizeLinear", {"x": np.zeros((0, 4), np.float32)}, num_outputs=3, opset=11)
    y, scale, zero = tilecraft.compile(model)(x=np.zeros((0, 4), np.float32))
    assert y.shape == (0, 4) and scale == np.float32(1.0) / np.float32(255) and zero == 0


@pytest.mark.parametrize("shape", [(6,), LARGE], ids=["small", "two-step"])
def test_all_zeros_take_the_reference_scale(shape):
    y, scale, zero = _dql(np.zeros(shape, np.float32))
    # max == min: the reference divides 1 (not the empty range) by 255, so y_scale is never 0
    assert scale == np.float32(1.0) / np.float32(255) and zero == 0 and not y.any()


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["all-positive", "all-negative"])
@pytest.mark.parametrize("shape", [(6,), LARGE], ids=["small", "two-step"])
def test_one_signed_inputs_widen_the_range_to_zero(sign, shape):
    x = (sign * RNG.uniform(1.0, 5.0, shape)).astype(np.float32)
    y, scale, zero = _dql(x)
    # the range is [0, max] (zero point 0) or [min, 0] (zero point 255), not [min, max]
    assert zero == (0 if sign > 0 else 255)
    assert scale == np.float32(np.abs(x).max()) / np.float32(255)


def test_all_equal_values():
    _dql(np.full(LARGE, 2.5, np.float32))


def test_ties_round_to_even_and_saturate():
    # scale 1 (range 255), zero point 128: x / scale + 128 hits .5 ties on both sides
    x = np.array([-0.5, 0.5, 1.5, 2.5, 126.5, -128.5, -127.5, 3.5], np.float32)
    y, scale, zero = _dql(x)
    assert scale == 1.0 and zero == 128
    np.testing.assert_array_equal(y, [128, 128, 130, 130, 254, 0, 0, 132])


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the reference's own NaN arithmetic
@pytest.mark.parametrize("position", [0, 5, 383], ids=["first", "inside", "last"])
def test_nan_gives_the_reference_result(position):
    # NaN propagates through min/max: y_scale NaN, the zero point clamps to 255, y is 0
    y, scale, zero = _dql(_with({position: np.nan}))
    assert np.isnan(scale) and zero == 255 and not y.any()


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("value", [np.inf, -np.inf], ids=["+inf", "-inf"])
@pytest.mark.parametrize("shape", [(6,), LARGE], ids=["small", "two-step"])
def test_infinities_give_the_reference_result(value, shape):
    _, scale, _ = _dql(_with({1: value}, shape))
    assert np.isinf(scale)


def test_dynamic_batch_takes_the_one_step_reduction():
    _dql((RNG.standard_normal((8, 64)) * 2).astype(np.float32), dynamic=["x"])


def test_a_float64_input_is_refused_naming_the_node():
    assert "float32" in import_error("DynamicQuantizeLinear", {"x": np.zeros(4, np.float64)}, num_outputs=3,
                                     opset=11)


# The host (VNNI kernels where it has them), and AVX2 pinned: widened i32 matmuls, 8-wide lanes.
@pytest.mark.parametrize("target", ["llvm", AVX2], ids=["host", "avx2"])
def test_quantize_dynamic_encoder_layer_matches_onnxruntime(target):
    ort = pytest.importorskip("onnxruntime")
    model = graph_models.bert_layer(seq=32, hidden=128, heads=4, ffn=256)
    int8 = tilecraft.quantize(model)
    assert sum(node.op_type == "DynamicQuantizeLinear" for node in int8.graph.node) >= 3
    x = RNG.standard_normal((32, 128)).astype(np.float32)
    session = ort.InferenceSession(int8.SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"x": x})
    got = tilecraft.compile(int8, target=target)(x=x)
    # the same 8-bit operands and i32 products; what remains is float rounding in the
    # epilogues, softmax and LayerNorm (about 2e-7 here; int8 against f32 differs by 7e-3,
    # so one quantization level off anywhere fails this)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * np.abs(expected).max())
