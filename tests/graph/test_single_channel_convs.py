"""Convolutions of a one-channel input as a matmul of their windows (ir/conv.py
``single_channel_as_matmul``): raw audio's and grayscale images' first layers."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft


def _conv_model(x_shape, w_shape, **attributes):
    rng = np.random.default_rng(0)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attributes)
    graph = helper.make_graph([node], "c", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * len(x_shape))],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


CASES = [
    # wav2vec 2.0's first layer, shortened
    ([1, 1, 1600], [64, 1, 10], {"strides": [5]}),
    ([2, 1, 300], [32, 1, 3], {"pads": [1, 1], "dilations": [2]}),
    ([1, 1, 28, 28], [16, 1, 5, 5], {}),                                   # LeNet's first layer
    ([1, 1, 33, 31], [24, 1, 3, 3], {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ([1, 1, 20, 20], [8, 1, 3, 3], {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
]


@pytest.mark.parametrize("x_shape, w_shape, attributes", CASES)
def test_single_channel_convs_are_window_matmuls(monkeypatch, x_shape, w_shape, attributes):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model = _conv_model(x_shape, w_shape, **attributes)
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, cache=False, keep_ir=True)
    imported = compiled.ir("input")  # before the graph stage packs the matmul's weights into panels
    assert "linalg.matmul" in imported and "linalg.conv_2d" not in imported
    np.testing.assert_allclose(compiled(x), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_shape, w_shape", [
    ([1, 2, 100], [16, 2, 5]),        # two channels: a convolution as before
    ([1, 1, 40, 40], [8, 1, 9, 9]),   # 81 taps: more than the window matrix may hold per pixel
])
def test_other_convs_stay_convolutions(x_shape, w_shape):
    compiled = tilecraft.compile(_conv_model(x_shape, w_shape), cache=False, keep_ir=True)
    assert "linalg.conv_2d" in compiled.ir("input")
