"""Resource limits that keep bad input from crashing or exhausting the process.

Models downloaded from the internet are untrusted: a ``ConstantOfShape`` of 2^40 elements,
a tensor type whose element count overflows int64 (MLIR asserts and aborts the process) or
MLIR text nested thousands of levels deep (MLIR's recursive-descent parser overflows the C
stack) must end in a :class:`ResourceLimitError`, never in a dead process.

The limits, with their defaults and the environment variables that override them (sizes
accept ``K``/``M``/``G``/``T`` suffixes, powers of 1024):

==========================  =========  ==================================================
``TILECRAFT_MAX_TENSOR``     16G        bytes of one tensor of static shape in a module
``TILECRAFT_MAX_FOLD``       64M        bytes of one tensor computed at constant-fold time
                                        (larger results are left to run time, not folded)
``TILECRAFT_MAX_TOTAL``      1G         bytes of all tensors constant folding computes for
                                        one model (beyond it, nodes are emitted, not folded)
``TILECRAFT_MAX_NESTING``    256        bracket nesting depth of MLIR text
``TILECRAFT_MEMORY_BUDGET``  machine's  bytes one call may allocate at its boundary: each
                             memory     argument copy (a strided or unaligned view made
                                        C-contiguous), each output of static shape, and
                                        those outputs together (:func:`check_allocation`)
==========================  =========  ==================================================

numpy only (this module is part of the runtime layer every other layer may import).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import ResourceLimitError

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_INT64_MAX = (1 << 63) - 1


def parse_size(text: str, name: str) -> int:
    """``512M``, ``16G``, ``4096`` -> bytes (powers of 1024); :class:`ResourceLimitError`
    naming ``name`` for anything else."""
    match = re.fullmatch(r"(\d+)([KMGT]?)", text.strip().upper().removesuffix("B"))
    if match is None or int(match.group(1)) == 0:
        raise ResourceLimitError(f"{name} must be a positive size such as 512M or 16G, got {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _posix_environ_data() -> "dict[bytes, bytes] | None":
    """``os.environ``'s own dict where reading it is known to be right, else ``None``.

    Why read it at all: :func:`memory_budget` reads the environment on every call of a
    compiled model, and ``os.environ.get`` of an absent name raises and catches a
    ``KeyError`` inside ``Mapping.get``: several times a dict lookup (docs/performance.md,
    "Reading an array's data pointer", has both). No public API reads one variable
    without that: ``os.getenv`` is ``os.environ.get``, and ``posix.environ`` is a snapshot
    taken at start-up that later writes do not change.

    Where: CPython's os.py on POSIX keeps ``os.environ``'s entries in ``_data``, keyed by
    ``os.fsencode`` of the name, and every write through ``os.environ`` (``putenv`` and
    ``unsetenv`` too) goes through it. Checked here against ``os.environ`` itself; any other
    interpreter, platform or layout gets ``None`` and the plain lookup: slower, never wrong."""
    data = getattr(os.environ, "_data", None)
    if sys.implementation.name != "cpython" or os.name != "posix" or type(data) is not dict:
        return None
    try:
        agrees = len(data) == len(os.environ) and all(
            data.get(os.fsencode(name)) == os.fsencode(value) for name, value in os.environ.items())
    except (UnicodeError, TypeError):
        return None
    return data if agrees else None


_ENVIRON_DATA = _posix_environ_data()


def _environment(name: str) -> str:
    """``os.environ.get(name, "")``, read from ``os.environ``'s dict where
    :func:`_posix_environ_data` found it."""
    if _ENVIRON_DATA is not None:
        value = _ENVIRON_DATA.get(os.fsencode(name))
        return "" if value is None else os.fsdecode(value)
    return os.environ.get(name, "")


def _env_size(name: str, default: int) -> int:
    text = _environment(name).strip()
    return parse_size(text, name) if text else default


@dataclass(frozen=True)
class Limits:
    """The limits in force (see the module docstring); read from the environment per call so
    a test or a user can change them without restarting the process."""

    max_tensor_bytes: int
    max_total_bytes: int
    max_fold_bytes: int
    max_nesting: int

    @classmethod
    def current(cls) -> "Limits":
        return cls(
            max_tensor_bytes=_env_size("TILECRAFT_MAX_TENSOR", 16 << 30),
            max_total_bytes=_env_size("TILECRAFT_MAX_TOTAL", 1 << 30),
            max_fold_bytes=_env_size("TILECRAFT_MAX_FOLD", 64 << 20),
            max_nesting=_env_size("TILECRAFT_MAX_NESTING", 256),
        )


@functools.lru_cache(maxsize=1)
def physical_memory() -> int:
    """Bytes of this machine's memory (the default memory budget); 1 TiB when the system
    does not say (the budget then only stops sizes no machine has)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def memory_budget() -> int:
    """Bytes a call may allocate at its boundary: ``TILECRAFT_MEMORY_BUDGET``, else the
    machine's memory. Read per call, so a test or a server can change it while running."""
    return _env_size("TILECRAFT_MEMORY_BUDGET", 0) or physical_memory()


