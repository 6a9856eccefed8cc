"""``tilecraft.auto_scheduler``: TVM's auto-scheduler workflow on a user's own TE compute.

    from tilecraft import auto_scheduler
    from tilecraft.schedule import te

    @auto_scheduler.register_workload
    def matmul_add(N, L, M, dtype):
        A = te.placeholder((N, L), name="A", dtype=dtype)
        B = te.placeholder((L, M), name="B", dtype=dtype)
        C = te.placeholder((N, M), name="C", dtype=dtype)
        k = te.reduce_axis(L, name="k")
        matmul = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")
        out = te.compute((N, M), lambda i, j: matmul[i, j] + C[i, j], name="out")
        return [A, B, C, out]

    task = auto_scheduler.SearchTask(func=matmul_add, args=(128, 128, 128, "float32"), target="llvm")
    task.tune(auto_scheduler.TuningOptions(num_measure_trials=64,
                                           measure_callbacks=[auto_scheduler.RecordToFile("mm.json")]))
    func = task.apply_best("mm.json")      # a CompiledModule: func(a, b, c)
    task.print_best("mm.json")             # the best schedule as a transform script

Why a thin layer: a TE compute becomes the same linalg function a model does
(:func:`~tilecraft.schedule.te.create_func`), so its ops are tasks with the same tuners,
records, validation and honest reports as a model's (``tilecraft.tune``). Their spaces are
``TuneOptions(space="generated")``'s: derived from each op's loops (schedule/sketch.py) as
Ansor's sketches are, except for matmuls and convolutions, which keep their hand spaces. The
difference from TVM: ``apply_best`` returns the compiled function (TVM returns a schedule and
arguments for ``tvm.build``), since the schedule here is a transform script the compiler
applies from the records.

A windowed compute may have more than one form (:attr:`SearchTask.forms`), as Ansor keeps
several sketches of one compute: its window taps, one contraction each, and, where it is a
grouped channels-last convolution, a loop over groups of the named convolution whose register
tile keeps the window loops inside. ``tune`` shares the trials among the forms and
``apply_best`` compiles the form that ran fastest with its records, timed side by side.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from mlir import ir, passmanager

from ..compiler.compile import compile as compile_model
from ..errors import TuningError
from ..pipelines.jit.compiled_module import CompiledModule
from ..compiler.options import CompileOptions
from ..pipelines.target import Target
from ..pipelines.target_registry import target_plugin
from ..schedule.records import best_records, load_records
from ..schedule.task import Task, extract_tasks
from ..schedule.te import Tensor, create_func
from ..schedule.te.window_conv import rewrite_window_convs, window_conv_refusals
from ..schedule.te.window_taps import split_window_taps
from ..runtime.significance import paired_rounds
from ..runtime.timing import default_clock, get_clock
from .options import TuneOptions
from .results import TuningResult
from .tune import tune

# Upstream's pass that turns generic ops matching a named op (convolutions, matmuls) into it.
SPECIALIZE_NAMED_OPS = "builtin.module(func.func(linalg-specialize-generic-ops))"

# Workloads by name, as TVM's ``auto_scheduler.register_workload`` keeps them.
WORKLOADS: dict[str, Callable[..., Sequence[Tensor]]] = {}


def register_workload(func: "Callable[..., Sequence[Tensor]] | str" = None, *, override: bool = False):
    """Register ``func`` (a function of the workload's arguments returning its TE tensors:
    placeholders, then computes) under its name; ``@register_workload("name")`` picks the
    name. Registering another function under a taken name needs ``override=True``."""

    def register(function: Callable[..., Sequence[Tensor]], name: str) -> Callable[..., Sequence[Tensor]]:
        if not callable(function):
            raise TuningError(f"register_workload takes a function, got {type(function).__name__}")
        known = WORKLOADS.get(name)
        # The same definition again (a notebook cell run twice, a module reloaded) replaces
        # the old one; another function under a taken name needs override=True.
        same_definition = known is not None and (known.__module__, known.__qualname__) == (
            getattr(function, "__module__", None), getattr(function, "__qualname__", None))
        if known is not None and known is not function and not same_definition and not override:
            raise TuningError(f"workload {name!r} is already registered; pass override=True to replace it")
        WORKLOADS[name] = function
        return function

    if isinstance(func, str):
        return lambda function: register(function, func)
    if func is None:
        return lambda function: register(function, function.__name__)
    return register(func, func.__name__)


@dataclass
class RecordToFile:
    """Where measurements go (TVM's ``auto_scheduler.RecordToFile``): tilecraft's records file,
    one JSON line per measurement, flushed as each arrives."""

    filename: "str | os.PathLike[str]"


@dataclass
class TuningOptions:
    """TVM's ``auto_scheduler.TuningOptions``, mapped onto :class:`~tilecraft.TuneOptions`.

    ``num_measure_trials``: trials over all of the compute's ops; ``measure_callbacks``: one
    :class:`RecordToFile`; ``early_stopping``: trials without improvement that end an op's
    search; ``verbose``: 0 silent, 1 progress lines.
    """

    num_measure_trials: int = 64
    measure_callbacks: Sequence[RecordToFile] = field(default_factory=list)
    early_stopping: int | None = None
    verbose: int = 1
    tuner: str = "xgb"
    # TuneOptions.space: by default spaces derived from each op's loops (schedule/sketch.py)
    # where no hand space has more than generic knobs, as Ansor generates sketches.
    space: str = "generated"

    def records(self) -> Path:
        files = [c.filename for c in self.measure_callbacks if isinstance(c, RecordToFile)]
        if len(files) != 1:
            raise TuningError("TuningOptions needs one measure callback RecordToFile(path) "
                              f"(where the measurements go), got {len(files)}")
        return Path(files[0])


class SearchTask:
    """A user's compute and its arguments, ready to tune (TVM's ``auto_scheduler.SearchTask``).

    Args:
      func: a registered workload, or its name.
      args: the arguments ``func`` is called with (shapes, dtypes, ...).
      target: the target to tune for (``"llvm"``: this machine).
    """

    def __init__(self, func: "Callable[..., Sequence[Tensor]] | str", args: Sequence[Any] = (),
                 target: "str | Target" = "llvm") -> None:
        if isinstance(func, str):
            if func not in WORKLOADS:
                raise TuningError(f"no workload named {func!r}; registered: {sorted(WORKLOADS) or 'none'}")
            func = WORKLOADS[func]
        if not callable(func):
            raise TuningError(f"SearchTask takes a workload function or its name, got {type(func).__name__}")
        self.func, self.args, self.target = func, tuple(args), Target.parse(target)
        if not target_plugin(self.target.kind).tunable:
            raise TuningError(f"the auto-scheduler tunes CPU targets, not {self.target}; for CUDA, "
                              "schedule with bind (docs/cuda.md) or compile with the default GPU schedule")
        tensors = func(*self.args)
        tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors or [])
        if not tensors or not all(isinstance(t, Tensor) for t in tensors):
            raise TuningError(f"workload {func.__name__} must return its TE tensors (placeholders, "
                              f"then computes), got {tensors!r}")
        self.workload_key = f"{func.__name__}{self.args!r}"
        self.forms, self.refusals = _forms(tensors)
        # ``compute_dag``: the taps form, the one every compute has (the compute itself when
        # it has no window); ``forms`` holds every form (module docstring).
        self.compute_dag = self.forms[TAPS]
        self.form_tasks: dict[str, list[Task]] = {
            name: extract_tasks(text, self.target) for name, text in self.forms.items()}
        tasks: dict[str, Task] = {}
        for form_tasks in self.form_tasks.values():
            for task in form_tasks:
                tasks.setdefault(task.key, task)
        self.tasks: list[Task] = list(tasks.values())
        # Per records file, each form's median seconds with its records and its median
        # per-round time over the taps form's (best_form).
        self.form_seconds: dict[Path, dict[str, float]] = {}
        self.form_ratios: dict[Path, dict[str, float]] = {}

    def __repr__(self) -> str:
        return (f"SearchTask({self.workload_key}, target={self.target}, {len(self.tasks)} tunable op(s), "
                f"forms {', '.join(self.forms)})")

    def tune(self, options: TuningOptions) -> TuningResult:
        """Search schedules for every op of the compute; measurements land in the records file
        at once (a killed run resumes with the records it left, via ``prior`` records). A
        compute with several forms (:attr:`forms`) shares the trials among them, then times
        the forms with their best schedules side by side (:meth:`best_form`)."""
        if not isinstance(options, TuningOptions):
            raise TuningError(f"tune takes auto_scheduler.TuningOptions, got {type(options).__name__}")
        if not self.tasks:
            raise TuningError(f"{self.workload_key}: no tunable op (its computes lower to no loop "
                              "nest the tuner has a space for)")
        records = options.records()
        if options.verbose:
            for why in self.refusals:
                print(f"{self.workload_key}: no {WINDOW_INSIDE} form, taps only: {why}")
        names = list(self.forms)
        trials = options.num_measure_trials
        shares = [trials // len(names) + (1 if i < trials % len(names) else 0) for i in range(len(names))]
        results: dict[str, TuningResult] = {}
        for name, share in zip(names, shares):
            if share == 0:
                continue
            if options.verbose and len(names) > 1:
                print(f"{self.workload_key}: form {name!r}, {share} trials")
            search = TuneOptions(trials=share, tuning_records=records,
                                 tuner=options.tuner, early_stopping=options.early_stopping,
                                 space=options.space,
                                 progress=bool(options.verbose),
                                 prior_records=records if records.is_file() else None)
            results[name] = tune(self.forms[name], CompileOptions(target=self.target), search)
        if len(results) == 1:
            return next(iter(results.values()))
        self.form_ratios.pop(records.resolve(), None)  # new records: time the forms again
        chosen = results[self.best_form(records)]
        return replace(chosen, tasks=[r for result in results.values() for r in result.tasks])

    def best_form(self, records: "str | os.PathLike[str]") -> str:
        """The form (:attr:`forms`) that runs fastest with the best schedules of ``records``:
        each form compiled with them and timed on random inputs in paired rounds in this
        process (runtime/significance.py's ``paired_rounds``: the order flipped every round; on
        one thread's CPU time at one thread, runtime/timing.py), the winner the lowest median of its per-round time over the taps form's. Why time the
        forms rather than add up their records: a record times one op alone, and a form's ops
        run a different number of times (the group convolution once per group). Measured once
        per records file; :attr:`form_seconds` keeps each form's median and
        :attr:`form_ratios` its median time relative to the taps form."""
        if len(self.forms) == 1:
            return next(iter(self.forms))
        path = Path(records).resolve()
        if path not in self.form_ratios:
            compiled = {name: compile_model(text, CompileOptions(target=self.target, tuning_records=path))
                        for name, text in self.forms.items()}
            rng = np.random.default_rng(0)
            signature = next(iter(compiled.values())).signature
            inputs = [rng.standard_normal(spec.shape).astype(spec.dtype) for spec in signature.arguments]
            threads = CompileOptions(target=self.target).target.num_threads
            samples = paired_rounds({name: (lambda fn=fn: fn(*inputs)) for name, fn in compiled.items()},
                                    FORM_TIMING_ROUNDS, min_sample_s=FORM_TIMING_S,
                                    clock=get_clock(default_clock(threads)))
            baseline = np.asarray(samples[TAPS])
            self.form_seconds[path] = {name: float(np.median(v)) for name, v in samples.items()}
            self.form_ratios[path] = {name: float(np.median(np.asarray(v) / baseline))
                                      for name, v in samples.items()}
        ratios = self.form_ratios[path]
        return min(ratios, key=ratios.__getitem__)

    def _best(self, records: "str | os.PathLike[str]") -> dict[str, Any]:
        path = Path(records)
        if not path.is_file():
            raise TuningError(f"{path}: no such records file")
        best = best_records(load_records(path, target=self.target))
        found = {task.key: best[task.key] for task in self.tasks if task.key in best}
        if not found:
            raise TuningError(f"{path} holds no record of {self.workload_key} for target "
                              f"'{self.target}': tune this task first")
        return found

    def apply_best(self, records: "str | os.PathLike[str]", *, form: str | None = None) -> CompiledModule:
        """The compute compiled with the best schedule of each of its ops in ``records``
        (ops without a record keep the default schedule), in its fastest form
        (:meth:`best_form`), or in ``form`` (one of :attr:`forms`) when given."""
        if form is not None and form not in self.forms:
            raise TuningError(f"{self.workload_key} has no form {form!r}; its forms: {', '.join(self.forms)}"
                              + "".join(f"\n  no {WINDOW_INSIDE} form: {why}" for why in self.refusals))
        self._best(records)
        return compile_model(self.forms[form or self.best_form(records)],
                             CompileOptions(target=self.target, tuning_records=records))

    def print_best(self, records: "str | os.PathLike[str]") -> str:
        """Print (and return) the fastest form and each of its ops' best schedule from
        ``records``: its knobs, time and the transform script the compiler applies."""
        found = self._best(records)
        form = self.best_form(records)
        lines = []
        if len(self.forms) > 1:
            path = Path(records).resolve()
            timings = ", ".join(f"{name} {seconds * 1e3:.4f} ms ({self.form_ratios[path][name]:.2f}x the taps' time)"
                                for name, seconds in self.form_seconds[path].items())
            lines.append(f"# form: {form} (timed with the records, median of paired rounds: {timings})")
        for task in self.form_tasks[form]:
            record = found.get(task.key)
            if record is None:
                lines.append(f"# {task.name}: no record (default schedule)")
                continue
            lines.append(f"# {task.name}: {record.cost * 1e3:.4f} ms, {record.gflops:.1f} GFLOPS, "
                         f"config {record.config}")
            lines.append(record.script)
        text = "\n".join(lines)
        print(text)
        return text


# The forms of a windowed compute: its taps (schedule/te/window_taps.py), and, where it is a
# grouped channels-last convolution, a loop over groups of the named convolution, whose
# register tile keeps the window loops inside (schedule/te/window_conv.py).
TAPS, WINDOW_INSIDE = "taps", "window_inside"
# How best_form times the forms: paired rounds, each sample a block of calls of at least
# this many seconds. At load 10-13 on the shared 2-core machine, 5 alternating rounds of 50 ms
# picked the taps form at 5x the window-inside form's time, where 11 rounds of the benchmark
# had the taps 1.5x slower: hence the paired ratios and more, longer rounds.
FORM_TIMING_ROUNDS = 9
FORM_TIMING_S = 0.1


def _forms(tensors: Sequence[Tensor]) -> tuple[dict[str, str], list[str]]:
    """The compute's forms as MLIR text (window-inside first, where there is one; the taps
    form always) and why a windowed op has no window-inside form.

    Generic ops that are named ops in disguise (a TOPI convolution, a matmul written as a
    sum) become those named ops first, so they are tasks of their kernel class with its
    space and the layout pass's NHWC form, as an imported model's are. Windowed computes no
    named op matches (a grouped convolution in the user's layout) become one contraction per
    window tap (schedule/te/window_taps.py), which the spaces cover; when they are a grouped
    channels-last convolution, also a loop over groups of ``linalg.conv_2d_nhwc_hwcf``
    (schedule/te/window_conv.py), the form a model's grouped convolutions take."""
    forms: dict[str, str] = {}
    with ir.Context() as context:
        module = create_func(tensors, context=context)
        passmanager.PassManager.parse(SPECIALIZE_NAMED_OPS).run(module.operation)
        refusals = window_conv_refusals(module)
        generic = str(module)
        if rewrite_window_convs(module):
            split_window_taps(module)  # windowed ops that are no such convolution
            forms[WINDOW_INSIDE] = str(module)
        taps = ir.Module.parse(generic)
        split_window_taps(taps)
        forms[TAPS] = str(taps)
    return forms, refusals
