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

import hashlib
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from mlir import ir

from ..errors import OptionError, TaskExtractionError, TunerNameError, TuningError
from ..frontend.loader import load_module
from ..pipelines.compiled_module import CompiledModule, jit_module
from ..pipelines.cpu import cpu_pipeline, with_tuning_records
from ..pipelines.entry import entry_signature, find_entry
from ..pipelines.options import CompileOptions
from ..pipelines.target import Target
from ..runtime.peak import fma_peak_gflops
from ..runtime.rpc import Address
from ..runtime.run import random_inputs
from ..runtime.significance import Comparison, compare, paired_rounds
from ..schedule.records import (
    VALIDATED,
    Record,
    RecordWriter,
    canonical_target,
    load_records,
)
from ..schedule.space import ScheduleSpace, space_for
from ..schedule.task import Task, extract_tasks
from .in_model import confirm_in_model
from .measure import LocalRunner, MeasureInput, MeasureResult, RunnerOptions, weights_outgrow_cache
from .measure_ray import RayRunner
from .measure_remote import RemoteRunner
from .transfer import TransferModel, beside
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
    failures: int = 0
    default_seconds: float = math.inf  # inf: the default schedule did not run
    best_seconds: float = math.inf  # never above default_seconds: the default is a candidate
    skipped: bool = False  # the trials budget ran out before the task's default was measured
    slower_in_model: bool = False  # its best config lost to the default inside the model: not applied
    # The best config against the default from the validation rounds (paired, side by side);
    # None where nothing was validated (the default won the search, or validate_top=0).
    comparison: Comparison | None = None
    kept_default: bool = False  # the best config is the default schedule itself
    # The machine's float32 FMA peak for the target's threads (GFLOPS); None where unknown or
    # where the task is no float32 contraction (its fraction of the peak would mean nothing).
    peak_gflops: float | None = None

    def peak_column(self) -> str:
        """The best schedule's fraction of the FMA peak, or ``-``."""
        if self.peak_gflops is None or self.slower_in_model:
            fraction = (self.default_gflops / self.peak_gflops) if self.peak_gflops else None
        else:
            fraction = max(self.best_gflops, self.default_gflops) / self.peak_gflops
        return "-" if fraction is None else f"{fraction:.0%}"

    def speedup_column(self) -> tuple[str, str]:
        """The summary's speedup cell and the note after the row: a ratio only where the
        validation rounds showed one beyond noise (runtime/significance.py)."""
        if self.slower_in_model:
            return "default", "  (the tuned config was slower in the model: default kept)"
        if self.kept_default or not math.isfinite(self.best_seconds) \
                or self.best_seconds >= self.default_seconds:
            return "default", "  (kept the default)"
        if self.comparison is None:
            return "?", "  (not validated: one search measurement each; set validate_top > 0)"
        if not self.comparison.faster:
            return "none", f"  (no measurable change: {self.comparison.interval()})"
        return f"{self.comparison.ratio:.2f}x", f"  ({self.comparison.interval()})"


