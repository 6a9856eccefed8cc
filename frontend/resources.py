"""The numpy arrays behind the ``dense_resource`` weights tilecraft creates.

Why this table exists: MLIR 22's Python bindings make a ``DenseResourceElementsAttr`` over a
buffer without copying it (``get_from_buffer`` keeps the array alive and points the blob at
its memory), but give no way back from the attribute to those bytes other than printing the
module's resource section as hex (ResNet-50: 200 MB of text). The steps that need the
weights as bytes — the constant folder (they are its JIT's arguments) and the JIT, which
binds weight globals to their arrays by address instead of handing LLVM megabytes of
constants (pipelines/weights.py) — read them here instead.

:func:`resource_attr` is the one place tilecraft creates resource attributes (the ONNX and
PyTorch importers and the folder go through ``frontend/emit/core.constant``); it records the
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
