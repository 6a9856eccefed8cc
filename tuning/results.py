"""What a tuning run found: per task (:class:`TaskResult`) and for the model
(:class:`TuningResult`, whose :meth:`~TuningResult.summary` is the table ``tilecraft tune``
prints). A speedup is printed only where paired measurements put it beyond noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..runtime.significance import Comparison
from ..schedule.task import Task


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
    # What the machine can attain for this task (runtime/peak.py's roofline: min(FMA peak,
    # bandwidth x arithmetic intensity)); None where unknown.
    bound_gflops: float | None = None

    def _fraction(self, of: float | None) -> str:
        if not of:
            return "-"
        if self.slower_in_model:
            return f"{self.default_gflops / of:.0%}"
        return f"{max(self.best_gflops, self.default_gflops) / of:.0%}"

    def peak_column(self) -> str:
        """The best schedule's fraction of the FMA peak, or ``-``."""
        return self._fraction(self.peak_gflops)

    def bound_column(self) -> str:
        """The best schedule's fraction of its roofline bound, or ``-``."""
        return self._fraction(self.bound_gflops)

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
        lines = [f"{'task':<40} {'default ms':>10} {'best ms':>10} {'peak':>5} {'bound':>5} {'speedup':>8} "
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
                         f"{r.peak_column():>5} {r.bound_column():>5} {speedup:>8} {tail}{note}")
        if self.unchanged:
            lines.append("end to end: unchanged (all tasks kept the default: the tuned build is "
                         "the default build)")
        elif self.end_to_end is not None:
            lines.append(f"end to end: default {self.end_to_end.baseline_seconds * 1e3:.4f} ms, "
                         f"tuned {self.end_to_end.candidate_seconds * 1e3:.4f} ms: "
                         f"{self.end_to_end.describe()}")
        return "\n".join(lines)