def check_allocation(what: str, nbytes: int, budget: int | None = None) -> None:
    """:class:`ResourceLimitError` naming ``what`` when allocating ``nbytes`` would exceed
    the memory budget. Why before allocating: numpy's own failure is an untyped
    ``_ArrayMemoryError`` (or, with overcommit, the kernel's OOM killer later), and a
    zero-stride view of 2^31 rows looks small until it is copied."""
    budget = memory_budget() if budget is None else budget
    if nbytes > budget:
        raise ResourceLimitError(
            f"{what} needs {nbytes} bytes ({_human(nbytes)}), above the memory budget of {budget} "
            f"bytes ({_human(budget)}; TILECRAFT_MEMORY_BUDGET, docs/robustness.md)"
        )


def _human(nbytes: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def element_count(shape: Sequence[int]) -> int:
    """Elements of a static shape as a Python int (never wraps around like int64 does)."""
    count = 1
    for extent in shape:
        count *= int(extent)
    return count


def check_tensor(what: str, shape: Sequence[int], itemsize: int, limits: Limits | None = None) -> int:
    """Bytes of a tensor of static ``shape``; :class:`ResourceLimitError` naming ``what`` when
    its element count overflows int64 or its size exceeds ``TILECRAFT_MAX_TENSOR``."""
    limits = limits or Limits.current()
    count = element_count(shape)
    if count > _INT64_MAX:
        raise ResourceLimitError(f"{what}: shape {list(shape)} has {count} elements, more than int64 can count")
    size = count * itemsize
    if size > limits.max_tensor_bytes:
        raise ResourceLimitError(
            f"{what}: shape {list(shape)} needs {size} bytes, above the per-tensor limit of "
            f"{limits.max_tensor_bytes} (TILECRAFT_MAX_TENSOR, docs/robustness.md)"
        )
    return size


MLIR_BYTECODE_MAGIC = b"ML\xefR"
# String literals (weights in hex, names) and comments hold brackets that do not nest.
_NOT_NESTING = re.compile(rb'"(?:[^"\\]|\\.)*"|//[^\n]*|->|>=|<=')
_DEPTH_STEP = np.zeros(256, dtype=np.int64)
for _open, _close in (b"()", b"[]", b"{}", b"<>"):
    _DEPTH_STEP[_open] = 1
    _DEPTH_STEP[_close] = -1


def check_nesting(text: "str | bytes", what: str = "the MLIR text", limits: Limits | None = None) -> None:
    """:class:`ResourceLimitError` when brackets in ``text`` nest deeper than
    ``TILECRAFT_MAX_NESTING``.

    Why before parsing: MLIR's parser recurses once per nested region, attribute or type and
    overflows the C stack (a segfault, a dead process) a few thousand levels deep; real IR
    nests a few dozen levels.
    """
    limits = limits or Limits.current()
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    if data.startswith(MLIR_BYTECODE_MAGIC):  # bytecode is not parsed recursively as text
        return
    steps = _DEPTH_STEP[np.frombuffer(_NOT_NESTING.sub(b"", data), dtype=np.uint8)]
    depth = int(np.cumsum(steps).max(initial=0))
    if depth > limits.max_nesting:
        raise ResourceLimitError(
            f"{what} nests brackets {depth} levels deep, above the limit of {limits.max_nesting} "
            "(TILECRAFT_MAX_NESTING, docs/robustness.md)"
        )
