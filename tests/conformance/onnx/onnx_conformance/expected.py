"""The checked-in expected status of every case, and what CI holds a run to.

``expected_status.txt``: ``#`` comment lines, then one ``<case> <status>`` line per case,
sorted by case name (a plain ``git diff`` shows what a change fixed or broke).

A run fails against the file on:

- a regression: the file says ``pass``, the run says anything else;
- an unexpected pass: the file says a non-pass status, the run says ``pass`` (progress,
  but the file must record it so it cannot silently regress later);
- a changed case set: cases the file lists that no longer exist, or new ones it lacks.

A case moving between two non-pass statuses (``import-error`` -> ``compile-error`` when a
handler lands, say) is reported but does not fail: the file then needs refreshing, which
``--update-expected`` does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

STATUSES = ("pass", "wrong-result", "import-error", "compile-error", "runtime-error", "timeout", "crash",
            "harness-error")
PASS = "pass"

EXPECTED_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "expected_status.txt")

HEADER = """\
# Expected status of each ONNX conformance case run through tilecraft (one "case status" per line).
# CI (tests/conformance/onnx/test_conformance.py) fails on any regression (pass -> other), any
# unexpected pass (other -> pass) and any change in the set of cases. Regenerate with:
#   .venv/bin/python tests/conformance/onnx/run.py --update-expected
# Statuses: pass, wrong-result, import-error, compile-error, runtime-error, timeout, crash.
"""


def read_expected(path: str = EXPECTED_PATH, statuses: tuple[str, ...] = STATUSES) -> dict[str, str]:
    """The file's ``case -> status``; a malformed line, an unknown status or a case listed twice
    is a ValueError naming the line (the OpInfo harness passes its own statuses)."""
    expected: dict[str, str] = {}
    with open(path) as stream:
        for number, line in enumerate(stream, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2 or parts[1] not in statuses:
                raise ValueError(f"{path}:{number}: expected '<case> <status>', got {line!r}")
            if parts[0] in expected:
                raise ValueError(f"{path}:{number}: {parts[0]} is listed twice")
            expected[parts[0]] = parts[1]
    return expected


def write_expected(statuses: Mapping[str, str], path: str = EXPECTED_PATH, header: str = HEADER) -> None:
    """Writes ``header`` then one sorted ``case status`` line per case."""
    with open(path, "w") as stream:
        stream.write(header)
        for name in sorted(statuses):
            stream.write(f"{name} {statuses[name]}\n")


@dataclass
class Comparison:
    """How a run's statuses differ from the expected ones (case name lists are sorted)."""

    regressions: list[str] = field(default_factory=list)
    unexpected_passes: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed_failures: list[str] = field(default_factory=list)  # informational only

    @property
    def ok(self) -> bool:
        return not (self.regressions or self.unexpected_passes or self.added or self.removed)


def compare(expected: Mapping[str, str], actual: Mapping[str, str]) -> Comparison:
    result = Comparison()
    for name in sorted(set(expected) | set(actual)):
        if name not in actual:
            result.removed.append(name)
        elif name not in expected:
            result.added.append(name)
        elif expected[name] == PASS and actual[name] != PASS:
            result.regressions.append(name)
        elif expected[name] != PASS and actual[name] == PASS:
            result.unexpected_passes.append(name)
        elif expected[name] != actual[name]:
            result.changed_failures.append(name)
    return result


def _section(title: str, names: list[str], describe, limit: int | None) -> list[str]:
    if not names:
        return []
    shown = names if limit is None else names[:limit]
    lines = [f"{title} ({len(names)}):"] + [f"  {describe(name)}" for name in shown]
    if len(shown) < len(names):
        lines.append(f"  ... and {len(names) - len(shown)} more")
    return lines


def format_comparison(
    comparison: Comparison,
    expected: Mapping[str, str],
    results: Mapping[str, Mapping[str, object]],
    *,
    limit: int | None = 200,
) -> str:
    """A readable diff: each offending case with its old and new status and the message."""

    def now(name: str) -> str:
        record = results.get(name, {})
        message = str(record.get("message") or "")
        return f"{name}: {expected.get(name, '(absent)')} -> {record.get('status')}" + (f": {message}" if message else "")

    lines = []
    lines += _section("REGRESSIONS (expected pass)", comparison.regressions, now, limit)
    lines += _section("UNEXPECTED PASSES (record them in the expected file)", comparison.unexpected_passes, now, limit)
    lines += _section("NEW CASES (not in the expected file)", comparison.added,
                      lambda n: f"{n}: {results[n]['status']}", limit)
    lines += _section("REMOVED CASES (in the expected file, not in this run)", comparison.removed,
                      lambda n: f"{n}: was {expected[n]}", limit)
    lines += _section("changed failure kind (not an error; refresh the file)", comparison.changed_failures, now, 50)
    return "\n".join(lines)
