"""``tilecraft.tune``: tune every task of a model and append the measurements to records.

This module only wires the roles of tuning/roles.py: :func:`tune` resolves the options and
the model's tasks and picks the roles (the target's space generator, the runner the options
name, the records database, the gradient task scheduler); :func:`search_tasks` runs them:

1. measure the default schedule (the default point of the task's space): its output is the
   reference every candidate is checked against, its time the baseline;
2. the task scheduler splits the remaining trials between tasks by expected gain;
3. each task's search strategy proposes batches, the runner measures them, each result is
   committed to the database at once; the strategy learns from it; a task stops early after
   ``early_stopping`` trials without improvement;
4. validation re-measures each task's finalists side by side.

Then :func:`tune` confirms the tuned configs inside the model and compares the tuned build
with the default one.

Progress is printed as TVM prints it, with a progress bar:
``[Task  1/ 2] Current/Best:   31.97/  59.33 GFLOPS | Progress: (40/60) | 127.85 s``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import warnings
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from mlir import ir

from ..errors import OptionError, TaskExtractionError, TuningError
from ..frontend.loader import load_module
from ..pipelines.jit.compiled_module import CompiledModule, jit_module
from ..pipelines.cpu import cpu_pipeline
from ..pipelines.jit.entry import entry_signature, find_entry
from ..compiler.options import CompileOptions
from ..pipelines.target import Target
from ..pipelines.target_registry import target_plugin
from ..runtime.peak import Roofline, roofline
from ..runtime.run import random_inputs
from ..runtime.significance import Comparison, compare, paired_rounds
from ..runtime.timing import get_clock
from ..schedule.record_plan import with_records
from ..schedule.records import Record, best_records, canonical_target, is_remeasurement, load_records
from ..schedule.task import Task, extract_tasks
from .compare_tuners import compare_tuners
from .database import JsonLinesDatabase
from .in_model import confirm_in_model
from .kernel_tasks import extract_kernel_tasks, reduced_build
from .measure import LocalRunner, MeasureResult, RunnerOptions, cache_eviction, measurement_clock
from .measure_ray import RayRunner
from .measure_remote import RemoteRunner
from .options import TuneOptions
from .results import TaskResult, TuningResult
from .roles import Database, Runner, SpaceGenerator, TaskScheduler
from .session import VALIDATION_ROUNDS, MeasureSession, TaskState
from .space_generators import space_generator_for
from .task_scheduler import GradientTaskScheduler
from .transfer import TransferModel, beside

__all__ = ["TaskResult", "TuneOptions", "TuningResult", "VALIDATION_ROUNDS", "compare_tuners",
           "model_tasks", "runner_for", "search_tasks", "tune"]


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
        raise OptionError(f"unknown tune option(s) {unknown}; options: {sorted(compile_fields | search_fields)}")
    search = replace(search or TuneOptions(), **{k: v for k, v in overrides.items() if k in search_fields})
    target = options.target
    target_plugin(target.kind).check_tunable(target)
    if search.remote is None and search.ray is None and not target.is_host:
        # Every candidate would fail to run ("which this machine cannot run") and the run
        # would end with no task tuned and exit status 0.
        raise TuningError(f"target '{target}' does not run on this machine, and tuning runs every candidate: "
                          f"measure on a machine that runs it (remote='HOST:PORT' with `tilecraft serve` there, "
                          f"--runner remote://HOST:PORT; or a Ray cluster of such machines)")
    target_key = canonical_target(target)
    reduced = options.precision != "f32"
    if reduced and search.space != "hand":
        raise TuningError(f"precision={options.precision!r} tunes the dot-product kernels in their own space "
                          f"(schedule/space.py's KernelSpace); space={search.space!r} is for f32 ops: leave it 'hand'")
    if reduced:  # the cross-task model's features are the f32 spaces' (tuning/transfer.py)
        search = replace(search, transfer=False)
    found, chosen = _resolve_tasks(model, options, search.tasks)
    records_path = Path(search.tuning_records)
    _check_writable(records_path)
    prior = _prior_records(search, records_path, target, chosen)
    generator = space_generator_for(target, search.space)
    warm = _warm_start(search, records_path, chosen, generator)
    roof = _roofline(target) if search.headroom else None
    runner_options = RunnerOptions(**{**(search.runner or RunnerOptions()).__dict__, "timeout": float(search.timeout)})
    if runner_options.flush_cache is None:
        runner_options = replace(runner_options, flush_cache=cache_eviction(found))
    runner_options = replace(runner_options, clock=measurement_clock(runner_options.clock, target))
    with runner_for(search, runner_options) as runner, JsonLinesDatabase(records_path) as database:
        states = search_tasks(chosen, search, target_key=target_key, space_generator=generator,
                              runner=runner, database=database, prior=prior, warm=warm,
                              peak_gflops=roof.peak_gflops if roof is not None else None,
                              roofline=roof, threads=target.num_threads)
    if search.transfer:
        _save_transfer(states, warm, records_path, search.progress)
    end_to_end = search.end_to_end and search.remote is None
    slower: set[str] = set()
    if end_to_end and not reduced:  # (a kernel task is measured as the kernel alone, its in-model time not joined)
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
                   peak_gflops=s.peak_gflops, bound_gflops=s.bound_gflops)
        for s in states
    ]
    if search.report is not None:
        from .report import plot_report

        plot_report(JsonLinesDatabase(records_path).records(target), search.report)
    if not end_to_end:
        return TuningResult(records_path, results)
    comparison = None
    if not _only_defaults(records_path, target, found, generator):
        comparison = _end_to_end(model, options, records_path, runner_options.clock)
    if comparison is None:
        return TuningResult(records_path, results, unchanged=True)
    return TuningResult(records_path, results, comparison.baseline_seconds,
                        comparison.candidate_seconds, end_to_end=comparison)


def search_tasks(tasks: Sequence[Task], search: TuneOptions, *, target_key: str,
                 space_generator: SpaceGenerator, runner: Runner, database: Database,
                 prior: Sequence[Record] = (), warm: TransferModel | None = None,
                 peak_gflops: float | None = None,
                 scheduler: "Callable[..., TaskScheduler]" = GradientTaskScheduler,
                 threads: int | None = None, roofline: Roofline | None = None) -> list[TaskState]:
    """The search of :func:`tune`, wired from its roles; returns each task's final state.

    1. Defaults: each task's default point is measured first (heaviest task first): its
       output is the reference every candidate is checked against, its time the baseline;
       ``prior`` records of the task are fed to its strategy (a resumed run).
    2. The task scheduler hands the remaining trials out; each candidate's record is
       committed to ``database`` as it arrives.
    3. Validation: each task's best configs and its default re-measured side by side.
    """
    states = [TaskState(task, space_generator.generate(task), search.tuner, search.seed, warm,
                        peak_gflops, roofline) for task in tasks]
    budget = search.trials
    start = time.monotonic()
    session = MeasureSession(runner, target_key, threads)

    def run(state: TaskState, configs: list[dict[str, int]], name: str,
            on_result: Callable[[dict[str, int], MeasureResult], None]) -> None:
        session.measure_batch(state, configs, name, [database], on_result)

    _warn_unmeasured(states, budget)
    for state in states:
        if budget <= 0:
            state.skipped = True
            continue
        session.measure_default([state], [database])
        budget -= 1
        _resume(state, prior)
    tunable = [s for s in states if s.reference is not None]
    deadline = None if search.time_budget is None else start + search.time_budget
    chosen = scheduler(tunable, search, run, deadline)
    if search.progress:
        print(chosen.plan(budget), file=sys.stderr)
    chosen.run(budget)
    if search.validate_top > 0:
        for state in tunable:
            session.validate(state, search.validate_top, [database])
    if search.progress:
        print(chosen.allocation(), file=sys.stderr)
    return states


def _prior_records(search: TuneOptions, records: Path, target: Target, tasks: Sequence[Task]) -> list[Record]:
    """The search measurements an earlier run left: ``prior_records`` and the records file
    itself. Why the records file: a killed ``tilecraft tune`` run again with the same command
    must continue its search, not measure its candidates a second time (with the same seed
    the strategy proposes the very same configs). Re-measurements (validation, in-model) are
    no trials; every task's default is measured again (it is the run's reference output)."""
    sources = [Path(search.prior_records)] if search.prior_records is not None else []
    if records.is_file() and all(records.resolve() != s.resolve() for s in sources):
        sources.append(records)
    keys = {task.key for task in tasks}
    prior: list[Record] = []
    seen: set[tuple[str, str]] = set()  # two runs that wrote one file may share configs
    for source in sources:
        for record in JsonLinesDatabase(source).records(target):
            config = json.dumps(record.config, sort_keys=True)
            if record.key in keys and record.tuner != "default" and not is_remeasurement(record) \
                    and (record.key, config) not in seen:
                seen.add((record.key, config))
                prior.append(record)
    if prior and search.progress:
        named = len({r.key for r in prior})
        print(f"resuming: {len(prior)} measurement(s) of {named} task(s) from "
              f"{', '.join(str(s) for s in sources)} are not measured again", file=sys.stderr)
    return prior


def _check_writable(records: Path) -> None:
    """Refuse a records path that cannot be appended to before any work: a run must not
    measure for an hour and then fail at its first record. Its folder is made now; the file
    itself on the first commit, so a run that measures nothing leaves none."""
    if records.is_dir():
        raise TuningError(f"tuning_records {records} is a directory, not a file")
    if records.exists():
        if not os.access(records, os.W_OK):
            raise TuningError(f"tuning_records {records}: no permission to write to it")
        return
    folder = records.absolute().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise TuningError(f"tuning_records {records}: cannot make its folder ({error.strerror}: "
                          f"{error.filename})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise TuningError(f"tuning_records {records}: no permission to create files in {folder}")


def _resume(state: TaskState, prior: Sequence[Record]) -> None:
    """Feed ``state``'s strategy the search records of an earlier run: those configs are not
    measured again and count toward the task's trials (a config the space rejects is skipped)."""
    for record in prior:
        if record.key == state.task.key and record.tuner != "default" and not is_remeasurement(record):
            try:
                config = state.space.validate(record.config)
            except TuningError:
                continue
            state.tuner.update([config], [record.cost])
            state.trials += 1
            state.history.append(state.gflops(record.cost))


