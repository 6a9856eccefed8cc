"""The kernel timers of runtime/profile_timer.c in this process, for JIT-compiled code.

A package's profiling variant links the timers into its own ``profile.so``; code the JIT
compiles through ``profiling_pipeline`` (pipelines/profiling.py) calls the same
``tilecraft_profile_begin/end(id)``, resolved from this library, which is loaded once,
process-wide (``RTLD_GLOBAL``), the way the async runtime is. The tuner's workers time
candidates this way (tuning/measure.py): the kernels' own time, without the Python entry's
per-call cost, which is what a profile of the whole model measures too.
"""

from __future__ import annotations

import ctypes
from functools import cache
from pathlib import Path

from ..errors import OptionError
from .native import build_shared_library

SOURCE = Path(__file__).with_name("profile_timer.c")
BEGIN = "tilecraft_profile_begin"  # what the profiling pass's calls name
# Kernel ids are dense from 0 (the profiling pass numbers the entry's top-level kernels).
_MAX_SCAN = 65536


@cache
def library() -> ctypes.CDLL:
    """The timers, built (once per content) and loaded process-wide."""
    path = build_shared_library("libtilecraft_profile_timer.so", [SOURCE], what="the kernel timer library")
    timers = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    timers.tilecraft_profile_reset.restype = None
    timers.tilecraft_profile_use_thread_clock.restype = None
    timers.tilecraft_profile_use_thread_clock.argtypes = [ctypes.c_int64]
    timers.tilecraft_profile_read.restype = None
    timers.tilecraft_profile_read.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_double),
                                              ctypes.POINTER(ctypes.c_int64)]
    return timers


def use_clock(name: str) -> None:
    """Time kernels from now on by ``name``: ``"wall"`` (the default) or ``"thread_cpu"``, the
    calling thread's CPU time, right only when the kernels run on that thread alone (one
    thread; runtime/timing.py). Seconds already summed are kept: :func:`reset` after."""
    if name not in ("wall", "thread_cpu"):
        raise OptionError(f"the kernel timers' clock must be 'wall' or 'thread_cpu', got {name!r}")
    library().tilecraft_profile_use_thread_clock(1 if name == "thread_cpu" else 0)


def reset() -> None:
    """Zero every kernel's seconds and calls."""
    library().tilecraft_profile_reset()


def read() -> list[tuple[float, int]]:
    """(seconds, calls) of kernels 0, 1, ... up to the first never called since :func:`reset`
    (every top-level kernel of an entry runs once per call)."""
    timers = library()
    found = []
    seconds, calls = ctypes.c_double(), ctypes.c_int64()
    for index in range(_MAX_SCAN):
        timers.tilecraft_profile_read(index, ctypes.byref(seconds), ctypes.byref(calls))
        if calls.value == 0:
            break
        found.append((seconds.value, calls.value))
    return found


def total_seconds() -> float:
    """Seconds spent in all kernels since :func:`reset`."""
    return sum(seconds for seconds, _ in read())
