"""Tuning a template task: the model tuner's tuners, measurement worker and records.

    result = tune_template(task, tuner="xgb", trials=10, records="matmul.jsonl")

One job: the search loop over a :class:`~tilecraft.tuning.templates.TemplateTask`'s space
(templates.py defines and instantiates templates). Each candidate is the template built with
its config here, in the tuning process, so the worker needs neither the template's module nor
its registry (a template defined in a script's ``__main__`` is not importable from a spawned
process); the worker gets the scheduled IR and compiles it as ``schedule.te.build`` does.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TemplateError
from ..schedule.records import Record
from ..schedule.space import Config
from .database import JsonLinesDatabase
from .space_generators import TemplateSpaceGenerator
from .templates import TemplateTask


@dataclass
class TemplateTuningResult:
    """The outcome of :func:`tune_template`: best config (knob indices), its cost, trials."""

    task: TemplateTask
    best_config: Config | None
    best_cost: float
    default_cost: float
    trials: int
    records: Path | None

    def __str__(self) -> str:
        best = self.task.space.describe(self.best_config) if self.best_config else "none"
        return (f"{self.task.key}: best {self.best_cost * 1e3:.3f} ms ({best}), default "
                f"{self.default_cost * 1e3:.3f} ms, {self.trials} trials")


def tune_template(made: TemplateTask, *, tuner: str = "xgb", trials: int = 20, batch_size: int = 4,
                  records: "str | os.PathLike[str] | None" = None, seed: int = 0,
                  options: Any = None, early_stopping: int | None = None,
                  progress: bool = False) -> TemplateTuningResult:
    """Tune ``made`` with the model tuner's tuners and measurement worker.

    The default config is measured first and its output kept as the reference; each
    candidate is the template built with its config here (a config the schedule rejects is a
    ``build_error``), its scheduled IR compiled, checked and timed in the worker
    (``measure.py``). Every measurement is appended to ``records`` as it ends.
    """
    from .measure import LocalRunner, MeasureInput, MeasureResult, RunnerOptions
    from .tuners import make_tuner

    space = TemplateSpaceGenerator().generate(made)
    search = make_tuner(tuner, space, seed)
    database = JsonLinesDatabase(records) if records is not None else None
    runner = LocalRunner(options or RunnerOptions())
    reference = str(runner.scratch / "reference.npy")
    trial = 0

    def measure(config: Config, name: str, first: bool = False) -> float:
        nonlocal trial
        start = time.perf_counter()
        script = space.describe(config)
        try:
            sch, _tensors = made.instantiate(config)
            payload = sch.module_text()
        except Exception as error:  # noqa: BLE001 - a config the schedule rejects is a result
            result = MeasureResult("build_error", error=f"{type(error).__name__}: {error}"[:2000],
                                   elapsed=time.perf_counter() - start)
        else:
            result = runner.measure(MeasureInput(
                payload=payload, task=made.describe(), config=None, target=made.target,
                reference=None if first else reference, save_output=reference if first else None,
                scheduled=sch.func_name))
            script = f"{script}\n{sch.script}"
        cost = statistics.median(result.costs) if result.ok and result.costs else math.inf
        trial += 1
        if database is not None:
            database.commit(Record(task=made.describe(), config=dict(config), status=result.status,
                                costs=list(result.costs),
                                gflops=made.flops / cost / 1e9 if made.flops and math.isfinite(cost) else 0.0,
                                target=made.target, error=result.error, tuner=name, trial=trial,
                                timestamp=time.time(), script=script))
        if progress:
            shown = f"{cost * 1e3:.3f} ms" if math.isfinite(cost) else result.status
            print(f"[{trial}/{trials}] {name} {space.describe(config)}: {shown}", flush=True)
        return cost

    try:
        default_cost = measure(space.default(), "default", first=True)
        if not math.isfinite(default_cost):
            raise TemplateError(f"the default config of {made.key} failed to build or run; "
                                "its output is the reference, so the task cannot be tuned")
        search.update([space.default()], [default_cost])
        since_best = 0
        while trial < trials and search.has_next():
            batch = search.next_batch(min(batch_size, trials - trial))
            if not batch:
                break
            costs = [measure(config, tuner) for config in batch]
            best_before = search.best_cost
            search.update(batch, costs)
            since_best = 0 if search.best_cost < best_before else since_best + len(batch)
            if early_stopping is not None and since_best >= early_stopping:
                break
    finally:
        runner.close()
        if database is not None:
            database.close()
    return TemplateTuningResult(made, search.best_config, search.best_cost, default_cost, trial,
                                Path(records) if records is not None else None)
