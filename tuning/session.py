"""One task's search inside a run: its state, the measuring session, the search loop.

:class:`TaskState` holds what a run knows of a task (space, strategy, default time, reference
output); :class:`MeasureSession` measures candidates with a :class:`Runner` and commits a
record per measurement to the run's :class:`Database` s; :func:`search_task` gives a task's
strategy a number of trials, batch by batch (the task scheduler decides how many), and
:meth:`MeasureSession.validate` re-measures the finalists side by side.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from ..runtime.peak import Roofline
from ..runtime.significance import Comparison, compare
from ..schedule.records import VALIDATED, Record
from ..schedule.space import SearchSpace
from ..schedule.task import Task
from .measure import MeasureInput, MeasureResult
from .roles import Database, Runner, SearchStrategy
from .transfer import TransferModel
from .tuners import make_tuner


# Task kinds whose speed the float32 FMA peak bounds (the others are bound by memory).
CONTRACTION_KINDS = ("matmul", "conv2d", "depthwise_conv2d")

# Rounds of the validation phase: each round measures every finalist once. Five, so that a
# finalist is called faster than the default only when it won all five paired rounds by more
# than the noise floor (runtime/significance.py): at most a 1-in-32 chance for an equal one.
VALIDATION_ROUNDS = 5


def measured_cost(result: MeasureResult) -> float:
    """Median seconds per run, as :attr:`Record.cost` ranks records; ``inf`` when failed."""
    return statistics.median(result.costs) if result.ok and result.costs else math.inf


class Progress:
    """The TVM-style progress line over a tqdm bar (plain lines when tqdm is missing)."""

    def __init__(self, index: int, count: int, total: int, done: int, enabled: bool) -> None:
        self.prefix = f"[Task {index:>2}/{count:>2}]"
        self.total = total
        self.start = time.perf_counter()
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, bar_format="{desc} {bar:20}",
                            file=sys.stderr, leave=True, dynamic_ncols=False)

    def line(self, current: float, best: float, done: int) -> str:
        return (f"{self.prefix} Current/Best: {current:>7.2f}/{best:>7.2f} GFLOPS | "
                f"Progress: ({done}/{self.total}) | {time.perf_counter() - self.start:.2f} s")

    def update(self, current: float, best: float, done: int) -> None:
        if self.bar is not None:
            self.bar.set_description_str(self.line(current, best, done), refresh=False)
            self.bar.update(1)

    def close(self, best: float, done: int) -> None:
        if self.bar is not None:
            self.bar.set_description_str(self.line(best, best, done) + " Done.", refresh=False)
            self.bar.close()


class TaskState:
    """The state of one task in a run: its space (from a :class:`SpaceGenerator`), search
    strategy, reference output and trials."""

    def __init__(self, task: Task, space: SearchSpace, tuner: str, seed: int,
                 prior: TransferModel | None = None, peak_gflops: float | None = None,
                 roofline: Roofline | None = None) -> None:
        self.task = task
        if roofline is not None:
            peak_gflops = roofline.peak_gflops
        f32 = task.element_type == "f32"
        # The FMA peak bounds this task only where it is a float32 contraction.
        self.peak_gflops = peak_gflops if (task.kind in CONTRACTION_KINDS and f32) else None
        # What the machine can attain for it: with a roofline, the bandwidth of the level
        # its bytes fit in times its arithmetic intensity, capped by the peak (any float32
        # task: a pooling or a reduction is bound by its bytes alike); without one, the
        # peak for contractions; None (unknown) otherwise.
        self.bound_gflops: float | None = self.peak_gflops
        if roofline is not None and f32 and task.moved_bytes > 0 and task.flops > 0:
            self.bound_gflops = roofline.attainable(task.flops, task.moved_bytes)
        # Which roof that is: "FMA peak", or the level whose bandwidth bounds it ("L2" ...).
        self.bound_name = "FMA peak"
        if roofline is not None and self.bound_gflops is not None and self.bound_gflops < roofline.peak_gflops:
            self.bound_name = roofline.level_for(task.moved_bytes)[0]
        self.space = space
        self.tuner: SearchStrategy = make_tuner(tuner, self.space, seed, prior)
        self.reference: str | None = None
        self.default_cost = math.inf
        self.trials = 0
        self.history: list[float] = []
        self.since_best = 0
        self.failures = 0
        self.stopped = False  # early stopping fired or the space is exhausted
        self.skipped = False  # the trials budget ran out before its default was measured
        self.comparison: Comparison | None = None  # validated best against the default

    @property
    def best_cost(self) -> float:
        """The fastest measured schedule, the default included."""
        return min(self.default_cost, self.tuner.best_cost)

    def gflops(self, cost: float) -> float:
        return self.task.flops / cost / 1e9 if math.isfinite(cost) and cost > 0 else 0.0

    def headroom(self) -> float:
        """The fraction of its time a schedule at its attainable bound (:attr:`bound_gflops`:
        the roofline's, else the FMA peak) would save; 1 where no bound is known (no
        knowledge is no reason to skip it)."""
        if not self.bound_gflops:
            return 1.0
        return min(max(1.0 - self.gflops(self.best_cost) / self.bound_gflops, 0.0), 1.0)


class MeasureSession:
    """A :class:`Runner` and the target's record key (and thread count, which the key leaves
    out): measures candidates and commits the record of each one to every database it is
    given, as soon as it arrives."""

    def __init__(self, runner: Runner, target_key: str, threads: int | None = None) -> None:
        self.runner = runner
        self.target_key = target_key
        # The tuned target's thread count, carried by every job (MeasureInput.threads).
        self.threads = threads

    def _job(self, state: TaskState, config: dict[str, int] | None) -> MeasureInput:
        return MeasureInput(
            payload=state.task.payload, task=state.task.describe(), config=config,
            target=self.target_key, reference=state.reference,
            save_output=str(self._reference(state)) if config is None else None,
            threads=self.threads, placement=state.task.placement, producers=state.task.producer_cycle,
        )

    def _record(self, state: TaskState, config: dict[str, int] | None, name: str,
                result: MeasureResult, databases: list[Database]) -> None:
        """Append the record of one measurement (flushed at once) and count the trial."""
        recorded = config if config is not None else state.space.default()
        record = Record(
            task=state.task.describe(), config=recorded, status=result.status,
            costs=list(result.costs), gflops=state.gflops(measured_cost(result)), target=self.target_key,
            error=result.error, tuner=name, trial=state.trials + 1, timestamp=time.time(),
            script=state.space.script(recorded),
        )
        for database in databases:
            database.commit(record)
        state.trials += 1
        state.history.append(state.gflops(measured_cost(result)))

    def measure(self, state: TaskState, config: dict[str, int] | None, name: str,
                databases: list[Database]) -> MeasureResult:
        """Measure ``config`` (``None``: the default schedule, whose output is saved as the
        task's reference) and commit its record to every database."""
        result = self.runner.measure(self._job(state, config))
        self._record(state, config, name, result, databases)
        return result

    def measure_batch(self, state: TaskState, configs: list[dict[str, int]], name: str,
                      databases: list[Database],
                      on_result: "Callable[[dict[str, int], MeasureResult], None]") -> None:
        """Measure ``configs``: side by side where the runner spreads a batch over several
        machines (the Ray runner), else one after the other. Each result is recorded and
        handed to ``on_result`` as soon as it arrives."""
        def arrived(index: int, result: MeasureResult) -> None:
            self._record(state, configs[index], name, result, databases)
            on_result(configs[index], result)

        self.runner.measure_batch([self._job(state, config) for config in configs], on_result=arrived)

    def measure_default(self, states: list[TaskState], databases: list[Database]) -> None:
        """Measure the default schedule once for ``states`` (one task, perhaps several tuners)."""
        first = states[0]
        result = self.measure(first, None, "default", databases)
        if result.status == "timeout":
            # The compiler's own build, which the model runs: a timeout is the machine's (a
            # loaded or paused one: the sweep saw a 20 us default time out at 10 s), rarely
            # the schedule's; once more before the whole task is given up.
            result = self.measure(first, None, "default", databases)
        if not result.ok:
            print(f"warning: the default schedule of {first.task.name} failed "
                  f"({result.status}: {result.error[:200]}); task not tuned", file=sys.stderr)
            return
        for state in states:
            if state is not first:
                state.trials, state.history = first.trials, list(first.history)
            state.reference = str(self._reference(first))
            state.default_cost = measured_cost(result)
            state.tuner.update([state.space.default()], [state.default_cost])

    def validate(self, state: TaskState, top: int, databases: list[Database]) -> None:
        """Re-measure the ``top`` best configs and the default side by side; record each as
        ``final`` (costs: one median per round) and make the validated best the tuner's."""
        order = sorted(range(len(state.tuner.costs)), key=lambda i: state.tuner.costs[i])
        candidates: list[dict[str, int]] = []
        for i in order:
            if math.isfinite(state.tuner.costs[i]) and state.tuner.configs[i] not in candidates:
                candidates.append(state.tuner.configs[i])
            if len(candidates) == top:
                break
        default = state.space.default()
        if default not in candidates:
            candidates.append(default)
        if len(candidates) == 1:
            return  # the default alone: nothing to choose (its search measurement stands)
        rounds: list[list[MeasureResult]] = [[] for _ in candidates]
        for _ in range(VALIDATION_ROUNDS):
            for i, config in enumerate(candidates):
                rounds[i].append(self.runner.measure(MeasureInput(
                    payload=state.task.payload, task=state.task.describe(), config=config,
                    target=self.target_key, reference=state.reference, threads=self.threads,
                    placement=state.task.placement, producers=state.task.producer_cycle)))
        best_cost, best_config = math.inf, None
        round_costs: dict[int, list[float]] = {}
        for index, (config, results) in enumerate(zip(candidates, rounds)):
            failed = next((r for r in results if not r.ok), None)
            costs = [measured_cost(r) for r in results]
            cost = statistics.median(costs) if failed is None else math.inf
            if failed is None:
                round_costs[index] = costs
            record = Record(
                task=state.task.describe(), config=config,
                status="ok" if failed is None else failed.status, costs=costs if failed is None else [],
                gflops=state.gflops(cost), target=self.target_key,
                error="" if failed is None else failed.error, tuner=VALIDATED, trial=state.trials,
                timestamp=time.time(), script=state.space.script(config),
            )
            for database in databases:
                database.commit(record)
            if config == default and math.isfinite(cost):
                # The baseline measured side by side with the finalists: the summary's
                # speedup compares like with like (the search's one default measurement
                # against a validated median read differently for the default itself).
                state.default_cost = cost
            if cost < best_cost:
                best_cost, best_config = cost, config
        if best_config is not None:
            state.tuner.best_cost, state.tuner.best_config = best_cost, dict(best_config)
            default_index, best_index = candidates.index(default), candidates.index(best_config)
            if best_index != default_index and default_index in round_costs:
                state.comparison = compare(round_costs[default_index], round_costs[best_index])

    def _reference(self, state: TaskState) -> Path:
        return self.runner.scratch / f"{state.task.key}.npy"


def search_task(state: TaskState, share: int, run: Any, index: int, count: int, batch_size: int,
            early_stopping: int | None, tuner: str, progress: bool,
            deadline: float | None = None) -> int:
    """Up to ``share`` trials of ``state``'s tuner in batches; returns how many ran."""
    bar = Progress(index, count, state.trials + share, state.trials, progress)
    done = 0
    best = state.tuner.best_cost
    if not state.tuner.has_next():
        state.stopped = True
    while done < share and state.tuner.has_next():
        if deadline is not None and time.monotonic() >= deadline:
            break
        batch = state.tuner.next_batch(min(batch_size, share - done))
        if not batch:  # no valid config left, though has_next() counts invalid points too
            state.stopped = True
            break
        costs: dict[int, float] = {}

        def arrived(config: dict[str, int], result: MeasureResult) -> None:
            nonlocal done, best
            cost = measured_cost(result)
            costs[id(config)] = cost
            done += 1
            state.failures += not math.isfinite(cost)
            state.since_best = 0 if cost < best else state.since_best + 1
            best = min(best, cost)
            bar.update(state.gflops(cost), state.gflops(best), state.trials)

        run(state, batch, tuner, arrived)
        state.tuner.update(batch, [costs[id(config)] for config in batch])
        if early_stopping is not None and state.since_best >= early_stopping:
            state.stopped = True
            break
    if not state.tuner.has_next():
        state.stopped = True
    bar.close(state.gflops(state.tuner.best_cost), state.trials)
    return done
