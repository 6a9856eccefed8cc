"""The CUDA runtime's pending error (runtime/cuda_runtime.c) as a typed exception.

Why a pull, not a callback: the ``mgpu*`` functions the compiled host code calls return no
status (MLIR's lowering ignores them), so the runtime records the first failure and the
caller takes it after loading the library or after a call.
"""

from __future__ import annotations

import ctypes

from ..errors import CudaError, DeviceUnavailableError

TAKE_ERROR_SYMBOL = "tilecraft_cuda_take_error"
RELEASE_SYMBOL = "tilecraft_cuda_release"
RESIDENT_BYTES_SYMBOL = "tilecraft_cuda_resident_bytes"
ARENA_BYTES_SYMBOL = "tilecraft_cuda_arena_bytes"
# tilecraft_cuda_take_error's kinds.
_CALL_FAILED, _NO_DEVICE = 1, 2


def has_cuda_runtime(library: ctypes.CDLL) -> bool:
    """Whether ``library`` carries tilecraft's CUDA runtime (a CUDA package's model.so)."""
    try:
        getattr(library, TAKE_ERROR_SYMBOL)
    except AttributeError:
        return False
    return True


def raise_pending(library: ctypes.CDLL, where: str) -> None:
    """Raise the runtime's pending error, if any: :class:`DeviceUnavailableError` when there
    is no usable driver or GPU (it stays), :class:`CudaError` when a driver call failed."""
    take = getattr(library, TAKE_ERROR_SYMBOL)
    take.restype = ctypes.c_int
    take.argtypes = [ctypes.c_char_p, ctypes.c_int64]
    buffer = ctypes.create_string_buffer(1024)
    kind = take(buffer, len(buffer))
    message = buffer.value.decode(errors="replace")
    if kind == _NO_DEVICE:
        raise DeviceUnavailableError(f"{where}: cannot run CUDA code on this machine: {message}")
    if kind == _CALL_FAILED:
        raise CudaError(f"{where}: {message}")


def release(library: ctypes.CDLL) -> int:
    """Free the device-resident weights and activation arenas of ``library``'s runtime;
    returns the bytes freed."""
    function = getattr(library, RELEASE_SYMBOL)
    function.restype = ctypes.c_uint64
    function.argtypes = []
    return int(function())


def resident_bytes(library: ctypes.CDLL) -> int:
    """Bytes of weights ``library``'s runtime holds on the device."""
    function = getattr(library, RESIDENT_BYTES_SYMBOL)
    function.restype = ctypes.c_uint64
    function.argtypes = []
    return int(function())


def arena_bytes(library: ctypes.CDLL) -> int:
    """Bytes of activation arenas (targets/cuda/arena.py) ``library``'s runtime holds."""
    function = getattr(library, ARENA_BYTES_SYMBOL)
    function.restype = ctypes.c_uint64
    function.argtypes = []
    return int(function())
