"""A compiled entry function, callable with numpy arrays, and the last step that makes one.

Why below the front door (``tilecraft.compile`` in compiler/): the TE-style ``build`` and the
tuner's measurement compile IR they made themselves, with a pipeline they chose; they need
this step, not the session around it (loading models, options, packages).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from mlir import ir

from ...errors import EntryPointError, PackageError, TargetError
from ...frontend.loader import load_module
from ...runtime.signature import EntrySignature
from ...runtime.timing import Timing, time_evaluator
from .entry import entry_signature, find_entry
from .engine import JitFunction, LibraryFunction
from ..pipeline import Pipeline
from ..target import Target
from ..target_registry import target_plugin
from ...errors import IRNotKeptError


class CompiledModule:
    """The result of :func:`tilecraft.compile`.

    Call it with numpy arrays, positionally or by argument name; it returns one array, or a
    tuple for several results. Arrays own their memory. Every argument is checked against
    :attr:`signature` first, so a wrong call raises instead of reaching native code.
    """

    # How many fusion groups the graph stage formed; set by tilecraft.compile, None when the
    # pipeline did not run tilecraft-fuse-ops or tilecraft-mark-groups.
    group_count: int | None = None
    # How many kernels (top-level loop nests and copies, schedule/group.py's
    # count_kernels) the schedule stage left; None when the pipeline has no such stage.
    kernel_count: int | None = None
    # Wall-clock seconds of compilation by step: "import" (the source to MLIR), each
    # pipeline stage by name (the graph stage includes the constant folder's own JITs),
    # "package" when one was written, "jit"; set by tilecraft.compile.
    compile_seconds: dict[str, float] | None = None
    # Per offload backend, the ops it took by op name and how many it declined
    # (pipelines/offload/'s offload_summary); empty without offload.
    offloaded: Mapping[str, Mapping[str, int]] = MappingProxyType({})
    # The names of the outputs a package written by export_library records (the ONNX
    # graph's); set by tilecraft.compile, None: output_0, output_1...
    output_names: Sequence[str] | None = None
    # What the persistent compile cache (compiler/cache.py) did: "hit" (loaded, nothing
    # compiled; compile_seconds is then {"cache": seconds}), "miss" (compiled and stored),
    # "off", or "not cached: <why>".
    cache_status: str = "off"
    # On a hit, the compile_seconds of the compile that filled the entry.
    cached_compile_seconds: dict[str, float] | None = None
    # On a hit, how to compile the model again (the cache keeps no IR): export_library uses it.
    rebuild: Callable[[], "CompiledModule"] | None = None

    def __init__(
        self,
        llvm_module: ir.Module | None,
        signature: EntrySignature,
        *,
        target: Target,
        pipeline: Pipeline,
        stage_ir: Mapping[str, str],
        opt_level: int = 3,
        source: ir.Module | None = None,
        function: LibraryFunction | None = None,
    ) -> None:
        """``function``: code loaded from the compile cache instead of JIT-compiling
        ``llvm_module`` (then None)."""
        self.signature = signature
        self.target = target
        self.pipeline = pipeline
        self._stage_ir = dict(stage_ir)
        self._opt_level = opt_level
        self._source = source  # the IR before the pipeline (clone_module), for export_library
        self._module = llvm_module  # keeps the context alive as long as the engine
        self._function = function if function is not None else self._jit(llvm_module, signature, opt_level)

    @property
    def llvm_module(self) -> ir.Module | None:
        """The lowered module the JIT compiled (None for a module loaded from the cache); its
        weights are declarations (pipelines/jit/weights.py), and so are the kernels a
        parallel code generation compiled in other processes (pipelines/jit/parallel_codegen.py)."""
        return self._module

    @property
    def bound_weights(self) -> list[tuple[str, np.ndarray]]:
        """(symbol, array) of the weights the JIT binds by address (pipelines/jit/weights.py)."""
        return self._function.weights

    def _jit(self, llvm_module: ir.Module, signature: EntrySignature, opt_level: int) -> JitFunction:
        """The JIT of the host code: built now, for the host CPU's runtime libraries."""
        return JitFunction(llvm_module, signature, opt_level=opt_level)

    @property
    def stages(self) -> list[str]:
        """Names accepted by :meth:`ir`: ``"source"`` then each pipeline stage."""
        return list(self._stage_ir)

    def ir(self, stage: str = "llvm") -> str:
        """The IR after pipeline stage ``stage`` (``"source"``: what compilation started from)."""
        if stage not in self._stage_ir:
            raise IRNotKeptError(f"no IR kept for stage {stage!r}; stages: {', '.join(self._stage_ir)}")
        return self._stage_ir[stage]

    def dump_object_file(self, path: str) -> None:
        """Write the JIT-compiled machine code as an ELF object (inspect with llvm-objdump).
        The weights are not in it: the JIT binds them by address (pipelines/jit/weights.py), so
        their globals are undefined symbols there."""
        self._function.dump_object_file(path)

    def export_library(self, path: "str | os.PathLike[str]") -> Path:
        """Write this module as a package (TVM's ``export_library``): a ``.so`` path gets
        the shared library alone, any other path a ``.tar`` package (library + manifest +
        extern libraries); load either with ``tilecraft.runtime.load_module`` in any
        process, without MLIR. The module's IR is lowered again with its pipeline
        (compiler/package.py's ``export_library`` says why)."""
        if self._source is None and self.rebuild is not None:
            return self.rebuild().export_library(path)  # loaded from the compile cache
        if self._source is None:
            raise PackageError("this module was made without its source IR; compile it with "
                               "tilecraft.compile or tilecraft.build to export it")
        if not target_plugin(self.target.kind).writes_packages:
            raise PackageError(f"packages hold CPU code: a module compiled for '{self.target}' cannot be exported")
        # By name, as pipelines/passes.py names the pass definitions: the package writer
        # sits in compiler/, a layer above the compiled module it writes.
        writer = importlib.import_module("...compiler.package", __package__)
        return writer.export_library(self._source, self.signature, self.target, self.pipeline, path,
                                     opt_level=self._opt_level, output_names=self.output_names)

    def time_evaluator(self, name: str | None = None, *, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0.0) -> Callable[..., Timing]:
        """TVM's ``time_evaluator`` (runtime/timing.py): ``evaluator(*args)`` times calls of
        this module on those arguments and returns a :class:`Timing` (seconds per call:
        ``mean``, ``median``, ``min``...). ``name``, when given, must be the entry's."""
        if name is not None and name != self.signature.name:
            raise EntryPointError(f"no function {name!r} in this module; its entry is {self.signature.name!r}")
        return time_evaluator(self, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)

    # Whether this machine runs the code: checked on each call until it holds (a fixed
    # answer per process; the check reads the host's CPU flags).
    _runs_here = False

    def __call__(self, *args: Any, **kwargs: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        if not self._runs_here and not self.target.is_host:
            raise TargetError(
                f"compiled for {self.target}, which this machine cannot run "
                f"(features {', '.join(self.target.mattr) or 'none'})"
            )
        self._runs_here = True
        return self._invoke(args, kwargs)

    def _invoke(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> np.ndarray | tuple[np.ndarray, ...]:
        return self._function(args, kwargs)

    def __repr__(self) -> str:
        return f"<CompiledModule {self.signature} target={self.target}>"


def jit_module(
    llvm_module: ir.Module,
    signature: EntrySignature,
    pipeline: Pipeline,
    target: Target,
    *,
    opt_level: int = 3,
    stage_ir: Mapping[str, str] | None = None,
    source: ir.Module | None = None,
) -> CompiledModule:
    """The :class:`CompiledModule` (of the class ``target``'s plugin makes: the CPU's, CUDA's)
    of a module ``pipeline`` lowered; ``source``: a copy of the module before the pipeline
    (what ``export_library`` writes)."""
    return target_plugin(target.kind).jit(llvm_module, signature, pipeline, target, stage_ir=stage_ir or {},
                                          opt_level=opt_level, source=source)


def compile_ir(
    source: "str | bytes | ir.Module",
    pipeline: Pipeline,
    target: Target,
    *,
    entry: str | None = None,
    opt_level: int = 3,
    shape_dict: "Mapping[str, Sequence[int | None]] | None" = None,
) -> CompiledModule:
    """A source (any kind ``frontend/loader.py`` reads) lowered by ``pipeline`` and
    JIT-compiled: the compile step without the session around it (no packages or kept IR).
    The TE-style ``build`` and the tuner (candidates, the end-to-end comparison) compile
    through it."""
    context = ir.Context()
    module = load_module(source, context, shape_dict=shape_dict)
    with context, ir.Location.unknown():
        signature = entry_signature(find_entry(module, entry))
        source_copy = clone_module(module)
        pipeline.run(module)
    return jit_module(module, signature, pipeline, target, opt_level=opt_level, source=source_copy)


def clone_module(module: ir.Module) -> ir.Module:
    """A copy of ``module`` in its context: what a compiled module keeps of its source for
    ``export_library``. Why a clone and not bytecode: attributes are shared, so the weights
    are not copied (bytecode copies every weight, in time and memory, on every compile;
    docs/performance.md), and their arrays stay known to ir/resources.py."""
    copy = ir.Module.create(loc=module.operation.location)
    cloned = module.operation.clone()
    for index in range(len(cloned.attributes)):
        named = cloned.attributes[index]
        copy.operation.attributes[named.name] = named.attr
    for op in list(cloned.regions[0].blocks[0].operations):
        copy.body.append(op)
    cloned.erase()
    return copy
