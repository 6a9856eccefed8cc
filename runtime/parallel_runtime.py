"""The runtime of parallel loops in JIT-compiled code: runtime/async_runtime.c, built once and
loaded process-wide.

Parallel loops are calls of its flat parallel-for (``tilecraftParallelFor``, lowered by
pipelines/buffer/parallel_for.py; the generated entry marks each call's begin and end, so the
workers spin between its loops); the loops that lowering leaves to ``async-parallel-for``
call the ``mlirAsyncRuntime*`` functions. Why this library and not MLIR's
``libmlir_async_runtime.so``:

- scheduling on few cores: MLIR's runtime runs a pool of one worker per core beside the
  thread that awaits each loop, so N + 1 threads computed on N cores; ours keeps N (the
  waiting thread runs queued blocks) and lets idle threads spin briefly between the loops
  of a model instead of sleeping (async_runtime.c's header says what each saved);
- one runtime for the JIT and for packages (compiler/package.py links the same file into
  ``model.so``), so a model runs alike both ways;
- lifetime: every engine given MLIR's library in ``shared_libs`` ran its destroy hook,
  which reset that runtime's process-wide instance and made the next parallel call of any
  other module dereference null. This library has no such hook; loaded once with
  ``RTLD_GLOBAL``, every engine resolves the symbols from the process.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .native import build_shared_library

SOURCE = Path(__file__).with_name("async_runtime.c")


@cache
def load() -> ctypes.CDLL:
    """Build (once per content) and load the runtime, its symbols visible to every JIT."""
    path = build_shared_library("libtilecraft_async_runtime.so", [SOURCE],
                                ["-pthread", "-DTILECRAFT_RUNTIME_EXPORT"],
                                what="the parallel-loop runtime")
    return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)


@dataclass(frozen=True)
class TaskCounts:
    """Tasks of parallel loops since the process started (async_runtime.c keeps the counts).

    A loop of B blocks queues B - 1 tasks (its caller computes the first block itself), so
    over calls of a model whose parallel loops run L times, ``queued + L`` blocks ran:
    ``by_workers`` on pool workers, the rest on the threads that awaited the loops."""

    queued: int
    by_workers: int
    by_waiters: int
    # Times a pool worker found no task within its spin (TILECRAFT_SPIN_US) and slept: each
    # costs a wake-up when the next task is queued.
    worker_sleeps: int = 0
    # Tasks a thread took from another thread's deque (the oldest there) because its own was
    # empty: ideally about one per thread per loop, each thread then running its half.
    stolen: int = 0

    def __sub__(self, earlier: "TaskCounts") -> "TaskCounts":
        return TaskCounts(self.queued - earlier.queued, self.by_workers - earlier.by_workers,
                          self.by_waiters - earlier.by_waiters, self.worker_sleeps - earlier.worker_sleeps,
                          self.stolen - earlier.stolen)


def task_counts() -> TaskCounts:
    """The JIT's task counts (a package links its own copy of the runtime, with its own)."""
    counts = (ctypes.c_int64 * 5)()
    load().tilecraftAsyncRuntimeCounts(counts)
    return TaskCounts(*counts)


@dataclass(frozen=True)
class LoopCounts:
    """Loops of the flat parallel-for since the process started (async_runtime.c,
    ``tilecraftParallelForCounts``): over calls of a model whose loops of B blocks ran,
    ``published`` loops went to the pool and ``serial`` ran whole on their calling thread
    (one block, one thread, or another loop already published: a nested loop or another
    calling thread); the published loops' blocks ran ``by_callers`` on their calling
    threads and ``by_workers`` on the pool's workers, who took part in ``joined`` loops."""

    published: int
    serial: int
    by_callers: int
    by_workers: int
    joined: int
    # Model calls between their begin and end now (not a difference: a level).
    calls_in_progress: int = 0

    def __sub__(self, earlier: "LoopCounts") -> "LoopCounts":
        return LoopCounts(self.published - earlier.published, self.serial - earlier.serial,
                          self.by_callers - earlier.by_callers, self.by_workers - earlier.by_workers,
                          self.joined - earlier.joined, self.calls_in_progress)


def loop_counts() -> LoopCounts:
    """The JIT's flat parallel-for counts (a package links its own copy of the runtime)."""
    counts = (ctypes.c_int64 * 6)()
    load().tilecraftParallelForCounts(counts)
    return LoopCounts(*counts)
