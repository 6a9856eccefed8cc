"""The ``c`` target's plugin: portable C99 sources (no JIT), the artifact a :class:`CModel`
whose ``package_path`` is a tar of model.c, model.h, main.c, a Makefile and SHA256SUMS (and
model_weights.bin where the weights are a blob). Options: ``-openmp`` (parallel loops under
``#pragma omp parallel for``) and ``-weights=auto|array|blob`` (docs/c-target.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

from mlir import ir

from ...compiler.source import load
from ...dialects import graph
from ...errors import CompileError, CTargetError, CTargetShapeError, CTargetUnsupportedOpError, OptionError, TargetError
from ...ir.lapack import refuse_calls
from ...pipelines.tensor.extern import refuse_python_calls
from ...frontend.loader import Model, is_onnx_source, load_module
from ...pipelines.jit.entry import entry_signature, find_entry
from ...compiler.options import CompileOptions
from ...pipelines.pipeline import Pipeline, Stage
from ...pipelines.target import Target
from ...pipelines.target_registry import TargetPlugin
from .cross import size_reports
from .lowering import c_pipeline
from .package import WEIGHT_MODES, CModel, capture_plan, emit_c


@dataclass(frozen=True)
class CTargetSpec(Target):
    """A ``c`` target string's options. ``openmp``: the outer parallel loop of each nest gets
    ``#pragma omp parallel for`` (off by default: a microcontroller has no threads);
    ``weights``: how model.c carries the weights (package.py :data:`WEIGHT_MODES`)."""

    openmp: bool = False
    weights: str = "auto"


class CTarget(TargetPlugin):
    """C99 sources with a statically planned workspace (docs/c-target.md): the user's C
    compiler builds them for any device."""

    name = "c"
    usage = "'c [-openmp] [-weights=auto|array|blob]'"
    runs_in_process = False

    def parse(self, spec: str, options: Sequence[str]) -> Target:
        openmp, weights = False, "auto"
        for option in options:
            if option == "-openmp":
                openmp = True
            elif option.startswith("-weights=") and option.split("=", 1)[1] in WEIGHT_MODES:
                weights = option.split("=", 1)[1]
            else:
                raise TargetError(f"the C target takes -openmp and -weights={'|'.join(WEIGHT_MODES)}, got "
                                  f"{option!r} in {spec!r}")
        return CTargetSpec(kind=self.name, num_threads=1, openmp=openmp, weights=weights)

    def spec(self, target: Target) -> str:
        parts = [target.kind]
        if isinstance(target, CTargetSpec):
            parts += ["-openmp"] * target.openmp + ([f"-weights={target.weights}"] if target.weights != "auto" else [])
        return " ".join(parts)

    def can_run_here(self, target: Target) -> bool:
        return True  # CModel.run builds the sources with this machine's C compiler

    def check_options(self, options: CompileOptions) -> None:
        if options.tuning_records is not None or options.offload or options.profile:
            raise OptionError("the C target takes no tuning_records, offload or profile: it has no schedule, "
                              "calls no library and has no profiling variant")

    def pipeline(self, options: CompileOptions) -> Pipeline:
        return c_pipeline(opt_level=options.opt_level, openmp=_spec(options).openmp)

    def write_output(self, compiled: Any, output: str) -> str:
        """The tar is written by ``package_path``; the line says what its workspace saved."""
        return compiled.summary()

    def report_sizes(self, artifact: Any) -> list[str]:
        """The model's objects cross-compiled with zig cc, their sections' sizes (cross.py)."""
        return [report.line() for report in size_reports(artifact)]

    def build(self, source: Any, options: CompileOptions, source_name: str | None = None) -> CModel:
        """``target="c"``: C99 sources (lowering.py, package.py) instead of a
        JIT; ``package_path`` writes them as a tar with ``main.c`` and a Makefile. ``source_name``:
        the path an ONNX proto was read from, for messages."""
        pipeline = options.pipeline or self.pipeline(options)
        if is_onnx_source(source):
            source = load(source, options.shape_dict)  # the ONNX graph's output names name the outputs
        output_names = source.output_names if isinstance(source, Model) else None
        context = ir.Context()
        graph.load(context)
        started = time.perf_counter()
        module = load_module(source, context, shape_dict=options.shape_dict, name=source_name)
        refuse_calls(module, "the C target", CTargetUnsupportedOpError)
        refuse_python_calls(module, "the C target", CTargetUnsupportedOpError)
        seconds = {"import": time.perf_counter() - started}
        planned = []
        with context, ir.Location.unknown():
            signature = entry_signature(find_entry(module, options.entry))
            if any(d is None for spec in signature.arguments for d in (spec.shape or ())):
                raise CTargetShapeError(
                    f"the C target needs static shapes; {signature} has dynamic dimensions: pass "
                    "shape_dict (CLI: --input-shapes) with every dimension")

            def record(stage: Stage, current: ir.Module) -> None:
                nonlocal started
                seconds[stage.name] = time.perf_counter() - started
                if stage.name == "workspace":
                    planned.append(capture_plan(current))
                started = time.perf_counter()

            started = time.perf_counter()
            try:
                pipeline.run(module, after_stage=record)
            except CompileError as error:
                if isinstance(error, CTargetError) or error.stage != "emitc":
                    raise
                # EmitC's conversions failing outright (not leaving an op behind) say so only in
                # MLIR diagnostics: still a model the C target cannot translate.
                raise CTargetUnsupportedOpError(f"EmitC could not translate the model: {error}", stage="emitc") from error
            if not planned:
                raise CompileError("the C target's pipeline needs its 'workspace' stage")
            started = time.perf_counter()
            spec = _spec(options)
            model = emit_c(module, planned[0], signature, output_names, weights=spec.weights, openmp=spec.openmp)
            seconds["emit"] = time.perf_counter() - started
        model.compile_seconds = seconds
        if options.package_path is not None:
            model.write(options.package_path)
        return model


def _spec(options: CompileOptions) -> CTargetSpec:
    target = options.target
    return target if isinstance(target, CTargetSpec) else CTargetSpec(kind="c", num_threads=1)
