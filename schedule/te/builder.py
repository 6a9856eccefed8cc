"""``build(sch)``: compile a scheduled function into a :class:`~tilecraft.CompiledModule`."""

from __future__ import annotations

from ...pipelines.compiled_module import CompiledModule, compile_ir
from ...pipelines.cpu import cpu_pipeline
from ...pipelines.pipeline import Pipeline
from ...pipelines.target import Target
from .schedule import Schedule


def scheduled_pipeline(target: "str | Target" = "llvm") -> Pipeline:
    """The CPU pipeline for IR that is already scheduled.

    The default schedule is replaced by a canonicalization, and ``simplify`` no longer fuses
    elementwise ops (it would merge blocks the schedule placed apart); bufferization and
    lowering are the default pipeline's.
    """
    return (
        cpu_pipeline(target)
        .replace("simplify", ("canonicalize", "cse"))
        .replace("schedule", ("canonicalize", "cse"))
    )


def build(sch: Schedule, target: "str | Target" = "llvm", *, opt_level: int = 3) -> CompiledModule:
    """Compile ``sch``'s function as scheduled (TVM's ``tvm.build(sch.mod, target="llvm")``).

    The result is called with numpy arrays like any :class:`~tilecraft.CompiledModule`;
    unscheduled blocks become plain loops.
    """
    if not isinstance(sch, Schedule):
        raise TypeError(f"build takes a tilecraft.schedule.te.Schedule, got {type(sch).__name__}")
    target = Target.parse(target)
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    return compile_ir(sch.module_bytecode(), scheduled_pipeline(target), target,
                      entry=sch.func_name, opt_level=opt_level)
