"""A task whose result the model writes into a larger tensor (the next convolution's pad, a
concat) is measured writing it there (schedule/task.py's ``Placement``): the tuner then builds
the model's kernel, not one for a tensor of its own. Why it matters: ShuffleNet's 232-filter
1x1 convolutions ran on 8-lane vectors in the model and on 16-lane ones in the tuner, 2x
apart (docs/tuning.md, "Faithful measurement: the kernel's destination")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from mlir import ir
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.pipelines.cpu import cpu_pipeline
from tilecraft.pipelines.pipeline import Pipeline
from tilecraft.pipelines.target import Target
from tilecraft.schedule.records import canonical_target
from tilecraft.schedule.task import Placement, Task, measured_module
from tilecraft.tuning.measure import MeasureInput, RunnerOptions, _run_job

from pinned_targets import AVX2, AVX512

FILTERS = 24  # a multiple of 8, not of 16: on 16 lanes padded to 32 unless written into a destination


def _conv(name: str, source: str, out: str, filters: int, channels: int, kernel: int,
          rng: np.random.Generator) -> tuple[list, list]:
    w = numpy_helper.from_array((rng.standard_normal((filters, channels, kernel, kernel)) / 8).astype(np.float32),
                                f"{name}_w")
    b = numpy_helper.from_array(rng.standard_normal(filters).astype(np.float32), f"{name}_b")
    nodes = [helper.make_node("Conv", [source, w.name, b.name], [f"{name}_c"], name=name,
                              pads=[kernel // 2] * 4),
             helper.make_node("Relu", [f"{name}_c"], [out], name=f"{name}_relu")]
    return nodes, [w, b]


def _model(nodes: list, weights: list, channels_out: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels_out, 12, 12])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def padded_next() -> onnx.ModelProto:
    """A 1x1 convolution of 24 filters whose result the next 3x3 convolution pads."""
    rng = np.random.default_rng(0)
    first, w1 = _conv("pointwise", "x", "p", FILTERS, 8, 1, rng)
    second, w2 = _conv("spatial", "p", "y", 16, FILTERS, 3, rng)
    return _model(first + second, w1 + w2, 16)


@pytest.fixture(scope="module")
def concatenated() -> onnx.ModelProto:
    """Two 1x1 convolutions of the same shape, concatenated along the channels."""
    rng = np.random.default_rng(1)
    left, w1 = _conv("left", "x", "l", FILTERS, 8, 1, rng)
    right, w2 = _conv("right", "x", "r", FILTERS, 8, 1, rng)
    concat = helper.make_node("Concat", ["l", "r"], ["y"], name="concat", axis=1)
    return _model(left + right + [concat], w1 + w2, 2 * FILTERS)


def _pointwise_task(model: onnx.ModelProto, filters: int = FILTERS) -> Task:
    return next(t for t in tilecraft.extract_tasks(model, AVX512)
                if t.kind == "conv2d" and t.ranges[-1] == 8 and t.ranges[3] == filters)


def test_a_result_padded_next_is_placed_in_the_pads_interior(padded_next):
    task = _pointwise_task(padded_next)
    assert task.placement == Placement(shape=(1, 14, 14, FILTERS), offsets=(0, 1, 1, 0),
                                       sizes=(1, 12, 12, FILTERS))
    assert task.placement.region() == (slice(0, 1), slice(1, 13), slice(1, 13), slice(0, FILTERS))


def test_concatenated_results_are_placed_at_their_channels_and_the_first_wins_a_tie(concatenated):
    task = _pointwise_task(concatenated)
    assert task.count == 2
    assert set(task.occurrence_placements) == {
        Placement((1, 12, 12, 2 * FILTERS), (0, 0, 0, offset), (1, 12, 12, FILTERS)) for offset in (0, FILTERS)}
    assert task.placement == task.occurrence_placements[0]


def test_a_result_of_its_own_has_no_placement():
    rng = np.random.default_rng(2)
    nodes, weights = _conv("alone", "x", "y", FILTERS, 8, 1, rng)
    # Returned, the model's own graph stage pads its filters to two 16-lane vectors.
    task = _pointwise_task(_model(nodes, weights, FILTERS), filters=32)
    assert task.placement is None and task.occurrence_placements == (None,)


def test_placements_ride_along_when_occurrences_merge():
    one = Placement((1, 9, 9, 8), (0, 1, 1, 0), (1, 7, 7, 8))
    task = Task(key="k", name="t", kind="conv2d", op_name="linalg.conv_2d_nhwc_hwcf", ranges=(1,),
                          parallel=(True,), element_type="f32", flops=1, count=1, payload="",
                          placements=(None,), runs=(1,))
    placed = Task(**{**task.__dict__, "placements": (one,), "runs": (3,)})
    merged = task.merged(placed)
    assert merged.occurrence_placements == (None, one)
    assert merged.placement == one  # 3 executions written into the pad against 1 not


def _filters_after_graph(task: Task, placement: Placement | None) -> int:
    """The output channels of the task's convolution once the graph stage ran on what the
    tuner measures, for 16 lanes."""
    context = ir.Context()
    module = measured_module(task.payload, context, placement=placement)
    pipeline = cpu_pipeline(Target.parse(AVX512), opt_level=3)
    with context, ir.Location.unknown():
        Pipeline(pipeline.stages[: pipeline.stage_names.index("graph") + 1]).run(module)
    convs = []
    module.operation.walk(lambda op: convs.append(op) or ir.WalkResult.ADVANCE
                          if op.name == "linalg.conv_2d_nhwc_hwcf" else ir.WalkResult.ADVANCE)
    (conv,) = convs
    return ir.RankedTensorType(conv.results[0].type).shape[-1]


def test_the_graph_stage_keeps_the_models_filter_count_for_a_placed_result(padded_next):
    task = _pointwise_task(padded_next)
    assert _filters_after_graph(task, task.placement) == FILTERS  # as in the model: 8-lane vectors
    assert _filters_after_graph(task, None) == 32  # what the tuner measured before: 16-lane ones


def test_a_placed_kernel_stores_into_the_larger_buffer_without_copies(padded_next):
    task = _pointwise_task(padded_next)
    context = ir.Context()
    module = measured_module(task.payload, context, placement=task.placement)
    pipeline = cpu_pipeline(Target.parse(AVX2), opt_level=3)
    with context, ir.Location.unknown():
        Pipeline(pipeline.stages[: pipeline.stage_names.index("bufferize") + 1]).run(module)
    text = str(module)
    assert "-> memref<1x14x14x24xf32>" in text  # the destination is what the task returns
    assert "memref.copy" not in text  # the kernel writes the interior in place
    assert "memref.subview %alloc[0, 1, 1, 0] [1, 12, 12, 24]" in text


def test_the_worker_checks_and_saves_the_placed_results_slice_only(padded_next, tmp_path: Path):
    task = _pointwise_task(padded_next)
    options = RunnerOptions(repeat=1, min_repeat_ms=0.0, flush_cache=0, clock="wall")
    target = canonical_target(Target.parse("llvm"))

    def job(placement: Placement | None, name: str, reference: str | None = None) -> MeasureInput:
        return MeasureInput(payload=task.payload, task=task.describe(), config=None, target=target,
                            save_output=str(tmp_path / name), reference=reference, threads=1, placement=placement)

    bare = _run_job(job(None, "bare.npy"), options, tmp_path)
    placed = _run_job(job(task.placement, "placed.npy", reference=str(tmp_path / "bare.npy")), options, tmp_path)
    assert bare.ok and placed.ok, (bare.error, placed.error)
    np.testing.assert_array_equal(np.load(tmp_path / "placed.npy"), np.load(tmp_path / "bare.npy"))
    assert np.load(tmp_path / "placed.npy").shape == (1, 12, 12, FILTERS)
