"""The numpy arrays behind the ``dense_resource`` weights tilecraft creates.

Why this table exists: MLIR 22's Python bindings make a ``DenseResourceElementsAttr`` over a
buffer without copying it (``get_from_buffer`` keeps the array alive and points the blob at
its memory), but give no way back from the attribute to those bytes other than printing the
module's resource section as hex (ResNet-50: 200 MB of text). The steps that need the
weights as bytes — the constant folder (they are its JIT's arguments) and the JIT, which
binds weight globals to their arrays by address instead of handing LLVM megabytes of
constants (pipelines/jit/weights.py) — read them here instead.

:func:`resource_attr` is the one place tilecraft creates resource attributes (the ONNX and
PyTorch importers and the folder go through ``ir/core.constant``); it records the
array under the blob's handle, per MLIR context, weakly: the entries go with the context,
which owns the blobs. A resource that did not come from here (an ``.mlir`` file with a
``dialect_resources`` section) has no entry, and :func:`resource_array` returns ``None``:
callers fall back to the printed text or leave the weight where it is.

Arrays are stored 64-byte aligned (copied once here if they are not), because the JIT's
weight globals promise LLVM that alignment.
"""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np
from mlir import ir

# What the lowered weight globals declare (bufferization gives constant memref.globals
# alignment 64); an array bound to such a global must honour it.
ALIGNMENT = 64

