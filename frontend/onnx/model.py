"""Loading an ONNX model and reading what it declares: opset, inputs, outputs, weights, types."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import onnx
import onnx.version_converter
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from ...errors import ModelImportError

MIN_OPSET = 7

# ONNX TensorProto element types tilecraft handles, as numpy dtypes.
ONNX_DTYPES: dict[int, np.dtype] = {
    onnx.TensorProto.FLOAT: np.dtype(np.float32),
    onnx.TensorProto.DOUBLE: np.dtype(np.float64),
    onnx.TensorProto.FLOAT16: np.dtype(np.float16),
    onnx.TensorProto.BOOL: np.dtype(np.bool_),
    onnx.TensorProto.INT8: np.dtype(np.int8),
    onnx.TensorProto.UINT8: np.dtype(np.uint8),
    onnx.TensorProto.INT16: np.dtype(np.int16),
    onnx.TensorProto.UINT16: np.dtype(np.uint16),
    onnx.TensorProto.INT32: np.dtype(np.int32),
    onnx.TensorProto.UINT32: np.dtype(np.uint32),
    onnx.TensorProto.INT64: np.dtype(np.int64),
    onnx.TensorProto.UINT64: np.dtype(np.uint64),
}


def onnx_dtype(elem_type: int, where: str) -> np.dtype:
    """numpy dtype of an ONNX element type, or :class:`ModelImportError` naming ``where``."""
    if elem_type not in ONNX_DTYPES:
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else elem_type
        raise ModelImportError(f"{where}: element type {name} is not supported")
    return ONNX_DTYPES[elem_type]


def load_model(model: "str | Path | bytes | onnx.ModelProto") -> onnx.ModelProto:
    """Read and validate a model; every failure is a :class:`ModelImportError`."""
    if isinstance(model, onnx.ModelProto):
        proto = model
    elif isinstance(model, (str, Path)):
        path = Path(model)
        if not path.is_file():
            raise ModelImportError(f"{path}: no such ONNX file")
        try:
            proto = onnx.load(str(path))
        except (DecodeError, ValueError, RuntimeError) as error:
            raise ModelImportError(f"{path} is not a valid ONNX model (truncated or not ONNX): {error}") from error
    elif isinstance(model, bytes):
        try:
            proto = onnx.load_from_string(model)
        except (DecodeError, ValueError, RuntimeError) as error:
            raise ModelImportError(f"the bytes given are not a valid ONNX model: {error}") from error
    else:
        raise ModelImportError(
            f"expected an ONNX file path, bytes or onnx.ModelProto, got {type(model).__name__}"
        )
    if not proto.HasField("graph") or not proto.graph.output:
        raise ModelImportError("the ONNX model has no graph or no graph outputs (truncated or not ONNX?)")
    return proto


def check_model(proto: onnx.ModelProto) -> None:
    """ONNX's structural checker (run after the unsupported-operator check, which lists more)."""
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as error:
        raise ModelImportError(f"the ONNX model is malformed: {str(error).splitlines()[0]}") from error


def upgrade_old_opset(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Models older than :data:`MIN_OPSET` go through ONNX's own version converter.

    Why it is sound: the converter applies the ONNX-maintained adapters op by op and refuses
    (raises) when an op cannot be expressed in the newer opset; we never guess.
    """
    opset = default_opset(proto)
    if opset >= MIN_OPSET:
        return proto
    try:
        return onnx.version_converter.convert_version(proto, MIN_OPSET)
    except Exception as error:  # the converter raises plain RuntimeError/ValueError subclasses
        raise ModelImportError(
            f"opset {opset} is older than the oldest supported ({MIN_OPSET}) and ONNX's version "
            f"converter could not upgrade it: {str(error).splitlines()[0]}"
        ) from error


def default_opset(proto: onnx.ModelProto) -> int:
    for entry in proto.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    raise ModelImportError("the model imports no version of the default ONNX operator set")


@dataclass(frozen=True)
class TensorInfo:
    """An ONNX value's declared type: dtype and dims (int, or None where symbolic/unknown)."""

    name: str
    dtype: np.dtype
    shape: tuple[int | None, ...] | None  # None: rank unknown


def value_infos(graph: onnx.GraphProto) -> dict[str, TensorInfo]:
    """Types of every value shape inference (or the model) declares."""
    infos = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        t = value.type
        if not t.HasField("tensor_type") or not t.tensor_type.elem_type:
            continue
        if t.tensor_type.elem_type not in ONNX_DTYPES:
            continue
        shape = None
        if t.tensor_type.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None
                for d in t.tensor_type.shape.dim
            )
        infos[value.name] = TensorInfo(value.name, ONNX_DTYPES[t.tensor_type.elem_type], shape)
    return infos


def override_input_shapes(
    proto: onnx.ModelProto, shape_dict: Mapping[str, Sequence[int | None]] | None
) -> onnx.ModelProto:
    """A copy of ``proto`` whose graph inputs have the shapes given in ``shape_dict``.

    ``None`` (or a negative number) in a shape keeps that dimension dynamic.
    """
    if not shape_dict:
        return proto
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    inputs = {value.name: value for value in proto.graph.input}
    unknown = sorted(set(shape_dict) - set(inputs))
    if unknown:
        raise ModelImportError(f"shape_dict names unknown inputs {unknown}; inputs: {sorted(inputs)}")
    for name, dims in shape_dict.items():
        shape = inputs[name].type.tensor_type.shape
        del shape.dim[:]
        for extent in dims:
            dim = shape.dim.add()
            if extent is None or int(extent) < 0:
                dim.dim_param = f"{name}_dynamic_{len(shape.dim) - 1}"
            else:
                dim.dim_value = int(extent)
    return proto


def infer_shapes(proto: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX shape inference with data propagation (so Shape->Gather->Reshape chains resolve)."""
    try:
        return onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    except onnx.shape_inference.InferenceError as error:
        raise ModelImportError(f"ONNX shape inference failed: {error}") from error


def initializers(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """The graph's weights as numpy arrays (external data is loaded by onnx.load)."""
    return {tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer}
