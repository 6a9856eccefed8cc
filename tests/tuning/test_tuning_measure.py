"""The measurement worker: real builds and runs in a spawned process; a candidate that aborts
the process, hangs or computes a wrong result comes back as a failed result, and the runner
keeps going with a fresh worker."""

import os
import time

import numpy as np
import pytest
from tilecraft.schedule.records import canonical_target
from tilecraft.tuning import extract_tasks, space_for
from tilecraft.tuning.measure import LocalRunner, MeasureInput, RunnerOptions

TARGET = "llvm"


def abort_on_big_register_tile(config: dict) -> None:
    """Test-only hook (runs in the worker): a candidate whose build kills the process."""
    if config.get("reg_m") == 16:
        os.abort()


def hang_on_step_4(config: dict) -> None:
    """Test-only hook (runs in the worker): a candidate that never finishes."""
    if config.get("step_k") == 4:
        time.sleep(3600)


def _job(task, config, reference=None, save=None):
    return MeasureInput(task.payload, task.describe(), config, canonical_target(TARGET),
                        reference=reference, save_output=save)


@pytest.fixture
def task(matmul_64):
    return extract_tasks(matmul_64, TARGET)[0]


def test_default_and_candidate_are_measured_and_checked(task):
    space = space_for(task, TARGET)
    options = RunnerOptions(timeout=60, repeat=2, min_repeat_ms=1)
    with LocalRunner(options) as runner:
        reference = str(runner.scratch / "ref.npy")
        default = runner.measure(_job(task, None, save=reference))
        assert default.ok, default.error
        assert len(default.costs) == 2 and all(c > 0 for c in default.costs)
        # Tasks of two 32-column panels (par_n = 64), so that packing B has something to reuse.
        config = {**space.default(), "reg_m": 4, "step_k": 2, "pack_a": 0, "pack_b": 1,
                  "cache_k": 64, "par_n": 64}
        assert space.is_valid(config)
        candidate = runner.measure(_job(task, config, reference=reference))
        assert candidate.ok, candidate.error
        # Packing A instead: the sliver copies must not change the result either.
        packed_a = {**config, "pack_a": 1, "pack_b": 0}
        assert space.is_valid(packed_a) and space.plan(packed_a).packed_operands == ((0, 2),)
        candidate = runner.measure(_job(task, packed_a, reference=reference))
        assert candidate.ok, candidate.error
        # A reference the candidate cannot match: the check is real.
        wrong = runner.scratch / "wrong.npy"
        np.save(wrong, np.load(reference) + 1.0)
        assert runner.measure(_job(task, config, reference=str(wrong))).status == "wrong"


def test_crashing_and_hanging_candidates_fail_and_the_runner_recovers(task):
    space = space_for(task, TARGET)
    crash = {**space.default(), "reg_m": 16}
    options = RunnerOptions(timeout=60, repeat=1, min_repeat_ms=1, hook=abort_on_big_register_tile)
    with LocalRunner(options) as runner:
        result = runner.measure(_job(task, crash))
        assert result.status == "crash" and "exit code" in result.error
        assert runner.measure(_job(task, space.default())).ok  # a fresh worker took over

    hang = {**space.default(), "step_k": 4}
    options = RunnerOptions(timeout=8, repeat=1, min_repeat_ms=1, hook=hang_on_step_4)
    with LocalRunner(options) as runner:
        runner.measure(_job(task, space.default()))  # worker started and warm
        start = time.perf_counter()
        result = runner.measure(_job(task, hang))
        assert result.status == "timeout"
        assert time.perf_counter() - start < 60
        assert runner.measure(_job(task, space.default())).ok


def test_a_script_the_interpreter_rejects_is_a_build_error(task):
    # A register tile wider than its thread tile, with B packed: each knob value is in the
    # space, but the point is invalid (tuners never propose it). Its columns' register tile
    # is peeled (the space peels a tile that does not divide its loop), and the packing of
    # B per register tile does not apply to the peeled loop.
    space = space_for(task, TARGET)
    values = {knob.name: knob.values for knob in space.knobs}
    widest = max(values["reg_n"])  # 64 lanes with 512-bit vectors, 32 with 256-bit ones
    narrower = max(v for v in values["par_n"] if 0 < v < widest)
    # Rows of whole register tiles (a peeled partial tile would be another script).
    config = {**space.default(), "par_m": 16, "reg_m": 4, "par_n": narrower, "reg_n": widest, "pack_b": 1}
    assert not space.is_valid(config)
    with LocalRunner(RunnerOptions(timeout=60, repeat=1, min_repeat_ms=1)) as runner:
        result = runner.measure(_job(task, space.validate(config)))
    assert result.status == "build_error"
    assert "tilecraft-schedule" in result.error
