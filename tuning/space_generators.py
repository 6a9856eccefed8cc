"""The space generators: which search space a task gets, on which target.

- :class:`HandSpaceGenerator`: the space the target's plugin writes by hand
  (``TargetPlugin.schedule_space``: the CPU's per kernel class in schedule/space.py, matmul,
  conv, generic, whose default point is the planner's default schedule; CUDA's GPU knobs of
  targets/cuda/space.py);
- :class:`TemplateSpaceGenerator`: the space a user's AutoTVM-style template defines
  (tuning/templates.py);
- :class:`SketchSpaceGenerator`: a space derived from the op's loop structure
  (schedule/sketch.py: Ansor's multi-level tiling, vectorization, consumer fusion) for any
  static op, and :class:`GeneratedSpaceGenerator`, which takes it where the hand spaces
  have only a few generic knobs (elementwise, reductions, pooling, depthwise convolutions)
  and the hand space elsewhere.

:func:`space_generator_for` picks the generator; the target's plugin supplies its hand space,
so the tuner never asks which target it runs for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import TuningError
from ..pipelines.target import Target
from ..pipelines.target_registry import target_plugin
from ..targets.cuda.space import GpuScheduleSpace
from ..schedule.sketch import SketchSpace
from ..schedule.space import ScheduleSpace, task_nest
from ..schedule.task import Task
from .roles import SpaceGenerator

if TYPE_CHECKING:
    from .templates import TemplateSpace, TemplateTask


class HandSpaceGenerator(SpaceGenerator):
    """The hand-written space of the task's op on ``target``, as the target's plugin
    defines it (``TargetPlugin.schedule_space``: the CPU's per-kernel-class spaces of
    schedule/space.py, CUDA's block and thread tiles of targets/cuda/space.py)."""

    def __init__(self, target: "str | Target" = "llvm") -> None:
        self.target = Target.parse(target)

    def generate(self, task: Task) -> "ScheduleSpace | GpuScheduleSpace":
        return target_plugin(self.target.kind).schedule_space(task, self.target)


class TemplateSpaceGenerator(SpaceGenerator):
    """The space a template's ``cfg.define_*`` calls declare (the task made it when created)."""

    def generate(self, task: "TemplateTask") -> "TemplateSpace":
        return task.space


class SketchSpaceGenerator(SpaceGenerator):
    """The space generated from the task's loop nest (schedule/sketch.py), whatever its kind."""

    def __init__(self, target: "str | Target" = "llvm") -> None:
        self.target = Target.parse(target)

    def generate(self, task: Task) -> SketchSpace:
        return SketchSpace(task, task_nest(task), self.target)


class GeneratedSpaceGenerator(SpaceGenerator):
    """Sketches for the kinds whose hand space is a few generic knobs, the hand spaces for
    the contractions they were written for (``matmul``, ``conv2d``)."""

    HAND_KINDS = ("matmul", "conv2d")

    def __init__(self, target: "str | Target" = "llvm") -> None:
        self.hand = HandSpaceGenerator(target)
        self.sketch = SketchSpaceGenerator(target)

    def generate(self, task: Task) -> ScheduleSpace:
        chosen = self.hand if task.kind in self.HAND_KINDS else self.sketch
        return chosen.generate(task)


# ``TuneOptions.space``: which spaces a CPU run searches.
CPU_GENERATORS: dict[str, type[SpaceGenerator]] = {
    "hand": HandSpaceGenerator, "generated": GeneratedSpaceGenerator, "sketch": SketchSpaceGenerator,
}


def space_generator_for(target: "str | Target", space: str = "hand") -> SpaceGenerator:
    """The space generator ``space`` names (:data:`CPU_GENERATORS`: ``hand``, ``generated``
    or ``sketch``) on ``target``. Generated spaces plan the loop nests ``tilecraft.tune``
    measures (the tunable targets' CPU code), so a target that is not tunable (CUDA: no GPU
    runner yet) gets its plugin's hand space whatever ``space`` says."""
    target = Target.parse(target)
    if not target_plugin(target.kind).tunable:
        return HandSpaceGenerator(target)
    if space not in CPU_GENERATORS:
        raise TuningError(f"unknown space {space!r}; choose one of {', '.join(CPU_GENERATORS)}")
    return CPU_GENERATORS[space](target)