def _warn_unmeasured(states: list[TaskState], budget: int) -> None:
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


def _roofline(target: Target) -> Roofline | None:
    """The machine's roofline for ``target``'s threads and caches (runtime/peak.py); ``None``
    where it cannot be measured (no C compiler), or for a target that does not run here (its
    caches are a named CPU's, its bandwidth not this machine's)."""
    if not target.is_host:
        return None
    caches = target.caches
    return roofline(target.num_threads, caches.l2, caches.l3)


def runner_for(search: TuneOptions, options: RunnerOptions) -> Runner:
    """Where candidates are measured: this machine, a tilecraft server, or a Ray cluster."""
    if search.remote is not None:
        return RemoteRunner(search.remote, options, key=search.remote_key)
    if search.ray is not None:
        return RayRunner(options, address=None if search.ray == "local" else search.ray)
    return LocalRunner(options)


def _warm_start(search: TuneOptions, records: Path, tasks: list[Task],
                generator: SpaceGenerator) -> TransferModel | None:
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
    names = generator.generate(tasks[0]).transfer_feature_names()
    if model.feature_names != names:
        print(f"note: {path} was saved with other features; tuning starts without it", file=sys.stderr)
        return None
    if not model.trained:
        model.fit()
    if search.progress:
        print(f"warm start: cost model {path} ({len(model.rows)} measurements of earlier runs)",
              file=sys.stderr)
    return model


