"""Pow by a constant 1, 2, 3 or 4 is multiplied out (ir/elementwise.py,
``float_power_by_multiplication``): the tanh GELU of GPT-2 and ALBERT (``Pow(x, 3)``) no longer
calls libm's ``powf`` once per lane. Checked against onnxruntime and numpy, special values
included, and on the imported IR (no ``math.powf`` left where the rewrite applies)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.frontend.onnx import import_model

from onnx_testing import make_model

# Signed zeros, infinities, NaN, values whose cube or fourth power overflows or underflows.
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e20, -1e20, 1e-20, -1e-20, 3e12, -7.5, 0.5], np.float32)


def _onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    model.ir_version = min(model.ir_version, 10)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _pow_model(base: np.ndarray, exponent: np.ndarray) -> onnx.ModelProto:
    return make_model("Pow", {"x": base}, constants={"y": exponent}, opset=15)


@pytest.mark.parametrize("exponent", [np.float32(1), np.float32(2), np.float32(3), np.float32(4),
                                      np.array([3.0], np.float32), np.int64(3), np.array([[2]], np.int32)])
def test_small_integer_exponent_multiplies(exponent):
    rng = np.random.default_rng(0)
    base = np.concatenate([SPECIAL, rng.standard_normal(500).astype(np.float32) * 4]).reshape(16, 32)
    model = _pow_model(base, np.asarray(exponent))
    assert "math.powf" not in str(import_model(model))
    got = tilecraft.compile(model)(x=base)
    expected = _onnxruntime(model, {"x": base})[0]
    assert got.shape == expected.shape
    # Two roundings instead of one: within 2 ulp (rtol 2.4e-7); inf, NaN and -0 exact.
    np.testing.assert_allclose(got, expected, rtol=2.5e-7, atol=0)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    with np.errstate(over="ignore"):  # the float64 powers above FLT_MAX become inf, as in f32
        exact = np.power(base.astype(np.float64), float(np.asarray(exponent).item())).astype(np.float32)
    np.testing.assert_allclose(got, exact, rtol=2.5e-7, atol=0)


@pytest.mark.parametrize("exponent", [np.float32(2.5), np.float32(5), np.float32(-1), np.float32(0)])
def test_other_exponents_keep_powf(exponent):
    base = np.abs(np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)) + 0.1
    model = _pow_model(base, np.asarray(exponent))
    assert "math.powf" in str(import_model(model))
    np.testing.assert_allclose(tilecraft.compile(model)(x=base), _onnxruntime(model, {"x": base})[0], rtol=1e-6)


def test_exponent_of_higher_rank_still_broadcasts():
    """A [1, 1, 1] exponent makes the [5] base's result [1, 1, 5]: the general path."""
    base = np.array([1.5, -2.0, 0.0, 3.0, -0.5], np.float32)
    model = _pow_model(base, np.full((1, 1, 1), 3.0, np.float32))
    got = tilecraft.compile(model)(x=base)
    assert got.shape == (1, 1, 5)
    np.testing.assert_allclose(got, _onnxruntime(model, {"x": base})[0], rtol=1e-6)


def test_float16_base_rounds_once():
    base = np.linspace(-30, 30, 97).astype(np.float16)
    model = _pow_model(base, np.float16(3))
    np.testing.assert_array_equal(tilecraft.compile(model)(x=base), (base.astype(np.float32) ** 3).astype(np.float16))


def _tanh_gelu_after_matmul(k: int, n: int) -> onnx.ModelProto:
    """GPT-2's MLP input, as the TorchScript exporter writes transformers' Conv1D and
    NewGELUActivation: Gemm on a [K, N] weight, then 0.5 x (1 + tanh(c (x + 0.044715 x^3)))."""
    rng = np.random.default_rng(2)
    weights = [numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), "w"),
               numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype(np.float32), "b")]
    scalars = {"three": 3.0, "k": 0.044715, "c": 0.7978846, "one": 1.0, "half": 0.5}
    weights += [numpy_helper.from_array(np.array(v, np.float32), name) for name, v in scalars.items()]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"]),
             helper.make_node("Mul", ["h", "half"], ["halved"]),
             helper.make_node("Pow", ["h", "three"], ["cubed"]),
             helper.make_node("Mul", ["cubed", "k"], ["scaled"]),
             helper.make_node("Add", ["h", "scaled"], ["inner"]),
             helper.make_node("Mul", ["inner", "c"], ["argument"]),
             helper.make_node("Tanh", ["argument"], ["t"]),
             helper.make_node("Add", ["t", "one"], ["shifted"]),
             helper.make_node("Mul", ["halved", "shifted"], ["y"])]
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, n])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_tanh_gelu_fused_into_gemm_matches_onnxruntime():
    model = _tanh_gelu_after_matmul(96, 160)
    x = np.random.default_rng(3).standard_normal((64, 96)).astype(np.float32) * 3
    expected = _onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(tilecraft.compile(model)(x=x), expected, rtol=1e-5, atol=1e-5)
