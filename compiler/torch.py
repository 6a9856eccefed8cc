"""``tilecraft.torch``: an ``nn.Module`` and example inputs in, a callable on tensors out.

    import tilecraft.torch
    compiled = tilecraft.torch.compile(model.eval(), (x,))
    y = compiled(x)

``torch.compile(model, backend="tilecraft")`` is the other way in (compiler/dynamo.py).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..errors import TorchImportError
from ..frontend.torch.export import export, import_exported
from ..frontend.torch.ops import ATEN_OPS
from ..frontend.torchscript import is_script_module, torchscript_program
from .dynamo import tilecraft_backend
from .options import CompileOptions
from .torch_module import CompiledTorchModule, compile_exported

__all__ = ["ATEN_OPS", "CompiledTorchModule", "compile", "compile_exported", "export", "import_exported",
           "tilecraft_backend"]


def compile(
    module: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor] | torch.Tensor,
    dynamic_shapes: Any = None,
    options: CompileOptions | None = None,
    **overrides: Any,
) -> CompiledTorchModule:
    """Compile ``module`` (in eval mode) for ``target``; the result takes and returns tensors.

    Args:
      module: the ``torch.nn.Module`` (``module.eval()`` first), or a TorchScript module
        (``torch.jit.trace``/``torch.jit.script``/``torch.jit.load``; frontend/torchscript.py),
        compiled for the shapes of ``example_inputs``.
      example_inputs: a tensor or a tuple of tensors, as the module's ``forward`` takes them.
      dynamic_shapes: ``torch.export``'s ``dynamic_shapes`` (e.g.
        ``{"x": {0: torch.export.Dim("batch")}}``); a dynamic dim becomes ``?`` in the IR.
      options, overrides: as for :func:`tilecraft.compile` (``target=``, ``opt_level=``,
        ``pipeline=``, ``keep_ir=``, ...).
    """
    if is_script_module(module):
        if dynamic_shapes is not None:
            raise TorchImportError("dynamic_shapes applies to nn.Modules: a TorchScript module is "
                                   "compiled for the shapes of its example inputs")
        return compile_exported(torchscript_program(module, example_inputs), options, **overrides)
    return compile_exported(export(module, example_inputs, dynamic_shapes), options, **overrides)
