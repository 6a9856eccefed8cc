"""The workspace planner (pipelines/buffer/workspace.py): no two live buffers share a byte,
and buffers whose lifetimes do not overlap do."""

from __future__ import annotations

import random

import pytest

from tilecraft.errors import InternalError
from tilecraft.pipelines.buffer.workspace import Buffer, check, plan


def test_a_chain_reuses_two_slots():
    # a -> b -> c -> d: each buffer is read only by the next op, so two slots suffice.
    buffers = [Buffer(f"b{i}", 1000, i, i + 1) for i in range(6)]
    result = plan(buffers)
    check(buffers, result)
    assert result.total == 6 * 1008
    assert result.size == 2 * 1008


def test_buffers_alive_together_do_not_overlap():
    buffers = [Buffer("x", 64, 0, 5), Buffer("y", 32, 1, 2), Buffer("z", 48, 2, 5)]
    result = plan(buffers)
    check(buffers, result)
    assert result.size == result.total == 144


def test_a_small_buffer_fills_a_gap():
    # "big1" and "big2" never live together: they share offset 0; "small" lives with both.
    buffers = [Buffer("big1", 256, 0, 1), Buffer("small", 16, 0, 3), Buffer("big2", 256, 2, 3)]
    result = plan(buffers)
    check(buffers, result)
    assert result.offsets["big1"] == result.offsets["big2"] == 0
    assert result.size == 256 + 16


def test_alignment_and_empty():
    assert plan([]).size == 0
    result = plan([Buffer("a", 3, 0, 1), Buffer("b", 5, 0, 1)], alignment=64)
    assert sorted(result.offsets.values()) == [0, 64]
    # The C lowering computes both: a bad one is a bug in it, not in the model.
    with pytest.raises(InternalError):
        plan([Buffer("a", 3, 0, 1)], alignment=12)
    with pytest.raises(InternalError):
        Buffer("bad", 4, 3, 1)


def test_random_plans_are_valid_and_never_larger_than_the_sum():
    rng = random.Random(0)
    for _ in range(200):
        buffers = []
        for i in range(rng.randint(1, 20)):
            start = rng.randint(0, 30)
            buffers.append(Buffer(f"b{i}", rng.randint(1, 5000), start, start + rng.randint(0, 10)))
        result = plan(buffers)
        check(buffers, result)
        assert result.size <= result.total
        # a lower bound: at every op, the live buffers must fit
        for op in range(45):
            live = sum((b.size + 15) // 16 * 16 for b in buffers if b.start <= op <= b.end)
            assert result.size >= live
