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
import sys
import sysconfig
import weakref
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
from ..errors import InternalError

if TYPE_CHECKING:
    from .signature import EntrySignature, TensorSpec

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
    """Calls of one entry signature: its memref descriptors laid out once, its arguments
    checked, its results adopted.

    Layout, in 8-byte words (every field of a descriptor, every pointer slot and every
    packed argument is one): result descriptors (the struct the C interface writes results
    into: one descriptor, or one per result, no padding), argument descriptors (a scalar:
    one word holding its bits), one pointer slot per result struct and tensor argument, and
    the packed ``argv`` of the JIT's ``_mlir_<entry>`` interface (each entry the address of
    one argument's value: a pointer slot, or the scalar's word).

    Why a plan per signature (docs/performance.md, "What a call costs outside its
    kernels"): on a small model the Python around the native call costs more than the
    kernels. When every argument is a tensor of static shape, the frames are kept and
    reused (:class:`_Frame`: sizes, strides, pointer slots and the entry's own arguments
    written once), and a call of arrays of exactly the expected type, dtype, shape,
    C-order strides and alignment only patches each argument's two data pointers in. Any
    other call (keywords in another form, a view, another dtype, a wrong count) takes the
    full path: :meth:`EntrySignature.bind` checks and names the problem, a fresh frame
    describes the arrays as they are. Both paths check the outputs' memory budget.

    ``packed``: the entry is the JIT's ``_mlir_<entry>(void **argv)``; otherwise the C
    interface itself (``_mlir_ciface_<entry>``: result struct pointer, then descriptors by
    pointer, scalars by value), as a package exports it.

    ``output_arguments``: the entry also takes one destination descriptor per result after
    its arguments (a CUDA module's host code: targets/cuda/memory.py ``OUTPUT_ARGUMENTS``).
    :meth:`call` passes null destinations (the results come back in fresh host buffers, as
    without them); :meth:`call_into` passes the caller's buffers.

    Thread-safe and re-entrant: the layout is read-only; a call takes a frame from the
    spare list (``list.pop``/``append`` are atomic) or makes one, and returns it after.
    """

    def __init__(self, signature: "EntrySignature", *, packed: bool = True, output_arguments: bool = False) -> None:
        self.signature = signature
        self.packed = packed
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
        self.destination_offsets: list[int] = []
        for spec in signature.results if output_arguments else ():
            self.destination_offsets.append(words)
            words += 3 + 2 * len(spec.shape)
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
        for offset in self.destination_offsets:
            argv_targets.append(words + len(slot_targets))
            slot_targets.append(offset)
        self.slots_offset = words
        self.argv_offset = words + len(slot_targets)
        self._relative = [8 * word for word in slot_targets + argv_targets]
        self._buffer_type = ctypes.c_int64 * (self.argv_offset + len(argv_targets))
        self._names = tuple(spec.name for spec in signature.arguments)
        self._arguments = self._plan_arguments()
        self._results = tuple(_ResultPlan(spec, offset) for spec, offset in
                              zip(signature.results, self.result_offsets))
        self._spare: list[_Frame] = []

    # ---- the reused frames of well-formed calls ------------------------------------------

    def _plan_arguments(self) -> "tuple[tuple[int, np.dtype, tuple[int, ...], tuple[int, ...], int], ...] | None":
        """Per argument ``(descriptor word, dtype, shape, strides in bytes, alignment)`` when
        every argument is a non-empty tensor of static shape (and the dimension relations
        hold for those shapes, so checking each shape checks them); otherwise ``None``: every
        call takes the full path."""
        if _DATA_FIELD is None:  # no cheap read of an array's data pointer here
            return None
        plan = []
        for spec, offset in zip(self.signature.arguments, self.argument_offsets):
            if spec.is_scalar or spec.is_string or None in spec.shape or 0 in spec.shape:
                return None
            itemsize = spec.dtype.itemsize
            strides = tuple(stride * itemsize for stride in _contiguous_strides(spec.shape))
            plan.append((offset, spec.dtype, spec.shape, strides, spec.dtype.alignment))
        for group in self.signature.equal_dims:
            extents = {self.signature.arguments[arg].shape[axis] for arg, axis in group.members}
            if len(extents) != 1 or (group.size is not None and extents != {group.size}):
                return None
        if any(spec.is_string for spec in self.signature.results):
            return None
        return tuple(plan)

    def _new_frame(self) -> "_Frame":
        """A frame whose static words (everything but the arguments' data pointers and the
        results) are written."""
        buffer = self._buffer_type()
        base = ctypes.addressof(buffer)
        for spec, offset in zip(self.signature.arguments, self.argument_offsets):
            words = [0, 0, 0, *spec.shape, *_contiguous_strides(spec.shape)]
            buffer[offset : offset + len(words)] = words
        buffer[self._destinations_start : self.slots_offset] = self._destination_words()
        buffer[self.slots_offset :] = [offset + base for offset in self._relative]
        if self.packed:
            arguments: tuple[Any, ...] = (self.argv_address(base),)
        else:
            addresses = [base] if self.signature.results else []
            addresses += [self.argument_address(base, index) for index in range(len(self._names))]
            addresses += [base + 8 * offset for offset in self.destination_offsets]
            arguments = tuple(ctypes.c_void_p(address) for address in addresses)
        return _Frame(buffer, arguments)

    def call(self, entry: Callable[..., None], args: "Sequence[Any]", kwargs: "Mapping[str, Any]") -> Any:
        """Check ``args``/``kwargs`` against the signature, call ``entry`` and return its
        results as numpy arrays (one, or a tuple; ``()`` without results).

        The caller takes the call's run-time check failure, if any, after this returns (the
        results are then freed with their arrays)."""
        plan = self._arguments
        if plan is None:
            return self._call_checked(entry, args, kwargs)
        values = args
        if kwargs:
            if args or len(kwargs) != len(plan):
                return self._call_checked(entry, args, kwargs)
            try:
                values = [kwargs[name] for name in self._names]
            except KeyError:
                return self._call_checked(entry, args, kwargs)
        elif len(args) != len(plan):
            return self._call_checked(entry, args, kwargs)
        try:
            frame = self._spare.pop()
        except IndexError:
            frame = self._new_frame()
        buffer = frame.buffer
        addresses: list[int] = []
        read_pointer, data_field = _read_pointer, _DATA_FIELD
        for (word, dtype, shape, strides, alignment), value in zip(plan, values):
            # What TensorSpec.check's first test accepts, with C order read off the strides.
            if (type(value) is not np.ndarray or value.dtype is not dtype or value.shape != shape
                    or value.strides != strides):
                break
            address = read_pointer(id(value) + data_field).value  # the array's data pointer
            if address % alignment:
                break
            buffer[word] = address
            buffer[word + 1] = address
            addresses.append(address)
        else:
            try:
                self.signature.check_output_memory()
                for result in self._results:  # null until written: an early return adopts nothing
                    buffer[result.word] = 0
                    buffer[result.word + 1] = 0
                entry(*frame.arguments)
                return self._adopt(buffer, addresses)
            finally:
                self._spare.append(frame)
        self._spare.append(frame)
        return self._call_checked(entry, args, kwargs)

    # ---- the full path -------------------------------------------------------------------

    def _call_checked(self, entry: Callable[..., None], args: "Sequence[Any]", kwargs: "Mapping[str, Any]") -> Any:
        arrays = self.signature.bind(args, kwargs)
        buffer, base, addresses = self.fill(arrays)
        self._invoke(entry, buffer, base, arrays)
        return self.adopt_results(buffer, addresses) if self.signature.results else ()

    def call_into(self, entry: Callable[..., None], args: "Sequence[Any]", kwargs: "Mapping[str, Any]",
                  destinations: "Sequence[int]") -> None:
        """Call ``entry`` with the results written to ``destinations`` (one buffer address per
        result, checked by the caller: shape, dtype, room; ``output_arguments`` frames only).
        Nothing is adopted: the caller owns the destinations. Raises :class:`InternalError`
        when the code returned a result elsewhere (it would be a leak and a wrong answer)."""
        if len(destinations) != len(self.destination_offsets) or not self.destination_offsets:
            raise InternalError(f"call_into: {len(destinations)} destination(s) for an entry that takes "
                                f"{len(self.destination_offsets)}")
        arrays = self.signature.bind(args, kwargs)
        buffer, base, _ = self.fill(arrays)
        for offset, address in zip(self.destination_offsets, destinations):
            buffer[offset] = buffer[offset + 1] = address
        self.signature.check_output_memory()
        self._invoke(entry, buffer, base, arrays)
        for offset, address in zip(self.result_offsets, destinations):
            if buffer[offset + 1] != address:
                raise InternalError("the compiled code returned a result outside the destination it was given")

    def _invoke(self, entry: Callable[..., None], buffer: ctypes.Array, base: int,
                arrays: "Sequence[np.ndarray]") -> None:
        """Call ``entry`` on the frame ``buffer`` (at ``base``) describing ``arrays``."""
        if self.packed:
            entry(self.argv_address(base))
        else:
            # The C interface: results pointer first, descriptors by pointer, scalars by value.
            pointers: list[Any] = [ctypes.c_void_p(base)] if self.signature.results else []
            for index, (spec, array) in enumerate(zip(self.signature.arguments, arrays)):
                if spec.is_scalar:
                    pointers.append(scalar_ctype(array))
                else:
                    pointers.append(ctypes.c_void_p(self.argument_address(base, index)))
            pointers += [ctypes.c_void_p(base + 8 * offset) for offset in self.destination_offsets]
            entry(*pointers)

    def fill(self, arrays: "Sequence[np.ndarray]") -> tuple[ctypes.Array, int, list[int]]:
        """A fresh frame describing checked, C-contiguous ``arrays``: ``(buffer, its address,
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
        words += self._destination_words()
        buffer[self.arguments_offset : self.slots_offset] = words
        buffer[self.slots_offset :] = [offset + base for offset in self._relative]
        return buffer, base, addresses

    @property
    def _destinations_start(self) -> int:
        return self.destination_offsets[0] if self.destination_offsets else self.slots_offset

    def _destination_words(self) -> list[int]:
        """The destination descriptors of a call with host results: null pointers, and the
        results' static sizes and strides (a dynamic extent as 0: never read with a null
        pointer)."""
        words: list[int] = []
        if self.destination_offsets:
            for spec in self.signature.results:
                shape = [extent or 0 for extent in spec.shape]
                words += [0, 0, 0, *shape, *_contiguous_strides(tuple(shape))]
        return words

    def argv_address(self, base: int) -> int:
        """The address of the packed ``argv`` in a frame at ``base``."""
        return base + 8 * self.argv_offset

    def argument_address(self, base: int, index: int) -> int:
        """The address of argument ``index``'s descriptor (or scalar word) at ``base``."""
        return base + 8 * self.argument_offsets[index]

    # ---- results -------------------------------------------------------------------------

    def _adopt(self, buffer: ctypes.Array, foreign: "list[int]") -> Any:
        """:meth:`adopt_results` by each result's plan. A result of static shape is read as
        three words (allocated, aligned, offset): its sizes and strides are constants of
        its type, which the C interface declares with the identity layout, so a view of
        another layout cannot be returned there (the dynamic results' strides are checked
        by :func:`adopt_result`)."""
        outputs = []
        for plan in self._results:
            word = plan.word
            allocated = buffer[word]
            owned = bool(allocated) and allocated not in foreign
            aligned = buffer[word + 1]
            if plan.block is None or not aligned:
                outputs.append(adopt_result(buffer[word : plan.end], plan.dtype, plan.rank, owned=owned))
            elif owned:
                block = plan.block.from_address(aligned + buffer[word + 2] * plan.itemsize)
                block.allocated = allocated
                outputs.append(np.ndarray(plan.shape, plan.dtype, block))
            else:
                start = aligned + buffer[word + 2] * plan.itemsize
                outputs.append(np.ndarray(plan.shape, plan.dtype, plan.view.from_address(start)).copy())
            if owned:
                foreign.append(allocated)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

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


