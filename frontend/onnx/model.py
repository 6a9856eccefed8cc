"""Loading an ONNX model and reading what it declares: opset, inputs, outputs, weights, types."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import ml_dtypes
import numpy as np
import onnx
import onnx.version_converter
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from ...errors import ModelImportError

MIN_OPSET = 7
# The newest default-domain opset the installed onnx package defines: the handlers follow its
# schemas, so a newer opset (whose ops may have changed meaning) is refused, not guessed at.
MAX_OPSET = onnx.defs.onnx_opset_version()

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
    # Small types, as ml_dtypes dtypes (what onnx.numpy_helper gives for them too).
    onnx.TensorProto.BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    onnx.TensorProto.FLOAT8E4M3FN: np.dtype(ml_dtypes.float8_e4m3fn),
    onnx.TensorProto.FLOAT8E4M3FNUZ: np.dtype(ml_dtypes.float8_e4m3fnuz),
    onnx.TensorProto.FLOAT8E5M2: np.dtype(ml_dtypes.float8_e5m2),
    onnx.TensorProto.FLOAT8E5M2FNUZ: np.dtype(ml_dtypes.float8_e5m2fnuz),
    onnx.TensorProto.FLOAT4E2M1: np.dtype(ml_dtypes.float4_e2m1fn),
    onnx.TensorProto.INT4: np.dtype(ml_dtypes.int4),
    onnx.TensorProto.UINT4: np.dtype(ml_dtypes.uint4),
    onnx.TensorProto.INT2: np.dtype(ml_dtypes.int2),
    onnx.TensorProto.UINT2: np.dtype(ml_dtypes.uint2),
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
        except onnx.checker.ValidationError as error:  # external data outside the model's folder
            raise ModelImportError(f"{path}: external data refused: {_first_line(error)}") from error
        except (DecodeError, ValueError, RuntimeError, OSError) as error:
            raise ModelImportError(
                f"{path} is not a valid ONNX model (truncated or not ONNX): {_first_line(error)}"
            ) from error
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


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def as_ir4_if_initializers_unlisted(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto``, or a copy marked IR version 4 when it is older and has initializers that are
    not listed as graph inputs.

    Below IR version 4 every initializer had to be listed as a graph input too. onnxruntime's
    quantization tool adds scales and zero points to such models (an opset-9 ResNet-50 from
    the zoo) without listing them; onnxruntime runs the result. An initializer is a constant
    either way for this importer, so those models are read as IR version 4. Both the checker
    and shape inference must see that version: at IR 3 ONNX's shape inference ignores the
    unlisted initializers, so a QuantizeLinear output (typed by its zero point) got no element
    type and its uint8 values were read as int8 (a wrong answer, not an error).
    """
    if proto.ir_version < 4:
        inputs = {value.name for value in proto.graph.input}
        if any(t.name not in inputs for t in proto.graph.initializer):
            proto = onnx.ModelProto.FromString(proto.SerializeToString())
            proto.ir_version = 4
    return proto


def check_model(proto: onnx.ModelProto) -> None:
    """ONNX's structural checker (run after the unsupported-operator check, which lists more),
    with :func:`as_ir4_if_initializers_unlisted`'s leniency."""
    proto = as_ir4_if_initializers_unlisted(proto)
    try:
        onnx.checker.check_model(proto)
    except (onnx.checker.ValidationError, UnicodeDecodeError) as error:  # names that are not UTF-8
        raise ModelImportError(f"the ONNX model is malformed: {str(error).splitlines()[0]}") from error


def upgrade_old_opset(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Models older than :data:`MIN_OPSET` go through ONNX's own version converter; models
    newer than :data:`MAX_OPSET` are refused with the supported range.

    Why it is sound: the converter applies the ONNX-maintained adapters op by op and refuses
    (raises) when an op cannot be expressed in the newer opset; we never guess.
    """
    opset = default_opset(proto)
    if opset > MAX_OPSET:
        raise ModelImportError(
            f"opset {opset} is newer than this importer supports (opsets {MIN_OPSET}..{MAX_OPSET}; "
            f"older ones are upgraded to {MIN_OPSET})"
        )
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
    """The model's version of the default operator set. A model made only of other domains'
    ops (a scikit-learn pipeline in ai.onnx.ml) need not import it: it gets the newest
    version the onnx package knows, which then only versions its types and shape inference."""
    for entry in proto.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    if proto.graph.node and all(node.domain not in ("", "ai.onnx") for node in proto.graph.node):
        return onnx.defs.onnx_opset_version()
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
        if t.HasField("optional_type") and t.optional_type.elem_type.HasField("tensor_type"):
            # An optional tensor is carried as the tensor itself (ops/sequence.py's Optional*).
            t = t.optional_type.elem_type
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


def checked_with_shapes(proto: onnx.ModelProto,
                        shape_dict: Mapping[str, Sequence[int | None]] | None) -> onnx.ModelProto:
    """:func:`check_model`, then :func:`infer_shapes` with ``shape_dict``'s input shapes."""
    check_model(proto)
    return infer_shapes(proto, shape_dict)


# Float initializers above this many elements reach shape inference without their data:
# no shape computation reads them (shapes, scales, pads and axes are small tensors).
_LARGE_WEIGHT = 4096
_FLOAT_DATA_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                               onnx.TensorProto.BFLOAT16})


