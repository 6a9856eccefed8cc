"""Points of a schedule space build, run and are right (benchmarks/space_status_sweep.py
measures the status mix over many classes; these are the targeted checks of what it found).

Each test names the class of points the space no longer offers, or the class of schedules
the compiler now builds right, and checks it against numpy."""

from __future__ import annotations

import random
import warnings
from dataclasses import replace

import mlir_text
import numpy as np
import pytest

import tilecraft
from tilecraft import auto_scheduler
from tilecraft.pipelines.target import Target
from tilecraft.schedule import te
from tilecraft.schedule.records import Record, RecordWriter, canonical_target
from tilecraft.tuning import extract_tasks
from tilecraft.tuning.space_generators import HandSpaceGenerator, SketchSpaceGenerator

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


def broadcast_matmul_model(a_shape: tuple[int, ...], b_shape: tuple[int, ...]):
    """ONNX MatMul of a batched A by a shared B (numpy's broadcasting)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], "broadcast_matmul",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a_shape)),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*a_shape[:-1], b_shape[-1]])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def apply_config(model, task, config, tmp_path, target=TARGET):
    """``model`` compiled with ``config`` as the record of ``task``; a schedule that fails
    to apply raises (it would fall back to scalar loops with a warning). A file per config:
    a records file is appended to, and the first of equal costs would win."""
    records = tmp_path / f"point-{abs(hash(str(sorted(config.items()))))}.jsonl"
    with RecordWriter(records) as writer:
        writer.write(Record(task=task.describe(), config=config, status="ok", costs=[1e-3], gflops=1.0,
                            target=canonical_target(target)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # also "tuning record ... ignored"
        return tilecraft.compile(model, target=target, tuning_records=records)


def test_packing_rows_that_come_as_two_loops_with_a_partial_row_tile(tmp_path):
    """A (4, 48, K) @ (K, 64): the rows are two loops (4 x 48, no batch: B is shared), so A
    is indexed by one loop more than (M, K). Packing A with a row tile that leaves a partial
    last tile (16-row tasks in 6-row tiles: the last one peeled) copied (rows, K) blocks whose
    row count was dynamic in the peeled tile and did not vectorize (a build error); such
    points now build and match numpy."""
    a = RNG.standard_normal((4, 48, 32)).astype(np.float32)
    b = RNG.standard_normal((32, 64)).astype(np.float32)
    model = broadcast_matmul_model(a.shape, b.shape)
    (task,) = extract_tasks(model, TARGET)
    space = HandSpaceGenerator(TARGET).generate(task)
    assert len(space.nest.operand_dims[0]) == 3 and not space.batch  # rows as two loops
    points = [p for p in (space.point(i) for i in range(space.size)) if space.is_valid(p)
              and p["pack_a"] and (p["par_m"] or 48) % p["reg_m"]]
    assert points
    for config in random.Random(0).sample(points, min(4, len(points))):
        np.testing.assert_allclose(apply_config(model, task, config, tmp_path)(a, b), a @ b,
                                   rtol=1e-4, atol=1e-4, err_msg=str(config))


def test_every_point_of_a_tap_split_grouped_conv_builds_and_matches_numpy(tmp_path):
    """Every point of the space of a dilated grouped convolution's taps (rows as several
    loops, a prime row extent, a reg_m that leaves a partial tile) builds and is right;
    its A-packing points with a partial row tile failed to vectorize their copy."""
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


@pytest.mark.parametrize("generator", [HandSpaceGenerator, SketchSpaceGenerator], ids=["hand", "sketch"])
def test_a_one_thread_build_plans_its_records_in_the_one_thread_space(tmp_path, generator):
    """Records tuned for one thread, applied in a one-thread build: the schedule pass
    rebuilds each record's space for the build's thread count (its ``num-threads``), not
    the process's (every core). In a two-thread space a value only the one-thread space
    holds (the one-thread default's 32-channel tile of 48 channels) was ignored with a
    warning, and sketch points were planned on the two-thread default's levels, several
    of which failed to vectorize. The sketch space's default point (a 32-channel tile of
    48, peeled) was no point of its space and was refused too."""
    one = replace(Target.parse(TARGET), num_threads=1)
    model = mlir_text.conv_nhwc(1, 3, 3, 32, 3, 3, 48)  # one output pixel, 48 channels
    (task,) = extract_tasks(model, one)
    space = generator(one).generate(task)
    two = generator(replace(one, num_threads=2)).generate(task)
    assert space.default() != two.default()  # the thread count changes the space itself
    assert space.validate(space.default()) == space.default()  # a peeled default tile is a point too
    x = RNG.standard_normal((1, 3, 3, 32)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 32, 48)).astype(np.float32)
    expected = mlir_text.ref_conv_nhwc(x, w)
    rng = random.Random(3)
    points = [space.default()] + [space.random(rng) for _ in range(5)]
    for config in points:
        np.testing.assert_allclose(apply_config(model, task, config, tmp_path, target=one)(x, w), expected,
                                   rtol=1e-4, atol=1e-4, err_msg=str(config))


def test_a_candidate_whose_record_is_refused_is_a_build_error(tmp_path):
    """A config its space does not hold is refused when applied (the default schedule is
    built instead, with a warning): as a tuning candidate it must fail its build, not be
    timed as the default under the candidate's name."""
    from tilecraft.errors import CompileError
    from tilecraft.tuning.measure import MeasureInput, build_candidate

    (task,) = extract_tasks(mlir_text.matmul(48, 64, 32), TARGET)
    config = {**HandSpaceGenerator(TARGET).generate(task).default(), "reg_m": 5}  # 5 rows: no knob value
    job = MeasureInput(payload=task.payload, task=task.describe(), config=config, target=canonical_target(TARGET))
    with pytest.raises(CompileError, match="tuning record for .* ignored"):
        build_candidate(job, tmp_path)