@dataclass
class TuningResult:
    """Per-task results and the records file to pass to ``tilecraft.compile``; the model's
    time with the default schedules and with the records, measured side by side (``None``
    when ``TuneOptions.end_to_end`` was off, or when the tuned build is the default build:
    ``unchanged``)."""

    records: Path
    tasks: list[TaskResult]
    default_seconds: float | None = None
    tuned_seconds: float | None = None
    end_to_end: Comparison | None = None
    unchanged: bool = False  # the tuned build lowered to the very IR of the default build

    def summary(self) -> str:
        """Per task: default and best time, speedup, trials and failed trials. A speedup is
        printed only where repeated paired measurements put it beyond noise; otherwise the
        row says why there is none (kept the default, no measurable change, not validated).
        A task whose default did not run says so, and one whose tuned config lost inside the
        model shows its default as its best."""
        lines = [f"{'task':<40} {'default ms':>10} {'best ms':>10} {'peak':>5} {'speedup':>8} "
                 f"{'trials':>6} {'failed':>6}"]
        for r in self.tasks:
            head = f"{r.task.name[:40]:<40}"
            tail = f"{r.trials:>6} {r.failures:>6}"
            if not math.isfinite(r.default_seconds):
                why = ("not measured: the trials budget ran out before this task" if r.skipped
                       else "no successful measurement of the default schedule")
                lines.append(f"{head} {why:>30} {tail}")
                continue
            best = r.default_seconds if r.slower_in_model else min(r.best_seconds, r.default_seconds)
            speedup, note = r.speedup_column()
            lines.append(f"{head} {r.default_seconds * 1e3:>10.4f} {best * 1e3:>10.4f} "
                         f"{r.peak_column():>5} {speedup:>8} {tail}{note}")
        if self.unchanged:
            lines.append("end to end: unchanged (all tasks kept the default: the tuned build is "
                         "the default build)")
        elif self.end_to_end is not None:
            lines.append(f"end to end: default {self.end_to_end.baseline_seconds * 1e3:.4f} ms, "
                         f"tuned {self.end_to_end.candidate_seconds * 1e3:.4f} ms: "
                         f"{self.end_to_end.describe()}")
        return "\n".join(lines)


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

    def __init__(self, task: Task, target: Target, tuner: str, seed: int,
                 prior: TransferModel | None = None, peak_gflops: float | None = None) -> None:
        self.task = task
        # The FMA peak bounds this task only where it is a float32 contraction.
        self.peak_gflops = peak_gflops if (task.kind in CONTRACTION_KINDS
                                           and task.element_type == "f32") else None
        self.space: ScheduleSpace = space_for(task, target)
        self.tuner: Tuner = make_tuner(tuner, self.space, seed, prior)
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
        """The fraction of its time a schedule at the FMA peak would save (1 where the peak
        does not bound the task: no knowledge is no reason to skip it)."""
        if self.peak_gflops is None:
            return 1.0
        return min(max(1.0 - self.gflops(self.best_cost) / self.peak_gflops, 0.0), 1.0)


def _resolve_tasks(model: Any, target: Target, tasks: Any, shape_dict: Any,
                   offload: Any = ()) -> tuple[list[Task], list[Task]]:
    """(every task of the model, the ones ``tasks`` chooses)."""
    found = extract_tasks(model, target, shape_dict=shape_dict, offload=offload)
    if tasks is None:
        return found, found
    wanted = [t.key if isinstance(t, Task) else str(t) for t in tasks]
    chosen = [t for t in found if t.key in wanted or t.name in wanted]
    if not chosen:
        raise TaskExtractionError(
            f"tasks={wanted} names none of the model's tasks: {[t.name for t in found]}")
    return found, chosen


@dataclass(frozen=True)
class TuneOptions:
    """How to search (the model and target come as :class:`CompileOptions`).

    Attributes:
      trials: measurements in total over all tasks (the default schedules included).
      trials_per_task: the minimum every task gets (after its default) before the task
        scheduler hands the rest to the tasks with the largest expected gain per trial.
      time_budget: stop searching after this many seconds (the trials budget still caps).
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
      end_to_end: after the search, profile the model with the default schedules and with the
        records, and record each tuned task's kernel time in both (``in_model`` records, which
        then decide: a config slower in the model than the default is not applied); then
        compile the model both ways and time them side by side (alternating calls): the
        speedup a user gets.
        Skipped with ``remote`` (it would time this machine, not the device).
      cost_model: a cross-task cost model saved by an earlier run (``<records>.costmodel.npz``,
        tuning/transfer.py) to warm-start the XGBoost tuners from, e.g. one of another
        model's run; by default the one beside ``tuning_records`` if that exists. Every run
        saves its own, trained on the earlier model's rows and its own measurements, beside
        its records.
      transfer: ``False``: no warm start, and no model saved.
      remote: ``"remote://HOST:PORT"`` (or ``"HOST:PORT"``): time candidates on a tilecraft
        server (tuning/measure_remote.py) instead of this machine; ``None``: locally.
      remote_key: that server's shared key (default ``$TILECRAFT_RPC_KEY``).
      ray: measure on a Ray cluster (tuning/measure_ray.py; ``pip install
        'tilecraft[distributed]'``): ``"local"`` starts one on this machine for the run,
        ``"ray://HOST:PORT"`` joins a running one. Each batch is spread over the cluster's
        nodes, one measurement at a time per node. Not with ``remote``.
      headroom: weigh each float32 contraction task by its gap to the machine's FMA peak
        (runtime/peak.py, measured once per machine) as well as by its share of the model's
        time, and say when every heavy task is already near the peak; ``False``: by time alone.
    """

    trials: int = 200
    trials_per_task: int = 0
    time_budget: float | None = None
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
    end_to_end: bool = True
    cost_model: "str | os.PathLike[str] | None" = None
    transfer: bool = True
    remote: str | None = None
    remote_key: str | None = field(default=None, repr=False)  # a secret: not in reprs or logs
    ray: str | None = None
    headroom: bool = True

    def __post_init__(self) -> None:
        if self.remote is not None:
            Address.parse(self.remote)  # RemoteAddressError now, not after the defaults
        if self.ray is not None:
            if self.remote is not None:
                raise TuningError("choose one runner: remote= or ray=, not both")
            if self.ray != "local" and not self.ray.startswith("ray://"):
                raise TuningError(f"ray must be 'local' or 'ray://HOST:PORT', got {self.ray!r}")
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
        for name in ("headroom", "end_to_end", "transfer", "progress"):
            if not isinstance(getattr(self, name), bool):
                raise TuningError(f"{name} must be True or False, got {getattr(self, name)!r}")
        per_task = self.trials_per_task
        if not isinstance(per_task, int) or isinstance(per_task, bool) or per_task < 0:
            raise TuningError(f"trials_per_task must be a non-negative integer, got {per_task!r}")
        budget = self.time_budget
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                                   or not budget > 0):
            raise TuningError(f"time_budget must be positive seconds (a number), got {budget!r}")


