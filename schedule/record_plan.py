"""Apply the best tuning record of each op: the planner the ``tilecraft-schedule`` pass uses.

``tilecraft.compile(model, tuning_records=path)`` and ``tilecraft-opt
--tilecraft-schedule="tuning-records=path"`` both come here: for each op the pass plans, the
op's task key is computed as :func:`~tilecraft.schedule.task.extract_tasks` computes it; when
the records hold a successful measurement for that key (same target and tilecraft version),
the fastest one's config is planned through the task's schedule space (the hand space of
its kernel class, or the generated sketch space, schedule/sketch.py, whose configs name
their knobs ``sk_*``). Ops without a record keep the default plan.
"""

from __future__ import annotations

import os
import warnings
from typing import Mapping

from mlir import ir

from ..errors import KnobError, PipelineError
from ..pipelines.loop_nest import LoopNest
from ..pipelines.target import Target
from .group import FusionUnit
from .op_schedule import OpSchedule
from .records import Record, best_records, load_records
from .sketch import SketchSpace, is_sketch_config
from .space import make_space
from .task import describe_op, describe_unit


class RecordPlanner:
    """``planner(op, nest, tag, unit)`` for :func:`~tilecraft.schedule.plan.plan_module`."""

    def __init__(self, best: Mapping[str, Record], target: Target) -> None:
        self.best = dict(best)
        self.target = target
        self.applied: list[str] = []  # task names planned from a record, for tests and logs

    @classmethod
    def from_file(cls, path: "str | os.PathLike[str]", target: "str | Target") -> "RecordPlanner":
        target = Target.parse(target)
        return cls(best_records(load_records(path, target=target)), target)

    @classmethod
    def from_pass_options(cls, options: Mapping[str, str]) -> "RecordPlanner":
        """A planner for ``tilecraft-schedule{tuning-records=...}``; a records file that does
        not exist is a :class:`PipelineError` (a typo must not silently mean "no records")."""
        path = options["tuning-records"]
        if not os.path.isfile(path):
            raise PipelineError(f"tilecraft-schedule: tuning-records {path!r}: no such file")
        spec = "llvm"
        if options.get("cpu"):
            spec += f" -mcpu={options['cpu']}"
        if options.get("features"):
            spec += f" -mattr={options['features']}"
        return cls.from_file(path, spec)

    def __call__(self, op: ir.Operation, nest: LoopNest, tag: int,
                 unit: FusionUnit | None = None) -> OpSchedule | None:
        """The best record's plan for ``op`` — for the anchor of a fusion ``unit``, the
        record of the unit's task — or ``None`` (the default plan)."""
        if not self.best:
            return None
        if unit is not None:
            # Only the anchor's nest is at hand: the task's flops count the anchor alone,
            # which neither the lookup nor the schedule space reads.
            task = describe_unit(unit, {op: nest})
        else:
            task = describe_op(op, nest)
        if task is None or task.key not in self.best:
            return None
        record = self.best[task.key]
        # A generated space's record (tuning/space_generators.py) names its knobs so.
        space = (SketchSpace(task, nest, self.target) if is_sketch_config(record.config)
                 else make_space(task, nest, self.target))
        try:
            plan = space.plan(space.validate(record.config), tag)
        except KnobError as error:
            warnings.warn(f"tuning record for {task.name} ignored: {error}", RuntimeWarning,
                          stacklevel=2)
            return None
        self.applied.append(task.name)
        return plan
