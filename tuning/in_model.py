"""The tuner's time of each task next to the same kernel's time inside the model.

Why: a candidate is timed alone (its task's payload, run again and again), the model runs
each kernel once, after another kernel has used the caches; if the two disagree, the tuner
optimises the wrong thing. ``in_model_times`` compiles the model with the records and the
profiling variant (``tilecraft run --profile``'s), runs it, and joins its kernels with the
tasks: a task knows the names its kernels may carry in a profile (``Task.kernels``: per
occurrence, the names of its ops), and an occurrence's time is the sum of the kernels so
named (a kernel of another op named after one of them, such as a layout conversion at the
model's input, is counted with it: the join is by name; an anchor's name belongs to its own
task first). Each row gives the tuner's best time (the validated median where there is one),
the kernel's median time per execution in the model, and their ratio.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from ..compiler.options import CompileOptions
from ..runtime.package import load
from ..runtime.run import random_inputs
from ..runtime.timing import default_clock
from ..schedule.records import IN_MODEL, RecordWriter, best_records, canonical_target, load_records
from ..schedule.task import Task
from ..compiler.compile import compile as compile_model
from .measure import MeasureInput, RunnerOptions, build_candidate, cache_eviction, producer_feed, time_calls
from .measure import random_inputs as task_inputs


@dataclass(frozen=True)
class KernelAgreement:
    """One task: the tuner's seconds and the model's (per execution; ``None``: no kernel of
    the profile joined the task)."""

    task: Task
    tuner_seconds: float
    model_seconds: float | None

    @property
    def ratio(self) -> float | None:
        """In-model time / tuner time (1.0: they agree)."""
        if self.model_seconds is None or not self.tuner_seconds:
            return None
        return self.model_seconds / self.tuner_seconds


def profile_kernels(model: Any, options: CompileOptions, records: "str | os.PathLike[str] | None",
                    runs: int = 5) -> dict[str, float]:
    """Kernel name -> median seconds per model run (kernels of one name summed), from the
    profiling variant of ``model`` compiled with ``records``."""
    return profile_side_by_side(model, options, [records], runs)[0]


def profile_side_by_side(model: Any, options: CompileOptions,
                         records: "Sequence[str | os.PathLike[str] | None]",
                         runs: int = 5) -> list[dict[str, float]]:
    """Per entry of ``records`` (``None``: the default schedules), kernel name -> median
    seconds per model run, the variants' runs alternating. Why alternating: on a shared
    machine, two profiles taken one after the other differed by far more than the effects
    tuned for, for the same package (docs/performance.md); round by round, drift hits every
    variant alike."""
    with tempfile.TemporaryDirectory() as scratch:
        packages = [_profiling_package(model, options, variant, Path(scratch) / f"model{index}.tar")
                    for index, variant in enumerate(records)]
        inputs = random_inputs(packages[0])
        for package in packages:
            package.profile(**inputs)  # first run: page faults, lazy binding
        samples: list[dict[str, list[float]]] = [{} for _ in packages]
        for _ in range(runs):
            for package, variant_samples in zip(packages, samples):
                _add_kernel_totals(package, inputs, variant_samples)
    return [{name: statistics.median(values) for name, values in variant.items()} for variant in samples]


def _profiling_package(model: Any, options: CompileOptions,
                       records: "str | os.PathLike[str] | None", path: Path) -> Any:
    """``model`` compiled with ``records`` into the profiling package at ``path``, loaded."""
    compile_model(model, options, tuning_records=records, package_path=path, profile=True, keep_ir=False)
    package = load(path)
    package.use_profile_clock(default_clock(options.target.num_threads))
    return package


def _add_kernel_totals(package: Any, inputs: dict[str, Any], samples: dict[str, list[float]]) -> None:
    """Profile one run of ``package``; append each kernel name's summed seconds to ``samples``."""
    totals: dict[str, float] = {}
    for kernel in package.profile(**inputs)[1]:
        totals[kernel.name] = totals.get(kernel.name, 0.0) + kernel.seconds
    for name, seconds in totals.items():
        samples.setdefault(name, []).append(seconds)


