"""Tuners compared on one task, interleaved batch by batch (``compare_tuners``).

For benchmarks (benchmarks/tuning_gemm_conv.py) and docs/tuning.md's curves: every round
measures one batch of each tuner with the same runner, so their curves share the load.
"""

from __future__ import annotations

import os
import sys
import time

from ..errors import TunerNameError
from ..pipelines.target import Target
from ..schedule.records import canonical_target
from ..schedule.task import Task
from .database import JsonLinesDatabase
from .measure import LocalRunner, RunnerOptions, measurement_clock
from .results import TaskResult
from .session import MeasureSession, TaskState, measured_cost
from .space_generators import space_generator_for
from .tuners import TUNERS


def compare_tuners(
    task: Task,
    records: "dict[str, str | os.PathLike[str]]",
    target: "str | Target" = "llvm",
    trials: int = 200,
    timeout: float = 30.0,
    *,
    runner: RunnerOptions | None = None,
    batch_size: int = 8,
    seed: int = 0,
    progress: bool = True,
    validate_top: int = 4,
    space: str = "hand",
) -> dict[str, TaskResult]:
    """Tune one task with several tuners *interleaved*, batch by batch, for ``trials`` each.

    Why not one :func:`tune` per tuner: on a shared machine the load drifts between runs
    minutes apart, and tuners measured at different times cannot be compared. Here every
    round measures one batch of each tuner with the same worker, so their curves share the
    conditions. ``records`` maps tuner name to its records file (the default schedule,
    measured once, opens each file). ``space``: ``TuneOptions.space``'s choice of spaces
    (``hand``, ``generated``, ``sketch``); every tuner searches the same space.
    """
    for name in records:
        if name not in TUNERS:
            raise TunerNameError(f"unknown tuner {name!r}; choose one of {', '.join(TUNERS)}")
    target = Target.parse(target)
    options = RunnerOptions(**{**(runner or RunnerOptions()).__dict__, "timeout": float(timeout)})
    options = RunnerOptions(**{**options.__dict__, "clock": measurement_clock(options.clock, target)})
    generator = space_generator_for(target, space)
    states = {name: TaskState(task, generator.generate(task), name, seed) for name in records}
    databases = {name: JsonLinesDatabase(path) for name, path in records.items()}
    start = time.perf_counter()
    try:
        with LocalRunner(options) as runner:
            session = MeasureSession(runner, canonical_target(target), target.num_threads)
            session.measure_default(list(states.values()), list(databases.values()))
            # A tuner whose batch comes back empty has run out of valid configs, though its
            # has_next() still counts the space's invalid points (a 4-point GEMM space at one
            # thread looped here without end): it is done, as search_task treats it.
            exhausted: set[str] = set()
            order = list(states.items())
            while any(s.reference and s.trials < trials and s.tuner.has_next() and name not in exhausted
                      for name, s in states.items()):
                # Which tuner measures first flips every round, so neither always follows the
                # other's builds (in one run at load 15 every config both tuners measured came
                # out 4-8 % slower in the second tuner's records; the cause was not isolated).
                order.reverse()
                for name, state in order:
                    if state.reference is None or state.trials >= trials or name in exhausted:
                        continue
                    batch = state.tuner.next_batch(min(batch_size, trials - state.trials))
                    if not batch:
                        exhausted.add(name)
                        continue
                    costs = [measured_cost(session.measure(state, c, name, [databases[name]])) for c in batch]
                    state.tuner.update(batch, costs)
                    if progress:
                        current = max(state.history[-len(batch):] or [0.0])
                        print(f"[{name:>8}] Current/Best: {current:>7.2f}/"
                              f"{state.gflops(state.tuner.best_cost):>7.2f} GFLOPS | Progress: "
                              f"({state.trials}/{trials}) | {time.perf_counter() - start:.2f} s",
                              file=sys.stderr, flush=True)
            if validate_top > 0:
                for name, state in states.items():
                    if state.reference is not None:
                        session.validate(state, validate_top, [databases[name]])
    finally:
        for database in databases.values():
            database.close()
    return {
        name: TaskResult(task=s.task, default_gflops=s.gflops(s.default_cost),
                         best_gflops=s.gflops(s.tuner.best_cost), best_config=s.tuner.best_config,
                         trials=s.trials, history=s.history)
        for name, s in states.items()
    }
