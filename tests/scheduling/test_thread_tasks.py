"""Task counts of parallel loops (schedule/op_schedule.py, ``TASKS_PER_THREAD``): about 4
equal tasks per thread where the extent allows, so that a thread that stalls holds up at
most about an eighth of a loop on two threads (benchmarks/thread_balance.py), and never more
than async-parallel-for's 8 blocks per thread."""

import pytest
from mlir import ir

import mlir_text as mt
from tilecraft.pipelines.loop_nest import analyze_loop_nests
from tilecraft.schedule.op_schedule import (TASKS_PER_THREAD, balanced_chunk, busiest_chunk, busy_share,
                                            thread_chunk)
from tilecraft.schedule.plan import plan_default_schedule


def _plan(source: str, op_name: str, threads: int = 2):
    with ir.Context():
        module = ir.Module.parse(source)
        (nest,) = [nest for op, nest in analyze_loop_nests(module.operation) if op.name == op_name]
    return plan_default_schedule(nest, 0, vector_bits=256, num_threads=threads)


@pytest.mark.parametrize("extent, tile, threads, chunk", [
    (64, 1, 2, 8),     # 8 tasks of 8
    (56, 8, 2, 8),     # 7 register tiles: 7 tasks of one tile each (fewer tiles than the target)
    (96, 8, 2, 8),     # 12 tiles: the fewest tasks >= 8 that divide them is 12
    (17, 1, 2, 1),     # a prime: one task per unit
    (256, 16, 4, 16),  # 16 tasks on 4 threads
    (5, 8, 2, 5),      # no whole tile: one task
])
def test_thread_chunk(extent, tile, threads, chunk):
    assert thread_chunk(extent, tile, threads) == chunk


@pytest.mark.parametrize("extent, threads, chunk", [
    (56, 2, 7),    # 8 bands of 7 (were 4 of 14)
    (14, 2, 1),    # 14 bands of 1 (were 2 of 7: a stalled thread held half the layer)
    (28, 2, 2),    # 14 bands of 2: 4 and 14 divide 28, 8 does not
    (112, 2, 14),  # 8 bands
    (6, 2, 1),     # 6 bands, the most there are
    (7, 2, None),  # no multiple of 2 divides 7
    (64, 1, None),  # one thread: no split
])
def test_balanced_chunk(extent, threads, chunk):
    assert balanced_chunk(extent, threads) == chunk


def test_balanced_tasks_are_a_multiple_of_the_threads_and_at_most_8_per_thread():
    for threads in (2, 3, 4):
        for extent in range(threads, 300):
            chunk = balanced_chunk(extent, threads)
            if chunk is None:
                continue
            tasks = extent // chunk
            assert extent % chunk == 0 and tasks % threads == 0 and tasks <= 8 * threads


def test_busiest_chunk_reaches_the_target_among_equally_busy_splits():
    # 56 rows: 2, 4, 8 and 14 tasks all fill both threads; 8 is the fewest that reach 4 per thread
    assert busiest_chunk(56, 2) == 7
    assert busy_share(56 // busiest_chunk(56, 2), 2) == 1.0
    assert TASKS_PER_THREAD == 4


def test_even_rows_split_in_eight_bands():
    """56 output rows on 2 threads: 8 bands of 7 rows (were 4 of 14)."""
    plan = _plan(mt.conv_nhwc(1, 58, 58, 64, 3, 3, 16), "linalg.conv_2d_nhwc_hwcf")
    assert plan.thread_tiles == (1, 7, 0, 0, 0, 0, 0)
