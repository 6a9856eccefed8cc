"""A TFLite model as an ONNX model: the walk over its operators, and the boundary.

The model's inputs and outputs keep their TFLite names, types and NHWC shapes (an int8
model converted with int8 inputs takes int8 arrays), so a tilecraft-compiled model is
called exactly as LiteRT's interpreter is.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from ...errors import ModelImportError
from .builder import ONNX_TYPES, ConversionError, Converter, OpContext
from .flatbuffer import TYPE_NAMES, Graph, read_model
from .operators import CONVERTERS

# ONNX opset of the models written (Gelu and Resize's axes need 18-20).
OPSET = 20


def read_source(source: "str | bytes | os.PathLike[str]") -> tuple[bytes, str]:
    """(the flatbuffer's bytes, what errors call it) for a path or the bytes themselves."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), "model.tflite"
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise ModelImportError(f"{path}: no such file")
        return path.read_bytes(), str(path)
    raise ModelImportError(f"expected a .tflite path or its bytes, got {type(source).__name__}")


def tflite_to_onnx(source: "str | bytes | os.PathLike[str]") -> onnx.ModelProto:
    """The TFLite model in ``source`` (a path or the flatbuffer bytes) as an ONNX model.

    Raises:
      ModelImportError: a truncated or corrupt file, a wrong file identifier, or operators
        the frontend does not convert (every one listed, with its operator index).
    """
    data, where = read_source(source)
    model = read_model(data, where)
    return convert_graph(model, where)


def convert_graph(model: Graph, where: str) -> onnx.ModelProto:
    unsupported = [(f"operator {op.index}", op.name, "no converter") for op in model.operators
                   if op.name not in CONVERTERS]
    if unsupported:
        listing = "; ".join(f"{name} ({index})" for index, name, _ in unsupported)
        raise ModelImportError(f"{where}: {len(unsupported)} unsupported TFLite operator(s): {listing}",
                               problems=unsupported)
    converter = Converter(model)
    inputs = []
    for index in model.inputs:
        tensor = model.tensors[index]
        name = _boundary_name(tensor.name, index)
        converter.values[index] = name
        inputs.append(_value_info(name, tensor.dtype, tensor.shape, tensor.type, where))
    for op in model.operators:
        try:
            CONVERTERS[op.name](OpContext(converter, op))
        except ConversionError as error:
            raise ModelImportError(f"{where}: operator {op.index} ({op.name}): {error}",
                                   problems=[(f"operator {op.index}", op.name, str(error))]) from None
    outputs, nodes = [], list(converter.onnx.nodes)
    for index in model.outputs:
        tensor = model.tensors[index]
        name = _boundary_name(tensor.name, index)
        if index not in converter.values:
            converter.raw_value(index)  # a constant output
        nodes.append(helper.make_node("Identity", [converter.values[index]], [name], name=f"output/{name}"))
        outputs.append(_value_info(name, tensor.dtype, tensor.shape, tensor.type, where))
    graph = helper.make_graph(nodes, "tflite", inputs, outputs, initializer=converter.onnx.initializers)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tilecraft-tflite")
    proto.ir_version = 9
    return proto


def _boundary_name(name: str, index: int) -> str:
    """Inputs and outputs keep the TFLite tensor's name (made unique by its index if the
    converter's own names could clash)."""
    return name if "/" not in name or not name.split("/")[-1].isdigit() else f"{name}:{index}"


def _value_info(name: str, dtype: object, shape: tuple[int, ...], kind: int, where: str) -> onnx.ValueInfoProto:
    element = ONNX_TYPES.get(np.dtype(dtype))
    if element is None:
        raise ModelImportError(f"{where}: tensor {name!r} has type {TYPE_NAMES.get(kind, kind)}, which the "
                               "TFLite frontend does not take at the model's boundary")
    return helper.make_tensor_value_info(name, element, list(shape))
