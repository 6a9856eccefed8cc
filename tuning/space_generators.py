"""The space generators: which search space a task gets, on which target.

- :class:`HandSpaceGenerator`: the CPU spaces written per kernel class (schedule/space.py:
  matmul, conv, generic), whose default point is the planner's default schedule;
- :class:`CudaSpaceGenerator`: the GPU knobs of schedule/cuda_space.py;
- :class:`TemplateSpaceGenerator`: the space a user's AutoTVM-style template defines
  (tuning/templates.py).

:func:`space_generator_for` is the one place a target picks its generator: the rest of the
tuner never asks which target it runs for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..pipelines.target import Target
from ..schedule.cuda_space import GpuScheduleSpace, gpu_space_for
from ..schedule.space import ScheduleSpace, space_for
from ..schedule.task import Task
from .roles import SpaceGenerator

if TYPE_CHECKING:
    from .templates import TemplateSpace, TemplateTask


class HandSpaceGenerator(SpaceGenerator):
    """The hand-written CPU space of the task's kernel class, on ``target``."""

    def __init__(self, target: "str | Target" = "llvm") -> None:
        self.target = Target.parse(target)

    def generate(self, task: Task) -> ScheduleSpace:
        return space_for(task, self.target)


class CudaSpaceGenerator(SpaceGenerator):
    """The GPU space of the task's op (block and thread tiles, staging, unrolling)."""

    def __init__(self, target: "str | Target") -> None:
        self.target = Target.parse(target)

    def generate(self, task: Task) -> GpuScheduleSpace:
        return gpu_space_for(task)


class TemplateSpaceGenerator(SpaceGenerator):
    """The space a template's ``cfg.define_*`` calls declare (the task made it when created)."""

    def generate(self, task: "TemplateTask") -> "TemplateSpace":
        return task.space


def space_generator_for(target: "str | Target") -> SpaceGenerator:
    """The space generator of ``target``: the GPU space for CUDA, else the CPU hand spaces.

    The only target-specific choice of the tuner (the target registry answers it once
    targets are plugins)."""
    target = Target.parse(target)
    if target.is_cuda:
        return CudaSpaceGenerator(target)
    return HandSpaceGenerator(target)
