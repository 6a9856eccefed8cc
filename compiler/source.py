"""``tilecraft.load``: a model file or object described as tvmc describes it (inputs,
outputs, operator histogram), ready for :func:`tilecraft.compile`.

    model = tilecraft.load("resnet50.onnx", shape_dict={"data": [1, 3, 224, 224]})
    print(model.summary())
    tilecraft.compile(model, target="llvm", package_path="resnet50.tar")

The source kinds and their import live in one place, ``frontend/loader.py``; this module
only reads what a user wants to know about a model before compiling it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from mlir import ir

from ..errors import EntryPointError, ModelImportError
from ..frontend.formats import detect_format
from ..frontend.loader import (
    Model,
    TensorInfo,
    existing_file,
    exported_program_bytecode,
    is_exported_program,
    load_module,
    read_exported_program,
    resolve_source,
    source_path,
    unsupported_source,
)
from ..pipelines.jit.entry import entry_signature, find_entry

__all__ = ["Model", "TensorInfo", "load"]


def _onnx_tensor_info(value: Any, overrides: Mapping[str, Sequence[int | None]]) -> TensorInfo:
    from onnx import helper

    tensor = value.type.tensor_type
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)).name if tensor.elem_type else "?"
    if value.name in overrides:
        shape = tuple(None if d is None else int(d) for d in overrides[value.name])
    elif tensor.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
    else:
        shape = None
    return TensorInfo(value.name, dtype, shape)


def _onnx_model(source: Any, path: Path | None, shape_dict: dict[str, list[int | None]] | None) -> Model:
    from ..frontend.onnx.model import infer_shapes, load_model, override_input_shapes

    proto = load_model(path if path is not None else source)
    weights = {t.name for t in proto.graph.initializer}
    graph_inputs = [v for v in proto.graph.input if v.name not in weights]
    unknown = sorted(set(shape_dict or {}) - {v.name for v in graph_inputs})
    if unknown:
        raise ModelImportError(
            f"shape_dict names {unknown}, which are not inputs of the model; inputs: "
            f"{[v.name for v in graph_inputs]}"
        )
    operators: dict[str, int] = {}
    for node in proto.graph.node:
        operators[node.op_type] = operators.get(node.op_type, 0) + 1
    return Model(
        proto,
        shape_dict,
        path.name if path is not None else (proto.graph.name or "model"),
        [_onnx_tensor_info(v, shape_dict or {}) for v in graph_inputs],
        [_onnx_tensor_info(v, {}) for v in infer_shapes(override_input_shapes(proto, shape_dict)).graph.output],
        operators,
    )


def _tflite_operators(path: Path) -> dict[str, int]:
    """The histogram of a TFLite model's own operators (the model is compiled as the ONNX
    model the TFLite frontend translates it into; a user reads the operators of their file)."""
    from ..frontend.tflite.flatbuffer import read_model  # the 'tflite' extra

    operators: dict[str, int] = {}
    for op in read_model(path.read_bytes(), str(path)).operators:
        operators[op.name] = operators.get(op.name, 0) + 1
    return operators


def _mlir_model(source: "str | bytes", name: str) -> Model:
    """A model of MLIR text or bytecode, its inputs and outputs read from the entry function
    (none listed when the module has several public functions: compile picks with entry=)."""
    context = ir.Context()
    module = load_module(source, context)
    try:
        with context:
            signature = entry_signature(find_entry(module, None))
    except EntryPointError:
        return Model(source, None, name)
    return Model(
        source, None, name,
        [TensorInfo(s.name, s.dtype.name, s.shape) for s in signature.arguments],
        [TensorInfo(s.name, s.dtype.name, s.shape) for s in signature.results],
    )


def _read_text(path: Path) -> str:
    """MLIR text; a file that is not UTF-8 (a binary, a model of another format) is a
    :class:`ModelImportError`, not Python's ``UnicodeDecodeError``."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ModelImportError(
            f"{path} is not UTF-8 text (byte {error.start}); MLIR bytecode is read from a .mlirbc file"
        ) from None


def load(source: Any, shape_dict: Mapping[str, Sequence[int | None]] | None = None,
         model_format: str | None = None) -> Model:
    """Load a model from any source ``tilecraft.compile`` accepts (``frontend/loader.py``).

    ``shape_dict`` fixes ONNX and Keras input shapes (``None`` keeps a dimension dynamic),
    as in ``tvmc.load(..., shape_dict=...)``, and gives a TorchScript module's input shapes;
    unknown input names raise :class:`ModelImportError`. ``model_format`` (``"onnx"``,
    ``"torch"``, ``"torchscript"``, ``"keras"``, ``"tflite"``, ``"mlir"``) names a file's
    format where its suffix does not; the content must agree with it.
    """
    shape_dict = {k: list(v) for k, v in shape_dict.items()} if shape_dict else None
    if isinstance(source, Model):
        if shape_dict is None:
            return source
        source = source.source
    resolved = resolve_source(source, shape_dict, model_format)
    if resolved.source is not source:
        model = load(resolved.source, resolved.shape_dict)
        if resolved.name:
            model.name = resolved.name
        model.torch_program = resolved.torch_program or model.torch_program
        original = source_path(source)
        if original is not None and detect_format(original, model_format) == "tflite":
            model.operators = _tflite_operators(original)
        return model
    path = source_path(source)
    if path is not None:
        path = existing_file(path)
    onnx_source = path.suffix == ".onnx" if path is not None else type(source).__name__ == "ModelProto"
    if onnx_source:
        return _onnx_model(source, path, shape_dict)
    if shape_dict:
        raise ModelImportError("shape_dict applies to ONNX models only")
    program = None
    if path is not None and path.suffix == ".pt2":
        program = read_exported_program(path)
    elif is_exported_program(source):
        program = source
    if program is not None:
        model = _mlir_model(exported_program_bytecode(program), path.name if path else "program.pt2")
        model.torch_program = program
        return model
    if path is not None:
        return _mlir_model(path.read_bytes() if path.suffix == ".mlirbc" else _read_text(path), path.name)
    if isinstance(source, ir.Module):
        return _mlir_model(source.operation.get_asm(binary=True), "module.mlirbc")
    if isinstance(source, (str, bytes)):
        return _mlir_model(source, "module.mlir")
    raise unsupported_source(source)
