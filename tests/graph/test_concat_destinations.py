"""``tilecraft-concats-as-destinations`` (pipelines/tensor/concat_destinations.py) on whole
models: branches that end in a concat (Fire modules, Inception branches, a part that is the
model's input, a concat along rows) write into their slices of the result, so the bufferized
IR keeps fewer copies than parts, and the results still match onnxruntime on one or two
threads. The IR-level rewrite is checked in tests/lit/pipelines/concats-as-destinations.mlir."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.pipelines.tensor import concat_destinations, pad_destinations


def _weight(rng, name, *shape):
    scale = 1.0 / np.sqrt(np.prod(shape[1:]))
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _fire(size: int, axis: int = 1, with_input: bool = False):
    """A squeeze 1x1 conv + ReLU, then a 1x1 and a 3x3 expand (+ ReLU) concatenated along
    ``axis`` (1: channels, as SqueezeNet; 2: rows), optionally (channels only) with the
    model's input as a third part."""
    rng = np.random.default_rng(size + axis)
    channels, squeeze, expand = 16, 8, 16
    weights = [_weight(rng, "w_sq", squeeze, channels, 1, 1), _weight(rng, "w_e1", expand, squeeze, 1, 1),
               _weight(rng, "w_e3", expand, squeeze, 3, 3)]
    nodes = [
        helper.make_node("Conv", ["x", "w_sq"], ["s"]), helper.make_node("Relu", ["s"], ["sr"]),
        helper.make_node("Conv", ["sr", "w_e1"], ["a"]), helper.make_node("Relu", ["a"], ["ar"]),
        helper.make_node("Conv", ["sr", "w_e3"], ["b"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["b"], ["br"]),
        helper.make_node("Concat", ["ar", "br", *(["x"] if with_input else [])], ["y"], axis=axis),
    ]
    parts = 2 * expand + (channels if with_input else 0) if axis == 1 else expand
    out_shape = [1, parts, size, size] if axis == 1 else [1, expand, size * (3 if with_input else 2), size]
    graph = helper.make_graph(nodes, "fire", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), (1, channels, size, size)


def _copies(compiled) -> int:
    return compiled.ir("bufferize").count("memref.copy")


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("size,axis,with_input", [(16, 1, False), (13, 1, False), (12, 1, True), (16, 2, False)])
def test_branches_write_into_the_concatenation_and_match_onnxruntime(size, axis, with_input, threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model, shape = _fire(size, axis, with_input)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, cache=False)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-5)

    monkeypatch.setattr(concat_destinations, "concat_as_destination", lambda op: False)
    unchanged = tilecraft.compile(model, cache=False)
    np.testing.assert_allclose(unchanged(x), expected, rtol=1e-4, atol=1e-5)
    # Without the pass every part is copied into the concat; with it, at least the 3x3
    # expand (a fusion group writing its own output) stores in place.
    assert _copies(compiled) < _copies(unchanged)


