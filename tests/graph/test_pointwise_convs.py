"""1x1 convolutions on odd rows (ir/conv.py ``pointwise_as_matmul``): SqueezeNet's squeeze and
expand layers at 27x27 and 13x13 stay convolutions (their pixel tiles peel the row's last
tile), so a Fire module's concat and its 3x3 expand's pad are their producers' destinations
and no copy is left; a classifier into 1000 channels and squeeze-excite's 1x1 image stay
matmuls of the pixels. Numerics against onnxruntime on one and two threads. The import forms
are checked in tests/lit/onnx/conv-forms.py."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.ir import conv


def _weight(rng, name, *shape):
    scale = 1.0 / np.sqrt(np.prod(shape[1:]))
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _bias(rng, name, n):
    return numpy_helper.from_array(rng.standard_normal(n).astype(np.float32) * 0.1, name)


def _model(nodes, weights, in_shape, out_shape):
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _fire(size: int, channels: int, squeeze: int, expand: int):
    """SqueezeNet's Fire module: 1x1 squeeze + ReLU, a 1x1 and a 3x3 expand (+ ReLU) of it,
    concatenated along the channels."""
    rng = np.random.default_rng(size)
    weights = [_weight(rng, "w_sq", squeeze, channels, 1, 1), _bias(rng, "b_sq", squeeze),
               _weight(rng, "w_e1", expand, squeeze, 1, 1), _bias(rng, "b_e1", expand),
               _weight(rng, "w_e3", expand, squeeze, 3, 3), _bias(rng, "b_e3", expand)]
    nodes = [
        helper.make_node("Conv", ["x", "w_sq", "b_sq"], ["s"]), helper.make_node("Relu", ["s"], ["sr"]),
        helper.make_node("Conv", ["sr", "w_e1", "b_e1"], ["a"]), helper.make_node("Relu", ["a"], ["ar"]),
        helper.make_node("Conv", ["sr", "w_e3", "b_e3"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["b"], ["br"]),
        helper.make_node("Concat", ["ar", "br"], ["y"], axis=1),
    ]
    return _model(nodes, weights, [1, channels, size, size], [1, 2 * expand, size, size])


def _classifier(size: int, channels: int, classes: int):
    """A 1x1 conv into ``classes`` channels, ReLU, global average pool (SqueezeNet's head)."""
    rng = np.random.default_rng(classes)
    weights = [_weight(rng, "w", classes, channels, 1, 1), _bias(rng, "b", classes)]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["y"])]
    return _model(nodes, weights, [1, channels, size, size], [1, classes, 1, 1])


def _check(model, shape, threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed op sequence falls back to scalar loops with a warning
        compiled = tilecraft.compile(model, cache=False, keep_ir=True)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-5)
    return compiled


@pytest.mark.parametrize("width,filters,as_matmul", [
    (13, 1000, False),  # SqueezeNet's classifier: a convolution of 1008 filters
    (13, 64, False), (27, 128, False),
    (13, 40, True),  # no two-vector tile, and 48 filters would add a fifth
    (1, 32, True), (3, 64, True),  # squeeze-excite's pooled image
    (14, 1000, False), (55, 16, False),  # rows with a 4-8 pixel tile stay convolutions
])
def test_which_pointwise_convs_are_matmuls(width, filters, as_matmul):
    assert conv.pointwise_as_matmul(width, filters) is as_matmul


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("size,channels,squeeze,expand", [(13, 48, 16, 64), (27, 32, 16, 32)])
def test_fire_modules_on_odd_rows_write_in_place(size, channels, squeeze, expand, threads, monkeypatch):
    compiled = _check(_fire(size, channels, squeeze, expand), (1, channels, size, size), threads, monkeypatch)
    assert "linalg.matmul" not in compiled.ir("graph")
    # The squeeze stores into its pad's interior, both expands into their channels of the
    # concat: nothing is copied.
    assert compiled.ir("bufferize").count("memref.copy") == 0


@pytest.mark.parametrize("width,filters,padded", [(13, 1000, 1008), (27, 1000, 1008), (13, 40, 40), (13, 64, 64),
                                                  (14, 1000, 1000), (1, 1000, 1000)])
def test_which_pointwise_convs_get_zero_filters(width, filters, padded):
    assert conv.pointwise_padded_filters(width, filters) == padded


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("size,classes", [(13, 1000), (11, 200)])
def test_classifier_on_padded_filters(size, classes, threads, monkeypatch):
    """SqueezeNet's head on odd rows: the conv computes whole two-vector tiles of filters
    (1000 -> 1008, 200 -> 208) and the ReLU and the pool read the real channels."""
    compiled = _check(_classifier(size, 64, classes), (1, 64, size, size), threads, monkeypatch)
    graph = compiled.ir("graph")
    assert "linalg.matmul" not in graph and f"x{classes + 8}xf32" in graph


@pytest.mark.parametrize("threads", ["1", "2"])
def test_concat_of_a_padded_pointwise_conv_and_a_3x3(threads, monkeypatch):
    """A 1x1 conv into 200 channels (computed as 208) and a 3x3 one concatenated, at 13x13."""
    rng = np.random.default_rng(3)
    weights = [_weight(rng, "w1", 200, 32, 1, 1), _bias(rng, "b1", 200), _weight(rng, "w3", 64, 32, 3, 3)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"]), helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("Conv", ["x", "w3"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["ar", "b"], ["y"], axis=1)]
    _check(_model(nodes, weights, [1, 32, 13, 13], [1, 264, 13, 13]), (1, 32, 13, 13), threads, monkeypatch)