def model_times(tasks: Sequence[Task], kernels: dict[str, float]) -> dict[str, float | None]:
    """Per task key, its kernels' mean time per execution in ``kernels`` (a profile), or
    ``None`` when no kernel of the profile carries one of its names. An occurrence inside
    loops (a grouped convolution's per-group kernel, ``Task.runs``) executes several times
    per model run, and the profile sums them: its time is divided by its runs, so that it
    compares with the tuner's time of one execution."""
    chosen = sorted(tasks, key=lambda t: -t.flops * t.executions)
    # An occurrence's anchor names its kernel first: no other task takes it, even one that
    # fused an op of the same name (a layout transpose carries its source op's name).
    anchors = Counter(names[0] for task in chosen for names in task.kernels if names)
    claimed = set(anchors)
    result: dict[str, float | None] = {}
    for task in chosen:
        times = []
        for names, runs in zip(task.kernels, task.occurrence_runs):
            # Every kernel named after one of the occurrence's ops: a group whose pad or
            # packing copy became a loop nest of its own is still one task.
            mine = [n for n in names[1:] if n in kernels and n not in claimed]
            claimed.update(mine)
            # An anchor name two tasks share (a convolution and the layout transpose of its
            # input, which carries the convolution's name) belongs to the task that has no
            # other kernel: the convolution fused with its activation is named after the
            # activation, and adding the transpose to it made SqueezeNet's first squeeze
            # convolution look far slower in the model than alone (docs/tuning.md).
            if names and names[0] in kernels and (anchors[names[0]] == 1 or not mine):
                mine.append(names[0])
            if mine:
                times.append(sum(kernels[n] for n in mine) / runs)
        result[task.key] = statistics.mean(times) if times else None
    return result


def join(tasks: Sequence[Task], kernels: dict[str, float],
         records: "str | os.PathLike[str]", target: Any) -> list[KernelAgreement]:
    """Each task's tuner time beside its kernels' mean time in ``kernels`` (a profile). The
    tuner's time is the applied config's as measured alone (search or validation), never an
    ``IN_MODEL`` record's, which is itself a time in the model."""
    loaded = load_records(records, target=target)
    applied = best_records(loaded)
    alone = best_records([r for r in loaded if r.tuner != IN_MODEL
                          and r.key in applied and r.config == applied[r.key].config])
    chosen = sorted((t for t in tasks if t.key in alone), key=lambda t: -t.flops * t.executions)
    times = model_times(tasks, kernels)
    return [KernelAgreement(task, alone[task.key].cost, times[task.key]) for task in chosen]


def confirm_in_model(model: Any, options: CompileOptions, records: "str | os.PathLike[str]",
                     tasks: Sequence[Task], runs: int = 9) -> list[Task]:
    """Time each task's best config and its default as kernels of the model, and record both.

    Why: a config can win alone and lose in the model (BERT's feed-forward matmul and GELU
    did; docs/performance.md). The model is profiled with the default
    schedules and with ``records``, alternating runs; for every task whose best record is not its default and
    whose kernels both profiles find, both configs get an ``IN_MODEL`` record with that
    time, appended to ``records``. ``best_records`` then lets those alone decide, so the
    config the model ran faster is applied. Returns the tasks whose tuned config was slower
    in the model (their default stays).
    """
    target = options.target
    loaded = load_records(records, target=target)
    best = best_records(loaded)
    defaults = {r.key: r for r in loaded if r.tuner == "default" and r.ok}
    candidates = [t for t in tasks if t.key in best and t.key in defaults
                  and best[t.key].config != defaults[t.key].config]
    if not candidates:
        return []
    default_kernels, tuned_kernels = profile_side_by_side(model, options, [None, records], runs)
    default_times, tuned_times = model_times(tasks, default_kernels), model_times(tasks, tuned_kernels)
    slower = []
    with RecordWriter(records) as writer:
        for task in candidates:
            default_seconds, tuned_seconds = default_times[task.key], tuned_times[task.key]
            if default_seconds is None or tuned_seconds is None:
                continue
            now = time.time()
            # The tuned config first: on a tie it stays the best (best_records keeps the first).
            for record, seconds in ((best[task.key], tuned_seconds), (defaults[task.key], default_seconds)):
                writer.write(replace(record, tuner=IN_MODEL, costs=[seconds], timestamp=now,
                                     gflops=task.flops / seconds / 1e9 if seconds else 0.0))
            if tuned_seconds > default_seconds:
                slower.append(task)
    return slower


