"""Contractions whose tiles LLVM used to lower to scalar code, now vectorized: matmul
accumulator rows three vectors wide (N = 24, 72, 120 with 8-lane parts) and contractions
that reduce over several dims (a GRU reading a bidirectional LSTM's [dir, hidden]).
Numerics against numpy / onnxruntime, and the IR property that makes them fast."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import mlir_text as mt
import tilecraft
from tilecraft.schedule.matmul_plan import accumulator_row

F32 = dict(rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("extent, part, max_vectors, width", [
    (72, 8, 4, 8),      # 3 vectors would divide: a power of two does not, so one vector
    (120, 8, 4, 8),
    (24, 8, 2, 8),
    (96, 16, 2, 32),    # whole pairs where they divide
    (48, 16, 2, 16),
    (1000, 8, 4, 8),
    (64, 16, 2, 32),
    (10, 2, 16, 10),    # within one 16-lane register: as vector_tile chose
    (12, 8, 4, 12),     # no multiple of the part: vector_tile's choice, as before
])
def test_accumulator_rows_are_a_power_of_two_of_vectors(extent, part, max_vectors, width):
    assert accumulator_row(extent, part, max_vectors, lanes=16) == width


@pytest.mark.parametrize("n", [24, 72, 120])
def test_matmul_with_three_vector_columns(rand, n):
    m, k = 80, 64
    module = tilecraft.compile(mt.matmul(m, n, k))
    contracts = re.findall(r"vector\.contract .* into vector<([0-9x]+)xf32>", module.ir("schedule"))
    assert contracts and all(int(shape.split("x")[-1]) in (8, 16, 32) for shape in contracts), contracts
    a, b = rand((m, k)), rand((k, n))
    np.testing.assert_allclose(module(a, b), a @ b, **F32)


def test_a_contraction_over_two_dims_keeps_one_reduction():
    """benchmarks/recurrent.py's speech model (a bidirectional LSTM feeding a GRU): the GRU's
    input projection reads both LSTM directions through a transpose, so its contraction
    reduces over (direction, hidden). It ran as scalar code (290 of 590 us); after
    tilecraft-canonicalize-unit-contractions every contraction has one reduction dim."""
    ort = pytest.importorskip("onnxruntime")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import recurrent  # noqa: PLC0415  (the benchmark's model builder)

    model = recurrent.speech_model(frames=8, batch=2)
    module = tilecraft.compile(model)
    pattern = r"vector\.contract \{[^}]*iterator_types = \[([^\]]*)\]"
    scheduled = re.findall(pattern, module.ir("schedule"))
    assert any(kinds.count("reduction") == 2 for kinds in scheduled), scheduled  # the case at hand
    lowered = re.findall(pattern, module.ir("vector"))
    assert lowered and all(kinds.count("reduction") == 1 for kinds in lowered), lowered
    x = np.random.default_rng(0).standard_normal((8, 2, 13)).astype(np.float32)
    name = model.graph.input[0].name
    (expected,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {name: x})
    np.testing.assert_allclose(module(x), expected, **F32)
