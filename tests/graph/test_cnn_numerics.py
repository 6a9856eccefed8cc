"""CNN ops under the default schedule at opt_level 3 (NHWC after the layout pass) against
onnxruntime: depthwise convolutions (stride, padding, dilation, channel counts that are no
multiple of the vector width), 1x1 convolutions, pooling, and a MobileNetV2-style network.
The schedule's structure is checked in tests/lit/schedule; speed in benchmarks/cnn.py."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import graph_models
import tilecraft


def _single_node_model(node, shape: tuple[int, ...], weights: dict[str, np.ndarray]):
    graph = helper.make_graph(
        [node], "single",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])],
        [numpy_helper.from_array(w.astype(np.float32), name) for name, w in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return onnx.shape_inference.infer_shapes(model)


def _check_against_onnxruntime(model, shape: tuple[int, ...], seed: int = 0) -> None:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})[0]
    got = tilecraft.compile(model, opt_level=3)(x)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels", [32, 19])
@pytest.mark.parametrize("stride, pad, dilation", [(1, 1, 1), (2, 1, 1), (1, 2, 2), (2, 0, 1)])
def test_depthwise_conv(channels, stride, pad, dilation):
    rng = np.random.default_rng(1)
    weights = {"w": rng.standard_normal((channels, 1, 3, 3)), "b": rng.standard_normal(channels)}
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=channels, strides=[stride] * 2,
                            pads=[pad] * 4, dilations=[dilation] * 2)
    _check_against_onnxruntime(_single_node_model(node, (1, channels, 17, 18), weights),
                               (1, channels, 17, 18))


@pytest.mark.parametrize("cin, cout, size", [(24, 144, 14), (19, 37, 9)])
def test_pointwise_conv(cin, cout, size):
    weights = {"w": np.random.default_rng(2).standard_normal((cout, cin, 1, 1)) / np.sqrt(cin)}
    node = helper.make_node("Conv", ["x", "w"], ["y"])
    _check_against_onnxruntime(_single_node_model(node, (1, cin, size, size), weights),
                               (1, cin, size, size))


@pytest.mark.parametrize("cin, cout, kernel, stride, pad, size", [
    (64, 128, 1, 1, 0, 7), (37, 80, 1, 2, 0, 13), (19, 64, 3, 1, 1, 7), (21, 45, 3, 2, 1, 9),
    (64, 96, 3, 1, 0, 8),
])
def test_filter_heavy_conv(cin, cout, kernel, stride, pad, size):
    """Small images under large filters: the output-channel loop outside the image loops and,
    for 1x1, a register tile of several channel vectors (schedule/plan.py filter_heavy); odd
    channel counts take narrower tiles."""
    rng = np.random.default_rng(3)
    weights = {"w": rng.standard_normal((cout, cin, kernel, kernel)) / np.sqrt(cin * kernel * kernel),
               "b": rng.standard_normal(cout)}
    conv = helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[stride] * 2, pads=[pad] * 4)
    _check_against_onnxruntime(_single_node_model(conv, (1, cin, size, size), weights),
                               (1, cin, size, size))


@pytest.mark.parametrize("channels", [64, 21])
@pytest.mark.parametrize("op, attributes", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2])),
    ("GlobalAveragePool", {}),
])
def test_pooling(channels, op, attributes):
    node = helper.make_node(op, ["x"], ["y"], **attributes)
    _check_against_onnxruntime(_single_node_model(node, (1, channels, 14, 14), {}),
                               (1, channels, 14, 14))


def test_mobilenet_v2_style_net():
    """Inverted residual blocks (expand, depthwise stride 1 and 2, project, residual Add),
    BN folded, ReLU6 as Clip; a width that makes odd channel counts."""
    model = graph_models.mobilenet_v2(size=32, width=0.5, classes=10,
                                      stages=((1, 16, 1, 1), (6, 24, 2, 2), (6, 40, 2, 2)))
    _check_against_onnxruntime(model, (1, 3, 32, 32), seed=5)


def test_digits_cnn_batch1():
    """The digits CNN of examples/ at batch 1: every conv, pooling and Gemm is under the
    schedule's parallel threshold, so the whole model runs on the calling thread."""
    import os

    path = os.path.join(os.path.dirname(tilecraft.__file__), "examples", "digits_cnn.onnx")
    model = onnx.load(path)
    for value in [*model.graph.input, *model.graph.output]:
        value.type.tensor_type.shape.dim[0].dim_value = 1
    x = np.random.default_rng(0).random((1, 1, 16, 16)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"input": x})[0]
    np.testing.assert_allclose(tilecraft.compile(model, opt_level=3)(x), expected, rtol=1e-4, atol=1e-4)


def test_mobilenet_v2_style_net_one_thread(monkeypatch):
    """On a one-thread target no op has a thread level: each fusion group (expand conv + BN +
    ReLU6, depthwise + BN + ReLU6, project + BN + residual Add) is one sequential loop nest
    over bands of output rows (schedule/plan.py sequential_tiles), pads fused per band."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    model = graph_models.mobilenet_v2(size=64, width=0.5, classes=10,
                                      stages=((1, 16, 1, 1), (6, 24, 2, 2), (6, 40, 2, 2)))
    _check_against_onnxruntime(model, (1, 3, 64, 64), seed=6)


@pytest.mark.parametrize("groups", [1, 16])
def test_conv_clip_batch2_one_thread(monkeypatch, groups):
    """A sequential group over two images: the loop takes one image and a band of rows."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    rng = np.random.default_rng(4)
    cin, cout = 16, 16 if groups > 1 else 32
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=groups, pads=[1, 1, 1, 1]),
         helper.make_node("Clip", ["c", "zero", "six"], ["y"])],
        "conv_clip",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, cin, 20, 20])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, cout, 20, 20])],
        [numpy_helper.from_array((rng.standard_normal((cout, cin // groups, 3, 3)) / 4).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b"),
         numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
         numpy_helper.from_array(np.array(6.0, np.float32), "six")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    _check_against_onnxruntime(model, (2, cin, 20, 20), seed=7)
