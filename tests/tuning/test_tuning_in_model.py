"""Measurement that matches the model: candidates timed by the profiler's kernel timers (the
same ones a profile of the model reads), and each task's tuner time joined with its kernels'
time in a profiled run of the tuned model (tuning/in_model.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tilecraft
from tilecraft.tuning.in_model import agreement_table, in_model_times
from tilecraft.pipelines.compiled_module import compile_ir
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
    joined = [row for row in rows if row.model_seconds is not None]
    assert len(joined) >= len(rows) - 1 and all(row.ratio > 0 for row in joined)
    table = agreement_table(rows)
    assert table.splitlines()[0].split()[-1] == "model/tuner" and len(table.splitlines()) == len(rows) + 1
