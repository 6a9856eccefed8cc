"""Measurement that matches the model: candidates timed by the profiler's kernel timers (the
same ones a profile of the model reads), built with the model's weights as constants (so the
pipeline lays them out as in the model), with as many bytes read before each call as a
run of the model touches, and each task's tuner time joined with its kernels' time in a profiled run of
the tuned model (tuning/in_model.py)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
from mlir import ir
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.schedule.records import IN_MODEL, RecordWriter, best_records, canonical_target, load_records
from tilecraft.schedule.task import WEIGHT, measured_module
from tilecraft.tuning.measure import LocalRunner, MeasureInput, RunnerOptions, last_level_cache_bytes
from tilecraft.tuning.measure import cache_eviction
from tilecraft.pipelines.pipeline import Pipeline
from tilecraft.tuning.in_model import agreement_table, confirm_in_model, in_model_times, side_by_side_times
from tilecraft.pipelines.jit.compiled_module import compile_ir
from tilecraft.pipelines.cpu import cpu_pipeline
from tilecraft.pipelines.profiling import profiling_pipeline
from tilecraft.pipelines.target import Target
from tilecraft.runtime import kernel_timers

DIGITS = Path(tilecraft.__file__).parent / "examples" / "digits_cnn.onnx"
SHAPES = {"input": [1, 1, 16, 16]}


def test_a_jit_profiling_variant_counts_its_kernels(matmul_64):
    target = Target.parse("llvm")
    module = compile_ir(matmul_64, profiling_pipeline(cpu_pipeline(target)), target)
    a, b = np.ones((64, 128), np.float32), np.ones((128, 64), np.float32)
    kernel_timers.reset()
    for _ in range(3):
        np.testing.assert_allclose(module(a, b), a @ b)
    kernels = kernel_timers.read()
    assert kernels and all(calls == 3 for _, calls in kernels)  # every kernel, every call
    assert kernel_timers.total_seconds() > 0
    kernel_timers.reset()
    assert kernel_timers.read() == []


def test_tuner_times_join_the_kernels_of_the_tuned_model(tmp_path):
    options = tilecraft.CompileOptions(shape_dict=SHAPES)
    records = tmp_path / "digits.jsonl"
    tilecraft.tune(DIGITS, options, trials=6, tuning_records=records, tuner="random", progress=False,
                   end_to_end=False, validate_top=0, transfer=False)
    tasks = tilecraft.extract_tasks(DIGITS, "llvm", shape_dict=SHAPES)
    assert all(task.kernels for task in tasks)
    rows = in_model_times(DIGITS, options, records, tasks, runs=2)
    assert {row.task.key for row in rows} <= {task.key for task in tasks}
    # Every task finds its kernel: the fc1 group fuses a transpose named after pool2, and
    # still leaves pool2's pooling kernel to pool2's own task.
    assert all(row.model_seconds is not None and row.ratio > 0 for row in rows)
    table = agreement_table(rows)
    assert table.splitlines()[0].split()[-1] == "model/tuner" and len(table.splitlines()) == len(rows) + 1
    # Side by side: the tuner's column is measured again, in the same rounds as the model's
    # profile, for the heaviest tasks with records.
    side = side_by_side_times(DIGITS, options, records, tasks, top=2, rounds=2, flush_cache=False)
    heaviest = sorted(tasks, key=lambda t: -t.flops * t.count)[:2]
    assert [row.task.key for row in side] == [t.key for t in heaviest]
    assert all(row.tuner_seconds > 0 and row.model_seconds is not None and row.ratio > 0 for row in side)


def _conv_model(channels: int = 64, size: int = 14):
    weights = np.random.default_rng(0).standard_normal((channels, channels, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 4)], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, size, size])],
        [numpy_helper.from_array(weights, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _blocked_globals(module: ir.Module) -> list[str]:
    """The pipeline's block-major copies of constant filters (pipelines/tensor/blocked_constants.py),
    after bufferization."""
    pipeline = cpu_pipeline(Target.parse("llvm"))
    with module.context, ir.Location.unknown():
        Pipeline(pipeline.stages[: pipeline.stage_names.index("loops")]).run(module)
    return re.findall(r"memref\.global[^\n]*: memref<\d+x3x3x64x\d+xf32>", str(module))


def test_a_candidate_reads_its_weights_as_the_model_does():
    """The filter is an argument of the task's payload (its values are not the task), but a
    candidate is built with it as a constant again, so the pipeline stores it block-major as
    it does in the model; built from the payload as it is, the filter stays HWCF."""
    task = tilecraft.extract_tasks(_conv_model())[0]
    assert task.kind == "conv2d" and task.weight_bytes == 64 * 64 * 9 * 4
    assert task.payload.count(WEIGHT) == 1
    assert _blocked_globals(measured_module(task.payload, ir.Context()))
    assert not _blocked_globals(ir.Module.parse(task.payload, ir.Context()))
    measured = measured_module(task.payload, ir.Context())
    arguments = re.search(r"func\.func @task\(([^)]*)\)", str(measured)).group(1)
    assert WEIGHT not in str(measured) and arguments.count("%arg") == 1  # the input alone
    # The same values in every worker: outputs of two builds compare.
    again = measured_module(task.payload, ir.Context())
    assert str(measured) == str(again)


def test_candidates_are_timed_cold_when_the_model_outgrows_the_cache():
    task = tilecraft.extract_tasks(_conv_model())[0]
    assert cache_eviction([task]) < last_level_cache_bytes()
    many = replace(task, count=2 * last_level_cache_bytes() // task.weight_bytes + 1)
    assert cache_eviction([many]) == 2 * last_level_cache_bytes()  # every level evicted
    digits = tilecraft.extract_tasks(DIGITS, "llvm", shape_dict=SHAPES)
    assert cache_eviction(digits) < last_level_cache_bytes()
    options = RunnerOptions(timeout=120, repeat=2, min_repeat_ms=1, flush_cache=cache_eviction([many]))
    job = MeasureInput(task.payload, task.describe(), None, canonical_target("llvm"))
    with LocalRunner(options) as runner:
        result = runner.measure(job)
    assert result.ok, result.error
    assert len(result.costs) == 2 and all(cost > 0 for cost in result.costs)


def test_tuned_configs_are_confirmed_inside_the_model(tmp_path):
    """Each task whose best config is not its default gets both configs timed as kernels of
    the profiled model (in_model records), and those decide which config is applied."""
    options = tilecraft.CompileOptions(shape_dict=SHAPES)
    records = tmp_path / "digits.jsonl"
    tilecraft.tune(DIGITS, options, trials=30, tuning_records=records, tuner="random", progress=False,
                   end_to_end=False, validate_top=0, transfer=False, seed=3)
    tasks = tilecraft.extract_tasks(DIGITS, "llvm", shape_dict=SHAPES)
    before = load_records(records, target="llvm")
    defaults = {r.key: r.config for r in before if r.tuner == "default"}
    tuned = {key for key, record in best_records(before).items() if record.config != defaults[key]}
    if not tuned:
        # Whether 30 random trials beat a default is this machine's timing (it failed once
        # under a full test run's load). What this test checks is the confirmation: give it
        # a case by recording one task's fastest other candidate as faster than its default.
        candidates = [r for r in before if r.ok and r.tuner != "default" and r.config != defaults[r.key]]
        assert candidates, "the search measured no candidate other than the defaults"
        fastest = min(candidates, key=lambda r: r.cost)
        default_cost = best_records([r for r in before if r.tuner == "default"])[fastest.key].cost
        with RecordWriter(records) as writer:
            writer.write(replace(fastest, costs=[default_cost * 0.9]))
        before = load_records(records, target="llvm")
        tuned = {key for key, record in best_records(before).items() if record.config != defaults[key]}
    assert tuned
    slower = confirm_in_model(DIGITS, options, records, tasks, runs=3)
    after = load_records(records, target="llvm")
    confirmed = [r for r in after if r.tuner == IN_MODEL]
    assert {r.key for r in confirmed} == tuned and len(confirmed) == 2 * len(tuned)
    best = best_records(after)
    for key in tuned:
        pair = [r for r in confirmed if r.key == key]
        assert best[key].tuner == IN_MODEL and best[key].cost == min(r.cost for r in pair)
        kept_default = best[key].config == defaults[key]
        assert kept_default == (key in {task.key for task in slower})


def test_side_by_side_without_records_times_the_default_schedules():
    """No records: the model without records beside each task's default schedule, measured as
    the search's first trial measures it (benchmarks/tuning_in_model.py's check needs no tuning run)."""
    options = tilecraft.CompileOptions(shape_dict=SHAPES)
    tasks = tilecraft.extract_tasks(DIGITS, "llvm", shape_dict=SHAPES)
    rows = side_by_side_times(DIGITS, options, None, tasks, top=2, rounds=2, flush_cache=False)
    heaviest = sorted(tasks, key=lambda t: -t.flops * t.count)[:2]
    assert [row.task.key for row in rows] == [t.key for t in heaviest]
    assert all(row.tuner_seconds > 0 and row.model_seconds is not None and row.ratio > 0 for row in rows)


def test_the_cache_flush_leaves_the_thread_pool_awake(monkeypatch):
    """After evicting the caches and reading the inputs again, the flush runs a tiny parallel
    kernel (the pool waker), so the candidate starts with the runtime's threads running, as
    a kernel in a model does right after the one before it."""
    from tilecraft.tuning import measure

    wake = measure._pool_waker()
    wake()  # a real compiled kernel; runs alone
    calls = []
    monkeypatch.setattr(measure, "_pool_waker", lambda threads=None: lambda: calls.append("wake"))
    argument = np.ones(1024, np.float32)
    flush = measure._cache_flusher([argument])
    flush()
    flush()
    assert calls == ["wake", "wake"]