def tune(
    model: Any,
    options: "CompileOptions | TuneOptions | str | Target | None" = None,
    search: TuneOptions | None = None,
    **overrides: Any,
) -> TuningResult:
    """Tune every task of ``model``; returns the best schedule per task.

    Args:
      model: anything :func:`tilecraft.compile` accepts.
      options: the :class:`CompileOptions` the model will be compiled with (``target``,
        records are keyed by it; ``shape_dict``), or just a target; a :class:`TuneOptions`
        here stands for ``search`` (``tune(model, TuneOptions(trials=64))``).
      search: the :class:`TuneOptions` (trials, tuner, records file, ...).
      overrides: fields of either, by name: ``tune(m, trials=200, tuning_records="m.jsonl",
        target="llvm", shape_dict=...)``.
    """
    if isinstance(options, TuneOptions) and search is None:  # tune(model, TuneOptions(...))
        options, search = None, options
    if isinstance(options, (str, Target)):
        options = CompileOptions(target=options)
    elif options is not None and not isinstance(options, CompileOptions):
        raise OptionError(f"tune's options are CompileOptions, a target or TuneOptions, "
                          f"not {type(options).__name__}")
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
    found, chosen = _resolve_tasks(model, target, search.tasks, shape_dict, options.offload)
    prior = load_records(search.prior_records, target=target) if search.prior_records is not None else []
    records_path = Path(search.tuning_records)
    warm = _warm_start(search, records_path, chosen, target)
    peak = fma_peak_gflops(target.num_threads) if search.headroom else None
    states = [_TaskTuning(task, target, search.tuner, search.seed, warm, peak) for task in chosen]
    runner_options = RunnerOptions(**{**(search.runner or RunnerOptions()).__dict__, "timeout": float(search.timeout)})
    if runner_options.flush_cache is None:
        runner_options = replace(runner_options, flush_cache=weights_outgrow_cache(found))
    budget = search.trials
    start = time.monotonic()
    runner = _runner(search, runner_options)
    with runner as local, RecordWriter(records_path) as writer:
        session = _Session(local, target_key)

        def run(state: _TaskTuning, configs: list[dict[str, int]], name: str,
                on_result: Callable[[dict[str, int], MeasureResult], None]) -> None:
            session.measure_batch(state, configs, name, [writer], on_result)

        # 1. Defaults: the reference outputs and the weights of the task scheduler.
        _warn_unmeasured(states, budget)
        for state in states:
            if budget <= 0:
                state.skipped = True
                continue
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
        # 2. The task scheduler: every task's minimum, then the largest expected gain.
        tunable = [s for s in states if s.reference is not None]
        deadline = None if search.time_budget is None else start + search.time_budget
        scheduler = TaskScheduler(tunable, search, run, deadline)
        if search.progress:
            print(scheduler.plan(budget), file=sys.stderr)
        scheduler.run(budget)
        for state in tunable:
            if search.validate_top > 0:
                session.validate(state, search.validate_top, [writer])
        if search.progress:
            print(scheduler.allocation(), file=sys.stderr)
    if search.transfer:
        _save_transfer(states, warm, records_path, search.progress)
    end_to_end = search.end_to_end and search.remote is None
    slower: set[str] = set()
    if end_to_end:
        slower = {task.key for task in confirm_in_model(model, options, records_path, chosen)}
        if slower and search.progress:
            names = ", ".join(t.name for t in chosen if t.key in slower)
            print(f"in the model, the tuned config of {len(slower)} task(s) was slower than the "
                  f"default, which stays: {names}", file=sys.stderr)
    results = [
        TaskResult(task=s.task, default_gflops=s.gflops(s.default_cost),
                   best_gflops=s.gflops(s.best_cost), best_config=s.tuner.best_config,
                   trials=s.trials, history=s.history, failures=s.failures,
                   default_seconds=s.default_cost, best_seconds=s.best_cost, skipped=s.skipped,
                   slower_in_model=s.task.key in slower, comparison=s.comparison,
                   kept_default=s.tuner.best_config in (None, s.space.default()),
                   peak_gflops=s.peak_gflops)
        for s in states
    ]
    if search.report is not None:
        from .report import plot_report

        plot_report(load_records(records_path, target=target), search.report)
    if not end_to_end:
        return TuningResult(records_path, results)
    comparison = _end_to_end(model, options, records_path)
    if comparison is None:
        return TuningResult(records_path, results, unchanged=True)
    return TuningResult(records_path, results, comparison.baseline_seconds,
                        comparison.candidate_seconds, end_to_end=comparison)


