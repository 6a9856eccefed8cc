"""``build(sch)``: compile a scheduled function into a :class:`~tilecraft.CompiledModule`."""

from __future__ import annotations

from ...pipelines.compiled_module import CompiledModule, compile_ir
from ...pipelines.cpu import cpu_pipeline
from ...pipelines.cuda import cuda_pipeline
from ...pipelines.pipeline import Pipeline
from ...pipelines.target import Target
from ...pipelines.tensorize import TENSORIZE_PASS
from .errors import ScheduleError
from .schedule import Schedule


def scheduled_pipeline(target: "str | Target" = "llvm") -> Pipeline:
    """The CPU (or, for a ``cuda`` target, the CUDA) pipeline for IR that is already scheduled.
    On the CPU, ``tilecraft-tensorize`` follows one-shot bufferization (``tensorize``).

    The default schedule is replaced by a canonicalization, and ``simplify`` no longer fuses
    elementwise ops (it would merge blocks the schedule placed apart); bufferization and
    lowering are the default pipeline's. For CUDA, the loops ``bind`` mapped become kernels in
    the ``map`` stage (``tilecraft-gpu-map``), then PTX and, with ptxas, a cubin.
    """
    target = Target.parse(target)
    base = cuda_pipeline(target) if target.is_cuda else cpu_pipeline(target)
    pipeline = base.replace("simplify", ("canonicalize", "cse")).replace("schedule", ("canonicalize", "cse"))
    if not target.is_cuda:
        # Tensorized tiles (Schedule.tensorize) become calls of their intrinsics once
        # bufferization has placed each tile in its buffer.
        passes = list(pipeline.stage("bufferize").passes)
        at = next(i for i, p in enumerate(passes) if p.startswith("one-shot-bufferize")) + 1
        pipeline = pipeline.replace("bufferize", [*passes[:at], TENSORIZE_PASS, *passes[at:]])
    return pipeline


def build(sch: Schedule, target: "str | Target" = "llvm", *, opt_level: int = 3) -> CompiledModule:
    """Compile ``sch``'s function as scheduled (TVM's ``tvm.build(sch.mod, target="llvm")``).

    The result is called with numpy arrays like any :class:`~tilecraft.CompiledModule`;
    unscheduled blocks become plain loops. ``target="cuda"`` (``"cuda -arch=sm_90"``) needs
    every block's outer loops bound to ``blockIdx`` (and usually ``threadIdx``) with
    :meth:`Schedule.bind`; the result's ``ptx()`` is the kernels' PTX, running it needs a GPU.
    """
    if not isinstance(sch, Schedule):
        raise TypeError(f"build takes a tilecraft.schedule.te.Schedule, got {type(sch).__name__}")
    target = Target.parse(target)
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    if target.is_cuda:
        tensorized = sch.tensorized_blocks()
        if tensorized:
            raise ScheduleError(f"build for cuda: blocks {[b.name for b in tensorized]} are tensorized; "
                                "intrinsics are C functions called on host memory — build with "
                                "target='llvm', or schedule without tensorize")
        sch.check_gpu()
    elif sch.bound_loops():
        names = [f"{l.name} ({l.thread_axis})" for l in sch.bound_loops()]
        raise ScheduleError(f"build: loops {names} are bound to GPU axes (bind); build with "
                            "target='cuda', or schedule without bind for the CPU")
    return compile_ir(sch.module_bytecode(), scheduled_pipeline(target), target,
                      entry=sch.func_name, opt_level=opt_level)