def _without_large_weights(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, set[str]]:
    """A copy of ``proto`` whose large float initializers keep their name, type and dims but
    not their data, and the names of those (none: ``proto`` itself).

    Why: ONNX's shape inference takes the model serialized and returns it serialized, all
    of it: ResNet-50's 100 MB of weights were copied four times to infer shapes that only
    their dims decide (0.25-0.36 CPU s against 0.005 s without them)."""
    def large(tensor: onnx.TensorProto) -> bool:
        return tensor.data_type in _FLOAT_DATA_TYPES and math.prod(tensor.dims) > _LARGE_WEIGHT

    stripped = {t.name for t in proto.graph.initializer if large(t)}
    if not stripped:
        return proto, stripped
    skeleton = onnx.ModelProto()
    for field, value in proto.ListFields():
        if field.name != "graph":
            _copy_field(skeleton, field.name, value)
    for field, value in proto.graph.ListFields():
        if field.name != "initializer":
            _copy_field(skeleton.graph, field.name, value)
    for tensor in proto.graph.initializer:
        if tensor.name in stripped:
            skeleton.graph.initializer.add(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims)
        else:
            skeleton.graph.initializer.add().CopyFrom(tensor)
    return skeleton, stripped


def _copy_field(message: object, name: str, value: object) -> None:
    """Set field ``name`` of protobuf ``message`` to a copy of ``value`` (repeated, message or scalar)."""
    target = getattr(message, name)
    if hasattr(target, "extend"):
        target.extend(value)
    elif hasattr(target, "CopyFrom"):
        target.CopyFrom(value)
    else:
        setattr(message, name, value)


def infer_shapes(proto: onnx.ModelProto,
                 shape_dict: Mapping[str, Sequence[int | None]] | None = None) -> onnx.ModelProto:
    """ONNX shape inference with data propagation (so Shape->Gather->Reshape chains resolve)
    on ``proto`` with ``shape_dict``'s input shapes (:func:`override_input_shapes`), then
    :func:`check_type_agreement`. The large weights' data skips the inference
    (:func:`_without_large_weights`) and is put back into its result."""
    skeleton, stripped = _without_large_weights(proto)
    try:
        inferred = onnx.shape_inference.infer_shapes(override_input_shapes(skeleton, shape_dict),
                                                     strict_mode=False, data_prop=True)
    except (onnx.shape_inference.InferenceError, UnicodeDecodeError) as error:
        raise ModelImportError(f"ONNX shape inference failed: {_first_line(error)}") from error
    if stripped:
        originals = {tensor.name: tensor for tensor in proto.graph.initializer if tensor.name in stripped}
        for tensor in inferred.graph.initializer:
            if tensor.name in originals:
                tensor.CopyFrom(originals[tensor.name])
    check_type_agreement(inferred)
    return inferred


def check_type_agreement(proto: onnx.ModelProto) -> None:
    """:class:`ModelImportError` naming the node when inputs that the op's schema binds to one
    type variable have different element types (an int64 weight feeding a float MatMul).

    Why not ONNX's ``check_type``: it also refuses types outside a schema's list, and the
    handlers deliberately accept more (``Relu`` on uint8); disagreeing inputs are never valid
    and used to import as a module of the wrong meaning.
    """
    graph = proto.graph
    elem_types = {t.name: t.data_type for t in graph.initializer}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            elem_types.setdefault(value.name, value.type.tensor_type.elem_type)
    opset = default_opset(proto)
    for position, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, "")
        except (onnx.defs.SchemaError, TypeError):  # unknown op, or a name that is not UTF-8
            continue
        formals = list(schema.inputs)
        bound: dict[str, tuple[str, int]] = {}
        for index, name in enumerate(node.input):
            if not name or name not in elem_types or not formals:
                continue
            formal = formals[min(index, len(formals) - 1)]
            variadic = formal.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
            if index >= len(formals) and not variadic:
                continue
            if variadic and not formal.is_homogeneous:
                continue  # Loop's/Scan's states: each element has its own type
            if formal.type_str not in {c.type_param_str for c in schema.type_constraints}:
                continue
            earlier = bound.setdefault(formal.type_str, (name, elem_types[name]))
            if earlier[1] != elem_types[name]:
                label = node.name or f"{node.op_type}_{position}"
                raise ModelImportError(
                    f"node {label!r} ({node.op_type}): inputs {earlier[0]!r} "
                    f"({_type_name(earlier[1])}) and {name!r} "
                    f"({_type_name(elem_types[name])}) must have one element "
                    f"type ({formal.type_str})",
                    problems=[(label, node.op_type, "inputs of different element types")],
                )


def _type_name(code: int) -> str:
    """The ONNX name of an element type code; a code no ONNX version defines (corrupt bytes)
    is named by its number instead of raising protobuf's ValueError."""
    try:
        return onnx.TensorProto.DataType.Name(code)
    except ValueError:
        return f"element type {code}"


def initializers(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """The graph's weights as numpy arrays (external data is loaded by onnx.load)."""
    arrays = {}
    for tensor in graph.initializer:
        try:
            arrays[tensor.name] = numpy_helper.to_array(tensor)
        except (ValueError, TypeError) as error:  # data of another length than the dims say
            raise ModelImportError(f"initializer {tensor.name!r}: its data does not fit its shape "
                                   f"{list(tensor.dims)}: {_first_line(error)}") from error
    return arrays
