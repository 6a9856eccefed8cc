"""Points of a schedule space build, run and are right (benchmarks/space_status_sweep.py
measures the status mix over many classes; these are the targeted checks of what it found).

Each test names the class of points the space no longer offers, or the class of schedules
the compiler now builds right, and checks it against numpy."""

from __future__ import annotations

import random
import warnings

import mlir_text
import numpy as np
import pytest

import tilecraft
from tilecraft import auto_scheduler
from tilecraft.schedule import te
from tilecraft.schedule.records import Record, RecordWriter, canonical_target
from tilecraft.tuning import extract_tasks
from tilecraft.tuning.space_generators import HandSpaceGenerator

TARGET = "llvm"
RNG = np.random.default_rng(5)


@auto_scheduler.register_workload("status_grouped_conv", override=True)
def grouped_conv(n, h, w, g, c, f, k, dilation):
    """A user's dilated grouped convolution (NHWGC input, already padded; KKGCF filters):
    one contraction per tap, whose input ``x[b, y, x, g, c]`` is indexed by more loops than
    the batch (g), row (x) and reduction (c) loops of the contraction."""
    span = (k - 1) * dilation
    x = te.placeholder((n, h + span, w + span, g, c), name="x", dtype="float32")
    wt = te.placeholder((k, k, g, c, f), name="w", dtype="float32")
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(k, "ry"), te.reduce_axis(k, "rx")
    return [x, wt, te.compute(
        (n, h, w, g, f),
        lambda b, y, xx, gg, ff: te.sum(x[b, y + ry * dilation, xx + rx * dilation, gg, rc] * wt[ry, rx, gg, rc, ff],
                                        axis=[ry, rx, rc]), name="grouped_conv")]


def grouped_reference(x: np.ndarray, w: np.ndarray, k: int, dilation: int, h: int, wd: int) -> np.ndarray:
    return sum(np.einsum("nhwgc,gcf->nhwgf", x[:, i * dilation:i * dilation + h, j * dilation:j * dilation + wd], w[i, j])
               for i in range(k) for j in range(k))


def apply_config(model, task, config, tmp_path):
    """``model`` compiled with ``config`` as the record of ``task``; a schedule that fails
    to apply raises (it would fall back to scalar loops with a warning). A file per config:
    a records file is appended to, and the first of equal costs would win."""
    records = tmp_path / f"point-{abs(hash(str(sorted(config.items()))))}.jsonl"
    with RecordWriter(records) as writer:
        writer.write(Record(task=task.describe(), config=config, status="ok", costs=[1e-3], gflops=1.0,
                            target=canonical_target(TARGET)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return tilecraft.compile(model, target=TARGET, tuning_records=records)


def test_an_operand_indexed_by_other_loops_is_never_packed():
    """Packing copies an operand's tile as (batch, rows, K): an input indexed by more loops
    (a windowed convolution's ``x[b, y, x, g, c]``) is not offered packed; an operand laid
    out (batch, M, K) or (batch, K, N) still is."""
    task = next(t for t in extract_tasks(auto_scheduler.SearchTask(
        func="status_grouped_conv", args=(1, 11, 11, 3, 5, 7, 3, 2)).compute_dag, TARGET) if t.kind == "matmul")
    space = HandSpaceGenerator(TARGET).generate(task)
    rng = random.Random(0)
    points = [space.random(rng) for _ in range(200)]
    assert not any(p["pack_a"] for p in points)
    (plain,) = extract_tasks(mlir_text.batch_matmul(4, 48, 64, 32), TARGET)
    plain_space = HandSpaceGenerator(TARGET).generate(plain)
    values = {k.name: k.values for k in plain_space.knobs}
    assert values["pack_a"] == (0, 1) and values["pack_b"] == (0, 1)


def test_every_point_of_a_tap_split_grouped_conv_builds_and_matches_numpy(tmp_path):
    """Every point of the space of a dilated grouped convolution's taps (rows as several
    loops, a prime row extent, a reg_m that leaves a partial tile) builds and is right;
    its A-packing points failed to vectorize their copy."""
    args = (1, 11, 11, 3, 5, 7, 3, 2)
    model = auto_scheduler.SearchTask(func="status_grouped_conv", args=args).compute_dag
    task = max((t for t in extract_tasks(model, TARGET) if t.kind == "matmul"), key=lambda t: t.count)
    space = HandSpaceGenerator(TARGET).generate(task)
    points = [space.point(i) for i in range(space.size)]
    points = [p for p in points if space.is_valid(p) and p != space.default()]
    assert points
    x = RNG.standard_normal((1, 15, 15, 3, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 3, 5, 7)).astype(np.float32)
    expected = grouped_reference(x, w, 3, 2, 11, 11)
    for config in points:
        np.testing.assert_allclose(apply_config(model, task, config, tmp_path)(x, w), expected,
                                   rtol=1e-4, atol=1e-4, err_msg=str(config))
