"""Contractions whose N has no multiple of the vector lanes (issue #43): the default plan
takes whole-vector column tiles and peels the last, partial one (schedule/matmul_plan.py,
``peels_columns``), as it peels M's rows. Planner choices for AVX2 and AVX-512, plans of
shapes the lanes divide unchanged, and compiled (batched) matmuls with peeled columns, rows
and both against numpy on one and two threads, with any schedule failure (a fallback to
scalar loops) an error."""

import warnings

import numpy as np
import pytest
from mlir import ir

import mlir_text as mt
import tilecraft
from tilecraft.schedule.apply import plan_module
from tilecraft.schedule.matmul_plan import peeled_column_block, peeled_column_tile, peels_columns


def _plan(text: str, vector_bits: int, threads: int = 1):
    with ir.Context():
        module = ir.Module.parse(text)
        plans = plan_module(module.operation, vector_bits=vector_bits, num_threads=threads)
    return next(p for p in plans if p.reduction_tiles)


@pytest.mark.parametrize("columns, lanes, expected", [
    (255, 8, True), (517, 8, True), (197, 16, True), (1000, 16, True),
    (9, 8, True),      # one whole vector and a peeled column
    (1000, 8, False),  # the lanes divide N: the divisor rule, unchanged
    (768, 8, False), (64, 16, False),
    (5, 8, False),     # not one whole vector
    (8, 8, False),
])
def test_columns_are_peeled_only_where_no_multiple_of_the_lanes_divides_n(columns, lanes, expected):
    assert peels_columns(columns, lanes) is expected


@pytest.mark.parametrize("columns, lanes, tile", [
    (197, 8, 16),    # 12 x 16 and a peeled 5: two vectors, the remainder within one
    (517, 8, 16),    # 32 x 16 + 5
    (255, 8, 8),     # 15 x 16 + 15 would leave a remainder wider than a register: 31 x 8 + 7
    (9, 8, 8), (20, 8, 16), (1000, 16, 32), (17, 16, 16),
])
def test_a_peeled_column_tile_is_whole_vectors(columns, lanes, tile):
    assert peeled_column_tile(columns, lanes) == tile


@pytest.mark.parametrize("columns, limit, tile, expected", [
    (255, 256, 8, 255),      # all of it
    (517, 256, 16, 517),     # 11 x 47: one block, not 11 blocks of 47 that each peel 15
    (50257, 256, 16, 29),    # 29 x 1733, 1733 beyond 4x the limit: 16 columns and a peeled 13
    (197, 256, 16, 197),     # a prime: one block
    (2062, 256, 16, 1031),   # 2 x 1031: no divisor in range, the smallest holding a tile
    (34, 256, 16, 34),
])
def test_column_blocks_divide_n_and_hold_a_whole_tile(columns, limit, tile, expected):
    block = peeled_column_block(columns, limit, tile)
    assert block == expected and columns % block == 0 and block >= tile


@pytest.mark.parametrize("threads", [1, 2])
def test_avx2_peels_the_columns_of_255(threads):
    plan = _plan(mt.matmul(255, 255, 255), 256, threads)
    assert plan.register_tiles[:2] == (8, 8)   # 8 rows x 1 vector, not 8 rows x 1 column
    assert plan.peeled_loops == (0, 1)         # 255 = 31 x 8 + 7 rows and columns
    assert not plan.packed_operands            # packing copies whole tiles only
    if plan.thread_tiles:  # rows split first: every task keeps all columns
        assert plan.thread_tiles[1] == 255 and 255 % plan.thread_tiles[0] == 0


def test_avx2_keeps_the_517_columns_in_one_block():
    plan = _plan(mt.matmul(333, 517, 251), 256)
    assert plan.register_tiles[:2] == (6, 16) and plan.peeled_loops == (0, 1)
    assert not plan.cache_tiles or not plan.cache_tiles[1]  # no column block of 47


def test_avx512_peels_whole_zmm_columns():
    plan = _plan(mt.matmul(64, 1000, 64), 512)
    assert plan.register_tiles[:2] == (8, 32) and plan.peeled_loops == (1,)


def test_the_scores_of_197_tokens_take_vector_columns():
    """The ViT's unfused attention scores, 12 heads x 197 queries x 197 keys over 64."""
    plan = _plan(mt.batch_matmul(12, 197, 197, 64), 256, 2)
    assert plan.register_tiles[1:3] == (6, 16) and plan.peeled_loops == (1, 2)
    assert plan.thread_tiles[:3] == (1, 197, 197)  # a task per head, every row and column


@pytest.mark.parametrize("vector_bits", [256, 512])
@pytest.mark.parametrize("m, n, k", [(128, 64, 64), (197, 768, 2304), (2, 1000, 512), (100, 48, 37),
                                     (128, 3072, 768), (197, 64, 197), (7, 130, 9)])
def test_plans_of_shapes_the_lanes_divide_peel_no_columns(vector_bits, m, n, k):
    """130 = 2 x 65 on AVX2 keeps its 2-lane parts: only an N with no multiple of the lanes
    that holds a vector or more gets peeled columns; the others keep a column tile that
    divides N. (One row is a matrix-vector product, planned apart:
    tests/scheduling/test_matrix_vector.py.)"""
    lanes = vector_bits // 32
    if peels_columns(n, lanes):
        pytest.skip("a peeled shape")
    for threads in (1, 2):
        plan = _plan(mt.matmul(m, n, k), vector_bits, threads)
        assert 1 not in plan.peeled_loops
        assert n % plan.register_tiles[1] == 0


def _compile(text: str):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed sequence falls back with a warning
        return tilecraft.compile(text, cache=False)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("m, n, k", [
    (12, 37, 20),   # columns peeled: 2 x 16 + 5, rows whole (6 divides 12)
    (13, 37, 20),   # rows and columns peeled
    (31, 9, 197),   # one whole vector and a 1-column remainder; a prime K
    (40, 255, 17),  # 255 = 31 x 8 + 7
])
def test_peeled_columns_match_numpy(monkeypatch, rand, threads, m, n, k):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    a, b = rand((m, k)), rand((k, n))
    np.testing.assert_allclose(_compile(mt.matmul(m, n, k))(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_batched_scores_with_peeled_rows_and_columns_match_numpy(monkeypatch, rand, threads):
    """Attention-shaped: 3 heads x 29 queries x 29 keys (a prime) over 16."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    a, b = rand((3, 29, 16)), rand((3, 16, 29))
    np.testing.assert_allclose(_compile(mt.batch_matmul(3, 29, 29, 16))(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_a_fused_epilogue_over_peeled_columns_matches_numpy(monkeypatch, rand):
    """Matmul + bias + ReLU as one fusion group on two threads: the epilogue runs on the
    group's tiles of 37 columns, two of 16 and a peeled 5."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    a, b, bias = rand((64, 48)), rand((48, 37)), rand((37,))
    got = _compile(mt.matmul_bias_relu(64, 37, 48))(a, b, bias)
    np.testing.assert_allclose(got, np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)
