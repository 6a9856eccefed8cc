"""Model importers (ONNX in ``onnx/``, PyTorch in ``torch/``) into linalg/tensor/arith/math,
through the framework-neutral emitters in ``emit/``."""

from __future__ import annotations

from typing import Callable

from mlir import ir

from ..errors import ModelImportError


def build_module(
    context: ir.Context | None, build: Callable[[ir.Module], None], error: type[ModelImportError]
) -> ir.Module:
    """A new module filled by ``build`` and verified. Why one place: an importer bug that
    emits invalid IR must surface as the frontend's typed import error, not later as an
    unexplained compile failure."""
    context = context or ir.Context()
    with context, ir.Location.unknown():
        module = ir.Module.create()
        build(module)
        try:
            module.operation.verify()
        except ir.MLIRError as failure:
            raise error(f"the imported IR does not verify: {failure}") from failure
    return module
