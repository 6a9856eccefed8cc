"""tilecraft-elementwise-by-rows (pipelines/vector/row_chains.py) on whole kernels: a 1x1
convolution with SiLU (EfficientNet's expansion) and one with the exact GELU, against
onnxruntime, and bit for bit against the same build without the pass (it only reorders rows'
ops: every lane sees the same operations). The IR check: after the vector stage the
epilogue's exp polynomial works on 1-D rows, not on the n-D register tile."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.pipelines.vector.row_chains import ELEMENTWISE_BY_ROWS

CHANNELS_IN, CHANNELS_OUT, SIDE = 16, 96, 28


def conv_model(activation: str) -> onnx.ModelProto:
    """Conv 1x1 (bias) then SiLU (Sigmoid and Mul, as exporters write it) or the exact GELU
    (opset 20's Gelu)."""
    rng = np.random.default_rng(0)
    weight = (rng.standard_normal((CHANNELS_OUT, CHANNELS_IN, 1, 1)) * 0.5).astype(np.float32)
    bias = rng.standard_normal(CHANNELS_OUT).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"])]
    if activation == "silu":
        nodes += [helper.make_node("Sigmoid", ["y"], ["s"]), helper.make_node("Mul", ["y", "s"], ["out"])]
    else:
        nodes += [helper.make_node("Gelu", ["y"], ["out"])]
    graph = helper.make_graph(
        nodes, f"conv_{activation}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHANNELS_IN, SIDE, SIDE])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, CHANNELS_OUT, SIDE, SIDE])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def without_rows(default: tilecraft.Pipeline) -> tilecraft.Pipeline:
    return default.replace("vector", [p for p in default.stage("vector").passes if p != ELEMENTWISE_BY_ROWS])


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    # Wide enough that the exp's range limits and both signs of SiLU are reached.
    return (np.random.default_rng(1).standard_normal((1, CHANNELS_IN, SIDE, SIDE)) * 3).astype(np.float32)


@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_against_onnxruntime_and_without_the_pass(activation: str, x: np.ndarray) -> None:
    model = conv_model(activation)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    compiled = tilecraft.compile(model, cache=False)
    got = compiled(x)
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)
    assert ELEMENTWISE_BY_ROWS in compiled.pipeline.stage("vector").passes
    reference = tilecraft.compile(model, cache=False, pipeline=without_rows(compiled.pipeline))(x)
    np.testing.assert_array_equal(got, reference)


def test_epilogue_is_row_major(x: np.ndarray) -> None:
    """The SiLU's exp (its roundeven and FMAs) on 1-D rows after the vector stage."""
    vector_ir = tilecraft.compile(conv_model("silu"), cache=False).ir("vector")
    row_fmas = re.findall(r"math\.fma .* : vector<\d+xf32>\n", vector_ir)
    tile_fmas = re.findall(r"math\.fma .* : vector<\d+(?:x\d+)+xf32>\n", vector_ir)
    assert row_fmas and not tile_fmas, (len(row_fmas), len(tile_fmas))
