"""The Ray runner (tuning/measure_ray.py) on a local Ray cluster of two worker processes: a
batch measured over both, results handed back as they finish, and a worker killed in the middle
of a measurement costing that candidate alone."""

from __future__ import annotations

import os
import random
import signal
import sys

import numpy as np
import pytest

from tilecraft.errors import TuningError
from tilecraft.tuning import extract_tasks, space_for
from tilecraft.tuning.measure import MeasureInput, RunnerOptions

ray = pytest.importorskip("ray")
from ray import cloudpickle  # noqa: E402  (the serializer Ray uses)
from tilecraft.tuning.measure_ray import RayRunner  # noqa: E402

# One worker runs the whole module (`make test` spreads tests over pytest-xdist workers): the
# module-scoped runner then starts one local cluster, not one per worker, and the
# unreachable-cluster test runs, as it must, before that cluster starts (the fixture's start
# right after it proves a failed connection leaves nothing behind).
pytestmark = pytest.mark.xdist_group("ray")

TARGET = "llvm"
KILL = "test_kill_worker"  # a config carrying this key makes its worker die


def kill_marked_worker(config: dict) -> None:
    """The runner's candidate hook (it runs in the worker before the build): the worker given
    a marked config dies as a node lost mid-measurement would (SIGKILL: no cleanup, no reply)."""
    if config.get(KILL):
        os.kill(os.getpid(), signal.SIGKILL)


# The hook travels to Ray's workers by value: they cannot import this test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_an_unreachable_cluster_is_a_tuning_error():
    # Runs before the module's runner starts a local cluster (tests run in file order).
    assert not ray.is_initialized()
    with pytest.raises(TuningError, match="cannot start or reach the Ray cluster"):
        RayRunner(address="ray://127.0.0.1:1")


@pytest.fixture(scope="module")
def runner():
    with RayRunner(RunnerOptions(timeout=120, repeat=1, min_repeat_ms=5, hook=kill_marked_worker),
                   workers_per_node=2) as started:
        yield started


def candidates(payload: str, count: int, reference: str | None = None) -> list[MeasureInput]:
    (task,) = extract_tasks(payload, TARGET)
    space = space_for(task, TARGET)
    rng, configs = random.Random(3), []
    while len(configs) < count:
        config = space.random(rng)
        if config not in configs:
            configs.append(config)
    return [MeasureInput(payload=task.payload, task=task.describe(), config=c, target=TARGET,
                         reference=reference) for c in configs]


def test_a_batch_is_spread_over_both_workers_and_streamed(runner, matmul_64, tmp_path):
    assert runner.workers == 2
    reference = tmp_path / "reference.npy"
    default = MeasureInput(**{**candidates(matmul_64, 1)[0].__dict__, "config": None,
                              "save_output": str(reference)})
    assert runner.measure(default).ok
    assert np.load(reference).shape == (64, 64)  # the default's output, shipped back
    seen: list[int] = []
    results = runner.measure_batch(candidates(matmul_64, 4, str(reference)),
                                   on_result=lambda i, r: seen.append(i))
    assert sorted(seen) == [0, 1, 2, 3]
    assert all(r.ok and len(r.costs) == 1 and r.costs[0] > 0 for r in results), results


def test_a_worker_killed_mid_measurement_loses_that_candidate_only(runner, matmul_64):
    jobs = candidates(matmul_64, 3)
    doomed = MeasureInput(**{**jobs[1].__dict__, "config": {**jobs[1].config, KILL: 1}})
    results = runner.measure_batch([jobs[0], doomed, jobs[2]])
    assert [r.status for r in results] == ["ok", "crash", "ok"], results
    assert "Ray worker died" in results[1].error
    assert runner.workers == 2 and runner.measure(jobs[1]).ok  # replaced; the run goes on


def test_tune_on_a_local_ray_cluster_records_every_trial(tmp_path, matmul_64, runner):
    """tune(ray="local") joins the cluster the fixture started (one per process) and spreads
    its batches over both workers; every trial is recorded by the driver."""
    import tilecraft
    from tilecraft.schedule.records import load_records

    records = tmp_path / "ray.jsonl"
    result = tilecraft.tune(matmul_64, TARGET, trials=5, tuning_records=records, tuner="random",
                            batch_size=2, timeout=120, validate_top=0, end_to_end=False,
                            transfer=False, progress=False, ray="local")
    lines = load_records(records, target=TARGET)
    assert len(lines) == 5 and all(r.ok for r in lines) and result.tasks[0].trials == 5


def test_runner_choices_are_checked():
    import tilecraft

    with pytest.raises(TuningError, match="choose one runner"):
        tilecraft.TuneOptions(ray="local", remote="remote://127.0.0.1:9")
    with pytest.raises(TuningError, match="ray must be 'local' or 'ray://HOST:PORT'"):
        tilecraft.TuneOptions(ray="127.0.0.1:9")
