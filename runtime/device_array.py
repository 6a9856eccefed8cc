"""Arrays in CUDA device memory: :class:`DeviceArray`, and DLPack interchange with PyTorch.

Why: a user who keeps data on the GPU (a PyTorch CUDA tensor, a previous call's input)
should not have to bring it to the host to call a CUDA module. A :class:`DeviceArray` is a
device pointer with a shape and dtype; a CUDA package or JIT module takes it wherever it takes
a numpy array. Its compiled host code copies each argument into the call's device arena with
``cuMemcpyAsync``, which infers the direction from the addresses (unified addressing): a
device array's copy is device-to-device, never through the host. Outputs come back as numpy
arrays (one copy each) from a plain call, or stay on the device from ``device_call`` (a
package's or module's): the host code takes each result's destination as an argument
(targets/cuda/memory.py ``OUTPUT_ARGUMENTS``), so the result is copied device to device into
a :class:`DeviceArray` (the caller's ``out=``, or a fresh one), with no copy to the host.

DLPack (the array-API standard's interchange): :func:`from_dlpack` takes any object with
``__dlpack__``/``__dlpack_device__`` on a CUDA device (``torch.Tensor`` on ``cuda:0``) without a
copy, and a :class:`DeviceArray` is itself such an object (``torch.from_dlpack(array)``).
The producer's memory stays alive as long as the array (the capsule's deleter runs when it is
collected). Refused with a typed error: a CPU tensor (pass numpy or the CPU tensor as a numpy
array instead), a tensor on another device than the runtime's (device 0), non-contiguous
strides, a dtype without a numpy equivalent.

Copies the user asks for: :meth:`DeviceArray.to_numpy` and :func:`device_array` (upload a
numpy array), through tilecraft's CUDA runtime (runtime/cuda_runtime.c).
"""

from __future__ import annotations

import ctypes
import math
import weakref
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ..errors import ArgumentTypeError, ArgumentValueError
from .libraries import cuda_runtime_library

if TYPE_CHECKING:
    from .signature import EntrySignature

# DLPack's device types (dlpack.h).
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
DEVICE = 0  # the ordinal tilecraft's CUDA runtime uses (mgpuSetDefaultDevice is never called)
_CAPSULE, _USED_CAPSULE = b"dltensor", b"used_dltensor"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


# DLPack type codes (kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool) <-> numpy.
_CODES = {0: "i", 1: "u", 2: "f", 6: "b"}
_KINDS = {"i": 0, "u": 1, "f": 2, "b": 6}


def _numpy_dtype(dtype: DLDataType) -> np.dtype:
    kind = _CODES.get(dtype.code)
    if kind is None or dtype.lanes != 1 or dtype.bits % 8:
        raise ArgumentTypeError(f"DLPack dtype (code {dtype.code}, {dtype.bits} bits, {dtype.lanes} lanes) "
                                "has no numpy equivalent")
    return np.dtype("?") if kind == "b" else np.dtype(f"{kind}{dtype.bits // 8}")


def _runtime(library: ctypes.CDLL | None = None) -> ctypes.CDLL:
    """A CUDA runtime for device allocations and copies: ``library`` (a CUDA package's
    model.so, which carries one) or the JIT's (built from runtime/cuda_runtime.c with the C
    compiler). Every copy of the runtime uses the process's primary context of device 0, so a
    pointer from one is valid in all."""
    library = library if library is not None else ctypes.CDLL(cuda_runtime_library())
    library.tilecraft_cuda_device_alloc.restype = ctypes.c_void_p
    library.tilecraft_cuda_device_alloc.argtypes = [ctypes.c_uint64]
    library.tilecraft_cuda_device_free.argtypes = [ctypes.c_void_p]
    library.tilecraft_cuda_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]
    return library


def _raise_pending(library: ctypes.CDLL, where: str) -> None:
    from .cuda_errors import raise_pending

    raise_pending(library, where)


