"""How parallel loops are split and shared (issue #43, benchmarks/thread_balance.py): the
runtime's loop counts (runtime/async_runtime.c ``tilecraftParallelForCounts``) against the
blocks the benchmark predicts from the IR (the flat parallel-for: one block per task up to
16 per thread, so 37 tasks on two threads are 19 blocks), and results of loops with odd task
counts against numpy. Each case runs in a fresh process: the pool and its counts are per process."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import mlir_text as mt

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

PROBE = textwrap.dedent("""
    import json, sys, numpy as np, tilecraft
    from tilecraft.runtime import parallel_runtime
    sys.path.insert(0, sys.argv[2])
    from thread_balance import loop_facts
    m = tilecraft.compile(open(sys.argv[1]).read(), target=tilecraft.Target(num_threads=2), keep_ir=True)
    facts = loop_facts(m.ir("bufferize"), 2)
    rng = np.random.default_rng(0)
    args = [rng.random(shape, dtype=np.float32) for shape in json.loads(sys.argv[3])]
    m(*args)
    before = parallel_runtime.loop_counts()
    calls = 10
    for _ in range(calls):
        m(*args)
    counts = parallel_runtime.loop_counts() - before
    print(json.dumps({"tasks": [f.tasks for f in facts], "blocks": [f.blocks for f in facts], "calls": calls,
                      "published": counts.published, "serial": counts.serial, "workers": counts.by_workers,
                      "callers": counts.by_callers}))
""")


def _probe(tmp_path, text: str, shapes: list) -> dict:
    source = tmp_path / "m.mlir"
    source.write_text(text)
    env = {**os.environ, "TILECRAFT_NUM_THREADS": "2"}
    result = subprocess.run([sys.executable, "-c", PROBE, str(source), str(BENCHMARKS), json.dumps(shapes)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _add(shape) -> str:
    return mt.elementwise(shape, 2, ["%s = arith.addf %in0, %in1 : f32", "linalg.yield %s : f32"])


@pytest.mark.parametrize("text, shapes, tasks, blocks", [
    # 17 rows (a prime): 17 one-row tasks, one block each (async-parallel-for made 9 blocks)
    (_add((17, 4096)), [(17, 4096), (17, 4096)], [17], [17]),
    # 37 rows: 37 tasks, more than 16 per thread: blocks of 2, 19 blocks, the last of 1 task
    (_add((37, 4096)), [(37, 4096), (37, 4096)], [37], [19]),
    # 56 output rows: 8 bands of 7, one block each
    (mt.conv_nhwc(1, 58, 58, 64, 3, 3, 16), [(1, 58, 58, 64), (3, 3, 64, 16)], [8], [8]),
])
def test_blocks_run_are_the_blocks_predicted(tmp_path, text, shapes, tasks, blocks):
    probe = _probe(tmp_path, text, shapes)
    assert probe["tasks"] == tasks and probe["blocks"] == blocks
    # Each loop is published once per call (or run whole on the calling thread), and each
    # block of a published loop runs once, on the caller or a worker.
    assert probe["published"] + probe["serial"] == probe["calls"] * len(blocks)
    assert probe["workers"] + probe["callers"] == probe["published"] * blocks[0]


@pytest.mark.parametrize("rows", [17, 13, 6, 14])
def test_odd_task_counts_compute_every_row(monkeypatch, rand, rows):
    """Row counts that make 17, 13, 6 and 14 tasks: every row computed once."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    import tilecraft

    a, b = rand((rows, 4096)), rand((rows, 4096))
    module = tilecraft.compile(_add((rows, 4096)), target=tilecraft.Target(num_threads=2))
    for _ in range(3):
        np.testing.assert_allclose(module(a, b), a + b, rtol=1e-6)


@pytest.mark.parametrize("rows", [14, 28, 56])
def test_row_bands_of_a_conv_on_two_threads(rand, rows):
    """Convolutions split in 14 bands of 1 row, 14 of 2 and 8 of 7 (``balanced_chunk``)."""
    import tilecraft

    x, w = rand((1, rows + 2, rows + 2, 16)), rand((3, 3, 16, 16))
    module = tilecraft.compile(mt.conv_nhwc(1, rows + 2, rows + 2, 16, 3, 3, 16), target=tilecraft.Target(num_threads=2))
    np.testing.assert_allclose(module(x, w), mt.ref_conv_nhwc(x, w), rtol=1e-4, atol=1e-4)


def test_kernel_sums_are_kept_per_name_prefix():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from thread_balance import kernel_prefix

    assert kernel_prefix("/blocks/blocks.3/mlp/mlp.2/MatMul(MatMul)", 2) == "/blocks/blocks.3"
    assert kernel_prefix("/blocks/blocks.3/Add_3(Add)", 2) == "/blocks/blocks.3"
    assert kernel_prefix("/embed/Conv(Conv)", 2) == "other"
    assert kernel_prefix("/stages/1/dw/Conv(Conv)", 3) == "/stages/1/dw"