class _Frame:
    """One reusable call frame: its int64 buffer, and the arguments the entry is called
    with (the packed ``argv``'s address, or the C interface's pointers), fixed by where
    the buffer lies."""

    __slots__ = ("buffer", "arguments")

    def __init__(self, buffer: ctypes.Array, arguments: "tuple[Any, ...]") -> None:
        self.buffer = buffer
        self.arguments = arguments


class _ResultPlan:
    """How one result's descriptor is read: its words, and for a non-empty static shape
    the byte-array types its data is wrapped in (owned, or viewed to be copied)."""

    __slots__ = ("word", "end", "rank", "dtype", "itemsize", "shape", "block", "view")

    def __init__(self, spec: "TensorSpec", word: int) -> None:
        self.word = word
        self.rank = len(spec.shape)
        self.end = word + 3 + 2 * self.rank
        self.dtype = spec.dtype
        self.itemsize = spec.dtype.itemsize
        self.shape = spec.shape
        self.block: type | None = None
        self.view: type | None = None
        if None not in spec.shape and 0 not in spec.shape and not spec.is_string:
            nbytes = math.prod(spec.shape) * self.itemsize
            self.block = _owning_block(nbytes)
            self.view = ctypes.c_char * nbytes


def _owning_block(nbytes: int) -> type:
    """A ctypes array type of ``nbytes`` whose instances free their ``allocated`` attribute
    (the returned memref's allocated pointer) when collected. Why not :func:`adopt_result`'s
    ``weakref.finalize``: registering a finalizer cost as much as the rest of adopting a
    small result; ``__del__`` runs when the last numpy view of the block goes."""

    class OwningBlock(ctypes.c_char * nbytes):  # type: ignore[misc, valid-type]
        def __del__(self, free: Any = _LIBC.free) -> None:
            free(self.allocated)

    return OwningBlock


