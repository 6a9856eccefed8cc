"""Tuning records: one JSON object per line, one line per measurement.

A line is appended, flushed and fsync'd as soon as its measurement ends, so a killed tuning
loses at most the candidate in flight and resumes from the file (``prior_records``). Each
record carries the task key, the target, tilecraft's version and the schedule script, so a
user can read the best script for a task. Lines that are not JSON, miss fields, or come from
another target or tilecraft version are skipped; unreadable lines produce one warning per
file.

    {"version": 1, "tilecraft": "0.1.0", "target": "llvm", "task": {"key": "...", "name":
     "matmul_1024x1024x1024_f32", "kind": "matmul", ...}, "config": {"par_m": 64, ...},
     "status": "ok", "costs": [0.0051, ...], "gflops": 421.3, "error": "", "tuner": "xgb",
     "trial": 17, "timestamp": 1795310000.0, "script": "transform.named_sequence ..."}
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..pipelines.target import Target
from ..errors import InternalError

RECORD_FORMAT = 1
STATUSES = ("ok", "build_error", "run_error", "timeout", "wrong", "crash")


def tilecraft_version() -> str:
    from .. import (
        __version__,  # the package root; imported late, it imports this package lazily
    )

    return __version__


def canonical_target(target: "str | Target") -> str:
    """The target as records key it: kind and CPU options, not the thread count."""
    target = Target.parse(target)
    parts = [target.kind]
    if target.mcpu:
        parts.append(f"-mcpu={target.mcpu}")
    if target.mattr:
        parts.append(f"-mattr={','.join(target.mattr)}")
    if target.mtriple:
        parts.append(f"-mtriple={target.mtriple}")
    return " ".join(parts)


@dataclass(frozen=True)
class Record:
    """One measurement of one config of one task (see the module docstring for the fields)."""

    task: dict[str, Any]
    config: dict[str, int]
    status: str
    costs: list[float]
    gflops: float
    target: str
    tilecraft: str = field(default_factory=tilecraft_version)
    error: str = ""
    tuner: str = ""
    trial: int = 0
    timestamp: float = 0.0
    script: str = ""
    version: int = RECORD_FORMAT

    @property
    def key(self) -> str:
        return self.task["key"]

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def cost(self) -> float:
        """Median seconds per run; infinite for a failed measurement."""
        return statistics.median(self.costs) if self.ok and self.costs else float("inf")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> "Record":
        """Parse one line; raises ``ValueError`` (or ``KeyError``/``TypeError``) if malformed."""
        data = json.loads(line)
        if not isinstance(data, dict) or data.get("version") != RECORD_FORMAT:
            raise ValueError("not a tilecraft tuning record")
        record = cls(
            task=dict(data["task"]), config={str(k): int(v) for k, v in data["config"].items()},
            status=str(data["status"]), costs=[float(c) for c in data["costs"]],
            gflops=float(data["gflops"]), target=str(data["target"]),
            tilecraft=str(data["tilecraft"]), error=str(data.get("error", "")),
            tuner=str(data.get("tuner", "")), trial=int(data.get("trial", 0)),
            timestamp=float(data.get("timestamp", 0.0)), script=str(data.get("script", "")),
        )
        if record.status not in STATUSES or not isinstance(record.task.get("key"), str):
            raise ValueError(f"bad status {record.status!r} or task key")
        return record


class RecordWriter:
    """Appends records to a JSON-lines file, durably, one measurement at a time.

    Safe under concurrent writers (two tuning runs, or a run and a ``compare_tuners``, on one
    file): each line goes out in ``O_APPEND`` writes under an exclusive ``flock``, so lines
    never interleave, however long a record's script is; ``fsync`` before the lock is
    released, so a record is on disk when :meth:`write` returns.
    """

    def __init__(self, path: "str | os.PathLike[str]") -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Read access too: write() looks at the file's last byte.
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: Record) -> None:
        if self._fd is None:
            raise InternalError(f"write to the closed records writer of {self.path}")  # a programming error
        data = (record.to_json() + "\n").encode("utf-8")
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            # A file cut short (a copy, a full disk) ends inside a line: the record must start
            # a line of its own, or it would be lost with that line's remains.
            size = os.fstat(self._fd).st_size
            if size and os.pread(self._fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            os.fsync(self._fd)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_records(path: "str | os.PathLike[str]", *, target: "str | Target | None" = None,
                 version: str | None = None) -> list[Record]:
    """Records of ``path`` for ``target`` and tilecraft ``version`` (default: this one).

    Malformed lines, and lines of another target or version, are skipped; one
    ``RuntimeWarning`` per file says how many and why. A missing file has no records.
    """
    path = Path(path)
    if not path.exists():
        return []
    wanted_target = canonical_target(target) if target is not None else None
    wanted_version = version or tilecraft_version()
    records: list[Record] = []
    corrupt = foreign = 0
    first_problem = ""
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = Record.from_json(line)
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                corrupt += 1
                first_problem = first_problem or f"line {number}: {error}"
                continue
            if (wanted_target is not None and record.target != wanted_target) or (
                    record.tilecraft != wanted_version):
                foreign += 1
                continue
            records.append(record)
    if corrupt or foreign:
        warnings.warn(
            f"{path}: skipped {corrupt} corrupt line(s) and {foreign} record(s) of another "
            f"target or tilecraft version" + (f" (first corrupt: {first_problem})" if corrupt else ""),
            RuntimeWarning, stacklevel=2,
        )
    return records


# Tuner name of the records of the validation phase (see tilecraft.tuning.tune).
VALIDATED = "final"
# Tuner name of the records timed inside the model (tilecraft.tuning.in_model.confirm_in_model):
# the best config and the default, each as a kernel of a profiled run of the whole model.
IN_MODEL = "in_model"
# Which records decide, per task: those of its highest tier (a search measurement is tier 0).
_TIERS = {VALIDATED: 1, IN_MODEL: 2}


def is_remeasurement(record: Record) -> bool:
    """A validation or in-model record: a config measured again, not a trial of a search."""
    return record.tuner in _TIERS


def best_records(records: Iterable[Record]) -> dict[str, Record]:
    """Per task key, the fastest successful record (failed records are never chosen).

    Where a task has validated records (the top candidates re-measured round-robin after the
    search), only those compete: a single search measurement taken in a quiet moment of a
    loaded machine must not beat candidates measured side by side. Where it has in-model
    records (its best config and its default timed in profiled runs of the model), only
    those compete: a config faster alone but slower in the model is not applied.
    """
    records = [r for r in records if r.ok]
    tier: dict[str, int] = {}
    for record in records:
        tier[record.key] = max(tier.get(record.key, 0), _TIERS.get(record.tuner, 0))
    best: dict[str, Record] = {}
    for record in records:
        if _TIERS.get(record.tuner, 0) != tier[record.key]:
            continue
        if record.key not in best or record.cost < best[record.key].cost:
            best[record.key] = record
    return best

