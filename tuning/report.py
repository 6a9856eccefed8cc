"""The tuning report: the model's estimated time as the search goes (the end-to-end curve),
best-so-far GFLOPS against trials per task and tuner, and a per-task table.

``tune(..., report="r.png")`` writes the figure; ``report="r.html"`` a page with the figure
inline and the table (default ms, best ms, speedup, trials, failures per task). The
end-to-end curve is estimated from the records: the sum over tasks of (times the model runs
the task) x (best cost so far), starting from every task's default; the measured end-to-end
speedup is what ``tune`` prints after compiling the model both ways.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..runtime.significance import Comparison, compare
from ..schedule.records import VALIDATED, Record, is_remeasurement


def best_so_far(records: Iterable[Record]) -> list[float]:
    """Best GFLOPS after each record (in file order); failures keep the previous best."""
    curve, best = [], 0.0
    for record in records:
        if record.ok:
            best = max(best, record.gflops)
        curve.append(best)
    return curve


def curves(records: Iterable[Record]) -> dict[str, dict[str, list[float]]]:
    """task name -> tuner -> best-so-far curve. The default measurement of a run starts the
    curve of the tuner that follows it, so every curve starts from the default schedule."""
    grouped: dict[str, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    pending: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        name = record.task.get("name", record.key)
        if is_remeasurement(record):
            continue  # re-measurements of the best candidates, not trials of a search
        if record.tuner == "default":
            pending[name] = [record]
            continue
        series = grouped[name][record.tuner]
        if not series and pending[name]:
            series.extend(pending[name])
        series.append(record)
    return {task: {tuner: best_so_far(rs) for tuner, rs in by_tuner.items()}
            for task, by_tuner in grouped.items()}


def end_to_end_curve(records: Iterable[Record]) -> list[float]:
    """The model's estimated seconds per run after each search trial: every task at its
    default's cost to begin with (the first point), then the best so far as trials come
    in file order. Tasks whose default failed are left out; validation re-measurements are
    not trials."""
    records = [r for r in records if not is_remeasurement(r)]
    best: dict[str, float] = {}
    count: dict[str, int] = {}
    for record in records:
        if record.tuner == "default" and record.key not in best and math.isfinite(record.cost):
            best[record.key] = record.cost
            count[record.key] = int(record.task.get("count", 1))
    if not best:
        return []
    curve = [sum(best[k] * count[k] for k in best)]
    for record in records:
        if record.tuner == "default" or record.key not in best:
            continue
        best[record.key] = min(best[record.key], record.cost)
        curve.append(sum(best[k] * count[k] for k in best))
    return curve


@dataclass(frozen=True)
class TaskRow:
    """One task's line of the report's table."""

    name: str
    default_ms: float
    best_ms: float
    trials: int
    failures: int
    # The validated best against the validated default, round by round (None: not validated,
    # or the default is the best).
    comparison: Comparison | None = None
    validated: bool = False

    @property
    def speedup(self) -> float:
        return self.default_ms / self.best_ms if self.best_ms > 0 and math.isfinite(self.best_ms) else 0.0

    def speedup_cell(self) -> str:
        """What the table shows: a ratio only with evidence (runtime/significance.py), as the
        tune summary does."""
        if not self.best_ms < self.default_ms:
            return "default"
        if self.comparison is not None:
            return f"{self.comparison.ratio:.2f}x" if self.comparison.faster else "no measurable change"
        return "no measurable change" if self.validated else "not validated"


def task_rows(records: Iterable[Record]) -> list[TaskRow]:
    """Per task: the default's time, the best time, trials and failed trials; tasks in order
    of first appearance. Where the task was validated, both times are the validated medians
    (the default is re-measured beside the finalists, and those records alone are applied),
    so a lucky single measurement in the search makes no speedup."""
    rows: dict[str, dict] = {}
    for record in records:
        row = rows.setdefault(record.key, {"name": record.task.get("name", record.key), "default": math.inf,
                                           "best": math.inf, "trials": 0, "failures": 0,
                                           "config": None, "final": [], "final_default": math.inf,
                                           "finals": []})
        if record.tuner == "default":
            row["default"] = min(row["default"], record.cost)
            row["config"] = record.config
        elif record.tuner == VALIDATED:
            row["final"].append(record.cost)
            if record.ok:
                row["finals"].append(record)
            if record.config == row["config"]:
                row["final_default"] = min(row["final_default"], record.cost)
        elif not is_remeasurement(record):
            row["best"] = min(row["best"], record.cost)
        if not is_remeasurement(record):
            row["trials"] += 1
            row["failures"] += not record.ok
    result = []
    for r in rows.values():
        default, best = r["default"], r["best"]
        comparison = None
        if r["final"]:
            default = r["final_default"] if math.isfinite(r["final_default"]) else default
            best = min(r["final"])
            comparison = _validated_comparison(r["finals"], r["config"])
        result.append(TaskRow(r["name"], default * 1e3, min(best, default) * 1e3, r["trials"],
                              r["failures"], comparison, bool(r["final"])))
    return result


def _validated_comparison(finals: list[Record], default_config: dict | None) -> Comparison | None:
    """The best final record against the default's final record, round by round, where both
    were measured in the same rounds and the best is not the default."""
    defaults = [r.costs for r in finals if r.config == default_config]
    if not finals or not defaults:
        return None
    best = min(finals, key=lambda r: r.cost)
    if best.config == default_config or not best.costs or len(defaults[0]) != len(best.costs):
        return None
    return compare(defaults[0], best.costs)


def _figure(records: list[Record]):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    data = curves(records)
    overall = end_to_end_curve(records)
    count = len(data) + 1
    figure, axes = pyplot.subplots(count, 1, figsize=(7, 3.2 * count), squeeze=False)
    axis = axes[0, 0]
    if overall:
        axis.plot(range(len(overall)), [1e3 * s for s in overall], color="black")
        axis.set_title(f"model (estimated): {1e3 * overall[0]:.3f} -> {1e3 * overall[-1]:.3f} ms "
                       f"({overall[0] / overall[-1]:.2f}x)", fontsize=9)
    axis.set_xlabel("trials after the defaults")
    axis.set_ylabel("estimated ms per run")
    axis.grid(alpha=0.3)
    for axis, (task, by_tuner) in zip(axes[1:, 0], sorted(data.items())):
        for tuner, curve in sorted(by_tuner.items()):
            axis.plot(range(1, len(curve) + 1), curve, label=tuner)
        axis.set_title(task, fontsize=9)
        axis.set_xlabel("trials")
        axis.set_ylabel("best GFLOPS")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    return figure, pyplot


def plot_report(records: Iterable[Record], path: "str | os.PathLike[str]") -> None:
    """Write the report: a PNG figure, or an HTML page (figure inline, per-task table) when
    ``path`` ends in ``.html`` (matplotlib's Agg backend: no display needed)."""
    records = list(records)
    figure, pyplot = _figure(records)
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=100)
    pyplot.close(figure)
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        path.write_bytes(png.getvalue())
        return
    rows = "\n".join(
        f"<tr><td>{html.escape(r.name)}</td><td>{r.default_ms:.4f}</td><td>{r.best_ms:.4f}</td>"
        f"<td>{r.speedup_cell()}</td><td>{r.trials}</td><td>{r.failures}</td></tr>"
        for r in task_rows(records))
    image = base64.b64encode(png.getvalue()).decode("ascii")
    path.write_text(f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>tilecraft tuning report</title>
<style>body{{font-family:sans-serif}} td,th{{padding:2px 8px;text-align:right}} td:first-child{{text-align:left}}</style>
</head><body>
<h1>tilecraft tuning report</h1>
<table><tr><th>task</th><th>default ms</th><th>best ms</th><th>speedup</th><th>trials</th><th>failures</th></tr>
{rows}
</table>
<img alt="estimated model time and best-so-far GFLOPS per task" src="data:image/png;base64,{image}">
</body></html>
""", encoding="utf-8")
