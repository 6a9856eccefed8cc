"""Which operand the default matmul plan packs (schedule/matmul_plan.py, ``packed_operand``):
B's K-block panels where the rows alias in L1d (K x 4 bytes a multiple of 4 KB) and B is a
row-major (K, N) operand (A's slivers only where B is not: weight panels, a transposed B),
nothing where rows do not alias. Plans for the pinned AVX2 and AVX-512 targets (their caches and
register files), and compiled matmuls of each form against numpy on one and two threads,
with any schedule failure (a fallback to scalar loops) an error."""

import warnings

import numpy as np
import pytest
from mlir import ir

import mlir_text as mt
import tilecraft
from pinned_targets import AVX2, AVX512
from tilecraft.pipelines.target import Target
from tilecraft.schedule.apply import plan_module

B = 1


def _plan(text: str, target: str, threads: int):
    spec = Target.parse(target)
    with ir.Context():
        module = ir.Module.parse(text)
        plans = plan_module(module.operation, vector_bits=spec.vector_bits, num_threads=threads,
                            caches=spec.caches)
    return next(p for p in plans if p.reduction_tiles)


def _packed(plan) -> int | None:
    return plan.packed_operands[0][0] if plan.packed_operands else None


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m, n, k, operand", [
    (1024, 1024, 1024, B),   # square: B's 4 KB rows are the stream
    (2048, 2048, 2048, B),
    (512, 768, 3072, B),     # BERT's FFN down-projection with a run-time B
    (2048, 256, 1024, B),    # tall-skinny
    (256, 1024, 1024, B),
    (130, 256, 1024, B),     # a peeled last row tile (and AVX2's 6-row tiles of 1024)
    (512, 512, 512, None),   # 2 KB rows do not alias: nothing is copied
    (512, 3072, 768, None),
    (197, 2304, 768, None),
    (128, 768, 768, None),
])
def test_the_packed_operand_follows_aliasing_rows(target, threads, m, n, k, operand):
    plan = _plan(mt.matmul(m, n, k), target, threads)
    assert _packed(plan) == operand
    if operand == B:
        # The panel's register loop (N) moved outside M's: one copy per K block x reg_n panel.
        assert plan.outer_register_tiles[1] and not plan.register_tiles[1] and plan.register_tiles[0]
        assert plan.cache_tiles and plan.cache_tiles[2] and k % plan.cache_tiles[2] == 0


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("m, n, k", [(256, 256, 1024), (64, 96, 2048), (130, 64, 1024)])
def test_packed_matmuls_match_numpy(monkeypatch, threads, m, n, k):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = tilecraft.compile(mt.matmul(m, n, k), cache=False)
    np.testing.assert_allclose(compiled(a, b), a @ b, rtol=1e-4, atol=1e-3 * np.sqrt(k))
