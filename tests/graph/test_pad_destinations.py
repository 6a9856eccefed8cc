"""``tilecraft-pads-as-destinations`` (pipelines/tensor/pad_destinations.py) on whole models: the
pads of convolutions, depthwise convolutions and max pooling become the buffers their
sources' producers write into, so the bufferized IR copies nothing into a padded buffer's
interior, and the results still match onnxruntime (zero pads, the -inf pad of max pooling,
asymmetric pads, stride 2), on one or two threads. The IR-level rewrite is checked in
tests/lit/pipelines/pads-as-destinations.mlir."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft


def _block(channels: int, size: int):
    """1x1 expand + ReLU, 3x3 depthwise (stride 2, pads 1) + ReLU, max pool 3x3 (pads 0/1),
    3x3 conv: every pad's source is computed by the group before it."""
    rng = np.random.default_rng(channels + size)
    wide = channels * 2

    def weight(name, *shape):
        scale = 1.0 / np.sqrt(np.prod(shape[1:]))
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    weights = [weight("w_expand", wide, channels, 1, 1), weight("w_dw", wide, 1, 3, 3),
               weight("w_conv", channels, wide, 3, 3)]
    nodes = [
        helper.make_node("Conv", ["x", "w_expand"], ["e"]),
        helper.make_node("Relu", ["e"], ["er"]),
        helper.make_node("Conv", ["er", "w_dw"], ["d"], group=wide, pads=[1, 1, 1, 1],
                         strides=[2, 2]),
        helper.make_node("Relu", ["d"], ["dr"]),
        helper.make_node("MaxPool", ["dr"], ["p"], kernel_shape=[3, 3], pads=[0, 0, 1, 1],
                         strides=[1, 1]),
        helper.make_node("Conv", ["p", "w_conv"], ["y"], pads=[1, 1, 1, 1]),
    ]
    half = size // 2
    # MaxPool 3x3, stride 1, pads 0 before and 1 after: the output loses one row and column.
    graph = helper.make_graph(
        nodes, "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, half - 1, half - 1])],
        weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("channels, size", [(16, 28), (24, 14)])
@pytest.mark.parametrize("threads", [1, 2])
def test_pads_written_in_place_match_onnxruntime(channels, size, threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", str(threads))
    model = _block(channels, size)
    x = np.random.default_rng(2).standard_normal((1, channels, size, size)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, keep_ir=True)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
    assert "tensor.pad" in compiled.ir("schedule")  # three pads, none fused into a group
    bufferized = compiled.ir("bufferize")
    assert "tensor.pad" not in bufferized
    # Each pad's source was computed into the padded buffer: nothing is copied.
    assert "memref.copy" not in bufferized and "linalg.copy" not in bufferized
