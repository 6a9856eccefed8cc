"""The CPU pipeline: linalg on tensors -> graph passes -> default schedule -> buffers ->
LLVM dialect.

Each stage is one line of intent; the pass elements are what ``tilecraft-opt`` runs. The
stages around the graph passes and the schedule are shared (stages.py); the schedule stage
names ``tilecraft-schedule``, which ``tilecraft.schedule`` defines (pipelines name passes,
they do not import their schedules).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import OptionError, TuningError
from .tensor import blocked_constants  # noqa: F401 - registers tilecraft-block-constant-reads
from .tensor import bf16_weights  # noqa: F401 - registers tilecraft-bf16-weights (precision="bf16")
from .vector.fast_math import FAST_MATH
from .graph import graph_pass_elements
from .offload import offload_element
from .passes import positive_int_option, register_pipeline
from .pipeline import Pipeline, Stage, with_pass_options
from .stages import input_stage, lowering_stages, simplify_stage
from .target import Target


def cpu_pipeline(target: "Target | str" = "llvm", *, opt_level: int = 0,
                 offload: Sequence[str] = (), runtime_checks: bool = True, checked: bool = False,
                 kernel_calls: bool = True) -> Pipeline:
    """The default CPU pipeline for ``target`` as an editable :class:`Pipeline`.

    ``opt_level`` >= 1 adds the ``graph`` stage (graph-level passes, see
    ``pipelines/graph``); at 3 ``simplify`` ends by tagging each op with its fusion group,
    which the schedule reads (one loop nest per group).
    ``offload`` names backends (pipelines/offload/) whose matched ops become extern
    calls, at the end of the graph stage, before fusion groups are tagged.
    ``runtime_checks=False`` drops the run-time checks of indices, dynamic sizes and
    allocations (pipelines/tensor/runtime_checks.py; docs/robustness.md measures their cost).
    ``checked=True`` adds MLIR's run-time verification of every memref access
    (pipelines/vector/runtime_verification.py): a checked build.
    ``kernel_calls=False`` inlines the schedule's outlined kernels back into the entry
    (``keep-kernels=0``); by default each distinct kernel stays one function through
    bufferization and LLVM (schedule/repeated_kernels.py).
    """
    target = Target.parse(target)
    graph_elements = graph_pass_elements(opt_level, lanes=target.vector_bits // 32)
    threads = target.num_threads
    if offload:
        # Backends match linalg.matmul and 1x1 convolutions: weights left in their layout,
        # not as panels (graph/weight_panels.py), so those ops keep constant operands the
        # backends recognise.
        graph_elements = [e for e in graph_elements if e != "tilecraft-pack-weight-panels"]
        at = len(graph_elements) - (graph_elements[-1:] == ["tilecraft-mark-groups"])
        graph_elements.insert(at, offload_element(offload, threads))
    return Pipeline(
        (
            input_stage(),
            *((Stage("graph", tuple(graph_elements),
                     "graph passes for opt_level: layout, combining, constant folding"),)
              if graph_elements else ()),
            simplify_stage(mark_groups=opt_level >= 3, runtime_checks=runtime_checks,
                           vnni=target.has_avx512_vnni, num_threads=threads,
                           fused_attention=opt_level >= 1,
                           attention_lanes=target.attention_lanes),
            Stage("schedule",
                  (f"tilecraft-schedule{{vector-bits={target.vector_bits} num-threads={threads} "
                   + " ".join(f"{k}={v}" for k, v in target.caches.options().items())
                   + f"{' fuse-groups=1' if opt_level >= 3 else ''}"
                   + f" keep-kernels={int(kernel_calls)}}}",
                   "canonicalize", "cse", "tilecraft-block-constant-reads"),
                  "default schedule: thread tiles, register tiles, vectorization; constant "
                  "operands read in vector-wide blocks stored block-major"),
            *lowering_stages(target, checked=checked),
        )
    )


@register_pipeline(
    "tilecraft-lower-cpu",
    "The whole CPU pipeline (cpu_pipeline) from linalg on tensors to the LLVM dialect",
    options={
        "cpu": "LLVM CPU name (default: the host)",
        "features": "LLVM feature toggles, e.g. +avx512f,-avx512vl",
        "num-threads": "threads for parallel loops (default: TILECRAFT_NUM_THREADS or all cores)",
    },
)
def lower_cpu_pipeline(options: Mapping[str, str]) -> list[str]:
    spec = "llvm"
    if options.get("cpu"):
        spec += f" -mcpu={options['cpu']}"
    if options.get("features"):
        spec += f" -mattr={options['features']}"
    target = Target.parse(spec)
    if "num-threads" in options:
        target = replace(target, num_threads=positive_int_option("num-threads", options["num-threads"]))
    return cpu_pipeline(target).pass_elements()


def with_fast_math(pipeline: Pipeline) -> Pipeline:
    """``pipeline`` with ``tilecraft-fast-math`` first in its schedule stage
    (pipelines/vector/fast_math.py says why there)."""
    if "schedule" not in pipeline.stage_names:
        raise OptionError("fast_math needs a pipeline with a 'schedule' stage (it runs first there)")
    passes = list(pipeline.stage("schedule").passes)
    if FAST_MATH in passes:
        return pipeline
    return pipeline.replace("schedule", [FAST_MATH, *passes])


def with_tuning_records(pipeline: Pipeline, records: "str | os.PathLike[str]", target: Target) -> Pipeline:
    """``pipeline`` whose ``tilecraft-schedule`` applies the best record of each op.

    The records travel as pass options, so the edited pipeline prints and replays in
    ``tilecraft-opt`` like any other; ops without a record keep the default schedule.
    """
    path = Path(records)
    if not path.is_file():
        raise TuningError(f"tuning records {str(path)!r}: no such file")
    if any(c.isspace() or c in "{}" for c in str(path.resolve())):
        raise TuningError(f"tuning records path {str(path)!r} must not contain spaces or braces")
    extra = f"tuning-records={path.resolve()}"
    if target.mcpu:
        extra += f" cpu={target.mcpu}"
    if target.mattr:
        extra += f" features={','.join(target.mattr)}"
    stage = pipeline.stage("schedule")
    passes = []
    for element in stage.passes:
        if element.startswith("tilecraft-schedule"):
            element = with_pass_options(element, extra)
        passes.append(element)
    if passes == list(stage.passes):
        raise TuningError("tuning_records needs a pipeline whose schedule stage runs tilecraft-schedule")
    return pipeline.replace("schedule", passes)
