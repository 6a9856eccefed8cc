"""tilecraft: a machine-learning compiler on upstream MLIR.

    import numpy as np, tilecraft
    module = tilecraft.compile("model.onnx", target="llvm")   # or MLIR text / a Module
    y = module(x)             # numpy in, numpy out; arguments checked first
    print(module.ir("schedule"))

    # TVM-style operator definition and scheduling (docs/scheduling.md)
    A, B = tilecraft.placeholder((M, K), name="A"), tilecraft.placeholder((K, N), name="B")

See docs/architecture.md for how a model travels from file to machine code.

Public names are resolved lazily (PEP 562): `import tilecraft.runtime` must work in a process
that has numpy and ctypes but no MLIR bindings (deployed packages), and `import tilecraft`
must not import torch or xgboost for users who never touch them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    CompileError,
    EntryPointError,
    ModelImportError,
    PipelineError,
    TargetError,
    TilecraftError,
)

from .runtime import library_isolation

library_isolation.install()  # TensorFlow (Keras, TFLite) and MLIR in one process, either order

__version__ = "0.1.0"

# public name -> (module relative to this package, attribute in it; None for the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "compile": (".compiler.compile", "compile"),
    "CompileOptions": (".compiler.options", "CompileOptions"),
    "load": (".compiler.source", "load"),
    "run": (".runtime.run", "run"),
    "Model": (".compiler.source", "Model"),
    "cpu_pipeline": (".pipelines.cpu", "cpu_pipeline"),
    "Pipeline": (".pipelines.pipeline", "Pipeline"),
    "Stage": (".pipelines.pipeline", "Stage"),
    "Target": (".pipelines.target", "Target"),
    "CompiledModule": (".pipelines.jit.compiled_module", "CompiledModule"),
    "CModel": (".targets.c.package", "CModel"),
    "PartitionedModule": (".compiler.partitioned", "PartitionedModule"),
    "Schedule": (".schedule.te", "Schedule"),
    "ScheduleError": (".schedule.te", "ScheduleError"),
    "build": (".schedule.te", "build"),
    "compute": (".schedule.te", "compute"),
    "placeholder": (".schedule.te", "placeholder"),
    "reduce_axis": (".schedule.te", "reduce_axis"),
    "torch": (".compiler.torch", None),
    "extern": (".runtime.extern", None),
    "remote": (".runtime.remote", None),
    "Backend": (".pipelines.offload", "Backend"),
    "register_backend": (".pipelines.offload", "register_backend"),
    "TransformSchedule": (".pipelines.offload", "TransformSchedule"),
    "tune": (".tuning.tune", "tune"),
    "TuneOptions": (".tuning.tune", "TuneOptions"),
    "template": (".tuning.templates", "template"),
    "extract_tasks": (".schedule.task", "extract_tasks"),
    "auto_scheduler": (".tuning.auto_scheduler", None),
    "topi": (".topi", None),
    "TargetPlugin": (".pipelines.target_registry", "TargetPlugin"),
    "register_target": (".pipelines.target_registry", "register_target"),
    "quantize": (".frontend.quantize", "quantize"),
}

# The operator-definition vocabulary as `tc.sum(...)`, `tc.exp(...)` (TVM's `te.sum`); kept
# out of __all__ because `from tilecraft import *` would shadow Python's sum/max/min/abs.
for _name in ("abs", "einsum", "exp", "if_then_else", "log", "max", "maximum", "min", "minimum",
              "prod", "sigmoid", "sqrt", "sum", "tanh", "var"):
    _LAZY[_name] = (".schedule.te", _name)
del _name

__all__ = [
    "ArgumentTypeError", "ArgumentValueError", "CompileError", "CompileOptions", "CompiledModule", "EntryPointError", "ModelImportError",
    "Pipeline", "PipelineError", "Schedule", "ScheduleError", "Stage", "Target", "TargetError",
    "TilecraftError", "build", "compile", "compute", "cpu_pipeline", "placeholder", "reduce_axis",
]


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Public module names that live elsewhere in the layout.

    ``tilecraft.torch`` is ``compiler/torch.py``: the repository root is this package, so a
    folder named ``torch`` there would shadow PyTorch itself for ``python -m ...`` run in a
    checkout. ``tilecraft.scheduling`` (the TE-style API, TVM users' ``te``) is
    ``schedule/te/``, beside the default schedules it shares its script writer with.
    ``tilecraft.extern`` is ``runtime/extern.py``: a deployed package reads its registry
    without MLIR. ``tilecraft.remote`` (sessions with a device's server) is
    ``runtime/remote.py``: a device may drive another with the runtime alone.
    ``tilecraft.auto_scheduler`` (TVM's auto-scheduler API on TE computes) is
    ``tuning/auto_scheduler.py``, beside the tuner it drives.
    """

    ALIASES = {f"{__name__}.torch": f"{__name__}.compiler.torch",
               f"{__name__}.scheduling": f"{__name__}.schedule.te",
               f"{__name__}.extern": f"{__name__}.runtime.extern",
               f"{__name__}.remote": f"{__name__}.runtime.remote",
               f"{__name__}.auto_scheduler": f"{__name__}.tuning.auto_scheduler"}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.ALIASES:
            prefix = next((a for a in self.ALIASES if fullname.startswith(a + ".")), None)
            if prefix is None:
                return None
            # a submodule of an alias (tilecraft.scheduling.compute): the real one
            module = importlib.import_module(self.ALIASES[prefix] + fullname[len(prefix):])
            sys.modules[fullname] = module
            return importlib.util.spec_from_loader(fullname, _AliasLoader(module))
        module = importlib.import_module(self.ALIASES[fullname])
        sys.modules[fullname] = module
        return importlib.util.spec_from_loader(fullname, _AliasLoader(module))


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, module: Any) -> None:
        self.module = module

    def create_module(self, spec: Any) -> Any:
        return self.module

    def exec_module(self, module: Any) -> None:
        """The aliased module ran when it was imported under its own name."""


if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())  # before the path finder, which would load a
    # second copy of an aliased submodule (tilecraft.scheduling.compute) under the alias name


def __getattr__(name: str) -> Any:
    """Import the module behind a public name on first use and cache the attribute."""
    try:
        module_name, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'tilecraft' has no attribute {name!r}") from None
    module = importlib.import_module(module_name, __name__)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
