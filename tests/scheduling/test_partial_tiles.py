"""Matmul register tiles that need not divide M: the planner's row choice, the plans it makes
for AVX2 and AVX-512, and compiled matmuls with odd row counts against numpy, on one and
two threads, with any schedule failure (a fallback to scalar loops) an error."""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from mlir import ir

import mlir_text as mt
import tilecraft
from tilecraft.schedule.apply import plan_module
from tilecraft.schedule.matmul_plan import matmul_rows_tile


@pytest.mark.parametrize("rows, cap, tile", [
    (128, 6, 6),   # 21 whole tiles + 2 rows, not 32 tiles of 4
    (196, 6, 6),   # 32 + 4, not 49 tiles of 4
    (197, 8, 8),   # a prime: 24 + 5, not 197 tiles of 1
    (192, 6, 6),
    (14, 8, 7),    # two 7-row tiles, as many as 8 rows would make, and no remainder
    (256, 8, 8),
    (5, 6, 5), (1, 6, 1), (6, 6, 6),
])
def test_rows_are_the_cap_unless_a_divisor_makes_as_few_tiles(rows, cap, tile):
    assert matmul_rows_tile(rows, cap) == tile


def _matmul_plan(m, n, k, vector_bits, threads=1):
    with ir.Context():
        module = ir.Module.parse(mt.matmul(m, n, k))
        plans = plan_module(module.operation, vector_bits=vector_bits, num_threads=threads)
    return next(p for p in plans if p.reduction_tiles)


@pytest.mark.parametrize("threads", [1, 2])
def test_avx2_peels_the_rows_of_128(threads):
    plan = _matmul_plan(128, 64, 64, 256, threads)
    assert plan.register_tiles[0] == 6 and plan.peeled_loops == (0,)
    if plan.thread_tiles:
        assert 128 % plan.thread_tiles[0] == 0  # tasks stay static: each peels its own tile


def test_avx512_keeps_dividing_tiles():
    plan = _matmul_plan(128, 64, 64, 512)
    assert plan.register_tiles[0] == 8 and plan.peeled_loops == ()


def _run(m, n, k, rand):
    a, b = rand((m, k)), rand((k, n))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed sequence falls back with a warning
        out = tilecraft.compile(mt.matmul(m, n, k), cache=False)(a, b)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("m", [1, 5, 7, 13, 127, 128, 197])
def test_odd_rows_match_numpy(monkeypatch, rand, threads, m):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    _run(m, 48, 40, rand)


@pytest.mark.parametrize("m", [13, 130])
def test_odd_rows_with_a_packed_operand(monkeypatch, rand, m):
    """K = 1024 f32: rows alias in L1d, so an operand is packed (B's panels where a task
    has two column tiles, matmul_plan.py ``packed_operand``) while the M loop peels its
    partial last tile."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    _run(m, 64, 1024, rand)


def test_an_encoder_layer_with_128_tokens_matches_onnxruntime(monkeypatch):
    """A BERT-style layer at 128 tokens (no 6-row tile divides 128, and the graph stage pads
    only rows with no divisor of at least 4): its projections and FFN matmuls peel their last
    row tile inside fusion groups and thread tasks, with no schedule falling back to scalar
    loops."""
    ort = pytest.importorskip("onnxruntime")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graph"))
    import graph_models

    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model = graph_models.bert_layer(seq=128, hidden=64, heads=2, ffn=256)
    x = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = tilecraft.compile(model, cache=False, keep_ir=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {session.get_inputs()[0].name: x})[0]
    np.testing.assert_allclose(compiled(x), expected, rtol=2e-4, atol=2e-4)
    assert "tensor<132x" not in compiled.ir("graph") and "tensor<144x" not in compiled.ir("graph")


@pytest.mark.parametrize("rows, task_rows, register_rows, expected", [
    (197, 1, 6, 197),   # a prime: one task of every row, not 197 tasks of one row
    (202, 2, 6, 101),   # 2 x 101: the smallest divisor holding a register tile
    (128, 32, 6, 32),   # a task of whole register tiles and a peeled remainder: kept
    (4, 1, 6, 4),       # fewer rows than one register tile: all of them
])
def test_row_tasks_hold_at_least_one_register_tile(rows, task_rows, register_rows, expected):
    from tilecraft.schedule.matmul_plan import whole_row_tasks

    assert whole_row_tasks(rows, task_rows, register_rows) == expected
