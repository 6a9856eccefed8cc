"""A user's windowed compute that is a grouped channels-last convolution gets a second form
besides its taps (issue #44): a loop over groups of ``linalg.conv_2d_nhwc_hwcf`` on views of
the user's tensors (schedule/te/window_conv.py), whose convolution task has the conv2d space
(register tiles of pixels x filter vectors, accumulators across every tap and channel).
Per case: the form exists, its task's space has vectorized points, a sampled point compiles,
is applied and matches numpy; a compute the form cannot take is refused with the reason and
keeps the taps; ``apply_best`` picks a form by timing them."""

from __future__ import annotations

import random

import numpy as np
import pytest
from mlir import ir

import tilecraft
from tilecraft import auto_scheduler
from tilecraft.errors import TuningError
from tilecraft.schedule import te
from tilecraft.schedule.records import Record, RecordWriter, canonical_target
from tilecraft.schedule.te.window_conv import match_window_conv, rewrite_window_convs
from tilecraft.tuning.auto_scheduler import TAPS, WINDOW_INSIDE
from tilecraft.tuning.space_generators import GeneratedSpaceGenerator

TARGET = "llvm"
RNG = np.random.default_rng(5)


@auto_scheduler.register_workload("window_conv_grouped", override=True)
def grouped_conv(n, h, w, g, c, f, k, dilation=1, stride=1):
    """NHWGC input (already padded), KKGCF filters, NHWGF output: the benchmark's layout."""
    span = (k - 1) * dilation
    x = te.placeholder((n, (h - 1) * stride + span + 1, (w - 1) * stride + span + 1, g, c), name="x", dtype="float32")
    wt = te.placeholder((k, k, g, c, f), name="w", dtype="float32")
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(k, "ry"), te.reduce_axis(k, "rx")
    return [x, wt, te.compute(
        (n, h, w, g, f),
        lambda b, y, xx, gg, ff: te.sum(x[b, y * stride + ry * dilation, xx * stride + rx * dilation, gg, rc]
                                        * wt[ry, rx, gg, rc, ff], axis=[ry, rx, rc]), name="grouped_conv")]


@auto_scheduler.register_workload("window_conv_group_outer", override=True)
def group_outer_conv(n, h, w, g, c, f, k):
    """The group axis first in every operand (GNHWC input, GKKCF filter, GNHWF output)."""
    x = te.placeholder((g, n, h + k - 1, w + k - 1, c), name="x", dtype="float32")
    wt = te.placeholder((g, k, k, c, f), name="w", dtype="float32")
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(k, "ry"), te.reduce_axis(k, "rx")
    return [x, wt, te.compute(
        (g, n, h, w, f),
        lambda gg, b, y, xx, ff: te.sum(x[gg, b, y + ry, xx + rx, rc] * wt[gg, ry, rx, rc, ff],
                                        axis=[ry, rx, rc]), name="group_outer_conv")]


@auto_scheduler.register_workload("window_conv_channels_first", override=True)
def channels_first_conv(n, h, w, g, c, f, k):
    """N, G, C, H, W input: no channels-last view of a group exists."""
    x = te.placeholder((n, g, c, h + k - 1, w + k - 1), name="x", dtype="float32")
    wt = te.placeholder((g, f, c, k, k), name="w", dtype="float32")
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(k, "ry"), te.reduce_axis(k, "rx")
    return [x, wt, te.compute(
        (n, g, f, h, w),
        lambda b, gg, ff, y, xx: te.sum(x[b, gg, rc, y + ry, xx + rx] * wt[gg, ff, rc, ry, rx],
                                        axis=[ry, rx, rc]), name="channels_first_conv")]


@auto_scheduler.register_workload("window_conv_max", override=True)
def windowed_max(n, h, w, c, k):
    """A max over a window of products: windowed, but no multiply-accumulate."""
    x = te.placeholder((n, h + k - 1, w + k - 1, c), name="x", dtype="float32")
    wt = te.placeholder((k, k, c, c), name="w", dtype="float32")
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(k, "ry"), te.reduce_axis(k, "rx")
    return [x, wt, te.compute(
        (n, h, w, c), lambda b, y, xx, ff: te.max(x[b, y + ry, xx + rx, rc] * wt[ry, rx, rc, ff], axis=[ry, rx, rc]),
        name="windowed_max")]


