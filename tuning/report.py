"""The tuning report: best-so-far GFLOPS against trials, one panel per task, one line per tuner."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Iterable

from ..schedule.records import VALIDATED, Record


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
        if record.tuner == VALIDATED:
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


def plot_report(records: Iterable[Record], path: "str | os.PathLike[str]") -> None:
    """Write the PNG (matplotlib's Agg backend: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    data = curves(records)
    count = max(len(data), 1)
    figure, axes = pyplot.subplots(count, 1, figsize=(7, 3.2 * count), squeeze=False)
    for axis, (task, by_tuner) in zip(axes[:, 0], sorted(data.items())):
        for tuner, curve in sorted(by_tuner.items()):
            axis.plot(range(1, len(curve) + 1), curve, label=tuner)
        axis.set_title(task, fontsize=9)
        axis.set_xlabel("trials")
        axis.set_ylabel("best GFLOPS")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(os.fspath(path), dpi=100)
    pyplot.close(figure)
