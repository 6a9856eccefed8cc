"""Whether one build is faster than another: a ratio with a confidence interval, or no claim.

Why this exists: on a shared two-core machine the same binary's time moves by 10-50 % from
one call to the next, so a single ratio of two medians printed "1.57x" for byte-identical
builds, and "0.63x" on the next run. Every speedup tilecraft prints (the tuner per task and
end to end, ``tilecraft bench`` against its anchors) therefore comes from here:

- the two runners are timed in **paired rounds** (both once per round, the order flipped
  every round so neither always runs on the caches the other left), and the statistic is
  the median of the per-round ratios, which cancels drift that hits a whole round;
- a **percentile bootstrap** of that median gives an interval (95 % by default, a fixed seed
  so a report is reproducible from its samples);
- a ratio is **claimed only when the whole interval lies outside** ``1 +- min_effect``;
  otherwise the report says "no measurable change". ``min_effect`` (2 % by default) is the
  noise floor below which a difference is not worth a user's decision even when the
  interval excludes 1.0 (a systematic effect of the machine, such as which runner touched
  memory first, can be that large).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import ArgumentValueError

# Below this relative difference no speedup or slowdown is claimed (see the module docstring).
MIN_EFFECT = 0.02
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 4000


@dataclass(frozen=True)
class Comparison:
    """``baseline`` time over ``candidate`` time from paired rounds: above 1, the candidate is
    faster. ``low``/``high`` bound ``ratio`` at ``confidence``; ``rounds`` pairs were taken."""

    ratio: float
    low: float
    high: float
    rounds: int
    baseline_seconds: float
    candidate_seconds: float
    confidence: float = CONFIDENCE
    min_effect: float = MIN_EFFECT

    @property
    def faster(self) -> bool:
        """The candidate is measurably faster: the whole interval above ``1 + min_effect``."""
        return self.low > 1.0 + self.min_effect

    @property
    def slower(self) -> bool:
        """The candidate is measurably slower: the whole interval below ``1 - min_effect``."""
        return self.high < 1.0 - self.min_effect

    @property
    def significant(self) -> bool:
        return self.faster or self.slower

    def interval(self) -> str:
        return (f"{self.confidence:.0%} interval {self.low:.2f}-{self.high:.2f}x, "
                f"{self.rounds} paired rounds")

    def verdict(self) -> str:
        """``"1.23x faster"``, ``"1.23x slower"`` or ``"no measurable change"``."""
        if self.faster:
            return f"{self.ratio:.2f}x faster"
        if self.slower:
            return f"{1.0 / self.ratio:.2f}x slower"
        return "no measurable change"

    def describe(self) -> str:
        """The verdict with its evidence, e.g. ``1.23x faster (95 % interval 1.15-1.31x, 10
        paired rounds)``."""
        return f"{self.verdict()} ({self.interval()})"


def compare(baseline: Sequence[float], candidate: Sequence[float], *,
            confidence: float = CONFIDENCE, min_effect: float = MIN_EFFECT,
            resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Comparison:
    """The comparison of two lists of per-round seconds, paired by position (round ``i`` of
    both lists was taken side by side)."""
    if len(baseline) != len(candidate) or len(baseline) == 0:
        raise ArgumentValueError(f"compare needs the same number (>= 1) of paired rounds, got "
                                 f"{len(baseline)} and {len(candidate)}")
    if not 0.0 < confidence < 1.0:
        raise ArgumentValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    if not 0.0 <= min_effect < 1.0:
        raise ArgumentValueError(f"min_effect must lie in [0, 1), got {min_effect!r}")
    base = np.asarray(baseline, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    if not (np.all(np.isfinite(base)) and np.all(np.isfinite(cand)) and np.all(base > 0)
            and np.all(cand > 0)):
        raise ArgumentValueError("compare needs positive finite times")
    ratios = base / cand
    ratio = float(np.median(ratios))
    if len(ratios) == 1:
        low = high = ratio  # one pair is no evidence of spread: never significant below
        low, high = min(low, 1.0), max(high, 1.0)
    else:
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, len(ratios), size=(resamples, len(ratios)))
        medians = np.median(ratios[picks], axis=1)
        tail = (1.0 - confidence) / 2.0
        low, high = (float(v) for v in np.quantile(medians, [tail, 1.0 - tail]))
    return Comparison(ratio=ratio, low=low, high=high, rounds=len(ratios),
                      baseline_seconds=float(np.median(base)),
                      candidate_seconds=float(np.median(cand)),
                      confidence=confidence, min_effect=min_effect)


def paired_rounds(runners: dict[str, Callable[[], Any]], rounds: int, *, min_sample_s: float = 0.02,
                  pause_s: float = 0.0, clock: Callable[[], float] = time.perf_counter
                  ) -> dict[str, list[float]]:
    """Seconds per call of each runner, one sample per round, in blocks of calls.

    Each runner's turn is one untimed call (the runner before it may leave threads spinning:
    onnxruntime's pool does) and then a block of ``n`` timed calls, ``n`` chosen once so a
    block lasts ``min_sample_s``; ``pause_s`` sleeps before each turn. The order of the
    runners is reversed every other round, so no runner always follows the same one.
    """
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ArgumentValueError(f"rounds must be a positive integer, got {rounds!r}")
    names = list(runners)
    counts: dict[str, int] = {}
    for name in names:
        run = runners[name]
        time.sleep(pause_s)
        run()
        start = clock()
        run()
        counts[name] = max(1, int(min_sample_s / max(clock() - start, 1e-7)))
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        for name in (names if index % 2 == 0 else names[::-1]):
            run, n = runners[name], counts[name]
            time.sleep(pause_s)
            run()
            start = clock()
            for _ in range(n):
                run()
            samples[name].append((clock() - start) / n)
    return samples


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1e3 if samples else math.nan
