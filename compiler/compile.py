"""``tilecraft.compile``: the front door. One session, in stages, each a function of the
previous stage's output:

    load (frontend/loader.py: any source kind -> MLIR module)
      -> entry signature (pipelines/jit/entry.py)
      -> pipeline: input, graph, simplify, schedule, bufferize, loops, vector, llvm
         (the target plugin's, pipelines/target_registry.py: pipelines/cpu.py, targets/cuda/, ...;
         the schedule stage is schedule/)
      -> JIT (pipelines/jit/compiled_module.py) and, when asked, a package (compiler/package.py);
         a target that does not run in process (targets/c) builds its own artifact instead
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from mlir import ir

from ..dialects import graph
from ..errors import OptionError
from ..frontend.loader import Model, is_onnx_source, load_module, resolve_source
from ..pipelines.jit.compiled_module import CompiledModule, clone_module, jit_module
from ..pipelines.cpu import with_fast_math
from ..pipelines.jit.entry import entry_signature, find_entry
from ..pipelines.graph.fusion import count_groups
from ..pipelines.offload import offload_summary, summary_line
from ..pipelines.pipeline import Pipeline, Stage
from ..schedule.group import count_kernels
from ..schedule.record_plan import with_records
from .options import CompileOptions
from ..pipelines.target_registry import target_plugin
from . import cache as compile_cache
from .package import PackageWriter
from .progress import CompileProgress
from .source import load
from .specialized import ShapeSpecializedModule

if TYPE_CHECKING:
    from .partitioned import PartitionedModule


def _asm(module: ir.Module) -> str:
    return module.operation.get_asm(large_elements_limit=64, large_resource_limit=64)


def compile(source: Any, options: CompileOptions | None = None,
            **overrides: Any) -> "CompiledModule | ShapeSpecializedModule | PartitionedModule | Any":
    """Compile ``source`` and JIT it; returns a module callable with numpy arrays.

    An ONNX model with string tensors gives a :class:`PartitionedModule` (called the same
    way): its string ops run on the host, the numeric rest is compiled
    (compiler/partitioned.py). A target that does not run in process gives its own artifact
    (its plugin's ``build``, pipelines/target_registry.py): ``target="c"`` a :class:`CModel`
    holding C99 sources (``model.c``/``model.h``, docs/c-target.md) and their workspace plan.

    Args:
      source: anything ``frontend/loader.py`` accepts: a path to an ``.onnx`` / ``.mlir`` /
        ``.mlirbc`` / ``.pt2`` / TorchScript ``.pt`` / ``.keras`` / ``.h5`` / ``.tflite`` file,
        an ``onnx.ModelProto``, a ``torch.export`` program, a TorchScript module (its input
        shapes in ``shape_dict``), a ``keras.Model``, MLIR text or bytecode, an ``mlir.ir.Module`` (left unchanged), or a model
        from :func:`tilecraft.load` (its shape_dict and output names come along).
      options: a :class:`CompileOptions`; keyword ``overrides`` (``target=``,
        ``shape_dict=``, ``opt_level=``, ``package_path=``, ...) replace its fields, so
        ``compile(m, target="llvm", opt_level=2)`` reads as before.
    """
    options = CompileOptions.of(options, **overrides)
    if options.precision != "f32":  # bf16 / int8: the reduced build and its accuracy report
        from .precision import compile_reduced

        return compile_reduced(source, options, compile, _pipeline)
    if not isinstance(source, Model):  # Keras -> ONNX, TorchScript -> torch.export, TFLite -> MLIR
        resolved = resolve_source(source, options.shape_dict)
        if resolved.source is not source:
            source, options = resolved.source, replace(options, shape_dict=resolved.shape_dict)
    source_name = None
    onnx_proto = None
    cache_key = None
    pipeline = None
    caching = compile_cache.cacheable(options)
    if is_onnx_source(source.source if isinstance(source, Model) else source):
        probed = compile_cache.onnx_key(source, options) if caching else None
        if probed is not None:
            cache_key, proto = probed
            pipeline = _pipeline(options)
            cached = compile_cache.lookup(cache_key, pipeline, options.target)
            if cached is not None:
                cached.rebuild = _rebuilder(source, options)
                return _specializing(cached, proto, options)
        from ..frontend.onnx.string_partition import read_onnx_source  # onnx is optional

        read = read_onnx_source(source, options.shape_dict)
        if read.has_strings:
            return _compile_around_strings(read.proto, read.shape_dict, options)
        onnx_proto = read.proto
        source, source_name = read.to_import(source)
    target = options.target
    plugin = target_plugin(target.kind)
    if not plugin.runs_in_process:  # e.g. C sources: the target's own artifact
        return plugin.build(source, options, source_name)
    pipeline = pipeline or _pipeline(options)
    shape_dict = options.shape_dict
    if options.package_path is not None and is_onnx_source(source):
        source = load(source, shape_dict)  # the ONNX graph's output names name the outputs
    output_names = source.output_names if isinstance(source, Model) else None
    keep_ir = options.keep_ir
    context = ir.Context()
    graph.load(context)  # so IR dumped after the graph stage compiles as well
    started = time.perf_counter()
    module = load_module(source, context, shape_dict=shape_dict, name=source_name)
    seconds = {"import": time.perf_counter() - started}
    if caching and cache_key is None:  # not ONNX: the imported module is the model's bytes
        cache_key = compile_cache.cache_key(compile_cache.module_digest(module), options)
        cached = compile_cache.lookup(cache_key, pipeline, target)
        if cached is not None:
            cached.rebuild = _rebuilder(source, options)
            return cached
    progress = CompileProgress(source_name or "the model", [*pipeline.stage_names, "jit"], enabled=options.verbose)
    with context, ir.Location.unknown():
        signature = entry_signature(find_entry(module, options.entry))
        # "source", not "input": the pipeline's first stage is named "input", and its IR
        # silently replaced the snapshot of what compilation started from.
        stage_ir: dict[str, str] = {"source": _asm(module)} if keep_ir else {}

        group_count: list[int] = []
        offloaded: dict[str, dict[str, int]] = {}
        kernel_count: list[int] = []

        def record(stage: Stage, current: ir.Module) -> None:
            nonlocal started
            seconds[stage.name] = time.perf_counter() - started
            if keep_ir:
                stage_ir[stage.name] = _asm(current)
            if "tilecraft-fuse-ops" in stage.passes or "tilecraft-mark-groups" in stage.passes:
                group_count.append(count_groups(current.operation))
            if stage.name == "graph" and options.offload:
                offloaded.update(offload_summary(current.operation))
                for backend, counts in offloaded.items():
                    print(summary_line(backend, counts), file=sys.stderr)
            if stage.name == "schedule":
                kernel_count.append(count_kernels(current.operation))
            progress.step_done(stage.name, kernels=kernel_count[0] if kernel_count else None)
            started = time.perf_counter()  # the stage's time, not this record's

        writer = None
        if options.package_path is not None:
            writer = PackageWriter(signature, target, pipeline, opt_level=options.opt_level,
                                   output_names=output_names, profile=options.profile)
            writer.capture_source(module)
        source_copy = clone_module(module)  # for CompiledModule.export_library
        started = time.perf_counter()
        try:
            pipeline.run(module, after_stage=record)
        except BaseException:
            progress.finish(failed=True)
            raise
        if writer is not None:
            started = time.perf_counter()
            writer.write(module, options.package_path)
            seconds["package"] = time.perf_counter() - started
    started = time.perf_counter()
    try:
        compiled = jit_module(module, signature, pipeline, target, opt_level=options.opt_level,
                              stage_ir=stage_ir, source=source_copy)
    except BaseException:
        progress.finish(failed=True)
        raise
    compiled.output_names = output_names
    seconds["jit"] = time.perf_counter() - started
    progress.step_done("jit")
    compiled.compile_seconds = seconds
    compiled.group_count = group_count[0] if group_count else None
    compiled.kernel_count = kernel_count[0] if kernel_count else None
    compiled.offloaded = offloaded
    if cache_key is not None:
        compile_cache.store_in_background(cache_key, compiled)
    progress.finish()
    if onnx_proto is not None and options.specialize_shapes and options.package_path is None \
            and plugin.specializes_shapes:
        return _specializing(compiled, onnx_proto, options)
    return compiled


def _rebuilder(source: Any, options: CompileOptions) -> Callable[[], CompiledModule]:
    """How a module loaded from the compile cache compiles again when it needs what the cache
    does not keep (its IR, for ``export_library``): the same source and options, uncached."""
    return lambda: compile(source, replace(options, cache=False))


def _pipeline(options: CompileOptions) -> Pipeline:
    """The pipeline a compile with ``options`` runs (the default one for its target)."""
    target = options.target
    pipeline = options.pipeline
    if pipeline is None:
        pipeline = target_plugin(target.kind).pipeline(options)
    if options.tuning_records is not None:
        pipeline = with_records(pipeline, options.tuning_records, target)  # ops' and kernels' records
    if options.fast_math:
        pipeline = with_fast_math(pipeline)
    return pipeline


def _specializing(compiled: CompiledModule, proto: Any, options: CompileOptions
                  ) -> "CompiledModule | ShapeSpecializedModule":
    """``compiled`` as a :class:`ShapeSpecializedModule` when some input dim is dynamic
    (compiler/specialized.py): each new input shape is compiled again with its dims fixed
    through ``shape_dict``, keyed by the ONNX graph's input names."""
    arguments = compiled.signature.arguments
    if not any(spec.shape is not None and None in spec.shape for spec in arguments):
        return compiled
    weights = {t.name for t in proto.graph.initializer}
    inputs = [value.name for value in proto.graph.input if value.name not in weights]
    if len(inputs) != len(arguments):
        return compiled  # inputs the entry does not take one to one: nothing to key on
    static_options = replace(options, keep_ir=False, specialize_shapes=0)

    def compile_static(shapes: tuple[tuple[int, ...], ...]) -> CompiledModule:
        return compile(proto, static_options, shape_dict={n: list(s) for n, s in zip(inputs, shapes)})

    return ShapeSpecializedModule(compiled, [spec.name for spec in arguments], compile_static,
                                  options.specialize_shapes)


def _compile_around_strings(source: Any, shape_dict: Any, options: CompileOptions) -> "PartitionedModule":
    """The string nodes on the host, each numeric segment compiled with ``options``."""
    from ..frontend.onnx.string_partition import split_at_strings
    from .partitioned import PartitionedModule

    if not target_plugin(options.target.kind).runs_in_process or options.package_path is not None:
        raise OptionError(
            "this model has string tensors, whose ops run on the host in Python "
            "(README.md, 'Using it from Python'): it cannot be written as a package or as C sources; "
            "compile it without package_path and target='c'")
    partition = split_at_strings(source, shape_dict)
    segment_options = CompileOptions.of(options, shape_dict=None)  # fixed in the segments' types
    return PartitionedModule(partition, lambda segment: compile(segment.model, segment_options), options.target)
