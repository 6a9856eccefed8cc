"""A compiled PyTorch program called like the module: tensors in, tensors out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch.export import ExportedProgram
from torch.utils import _pytree as pytree

from ..errors import ArgumentTypeError, ArgumentValueError
from ..frontend.torch.export import import_exported
from ..pipelines.jit.compiled_module import CompiledModule
from ..runtime.timing import Timing, time_evaluator
from .compile import compile as compile_mlir
from .options import CompileOptions


class CompiledTorchModule:
    """A compiled ``nn.Module``: call it with tensors like the module, get tensors back.

    Inputs are handed to the native code as numpy views of the tensors' memory (a copy is
    made only for non-contiguous tensors); results are numpy arrays owned by the compiled
    code, wrapped by ``torch.from_numpy`` without copying.
    """

    def __init__(self, compiled: CompiledModule, program: ExportedProgram) -> None:
        self.compiled = compiled
        self.program = program
        self._in_spec = program.call_spec.in_spec
        self._out_spec = program.call_spec.out_spec

    @property
    def signature(self):  # noqa: ANN201 - the runtime's EntrySignature
        return self.compiled.signature

    @property
    def accuracy(self):  # noqa: ANN201 - compiler/precision.py's AccuracyReport
        """The accuracy report of a ``precision="bf16"`` compile (docs/precision.md); ``None``
        for an f32 one."""
        return getattr(self.compiled, "accuracy", None)

    def ir(self, stage: str = "llvm") -> str:
        """The IR after pipeline stage ``stage`` (``"source"``: the imported linalg)."""
        return self.compiled.ir(stage)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        flat, spec = pytree.tree_flatten((args, kwargs))
        if self._in_spec is not None and spec != self._in_spec:
            raise ArgumentValueError(
                f"the call's arguments are structured as {spec}, the example inputs as {self._in_spec}")
        arrays = []
        for position, value in enumerate(flat):
            if not isinstance(value, torch.Tensor):
                raise ArgumentTypeError(f"argument {position} is a {type(value).__name__}, not a torch.Tensor")
            if value.device.type != "cpu":
                raise ArgumentTypeError(f"argument {position} is on {value.device}; compiled code runs on the CPU")
            arrays.append(value.detach().resolve_conj().resolve_neg().numpy())
        results = self.compiled(*arrays)
        results = results if isinstance(results, tuple) else (results,)
        tensors = [torch.from_numpy(np.asarray(r)) for r in results]
        return pytree.tree_unflatten(tensors, self._out_spec) if self._out_spec is not None else tensors

    def export_library(self, path: "str | os.PathLike[str]") -> Path:
        """Write the compiled program as a package (``CompiledModule.export_library``); the
        loaded package takes and returns numpy arrays, the program's inputs flattened."""
        return self.compiled.export_library(path)

    def time_evaluator(self, name: str | None = None, *, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0.0) -> Callable[..., Timing]:
        """As ``CompiledModule.time_evaluator``, timing calls with tensors, as the module is called."""
        self.compiled.time_evaluator(name)  # the entry name check
        return time_evaluator(self, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)

    def __repr__(self) -> str:
        return f"<CompiledTorchModule {self.compiled.signature}>"


def compile_exported(program: ExportedProgram, options: CompileOptions | None = None,
                     **overrides: Any) -> CompiledTorchModule:
    """Compile an exported, decomposed program (see :func:`compile` for the arguments)."""
    return CompiledTorchModule(compile_mlir(import_exported(program), options, **overrides), program)
