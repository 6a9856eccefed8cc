"""TFLite frontend: ``.tflite`` flatbuffers into the same IR as ONNX models.

``tflite_to_onnx(source)`` writes the model as an in-memory ONNX model (NHWC kept, int8
operators as QDQ patterns; see ``builder.py``), and ``import_tflite(source)`` imports that
through the ONNX frontend, so the layout pass, the QDQ rewrite onto the int8 kernels and
every ONNX op handler apply unchanged. Needs the extra ``tflite`` (the flatbuffer schema).
"""

from __future__ import annotations

import os

from mlir import ir

from .convert import tflite_to_onnx


def import_tflite(source: "str | bytes | os.PathLike[str]", *, context: ir.Context | None = None) -> ir.Module:
    """The TFLite model in ``source`` (a path or the flatbuffer bytes) as an MLIR module with
    one public function ``@main``.

    Raises:
      ModelImportError: a truncated or corrupt file, a wrong file identifier, or an
        unsupported operator (named with its operator index).
    """
    from ..onnx import import_model

    where = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "model.tflite"
    return import_model(tflite_to_onnx(source), context=context, name=where)


__all__ = ["import_tflite", "tflite_to_onnx"]