def _warn_unmeasured(states: list[_TaskTuning], budget: int) -> None:
    """Say, before any measurement, which tasks ``trials`` leaves out: every task's default
    schedule is its first trial (heaviest task first), so a budget below the number of tasks
    never reaches the lightest ones (a user who asked for 16 trials of a 50-task model must
    learn that 34 tasks are not tuned at all, not find them missing afterwards)."""
    if budget >= len(states):
        return
    left = states[budget:]
    names = ", ".join(s.task.name for s in left[:3]) + (", ..." if len(left) > 3 else "")
    print(f"warning: trials={budget} covers the default schedules of {budget} of {len(states)} "
          f"tasks only (one trial each, heaviest first); {len(left)} task(s) are not tuned "
          f"({names}): give at least {len(states)} trials, more to search", file=sys.stderr)


def _runner(search: TuneOptions, options: RunnerOptions) -> Any:
    """Where candidates are measured: this machine, a tilecraft server, or a Ray cluster."""
    if search.remote is not None:
        return RemoteRunner(search.remote, options, key=search.remote_key)
    if search.ray is not None:
        return RayRunner(options, address=None if search.ray == "local" else search.ray)
    return LocalRunner(options)


def _warm_start(search: TuneOptions, records: Path, tasks: list[Task], target: Target) -> TransferModel | None:
    """The cross-task model the tuners start from: ``search.cost_model``, else the one beside
    ``records`` from an earlier run; ``None`` without one, or when its columns are not this
    version's (an older tilecraft's file: said, and ignored)."""
    if not search.transfer or not tasks:
        return None
    path = Path(search.cost_model) if search.cost_model is not None else beside(records)
    if search.cost_model is None and not path.is_file():
        return None
    if not path.is_file():
        raise TuningError(f"cost_model {path} does not exist")
    model = TransferModel.load(path)
    names = space_for(tasks[0], target).transfer_feature_names()
    if model.feature_names != names:
        print(f"note: {path} was saved with other features; tuning starts without it", file=sys.stderr)
        return None
    if not model.trained:
        model.fit()
    if search.progress:
        print(f"warm start: cost model {path} ({len(model.rows)} measurements of earlier runs)",
              file=sys.stderr)
    return model


def _save_transfer(states: list[_TaskTuning], warm: TransferModel | None, records: Path,
                   progress: bool) -> None:
    """Train the cross-task model on the warm start's rows and this run's measurements and
    save it beside ``records``."""
    if not states:
        return
    model = TransferModel(states[0].space.transfer_feature_names())
    if warm is not None:
        model.extend(warm)
    for state in states:
        model.add_task([state.space.transfer_features(c) for c in state.tuner.configs], state.tuner.costs)
    if not model.rows:
        return
    model.fit()
    model.save(beside(records))
    if progress:
        print(f"cost model: {len(model.rows)} measurements -> {beside(records)}", file=sys.stderr)


