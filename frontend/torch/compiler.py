"""``tilecraft.torch.compile``: an ``nn.Module`` and example inputs in, a callable on tensors out."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch
from mlir import ir
from torch.export import ExportedProgram
from torch.utils import _pytree as pytree

from ...errors import ArgumentTypeError, ArgumentValueError, TorchImportError
from ...pipelines.compiler import compile as compile_mlir
from ...runtime.compiled_module import CompiledModule
from .importer import import_program, numpy_dtype
from .ops import ATEN_OPS


def _training_submodules(module: torch.nn.Module) -> list[str]:
    return [name or type(module).__name__ for name, m in module.named_modules() if m.training]


def export(
    module: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor] | torch.Tensor,
    dynamic_shapes: Any = None,
) -> ExportedProgram:
    """``torch.export`` of ``module`` on ``example_inputs``, decomposed to core ATen ops.

    Raises ``TorchImportError`` for a module in training mode (its dropout and batch-norm
    behaviour would not be what an inference compiler computes) and for anything
    ``torch.export`` rejects, with PyTorch's explanation chained.
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"expected a torch.nn.Module, got {type(module).__name__}")
    training = _training_submodules(module)
    if training:
        shown = ", ".join(training[:5]) + (", ..." if len(training) > 5 else "")
        raise TorchImportError(
            f"the module is in training mode ({shown}): tilecraft compiles for inference; "
            "call module.eval() first")
    args = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    try:
        program = torch.export.export(module, args, dynamic_shapes=dynamic_shapes)
        return program.run_decompositions()
    except (torch._dynamo.exc.UserError, torch._dynamo.exc.Unsupported, RuntimeError, TypeError,
            ValueError, AssertionError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TorchImportError(f"torch.export could not trace the module: {first_line}") from error


def import_exported(program: ExportedProgram, context: ir.Context | None = None) -> ir.Module:
    """The MLIR module (one public ``@main``) of an exported, decomposed program."""
    return import_program(program, ATEN_OPS, context)


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

    def __repr__(self) -> str:
        return f"<CompiledTorchModule {self.compiled.signature}>"


def compile(
    module: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor] | torch.Tensor,
    dynamic_shapes: Any = None,
    target: str = "llvm",
    **options: Any,
) -> CompiledTorchModule:
    """Compile ``module`` (in eval mode) for ``target``; the result takes and returns tensors.

    Args:
      module: the ``torch.nn.Module`` (``module.eval()`` first).
      example_inputs: a tensor or a tuple of tensors, as the module's ``forward`` takes them.
      dynamic_shapes: ``torch.export``'s ``dynamic_shapes`` (e.g.
        ``{"x": {0: torch.export.Dim("batch")}}``); a dynamic dim becomes ``?`` in the IR.
      target: ``"llvm"`` for the host CPU, or ``"llvm -mcpu=... -mattr=..."``.
      options: passed on to :func:`tilecraft.compile` (``pipeline``, ``opt_level``, ``keep_ir``).
    """
    return compile_exported(export(module, example_inputs, dynamic_shapes), target, **options)


def compile_exported(program: ExportedProgram, target: str = "llvm", **options: Any) -> CompiledTorchModule:
    """Compile an exported, decomposed program (see :func:`compile` for the arguments)."""
    return CompiledTorchModule(compile_mlir(import_exported(program), target=target, **options), program)
