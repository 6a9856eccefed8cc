"""``torch.export`` of an ``nn.Module`` and the import of the exported program into MLIR."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from mlir import ir
from torch.export import ExportedProgram

from ...errors import TorchImportError
from .importer import import_program
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