# Task kinds whose speed the float32 FMA peak bounds (the others are bound by memory).
CONTRACTION_KINDS = ("matmul", "conv2d", "depthwise_conv2d")
# A task at or above this fraction of the FMA peak has little left for a schedule to find.
HEADROOM_FLOOR = 0.85
# The share of the model's time that makes a task heavy for the no-headroom verdict.
HEAVY_SHARE = 0.05

# Paired rounds of the end-to-end comparison (runtime/significance.py: the bootstrap interval
# needs about ten to be narrower than a shared machine's drift).
END_TO_END_ROUNDS = 10


def _lowered(model: Any, pipeline: Any, options: CompileOptions) -> tuple[str, CompiledModule]:
    """``model`` lowered by ``pipeline`` and JIT-compiled, with a fingerprint of the lowered
    IR: two builds with one fingerprint are the same program, whatever their timings say."""
    context = ir.Context()
    module = load_module(model, context, shape_dict=options.shape_dict)
    with context, ir.Location.unknown():
        signature = entry_signature(find_entry(module, None))
        pipeline.run(module)
        fingerprint = hashlib.sha256(module.operation.get_asm(binary=True)).hexdigest()
    return fingerprint, jit_module(module, signature, pipeline, options.target,
                                   opt_level=options.opt_level)


def _end_to_end(model: Any, options: CompileOptions, records: Path) -> Comparison | None:
    """The model with the default schedules against the model with ``records``: ``None``
    when both lower to the same IR (nothing to time: any ratio would be noise), else their
    paired comparison over :data:`END_TO_END_ROUNDS` rounds on the same seeded inputs."""
    # The model as it will be compiled: offloaded ops are calls here too.
    pipeline = cpu_pipeline(options.target, opt_level=options.opt_level, offload=options.offload)
    default_ir, default = _lowered(model, pipeline, options)
    tuned_ir, tuned = _lowered(model, with_tuning_records(pipeline, records, options.target), options)
    if default_ir == tuned_ir:
        return None
    inputs = random_inputs(default)
    samples = paired_rounds({"default": lambda: default(**inputs), "tuned": lambda: tuned(**inputs)},
                            END_TO_END_ROUNDS, min_sample_s=0.05)
    return compare(samples["default"], samples["tuned"])


# Rounds of the validation phase: each round measures every finalist once. Five, so that a
# finalist is called faster than the default only when it won all five paired rounds by more
# than the noise floor (runtime/significance.py): at most a 1-in-32 chance for an equal one.
VALIDATION_ROUNDS = 5


