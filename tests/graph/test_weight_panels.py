"""Matmuls with constant weights on column panels (pipelines/graph/weight_panels.py):
numerics against onnxruntime on one and two threads, with their epilogues fused (bias, GELU,
residual) and alone, and the shapes the pass leaves as they are."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import graph_models  # noqa: E402


def _linear_gelu_linear(m: int, k: int, n: int, seed: int = 0):
    """x @ W1 + b1 -> Erf (GELU's core) -> @ W2 + x: two panel matmuls, the second's A the first's
    epilogue, a residual after it."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "b1"),
             numpy_helper.from_array((rng.standard_normal((n, k)) / np.sqrt(n)).astype(np.float32), "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Erf", ["hb"], ["g"]),
             helper.make_node("MatMul", ["g", "w2"], ["o"]), helper.make_node("Add", ["o", "x"], ["y"])]
    graph = helper.make_graph(nodes, "linear_gelu_linear",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, k])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _reference(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("m,k,n", [(64, 96, 128), (16, 64, 96), (8, 32, 40)])
def test_panel_matmuls_against_onnxruntime(monkeypatch, threads, m, k, n):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model = _linear_gelu_linear(m, k, n)
    x = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    module = tilecraft.compile(model, keep_ir=True)
    graph_ir = module.ir("graph")
    # N = 40 is no multiple of 32 and stays a linalg.matmul; the others read panels.
    assert ("tilecraft.weight_panels = 32" in graph_ir) == (n % 32 == 0)
    np.testing.assert_allclose(module(x), _reference(model, {"x": x}), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_bert_layer_on_panels_against_onnxruntime(monkeypatch, threads):
    """Every projection of a BERT layer on panels, each fusion group one loop nest."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model = graph_models.bert_layer(seq=64, hidden=128, heads=4, ffn=256)
    x = np.random.default_rng(2).standard_normal((64, 128)).astype(np.float32)
    module = tilecraft.compile(model, keep_ir=True)
    assert module.ir("graph").count("tilecraft.weight_panels = 32") == 4
    np.testing.assert_allclose(module(x), _reference(model, {"x": x}), rtol=1e-4, atol=1e-4)


def test_one_thread_keeps_column_blocks_of_the_panels(monkeypatch):
    """On one thread there is no thread level, and the tasks' column blocks (whole panels,
    a B block sized to half of L2) stay as a sequential loop outside the K block: each row
    tile rereads one block of panels from L2, not every panel from L3 (plan.py
    ``_column_blocks``). On two threads the same blocks are the tasks."""
    rng = np.random.default_rng(3)
    m, k, n = 128, 768, 3072
    weights = numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "wide",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = rng.standard_normal((m, k)).astype(np.float32)
    block_loop = r"scf\.for %\w+ = %c0 to %c96 step %c(\d+) "
    for threads in ("1", "2"):
        monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
        module = tilecraft.compile(model, keep_ir=True)
        np.testing.assert_allclose(module(x), _reference(model, {"x": x}), rtol=1e-4, atol=1e-4)
        # Loops over the 96 panels in steps of a block (the zero fill walks them by 1).
        blocks = [int(b) for b in re.findall(block_loop, module.ir("schedule")) if int(b) > 1]
        if threads == "1":
            assert blocks and all(b < 96 for b in blocks), blocks
        else:
            assert not blocks and "scf.forall" in module.ir("schedule")
