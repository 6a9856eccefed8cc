"""The thread count a run tunes for reaches the worker (issue #44, tunespace).

A target string carries no thread count, so the spawned measurement worker used to parse it
with its own default (``TILECRAFT_NUM_THREADS``, else every core): ``tune(model,
Target(num_threads=1))`` on a two-core machine measured candidates built as parallel loops
and timed them on the one-thread clock. Every job now carries the tuned target's thread
count (``MeasureInput.threads``) and the worker builds for it; these tests set the
environment to another count to show it no longer decides."""

from __future__ import annotations

from dataclasses import replace

import importlib

import numpy as np
import pytest

import mlir_text
from tilecraft.pipelines.target import Target
from tilecraft.schedule.records import canonical_target
from tilecraft.tuning import TuneOptions, extract_tasks, space_generator_for
from tilecraft.tuning.measure import LocalRunner, MeasureInput, RunnerOptions, build_candidate, job_target
from tilecraft.tuning.roles import Database, MeasureResult, Runner

tune_module = importlib.import_module("tilecraft.tuning.tune")  # the module (the package exports the function)
ONE_THREAD = replace(Target.parse("llvm"), num_threads=1)
# Large enough that the default plan splits it over two threads.
SIZE = 256


def _job(threads: int | None) -> MeasureInput:
    (task,) = extract_tasks(mlir_text.matmul(SIZE, SIZE, SIZE), replace(ONE_THREAD, num_threads=threads or 1))
    return MeasureInput(task.payload, task.describe(), None, canonical_target(ONE_THREAD), threads=threads)


def test_the_job_not_the_environment_sets_the_candidates_thread_count(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    assert job_target(_job(1)).num_threads == 1
    assert job_target(_job(None)).num_threads == 2  # no count given: the process's default
    one = build_candidate(_job(1), tmp_path)
    two = build_candidate(_job(2), tmp_path)
    assert one.target.num_threads == 1 and two.target.num_threads == 2
    # What the count changes: the two-thread build calls the parallel runtime, the other not.
    # (Not mlirAsyncRuntime: a module declares those only where it calls them, pipelines/stages.py.)
    assert "tilecraftParallelFor" not in str(one.llvm_module) and "tilecraftParallelFor" in str(two.llvm_module)
    rng = np.random.default_rng(0)
    a, b = (rng.random((SIZE, SIZE), dtype=np.float32) for _ in range(2))
    np.testing.assert_allclose(one(a, b), two(a, b), rtol=1e-4)


class RecordingRunner(Runner):
    """Measures nothing: keeps every job and answers a fixed time."""

    def __init__(self, tmp) -> None:
        self.tmp, self.jobs = tmp, []

    @property
    def scratch(self):
        return self.tmp

    def measure(self, job: MeasureInput) -> MeasureResult:
        self.jobs.append(job)
        if job.save_output is not None:
            np.save(job.save_output, np.zeros(1))
        return MeasureResult("ok", costs=(1e-3,) * 3)

    def close(self) -> None:
        pass


class Discard(Database):
    def commit(self, record) -> None:
        pass

    def records(self, target=None):
        return []


@pytest.mark.parametrize("threads", [1, 3])
def test_tune_hands_its_targets_thread_count_to_every_job(monkeypatch, tmp_path, threads):
    """Search, validation and the default's measurement: every job carries the count."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    runner = RecordingRunner(tmp_path)
    monkeypatch.setattr(tune_module, "runner_for", lambda search, options: runner)
    target = replace(ONE_THREAD, num_threads=threads)
    tune_module.tune(mlir_text.matmul(64, 64, 64), target, trials=6, batch_size=2, tuner="random",
                     validate_top=1, end_to_end=False, progress=False, headroom=False,
                     tuning_records=str(tmp_path / "r.jsonl"))
    assert len(runner.jobs) >= 6
    assert {job.threads for job in runner.jobs} == {threads}


def test_the_spawned_worker_builds_for_the_jobs_thread_count(monkeypatch):
    """Through a real worker: with the environment at 2 threads, a one-thread job's candidate
    is timed on the thread clock (which refuses nothing, but would read a parallel build's
    calling thread only) and matches the two-thread build's output."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    job = _job(1)
    options = RunnerOptions(timeout=120, repeat=1, min_repeat_ms=1, clock="thread_cpu")
    with LocalRunner(options) as runner:
        reference = str(runner.scratch / "ref.npy")
        one = runner.measure(replace(job, save_output=reference))
        two = runner.measure(replace(job, threads=2, reference=reference))
    assert one.ok and two.ok, (one.error, two.error)


def test_search_tasks_defaults_to_no_thread_count(tmp_path, matmul_64):
    """Callers of the driver that give no count keep the worker's default (as before)."""
    (task,) = extract_tasks(matmul_64, "llvm")
    runner = RecordingRunner(tmp_path)
    tune_module.search_tasks([task], TuneOptions(trials=2, validate_top=0, progress=False),
                             target_key="llvm", space_generator=space_generator_for("llvm"),
                             runner=runner, database=Discard())
    assert {job.threads for job in runner.jobs} == {None}
