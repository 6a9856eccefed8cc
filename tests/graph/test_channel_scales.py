"""A convolution whose input is scaled per channel reads a scaled filter instead
(pipelines/graph/channel_scales.py, ``tilecraft-scale-filters-by-channel``): squeeze-excite
blocks followed by their projection convolution (EfficientNet's sigmoid gate, MobileNetV3's
hard sigmoid), 1x1 and padded strided 3x3 projections, output channels no vector divides.
Numerics against onnxruntime on one and two threads; the graph IR has no activation-sized
scale left where the rule applies, and keeps it where it does not (two images, a filter
larger than the image)."""

from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft


def se_projection(channels: int, size: int, out_channels: int, *, kernel: int = 1, stride: int = 1,
                  batch: int = 1, gate: str = "Sigmoid"):
    """x -> 1x1 conv + SiLU (the block's expanded activation) -> squeeze-excite (pool,
    1x1 + ReLU, 1x1 + ``gate``) -> activation * gate -> projection conv (``kernel`` x
    ``kernel``, ``stride``, same padding) with bias."""
    rng = np.random.default_rng(channels * 31 + out_channels)
    weights = []

    def weight(name, shape):
        scale = 1.0 / np.sqrt(np.prod(shape[1:]))
        weights.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def bias(name, n):
        weights.append(numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype(np.float32), name))
        return name

    squeeze = max(channels // 4, 1)
    pad = kernel // 2
    nodes = [
        helper.make_node("Conv", ["x", weight("we", (channels, 8, 1, 1)), bias("be", channels)], ["e"]),
        helper.make_node("Sigmoid", ["e"], ["es"]), helper.make_node("Mul", ["e", "es"], ["a"]),
        helper.make_node("GlobalAveragePool", ["a"], ["p"]),
        helper.make_node("Conv", ["p", weight("w1", (squeeze, channels, 1, 1)), bias("b1", squeeze)], ["f1"]),
        helper.make_node("Relu", ["f1"], ["r"]),
        helper.make_node("Conv", ["r", weight("w2", (channels, squeeze, 1, 1)), bias("b2", channels)], ["f2"]),
        helper.make_node(gate, ["f2"], ["g"]), helper.make_node("Mul", ["a", "g"], ["s"]),
        helper.make_node("Conv", ["s", weight("wp", (out_channels, channels, kernel, kernel)), bias("bp", out_channels)],
                         ["y"], kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4),
    ]
    out_size = (size + 2 * pad - kernel) // stride + 1
    graph = helper.make_graph(
        nodes, "se_projection", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, out_channels, out_size, out_size])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


# (channels, size, out_channels, kernel, stride, batch, gate, rewritten)
CASES = [
    (144, 14, 24, 1, 1, 1, "Sigmoid", True),        # EfficientNet's block 3, smaller image
    (43, 13, 19, 1, 1, 1, "Sigmoid", True),         # no vector divides either channel count
    (72, 14, 40, 1, 1, 1, "HardSigmoid", True),     # MobileNetV3's gate
    (32, 15, 16, 3, 2, 1, "Sigmoid", True),         # padded, strided 3x3: 9 x 16 taps <= 225 pixels
    (96, 7, 320, 1, 1, 1, "Sigmoid", False),        # the filter (96 x 320) outweighs 49 pixels
    (48, 9, 24, 1, 1, 2, "Sigmoid", False),         # a gate per image
]
IDS = [f"c{c}-s{s}-o{o}-k{k}-st{st}-n{n}-{g}" for c, s, o, k, st, n, g, _ in CASES]


def _activation_scales(graph_ir: str, batch: int, channels: int, size: int) -> int:
    """Generics of the graph IR reading the gate (``N x 1 x 1 x C``) and writing a whole
    NHWC activation: the activation's scale."""
    gate = f"tensor<{batch}x1x1x{channels}xf32>"
    activation = f"tensor<{batch}x{size}x{size}x{channels}xf32>"
    return len(re.findall(r"linalg\.generic [^\n]*ins\([^\n]*" + re.escape(gate) + r"[^\n]*\) outs\(%\S+ : "
                          + re.escape(activation) + r"\)", graph_ir))


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("channels,size,out_channels,kernel,stride,batch,gate,rewritten", CASES, ids=IDS)
def test_se_projection_against_onnxruntime(channels, size, out_channels, kernel, stride, batch, gate, rewritten,
                                           threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model = se_projection(channels, size, out_channels, kernel=kernel, stride=stride, batch=batch, gate=gate)
    x = np.random.default_rng(size).standard_normal((batch, 8, size, size)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, cache=False, keep_ir=True)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
    # Where the rule applies, the gate scales the filter, not the activation.
    scales = _activation_scales(compiled.ir("graph"), batch, channels, size)
    assert scales == (0 if rewritten else 1), compiled.ir("graph")


def test_bf16_weights_keep_the_gate_on_the_activation():
    """At precision bf16 the projection's filter stays a constant (stored as bf16, its
    kernel a bf16 dot product): the graph stage leaves the rule out."""
    from tilecraft.pipelines.graph.channel_scales import SCALE_FILTERS_BY_CHANNEL
    from tilecraft.pipelines.target import Target
    from tilecraft.pipelines.tensor.bf16_weights import with_bf16_weights

    target = Target.parse("llvm -mcpu=znver5")
    f32 = tilecraft.cpu_pipeline(target, opt_level=3)
    assert SCALE_FILTERS_BY_CHANNEL in f32.stage("graph").passes
    for kernels in (True, False):
        bf16 = with_bf16_weights(f32, target, kernels=kernels)
        assert SCALE_FILTERS_BY_CHANNEL not in bf16.stage("graph").passes
