"""The tuning records as a :class:`~tilecraft.tuning.roles.Database`: one JSON-lines file.

The on-disk format is schedule/records.py's (one record per line, read by the compiler's
``tuning_records=``); this class gives it the database role's interface: :meth:`commit`
appends a record durably (fsync'd, under a file lock, so concurrent writers never
interleave lines), :meth:`records` reads back this and earlier runs' records (a resumed run
starts from them), :meth:`best` is what the compiler would apply.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..schedule.records import Record, RecordWriter, load_records
from .roles import Database


class JsonLinesDatabase(Database):
    """The records file at ``path`` (created on the first commit, not before)."""

    def __init__(self, path: "str | os.PathLike[str]") -> None:
        self.path = Path(path)
        self._writer: RecordWriter | None = None

    def commit(self, record: Record) -> None:
        if self._writer is None:
            self._writer = RecordWriter(self.path)
        self._writer.write(record)

    def records(self, target: Any = None) -> list[Record]:
        """The file's readable records of ``target`` (all targets when ``None``) and of this
        tilecraft version; corrupt lines are skipped with one warning (records.py)."""
        return load_records(self.path, target=target)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __repr__(self) -> str:
        return f"JsonLinesDatabase({str(self.path)!r})"
