"""Every op class the issue (#44) names gets a real space in the auto-scheduler's default
(``space="generated"``): grouped and dilated convolutions, batched small matmuls, reductions
and user computes. Per class: the task exists, its space holds vectorized points besides the
default, and a sampled point compiles, is applied, runs vectorized and matches numpy."""

from __future__ import annotations

import random
import warnings

import mlir_text
import numpy as np
import pytest
from mlir import ir

import tilecraft
from tilecraft import auto_scheduler
from tilecraft.schedule import te
from tilecraft.schedule.records import Record, RecordWriter, canonical_target
from tilecraft.schedule.te.window_taps import split_window_taps
from tilecraft.tuning import extract_tasks
from tilecraft.tuning.space_generators import GeneratedSpaceGenerator

TARGET = "llvm"
RNG = np.random.default_rng(3)


@auto_scheduler.register_workload("op_class_grouped_conv", override=True)
def grouped_conv(n, h, w, g, c, f, k, dilation, stride=1):
    """A user's grouped convolution in its own layout: NHWGC input (already padded), KKGCF
    filters, output h x w; no named op matches it, so it becomes one contraction per tap."""
    span = (k - 1) * dilation
    x = te.placeholder((n, (h - 1) * stride + span + 1, (w - 1) * stride + span + 1, g, c), name="x", dtype="float32")
    wt = te.placeholder((k, k, g, c, f), name="w", dtype="float32")
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(k, "ry"), te.reduce_axis(k, "rx")
    return [x, wt, te.compute(
        (n, h, w, g, f),
        lambda b, y, xx, gg, ff: te.sum(x[b, y * stride + ry * dilation, xx * stride + rx * dilation, gg, rc] * wt[ry, rx, gg, rc, ff],
                                        axis=[ry, rx, rc]), name="grouped_conv")]


@auto_scheduler.register_workload("op_class_matmul_bias", override=True)
def matmul_bias(m, k, n):
    a = te.placeholder((m, k), name="a", dtype="float32")
    b = te.placeholder((k, n), name="b", dtype="float32")
    bias = te.placeholder((n,), name="bias", dtype="float32")
    r = te.reduce_axis(k, "r")
    mm = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="mm")
    return [a, b, bias, te.compute((m, n), lambda i, j: mm[i, j] + bias[j], name="out")]


def grouped_reference(x, w, k, dilation, h, wd, stride=1):
    rows, columns = (h - 1) * stride + 1, (wd - 1) * stride + 1
    return sum(np.einsum("nhwgc,gcf->nhwgf", x[:, i * dilation:i * dilation + rows:stride,
                                               j * dilation:j * dilation + columns:stride], w[i, j])
               for i in range(k) for j in range(k))


def cases():
    """(name, model source, inputs, numpy reference, task kind)."""
    gx = RNG.standard_normal((1, 14, 14, 4, 8)).astype(np.float32)
    gw = RNG.standard_normal((3, 3, 4, 8, 8)).astype(np.float32)
    grouped = auto_scheduler.SearchTask(func="op_class_grouped_conv", args=(1, 12, 12, 4, 8, 8, 3, 1))
    dx = RNG.standard_normal((1, 16, 16, 8)).astype(np.float32)
    dw = RNG.standard_normal((3, 3, 8, 16)).astype(np.float32)
    bm = [RNG.standard_normal((12, 197, 64)).astype(np.float32),
          RNG.standard_normal((12, 64, 197)).astype(np.float32)]
    red = RNG.standard_normal((60, 90)).astype(np.float32)
    ua = [RNG.standard_normal((40, 24)).astype(np.float32), RNG.standard_normal((24, 48)).astype(np.float32),
          RNG.standard_normal(48).astype(np.float32)]
    user = auto_scheduler.SearchTask(func="op_class_matmul_bias", args=(40, 24, 48))
    return [
        ("grouped_conv", grouped.compute_dag, [gx, gw], grouped_reference(gx, gw, 3, 1, 12, 12), "matmul"),
        ("dilated_conv", mlir_text.conv_nhwc(1, 16, 16, 8, 3, 3, 16, dilation=2), [dx, dw],
         mlir_text.ref_conv_nhwc(dx, dw, dilation=2), "conv2d"),
        ("batch_matmul_12x197x64x197", mlir_text.batch_matmul(12, 197, 197, 64), bm, np.matmul(*bm), "matmul"),
        ("row_reduction", mlir_text.reduce_2d((60, 90), 1, "arith.addf", "0.0"), [red], red.sum(axis=1), "reduction"),
        ("user_matmul_bias", user.compute_dag, ua, ua[0] @ ua[1] + ua[2], "matmul"),
    ]


@pytest.mark.parametrize("name, model, inputs, expected, kind",
                         [pytest.param(*case, id=case[0]) for case in cases()])
