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

import numpy as np

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
