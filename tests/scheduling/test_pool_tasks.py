"""Pooling on two threads (schedule/conv_plan.py, the NHWC depthwise/pooling branch and the
thread split): max and average pools, strided and not, ceil mode, padding, odd extents and
global pools, each reading a convolution's output as in a network, compiled for two threads
and checked against onnxruntime. The plans' task splits are checked in
tests/lit/schedule/pool_tasks.mlir."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft


def _conv_pool_model(channels: int, size: int, op: str, attributes: dict) -> onnx.ModelProto:
    """x (1, 8, size, size) -> 1x1 conv to ``channels`` + ReLU -> ``op``: the pool reads a
    layer whose tasks split it, as in a network."""
    rng = np.random.default_rng(channels * 1000 + size)
    weight = numpy_helper.from_array((rng.standard_normal((channels, 8, 1, 1)) * 0.5).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node(op, ["r"], ["y"], **attributes)]
    graph = helper.make_graph(nodes, "conv_pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    inferred = onnx.shape_inference.infer_shapes(model)
    del model.graph.output[:]
    model.graph.output.extend(v for v in inferred.graph.output)
    return onnx.shape_inference.infer_shapes(model)


_CASES = [
    # SqueezeNet's 3x3/2 ceil-mode max pools on odd maps (55 -> 27 rows: odd both ways).
    (64, 55, "MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    (48, 27, "MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    # Inception's 3x3/1 padded max pool; its 3x3/2 one with only the high side padded.
    (64, 28, "MaxPool", dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])),
    (96, 28, "MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])),
    # ResNet's stem pool, YOLO's SPPF 5x5/1, a channel count of no whole vector (40).
    (64, 56, "MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    (40, 20, "MaxPool", dict(kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])),
    # Average pools: DenseNet's 2x2/2 transition, 3x3/1 without the padding counted, 3x3/2
    # ceil mode on an odd map with the padding counted.
    (64, 56, "AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2])),
    (48, 35, "AveragePool", dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=0)),
    (32, 33, "AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
                                 count_include_pad=1)),
    # Global average pools: SqueezeNet's head (13x13), an odd channel count.
    (512, 13, "GlobalAveragePool", {}),
    (72, 28, "GlobalAveragePool", {}),
]


@pytest.mark.parametrize("channels, size, op, attributes", _CASES,
                         ids=[f"{op}-{c}x{s}-{i}" for i, (c, s, op, _) in enumerate(_CASES)])
def test_pool_two_threads_against_onnxruntime(monkeypatch, channels, size, op, attributes):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model = _conv_pool_model(channels, size, op, attributes)
    x = np.random.default_rng(size).standard_normal((1, 8, size, size)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, target=tilecraft.Target(num_threads=2), opt_level=3)
    got = compiled(x)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