def test_every_op_class_gets_a_vectorized_generated_space(tmp_path, name, model, inputs, expected, kind):
    tasks = [t for t in extract_tasks(model, TARGET) if t.kind == kind]
    assert tasks, f"{name}: no {kind} task in {[t.kind for t in extract_tasks(model, TARGET)]}"
    task = max(tasks, key=lambda t: t.flops * t.count)
    space = GeneratedSpaceGenerator(TARGET).generate(task)
    default = space.default()
    rng = random.Random(7)
    vectorized = [c for c in (space.random(rng) for _ in range(64))
                  if c != default and space.is_valid(c) and space.plan(c).vectorize]
    assert vectorized, f"{name}: no vectorized point besides the default in {space.size} points"
    config = vectorized[0]
    records = tmp_path / f"{name}.jsonl"
    with RecordWriter(records) as writer:
        writer.write(Record(task=task.describe(), config=config, status="ok", costs=[1e-3], gflops=1.0,
                            target=canonical_target(TARGET)))
    baseline = tilecraft.compile(model, target=TARGET)
    tuned = tilecraft.compile(model, target=TARGET, tuning_records=records)
    assert tuned.ir("schedule") != baseline.ir("schedule"), f"{name}: the record was not applied"
    assert "vector.transfer_read" in tuned.ir("schedule") or "vector.load" in tuned.ir("schedule")
    np.testing.assert_allclose(tuned(*inputs), expected, rtol=1e-4, atol=1e-3, err_msg=f"{name} with {config}")


def test_a_windowed_compute_splits_into_projected_taps():
    """A strided, dilated window: every tap reads a strided slice and has projected maps,
    and the taps, chained through the accumulator, compute the convolution."""
    task = auto_scheduler.SearchTask(func="op_class_grouped_conv", args=(1, 6, 6, 2, 4, 4, 3, 2, 2))
    with ir.Context():
        module = ir.Module.parse(task.compute_dag)
        generics = [op for op in module.body.operations[0].regions[0].blocks[0].operations
                    if op.operation.name == "linalg.generic"]
        assert len(generics) == 9
        for op in generics:
            assert all(m.is_projected_permutation for m in
                       (a.value for a in ir.ArrayAttr(op.operation.attributes["indexing_maps"])))
        # Stride 2: every tap reads a strided view of the 15 x 15 input.
        assert "[1, 2, 2, 1, 1] : tensor<1x15x15x2x4xf32> to tensor<1x6x6x2x4xf32>" in task.compute_dag
        assert "[0, 4, 4, 0, 0]" in task.compute_dag  # the last tap: offset 2 * dilation 2
        x = RNG.standard_normal((1, 15, 15, 2, 4)).astype(np.float32)
        w = RNG.standard_normal((3, 3, 2, 4, 4)).astype(np.float32)
        np.testing.assert_allclose(tilecraft.compile(task.compute_dag)(x, w),
                                   grouped_reference(x, w, 3, 2, 6, 6, stride=2), rtol=1e-4, atol=1e-4)


def test_a_window_of_more_than_max_taps_stays_one_op():
    with ir.Context() as context:
        x = te.placeholder((1, 20, 20), name="x", dtype="float32")
        ry, rx = te.reduce_axis(9, "ry"), te.reduce_axis(9, "rx")
        y = te.compute((1, 12, 12), lambda n, i, j: te.sum(x[n, i + ry, j + rx], axis=[ry, rx]), name="box")
        module = te.create_func([x, y], context=context)
        assert split_window_taps(module) == 0  # 81 taps > MAX_TAPS
        assert str(module).count("linalg.generic") == 1


def test_a_gemm_whose_columns_no_vector_divides_gets_whole_vector_tiles_peeled(tmp_path):
    """N = 37: no multiple of the lanes divides it, so reg_n offers whole vectors anyway and
    the last partial column tile is peeled; such a point stays vectorized (no fallback to
    scalar loops) and matches numpy. Packing and n_outer never combine with a peeled N."""
    model = mlir_text.matmul(40, 37, 24)
    (task,) = extract_tasks(model, TARGET)
    space = GeneratedSpaceGenerator(TARGET).generate(task)
    lanes = space.lanes
    assert lanes in dict((k.name, k.values) for k in space.knobs)["reg_n"]
    rng = random.Random(0)
    peeled = [c for c in (space.random(rng) for _ in range(200)) if 37 % c["reg_n"]]
    assert peeled and all(space.is_valid(c) for c in peeled)
    assert not any(c["pack_a"] or c["pack_b"] or c["n_outer"] for c in peeled)
    config = max(peeled, key=lambda c: c["reg_n"])
    assert task.ranges[space.n] in (37,) and space.n in space.plan(config).peeled_loops
    records = tmp_path / "odd.jsonl"
    with RecordWriter(records) as writer:
        writer.write(Record(task=task.describe(), config=config, status="ok", costs=[1e-3], gflops=1.0,
                            target=canonical_target(TARGET)))
    a = RNG.standard_normal((40, 24)).astype(np.float32)
    b = RNG.standard_normal((24, 37)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a schedule that failed to apply warns
        tuned = tilecraft.compile(model, target=TARGET, tuning_records=records)
    np.testing.assert_allclose(tuned(a, b), a @ b, rtol=1e-4, atol=1e-4)
