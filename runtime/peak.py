"""The machine's float32 FMA peak and data bandwidths, measured once per machine and thread
count, then cached: the roofline a task's speed is judged against.

Why: a kernel's time alone does not say whether tuning it can pay; its distance to what the
machine can attain for it does. For a kernel that does many FMAs per byte (a large matmul)
that is the FMA peak; for one that does few (a depthwise convolution, a 1x1 convolution over
16 channels, a matvec) it is the bandwidth that brings its bytes times its arithmetic
intensity: ``min(peak, bandwidth x flops / bytes)`` (:func:`attainable_gflops`). The tuner
puts the budget where the gap to that bound times the task's share of the model is largest,
and says when a model has no headroom left; the per-task report prints each kernel's
fraction. The peak comes from ``fma_peak.c`` (independent vector FMAs on every thread, built
for this host with ``-march=native``), the bandwidths from ``bandwidth.c`` (a streaming
scale over working sets that fit the L2, the L3, and that do not), the same measurements
``benchmarks/roofline.py`` prints.

Cached in ``<cache>/fma-peak.json`` and ``<cache>/bandwidth.json`` keyed by the CPU's model
name, its flags and the thread count (and the working set): a new machine (or a container
on another host) measures again. ``None`` where no C compiler is available: the tuner then
weighs tasks by time alone, as before.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import CompileError
from .native import build_shared_library, cache_dir

SOURCE = Path(__file__).with_name("fma_peak.c")
BANDWIDTH_SOURCE = Path(__file__).with_name("bandwidth.c")
# Loop trips per thread and run: about 0.1 s a run at 100 GFLOPS per thread.
ITERATIONS = 40_000_000
# Overrides the measurement (GFLOPS for the thread count asked), e.g. for a known machine.
PEAK_ENVIRONMENT = "TILECRAFT_FMA_PEAK_GFLOPS"
# Bytes each bandwidth run streams per thread (about 0.1 s a run at 20 GB/s).
STREAM_BYTES = 2 << 30
# The memory level's working set, in multiples of the last-level cache: well past it.
MEMORY_SET = 4


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


def bandwidth_gbs(threads: int, working_set: int) -> float | None:
    """GB/s (read + written) of ``threads`` threads streaming ``working_set`` bytes in all
    (each thread its share); measured at the first call for this machine, thread count and
    size (a second or less), read from the cache after. ``None`` when it cannot be measured."""
    path = cache_dir() / "bandwidth.json"
    key = f"{machine_key(threads)}-{working_set}"
    known = _read(path)
    if key in known:
        return known[key]
    measured = measure_bandwidth(threads, working_set)
    if measured is None:
        return None
    _write(path, {**_read(path), key: measured})
    return measured


def measure_bandwidth(threads: int, working_set: int) -> float | None:
    """A fresh measurement (no cache): GB/s, or ``None`` without a C compiler."""
    try:
        library = build_shared_library("libtilecraft_bandwidth.so", [BANDWIDTH_SOURCE],
                                       ["-O3", "-march=native", "-pthread"], what="the bandwidth probe")
    except CompileError:
        return None
    probe = ctypes.CDLL(str(library)).tilecraft_stream_gbs
    probe.restype, probe.argtypes = ctypes.c_double, [ctypes.c_int, ctypes.c_long, ctypes.c_long]
    per_thread = max(working_set // max(threads, 1), 4096)
    gbs = probe(threads, per_thread, max(STREAM_BYTES // per_thread, 2))
    return gbs if gbs > 0 else None


def attainable_gflops(flops: float, moved_bytes: float, peak_gflops: float, bandwidth: float) -> float:
    """The roofline: the GFLOPS a kernel of ``flops`` that moves ``moved_bytes`` can attain on
    a machine of ``peak_gflops`` and ``bandwidth`` (GB/s): ``min(peak, bandwidth x flops /
    bytes)``. A kernel that moves no bytes is bound by the peak alone."""
    if moved_bytes <= 0:
        return peak_gflops
    return min(peak_gflops, bandwidth * flops / moved_bytes)


@dataclass(frozen=True)
class Roofline:
    """The FMA peak and the bandwidth of each level a working set can live in.

    Attributes:
      peak_gflops: the float32 FMA peak of the thread count.
      levels: ``(name, capacity in bytes, GB/s)`` from the smallest level out; the last is
        memory (its capacity: unbounded). A kernel's bytes are served by the first level
        they fit in (:meth:`bandwidth_for`): all of them at once, a coarse view — a kernel
        that reuses a tile from L1 does better, one whose weights were evicted by the kernel
        before it worse — but the one that tells a memory-bound kernel from a compute-bound
        one, which is what the headroom needs.
    """

    peak_gflops: float
    levels: tuple[tuple[str, float, float], ...]

    def level_for(self, moved_bytes: float) -> tuple[str, float, float]:
        """The level whose capacity holds ``moved_bytes`` (memory when none does)."""
        return next((level for level in self.levels if moved_bytes <= level[1]), self.levels[-1])

    def bandwidth_for(self, moved_bytes: float) -> float:
        return self.level_for(moved_bytes)[2]

    def attainable(self, flops: float, moved_bytes: float) -> float:
        """:func:`attainable_gflops` with the bandwidth of the level ``moved_bytes`` fit in."""
        return attainable_gflops(flops, moved_bytes, self.peak_gflops, self.bandwidth_for(moved_bytes))


def roofline(threads: int, l2_bytes: int, l3_bytes: int) -> Roofline | None:
    """This machine's roofline for ``threads`` threads whose cores have ``l2_bytes`` of L2
    each and share ``l3_bytes`` of L3 (the target's cache sizes: runtime cannot read a
    Target); ``None`` when the peak or a bandwidth cannot be measured. The L2 level holds
    ``threads x l2_bytes``; its bandwidth is measured on half of that (the probe's two
    buffers, and room for the rest), the L3's on half the L3, memory's on four L3s."""
    peak = fma_peak_gflops(threads)
    if peak is None:
        return None
    l2_total = threads * l2_bytes
    sets = (("L2", l2_total, l2_total // 2), ("L3", max(l3_bytes, l2_total), max(l3_bytes, l2_total) // 2),
            ("memory", float("inf"), MEMORY_SET * max(l3_bytes, l2_total)))
    levels = []
    for name, capacity, working_set in sets:
        gbs = bandwidth_gbs(threads, int(working_set))
        if gbs is None:
            return None
        levels.append((name, capacity, gbs))
    return Roofline(peak, tuple(levels))


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
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")
    with os.fdopen(handle, "w") as stream:
        json.dump(data, stream)
    os.replace(partial, path)