def in_model_times(model: Any, options: CompileOptions, records: "str | os.PathLike[str]",
                   tasks: Sequence[Task], runs: int = 5) -> list[KernelAgreement]:
    """Profile ``model`` compiled with ``records`` and join its kernels with ``tasks``."""
    return join(tasks, profile_kernels(model, options, records, runs), records, options.target)


def side_by_side_times(model: Any, options: CompileOptions, records: "str | os.PathLike[str] | None",
                       tasks: Sequence[Task], top: int = 5, rounds: int = 7,
                       flush_cache: bool | int | None = None) -> list[KernelAgreement]:
    """The ``top`` heaviest tuned tasks timed as the tuner times them and inside the model,
    in alternating rounds: each round runs the model twice, profiling the second run
    (compiled with ``records``), and then measures each task's applied config once, exactly
    as a tuning worker does (``measure.py``: the one-record build writing its result where
    the model does, ``Task.placement``, kernel timers, the same cache flush, the same clock:
    one thread's CPU time at one thread, else wall time). Why
    the untimed run: the model column is the model run after itself, as a benchmark or a
    server runs it, not after the tuner's flush, which would leave the model's weights as
    cold as the flush leaves the candidate's and make the two agree by construction.

    Why not :func:`in_model_times`: it sets the model's time today against the tuner's time
    from the search, minutes or hours earlier, and this machine's speed moved by tens of
    percent between minutes (the same ResNet-50 records gave ratios of 1.0-1.3 in one
    check and 1.4-1.55 forty minutes later), so the ratio measured drift as much as the
    measurement. Side by side, drift hits both columns alike. ``flush_cache`` as in
    :class:`~tilecraft.tuning.measure.RunnerOptions`; ``None``: decided as ``tune`` does
    (:func:`~tilecraft.tuning.measure.cache_eviction`). ``records`` ``None``: the
    default schedules, the model compiled without records and each task's default measured
    as the search's first trial measures it (whether the tuner's clock agrees with the
    model's needs no tuning run)."""
    applied = best_records(load_records(records, target=options.target)) if records is not None else None
    chosen = sorted((t for t in tasks if applied is None or t.key in applied),
                    key=lambda t: -t.flops * t.executions)[:top]
    flush = cache_eviction(tasks) if flush_cache is None else flush_cache
    runner = RunnerOptions(repeat=1, flush_cache=flush, clock=default_clock(options.target.num_threads))
    target_key = canonical_target(options.target)
    with tempfile.TemporaryDirectory() as scratch:
        package = _profiling_package(model, options, records, Path(scratch) / "model.tar")
        inputs = random_inputs(package)
        candidates = []
        for task in chosen:
            job = MeasureInput(payload=task.payload, task=task.describe(),
                               config=applied[task.key].config if applied is not None else None,
                               target=target_key, threads=options.target.num_threads,
                               placement=task.placement, producers=task.producer_cycle)
            module = build_candidate(job, Path(scratch), kernel_time=True)
            arguments = task_inputs(module.signature)
            candidates.append((module, arguments, producer_feed(job, arguments)))
        package.profile(**inputs)  # first run: page faults, lazy binding
        model_samples: dict[str, list[float]] = {}
        tuner: list[list[float]] = [[] for _ in chosen]
        for _ in range(rounds):
            package.profile(**inputs)  # the model's caches as its previous run left them
            _add_kernel_totals(package, inputs, model_samples)
            for samples, (module, arguments, feed) in zip(tuner, candidates):
                samples.append(time_calls(lambda m=module, a=arguments: m(*a), runner, arguments,
                                           options.target.num_threads, feed)[0])
    times = model_times(tasks, {name: statistics.median(values) for name, values in model_samples.items()})
    return [KernelAgreement(task, statistics.median(samples), times[task.key])
            for task, samples in zip(chosen, tuner)]


def agreement_table(rows: Sequence[KernelAgreement]) -> str:
    """The rows as text: tuner ms, model ms, ratio, per task (heaviest first)."""
    lines = [f"{'task':<48} {'tuner ms':>9} {'model ms':>9} {'model/tuner':>11}"]
    for row in rows:
        model = f"{row.model_seconds * 1e3:9.4f}" if row.model_seconds is not None else f"{'-':>9}"
        ratio = f"{row.ratio:11.2f}" if row.ratio is not None else f"{'(no kernel)':>11}"
        lines.append(f"{row.task.name[:48]:<48} {row.tuner_seconds * 1e3:9.4f} {model} {ratio}")
    return "\n".join(lines)
