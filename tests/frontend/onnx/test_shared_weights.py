"""A weight several nodes read is one constant (frontend/onnx/importer.py, ``materialize``),
packed once by the graph stage (``cse`` before ``tilecraft-fold-constants``): ALBERT applies
one layer's weights 12 times and its library held them 12 times. Against onnxruntime; the IR
fact itself is tests/lit/onnx/shared-weights.py."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft

RNG = np.random.default_rng(7)


def _onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _model(nodes, initializers, x_shape, y_shape, extra_inputs=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
                                                *extra_inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _weight(name: str, k: int, n: int) -> onnx.TensorProto:
    return numpy_helper.from_array((RNG.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), name)


def _panel_constants(compiled: tilecraft.CompiledModule) -> list[str]:
    """The weight constants after the graph stage, as ``name : type``."""
    return re.findall(r"arith\.constant dense_resource<([^>]*)> : (tensor<[^>]*>)", compiled.ir("graph"))


@pytest.mark.parametrize("k", [96, 1032])  # 1032 x 1032 passes the Identity handler, not the folder
def test_identity_aliases_and_repeated_reads_share_one_packed_weight(k):
    """ALBERT's pattern: one layer's weight read by every layer, through Identity aliases
    and by name, with other weights between."""
    nodes = [helper.make_node("Identity", ["w"], ["w_1"]),
             helper.make_node("Identity", ["w_1"], ["w_2"]),
             helper.make_node("MatMul", ["x", "w"], ["h0"]),
             helper.make_node("Tanh", ["h0"], ["a0"]),
             helper.make_node("MatMul", ["a0", "w_1"], ["h1"]),
             helper.make_node("MatMul", ["h1", "other"], ["h2"]),
             helper.make_node("MatMul", ["h2", "w_2"], ["h3"]),
             helper.make_node("MatMul", ["h3", "w"], ["y"])]
    model = _model(nodes, [_weight("w", k, k), _weight("other", k, k)], [16, k], [16, k])
    x = RNG.standard_normal((16, k)).astype(np.float32)
    compiled = tilecraft.compile(model)
    np.testing.assert_allclose(compiled(x=x), _onnxruntime(model, {"x": x}), rtol=1e-4, atol=1e-4)
    panels = _panel_constants(compiled)
    assert len(panels) == 2, panels  # w and other, each packed once


def test_weight_read_in_a_branch_and_outside():
    """Constants are shared in the function's entry block only: a weight an If branch reads
    is materialized there (a constant made inside a branch does not dominate the rest)."""
    then = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [4, 32])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [4, 32])])
    nodes = [helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other),
             helper.make_node("MatMul", ["b", "w"], ["y"])]
    model = _model(nodes, [_weight("w", 32, 32)], [4, 32], [4, 32],
                   [helper.make_tensor_value_info("c", TensorProto.BOOL, [])])
    x = RNG.standard_normal((4, 32)).astype(np.float32)
    compiled = tilecraft.compile(model)
    for condition in (True, False):
        feeds = {"x": x, "c": np.array(condition)}
        np.testing.assert_allclose(compiled(**feeds), _onnxruntime(model, feeds), rtol=1e-5, atol=1e-5)


def test_a_constant_returned_twice_is_two_outputs():
    """Graph outputs that are the same known array stay two buffers (the caller may write one)."""
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["a"]), helper.make_node("Identity", ["w"], ["b"]),
                               helper.make_node("Relu", ["x"], ["r"])], "twice",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
                               for n, shape in (("a", [2, 3]), ("b", [2, 3]), ("r", [2]))], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    a, b, _ = tilecraft.compile(model)(x=np.ones(2, np.float32))
    a[0, 0] = 42.0
    np.testing.assert_array_equal(b, np.arange(6, dtype=np.float32).reshape(2, 3))
