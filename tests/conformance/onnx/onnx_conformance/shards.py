"""Splitting a conformance suite into shards that pytest-xdist spreads over its workers.

Why: run as one test, a suite was a single item for xdist, and it started a pool of its own
with one worker per core: on 2 cores, 2 xdist workers and 2 pool workers competed, and the
xdist worker holding the suite waited on it for most of ``make test``. As shards (one
parametrized test each) the suite's cases are spread over xdist's workers like any other
tests, and each shard's pool has one worker (:func:`pool_jobs`): one layer of parallelism.

A case belongs to a shard by a stable hash of its name (``zlib.crc32``, the same in every
process, unlike ``hash``), so the split needs no case list at collection time; a case that
takes minutes (the light zoo models) gets a shard of its own, so that no shard holds two of
them. Each shard checks its own cases against the expected statuses; whether the case set
is complete is one more test that only lists the cases.
"""

from __future__ import annotations

import os
import zlib
from typing import Callable, Iterable, Sequence, TypeVar

from .runner import default_jobs

T = TypeVar("T")


def shard_of(name: str, count: int) -> int:
    """The shard (``0 .. count - 1``) of the case ``name``: the same in every process."""
    return zlib.crc32(name.encode("utf-8")) % count


def hashed_shard_ids(prefix: str, count: int) -> list[str]:
    """The ids of ``count`` hashed shards: ``prefix-0of8`` ... ``prefix-7of8``."""
    return [f"{prefix}-{index}of{count}" for index in range(count)]


def shard_id(name: str, prefix: str, count: int, own_shard: bool = False) -> str:
    """The id of the shard that runs the case ``name``: its own name when ``own_shard``
    (a case long enough to be a shard by itself), else a hashed shard's."""
    return name if own_shard else hashed_shard_ids(prefix, count)[shard_of(name, count)]


def select(items: Iterable[T], key: Callable[[T], str], wanted: str) -> list[T]:
    """The ``items`` whose shard id (``key(item)``) is ``wanted``, in their order."""
    return [item for item in items if key(item) == wanted]


def pool_jobs() -> int:
    """Worker processes for one shard's pool: one inside a pytest-xdist worker (xdist's
    workers already use the cores; a second layer of workers only competes with them),
    else one per core (a shard run alone, ``pytest tests/conformance/onnx``)."""
    return 1 if os.environ.get("PYTEST_XDIST_WORKER") else default_jobs()


def missing_shards(case_shards: Sequence[str], collected: Sequence[str]) -> list[str]:
    """Shard ids some case maps to that no collected test runs (a case no shard checks)."""
    return sorted(set(case_shards) - set(collected))
