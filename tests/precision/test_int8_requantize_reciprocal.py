"""An int8 kernel's requantization by the scale's reciprocal (``requantize_by_reciprocals``,
pipelines/tensor/int8_matmul.py): in the epilogue, each QuantizeLinear's division by a
constant scale becomes a multiplication by its f32 reciprocal, as onnxruntime's QLinearConv
and QLinearAdd requantize. Numerics of a residual block against onnxruntime running the same
QDQ model (within one 8-bit step, nearly all equal); the epilogue's form in IR."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402

from pinned_targets import AVX512  # noqa: E402
from qdq_reference import differing_within_one_step  # noqa: E402


def _residual_block(channels: int, mid: int, size: int, seed: int) -> onnx.ModelProto:
    """relu(conv_b(relu(conv_a(x))) + x) with 1x1 and 3x3 convolutions (ResNet's identity
    block, shortened): conv_b's epilogue quantizes its product, adds the residual and
    quantizes the sum, two divisions by a scale in one epilogue."""
    rng = np.random.default_rng(seed)

    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    initializers = [weight("wa", (mid, channels, 3, 3)), weight("ba", (mid,)),
                    weight("wb", (channels, mid, 1, 1)), weight("bb", (channels,))]
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["ra"]),
             helper.make_node("Conv", ["ra", "wb", "bb"], ["b"]),
             helper.make_node("Add", ["b", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    shape = [1, channels, size, size]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _quantized(channels: int, mid: int, size: int, seed: int):
    model = _residual_block(channels, mid, size, seed)
    rng = np.random.default_rng(seed + 1)
    samples = [{"x": rng.standard_normal((1, channels, size, size)).astype(np.float32)} for _ in range(4)]
    return tilecraft.quantize(model, samples), samples


@pytest.mark.parametrize("channels,mid,size", [(32, 16, 9), (64, 32, 7)])
def test_requantized_by_reciprocals_matches_onnxruntime(channels, mid, size):
    qdq, samples = _quantized(channels, mid, size, seed=channels)
    # A rounding may differ only near a half-integer: almost every value is onnxruntime's.
    assert differing_within_one_step(tilecraft.compile(qdq), qdq, samples) < 0.01


def test_int8_epilogues_multiply_by_the_reciprocal_of_a_constant_scale():
    # On a VNNI target whatever the host: both int8 kernels take an epilogue, and none of
    # them divides (each division by a scale, one in the first, two in the second, is a
    # multiplication by a constant).
    qdq, _ = _quantized(32, 16, 9, seed=5)
    simplified = tilecraft.compile(qdq, target=AVX512).ir("simplify")
    bodies = re.split(r"\n  func\.func ", simplified)
    epilogues = [body for body in bodies if re.match(r"private @tilecraft_int8_matmul_\w+_epilogue\d+\(", body)]
    assert len(epilogues) == 2
    for body in epilogues:
        assert "arith.divf" not in body
        assert "math.roundeven" in body
