"""MLIR memref descriptors in ctypes, and numpy arrays that own returned buffers.

A ranked memref crosses the C interface as ``{allocated, aligned, offset, sizes[r],
strides[r]}``. Arguments point at the caller's (contiguous) numpy data. Results are buffers
the compiled code allocated with ``malloc`` and handed over (the ownership-based
deallocation pipeline guarantees returned memrefs are owned by the caller); they become
numpy arrays without a copy, and ``free`` runs when the last array view is collected.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import weakref
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .signature import EntrySignature

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
_LIBC.free.argtypes = [ctypes.c_void_p]
_LIBC.free.restype = None


@cache
def descriptor_type(rank: int) -> type[ctypes.Structure]:
    """The ctypes struct of a rank-``rank`` memref descriptor (element type erased)."""
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64)]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRefDescriptor{rank}", (ctypes.Structure,), {"_fields_": fields})


def describe(array: np.ndarray) -> ctypes.Structure:
    """A descriptor viewing ``array`` (which must stay alive while the descriptor is used)."""
    if not array.flags.c_contiguous:
        raise ValueError("memref descriptors are built from C-contiguous arrays only")
    descriptor = descriptor_type(array.ndim)()
    address = array.ctypes.data
    descriptor.allocated = address
    descriptor.aligned = address
    descriptor.offset = 0
    if array.ndim:
        descriptor.sizes[:] = array.shape
        descriptor.strides[:] = [s // array.itemsize for s in array.strides] if array.size else [0] * array.ndim
    return descriptor


def adopt_result(descriptor: ctypes.Structure, dtype: np.dtype, rank: int, *, owned: bool) -> np.ndarray:
    """Turn a returned descriptor into a numpy array.

    With ``owned`` the array takes over the allocation (freed with the array); otherwise the
    data is copied, for a buffer that is also returned in another position.
    """
    shape = tuple(descriptor.sizes[:rank]) if rank else ()
    strides = tuple(descriptor.strides[:rank]) if rank else ()
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0 or not descriptor.aligned:
        if owned and descriptor.allocated:
            _LIBC.free(descriptor.allocated)
        return np.empty(shape, dtype)
    itemsize = dtype.itemsize
    expected = tuple(int(np.prod(shape[i + 1 :], dtype=np.int64)) for i in range(rank))
    if strides != expected:
        raise RuntimeError(f"compiled code returned strides {strides} for shape {shape}; expected {expected}")
    start = descriptor.aligned + descriptor.offset * itemsize
    # The ctypes block is the numpy array's base: when the last view of the array goes, the
    # block goes, and its finalizer frees the allocation.
    block = (ctypes.c_char * (count * itemsize)).from_address(start)
    array = np.frombuffer(block, dtype=dtype, count=count).reshape(shape)
    if not owned:
        return array.copy()
    weakref.finalize(block, _LIBC.free, descriptor.allocated)
    return array


def scalar_ctype(array: np.ndarray) -> ctypes._SimpleCData:
    """A 0-d array as the ctypes value a scalar argument is passed as (f16: its bits)."""
    if array.dtype == np.float16:  # ctypes has no half type: pass the bits
        return ctypes.c_uint16(int(array.view(np.uint16)))
    return np.ctypeslib.as_ctypes_type(array.dtype)(array.item())


def results_type(ranks: "list[int] | tuple[int, ...]") -> type[ctypes.Structure] | None:
    """The struct the C interface writes results into: one descriptor, or one per result."""
    if not ranks:
        return None
    if len(ranks) == 1:
        return descriptor_type(ranks[0])
    fields = [(f"result{i}", descriptor_type(rank)) for i, rank in enumerate(ranks)]
    return type("Results", (ctypes.Structure,), {"_fields_": fields})


def adopt_results(
    results: ctypes.Structure, signature: "EntrySignature", arguments: "list[np.ndarray]"
) -> "np.ndarray | tuple[np.ndarray, ...]":
    """Numpy arrays for the descriptors a call of ``signature`` with ``arguments`` returned.

    Never free what the caller owns or what another result already adopted: a result that
    is a tensor argument's buffer (0-d ones too; only scalars travel by value), or returned
    twice, is copied instead of adopted.
    """
    specs = signature.results
    foreign = {
        array.ctypes.data
        for spec, array in zip(signature.arguments, arguments)
        if not spec.is_scalar
    }
    descriptors = [results] if len(specs) == 1 else [getattr(results, f"result{i}") for i in range(len(specs))]
    adopted: set[int] = set()
    outputs = []
    for spec, descriptor in zip(specs, descriptors):
        owned = bool(descriptor.allocated) and descriptor.allocated not in foreign | adopted
        outputs.append(adopt_result(descriptor, spec.dtype, len(spec.shape), owned=owned))
        if owned:
            adopted.add(descriptor.allocated)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)
