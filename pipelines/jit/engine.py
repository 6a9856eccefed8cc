"""JIT compilation of an LLVM-dialect module, and calling its entry with numpy arrays.

Shared by :class:`tilecraft.compiler.CompiledModule` (what ``tilecraft.compile`` returns)
and the graph stage's constant folding, which runs folded subgraphs once at compile time.
"""

from __future__ import annotations

import collections
import ctypes
import os
import shutil
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ...errors import CompileError
from ...runtime import kernel_timers, parallel_runtime
from ...runtime.checks import (REPORT_SYMBOL, TABLE_ATTRIBUTE, TAKE_SYMBOL, check_error, decode_table, report_address,
                              take_jit_failure, take_package_failure)
from ...runtime.extern import C_INTERFACE_PREFIX, raise_pending_error
from ...runtime.libraries import runtime_library
from ...runtime.malloc_policy import keep_freed_memory
from ...runtime.memref import CallFrame
from ...runtime.signature import EntrySignature
from ..tensor.extern import extern_functions
from . import parallel_codegen
from .weights import bind_resource_globals

# Runtime libraries the generated code may call into, handed to each JIT (the parallel-loop
# runtime is loaded once per process instead: runtime/parallel_runtime.py).
RUNTIME_LIBRARIES = ("mlir_c_runner_utils",)

# The most LLVM optimization the JIT runs. Why not 3: the code reaching LLVM is already
# tiled, vectorized and unrolled by the schedule; -O3 re-optimizes it at several times the
# CPU time of -O2 (the largest step of a cold compile) for run times within the noise of a shared machine and identical outputs
# (docs/performance.md, "Compile time: LLVM -O2 in the JIT").
MAX_JIT_LLVM_OPT_LEVEL = 2


def jit_llvm_opt_level(opt_level: int) -> int:
    """The LLVM optimization level the JIT uses for a compile at ``opt_level`` (0-3)."""
    return min(opt_level, MAX_JIT_LLVM_OPT_LEVEL)


# Why engines outlive their modules for a moment: a worker thread of the async runtime marks
# a parallel task complete and only then returns through the task's last instructions, which
# are JIT'ed code of the module. A module dropped right after its call would free that code
# under the worker (a rare segfault in whatever runs next). So a collected function's engine
# (and the IR context it compiled from) is retired, and released only after a grace period,
# when the next function is created.
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


def _declares(module: ir.Module, symbol: str) -> bool:
    """Whether the LLVM-dialect ``module`` declares (or defines) the function ``symbol``."""
    for op in module.body.operations:
        name = op.operation.attributes["sym_name"] if "sym_name" in op.operation.attributes else None
        if name is not None and ir.StringAttr(name).value == symbol:
            return True
    return False


