"""A compiled entry function, callable with numpy arrays."""

from __future__ import annotations

import collections
import ctypes
import threading
import time
import weakref
from typing import Any, Mapping

import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ..errors import CompileError, TargetError
from ..pipelines.pipeline import Pipeline
from ..pipelines.target import Target
from .libraries import cuda_runtime_library, load_process_wide, runtime_library
from .memref import adopt_results, describe, results_type, scalar_ctype
from .signature import EntrySignature

# Runtime libraries the generated code may call into: handed to each JIT...
RUNTIME_LIBRARIES = ("mlir_c_runner_utils",)
# ...or loaded once per process (the async runtime for parallel loops, whose per-engine
# destroy hook would reset the runtime under every other module; see load_process_wide).
PROCESS_WIDE_LIBRARIES = ("mlir_async_runtime",)

# Why engines outlive their modules for a moment: a worker thread of the async runtime marks
# a parallel task complete and only then returns through the task's last instructions, which
# are JIT'ed code of the module. A module dropped right after its call would free that code
# under the worker (a rare segfault in whatever runs next). So a collected module's engine
# (and the IR context it compiled from) is retired, and released only after a grace period,
# when the next module is created.
_RETIREMENT_GRACE_S = 1.0
_retired: collections.deque[tuple[float, tuple[Any, ...]]] = collections.deque()
_retired_lock = threading.Lock()


def _retire(*owned: Any) -> None:
    with _retired_lock:
        _retired.append((time.monotonic(), owned))


def _release_retired() -> None:
    now = time.monotonic()
    with _retired_lock:
        while _retired and now - _retired[0][0] > _RETIREMENT_GRACE_S:
            _retired.popleft()


