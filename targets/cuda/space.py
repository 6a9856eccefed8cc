"""The GPU schedule space: the knobs of :class:`~.schedule.GpuConfig` a tuner searches.

Same shape as the CPU spaces in ``tilecraft.schedule.space`` (:class:`Knob` s, configs as
``{knob: int}``, mixed-radix :meth:`point`, :meth:`validate`, :meth:`is_valid`), and a
config becomes a plan through the same planner the default GPU schedule uses
(:func:`~.schedule.plan_gpu_op`), rendered by the same script writer. Knobs by kind:

- ``contraction``: block tile (``block_m`` x ``block_n``), thread tile (``thread_m`` x
  ``thread_n`` register accumulators), shared-memory staging on/off (``shared``), the
  staged K slice (``k_step``) and the reduction steps per vectorized body (``unroll``);
- ``row_reduction`` (softmax, norms): threads per row (``row_threads``) and how their
  partials combine (``warp_reduce``: warp shuffles, or one thread reading shared memory);
- everything else: threads per block (``max_threads``) and elements per thread (``vector``).

Measuring a config needs a GPU: :func:`require_cuda_device` raises
:class:`~tilecraft.errors.DeviceUnavailableError` saying why there is none, so a tuning run
for a CUDA target stops before its first trial instead of timing CPU code.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import TYPE_CHECKING, Mapping

from mlir import ir

from ...errors import DeviceUnavailableError
from ...pipelines.loop_nest import LoopNest, analyze_loop_nests
from ...runtime.libraries import cuda_driver_problem
from .schedule import GpuConfig, GpuOpSchedule, operand_maps_of, plan_gpu_op, render_gpu_script
from ...schedule.space import Config, Knob, SearchSpace, validate_config

if TYPE_CHECKING:
    from ...schedule.task import Task

_MAX_BLOCK_THREADS = 1024

_KNOBS: dict[str, tuple[Knob, ...]] = {
    "contraction": (
        Knob("block_m", (16, 32, 64, 128), "output rows per block"),
        Knob("block_n", (16, 32, 64, 128), "output columns per block"),
        Knob("thread_m", (1, 2, 4, 8), "output rows per thread (register accumulators)"),
        Knob("thread_n", (1, 2, 4, 8), "output columns per thread (4: 128-bit accesses)"),
        Knob("shared", (0, 1), "stage operand tiles in shared memory"),
        Knob("k_step", (8, 16, 32, 64), "K slice staged per step"),
        Knob("unroll", (1, 2, 4, 8), "reduction steps per vectorized body"),
    ),
    "row_reduction": (
        Knob("row_threads", (32, 64, 128, 256, 512), "threads reducing one row"),
        Knob("warp_reduce", (0, 1), "combine the threads' partials with warp shuffles"),
    ),
    "elementwise": (
        Knob("max_threads", (64, 128, 256, 512, 1024), "threads per block"),
        Knob("vector", (1, 2, 4), "elements per thread along the innermost loop"),
    ),
}


def require_cuda_device() -> None:
    """Raise :class:`DeviceUnavailableError` unless CUDA kernels can run (and be timed) here."""
    problem = cuda_driver_problem()
    if problem is not None:
        raise DeviceUnavailableError(
            f"tuning for a CUDA target measures kernels on a GPU, and there is none: {problem}")


class GpuScheduleSpace(SearchSpace):
    """The GPU knobs of one op (its loop nest), and how a config becomes a plan (a
    :class:`SearchSpace`: the tuners walk it as they walk the CPU spaces)."""

    def __init__(self, nest: LoopNest, operand_maps: list | None = None) -> None:
        self.nest = nest
        self.operand_maps = operand_maps
        self.kind = plan_gpu_op(nest, 0, GpuConfig(), operand_maps).kind
        self.knobs = _KNOBS.get(self.kind, _KNOBS["elementwise"])

    def default(self) -> Config:
        """The default schedule's point (the :class:`GpuConfig` defaults)."""
        defaults = GpuConfig()
        return {k.name: int(getattr(defaults, k.name)) for k in self.knobs}

    def validate(self, config: Mapping[str, object]) -> Config:
        """``config`` as a clean dict, or ``KnobError`` naming the offending knob."""
        return validate_config(self.knobs, config, f"the {self.kind} GPU space")

    def gpu_config(self, config: Mapping[str, int]) -> GpuConfig:
        values = dict(self.validate(config))
        for flag in ("shared", "warp_reduce"):
            if flag in values:
                values[flag] = bool(values[flag])
        # A config's tiles are used as given: the default plan's shrinking toward a full grid
        # (GpuConfig.fill_blocks) would turn two configs into one plan.
        return GpuConfig(**values, fill_blocks=1)

    def plan(self, config: Mapping[str, int], tag: int = 0) -> GpuOpSchedule:
        return plan_gpu_op(self.nest, tag, self.gpu_config(config), self.operand_maps)

    def is_valid(self, config: Mapping[str, int]) -> bool:
        """Whether the config's plan fits a CUDA block and its tiles are what it asked for.

        Tiles are clamped to divisors of their loops, so distinct configs can collapse onto
        one plan; only the config whose values the plan uses as given is valid.
        """
        plan = self.plan(config)
        threads = math.prod(plan.block_dims)
        if threads > _MAX_BLOCK_THREADS or plan.block_dims[2] > 64:
            return False
        if self.kind == "contraction":
            m, n = self.nest.contraction[1][-1], self.nest.contraction[2][-1]
            return (plan.thread_tiles[m], plan.thread_tiles[n], plan.block_tiles[m],
                    plan.block_tiles[n]) == (config["thread_m"], config["thread_n"],
                                             config["block_m"], config["block_n"])
        if self.kind == "row_reduction":
            return plan.row_threads == config["row_threads"]
        return threads <= config["max_threads"]

    def pass_options(self, config: Mapping[str, int]) -> str:
        """``tilecraft-gpu-schedule`` options for ``config`` (``cuda_pipeline(schedule_options=)``)."""
        chosen = self.gpu_config(config)
        names = {f.name for f in fields(GpuConfig)}
        return " ".join([f"{name.replace('_', '-')}={int(getattr(chosen, name))}"
                         for name in (k.name for k in self.knobs) if name in names] + ["fill-blocks=1"])

    def script(self, config: Mapping[str, int], tag: int = 0) -> str:
        """The transform script of ``config``'s plan (what ``tilecraft-opt`` would replay)."""
        return render_gpu_script([self.plan(config, tag)])


def gpu_space_for(task: "Task") -> GpuScheduleSpace:
    """The GPU space of ``task``'s op (its last structured op other than a fill: the op the
    task is named after), with the indexing maps the GPU planner reads."""
    context = ir.Context()
    with context, ir.Location.unknown():
        module = ir.Module.parse(task.payload)
        analyzed = analyze_loop_nests(module.operation)
        maps = operand_maps_of(module.operation)
    index = max(i for i, (op, _) in enumerate(analyzed)
                if op.name != "linalg.fill" or task.op_name == "linalg.fill")
    return GpuScheduleSpace(analyzed[index][1], maps[index])