class _Session:
    """A runner and the target's record key: measures candidates and records each one."""

    def __init__(self, local: LocalRunner, target_key: str) -> None:
        self.local = local
        self.target_key = target_key

    def _job(self, state: _TaskTuning, config: dict[str, int] | None) -> MeasureInput:
        return MeasureInput(
            payload=state.task.payload, task=state.task.describe(), config=config,
            target=self.target_key, reference=state.reference,
            save_output=str(self._reference(state)) if config is None else None,
        )

    def _record(self, state: _TaskTuning, config: dict[str, int] | None, name: str,
                result: MeasureResult, writers: list[RecordWriter]) -> None:
        """Append the record of one measurement (flushed at once) and count the trial."""
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

    def measure(self, state: _TaskTuning, config: dict[str, int] | None, name: str,
                writers: list[RecordWriter]) -> MeasureResult:
        """Measure ``config`` (``None``: the default schedule, whose output is saved as the
        task's reference) and append its record to every writer."""
        result = self.local.measure(self._job(state, config))
        self._record(state, config, name, result, writers)
        return result

    def measure_batch(self, state: _TaskTuning, configs: list[dict[str, int]], name: str,
                      writers: list[RecordWriter],
                      on_result: "Callable[[dict[str, int], MeasureResult], None]") -> None:
        """Measure ``configs``: side by side where the runner spreads a batch over several
        machines (the Ray runner), else one after the other. Each result is recorded and
        handed to ``on_result`` as soon as it arrives."""
        def arrived(index: int, result: MeasureResult) -> None:
            self._record(state, configs[index], name, result, writers)
            on_result(configs[index], result)

        jobs = [self._job(state, config) for config in configs]
        if hasattr(self.local, "measure_batch"):
            self.local.measure_batch(jobs, on_result=arrived)
            return
        for index, job in enumerate(jobs):
            arrived(index, self.local.measure(job))

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
        default = state.space.default()
        if default not in candidates:
            candidates.append(default)
        if len(candidates) == 1:
            return  # the default alone: nothing to choose (its search measurement stands)
        rounds: list[list[MeasureResult]] = [[] for _ in candidates]
        for _ in range(VALIDATION_ROUNDS):
            for i, config in enumerate(candidates):
                rounds[i].append(self.local.measure(MeasureInput(
                    payload=state.task.payload, task=state.task.describe(), config=config,
                    target=self.target_key, reference=state.reference)))
        best_cost, best_config = math.inf, None
        round_costs: dict[int, list[float]] = {}
        for index, (config, results) in enumerate(zip(candidates, rounds)):
            failed = next((r for r in results if not r.ok), None)
            costs = [_cost(r) for r in results]
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
            for writer in writers:
                writer.write(record)
            if config == default and math.isfinite(cost):
                # The baseline measured side by side with the finalists: the summary's
                # speedup compares like with like (the search's one default measurement
                # against a validated median read up to 1.2x for the default itself).
                state.default_cost = cost
            if cost < best_cost:
                best_cost, best_config = cost, config
        if best_config is not None:
            state.tuner.best_cost, state.tuner.best_config = best_cost, dict(best_config)
            default_index, best_index = candidates.index(default), candidates.index(best_config)
            if best_index != default_index and default_index in round_costs:
                state.comparison = compare(round_costs[default_index], round_costs[best_index])

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
            early_stopping: int | None, tuner: str, progress: bool,
            deadline: float | None = None) -> int:
    """Up to ``share`` trials of ``state``'s tuner in batches; returns how many ran."""
    bar = _Progress(index, count, state.trials + share, state.trials, progress)
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
            cost = _cost(result)
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


