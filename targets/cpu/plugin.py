"""The ``llvm`` target's plugin: this or a named CPU through LLVM (``llvm -mcpu= -mattr=
-mtriple= -l1d= -l2= -l3=``), the default CPU pipeline, the in-process JIT and packages.

The pieces it wires stay where the rest of the compiler shares them: the CPU target model in
pipelines/target.py (the schedules plan from it), the pipeline in pipelines/cpu.py (the tuner
edits it), the JIT in pipelines/jit/engine.py and pipelines/jit/compiled_module.py (the CUDA module is
one), the package writer in compiler/package.py.
"""

from __future__ import annotations

from typing import Any, Sequence

from mlir import ir

from ...pipelines.jit.compiled_module import CompiledModule
from ...pipelines.cpu import cpu_pipeline
from ...compiler.options import CompileOptions
from ...pipelines.pipeline import Pipeline
from ...pipelines.target import Target
from ...pipelines.target_registry import TargetPlugin
from ...pipelines.tensor.tensorize import TENSORIZE_PASS
from ...runtime.signature import EntrySignature
from ...schedule.space import space_for
from ...schedule.te.builder import without_default_schedule
from ...schedule.te.errors import ScheduleError


class CpuTarget(TargetPlugin):
    """CPUs through LLVM. A CPU variant (another name, other defaults) subclasses it and
    sets its own ``name``: targets parsed by it carry that name as their kind."""

    name = "llvm"
    usage = "'llvm [-mcpu=... -mattr=... -mtriple=...]'"
    specializes_shapes = True
    writes_packages = True
    tunable = True
    precisions = ("f32", "bf16", "int8")

    def parse(self, spec: str, options: Sequence[str]) -> Target:
        return Target.from_llvm_options(spec, options, kind=self.name)

    def spec(self, target: Target) -> str:
        return target.llvm_spec()

    def can_run_here(self, target: Target) -> bool:
        return target.cpu_runs_here()

    def pipeline(self, options: CompileOptions) -> Pipeline:
        return cpu_pipeline(options.target, opt_level=options.opt_level, offload=options.offload,
                            runtime_checks=options.runtime_checks, checked=options.checked,
                            kernel_calls=options.kernel_calls)

    def jit(self, module: ir.Module, signature: EntrySignature, pipeline: Pipeline, target: Target,
            **settings: Any) -> CompiledModule:
        return CompiledModule(module, signature, target=target, pipeline=pipeline, **settings)

    def schedule_space(self, task: Any, target: Target) -> Any:
        """The CPU space of the task's kernel class (schedule/space.py)."""
        return space_for(task, target)

    def scheduled_pipeline(self, target: Target) -> Pipeline:
        """Tensorized tiles (``Schedule.tensorize``) become calls of their intrinsics once
        bufferization has placed each tile in its buffer: ``tilecraft-tensorize`` follows
        one-shot bufferization."""
        pipeline = without_default_schedule(cpu_pipeline(target))
        passes = list(pipeline.stage("bufferize").passes)
        at = next(i for i, p in enumerate(passes) if p.startswith("one-shot-bufferize")) + 1
        return pipeline.replace("bufferize", [*passes[:at], TENSORIZE_PASS, *passes[at:]])

    def check_schedule(self, schedule: Any) -> None:
        if schedule.bound_loops():
            names = [f"{loop.name} ({loop.thread_axis})" for loop in schedule.bound_loops()]
            raise ScheduleError(f"build: loops {names} are bound to GPU axes (bind); build with "
                                "target='cuda', or schedule without bind for the CPU")
