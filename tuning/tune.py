"""``tilecraft.tune``: tune every task of a model and append the measurements to records.

The loop, per task (heaviest first):

1. measure the default schedule (the default point of the task's space): its output is the
   reference every candidate is checked against, its time the baseline;
2. the task scheduler splits the remaining trials between tasks in proportion to their weight
   in total latency (default time x occurrences), at least one each while trials last;
3. the tuner proposes batches, the runner measures them in a worker process, each result is
   appended to ``tuning_records`` at once; the tuner learns from it; a task stops early after
   ``early_stopping`` trials without improvement.

Progress is printed as TVM prints it, with a progress bar:
``[Task  1/ 2] Current/Best:   31.97/  59.33 GFLOPS | Progress: (40/60) | 127.85 s``.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Sequence

from ..errors import TaskExtractionError, TunerNameError, TuningError
from ..pipelines.options import CompileOptions
from ..pipelines.target import Target
from .measure import LocalRunner, MeasureInput, MeasureResult, RunnerOptions
from ..schedule.records import VALIDATED, Record, RecordWriter, canonical_target, load_records
from ..schedule.space import ScheduleSpace, space_for
from ..schedule.task import Task, extract_tasks
from .tuners import TUNERS, Tuner, make_tuner


@dataclass
class TaskResult:
    """What tuning found for one task."""

    task: Task
    default_gflops: float
    best_gflops: float
    best_config: dict[str, int] | None
    trials: int
    history: list[float] = field(default_factory=list)  # GFLOPS per trial, 0 when failed


@dataclass
class TuningResult:
    """Per-task results and the records file to pass to ``tilecraft.compile``."""

    records: Path
    tasks: list[TaskResult]

    def summary(self) -> str:
        lines = [f"{'task':<40} {'default':>9} {'best':>9} {'speedup':>8} trials"]
        for r in self.tasks:
            speedup = r.best_gflops / r.default_gflops if r.default_gflops else float("nan")
            lines.append(f"{r.task.name[:40]:<40} {r.default_gflops:>9.2f} {r.best_gflops:>9.2f} "
                         f"{speedup:>7.2f}x {r.trials}")
        return "\n".join(lines)


def allocate_trials(weights: Sequence[float], budget: int) -> list[int]:
    """Split ``budget`` trials in proportion to ``weights`` (largest remainder), >= 1 each
    while the budget lasts, heaviest first."""
    n = len(weights)
    if budget <= 0 or n == 0:
        return [0] * n
    order = sorted(range(n), key=lambda i: -weights[i])
    shares = [0] * n
    for i in order[:budget]:
        shares[i] = 1
    rest = budget - sum(shares)
    total = sum(weights) or 1.0
    exact = [rest * w / total for w in weights]
    for i in range(n):
        shares[i] += int(exact[i])
    leftover = budget - sum(shares)
    for i in sorted(range(n), key=lambda i: -(exact[i] - int(exact[i])))[:leftover]:
        shares[i] += 1
    return shares


class _Progress:
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


class _TaskTuning:
    """The state of one task: space, tuner, reference output, budget."""

    def __init__(self, task: Task, target: Target, tuner: str, seed: int) -> None:
        self.task = task
        self.space: ScheduleSpace = space_for(task, target)
        self.tuner: Tuner = make_tuner(tuner, self.space, seed)
        self.reference: str | None = None
        self.default_cost = math.inf
        self.trials = 0
        self.history: list[float] = []
        self.since_best = 0

    def gflops(self, cost: float) -> float:
        return self.task.flops / cost / 1e9 if math.isfinite(cost) and cost > 0 else 0.0


def _resolve_tasks(model: Any, target: Target, tasks: Any, shape_dict: Any) -> list[Task]:
    found = extract_tasks(model, target, shape_dict=shape_dict)
    if tasks is None:
        return found
    wanted = [t.key if isinstance(t, Task) else str(t) for t in tasks]
    chosen = [t for t in found if t.key in wanted or t.name in wanted]
    if not chosen:
        raise TaskExtractionError(
            f"tasks={wanted} names none of the model's tasks: {[t.name for t in found]}")
    return chosen


@dataclass(frozen=True)
class TuneOptions:
    """How to search (the model and target come as :class:`CompileOptions`).

    Attributes:
      trials: measurements in total over all tasks (the default schedules included).
      tuning_records: JSON-lines file the measurements are appended to.
      tuner: ``xgb``, ``xgb_rank``, ``random`` or ``grid``.
      early_stopping: stop a task after this many trials without improvement.
      prior_records: records of an earlier (perhaps killed) run: their configs are not
        measured again and count toward each task's trials.
      timeout: seconds a candidate may take to build and run before it counts as failed.
      tasks: restrict to these tasks (``Task`` objects, keys or names).
      runner: measurement settings (``number``, ``repeat``, ``min_repeat_ms``, cache
        flush); its ``timeout`` is replaced by ``timeout``.
      batch_size: candidates proposed per tuner step (the model retrains between steps).
      seed: seed of the tuners' random choices.
      report: write a PNG plotting best-so-far GFLOPS vs trials per task and tuner.
      progress: print the progress lines.
      validate_top: after a task's search, re-measure its best ``validate_top`` configs and
        the default, round-robin (:data:`VALIDATION_ROUNDS` rounds), and record them as
        ``final``; ``compile`` then picks among these (0: no validation). Why: on a loaded
        machine the search's best single measurement is often a lucky one.
    """

    trials: int = 200
    tuning_records: "str | os.PathLike[str]" = "tuning.jsonl"
    tuner: str = "xgb"
    early_stopping: int | None = None
    prior_records: "str | os.PathLike[str] | None" = None
    timeout: float = 30.0
    tasks: Sequence[Any] | None = None
    runner: RunnerOptions | None = None
    batch_size: int = 8
    seed: int = 0
    report: "str | os.PathLike[str] | None" = None
    progress: bool = True
    validate_top: int = 4

    def __post_init__(self) -> None:
        if self.tuner not in TUNERS:
            raise TunerNameError(f"unknown tuner {self.tuner!r}; choose one of {', '.join(TUNERS)}")
        trials = self.trials
        if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
            raise TuningError(f"trials must be a positive integer, got {trials!r}")
        stop = self.early_stopping
        if stop is not None and (not isinstance(stop, int) or stop < 1):
            raise TuningError(f"early_stopping must be a positive integer or None, got {stop!r}")
        timeout = self.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise TuningError(f"timeout must be a positive finite number of seconds, got {timeout!r}")
        for name in ("batch_size", "validate_top", "seed"):
            value = getattr(self, name)
            least = 1 if name == "batch_size" else 0
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise TuningError(f"{name} must be an integer >= {least}, got {value!r}")


def tune(
    model: Any,
    options: "CompileOptions | str | Target | None" = None,
    search: TuneOptions | None = None,
    **overrides: Any,
) -> TuningResult:
    """Tune every task of ``model``; returns the best schedule per task.

    Args:
      model: anything :func:`tilecraft.compile` accepts.
      options: the :class:`CompileOptions` the model will be compiled with (``target``,
        records are keyed by it; ``shape_dict``), or just a target.
      search: the :class:`TuneOptions` (trials, tuner, records file, ...).
      overrides: fields of either, by name: ``tune(m, trials=200, tuning_records="m.jsonl",
        target="llvm", shape_dict=...)``.
    """
    if isinstance(options, (str, Target)):
        options = CompileOptions(target=options)
    compile_fields = {f.name for f in fields(CompileOptions)}
    options = CompileOptions.of(options, **{k: v for k, v in overrides.items() if k in compile_fields})
    search_fields = {f.name for f in fields(TuneOptions)}
    unknown = sorted(set(overrides) - compile_fields - search_fields)
    if unknown:
        raise TypeError(f"unknown tune option(s) {unknown}; options: {sorted(compile_fields | search_fields)}")
    search = replace(search or TuneOptions(), **{k: v for k, v in overrides.items() if k in search_fields})
    target, shape_dict = options.target, options.shape_dict
    if target.is_cuda:
        _refuse_cuda_tuning()
    target_key = canonical_target(target)
    chosen = _resolve_tasks(model, target, search.tasks, shape_dict)
    prior = load_records(search.prior_records, target=target) if search.prior_records is not None else []
    states = [_TaskTuning(task, target, search.tuner, search.seed) for task in chosen]
    runner_options = RunnerOptions(**{**(search.runner or RunnerOptions()).__dict__, "timeout": float(search.timeout)})
    records_path = Path(search.tuning_records)
    budget = search.trials
    with LocalRunner(runner_options) as local, RecordWriter(records_path) as writer:
        session = _Session(local, target_key)

        def run(state: _TaskTuning, config: dict[str, int] | None, name: str) -> MeasureResult:
            return session.measure(state, config, name, [writer])

        # 1. Defaults: the reference outputs and the weights of the task scheduler.
        for state in states:
            if budget <= 0:
                break
            session.measure_default([state], [writer])
            budget -= 1
            for record in prior:
                if record.key == state.task.key and record.tuner != "default":
                    try:
                        config = state.space.validate(record.config)
                    except TuningError:
                        continue
                    state.tuner.update([config], [record.cost])
                    state.trials += 1
                    state.history.append(state.gflops(record.cost))
        # 2. The task scheduler's shares.
        tunable = [s for s in states if s.reference is not None]
        shares = allocate_trials(
            [s.default_cost * s.task.count for s in tunable], budget)
        # 3. Search.
        for index, (state, share) in enumerate(zip(tunable, shares), 1):
            _search(state, share, run, index, len(tunable), search.batch_size, search.early_stopping,
                    search.tuner, search.progress)
            if search.validate_top > 0:
                session.validate(state, search.validate_top, [writer])
    results = [
        TaskResult(task=s.task, default_gflops=s.gflops(s.default_cost),
                   best_gflops=s.gflops(s.tuner.best_cost), best_config=s.tuner.best_config,
                   trials=s.trials, history=s.history)
        for s in states
    ]
    if search.report is not None:
        from .report import plot_report

        plot_report(load_records(records_path, target=target), search.report)
    return TuningResult(records_path, results)


# Rounds of the validation phase: each round measures every finalist once.
VALIDATION_ROUNDS = 3


class _Session:
    """A runner and the target's record key: measures candidates and records each one."""

    def __init__(self, local: LocalRunner, target_key: str) -> None:
        self.local = local
        self.target_key = target_key

    def measure(self, state: _TaskTuning, config: dict[str, int] | None, name: str,
                writers: list[RecordWriter]) -> MeasureResult:
        """Measure ``config`` (``None``: the default schedule, whose output is saved as the
        task's reference) and append its record to every writer."""
        job = MeasureInput(
            payload=state.task.payload, task=state.task.describe(), config=config,
            target=self.target_key, reference=state.reference,
            save_output=str(self._reference(state)) if config is None else None,
        )
        result = self.local.measure(job)
        recorded = config if config is not None else state.space.default()
        record = Record(
            task=state.task.describe(), config=recorded, status=result.status,
            costs=list(result.costs), gflops=state.gflops(_cost(result)), target=self.target_key,
            error=result.error, tuner=name, trial=state.trials + 1, timestamp=time.time(),
            script=state.space.script(recorded),
        )
        for writer in writers:
            writer.write(record)
        state.trials += 1
        state.history.append(state.gflops(_cost(result)))
        return result

    def measure_default(self, states: list[_TaskTuning], writers: list[RecordWriter]) -> None:
        """Measure the default schedule once for ``states`` (one task, perhaps several tuners)."""
        first = states[0]
        result = self.measure(first, None, "default", writers)
        if not result.ok:
            print(f"warning: the default schedule of {first.task.name} failed "
                  f"({result.status}: {result.error[:200]}); task not tuned", file=sys.stderr)
            return
        for state in states:
            if state is not first:
                state.trials, state.history = first.trials, list(first.history)
            state.reference = str(self._reference(first))
            state.default_cost = _cost(result)
            state.tuner.update([state.space.default()], [state.default_cost])

    def validate(self, state: _TaskTuning, top: int, writers: list[RecordWriter]) -> None:
        """Re-measure the ``top`` best configs and the default side by side; record each as
        ``final`` (costs: one median per round) and make the validated best the tuner's."""
        order = sorted(range(len(state.tuner.costs)), key=lambda i: state.tuner.costs[i])
        candidates: list[dict[str, int]] = []
        for i in order:
            if math.isfinite(state.tuner.costs[i]) and state.tuner.configs[i] not in candidates:
                candidates.append(state.tuner.configs[i])
            if len(candidates) == top:
                break
        if state.space.default() not in candidates:
            candidates.append(state.space.default())
        rounds: list[list[MeasureResult]] = [[] for _ in candidates]
        for _ in range(VALIDATION_ROUNDS):
            for i, config in enumerate(candidates):
                rounds[i].append(self.local.measure(MeasureInput(
                    payload=state.task.payload, task=state.task.describe(), config=config,
                    target=self.target_key, reference=state.reference)))
        best_cost, best_config = math.inf, None
        for config, results in zip(candidates, rounds):
            failed = next((r for r in results if not r.ok), None)
            costs = [_cost(r) for r in results]
            cost = statistics.median(costs) if failed is None else math.inf
            record = Record(
                task=state.task.describe(), config=config,
                status="ok" if failed is None else failed.status, costs=costs if failed is None else [],
                gflops=state.gflops(cost), target=self.target_key,
                error="" if failed is None else failed.error, tuner=VALIDATED, trial=state.trials,
                timestamp=time.time(), script=state.space.script(config),
            )
            for writer in writers:
                writer.write(record)
            if cost < best_cost:
                best_cost, best_config = cost, config
        if best_config is not None:
            state.tuner.best_cost, state.tuner.best_config = best_cost, dict(best_config)

    def _reference(self, state: _TaskTuning) -> Path:
        return self.local.scratch / f"{state.task.key}.npy"


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
) -> dict[str, TaskResult]:
    """Tune one task with several tuners *interleaved*, batch by batch, for ``trials`` each.

    Why not one :func:`tune` per tuner: on a shared machine the load drifts between runs
    minutes apart, and tuners measured at different times cannot be compared. Here every
    round measures one batch of each tuner with the same worker, so their curves share the
    conditions. ``records`` maps tuner name to its records file (the default schedule,
    measured once, opens each file).
    """
    for name in records:
        if name not in TUNERS:
            raise TunerNameError(f"unknown tuner {name!r}; choose one of {', '.join(TUNERS)}")
    target = Target.parse(target)
    options = RunnerOptions(**{**(runner or RunnerOptions()).__dict__, "timeout": float(timeout)})
    states = {name: _TaskTuning(task, target, name, seed) for name in records}
    writers = {name: RecordWriter(path) for name, path in records.items()}
    start = time.perf_counter()
    try:
        with LocalRunner(options) as local:
            session = _Session(local, canonical_target(target))
            session.measure_default(list(states.values()), list(writers.values()))
            while any(s.reference and s.trials < trials and s.tuner.has_next()
                      for s in states.values()):
                for name, state in states.items():
                    if state.reference is None or state.trials >= trials:
                        continue
                    batch = state.tuner.next_batch(min(batch_size, trials - state.trials))
                    costs = [_cost(session.measure(state, c, name, [writers[name]])) for c in batch]
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
                        session.validate(state, validate_top, [writers[name]])
    finally:
        for writer in writers.values():
            writer.close()
    return {
        name: TaskResult(task=s.task, default_gflops=s.gflops(s.default_cost),
                         best_gflops=s.gflops(s.tuner.best_cost), best_config=s.tuner.best_config,
                         trials=s.trials, history=s.history)
        for name, s in states.items()
    }