def _save_transfer(states: list[TaskState], warm: TransferModel | None, records: Path,
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


def _only_defaults(records: Path, target: Target, tasks: Sequence[Task], generator: SpaceGenerator) -> bool:
    """Whether the best record ``compile`` would apply to each of ``tasks`` is its default
    config (or it has none): then the tuned build is the default build (record_plan.py plans
    a default config as the default schedule), and timing the two would report noise. Why
    not only the lowered IR's fingerprint: a process that has extracted tasks lowers the same
    model to IR whose constants come in another order from one lowering to the next (YOLO:
    two default lowerings differed), so equal builds were timed and reported as "default
    16.0 ms, tuned 16.5 ms"."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # corrupt lines were reported when the run read the file
        best = best_records(load_records(records, target=target))
    return all(task.key not in best or best[task.key].config == generator.generate(task).default()
               for task in tasks)


def _end_to_end(model: Any, options: CompileOptions, records: Path, clock: str = "wall") -> Comparison | None:
    """The model with the default schedules against the model with ``records``: ``None``
    when both lower to the same IR (nothing to time: any ratio would be noise), else their
    paired comparison over :data:`END_TO_END_ROUNDS` rounds on the same seeded inputs, on
    ``clock`` (runtime/timing.py's names)."""
    # The model as it will be compiled: offloaded ops are calls here too; a bf16 or int8
    # build's model and pipeline (without its f32 twin and accuracy report).
    if options.precision != "f32":
        model, pipeline = reduced_build(model, options)
    else:
        pipeline = cpu_pipeline(options.target, opt_level=options.opt_level, offload=options.offload)
    default_ir, default = _lowered(model, pipeline, options)
    tuned_ir, tuned = _lowered(model, with_records(pipeline, records, options.target), options)
    if default_ir == tuned_ir:
        return None
    inputs = random_inputs(default)
    samples = paired_rounds({"default": lambda: default(**inputs), "tuned": lambda: tuned(**inputs)},
                            END_TO_END_ROUNDS, min_sample_s=0.05, clock=get_clock(clock))
    return compare(samples["default"], samples["tuned"])


def model_tasks(model: Any, options: CompileOptions) -> list[Task]:
    """The tasks :func:`tune` finds in ``model`` compiled with ``options``, in its order:
    its ops' tasks (offloaded ops are none), or at a reduced precision its dot-product
    kernels' (kernel_tasks.py). ``tilecraft tune --tasks list`` prints these, so the
    indexes a user picks are the tasks tuned."""
    if options.precision != "f32":
        return extract_kernel_tasks(model, options)
    return extract_tasks(model, options.target, shape_dict=options.shape_dict, offload=options.offload)


def _resolve_tasks(model: Any, options: CompileOptions, tasks: Any) -> tuple[list[Task], list[Task]]:
    """(every task of the model compiled with ``options``, the ones ``tasks`` chooses)."""
    found = model_tasks(model, options)
    if tasks is None:
        return found, found
    wanted = [t.key if isinstance(t, Task) else str(t) for t in tasks]
    chosen = [t for t in found if t.key in wanted or t.name in wanted]
    if not chosen:
        raise TaskExtractionError(
            f"tasks={wanted} names none of the model's tasks: {[t.name for t in found]}")
    return found, chosen
