"""``tilecraft.compile``: MLIR in, a callable :class:`CompiledModule` out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from mlir import ir

from ..dialects import graph
from ..errors import EntryPointError, PackageError, TuningError
from ..driver import Model, is_onnx_source, load
from ..frontend.loader import load_module
from ..runtime.compiled_module import CompiledModule, CudaCompiledModule
from ..runtime.signature import EntrySignature
from .cpu import cpu_pipeline
from .graph.fusion import count_groups
from .group_schedule import count_kernels
from .cuda.lowering import cuda_pipeline
from .package import PackageWriter
from .pipeline import Pipeline, Stage
from .target import Target




def find_entry(module: ir.Module, entry: str | None) -> ir.Operation:
    """The public function to call: ``entry`` by name, or the only public one."""
    public = []
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or not op.regions[0].blocks:
            continue
        visibility = op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None
        if visibility is None or ir.StringAttr(visibility).value == "public":
            public.append(op)
    names = [ir.StringAttr(f.attributes["sym_name"]).value for f in public]
    if entry is not None:
        if entry not in names:
            raise EntryPointError(f"no public function @{entry}; public functions: {names or 'none'}")
        return public[names.index(entry)]
    if not public:
        raise EntryPointError("the module has no public func.func with a body to call")
    if len(public) > 1:
        raise EntryPointError(f"several public functions {names}; choose one with entry=")
    return public[0]


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
            element = (element[:-1] + f" {extra}}}" if element.endswith("}")
                       else f"tilecraft-schedule{{{extra}}}")
        passes.append(element)
    if passes == list(stage.passes):
        raise TuningError("tuning_records needs a pipeline whose schedule stage runs tilecraft-schedule")
    return pipeline.replace("schedule", passes)


def _asm(module: ir.Module) -> str:
    return module.operation.get_asm(large_elements_limit=64, large_resource_limit=64)


def compile(
    source: Any,
    *,
    target: "str | Target" = "llvm",
    shape_dict: Mapping[str, Sequence[int | None]] | None = None,
    entry: str | None = None,
    pipeline: Pipeline | None = None,
    opt_level: int = 3,
    keep_ir: bool = True,
    tuning_records: "str | os.PathLike[str] | None" = None,
    package_path: "str | os.PathLike[str] | None" = None,
    profile: bool = False,
) -> CompiledModule:
    """Compile a linalg-on-tensors module for ``target`` and JIT it.

    Args:
      source: MLIR text or bytecode, an ``mlir.ir.Module`` (left unchanged), an
        ``onnx.ModelProto``, a path to a ``.mlir`` / ``.onnx`` file, or a model from
        :func:`tilecraft.load` (its shape_dict and output names come along).
      target: ``"llvm"`` for the host CPU or ``"llvm -mcpu=... -mattr=..."``;
        ``"cuda -arch=sm_80"`` for an NVIDIA GPU (docs/cuda.md: compiles anywhere, runs
        where a CUDA driver is).
      shape_dict: for ONNX models, input name -> shape (``None`` keeps a dim dynamic).
      entry: the public function to call; optional when there is exactly one.
      pipeline: a (possibly edited) pipeline; default ``cpu_pipeline(target)``.
      opt_level: 0-3, like TVM's PassContext opt_level: the LLVM optimization level for
        the JIT, and which graph passes run (``pipelines/graph``: 1 dead code and CSE,
        2 + constant folding and combined parallel matmuls, 3 + operator fusion; default
        3). Applies to the default pipeline; a given ``pipeline`` is run as it is.
      keep_ir: keep the IR after each stage for :meth:`CompiledModule.ir`.
      tuning_records: a JSON-lines file written by :func:`tilecraft.tune`; each op with a
        successful record for ``target`` gets the fastest record's schedule, the others the
        default schedule.
      package_path: also write a deployable package there (``model.tar``: shared library,
        manifest; load it with :func:`tilecraft.runtime.load`, no MLIR needed).
      profile: with ``package_path``, add the per-kernel profiling variant to the package.
    """
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    target = Target.parse(target)
    if pipeline is None:
        pipeline = cuda_pipeline(target) if target.is_cuda else cpu_pipeline(target, opt_level=opt_level)
    if target.is_cuda and package_path is not None:
        raise PackageError("deployable packages hold CPU code only; compile for 'llvm' to "
                           "package, or call the CUDA module in-process")
    if tuning_records is not None:
        pipeline = with_tuning_records(pipeline, tuning_records, target)
    output_names = None
    if package_path is not None and is_onnx_source(source):
        source = load(source, shape_dict)  # the ONNX graph's output names name the outputs
    if isinstance(source, Model):
        shape_dict = source.shape_dict if shape_dict is None else shape_dict
        output_names = source.output_names
        source = source.source
    context = ir.Context()
    graph.load(context)  # so IR dumped after the graph stage compiles as well
    module = load_module(source, context, shape_dict=shape_dict)
    with context, ir.Location.unknown():
        signature = EntrySignature.from_function(find_entry(module, entry))
        # "source", not "input": the pipeline's first stage is named "input", and its IR
        # silently replaced the snapshot of what compilation started from.
        stage_ir: dict[str, str] = {"source": _asm(module)} if keep_ir else {}

        group_count: list[int] = []
        kernel_count: list[int] = []

        def record(stage: Stage, current: ir.Module) -> None:
            if keep_ir:
                stage_ir[stage.name] = _asm(current)
            if stage.name == "graph" and ("tilecraft-fuse-ops" in stage.passes
                                          or "tilecraft-mark-groups" in stage.passes):
                group_count.append(count_groups(current.operation))
            if stage.name == "schedule":
                kernel_count.append(count_kernels(current.operation))

        writer = None
        if package_path is not None:
            writer = PackageWriter(signature, target, pipeline, opt_level=opt_level,
                                   output_names=output_names, profile=profile)
            writer.capture_source(module)
        pipeline.run(module, after_stage=record)
        if writer is not None:
            writer.write(module, package_path)
    module_class = CudaCompiledModule if target.is_cuda else CompiledModule
    compiled = module_class(
        module, signature, target=target, pipeline=pipeline, stage_ir=stage_ir, opt_level=opt_level
    )
    compiled.group_count = group_count[0] if group_count else None
    compiled.kernel_count = kernel_count[0] if kernel_count else None
    return compiled