def _dense_block(layers: int = 3, channels: int = 16, growth: int = 8, size: int = 12):
    """A DenseNet block: each layer is ReLU, a 1x1 conv, ReLU, a 3x3 conv of ``growth``
    filters, concatenated onto everything before it (the next layer reads the concat)."""
    rng = np.random.default_rng(layers)
    nodes, weights, features, width = [], [], "x", channels
    for layer in range(layers):
        weights += [_weight(rng, f"w1_{layer}", 2 * growth, width, 1, 1),
                    _weight(rng, f"w3_{layer}", growth, 2 * growth, 3, 3)]
        nodes += [helper.make_node("Relu", [features], [f"r{layer}"]),
                  helper.make_node("Conv", [f"r{layer}", f"w1_{layer}"], [f"b{layer}"]),
                  helper.make_node("Relu", [f"b{layer}"], [f"br{layer}"]),
                  helper.make_node("Conv", [f"br{layer}", f"w3_{layer}"], [f"g{layer}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Concat", [features, f"g{layer}"], [f"c{layer}"], axis=1)]
        features, width = f"c{layer}", width + growth
    nodes.append(helper.make_node("Identity", [features], ["y"]))
    graph = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width, size, size])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), (1, channels, size, size)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_dense_block_concats_share_one_buffer_and_match_onnxruntime(threads, monkeypatch):
    """Each concat of a dense block is built in its slice of the next one (the module's
    chaining): no concat is copied into the next, and the result still matches."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model, shape = _dense_block()
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, cache=False)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-5)
    bufferized = compiled.ir("bufferize")
    # No concat's 24- or 32-channel value is copied into the next one (the copies left are
    # the block's input into the first concat and pads).
    chained = [line for line in bufferized.splitlines() if "memref.copy" in line
               and any(f"memref<1x12x12x{width}xf32" in line.split(" : ")[-1].split(" to ")[0] for width in (24, 32))]
    assert not chained, chained


def _inception(readers: int = 2, size: int = 12):
    """An Inception module's concat and what reads it: two branches (a 1x1 and a 3x3 conv)
    concatenated, then a 3x3 max pool (padded by 1) and ``readers`` 1x1 convs reading the
    concat whole, and a 1x1 conv after the pool; their outputs concatenated again."""
    rng = np.random.default_rng(readers + size)
    channels, width = 16, 8
    weights = [_weight(rng, "w_a", width, channels, 1, 1), _weight(rng, "w_b", 2 * width, channels, 3, 3),
               _weight(rng, "w_p", width, 3 * width, 1, 1)]
    weights += [_weight(rng, f"w_r{i}", width, 3 * width, 1, 1) for i in range(readers)]
    nodes = [
        helper.make_node("Conv", ["x", "w_a"], ["a"]), helper.make_node("Relu", ["a"], ["ar"]),
        helper.make_node("Conv", ["x", "w_b"], ["b"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["b"], ["br"]),
        helper.make_node("Concat", ["ar", "br"], ["c"], axis=1),
        helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p", "w_p"], ["pc"]), helper.make_node("Relu", ["pc"], ["pr"]),
    ]
    for i in range(readers):
        nodes += [helper.make_node("Conv", ["c", f"w_r{i}"], [f"r{i}"]), helper.make_node("Relu", [f"r{i}"], [f"rr{i}"])]
    nodes.append(helper.make_node("Concat", [*(f"rr{i}" for i in range(readers)), "pr"], ["y"], axis=1))
    graph = helper.make_graph(nodes, "inception", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, (readers + 1) * width, size, size])],
                              weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), (1, channels, size, size)


def _copies_into_padded(compiled, size: int, channels: int) -> list[str]:
    """The bufferized IR's copies into the padded concat's buffer (its strides, 1 x (size+2)
    x (size+2) x channels): a part or the concat written elsewhere and copied in."""
    padded = f"strided<[{(size + 2) ** 2 * channels}, {(size + 2) * channels}, {channels}, 1]"
    return [line for line in compiled.ir("bufferize").splitlines()
            if "memref.copy" in line and padded in line.split(" to ")[-1]]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("readers", [1, 2])
def test_concat_read_by_a_pool_and_convs_is_one_buffer_and_matches_onnxruntime(readers, threads, monkeypatch):
    """A concat that a max pool reads padded and 1x1 convs read whole is built in the padded
    buffer, and the convs read its interior: nothing is copied into the padded buffer, fewer
    copies are left than with the two rewrites off (the concat in a buffer of its own, its
    readers reading it rather than the interior: the check can fail), and the result
    matches onnxruntime."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    size = 12
    model, shape = _inception(readers, size)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, cache=False)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-5)
    assert not _copies_into_padded(compiled, size, 24), _copies_into_padded(compiled, size, 24)

    monkeypatch.setattr(concat_destinations, "_enclosing_insert", lambda op: None)
    monkeypatch.setattr(pad_destinations, "_shared_producer", lambda pad, value: None)
    unchanged = tilecraft.compile(model, cache=False)
    np.testing.assert_allclose(unchanged(x), expected, rtol=1e-4, atol=1e-5)
    assert _copies_into_padded(unchanged, size, 24)
    assert _copies(compiled) < _copies(unchanged)