# The interpreters and numpy versions whose array object layout the in-place read knows:
# CPython with the GIL (a free-threaded build's object header is larger: ob_tid, ob_ref_local,
# ob_ref_shared), numpy 1.x and 2.x (``PyArrayObject_fields``: ``data`` first after the header).
_NUMPY_MAJORS = (1, 2)


def _data_field_offset() -> int | None:
    """Where a numpy array object holds its data pointer, or ``None``: every call then takes
    the full path, which reads it with ``ndarray.ctypes.data`` (public).

    Why not a public API on the fast path: none reads the pointer without building an object
    per read. ``ndarray.ctypes.data`` and ``__array_interface__`` build a helper object or a
    dict; ``ctypes.c_char.from_buffer`` (the buffer protocol) refuses read-only arrays (a weight
    bound with ``setflags(write=False)``, a view of bytes) and ``PyObject_GetBuffer`` /
    ``PyBuffer_Release`` through ``ctypes.pythonapi`` are two foreign calls: each costs a few
    to eight times the in-place read, per tensor argument of every call (docs/performance.md,
    "Reading an array's data pointer"). numpy's C API reads the field with the ``PyArray_DATA``
    macro, which ctypes cannot call.

    Why it is safe: numpy's public ``PyArrayObject_fields`` (ndarraytypes.h) puts ``data``
    right after CPython's object header (``ob_refcnt``, ``ob_type``) in numpy 1.x and 2.x, the
    read stays inside the object, and the offset is used only where the version check passes
    and the read agrees with ``ndarray.ctypes.data`` on views at odd offsets. Anything else
    (another interpreter, a free-threaded build, a numpy this module does not know) takes the
    public path: slower, never wrong, never a crash."""
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    if np.lib.NumpyVersion(np.__version__).major not in _NUMPY_MAJORS:
        return None
    offset = 2 * ctypes.sizeof(ctypes.c_void_p)  # ob_refcnt, ob_type
    base = np.arange(16, dtype=np.int64)
    probes = [base, base[3:], base[5:].reshape(11, 1), np.zeros((2, 3), np.float32)[1]]
    if all(ctypes.c_void_p.from_address(id(probe) + offset).value == probe.ctypes.data for probe in probes):
        return offset
    return None


# Where an array object holds the address of its first element, read in place (see
# _data_field_offset for why, and where it is ``None``).
_DATA_FIELD = _data_field_offset()
_read_pointer = ctypes.c_void_p.from_address


def scalar_bits(array: np.ndarray) -> int:
    """A 0-d array's bytes as the low bytes of an int64 word (little-endian, as x86 and
    AArch64 are): the packed interface reads the scalar through a pointer to the word."""
    return int.from_bytes(array.tobytes(), "little", signed=True)