def grouped_reference(x, w, k, dilation, h, wd, stride=1):
    rows, columns = (h - 1) * stride + 1, (wd - 1) * stride + 1
    return sum(np.einsum("nhwgc,gcf->nhwgf", x[:, i * dilation:i * dilation + rows:stride,
                                               j * dilation:j * dilation + columns:stride], w[i, j])
               for i in range(k) for j in range(k))


def _random(shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _conv_task(task):
    tasks = [t for t in task.form_tasks[WINDOW_INSIDE] if t.kind == "conv2d"]
    assert len(tasks) == 1, [(t.name, t.kind) for t in task.form_tasks[WINDOW_INSIDE]]
    return tasks[0]


# (name, args, dilation, stride): grouped; dilated and strided on odd extents; 1 channel per
# group; a 5x3 window.
GROUPED_CASES = [
    ("grouped_3x3", (1, 12, 12, 4, 8, 8, 3), 1, 1),
    ("dilated2_strided2_odd", (1, 7, 9, 3, 4, 8, 3, 2, 2), 2, 2),
    ("one_channel_per_group", (2, 6, 5, 8, 1, 8, 3), 1, 1),
]


@pytest.mark.parametrize("name, args, dilation, stride", [pytest.param(*c, id=c[0]) for c in GROUPED_CASES])
def test_the_window_inside_form_is_a_tuned_conv_that_matches_numpy(tmp_path, name, args, dilation, stride):
    task = auto_scheduler.SearchTask(func="window_conv_grouped", args=args)
    assert list(task.forms) == [WINDOW_INSIDE, TAPS] and task.refusals == []
    assert "linalg.conv_2d_nhwc_hwcf" in task.forms[WINDOW_INSIDE]
    assert "linalg.conv_2d_nhwc_hwcf" not in task.forms[TAPS]
    conv = _conv_task(task)
    assert conv.key in {t.key for t in task.tasks}
    space = GeneratedSpaceGenerator(TARGET).generate(conv)
    default = space.default()
    rng = random.Random(11)
    vectorized = [c for c in (space.random(rng) for _ in range(64))
                  if c != default and space.is_valid(c) and space.plan(c).vectorize]
    assert vectorized, f"{name}: no vectorized point besides the default in {space.size} points"
    records = tmp_path / "records.jsonl"
    with RecordWriter(records) as writer:
        writer.write(Record(task=conv.describe(), config=vectorized[0], status="ok", costs=[1e-3], gflops=1.0,
                            target=canonical_target(TARGET)))
    n, h, w, g, c, f, k = args[:7]
    span = (k - 1) * dilation
    x = _random((n, (h - 1) * stride + span + 1, (w - 1) * stride + span + 1, g, c))
    wt = _random((k, k, g, c, f))
    tuned = task.apply_best(records, form=WINDOW_INSIDE)
    baseline = tilecraft.compile(task.forms[WINDOW_INSIDE], target=TARGET)
    assert tuned.ir("schedule") != baseline.ir("schedule"), f"{name}: the record was not applied"
    assert "vector.contract" in tuned.ir("schedule") or "vector.fma" in tuned.ir("schedule")
    expected = grouped_reference(x, wt, k, dilation, h, w, stride)
    np.testing.assert_allclose(tuned(x, wt), expected, rtol=1e-4, atol=1e-3, err_msg=f"{name} {vectorized[0]}")
    np.testing.assert_allclose(baseline(x, wt), expected, rtol=1e-4, atol=1e-3)


def test_a_group_axis_outside_the_image_axes_is_a_view_too():
    task = auto_scheduler.SearchTask(func="window_conv_group_outer", args=(1, 6, 6, 3, 4, 4, 3))
    assert WINDOW_INSIDE in task.forms
    x, wt = _random((3, 1, 8, 8, 4)), _random((3, 3, 3, 4, 4))
    expected = np.stack([grouped_reference(x[g][:, :, :, None], wt[g][:, :, None], 3, 1, 6, 6)[:, :, :, 0]
                         for g in range(3)])
    np.testing.assert_allclose(tilecraft.compile(task.forms[WINDOW_INSIDE])(x, wt), expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("workload, args, reason", [
    ("window_conv_channels_first", (1, 6, 6, 2, 4, 4, 3), "channels-last"),
    ("window_conv_max", (1, 6, 6, 4, 3), "multiply-accumulate"),
])
def test_a_window_the_form_cannot_take_is_refused_with_the_reason_and_keeps_the_taps(tmp_path, workload, args,
                                                                                    reason):
    task = auto_scheduler.SearchTask(func=workload, args=args)
    assert list(task.forms) == [TAPS]
    assert len(task.refusals) == 1 and reason in task.refusals[0], task.refusals
    assert task.compute_dag.count("linalg.generic") >= 9  # the taps
    with pytest.raises(TuningError, match=reason):
        task.apply_best(tmp_path / "records.jsonl", form=WINDOW_INSIDE)


def test_the_matcher_names_what_it_refuses():
    with ir.Context() as context:
        x = te.placeholder((1, 10, 10, 2, 4), name="x", dtype="float32")
        wt = te.placeholder((3, 3, 2, 4, 4), name="w", dtype="float32")
        rc, ry, rx = te.reduce_axis(4, "rc"), te.reduce_axis(3, "ry"), te.reduce_axis(3, "rx")
        # The filter's taps transposed (columns before rows): not HWCF without the group.
        y = te.compute((1, 8, 8, 2, 4), lambda b, i, j, g, f: te.sum(
            x[b, i + ry, j + rx, g, rc] * wt[rx, ry, g, rc, f], axis=[ry, rx, rc]), name="y")
        module = te.create_func([x, wt, y], context=context)
        generic = next(op.operation for op in module.body.operations[0].regions[0].blocks[0].operations
                       if op.operation.name == "linalg.generic")
        why = match_window_conv(generic)
        assert isinstance(why, str) and "filter's axes" in why
        assert rewrite_window_convs(module) == 0


def test_apply_best_picks_the_form_timed_fastest(tmp_path):
    task = auto_scheduler.SearchTask(func="window_conv_grouped", args=(1, 12, 12, 4, 8, 8, 3))
    conv = _conv_task(task)
    records = tmp_path / "records.jsonl"
    with RecordWriter(records) as writer:
        writer.write(Record(task=conv.describe(), config=GeneratedSpaceGenerator(TARGET).generate(conv).default(),
                            status="ok", costs=[1e-3], gflops=1.0, target=canonical_target(TARGET)))
    chosen = task.best_form(records)
    ratios = task.form_ratios[records.resolve()]
    assert set(ratios) == set(task.form_seconds[records.resolve()]) == {WINDOW_INSIDE, TAPS}
    assert ratios[TAPS] == 1.0 and chosen == min(ratios, key=ratios.get)
    x, wt = _random((1, 14, 14, 4, 8)), _random((3, 3, 4, 8, 8))
    np.testing.assert_allclose(task.apply_best(records)(x, wt), grouped_reference(x, wt, 3, 1, 12, 12),
                               rtol=1e-4, atol=1e-3)
    assert chosen in task.print_best(records)


@pytest.mark.slow  # a minute at load 12: tunes two forms, compares each end to end, times them
def test_tune_shares_the_trials_between_the_forms_and_applies_the_faster(tmp_path):
    task = auto_scheduler.SearchTask(func="window_conv_grouped", args=(1, 8, 8, 2, 8, 8, 3))
    records = tmp_path / "records.jsonl"
    result = task.tune(auto_scheduler.TuningOptions(
        num_measure_trials=4, verbose=0, measure_callbacks=[auto_scheduler.RecordToFile(records)]))
    tuned_keys = {r.task.key for r in result.tasks}
    assert {t.key for t in task.form_tasks[WINDOW_INSIDE]} & tuned_keys
    assert {t.key for t in task.form_tasks[TAPS]} & tuned_keys
    assert sum(r.trials for r in result.tasks) <= 4
    assert records.resolve() in task.form_ratios  # tune timed the forms with the new records
    x, wt = _random((1, 10, 10, 2, 8)), _random((3, 3, 2, 8, 8))
    np.testing.assert_allclose(task.apply_best(records)(x, wt), grouped_reference(x, wt, 3, 1, 8, 8),
                               rtol=1e-4, atol=1e-3)