class JitFunction:
    """The entry ``signature.name`` of ``llvm_module``, JIT-compiled at ``opt_level``.

    Calls check every argument against ``signature`` before native code runs.
    ``extra_libraries`` names further shared libraries when the engine is created. With
    ``lazy=True`` that happens on the first call (a CUDA module's engine runs constructors
    that load its kernels onto the GPU: not created where there is none).
    ``codegen_workers``: processes that compile the module's kernels while this one compiles
    the entry (pipelines/jit/parallel_codegen.py; None: ``$TILECRAFT_CODEGEN_WORKERS`` or
    the CPUs, 0: all code here). Only for eager engines without extra libraries.
    ``output_arguments``: the entry takes its results' destinations as trailing arguments
    (a CUDA module's host code; runtime/memref.py ``CallFrame``).
    """

    def __init__(
        self,
        llvm_module: ir.Module,
        signature: EntrySignature,
        *,
        opt_level: int = 3,
        extra_libraries: Callable[[], Sequence[str]] = tuple,
        lazy: bool = False,
        codegen_workers: int | None = None,
        output_arguments: bool = False,
    ) -> None:
        self.signature = signature
        self.module = llvm_module  # keeps the context alive as long as the engine
        self._opt_level = opt_level
        self._extra_libraries = extra_libraries
        self._engine: ExecutionEngine | None = None
        self._entry: Any = None
        self._codegen_workers = 0 if lazy else codegen_workers
        # What the parallel code generation did (None: the whole module was compiled here).
        self.codegen_parts: parallel_codegen.CodegenParts | None = None
        # (symbol, array) of the weights bound by address; the compile cache links them in.
        self.weights: list[tuple[str, np.ndarray]] = []
        self._output_arguments = output_arguments
        self._frame = CallFrame(signature, output_arguments=output_arguments)
        keep_freed_memory()  # intermediates reused across calls, not page-faulted anew
        # The messages of the run-time checks (pipelines/tensor/runtime_checks.py), by check id.
        attributes = llvm_module.operation.attributes
        self.check_table = (decode_table([ir.StringAttr(a).value for a in ir.ArrayAttr(attributes[TABLE_ATTRIBUTE])])
                            if TABLE_ATTRIBUTE in attributes else [])
        if not lazy:
            self._ensure_engine()

    def _ensure_engine(self) -> None:
        if self._engine is not None:
            return
        parallel_runtime.load()
        if _declares(self.module, kernel_timers.BEGIN):
            kernel_timers.library()  # a profiling variant: its timers, process-wide
        libraries = [*self._extra_libraries(), *(runtime_library(name) for name in RUNTIME_LIBRARIES)]
        # Extern functions (pipelines/tensor/extern.py): bound by address before the first lookup;
        # their libraries and callbacks live as long as the engine.
        externs = [(C_INTERFACE_PREFIX + extern.symbol_name, *extern.load()) for extern in extern_functions(self.module)]
        # Weights: bound by address too, not compiled as LLVM constants (pipelines/jit/weights.py).
        weights = bind_resource_globals(self.module)
        opt_level = jit_llvm_opt_level(self._opt_level)
        parts = None
        if self._codegen_workers != 0 and not self._extra_libraries() \
                and not _declares(self.module, kernel_timers.BEGIN):
            parts = parallel_codegen.plan(self.module, opt_level, self._codegen_workers, RUNTIME_LIBRARIES)
        try:
            if parts is not None:
                parts.start()  # the kernels compile in other processes from here on
            try:
                engine = ExecutionEngine(self.module, opt_level=opt_level, shared_libs=libraries)
            except RuntimeError as error:
                raise CompileError(f"LLVM could not JIT the module: {error}", stage="jit") from None
            kernels = parts.finish() if parts is not None else {}
        finally:
            if parts is not None:
                parts.cancel()
        for symbol, address in kernels.items():
            engine.raw_register_runtime(symbol, ctypes.c_void_p(address))
        for symbol, address, _ in externs:
            engine.raw_register_runtime(symbol, ctypes.c_void_p(address))
        if self.check_table:
            engine.raw_register_runtime(REPORT_SYMBOL, ctypes.c_void_p(report_address()))
        for symbol, array in weights:
            engine.raw_register_runtime(symbol, ctypes.c_void_p(array.ctypes.data))
        engine.initialize()
        self._entry = engine.lookup(self.signature.name)
        self._engine = engine
        self.weights = weights
        self.codegen_parts = parts.report if parts is not None else None
        _release_retired()
        weakref.finalize(self, _retire, engine, self.module, [owner for _, _, owner in externs],
                         [array for _, array in weights], self.codegen_parts)

    def entry(self, signature: EntrySignature) -> "JitFunction":
        """Another public function of the same module, from the same engine (the module is
        compiled once). The engine lives as long as the first function and its entries."""
        self._ensure_engine()
        other = JitFunction.__new__(JitFunction)
        other.signature = signature
        other.module = self.module
        other._opt_level = self._opt_level
        other._extra_libraries = self._extra_libraries
        other._engine = self._engine
        other._entry = self._engine.lookup(signature.name)
        other._output_arguments = self._output_arguments
        other._frame = CallFrame(signature, output_arguments=self._output_arguments)
        other._first = self  # keeps the engine from being retired
        other.weights = self.weights
        other.codegen_parts = self.codegen_parts
        other.check_table = self.check_table  # the module's messages, shared
        return other

    @property
    def engine(self) -> ExecutionEngine:
        self._ensure_engine()
        return self._engine

    def dump_object_file(self, path: "str | os.PathLike[str]") -> None:
        """The JIT-compiled machine code as an ELF object (weights are undefined symbols);
        code generated in parts is combined into one relocatable object."""
        parts = self.codegen_parts
        if parts is None:
            self.engine.dump_to_object_file(str(path))
            return
        with tempfile.TemporaryDirectory(prefix="tilecraft-object-") as scratch:
            objects = [Path(scratch) / "entry.o"]
            self.engine.dump_to_object_file(str(objects[0]))
            for index, code in enumerate(parts.objects):
                objects.append(Path(scratch) / f"part{index}.o")
                objects[-1].write_bytes(code)
            parallel_codegen.link_relocatable(Path(path), objects)

    def __call__(self, args: Sequence[Any], kwargs: dict[str, Any]) -> np.ndarray | tuple[np.ndarray, ...]:
        self._ensure_engine()
        # adopted first, so that results are freed also when a Python extern failed
        outputs = self._frame.call(self._entry, args, kwargs)
        raise_pending_error()
        if self.check_table:
            failure = take_jit_failure()
            if failure is not None:  # the outputs are freed with their arrays
                raise check_error(self.check_table, failure)
        return outputs

    def call_into(self, args: Sequence[Any], kwargs: dict[str, Any], destinations: Sequence[int]) -> None:
        """A call whose results go to ``destinations`` (``output_arguments`` entries only:
        runtime/memref.py ``CallFrame.call_into``)."""
        self._ensure_engine()
        self._frame.call_into(self._entry, args, kwargs, destinations)
        raise_pending_error()
        if self.check_table:
            failure = take_jit_failure()
            if failure is not None:
                raise check_error(self.check_table, failure)


