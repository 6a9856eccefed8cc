"""``build(sch)``: compile a scheduled function into a :class:`~tilecraft.CompiledModule`."""

from __future__ import annotations

from ...errors import OptionError
from ...pipelines.jit.compiled_module import CompiledModule, compile_ir
from ...pipelines.pipeline import Pipeline
from ...pipelines.target import Target
from ...pipelines.target_registry import target_plugin
from .schedule import Schedule


def scheduled_pipeline(target: "str | Target" = "llvm") -> Pipeline:
    """The pipeline for IR that is already scheduled, as ``target``'s plugin builds it
    (targets/<name>/plugin.py: the CPU's adds ``tilecraft-tensorize`` after bufferization,
    CUDA's maps the loops ``bind`` placed to kernels in its ``map`` stage)."""
    target = Target.parse(target)
    return target_plugin(target.kind).scheduled_pipeline(target)


def without_default_schedule(pipeline: Pipeline) -> Pipeline:
    """``pipeline`` for IR scheduled by hand: the default schedule is replaced by a
    canonicalization, and ``simplify`` no longer fuses elementwise ops (it would merge blocks
    the schedule placed apart); bufferization and lowering are kept."""
    return pipeline.replace("simplify", ("canonicalize", "cse")).replace("schedule", ("canonicalize", "cse"))


def build(sch: Schedule, target: "str | Target" = "llvm", *, opt_level: int = 3) -> CompiledModule:
    """Compile ``sch``'s function as scheduled (TVM's ``tvm.build(sch.mod, target="llvm")``).

    The result is called with numpy arrays like any :class:`~tilecraft.CompiledModule`;
    unscheduled blocks become plain loops. ``target="cuda"`` (``"cuda -arch=sm_90"``) needs
    every block's outer loops bound to ``blockIdx`` (and usually ``threadIdx``) with
    :meth:`Schedule.bind`; the result's ``ptx()`` is the kernels' PTX, running it needs a GPU.
    """
    if not isinstance(sch, Schedule):
        raise OptionError(f"build takes a tilecraft.schedule.te.Schedule, got {type(sch).__name__}")
    target = Target.parse(target)
    if opt_level not in (0, 1, 2, 3):
        raise OptionError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    plugin = target_plugin(target.kind)
    plugin.check_schedule(sch)  # e.g. bound loops for the CPU, tensorized blocks for CUDA
    return compile_ir(sch.module_bytecode(), scheduled_pipeline(target), target,
                      entry=sch.func_name, opt_level=opt_level)
