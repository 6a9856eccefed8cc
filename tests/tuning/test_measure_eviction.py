"""The bytes a tuning worker reads before each timed call (tuning/measure.py): the model's
footprint per run, so that a candidate's weights are as cold as one run of the model leaves
them; the eviction really reads what it says, and a bad count is an OptionError."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tilecraft.errors import OptionError
from tilecraft.schedule.task import Task
from tilecraft.tuning import measure
from tilecraft.tuning.measure import (RunnerOptions, cache_eviction, eviction_bytes, last_level_cache_bytes,
                                      model_footprint_bytes, time_calls)

MIB = 1 << 20


def _task(weights: int, activations: int, count: int = 1) -> Task:
    """A task that reads ``weights`` bytes of constants and moves ``activations`` bytes of
    inputs and outputs per occurrence."""
    return Task(key=f"k{weights}-{activations}", name="conv", kind="conv2d", op_name="linalg.conv_2d_nhwc_hwcf",
                ranges=(1,), parallel=(True,), element_type="f32", flops=1, count=count, payload="",
                weight_bytes=weights, moved_bytes=weights + activations)


def test_the_footprint_counts_weights_once_and_activations_half_per_execution():
    tasks = [_task(3 * MIB, 2 * MIB, count=2), _task(0, 6 * MIB)]
    assert model_footprint_bytes(tasks) == 2 * (3 * MIB + MIB) + 3 * MIB


def test_the_eviction_follows_the_footprint_not_the_weights_alone():
    cache = last_level_cache_bytes()
    small = [_task(cache // 8, cache // 8)]  # a run that fits: read what it touches, no more
    assert cache_eviction(small) == cache // 8 + cache // 16
    # MobileNetV2's class: the weights fit in the cache, the run with its activations does not.
    weights_fit = [_task(cache // 2, 2 * cache)]
    assert cache_eviction(weights_fit) == cache // 2 + cache > cache
    # ResNet-50's class: beyond twice the cache, reading more evicts nothing more.
    huge = [_task(cache, 0, count=5)]
    assert cache_eviction(huge) == 2 * cache == eviction_bytes(True)


def test_flush_cache_values_and_their_bytes():
    assert eviction_bytes(None) == eviction_bytes(False) == eviction_bytes(0) == 0
    assert eviction_bytes(True) == 2 * last_level_cache_bytes()
    assert eviction_bytes(5 * MIB) == 5 * MIB
    for bad in (-1, 1.5, "16M"):
        with pytest.raises(OptionError):
            eviction_bytes(bad)
        with pytest.raises(OptionError):
            RunnerOptions(flush_cache=bad)


def test_the_eviction_reads_the_bytes_it_says():
    words = measure._eviction_buffer().size
    assert words * 8 == 2 * last_level_cache_bytes()
    for nbytes in (8, 3 * MIB + 5, 2 * last_level_cache_bytes()):
        assert measure._eviction_reader(nbytes)() == nbytes // 8
    assert measure._eviction_reader(4 * last_level_cache_bytes())() == words  # at most the buffer


def test_time_calls_reads_the_options_bytes_before_each_call(monkeypatch):
    seen = []

    def flusher(arguments, threads=None, nbytes=None, feed=None):
        seen.append(nbytes)
        return lambda: seen.append("flush")

    monkeypatch.setattr(measure, "_cache_flusher", flusher)
    calls = []
    options = RunnerOptions(repeat=2, min_repeat_ms=0, kernel_time=False, flush_cache=7 * MIB)
    time_calls(lambda: calls.append(1), options, [], threads=1)
    assert seen[0] == 7 * MIB and seen.count("flush") == 2  # once per repeat without kernel timers
    seen.clear()
    time_calls(lambda: calls.append(1), replace(options, flush_cache=False), [], threads=1)
    assert seen == []


class _Input:
    """An argument that logs being read back into the caches."""

    def __init__(self, name: str, steps: list) -> None:
        self.name, self.steps = name, steps

    def sum(self) -> None:
        self.steps.append(("read", self.name))


def test_the_flush_evicts_then_reads_the_inputs(monkeypatch):
    """Order inside the flush: evict, then read the inputs (the most recently touched, as a
    producer just wrote them); nothing is written into the result's future block."""
    steps = []
    monkeypatch.setattr(measure, "_eviction_reader", lambda nbytes: lambda: steps.append(("evict", nbytes)))
    flush = measure._cache_flusher([_Input("a", steps), _Input("b", steps)], threads=1, nbytes=5 * MIB)
    flush()
    assert steps == [("evict", 5 * MIB), ("read", "a"), ("read", "b")]


def test_with_a_feed_the_producer_writes_its_argument_last_and_in_turn(monkeypatch):
    """With producers, the flush reads the other arguments, then the next producer in the
    cycle writes the argument it feeds: the one the timed call reads last-written."""
    steps = []
    monkeypatch.setattr(measure, "_eviction_reader", lambda nbytes: lambda: steps.append(("evict", nbytes)))

    class Producer:
        def __init__(self, name: str) -> None:
            self.name = name

        def __call__(self) -> "Produced":
            steps.append(("produce", self.name))
            return Produced(self.name)

    class Produced(_Input):
        def __init__(self, name: str) -> None:
            super().__init__(f"from {name}", steps)

        def reshape(self, shape):
            return self

    arguments = [_Input("a", steps), _Input("b", steps)]
    for argument in arguments:
        argument.shape = (1,)
    feed = measure.ProducerFeed([(Producer("p"), [], 0), (Producer("q"), [], 1)], arguments)
    flush = measure._cache_flusher(arguments, threads=2, nbytes=MIB, feed=feed)
    flush()
    assert steps == [("evict", MIB), ("read", "b"), ("produce", "p")]
    assert arguments[0].name == "from p"
    steps.clear()
    flush()
    assert steps == [("evict", MIB), ("read", "from p"), ("produce", "q")]  # the cycle's next
    assert arguments[1].name == "from q"
