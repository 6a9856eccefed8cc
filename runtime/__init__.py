"""Running compiled code from Python: entry signatures, memref descriptors, CompiledModule.

Names resolve lazily so that the parts that need only numpy and ctypes (deployed packages)
import in a process without the MLIR bindings. ``CompiledModule`` (the JIT's module, which
needs MLIR) lives in pipelines/jit/compiled_module.py, a higher layer: it is named here by its
absolute module path, resolved only when asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "CompiledModule": "tilecraft.pipelines.jit.compiled_module",
    "EntrySignature": ".signature",
    "Package": ".package",
    "load": ".package",
    "load_module": ".package",
    "time_evaluator": ".timing",
    "TensorSpec": ".signature",
    "sign_package": ".package_signing",
    "generate_key": ".package_signing",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    try:
        module_name = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'tilecraft.runtime' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module_name, __name__), name)
    globals()[name] = value
    return value
