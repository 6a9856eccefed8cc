"""runtime/timing.py: the measurement helpers benchmarks, tuning and tutorials share."""

import pytest

from tilecraft.runtime.timing import alternating, measure


def test_alternating_times_every_runner_in_rounds():
    calls: list[str] = []
    medians = alternating({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                          repeat=3, min_sample_s=0.0)
    assert set(medians) == {"a", "b"} and all(m >= 0 for m in medians.values())
    # Warm-ups (two calls each), then rounds: one untimed and one timed call per runner, the
    # runners taking turns, so machine drift falls on both.
    assert calls[:4] == ["a", "a", "b", "b"]
    assert calls[4:] == ["a", "a", "b", "b"] * 3


def test_alternating_and_measure_refuse_no_repeats():
    with pytest.raises(ValueError, match="repeat"):
        alternating({"a": lambda: None}, repeat=0)
    with pytest.raises(ValueError, match="repeat"):
        measure(lambda: None, repeat=0)
