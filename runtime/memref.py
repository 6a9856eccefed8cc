"""MLIR memref descriptors in ctypes, and numpy arrays that own returned buffers.

A ranked memref crosses the C interface as ``{allocated, aligned, offset, sizes[r],
strides[r]}``, all 8-byte words (:class:`CallFrame` lays a call's out in one buffer).
Arguments point at the caller's (contiguous) numpy data. Results are buffers
the compiled code allocated with ``malloc`` and handed over (the ownership-based
deallocation pipeline guarantees returned memrefs are owned by the caller); they become
numpy arrays without a copy, and ``free`` runs when the last array view is collected.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import weakref
from typing import TYPE_CHECKING, Sequence

import numpy as np
from ..errors import InternalError

if TYPE_CHECKING:
    from .signature import EntrySignature

# The process's own ``free`` (the global symbol), not libc's by name: the compiled code's
# ``malloc`` is whatever the dynamic linker binds, and an allocator loaded first (a sanitizer
# runtime, jemalloc or tcmalloc through LD_PRELOAD) must also free what it allocated.
_LIBC = ctypes.CDLL(None)
_LIBC.free.argtypes = [ctypes.c_void_p]
_LIBC.free.restype = None


def adopt_result(descriptor: "Sequence[int]", dtype: np.dtype, rank: int, *, owned: bool) -> np.ndarray:
    """Turn a returned descriptor (its words: allocated, aligned, offset, sizes, strides)
    into a numpy array.

    With ``owned`` the array takes over the allocation (freed with the array); otherwise the
    data is copied, for a buffer that is also returned in another position.
    """
    allocated, aligned, offset = descriptor[0], descriptor[1], descriptor[2]
    shape = tuple(descriptor[3 : 3 + rank])
    strides = tuple(descriptor[3 + rank : 3 + 2 * rank])
    count = math.prod(shape)
    if count == 0 or not aligned:
        if owned and allocated:
            _LIBC.free(allocated)
        return np.empty(shape, dtype)
    itemsize = dtype.itemsize
    if strides != _contiguous_strides(shape):
        raise InternalError(
            f"compiled code returned strides {strides} for shape {shape}; "
            f"expected {_contiguous_strides(shape)}"
        )
    start = aligned + offset * itemsize
    # The ctypes block is the numpy array's base: when the last view of the array goes, the
    # block goes, and its finalizer frees the allocation.
    block = (ctypes.c_char * (count * itemsize)).from_address(start)
    array = np.frombuffer(block, dtype=dtype, count=count).reshape(shape)
    if not owned:
        return array.copy()
    weakref.finalize(block, _LIBC.free, allocated)
    return array


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides, in elements, of ``shape``."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def scalar_ctype(array: np.ndarray) -> ctypes._SimpleCData:
    """A 0-d array as the ctypes value a scalar argument is passed as (f16: its bits)."""
    if array.dtype == np.float16:  # ctypes has no half type: pass the bits
        return ctypes.c_uint16(int(array.view(np.uint16)))
    return np.ctypeslib.as_ctypes_type(array.dtype)(array.item())


class CallFrame:
    """Where one call's memref descriptors live: laid out once per signature, in one
    int64 buffer per call.

    Why: building a ctypes structure, two ``ctypes.pointer`` objects and a cast per argument
    cost more than the rest of a small call (docs/performance.md). Every field of a descriptor, every
    pointer slot and every packed argument is an 8-byte word, so a call's whole frame is one
    ctypes int64 array filled from one list. Layout, in words: result descriptors (the
    struct the C interface writes results into: one descriptor, or one per result, no
    padding), argument descriptors (a scalar: one word holding its bits), one pointer slot
    per result struct and tensor argument, and the packed ``argv`` of the JIT's
    ``_mlir_<entry>`` interface (each entry the address of one argument's value: a pointer
    slot, or the scalar's word). Thread-safe: the layout is read-only, the buffer per call.
    """

    def __init__(self, signature: "EntrySignature") -> None:
        self.signature = signature
        words = 0
        self.result_offsets: list[int] = []
        for spec in signature.results:
            self.result_offsets.append(words)
            words += 3 + 2 * len(spec.shape)
        self.arguments_offset = words
        self.argument_offsets: list[int] = []
        for spec in signature.arguments:
            self.argument_offsets.append(words)
            words += 1 if spec.is_scalar else 3 + 2 * len(spec.shape)
        slot_targets: list[int] = []  # the word each pointer slot points at
        argv_targets: list[int] = []  # the word each packed argument points at
        if signature.results:
            argv_targets.append(words + len(slot_targets))
            slot_targets.append(0)
        for spec, offset in zip(signature.arguments, self.argument_offsets):
            if spec.is_scalar:
                argv_targets.append(offset)
            else:
                argv_targets.append(words + len(slot_targets))
                slot_targets.append(offset)
        self.slots_offset = words
        self.argv_offset = words + len(slot_targets)
        self._relative = [8 * word for word in slot_targets + argv_targets]
        self._buffer_type = ctypes.c_int64 * (self.argv_offset + len(argv_targets))

    def fill(self, arrays: "Sequence[np.ndarray]") -> tuple[ctypes.Array, int, list[int]]:
        """A frame describing checked, C-contiguous ``arrays``: ``(buffer, its address,
        the data addresses of the tensor arguments)``. Keep ``buffer`` and ``arrays``
        alive until the call returns."""
        words: list[int] = []
        addresses: list[int] = []
        for spec, array in zip(self.signature.arguments, arrays):
            if spec.is_scalar:
                words.append(scalar_bits(array))
                continue
            address = array.ctypes.data
            addresses.append(address)
            words += (address, address, 0, *array.shape)
            if array.size:
                itemsize = array.itemsize
                words += [stride // itemsize for stride in array.strides]
            else:
                words += [0] * array.ndim
        buffer = self._buffer_type()  # zeroed: result descriptors start null
        base = ctypes.addressof(buffer)
        buffer[self.arguments_offset : self.slots_offset] = words
        buffer[self.slots_offset :] = [offset + base for offset in self._relative]
        return buffer, base, addresses

    def argv_address(self, base: int) -> int:
        """The address of the packed ``argv`` in a frame at ``base``."""
        return base + 8 * self.argv_offset

    def argument_address(self, base: int, index: int) -> int:
        """The address of argument ``index``'s descriptor (or scalar word) at ``base``."""
        return base + 8 * self.argument_offsets[index]

    def adopt_results(
        self, buffer: ctypes.Array, addresses: "list[int]"
    ) -> "np.ndarray | tuple[np.ndarray, ...]":
        """Numpy arrays for the descriptors the call wrote into ``buffer``.

        Never free what the caller owns or what another result already adopted: a result
        that is a tensor argument's buffer (0-d ones too; only scalars travel by value), or
        returned twice, is copied instead of adopted.
        """
        foreign = set(addresses)
        outputs = []
        for spec, offset in zip(self.signature.results, self.result_offsets):
            rank = len(spec.shape)
            descriptor = buffer[offset : offset + 3 + 2 * rank]
            allocated = descriptor[0]
            owned = bool(allocated) and allocated not in foreign
            outputs.append(adopt_result(descriptor, spec.dtype, rank, owned=owned))
            if owned:
                foreign.add(allocated)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def scalar_bits(array: np.ndarray) -> int:
    """A 0-d array's bytes as the low bytes of an int64 word (little-endian, as x86 and
    AArch64 are): the packed interface reads the scalar through a pointer to the word."""
    return int.from_bytes(array.tobytes(), "little", signed=True)
