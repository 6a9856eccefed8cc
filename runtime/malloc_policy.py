"""Keep freed intermediate buffers in the process instead of returning them to the kernel.

Why: a compiled model allocates its intermediate tensors with ``malloc`` and frees them
before it returns. glibc serves blocks above its mmap threshold (128 KiB at first, raised
dynamically after frees) with fresh ``mmap`` pages and unmaps them on ``free``, so every
call page-faulted and zeroed its intermediates again, or did not, depending on which frees
had moved the dynamic threshold first: system time that dwarfed the block's own work and
varied several-fold from run to run (docs/performance.md, "Figures moved out of the code").
onnxruntime
avoids the same with its own arena. Here glibc is told once, process-wide, to serve blocks
up to 32 MiB (its largest allowed mmap threshold) from its heaps and to keep up to
256 MiB of free memory at their top: a model's intermediates are then reused call after call.

Set ``TILECRAFT_KEEP_FREED_MEMORY=0`` to leave the allocator as it is; it is also left alone
where the user tuned it (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``GLIBC_TUNABLES``) and where the C library has no ``mallopt`` (not glibc).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 256 << 20

_lock = threading.Lock()
_applied: bool | None = None


def _user_tuned() -> bool:
    if os.environ.get("TILECRAFT_KEEP_FREED_MEMORY", "1") == "0":
        return True
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return True
    return "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")


def keep_freed_memory() -> bool:
    """Apply the policy above once per process; whether it is in force."""
    global _applied
    with _lock:
        if _applied is None:
            _applied = False
            if not _user_tuned():
                try:
                    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                    mallopt = libc.mallopt
                except (OSError, AttributeError):
                    return False
                mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                mallopt.restype = ctypes.c_int
                _applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
                    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
        return _applied
