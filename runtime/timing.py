"""Measurement of a callable, the way TVM's time_evaluator does it, on a named clock.

``repeat`` measurements are taken; each runs the callable ``number`` times (raised until a
measurement lasts at least ``min_repeat_ms``) and reports the mean time per call. One warm-up
call comes first, so JIT and first-touch page faults are not measured.

Clocks (:data:`CLOCKS`, chosen by name with :func:`get_clock`):

- ``wall`` (``time.perf_counter``): what a user waits for. On a machine shared with other
  jobs it also counts the time the measuring thread waited for a core.
- ``thread_cpu`` (``time.thread_time``, ``CLOCK_THREAD_CPUTIME_ID``): the CPU time of the
  measuring thread only. Right for **one-thread** code, whose work all runs on the calling
  thread: a neighbour that takes the core away for a while no longer lengthens the sample
  (docs/tuning.md, "Which clock", has the figures). Wrong for code that
  runs on several threads: the other threads' work is not counted, so a build that splits
  its loops over two threads would look twice as fast as it is. :func:`default_clock` picks
  by thread count.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import OptionError

# The clocks a measurement may read, by name (see the module docstring for which fits when).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "thread_cpu": time.thread_time}


def get_clock(name: str) -> Callable[[], float]:
    """The clock called ``name`` (a key of :data:`CLOCKS`)."""
    try:
        return CLOCKS[name]
    except (KeyError, TypeError):
        raise OptionError(f"clock must be one of {', '.join(CLOCKS)}, got {name!r}") from None


def default_clock(num_threads: int) -> str:
    """The clock that measures code run on ``num_threads`` threads: the measuring thread's CPU
    time when that thread does all the work (one thread), else wall time."""
    return "thread_cpu" if num_threads == 1 else "wall"


@dataclass(frozen=True)
class Timing:
    """Seconds per call for each repeat, and their summary statistics."""

    per_call: tuple[float, ...]

    @property
    def min(self) -> float:
        return min(self.per_call)

    @property
    def median(self) -> float:
        return statistics.median(self.per_call)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.per_call)

    @property
    def max(self) -> float:
        return max(self.per_call)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.per_call)

    def summary_ms(self) -> str:
        return (
            f"mean {self.mean * 1e3:.3f} ms, median {self.median * 1e3:.3f} ms, "
            f"min {self.min * 1e3:.3f} ms, max {self.max * 1e3:.3f} ms, std {self.std * 1e3:.3f} ms"
        )


def measure(
    fn: Callable[[], object], *, number: int = 1, repeat: int = 5, min_repeat_ms: float = 0.0,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Time ``fn()``; see the module docstring for the meaning of the parameters. ``clock``:
    wall time by default; ``CLOCKS["thread_cpu"]`` for one-thread code on a busy machine
    (``min_repeat_ms`` then counts CPU milliseconds)."""
    if number < 1 or repeat < 1:
        raise OptionError(f"number and repeat must be >= 1, got {number} and {repeat}")
    fn()
    per_call = []
    for _ in range(repeat):
        while True:
            start = clock()
            for _ in range(number):
                fn()
            elapsed = clock() - start
            if elapsed * 1e3 >= min_repeat_ms or number >= 1 << 20:
                break
            number *= 2
        per_call.append(elapsed / number)
    return Timing(tuple(per_call))


def alternating(runners: dict[str, Callable[[], Any]], repeat: int, min_sample_s: float = 0.02,
                clock: Callable[[], float] = time.perf_counter, pause_s: float = 0.0) -> dict[str, float]:
    """Median seconds per call of each runner, calls alternating round by round.

    A round runs each runner once untimed, then ``n`` times timed (``n`` from a warm-up, so a
    sample lasts ``min_sample_s``). Rounds alternate so that drift of a shared machine (its
    speed moves between runs) hits every runner alike: only ratios taken from one
    call of this function carry. ``clock`` may be ``CLOCKS["thread_cpu"]`` (CPU time of the
    calling thread: steady on a loaded machine, right for one-thread runners only; see the
    module docstring) or ``time.process_time`` (CPU time of all the process's threads, which
    counts spinning pool threads as work). ``pause_s``: a sleep before each
    runner's turn, for runtimes whose pool threads spin on after a call returns (OpenBLAS's
    spin for about 2^28 cycles: a tilecraft GEMM timed right after numpy's ran at a fraction
    of the rate it had when timed first in the round; docs/performance.md).

    Why the untimed call: the runner before it may leave threads busy. onnxruntime's pool
    threads spin-wait after a run returns, and ran on through the next runner's call: a
    ResNet-50 call of tilecraft timed right after an onnxruntime call took much longer than
    alone, and still longer with onnxruntime's spinning turned off (caches the other runtime
    refilled), unless one untimed call of its own came first (docs/performance.md).
    """
    if repeat < 1:
        raise OptionError(f"repeat must be >= 1, got {repeat}")
    counts = {}
    for name, run in runners.items():
        time.sleep(pause_s)
        run()
        start = clock()
        run()
        once = max(clock() - start, 1e-7)
        counts[name] = max(1, int(min_sample_s / once))
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeat):
        for name, run in runners.items():
            n = counts[name]
            time.sleep(pause_s)
            run()
            start = clock()
            for _ in range(n):
                run()
            samples[name].append((clock() - start) / n)
    return {name: statistics.median(values) for name, values in samples.items()}


def time_evaluator(
    function: Callable[..., Any], *, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0.0
) -> Callable[..., Timing]:
    """TVM's ``time_evaluator``: a function that, called with ``function``'s arguments,
    times ``function`` on them (:func:`measure`: one warm-up call, ``repeat`` measurements
    of ``number`` calls each) and returns the :class:`Timing`.

    Why a function returning a function: the arguments are bound once, outside the timed
    loop (as ``f.time_evaluator(f.entry_name, dev, number=10)(a, b, c)`` in TVM).
    """
    if number < 1 or repeat < 1 or min_repeat_ms < 0:
        raise OptionError(f"number and repeat must be >= 1 and min_repeat_ms >= 0, got "
                         f"{number}, {repeat} and {min_repeat_ms}")

    def evaluate(*args: Any, **kwargs: Any) -> Timing:
        return measure(lambda: function(*args, **kwargs), number=number, repeat=repeat,
                       min_repeat_ms=min_repeat_ms)

    return evaluate
