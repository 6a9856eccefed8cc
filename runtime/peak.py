"""The machine's float32 FMA peak, measured once per machine and thread count, then cached.

Why: a kernel's time alone does not say whether tuning it can pay; its fraction of the
peak does. The tuner puts the budget where the gap to the peak times the task's share of the
model is largest, and says when a model has no headroom left; the per-task report prints
each kernel's fraction. The figure comes from ``fma_peak.c`` (independent vector FMAs on
every thread, built for this host with ``-march=native``), the same measurement
``benchmarks/roofline.py`` prints.

Cached in ``<cache>/fma-peak.json`` keyed by the CPU's model name, its flags and the thread
count: a new machine (or a container on another host) measures again. ``None`` where no C
compiler is available: the tuner then weighs tasks by time alone, as before.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import tempfile
from pathlib import Path

from ..errors import CompileError
from .native import build_shared_library, cache_dir

SOURCE = Path(__file__).with_name("fma_peak.c")
# Loop trips per thread and run: about 0.1 s a run at 100 GFLOPS per thread.
ITERATIONS = 40_000_000
# Overrides the measurement (GFLOPS for the thread count asked), e.g. for a known machine.
PEAK_ENVIRONMENT = "TILECRAFT_FMA_PEAK_GFLOPS"


def machine_key(threads: int) -> str:
    """What the peak depends on: the CPU (model name and feature flags) and thread count."""
    described = platform.machine() + platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "flags", "Features", "CPU part")):
                described += line
                if line.startswith(("flags", "Features")):
                    break
    except OSError:
        pass
    return hashlib.sha256(f"{described}|{threads}".encode()).hexdigest()[:16]


def fma_peak_gflops(threads: int) -> float | None:
    """The float32 FMA peak of ``threads`` threads in GFLOPS; measured at the first call on a
    machine (about a second), read from the cache after. ``None`` when it cannot be measured."""
    override = os.environ.get(PEAK_ENVIRONMENT)
    if override:
        try:
            value = float(override)
        except ValueError:
            value = -1.0
        return value if value > 0 else None
    path = cache_dir() / "fma-peak.json"
    key = machine_key(threads)
    known = _read(path)
    if key in known:
        return known[key]
    measured = measure_fma_peak(threads)
    if measured is None:
        return None
    _write(path, {**_read(path), key: measured})
    return measured


def measure_fma_peak(threads: int) -> float | None:
    """A fresh measurement (no cache): GFLOPS, or ``None`` without a C compiler."""
    try:
        library = build_shared_library("libtilecraft_fma_peak.so", [SOURCE],
                                       ["-O3", "-march=native", "-ffp-contract=fast", "-pthread"],
                                       what="the FMA peak probe")
    except CompileError:
        return None
    probe = ctypes.CDLL(str(library)).tilecraft_fma_peak_gflops
    probe.restype, probe.argtypes = ctypes.c_double, [ctypes.c_int, ctypes.c_long]
    gflops = probe(threads, ITERATIONS)
    return gflops if gflops > 0 else None


def _read(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float)) and v > 0}


def _write(path: Path, data: dict[str, float]) -> None:
    """Atomically: a concurrent reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=".fma-peak-")
    with os.fdopen(handle, "w") as stream:
        json.dump(data, stream)
    os.replace(partial, path)
