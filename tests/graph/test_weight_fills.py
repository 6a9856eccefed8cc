"""Fill weights as constants (pipelines/graph/weight_fills.py): a network whose convolution
and Gemm weights are ``ConstantOfShape`` fills, as ONNX's light zoo models carry them,
against onnxruntime; its kernels read the weights as constants, and with a budget too small
for them the fills stay and the results are the same."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402


def _fill(name: str, shape: list[int], value: float) -> list:
    """A ``ConstantOfShape`` node writing ``name`` and its shape initializer."""
    shape_name = f"{name}_shape"
    node = helper.make_node("ConstantOfShape", [shape_name], [name],
                            value=numpy_helper.from_array(np.array([value], np.float32)))
    return [node, numpy_helper.from_array(np.array(shape, np.int64), shape_name)]


def _fill_weighted_network():
    """Conv (16 filters of 8x3x3) -> Relu -> Flatten -> Gemm (transB, 10 outputs), every
    weight and bias a ConstantOfShape fill of its own value."""
    nodes, inits = [], []
    for name, shape, value in (("w", [16, 8, 3, 3], 0.03), ("b", [16], -0.1),
                               ("fc_w", [10, 16 * 6 * 6], 0.02), ("fc_b", [10], 0.5)):
        node, init = _fill(name, shape, value)
        nodes.append(node)
        inits.append(init)
    nodes += [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3]),
              helper.make_node("Relu", ["c"], ["r"]),
              helper.make_node("Flatten", ["r"], ["f"]),
              helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "fill_weights",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _reference(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _weight_reads(graph_ir: str) -> tuple[int, int]:
    """(weights read from dense_resource constants, fills read as a contraction's input) in
    the graph stage's IR: the conv's filter and the Gemm's B are the second input."""
    constants = set(re.findall(r"(%\S+) = arith.constant dense_resource<", graph_ir))
    fills = set(re.findall(r"(%\S+) = linalg.fill ", graph_ir))
    weights = re.findall(r"linalg\.(?:conv_\w+|matmul)\b[^\n]*?ins\(%\S+, (%[\w#]+)", graph_ir)
    return (sum(w in constants for w in weights), sum(w in fills for w in weights))


@pytest.fixture
def network(rng):
    return _fill_weighted_network(), rng.standard_normal((1, 8, 8, 8)).astype(np.float32)


def test_fill_weights_are_constants_and_match_onnxruntime(network):
    model, x = network
    compiled = tilecraft.compile(model)
    np.testing.assert_allclose(compiled(x), _reference(model, x), rtol=1e-4, atol=1e-4)
    constant_reads, fill_reads = _weight_reads(compiled.ir("graph"))
    assert constant_reads == 2 and fill_reads == 0, compiled.ir("graph")


def test_fill_weights_beyond_the_budget_stay_fills(network, monkeypatch):
    """TILECRAFT_MAX_TOTAL below the filter's 4.5 KB: nothing is materialized, and the fused
    splats compute the same results."""
    monkeypatch.setenv("TILECRAFT_MAX_TOTAL", "1K")
    model, x = network
    compiled = tilecraft.compile(model)
    np.testing.assert_allclose(compiled(x), _reference(model, x), rtol=1e-4, atol=1e-4)
    constant_reads, fill_reads = _weight_reads(compiled.ir("graph"))
    assert constant_reads == 0 and fill_reads == 2, compiled.ir("graph")
