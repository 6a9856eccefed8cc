"""Apply the best tuning record of each op: the planner the ``tilecraft-schedule`` pass uses.

``tilecraft.compile(model, tuning_records=path)`` and ``tilecraft-opt
--tilecraft-schedule="tuning-records=path"`` both come here: for each op the pass plans, the
op's task key is computed as :func:`~tilecraft.schedule.task.extract_tasks` computes it; when
the records hold a successful measurement for that key (same target and tilecraft version),
the fastest one's config is planned through the task's schedule space (the hand space of
its kernel class, or the generated sketch space, schedule/sketch.py, whose configs name
their knobs ``sk_*``). Ops without a record keep the default plan.

The reduced-precision dot-product kernels (bf16 and int8, pipelines/tensor/register_tiles.py)
are built before the schedule stage, by the passes that replace their matmuls; their records
(task kinds ``bf16_kernel`` / ``int8_kernel``, tuning/kernel_tasks.py) name the kernel they
configure, and :func:`with_records` hands the best config of each to those passes as their
``configs`` option. An f32 op's record never configures a kernel, nor the reverse: the
kernels' records are looked up by kernel name, the ops' by payload hash.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import replace
from typing import Mapping

from mlir import ir

from ..errors import KnobError, PipelineError
from ..pipelines.cpu import with_tuning_records
from ..pipelines.loop_nest import LoopNest
from ..pipelines.passes import positive_int_option
from ..pipelines.pipeline import Pipeline, with_pass_options
from ..pipelines.target import CacheHierarchy, Target
from ..pipelines.tensor.bf16_weights import BF16_WEIGHTS
from ..pipelines.tensor.int8_matmul import INT8_MATMUL_PASS
from ..pipelines.tensor.register_tiles import CONFIGS_OPTION, KernelConfig, format_kernel_configs
from .group import FusionUnit
from .op_schedule import OpSchedule
from .records import Record, best_records, load_records
from .sketch import SketchSpace, is_sketch_config
from .space import KERNEL_TASK_KINDS, KernelSpace, make_space
from .task import Task, describe_op, describe_unit

# The pass that builds each kind of kernel, and so takes its configs.
KERNEL_PASSES = {"bf16_kernel": BF16_WEIGHTS, "int8_kernel": INT8_MATMUL_PASS}


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
        target = Target.parse(spec)
        # A record is validated and planned in the space it was tuned in, whose knob values
        # and default tiles follow the thread count and the caches: the ones this pass plans
        # its defaults for (parsed as default_schedule_pass parses them). Why: the target string alone took the process's thread count
        # (every core), and a one-thread build's records (a one-thread tuning run's
        # candidates) were checked in a two-thread space: a knob value only the one-thread
        # space holds was ignored with a warning (the default measured in its place), and
        # a sketch point was planned on the other default's levels.
        target = replace(target, num_threads=positive_int_option("num-threads", options.get("num-threads", "1")),
                         cache_override=CacheHierarchy().with_sizes(options, what="option of tilecraft-schedule"))
        return cls(best_records(load_records(path, target=target)), target)

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
            config = space.validate(record.config)
            # The default point is the default plan, not the space's rendering of it: a
            # fusion group's default (plan_groups) is more than its anchor's plan, and a
            # task whose default won (in the model, or in validation) must build exactly
            # as without records, so that a tuned build that kept every default *is* the
            # default build (tilecraft tune's "unchanged").
            if config == space.default():
                return None
            plan = space.plan(config, tag)
        except KnobError as error:
            warnings.warn(f"tuning record for {task.name} ignored: {error}", RuntimeWarning,
                          stacklevel=2)
            return None
        self.applied.append(task.name)
        return plan


def kernel_configs(best: Mapping[str, Record], target: "str | Target") -> dict[str, dict[str, KernelConfig]]:
    """Per kernel task kind, the best config of each kernel (by its default name) that
    ``best`` (records by task key, :func:`best_records`) holds; a config the kernel's space
    rejects is warned about and left out (the kernel keeps its default)."""
    configs: dict[str, dict[str, KernelConfig]] = {kind: {} for kind in KERNEL_TASK_KINDS}
    for record in best.values():
        kind = record.task.get("kind")
        if kind not in KERNEL_TASK_KINDS:
            continue
        task = Task(key=record.key, name=record.task["name"], kind=kind, op_name=record.task.get("op", ""),
                    ranges=tuple(record.task["ranges"]), parallel=(True, True, False),
                    element_type=record.task.get("dtype", ""), flops=int(record.task.get("flops", 0)),
                    count=int(record.task.get("count", 1)), payload="")
        space = KernelSpace(task, target)
        try:
            configs[kind][task.name] = space.kernel_config(space.validate(record.config))
        except KnobError as error:
            warnings.warn(f"tuning record for {task.name} ignored: {error}", RuntimeWarning, stacklevel=2)
    return configs


def with_kernel_configs(pipeline: Pipeline, configs: Mapping[str, Mapping[str, KernelConfig]]) -> Pipeline:
    """``pipeline`` whose kernel passes (``KERNEL_PASSES``) build their kernels with
    ``configs`` (per kind, by default kernel name); a pipeline without them, unchanged."""
    for kind, pass_name in KERNEL_PASSES.items():
        if not configs.get(kind):
            continue
        value = format_kernel_configs(dict(configs[kind]))
        for stage in pipeline.stages:
            passes = [with_pass_options(p, f"{CONFIGS_OPTION}={value}") if p.split("{")[0] == pass_name else p
                      for p in stage.passes]
            if passes != list(stage.passes):
                pipeline = pipeline.replace(stage.name, passes)
    return pipeline


def with_records(pipeline: Pipeline, records: "str | os.PathLike[str]", target: Target) -> Pipeline:
    """``pipeline`` applying the best record of each op (``tilecraft-schedule``'s
    ``tuning-records``, pipelines/cpu.py) and of each dot-product kernel (the kernel passes'
    ``configs``): what ``tilecraft.compile(..., tuning_records=...)`` runs."""
    pipeline = with_tuning_records(pipeline, records, target)
    return with_kernel_configs(pipeline, kernel_configs(best_records(load_records(records, target=target)), target))
