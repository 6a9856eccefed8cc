"""Turn whatever a user hands to ``tilecraft.compile`` into an MLIR module in our context.

Accepted: MLIR text or bytecode, an ``mlir.ir.Module`` (copied, never mutated), a path to an
``.mlir`` / ``.mlirbc`` / ``.onnx`` file, or an ``onnx.ModelProto``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Mapping, Sequence

from mlir import ir

from ..errors import CompileError, ModelImportError

MODEL_SUFFIXES = (".onnx", ".mlir", ".mlirbc")


def _is_onnx_proto(source: Any) -> bool:
    return type(source).__name__ == "ModelProto" and type(source).__module__.startswith("onnx")


def _as_path(source: Any) -> Path | None:
    if isinstance(source, Path):
        return source
    if isinstance(source, str) and "\n" not in source and source.strip().endswith(MODEL_SUFFIXES):
        return Path(source.strip())
    return None


def parse_mlir(source: "str | bytes", context: ir.Context) -> ir.Module:
    try:
        return ir.Module.parse(source, context=context)
    except ir.MLIRError as error:
        raise CompileError(f"could not parse the input module: {error}", stage="input") from None


def load_module(
    source: Any,
    context: ir.Context,
    *,
    shape_dict: Mapping[str, Sequence[int | None]] | None = None,
) -> ir.Module:
    """An MLIR module in ``context`` for ``source`` (see the module docstring)."""
    path = _as_path(source)
    if path is not None:
        if not path.is_file():
            raise ModelImportError(f"{path}: no such file")
        if path.suffix == ".onnx":
            source = path
        else:
            return parse_mlir(path.read_bytes() if path.suffix == ".mlirbc" else path.read_text(), context)
    if _is_onnx_proto(source) or isinstance(source, Path):
        from .onnx import import_model  # the onnx package is an optional dependency

        return import_model(source, shape_dict, context=context)
    if shape_dict:
        raise TypeError("shape_dict applies to ONNX models only")
    if isinstance(source, ir.Module):
        buffer = io.BytesIO()
        source.operation.write_bytecode(buffer)
        source = buffer.getvalue()
    if not isinstance(source, (str, bytes)):
        raise TypeError(
            "compile() takes MLIR text or bytecode, an mlir.ir.Module, an onnx.ModelProto or a "
            f"path to a .mlir/.onnx file, got {type(source).__name__}"
        )
    return parse_mlir(source, context)
