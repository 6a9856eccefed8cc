"""TensorFlow and MLIR's Python bindings in one process, imported in either order.

Both carry their own copy of LLVM. TensorFlow loads its libraries with ``RTLD_GLOBAL``, and
MLIR's JIT loads its runtime libraries process-wide too; whichever comes second binds its
LLVM calls to the first one's copy: ``import keras`` then ``from mlir import ir`` segfaults
in MLIR's initializers, and ``import tensorflow`` after a JIT-compiled model aborts on an
LLVM assertion in TensorFlow's CPU check. Loading the second one with ``RTLD_DEEPBIND``
makes it resolve its own symbols first, and both work (tests/frontend/test_loader_formats.py
imports them in both orders). Only the second import is deep-bound: deep binding breaks
libraries that rely on interposed symbols, so it is applied only where it is needed.

Installed by ``tilecraft/__init__.py`` as an import hook; standard library only, because a
deployed package imports ``tilecraft`` without MLIR.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from typing import Any

# Each library family's package (it and its submodules are deep-bound) -> the module whose
# presence shows the other family is loaded.
_PAIRS = {"tensorflow": "mlir._mlir_libs", "mlir._mlir_libs": "tensorflow"}


class _DeepBindLoader(importlib.abc.Loader):
    """The real loader, run with ``RTLD_DEEPBIND`` added to the interpreter's dlopen flags."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return _deep_bound(self.loader.create_module, spec)  # an extension module's dlopen

    def exec_module(self, module: Any) -> None:
        _deep_bound(self.loader.exec_module, module)  # a package's __init__ and its imports


def _deep_bound(function: Any, argument: Any) -> Any:
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | os.RTLD_DEEPBIND)
    try:
        return function(argument)
    finally:
        sys.setdlopenflags(flags)


class DeepBindFinder(importlib.abc.MetaPathFinder):
    """Deep-binds ``tensorflow`` when MLIR's libraries are loaded, and MLIR's when
    TensorFlow is."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        family = next((f for f in _PAIRS if fullname == f or fullname.startswith(f + ".")), None)
        if family is None or _PAIRS[family] not in sys.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _DeepBindLoader(spec.loader)
        return spec


def install() -> None:
    """Add the finder once (a no-op where ``RTLD_DEEPBIND`` does not exist: not Linux)."""
    if not hasattr(os, "RTLD_DEEPBIND") or not hasattr(sys, "setdlopenflags"):
        return
    if not any(isinstance(finder, DeepBindFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, DeepBindFinder())
