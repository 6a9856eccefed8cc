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
the kernel's median time per occurrence in the model, and their ratio.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..pipelines.options import CompileOptions
from ..runtime.package import load
from ..runtime.run import random_inputs
from ..schedule.records import best_records, load_records
from ..schedule.task import Task
from ..compiler.compile import compile as compile_model


@dataclass(frozen=True)
class KernelAgreement:
    """One task: the tuner's seconds and the model's (per occurrence; ``None``: no kernel of
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
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "model.tar"
        compile_model(model, options, tuning_records=records, package_path=path, profile=True,
                      keep_ir=False)
        package = load(path)
        inputs = random_inputs(package)
        package.profile(**inputs)  # first run: page faults, lazy binding
        samples: dict[str, list[float]] = {}
        for _ in range(runs):
            totals: dict[str, float] = {}
            for kernel in package.profile(**inputs)[1]:
                totals[kernel.name] = totals.get(kernel.name, 0.0) + kernel.seconds
            for name, seconds in totals.items():
                samples.setdefault(name, []).append(seconds)
    return {name: statistics.median(values) for name, values in samples.items()}


def join(tasks: Sequence[Task], kernels: dict[str, float],
         records: "str | os.PathLike[str]", target: Any) -> list[KernelAgreement]:
    """Each task's tuner time beside its kernels' mean time in ``kernels`` (a profile)."""
    best = best_records(load_records(records, target=target))
    chosen = sorted((t for t in tasks if t.key in best), key=lambda t: -t.flops * t.count)
    # An occurrence's anchor names its kernel first: no other task takes it, even one that
    # fused an op of the same name (a layout transpose carries its source op's name).
    claimed = {names[0] for task in chosen for names in task.kernels if names}
    rows = []
    for task in chosen:
        times = []
        for names in task.kernels:
            # Every kernel named after one of the occurrence's ops: a group whose pad or
            # packing copy became a loop nest of its own is still one task.
            mine = [n for n in names[1:] if n in kernels and n not in claimed]
            claimed.update(mine)
            mine += names[:1] if names and names[0] in kernels else []
            if mine:
                times.append(sum(kernels[n] for n in mine))
        rows.append(KernelAgreement(task, best[task.key].cost, statistics.mean(times) if times else None))
    return rows


def in_model_times(model: Any, options: CompileOptions, records: "str | os.PathLike[str]",
                   tasks: Sequence[Task], runs: int = 5) -> list[KernelAgreement]:
    """Profile ``model`` compiled with ``records`` and join its kernels with ``tasks``."""
    return join(tasks, profile_kernels(model, options, records, runs), records, options.target)


def agreement_table(rows: Sequence[KernelAgreement]) -> str:
    """The rows as text: tuner ms, model ms, ratio, per task (heaviest first)."""
    lines = [f"{'task':<48} {'tuner ms':>9} {'model ms':>9} {'model/tuner':>11}"]
    for row in rows:
        model = f"{row.model_seconds * 1e3:9.4f}" if row.model_seconds is not None else f"{'-':>9}"
        ratio = f"{row.ratio:11.2f}" if row.ratio is not None else f"{'(no kernel)':>11}"
        lines.append(f"{row.task.name[:48]:<48} {row.tuner_seconds * 1e3:9.4f} {model} {ratio}")
    return "\n".join(lines)