def _load_global(path: str) -> ctypes.CDLL:
    """A runtime library's symbols made visible to libraries loaded after it."""
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


class LibraryFunction:
    """The entry ``signature.name`` of JIT-compiled code loaded back from a shared library:
    a hit of the compile cache (compiler/cache.py), called exactly as a :class:`JitFunction`.

    ``library`` is the JIT's object code linked with its weights and runtime_checks.c;
    the runtimes it calls (the parallel-loop runtime, MLIR's C runner utilities) are the
    process-wide ones the JIT binds too, loaded first with their symbols global. Raises
    ``OSError`` when the library does not load or lacks the entry (the cache then
    recompiles). ``check_messages``: the run-time checks' table, as
    ``TABLE_ATTRIBUTE`` holds it.
    """

    def __init__(self, library: "str | os.PathLike[str]", object_file: "str | os.PathLike[str]",
                 signature: EntrySignature, check_messages: Sequence[str]) -> None:
        parallel_runtime.load()
        for name in RUNTIME_LIBRARIES:
            _load_global(runtime_library(name))
        self.signature = signature
        self.check_table = decode_table(list(check_messages))
        self.weights: list[tuple[str, np.ndarray]] = []  # inside the library
        self._object_file = str(object_file)
        self._library = ctypes.CDLL(str(library), mode=ctypes.RTLD_LOCAL)
        try:
            # What ExecutionEngine.lookup finds: the packed (void **) wrapper of the C interface.
            entry = self._library[f"_mlir_{C_INTERFACE_PREFIX}{signature.name}"]
            take = self._library[TAKE_SYMBOL]
        except AttributeError as error:
            raise OSError(f"{library}: {error}") from None
        entry.restype = None
        entry.argtypes = [ctypes.c_void_p]
        take.restype = ctypes.c_int
        take.argtypes = [ctypes.POINTER(ctypes.c_int64)]
        self._entry, self._take = entry, take
        self._frame = CallFrame(signature)
        keep_freed_memory()

    def dump_object_file(self, path: "str | os.PathLike[str]") -> None:
        """The cached copy of the JIT's object code (weights are undefined symbols)."""
        shutil.copyfile(self._object_file, path)

    def __call__(self, args: Sequence[Any], kwargs: dict[str, Any]) -> np.ndarray | tuple[np.ndarray, ...]:
        outputs = self._frame.call(self._entry, args, kwargs)
        if self.check_table:
            failure = take_package_failure(self._take)
            if failure is not None:
                raise check_error(self.check_table, failure)
        return outputs