_PREFIX = "dense_resource<"
_arrays: "weakref.WeakKeyDictionary[ir.Context, dict[str, np.ndarray]]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def aligned(array: np.ndarray, alignment: int = ALIGNMENT) -> np.ndarray:
    """``array`` itself when C-contiguous with its data ``alignment``-byte aligned, else a copy
    that is (same dtype and shape)."""
    if array.flags.c_contiguous and array.ctypes.data % alignment == 0:
        return array
    raw = np.empty(array.nbytes + alignment, dtype=np.uint8)
    offset = -raw.ctypes.data % alignment
    copy = raw[offset:offset + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def resource_handle(attr: ir.Attribute) -> str | None:
    """The blob handle of a ``dense_resource`` attribute as it prints (``w_1``, or
    ``"quoted name"``); ``None`` for any other attribute."""
    text = str(attr)
    if not text.startswith(_PREFIX):
        return None
    return text[len(_PREFIX):text.rindex("> : ")]


def resource_attr(array: np.ndarray, name: str, tensor_type: ir.RankedTensorType) -> ir.Attribute:
    """A ``dense_resource`` attribute of ``tensor_type`` over ``array``'s bytes (not copied,
    unless to align them), remembered for :func:`resource_array`. MLIR may rename the blob
    (``name_1``) when ``name`` is taken in this context."""
    array = aligned(np.asarray(array))
    attr = ir.DenseResourceElementsAttr.get_from_buffer(array, name, tensor_type)
    handle = resource_handle(attr)
    with _lock:
        table = _arrays.get(attr.context)
        if table is None:
            table = _arrays[attr.context] = {}
        table[handle] = array
    return attr


def _expected_bytes(attr: ir.Attribute) -> int | None:
    """The byte size ``attr``'s type implies; ``None`` when not static or not whole bytes."""
    shaped = ir.ShapedType(attr.type)
    width = getattr(shaped.element_type, "width", None)  # float and integer types
    if width == 1:  # i1: a byte per element, as numpy's bools
        width = 8
    if width is None:
        return None
    if not shaped.has_static_shape or width % 8:
        return None
    return math.prod(shaped.shape) * (width // 8)


def resource_array(attr: ir.Attribute) -> np.ndarray | None:
    """The array a ``dense_resource`` attribute was made from by :func:`resource_attr` (its
    bytes are the blob's), or ``None``: not a resource, made elsewhere, or of another byte
    size than the attribute's type says (then the table is not trusted)."""
    handle = resource_handle(attr)
    if handle is None:
        return None
    with _lock:
        table = _arrays.get(attr.context)
        array = None if table is None else table.get(handle)
    if array is None or array.nbytes != _expected_bytes(attr):
        return None
    return array


# numpy dtypes of the element types whose constants the compiler reads back.
NUMPY_TYPES = {
    "f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
    "i16": np.int16, "i8": np.int8,
}
# What constants of these types are read back as (NUMPY_TYPES and bools, a byte each).
_STORED_TYPES = {**NUMPY_TYPES, "i1": np.bool_}


def _resource_blobs(text: str) -> dict[str, tuple[int, int]]:
    """Resource name -> where its hex data lies in ``text`` (``start, end``), from the
    printed resource section: one ``name: "0x..."`` or ``"quoted name": "0x..."`` line per
    blob (ONNX names hold '/', ':', ...; a quoted name is kept escaped, as ``str(attr)``
    prints it). Why offsets and ``str.find`` rather than one regex over the section:
    ResNet-50's section is 200 MB of hex, which a multiline regex scanned in 0.8 s, and
    copies of it (slices, lines, matched groups) raised the compile's peak memory by as much."""
    blobs = {}
    marker = ': "0x'
    position = text.rindex("{-#")
    while (key_end := text.find(marker, position)) >= 0:
        key = text[max(position, text.rfind("\n", position, key_end) + 1):key_end].strip()
        start = key_end + len(marker)
        end = text.index('"', start)
        blobs[key[1:-1] if key.startswith('"') else key] = (start, end)
        position = end + 1
    return blobs


def is_resource_constant(op: ir.Operation) -> bool:
    """Whether ``op`` is an ``arith.constant`` holding a ``dense_resource`` blob."""
    return op.name == "arith.constant" and str(op.attributes["value"]).startswith("dense_resource<")


def resource_arrays(constants: list[ir.Operation]) -> list[np.ndarray]:
    """The values of ``dense_resource`` constants: the arrays tilecraft made them from
    (ir/resources.py), else read from the printed resource section.

    Why printing for the others (a model given as ``.mlir`` text with its resources):
    MLIR 22's ``DenseResourceElementsAttr`` has no buffer accessor in Python; the printer
    writes each blob as ``name: "0x<4-byte alignment><data>"``."""
    arrays: list[np.ndarray | None] = []
    for op in constants:
        tensor_type = ir.RankedTensorType(op.results[0].type)
        known = resource_array(op.attributes["value"])
        arrays.append(None if known is None else
                      known.view(_STORED_TYPES[str(tensor_type.element_type)]).reshape(tensor_type.shape))
    unknown = [op for op, array in zip(constants, arrays) if array is None]
    if not unknown:
        return arrays
    with unknown[0].context, ir.Location.unknown():
        holder = ir.Module.create()
        with ir.InsertionPoint(holder.body):
            for op in unknown:
                op.clone()
        text = holder.operation.get_asm(print_generic_op_form=True)
    blobs = _resource_blobs(text)
    printed = iter(unknown)
    for position, array in enumerate(arrays):
        if array is not None:
            continue
        op = next(printed)
        name = resource_handle(op.attributes["value"])
        name = name[1:-1] if name.startswith('"') else name
        tensor_type = ir.RankedTensorType(op.results[0].type)
        dtype = _STORED_TYPES[str(tensor_type.element_type)]
        start, end = blobs[name]
        data = bytes.fromhex(text[start + 8:end])  # the first 4 bytes are the alignment
        arrays[position] = np.frombuffer(data, dtype=dtype).reshape(tensor_type.shape).copy()
    return arrays


def literal_array(value: ir.Value) -> np.ndarray | None:
    """The values of ``value`` when an ``arith.constant`` defines it (else ``None``)."""
    if not isinstance(value, ir.OpResult):
        return None
    owner = value.owner
    constant = owner.operation if hasattr(owner, "operation") else owner
    if constant.name != "arith.constant" or not isinstance(value.type, ir.RankedTensorType):
        return None
    if str(ir.RankedTensorType(value.type).element_type) not in _STORED_TYPES:
        return None
    return constant_array(constant)


def constant_array(constant: ir.Operation) -> np.ndarray:
    """The value of an ``arith.constant`` tensor of a :data:`NUMPY_TYPES` element type (or
    i1, as bools), as a numpy array of its shape: dense (splat or not) or ``dense_resource``."""
    tensor_type = ir.RankedTensorType(constant.results[0].type)
    dtype = _STORED_TYPES[str(tensor_type.element_type)]
    value = constant.attributes["value"]
    if isinstance(value, ir.DenseElementsAttr):
        dense = ir.DenseElementsAttr(value)
        if dense.is_splat:
            splat = dense.get_splat_value()
            scalar = ir.FloatAttr(splat).value if isinstance(splat, ir.FloatAttr) else ir.IntegerAttr(splat).value
            return np.full(tensor_type.shape, scalar, dtype)
        return np.array(dense).view(dtype).reshape(tensor_type.shape)
    return resource_arrays([constant])[0]