class DeviceArray:
    """``shape`` and ``dtype`` elements, C-contiguous, at device address ``pointer`` on CUDA
    device ``device``. ``owner`` is what keeps the memory alive (a DLPack capsule's producer,
    or the allocation :func:`device_array` made); ``release`` runs when the array is collected.

    Build one with :func:`device_array` (upload) or :func:`from_dlpack` (no copy)."""

    __slots__ = ("pointer", "shape", "dtype", "device", "size", "_owner", "_finalizer", "_runtime", "__weakref__")

    def __init__(self, pointer: int, shape: Sequence[int], dtype: "np.dtype | str", *, device: int = DEVICE,
                 owner: Any = None, release: Callable[[], None] | None = None,
                 runtime: ctypes.CDLL | None = None) -> None:
        self._runtime = runtime  # the runtime that copies it (None: the JIT's)
        self.pointer = int(pointer)
        self.shape = tuple(int(extent) for extent in shape)
        self.size = math.prod(self.shape)  # read by every call's checks: once, not per read
        self.dtype = np.dtype(dtype)
        self.device = int(device)
        self._owner = owner
        self._finalizer = weakref.finalize(self, release) if release is not None else None
        if self._finalizer is not None:
            self._finalizer.atexit = False  # the driver may be gone at interpreter exit

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device='cuda:{self.device}')"

    def to_numpy(self) -> np.ndarray:
        """A host copy (the one copy the user asked for)."""
        host = np.empty(self.shape, self.dtype)
        library = _runtime(self._runtime)
        library.tilecraft_cuda_copy(host.ctypes.data, self.pointer, self.nbytes)
        _raise_pending(library, "DeviceArray.to_numpy")
        return host

    def host_address_view(self) -> np.ndarray:
        """A numpy array *describing* this device memory (shape, dtype, address), for the
        compiled host code's calling convention. Never read or write it on the host: its
        elements are device memory. A CUDA module's host code only hands the address to
        ``cuMemcpyAsync``, which copies device to device."""
        if self.nbytes == 0:
            return np.empty(self.shape, self.dtype)
        buffer = (ctypes.c_byte * self.nbytes).from_address(self.pointer)
        return np.frombuffer(buffer, dtype=self.dtype).reshape(self.shape)

    # ---- DLPack producer -------------------------------------------------------------------

    def __dlpack_device__(self) -> tuple[int, int]:
        return KDL_CUDA, self.device

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """A ``dltensor`` capsule over this memory (no copy). ``stream`` is not waited on:
        tilecraft's calls synchronize their streams before they return, so the data is ready
        on any stream."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"DeviceArray on cuda:{self.device} cannot be exported to device {dl_device}")
        if copy:
            raise BufferError("DeviceArray exports without copying (copy=True not supported)")
        if self.dtype.kind not in _KINDS:
            raise BufferError(f"DeviceArray of dtype {self.dtype} has no DLPack type")
        return _export(self)


# A producer's capsule must stay valid after this module's Python objects are gone from the
# consumer's view: each exported tensor's ctypes structures live here, keyed by their address,
# until the consumer calls the deleter (or the unconsumed capsule is destroyed).
_EXPORTED: dict[int, tuple[DLManagedTensor, Any, DeviceArray]] = {}


@_DELETER
def _delete_exported(address: int) -> None:
    _EXPORTED.pop(address, None)


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@_CAPSULE_DESTRUCTOR
def _destroy_capsule(capsule: int) -> None:
    """An unconsumed capsule's destructor (DLPack's rule: the consumer renames a capsule it
    takes; one still named ``dltensor`` owns its tensor)."""
    if _raw_capsule_valid(capsule, _CAPSULE):
        _delete_exported(_raw_capsule_pointer(capsule, _CAPSULE))


# The CPython capsule functions, each with its own prototype (a capsule as an object where
# Python code holds it, as a raw pointer inside the destructor).
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR)(
    ("PyCapsule_New", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))
_raw_capsule_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_raw_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _export(array: DeviceArray) -> Any:
    kind = array.dtype.kind
    shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
    managed = DLManagedTensor()
    managed.dl_tensor = DLTensor(array.pointer, DLDevice(KDL_CUDA, array.device), array.ndim,
                                 DLDataType(_KINDS[kind], array.dtype.itemsize * 8, 1), shape, None, 0)
    managed.manager_ctx = None
    managed.deleter = _delete_exported
    address = ctypes.addressof(managed)
    _EXPORTED[address] = (managed, shape, array)
    return _capsule_new(address, _CAPSULE, _destroy_capsule)


# ---- DLPack consumer -----------------------------------------------------------------------


def from_dlpack(tensor: Any) -> DeviceArray:
    """A :class:`DeviceArray` over ``tensor``'s CUDA memory (no copy), from its DLPack capsule.

    Raises :class:`~tilecraft.errors.ArgumentTypeError` for an object without the protocol or
    a dtype numpy lacks, :class:`~tilecraft.errors.ArgumentValueError` for a tensor not on
    CUDA device 0 (a CPU tensor: pass it as a numpy array) or with non-contiguous strides."""
    if not hasattr(tensor, "__dlpack__") or not hasattr(tensor, "__dlpack_device__"):
        raise ArgumentTypeError(f"from_dlpack takes an object with __dlpack__ and __dlpack_device__ "
                                f"(a CUDA torch.Tensor), got {type(tensor).__name__}")
    device_type, device_id = (int(part) for part in tensor.__dlpack_device__())
    if device_type != KDL_CUDA:
        where = "the CPU" if device_type == KDL_CPU else f"DLPack device type {device_type}"
        raise ArgumentValueError(f"from_dlpack: the tensor is on {where}, not a CUDA device; pass host "
                                 "data to a CUDA module as a numpy array")
    if device_id != DEVICE:
        raise ArgumentValueError(f"from_dlpack: the tensor is on cuda:{device_id}; tilecraft's CUDA runtime "
                                 f"runs on cuda:{DEVICE}")
    capsule = tensor.__dlpack__(stream=None)
    try:
        address = _capsule_pointer(capsule, _CAPSULE)
    except ValueError:  # another name: a consumed or versioned capsule
        address = None
    if not address:
        raise ArgumentTypeError("from_dlpack: __dlpack__ did not return an unconsumed 'dltensor' capsule")
    managed = DLManagedTensor.from_address(address)
    dl = managed.dl_tensor
    dtype = _numpy_dtype(dl.dtype)
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    if dl.strides:
        strides = tuple(dl.strides[i] for i in range(dl.ndim))
        expected, step = [], 1
        for extent in reversed(shape):
            expected.append(step)
            step *= extent
        contiguous = all(stride == want or extent == 1
                         for stride, want, extent in zip(strides, reversed(expected), shape))
        if not contiguous:
            raise ArgumentValueError(f"from_dlpack: strides {strides} (elements) of a tensor of shape {shape} are "
                                     "not C-contiguous; pass tensor.contiguous()")
    _capsule_set_name(capsule, _USED_CAPSULE)  # consumed: its deleter is ours to call now
    deleter = managed.deleter

    def release() -> None:
        if deleter:
            deleter(address)

    return DeviceArray(dl.data + dl.byte_offset if dl.data else 0, shape, dtype, device=device_id,
                       owner=tensor, release=release)


def device_array(array: "np.ndarray | Sequence[Any]", dtype: Any = None, *,
                 runtime: ctypes.CDLL | None = None) -> DeviceArray:
    """Upload ``array`` to CUDA device 0 (one host-to-device copy): a :class:`DeviceArray` whose
    memory is freed when it is collected. ``runtime``: the CUDA runtime to use (a package's,
    as :meth:`Package.device_array <tilecraft.runtime.package.Package.device_array>` passes;
    default the JIT's). Raises :class:`~tilecraft.errors.DeviceUnavailableError` where there
    is no GPU."""
    host = np.ascontiguousarray(array, dtype=dtype)
    library = _runtime(runtime)
    pointer = library.tilecraft_cuda_device_alloc(max(host.nbytes, 1))
    _raise_pending(library, "device_array")
    library.tilecraft_cuda_copy(pointer, host.ctypes.data, host.nbytes)
    free = library.tilecraft_cuda_device_free
    result = DeviceArray(pointer, host.shape, host.dtype, release=lambda: free(pointer), runtime=library)
    _raise_pending(library, "device_array")
    return result


def host_views(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """``args``/``kwargs`` with each :class:`DeviceArray` as its :meth:`~DeviceArray.host_address_view`
    (what a CUDA module's calling convention takes); other values as they are."""
    def view(value: Any) -> Any:
        if isinstance(value, DeviceArray):
            if value.device != DEVICE:
                raise ArgumentValueError(f"a DeviceArray on cuda:{value.device}; the CUDA runtime runs on "
                                         f"cuda:{DEVICE}")
            return value.host_address_view()
        return value

    return [view(value) for value in args], {name: view(value) for name, value in kwargs.items()}


def empty(shape: Sequence[int], dtype: Any, *, runtime: ctypes.CDLL | None = None) -> DeviceArray:
    """An uninitialized :class:`DeviceArray` (one device allocation, freed when it is
    collected; no copy). ``runtime`` as for :func:`device_array`."""
    shape = tuple(int(extent) for extent in shape)
    dtype = np.dtype(dtype)
    library = _runtime(runtime)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    pointer = library.tilecraft_cuda_device_alloc(max(nbytes, 1))
    _raise_pending(library, "device_array.empty")
    free = library.tilecraft_cuda_device_free
    return DeviceArray(pointer, shape, dtype, release=lambda: free(pointer), runtime=library)


def _overlap(a: DeviceArray, b: DeviceArray) -> bool:
    return a.nbytes > 0 and b.nbytes > 0 and a.pointer < b.pointer + b.nbytes and b.pointer < a.pointer + a.nbytes


def output_arrays(signature: "EntrySignature", out: "DeviceArray | Sequence[DeviceArray] | None",
                  inputs: Sequence[Any], *, runtime: ctypes.CDLL | None = None) -> list[DeviceArray]:
    """The device arrays a ``device_call`` writes its results into: ``out`` checked against
    ``signature``'s results, or fresh ones (:func:`empty`) where ``out`` is None.

    Refused before any code runs: ``out`` of the wrong count or type
    (:class:`~tilecraft.errors.ArgumentTypeError`), dtype (``ArgumentTypeError``), shape or
    device (:class:`~tilecraft.errors.ArgumentValueError`), or overlapping one of ``inputs``'
    device arrays or another output (``ArgumentValueError``: the call would read what it is
    writing, or write two results to one place)."""
    results = signature.results
    for spec in results:
        if spec.shape is None or None in spec.shape:
            raise ArgumentValueError(f"output {spec.name!r} has a dynamic shape {spec.mlir_style}: device outputs "
                                     "need static shapes")
    if out is None:
        return [empty(spec.shape, spec.dtype, runtime=runtime) for spec in results]
    given = [out] if isinstance(out, DeviceArray) else list(out) if isinstance(out, (list, tuple)) else None
    if given is None or not all(isinstance(array, DeviceArray) for array in given):
        raise ArgumentTypeError(f"out= takes a DeviceArray or a list of {len(results)} DeviceArray(s), "
                                f"got {type(out).__name__}")
    if len(given) != len(results):
        raise ArgumentTypeError(f"out= has {len(given)} array(s); @{signature.name} has {len(results)} output(s)")
    for spec, array in zip(results, given):
        if array.dtype != spec.dtype:
            raise ArgumentTypeError(f"out= for output {spec.name!r}: expected dtype {spec.dtype}, got {array.dtype}")
        if array.shape != tuple(spec.shape):
            raise ArgumentValueError(f"out= for output {spec.name!r}: expected shape {tuple(spec.shape)}, "
                                     f"got {array.shape}")
        if array.device != DEVICE:
            raise ArgumentValueError(f"out= for output {spec.name!r} is on cuda:{array.device}; the CUDA runtime "
                                     f"runs on cuda:{DEVICE}")
    device_inputs = [value for value in inputs if isinstance(value, DeviceArray)]
    for index, (spec, array) in enumerate(zip(results, given)):
        for other in device_inputs:
            if _overlap(array, other):
                raise ArgumentValueError(f"out= for output {spec.name!r} overlaps an input's device memory: "
                                         "pass a separate array")
        for other_spec, other in zip(results[:index], given[:index]):
            if _overlap(array, other):
                raise ArgumentValueError(f"out= for outputs {other_spec.name!r} and {spec.name!r} overlap")
    return given