class TaskScheduler:
    """Hands trials to tasks, as Ansor's task scheduler does (gradient-based allocation).

    A task's weight is its share of the model's time: the default schedule's time times the
    number of times the model runs the task; its priority is that weight times its headroom,
    the fraction of its time a schedule at the machine's FMA peak would save (1 where the peak
    does not bound the task), so the budget goes where the gap to the peak times the share of
    the model is largest. Each task first gets ``trials_per_task``, highest priority first;
    then, one batch at a time, the task with the largest expected gain per trial gets the next
    batch: its weighted improvement over its last batch (the backward gradient) averaged with
    an optimistic forward one (its weighted time times its headroom over the trials it has
    had, which favours tasks that are heavy, far from the peak and little searched). Tasks whose search stopped (early stopping,
    space exhausted) drop out; the time budget ends the search between batches.
    """

    def __init__(self, states: list[_TaskTuning], search: TuneOptions, run: Any,
                 deadline: float | None) -> None:
        self.states = states
        self.search = search
        self.run_trial = run
        self.deadline = deadline
        self.planned_minimum = {id(s): 0 for s in states}
        self.weighted_history: dict[int, list[float]] = {id(s): [] for s in states}

    def weight(self, state: _TaskTuning) -> float:
        """The task's share of the model's time (default time x occurrences)."""
        return state.default_cost * state.task.count

    def priority(self, state: _TaskTuning) -> float:
        """Where trials pay: the share of the model's time a schedule could still save."""
        return self.weight(state) * state.headroom()

    def no_headroom(self) -> str | None:
        """A line saying the model has little left for tuning, when every task of at least
        :data:`HEAVY_SHARE` of its time is a float32 contraction above :data:`HEADROOM_FLOOR`
        of the FMA peak; ``None`` otherwise."""
        total = sum(self.weight(s) for s in self.states if math.isfinite(self.weight(s))) or 1.0
        heavy = [s for s in self.states if self.weight(s) / total >= HEAVY_SHARE]
        if not heavy or any(s.peak_gflops is None or s.headroom() > 1.0 - HEADROOM_FLOOR for s in heavy):
            return None
        low = min(1.0 - s.headroom() for s in heavy)
        return (f"no headroom: all {len(heavy)} heavy task(s) already run at {low:.0%} or more of "
                f"the FMA peak ({heavy[0].peak_gflops:.0f} GFLOPS): tuning can gain little here")

    def plan(self, budget: int) -> str:
        """The plan printed before the search: tasks, weights, each one's minimum."""
        total = sum(self.weight(s) for s in self.states) or 1.0
        minimum = self.search.trials_per_task
        lines = [] if self.no_headroom() is None else [str(self.no_headroom())]
        lines += [f"tuning plan: {len(self.states)} task(s), {budget} trial(s) after the defaults, "
                 f"at least {minimum} per task, then by expected gain"
                 + (f", {self.search.time_budget:g} s at most" if self.search.time_budget else "")]
        if minimum * len(self.states) > budget:
            lines.append(f"  the budget covers the minimum of the {budget // max(minimum, 1)} "
                         "heaviest task(s) only")
        for state, trials in self.planned(budget):
            peak = ("" if state.peak_gflops is None else
                    f"  {state.gflops(state.default_cost):6.1f} GFLOPS "
                    f"{1.0 - state.headroom():4.0%} of peak")
            lines.append(f"  {state.task.name[:48]:<48} weight {self.weight(state) / total:6.1%}"
                         f"{peak}  trials ~{trials}")
        if self.search.validate_top > 0:
            lines.append(f"  then validation: up to {self.search.validate_top + 1} configs x "
                         f"{VALIDATION_ROUNDS} rounds per task, not counted in trials"
                         + (" nor in the time budget" if self.search.time_budget else ""))
        return "\n".join(lines)

    def planned(self, budget: int) -> list[tuple[_TaskTuning, int]]:
        """The plan's trials per task, heaviest first: the minimum (while the budget lasts),
        then the rest of the budget in proportion to priority (weight x headroom), as the
        scheduler would hand it out if every task improved alike. An estimate: the scheduler
        then moves batches to the tasks that improve most, and stopped tasks give theirs back."""
        order = sorted(self.states, key=self.priority, reverse=True)
        total = sum(self.priority(s) for s in order) or 1.0
        minimum, left, shares = self.search.trials_per_task, budget, []
        for state in order:
            share = min(minimum, max(left, 0))
            shares.append(share)
            left -= share
        rest = max(left, 0)
        exact = [rest * self.priority(state) / total for state in order]
        extra = [int(x) for x in exact]
        # Largest remainders first, so the estimates add up to the budget.
        for i in sorted(range(len(order)), key=lambda i: extra[i] - exact[i])[:rest - sum(extra)]:
            extra[i] += 1
        return [(state, share + more) for state, share, more in zip(order, shares, extra)]

    def allocation(self) -> str:
        """Which tasks got how many trials (printed at the end)."""
        lines = ["trials per task:"]
        for state in sorted(self.states, key=lambda s: -s.trials):
            state_note = " (stopped early)" if state.stopped and state.tuner.has_next() else ""
            lines.append(f"  {state.task.name[:48]:<48} {state.trials:>5}{state_note}")
        return "\n".join(lines)

    def _expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _give(self, state: _TaskTuning, trials: int) -> int:
        index = self.states.index(state) + 1
        done = _search(state, trials, self.run_trial, index, len(self.states),
                       self.search.batch_size, self.search.early_stopping, self.search.tuner,
                       self.search.progress, self.deadline)
        self.weighted_history[id(state)].append(state.best_cost * state.task.count)
        return done

    def gradient(self, state: _TaskTuning) -> float:
        """Expected reduction of the model's time per trial given to ``state``."""
        history = self.weighted_history[id(state)]
        now = state.best_cost * state.task.count
        if not math.isfinite(now):
            return 0.0
        before = history[-2] if len(history) >= 2 else self.weight(state)
        backward = max(before - now, 0.0) / max(self.search.batch_size, 1)
        forward = now * state.headroom() / max(state.trials, 1)
        return 0.5 * backward + 0.5 * forward

    def run(self, budget: int) -> None:
        for state in sorted(self.states, key=self.priority, reverse=True):
            share = min(self.search.trials_per_task, budget)
            if share <= 0 or self._expired():
                break
            budget -= self._give(state, share)
        while budget > 0 and not self._expired():
            live = [s for s in self.states if not s.stopped]
            if not live:
                break
            state = max(live, key=self.gradient)
            given = self._give(state, min(self.search.batch_size, budget))
            if given == 0:  # nothing measured: asking again would loop forever
                state.stopped = True
            budget -= given


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
