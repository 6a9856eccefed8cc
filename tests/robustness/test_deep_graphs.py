"""Graph walks are iterative (issue 17, class 7): a model thousands of nodes deep imports,
goes through the graph analyses and compiles without ``RecursionError`` (a quantized ResNet's
QDQ pairs used to exceed Python's recursion limit in constant folding)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from mlir import ir  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.frontend.loader import load_module  # noqa: E402
from tilecraft.pipelines.graph.constant_folding import ConstantAnalysis  # noqa: E402


def qdq_chain(pairs: int) -> onnx.ModelProto:
    """``x`` through ``pairs`` x (Add bias, QuantizeLinear, DequantizeLinear)."""
    initializers = [numpy_helper.from_array(np.array(0.05, np.float32), "scale"),
                    numpy_helper.from_array(np.array(0, np.int8), "zero"),
                    numpy_helper.from_array(np.full((4,), 0.01, np.float32), "bias")]
    nodes, previous = [], "x"
    for i in range(pairs):
        nodes += [helper.make_node("Add", [previous, "bias"], [f"a{i}"]),
                  helper.make_node("QuantizeLinear", [f"a{i}", "scale", "zero"], [f"q{i}"]),
                  helper.make_node("DequantizeLinear", [f"q{i}", "scale", "zero"], [f"d{i}"])]
        previous = f"d{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [2, 4])], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_chain_of_5000_qdq_pairs_imports_and_is_analysed_without_recursion():
    assert 3 * 5000 > 10 * sys.getrecursionlimit()  # deep enough to fail a recursive walk
    context = ir.Context()
    module = load_module(qdq_chain(5000), context)
    block = module.body.operations[0].regions[0].blocks[0]
    last = [op.operation for op in block.operations][-2]  # the op feeding the return
    assert ConstantAnalysis().op_is_constant(last) is False  # depends on the input, 15000 ops down


def test_a_deep_chain_compiles_and_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    model = qdq_chain(300)
    module = tilecraft.compile(model)
    x = np.random.default_rng(0).random((2, 4), dtype=np.float32)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(module(x), expected, atol=0.051)
