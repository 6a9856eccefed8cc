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
from tilecraft.pipelines.graph.weight_panels import PANEL_COLUMNS  # noqa: E402
from tilecraft.schedule.matmul_plan import panel_register_tile  # noqa: E402

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


def _matmul(m: int, k: int, n: int, seed: int):
    """One MatMul with a constant (k, n) weight, and an input for it."""
    rng = np.random.default_rng(seed)
    weights = numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "wide",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, rng.standard_normal((m, k)).astype(np.float32)


def _reference(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("m,k,n", [(64, 96, 128), (16, 64, 96), (8, 24, 40)])
def test_panel_matmuls_against_onnxruntime(monkeypatch, threads, m, k, n):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model = _linear_gelu_linear(m, k, n)
    x = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    module = tilecraft.compile(model, keep_ir=True)
    graph_ir = module.ir("graph")
    # N = 40 and 24 are no multiples of the panel width: both stay linalg.matmul; the
    # others read panels.
    assert (f"tilecraft.weight_panels = {PANEL_COLUMNS}" in graph_ir) == (n % PANEL_COLUMNS == 0)
    np.testing.assert_allclose(module(x), _reference(model, {"x": x}), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_bert_layer_on_panels_against_onnxruntime(monkeypatch, threads):
    """Every projection of a BERT layer on panels, each fusion group one loop nest."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    model = graph_models.bert_layer(seq=64, hidden=128, heads=4, ffn=256)
    x = np.random.default_rng(2).standard_normal((64, 128)).astype(np.float32)
    module = tilecraft.compile(model, keep_ir=True)
    assert module.ir("graph").count(f"tilecraft.weight_panels = {PANEL_COLUMNS}") == 4
    np.testing.assert_allclose(module(x), _reference(model, {"x": x}), rtol=1e-4, atol=1e-4)


def test_one_thread_keeps_column_blocks_of_the_panels(monkeypatch):
    """On one thread there is no thread level, and the tasks' column blocks (whole panels,
    a B block sized to half of L2) stay as a sequential loop outside the K block: each row
    tile rereads one block of panels from L2, not every panel from L3 (plan.py
    ``column_blocks``). On two threads the same blocks are the tasks."""
    n = 3072
    model, x = _matmul(128, 768, n, seed=3)
    panels = n // PANEL_COLUMNS
    block_loop = rf"scf\.for %\w+ = %c0 to %c{panels} step %c(\d+) "
    for threads in ("1", "2"):
        monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
        module = tilecraft.compile(model, keep_ir=True)
        np.testing.assert_allclose(module(x), _reference(model, {"x": x}), rtol=1e-4, atol=1e-4)
        # Loops over the panels in steps of a block (the zero fill walks them by 1).
        blocks = [int(b) for b in re.findall(block_loop, module.ir("schedule")) if int(b) > 1]
        if threads == "1":
            assert blocks and all(b < panels for b in blocks), blocks
        else:
            assert not blocks and "scf.forall" in module.ir("schedule")


def test_panel_register_tile_fits_the_register_file():
    """Panels side by side in a matmul's register tile: three 16-lane panels of 8 rows on
    AVX-512 (24 accumulators, 3 panel vectors and a broadcast in 32 registers), fewer where
    three do not divide the panels, none side by side where the register file is AVX2's."""
    assert panel_register_tile(panels=48, panel_vectors=1, rows=8, registers=32) == 3
    assert panel_register_tile(panels=64, panel_vectors=1, rows=8, registers=32) == 2
    assert panel_register_tile(panels=49, panel_vectors=1, rows=8, registers=32) == 1
    assert panel_register_tile(panels=48, panel_vectors=2, rows=8, registers=16) == 1
    assert panel_register_tile(panels=48, panel_vectors=1, rows=16, registers=32) == 1


@pytest.mark.parametrize("n,panels_per_tile", [(768, 3), (1024, 2)])
def test_register_tile_spans_panels(monkeypatch, n, panels_per_tile):
    """On AVX-512 the default register tile takes three panels where they divide N (BERT's
    768-multiples: 8 x 48 accumulators), else two (8 x 32); results match onnxruntime."""
    from tilecraft.pipelines.target import Target

    if Target.parse("llvm").vector_bits < 512:
        pytest.skip("the host has no AVX-512: the tile keeps one panel")
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model, x = _matmul(64, 128, n, seed=7)
    module = tilecraft.compile(model, keep_ir=True)
    np.testing.assert_allclose(module(x), _reference(model, {"x": x}), rtol=1e-4, atol=1e-4)
    assert f"vector<8x{panels_per_tile}x{PANEL_COLUMNS}xf32>" in module.ir("schedule")


def test_wider_panels_keep_one_panel_per_register_tile(monkeypatch):
    """``tilecraft-pack-weight-panels{panel=32}`` (benchmarks/end_to_end.py --weight-panel 32,
    the layout before 16-column panels): 32 columns are two AVX-512 vectors, three such panels
    would need 48 accumulators, so the register tile keeps one (8 x 32), as it did."""
    from tilecraft.pipelines.target import Target

    if Target.parse("llvm").vector_bits < 512:
        pytest.skip("the host has no AVX-512")
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model, x = _matmul(64, 128, 768, seed=8)
    pipeline = tilecraft.cpu_pipeline("llvm", opt_level=3)
    element = "tilecraft-pack-weight-panels"
    pipeline = pipeline.replace("graph", [f"{element}{{panel=32}}" if e == element else e
                                          for e in pipeline.stage("graph").passes])
    module = tilecraft.compile(model, keep_ir=True, pipeline=pipeline)
    np.testing.assert_allclose(module(x), _reference(model, {"x": x}), rtol=1e-4, atol=1e-4)
    assert "tilecraft.weight_panels = 32" in module.ir("graph")
    assert "vector<8x1x32xf32>" in module.ir("schedule")


@pytest.mark.parametrize("panel", ["0", "-16", "wide"])
def test_a_bad_panel_width_is_a_clear_error(panel):
    """A panel width that is no positive integer stops the compile with a TilecraftError
    naming the option, before any panel is built."""
    model, x = _matmul(16, 32, 64, seed=9)
    pipeline = tilecraft.cpu_pipeline("llvm", opt_level=3)
    element = "tilecraft-pack-weight-panels"
    pipeline = pipeline.replace("graph", [f"{element}{{panel={panel}}}" if e == element else e
                                          for e in pipeline.stage("graph").passes])
    with pytest.raises(tilecraft.TilecraftError, match="panel"):
        tilecraft.compile(model, pipeline=pipeline)