def _cost(result: MeasureResult) -> float:
    """Median seconds per run, as :attr:`Record.cost` ranks records; ``inf`` when failed."""
    return statistics.median(result.costs) if result.ok and result.costs else math.inf


def _search(state: _TaskTuning, share: int, run: Any, index: int, count: int, batch_size: int,
            early_stopping: int | None, tuner: str, progress: bool) -> None:
    bar = _Progress(index, count, state.trials + share, state.trials, progress)
    done = 0
    best = state.tuner.best_cost
    while done < share and state.tuner.has_next():
        batch = state.tuner.next_batch(min(batch_size, share - done))
        if not batch:
            break
        costs = []
        for config in batch:
            cost = _cost(run(state, config, tuner))
            costs.append(cost)
            done += 1
            state.since_best = 0 if cost < best else state.since_best + 1
            best = min(best, cost)
            bar.update(state.gflops(cost), state.gflops(best), state.trials)
        state.tuner.update(batch, costs)
        if early_stopping is not None and state.since_best >= early_stopping:
            break
    bar.close(state.gflops(state.tuner.best_cost), state.trials)


def _refuse_cuda_tuning() -> None:
    """Stop before any work: CUDA candidates must be timed on a GPU, and the measurement
    workers here time CPU code (timing a GPU schedule on the CPU would rank the wrong thing).
    Without a device the error says why there is none; with one, that measuring GPU
    candidates is not built yet (the GPU schedule space is in schedule/cuda_space.py)."""
    from ..schedule.cuda_space import require_cuda_device

    require_cuda_device()
    raise TuningError(
        "tuning a CUDA target is not supported yet: the measurement workers time CPU code; "
        "the GPU schedule space (schedule/cuda_space.py) has no GPU runner"
    )