class CompiledModule:
    """The result of :func:`tilecraft.compile`.

    Call it with numpy arrays, positionally or by argument name; it returns one array, or a
    tuple for several results. Arrays own their memory. Every argument is checked against
    :attr:`signature` first, so a wrong call raises instead of reaching native code.
    """

    # How many fusion groups the graph stage formed; set by tilecraft.compile, None when the
    # pipeline did not run tilecraft-fuse-ops or tilecraft-mark-groups.
    group_count: int | None = None
    # How many kernels (top-level loop nests and copies, pipelines/group_schedule.py's
    # count_kernels) the schedule stage left; None when the pipeline has no such stage.
    kernel_count: int | None = None

    def __init__(
        self,
        llvm_module: ir.Module,
        signature: EntrySignature,
        *,
        target: Target,
        pipeline: Pipeline,
        stage_ir: Mapping[str, str],
        opt_level: int = 3,
    ) -> None:
        self._describe(llvm_module, signature, target, pipeline, stage_ir)
        for name in PROCESS_WIDE_LIBRARIES:
            load_process_wide(name)
        try:
            self._engine = ExecutionEngine(
                llvm_module,
                opt_level=opt_level,
                shared_libs=[runtime_library(name) for name in RUNTIME_LIBRARIES],
            )
        except RuntimeError as error:
            raise CompileError(f"LLVM could not JIT the module: {error}", stage="jit") from None
        self._engine.initialize()
        self._entry = self._engine.lookup(signature.name)
        self._results_type = results_type([len(spec.shape) for spec in signature.results])
        _release_retired()
        weakref.finalize(self, _retire, self._engine, self._module)

    def _describe(
        self, llvm_module: ir.Module, signature: EntrySignature, target: Target, pipeline: Pipeline,
        stage_ir: Mapping[str, str],
    ) -> None:
        """What every compiled module knows about itself, whichever way it runs its code."""
        self.signature = signature
        self.target = target
        self.pipeline = pipeline
        self._stage_ir = dict(stage_ir)
        self._module = llvm_module  # keeps the context alive as long as the engine

    @property
    def stages(self) -> list[str]:
        """Names accepted by :meth:`ir`: ``"source"`` then each pipeline stage."""
        return list(self._stage_ir)

    def ir(self, stage: str = "llvm") -> str:
        """The IR after pipeline stage ``stage`` (``"source"``: what compilation started from)."""
        if stage not in self._stage_ir:
            raise KeyError(f"no IR kept for stage {stage!r}; stages: {', '.join(self._stage_ir)}")
        return self._stage_ir[stage]

    def dump_object_file(self, path: str) -> None:
        """Write the JIT-compiled machine code as an ELF object (inspect with llvm-objdump)."""
        self._engine.dump_to_object_file(str(path))

    def __call__(self, *args: Any, **kwargs: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        if not self.target.is_host:
            raise TargetError(
                f"compiled for {self.target}, which this machine cannot run "
                f"(features {', '.join(self.target.mattr) or 'none'})"
            )
        return self._invoke(args, kwargs)

    def _invoke(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> np.ndarray | tuple[np.ndarray, ...]:
        arrays = self.signature.bind(args, kwargs)
        keep_alive: list[Any] = []
        packed: list[Any] = []
        results = self._results_type() if self._results_type is not None else None
        if results is not None:
            result_pointer = ctypes.pointer(results)
            keep_alive.append(result_pointer)
            packed.append(ctypes.pointer(result_pointer))
        for spec, array in zip(self.signature.arguments, arrays):
            if spec.is_scalar:
                value = scalar_ctype(array)
                keep_alive.append(value)
                packed.append(ctypes.pointer(value))
            else:
                descriptor_pointer = ctypes.pointer(describe(array))
                keep_alive.append(descriptor_pointer)
                packed.append(ctypes.pointer(descriptor_pointer))
        argv = (ctypes.c_void_p * len(packed))(*[ctypes.cast(p, ctypes.c_void_p) for p in packed])
        self._entry(argv)
        if results is None:
            return ()
        return adopt_results(results, self.signature, arrays)

    def __repr__(self) -> str:
        return f"<CompiledModule {self.signature} target={self.target}>"


class CudaCompiledModule(CompiledModule):
    """A module compiled for ``cuda -arch=...``: host code plus kernels in ``gpu.binary`` ops.

    Compiling needs no GPU: the PTX (:meth:`ptx`) and, where ``ptxas`` is installed, the
    cubin (:meth:`cubin`) are in hand right away. The JIT is created on the first call, with
    MLIR's CUDA runtime wrappers (``libmlir_cuda_runtime.so``), because those link against
    the CUDA driver: without one, calling raises :class:`DeviceUnavailableError` (creating
    the JIT anyway would abort the process on unresolved ``mgpu*`` symbols). The calling
    convention is the CPU one: numpy arrays in (copied to the device by the compiled host
    code), fresh numpy arrays out (copied back).
    """

    def __init__(
        self,
        llvm_module: ir.Module,
        signature: EntrySignature,
        *,
        target: Target,
        pipeline: Pipeline,
        stage_ir: Mapping[str, str],
        opt_level: int = 3,
    ) -> None:
        self._describe(llvm_module, signature, target, pipeline, stage_ir)
        self._opt_level = opt_level
        self._engine = None
        self._entry = None
        self._results_type = results_type([len(spec.shape) for spec in signature.results])

    def _binaries(self) -> dict[str, ir.Operation]:
        from ..pipelines.cuda.lowering import gpu_binaries

        return {ir.StringAttr(b.attributes["sym_name"]).value: b
                for b in gpu_binaries(self._module.operation)}

    def ptx_modules(self) -> dict[str, str]:
        """Kernel module name -> its PTX (one PTX file each, as ptxas takes them)."""
        from ..pipelines.cuda.lowering import binary_ptx

        return {name: binary_ptx(b) for name, b in self._binaries().items()}

    def ptx(self) -> str:
        """The PTX of every kernel module, one after the other (for reading and grepping)."""
        return "\n".join(self.ptx_modules().values())

    def cubin(self) -> dict[str, bytes]:
        """Kernel module name -> cubin (ELF) from ptxas; empty when ptxas was not found."""
        from mlir.dialects import gpu

        cubins = {}
        for name, binary in self._binaries().items():
            obj = gpu.ObjectAttr(ir.ArrayAttr(binary.attributes["objects"])[0])
            if obj.format == int(gpu.CompilationTarget.Binary):
                cubins[name] = bytes(obj.object)
        return cubins

    def _ensure_engine(self) -> None:
        if self._engine is not None:
            return
        libraries = [cuda_runtime_library(), *(runtime_library(n) for n in RUNTIME_LIBRARIES)]
        try:
            self._engine = ExecutionEngine(self._module, opt_level=self._opt_level,
                                           shared_libs=libraries)
        except RuntimeError as error:
            raise CompileError(f"LLVM could not JIT the module: {error}", stage="jit") from None
        self._engine.initialize()
        self._entry = self._engine.lookup(self.signature.name)

    def __call__(self, *args: Any, **kwargs: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        self._ensure_engine()
        return self._invoke(args, kwargs)
