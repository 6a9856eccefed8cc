"""A ``.tflite`` flatbuffer read once into plain Python objects, every access checked.

Why read eagerly: the ``tflite`` package's accessors decode the flatbuffer lazily, and on a
truncated or corrupt file they raise whatever the decoding stumbles on (``struct.error``,
``IndexError``, a ``UnicodeDecodeError``) at whatever later point first touches the bad
bytes. Reading everything here, inside one guard, turns any of those into one
``ModelImportError`` naming the file, and leaves the converter with values that cannot fail.
"""

from __future__ import annotations

import inspect
import struct
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...errors import ModelImportError

# The file identifier at bytes 4..8 of every TFLite model (schema.fbs: file_identifier "TFL3").
FILE_IDENTIFIER = b"TFL3"

# TensorType -> numpy dtype (the types a float or 8-bit quantized model holds).
NUMPY_TYPES: dict[int, Any] = {
    0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_,
    7: np.int16, 9: np.int8, 10: np.float64, 12: np.uint64, 15: np.uint32, 16: np.uint16,
}
TYPE_NAMES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL",
              7: "INT16", 8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64",
              13: "RESOURCE", 14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4", 18: "BFLOAT16"}


@dataclass(frozen=True)
class Quantization:
    """Affine quantization of one tensor: ``real = scale * (q - zero_point)``, per tensor
    (one scale) or per channel along ``axis``."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int

    @property
    def per_tensor(self) -> bool:
        return self.scale.size == 1


@dataclass
class Tensor:
    index: int
    name: str
    type: int
    shape: tuple[int, ...]
    data: np.ndarray | None  # the constant's value (weights), None for activations
    quantization: Quantization | None

    @property
    def dtype(self) -> Any:
        return NUMPY_TYPES[self.type]


@dataclass
class Operator:
    index: int
    name: str  # BuiltinOperator name, "CUSTOM:<code>" for a custom op
    inputs: list[int]  # tensor indices, -1 for an omitted optional input
    outputs: list[int]
    options: Any  # the options table's fields as accessors (``options.StrideH()``), or None


@dataclass
class Graph:
    """The main subgraph: what the converter walks."""

    tensors: list[Tensor]
    operators: list[Operator]
    inputs: list[int]
    outputs: list[int]
    subgraph_count: int = 1
    description: str = field(default="")


def read_model(data: bytes, where: str) -> Graph:
    """The main subgraph of the TFLite model in ``data``; ``where`` names it in errors.

    Raises:
      ModelImportError: not a TFLite flatbuffer (identifier), truncated or corrupt (any
        offset outside the file), or holding tensor types the frontend does not read.
    """
    if len(data) < 8:
        raise ModelImportError(f"{where}: {len(data)} bytes is too short for a TFLite flatbuffer")
    if data[4:8] != FILE_IDENTIFIER:
        raise ModelImportError(
            f"{where}: not a TFLite model (file identifier {bytes(data[4:8])!r}, expected {FILE_IDENTIFIER!r})")
    try:
        import tflite  # the flatbuffer schema package: an optional dependency
    except ImportError:
        raise ModelImportError(f"{where}: reading TFLite models needs the 'tflite' extra "
                               "(pip install 'tilecraft[tflite]')") from None

    try:
        return _read(tflite, data, where)
    except ModelImportError:
        raise
    except (struct.error, IndexError, ValueError, TypeError, UnicodeDecodeError, OverflowError, AttributeError) as error:
        raise ModelImportError(f"{where}: truncated or corrupt TFLite flatbuffer ({type(error).__name__}: {error})") from None


def _checked_offset(data: bytes, offset: int, where: str) -> None:
    if not 0 <= offset < len(data):
        raise ModelImportError(f"{where}: truncated or corrupt TFLite flatbuffer (offset {offset} outside its "
                               f"{len(data)} bytes)")


def _read(tflite: Any, data: bytes, where: str) -> Graph:
    root = struct.unpack_from("<I", data, 0)[0]
    _checked_offset(data, root, where)
    model = tflite.Model.GetRootAsModel(data, 0)
    if model.SubgraphsLength() < 1:
        raise ModelImportError(f"{where}: the TFLite model has no subgraph")
    codes = []
    for j in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(j)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == tflite.BuiltinOperator.CUSTOM:
            custom = code.CustomCode()
            codes.append(f"CUSTOM:{custom.decode('utf-8', 'replace') if custom else '?'}")
        else:
            codes.append(tflite.utils.BUILTIN_OPCODE2NAME.get(builtin, f"BUILTIN_{builtin}"))
    buffers = [_buffer(model.Buffers(j), data, where, j) for j in range(model.BuffersLength())]
    subgraph = model.Subgraphs(0)
    tensors = [_tensor(subgraph.Tensors(t), t, buffers, where) for t in range(subgraph.TensorsLength())]
    operators = []
    for position in range(subgraph.OperatorsLength()):
        op = subgraph.Operators(position)
        opcode = op.OpcodeIndex()
        if not 0 <= opcode < len(codes):
            raise ModelImportError(f"{where}: operator {position} has opcode index {opcode}, but the model "
                                   f"lists {len(codes)} operator codes")
        name = codes[opcode]
        inputs = [int(i) for i in (op.InputsAsNumpy() if op.InputsLength() else [])]
        outputs = [int(i) for i in (op.OutputsAsNumpy() if op.OutputsLength() else [])]
        for t in [*inputs, *outputs]:
            if not -1 <= t < len(tensors):
                raise ModelImportError(f"{where}: operator {position} ({name}) refers to tensor {t}, but the "
                                       f"subgraph has {len(tensors)}")
        operators.append(Operator(position, name, inputs, outputs, _options(tflite, op, name)))
    graph_inputs = [int(i) for i in (subgraph.InputsAsNumpy() if subgraph.InputsLength() else [])]
    graph_outputs = [int(i) for i in (subgraph.OutputsAsNumpy() if subgraph.OutputsLength() else [])]
    for t in [*graph_inputs, *graph_outputs]:
        if not 0 <= t < len(tensors):
            raise ModelImportError(f"{where}: the subgraph's inputs/outputs name tensor {t}, but it has {len(tensors)}")
    description = model.Description()
    return Graph(tensors, operators, graph_inputs, graph_outputs, model.SubgraphsLength(),
                 description.decode("utf-8", "replace") if description else "")


def _buffer(buffer: Any, data: bytes, where: str, index: int) -> bytes:
    """A buffer's bytes: inline, or (models over 2 GB) at an offset in the file after the
    flatbuffer."""
    offset = buffer.Offset()
    if offset > 1:
        size = buffer.Size()
        if offset + size > len(data):
            raise ModelImportError(f"{where}: buffer {index} lies at bytes {offset}..{offset + size}, past the end "
                                   f"of the {len(data)}-byte file (truncated)")
        return bytes(data[offset:offset + size])
    if buffer.DataIsNone() or buffer.DataLength() == 0:
        return b""
    # DataLength reads the vector's length word; the vector itself must fit in the file.
    start = buffer._tab.Vector(buffer._tab.Offset(4))
    if start + buffer.DataLength() > len(data):
        raise ModelImportError(f"{where}: buffer {index} runs past the end of the file (truncated)")
    return buffer.DataAsNumpy().tobytes()


def _tensor(tensor: Any, index: int, buffers: list[bytes], where: str) -> Tensor:
    name = (tensor.Name() or b"").decode("utf-8", "replace") or f"tensor_{index}"
    kind = tensor.Type()
    shape = tuple(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
    if any(d < 0 for d in shape):
        raise ModelImportError(f"{where}: tensor {index} ({name!r}) has a negative dimension in shape {list(shape)}")
    buffer_index = tensor.Buffer()
    if not 0 <= buffer_index < max(len(buffers), 1):
        raise ModelImportError(f"{where}: tensor {index} ({name!r}) refers to buffer {buffer_index}, but the model "
                               f"has {len(buffers)}")
    raw = buffers[buffer_index] if buffers else b""
    value = None
    if raw:
        if kind not in NUMPY_TYPES:
            raise ModelImportError(f"{where}: constant tensor {index} ({name!r}) has type "
                                   f"{TYPE_NAMES.get(kind, kind)}, which the TFLite frontend does not read")
        dtype = np.dtype(NUMPY_TYPES[kind])
        count = int(np.prod(shape, dtype=np.int64))
        if len(raw) != count * dtype.itemsize:
            raise ModelImportError(f"{where}: constant tensor {index} ({name!r}) of shape {list(shape)} "
                                   f"{TYPE_NAMES[kind]} needs {count * dtype.itemsize} bytes, its buffer has {len(raw)}")
        value = np.frombuffer(raw, dtype=dtype).reshape(shape)
    return Tensor(index, name, kind, shape, value, _quantization(tensor.Quantization()))


def _quantization(parameters: Any) -> Quantization | None:
    if parameters is None or parameters.ScaleLength() == 0:
        return None
    scale = parameters.ScaleAsNumpy().astype(np.float32)
    zero = parameters.ZeroPointAsNumpy().astype(np.int64) if parameters.ZeroPointLength() else np.zeros(
        scale.shape, np.int64)
    return Quantization(scale, zero, int(parameters.QuantizedDimension()))


def _options(tflite: Any, op: Any, name: str) -> Any:
    """The op's builtin options as the schema class of its union member (``Conv2DOptions``)."""
    table = op.BuiltinOptions()
    if table is None:
        return None
    kind = op.BuiltinOptionsType()
    member = next((n for n, v in vars(tflite.BuiltinOptions).items() if v == kind and not n.startswith("_")), None)
    options_class = getattr(tflite, member, None) if member else None
    if options_class is None:
        return None
    options = options_class()
    options.Init(table.Bytes, table.Pos)
    return _decoded(options)


def _decoded(options: Any) -> SimpleNamespace:
    """Every field of an options table read now (inside the caller's guard), as the same
    zero-argument accessors (``options.StrideH()``): a corrupt table fails here, as a
    ModelImportError, not later inside a converter."""
    fields = {}
    for name, accessor in inspect.getmembers(type(options), inspect.isfunction):
        if name.startswith("_") or name in ("Init",) or name.startswith("GetRootAs") or name.endswith("IsNone"):
            continue
        if len(inspect.signature(accessor).parameters) != 1:  # vector elements (j): read AsNumpy instead
            continue
        value = accessor(options)
        fields[name] = (lambda v: lambda: v)(value)
    return SimpleNamespace(**fields)
