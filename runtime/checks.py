"""Run-time checks in generated code: the names the IR and the runtimes agree on, the
failure report, and the typed error a failed check becomes.

How a check travels (docs/robustness.md, "Run-time checks"): an emitter or the pass
``tilecraft-insert-runtime-checks`` puts ``func.call @tilecraft_runtime_check(%ok, %value,
%bound)`` into the tensor IR, with the check's kind and message as attributes;
``tilecraft-lower-runtime-checks`` numbers the checks (the module attribute
:data:`TABLE_ATTRIBUTE` keeps their kinds and messages) and turns each into a branch that
calls :data:`REPORT_SYMBOL` only when the check fails (a shape or allocation check then
returns from the entry at once). The report is kept per thread: in the JIT by a ctypes
callback (:func:`report_address`), in a package by ``runtime/runtime_checks.c``; the caller
of the entry takes it after the call (:func:`take_jit_failure`, :func:`take_package_failure`)
and raises :func:`check_error`.

Why this module is in runtime/ (numpy and ctypes only): the frontend emitters, the passes,
the JIT and a package loaded without MLIR all need these names.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Sequence

from ..errors import (AllocationLimitError, IndexOutOfRangeError, LinAlgError, RuntimeCheckError,
                      RuntimeVerificationError, ShapeMismatchError)

# The tensor-level marker: a private declaration ``(i1, i64, i64) -> ()``.
CHECK_FUNCTION = "tilecraft_runtime_check"
# Attributes of a marker call: what it checks ("index", "shape", "alloc") and the message
# template, with ``{value}`` and ``{bound}`` filled in from the failing call's operands.
KIND_ATTRIBUTE = "tilecraft.check_kind"
MESSAGE_ATTRIBUTE = "tilecraft.check_message"
KINDS = ("index", "shape", "alloc", "verify",  # verify: a checked build's (runtime_verification.py)
         "linalg")  # linalg: LAPACK's info of a factorization (ir/lapack.py)
# Module attribute of the lowered module: one "kind\tmessage" string per check id.
TABLE_ATTRIBUTE = "tilecraft.runtime_checks"
# The C function a failed check calls: ``void (int64_t id, int64_t value, int64_t bound)``.
REPORT_SYMBOL = "tilecraft_check_failed"
# In a package library (runtime_checks.c): ``int (int64_t out[3])``, 1 and the first failure
# of this thread's last call, or 0.
TAKE_SYMBOL = "tilecraft_take_check_failure"

_ERRORS = {"index": IndexOutOfRangeError, "shape": ShapeMismatchError, "alloc": AllocationLimitError,
           "verify": RuntimeVerificationError, "linalg": LinAlgError}


def encode_table(entries: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{kind}\t{message}" for kind, message in entries]


def decode_table(strings: Sequence[Any]) -> list[tuple[str, str]]:
    table = []
    for entry in strings:
        kind, _, message = str(entry).partition("\t")
        table.append((kind, message))
    return table


def check_error(table: Sequence[tuple[str, str]], failure: tuple[int, int, int]) -> RuntimeCheckError:
    """The typed error of ``failure`` = (check id, value, bound)."""
    check_id, value, bound = failure
    if 0 <= check_id < len(table):
        kind, message = table[check_id]
    else:  # a table edited or lost: still an error, only a less specific one
        kind, message = "", "run-time check {id} failed (value {value}, bound {bound})"
    try:
        text = message.format(value=value, bound=bound, id=check_id)
    except (KeyError, IndexError, ValueError):
        text = f"{message} (value {value}, bound {bound})"
    return _ERRORS.get(kind, RuntimeCheckError)(text)


# ---- JIT: a ctypes callback keeps the first failure of the call on this thread ------------

_pending = threading.local()


def _report(check_id: int, value: int, bound: int) -> None:
    if getattr(_pending, "failure", None) is None:
        _pending.failure = (int(check_id), int(value), int(bound))


_REPORT_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_report_callback = _REPORT_TYPE(_report)


def report_address() -> int:
    """The address the JIT binds :data:`REPORT_SYMBOL` to (lives as long as the process)."""
    return ctypes.cast(_report_callback, ctypes.c_void_p).value


def take_jit_failure() -> tuple[int, int, int] | None:
    """The first failed check of the JIT'ed call that just returned on this thread, if any."""
    failure = getattr(_pending, "failure", None)
    if failure is not None:
        _pending.failure = None
    return failure


def take_package_failure(take: Any) -> tuple[int, int, int] | None:
    """The same for a package library, through its :data:`TAKE_SYMBOL` function ``take``."""
    out = (ctypes.c_int64 * 3)()
    if not take(out):
        return None
    return int(out[0]), int(out[1]), int(out[2])
