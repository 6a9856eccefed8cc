"""Run a list of cases through the worker pool and collect one record per case.

A record is ``{"group", "status", "op_types", "message", "seconds"}`` plus, when present,
``"unsupported"`` (op types an import-error names), ``"warnings"`` (tilecraft warnings such
as a schedule falling back to scalar loops) and ``"attempts"`` (a timeout is run
once more, alone in a fresh worker, before it counts: a loaded machine can make a
borderline case miss its deadline).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable, Iterable, Mapping

from .pool import Outcome, Task, WorkerPool
from .report import REPO_ROOT
from .suite import DEFAULT_TIMEOUTS, Case

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "build", "onnx-conformance", "results.json")
WORKER_COMMAND = (sys.executable, "-m", "onnx_conformance.worker")
RETRIED = ("timeout",)

Record = dict[str, Any]
Progress = Callable[[int, int, str, Record], None]


def default_jobs() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def worker_env() -> dict[str, str]:
    """This environment, with the harness folder importable (``onnx_conformance``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HARNESS_DIR, env.get("PYTHONPATH")) if p)
    return env


def _record(case: Case, outcome: Outcome) -> Record:
    record: Record = {"group": case.group, "op_types": list(case.op_types)}
    if outcome.failure is not None:
        record.update(status=outcome.failure, message=outcome.message, seconds=round(outcome.seconds, 3))
    else:
        record.update(outcome.reply)
    return record


def run_cases(
    cases: Iterable[Case],
    *,
    jobs: int | None = None,
    timeouts: Mapping[str, float] | None = None,
    retries: int = 1,
    progress: Progress | None = None,
    command: Iterable[str] = WORKER_COMMAND,
    env: Mapping[str, str] | None = None,
) -> dict[str, Record]:
    """Run ``cases``; returns ``{case name: record}`` (see the module doc)."""
    cases = list(cases)
    by_name = {case.name: case for case in cases}
    limits = {**DEFAULT_TIMEOUTS, **(timeouts or {})}
    pool = WorkerPool(list(command), jobs=jobs or default_jobs(), env=env if env is not None else worker_env())
    results: dict[str, Record] = {}
    total = len(cases)

    def tasks(selected: Iterable[Case]) -> list[Task]:
        return [Task(case.name, limits[case.group], case.load) for case in selected]

    # Longest first: the light models take minutes each and would otherwise run last, alone.
    first = sorted(cases, key=lambda case: case.group != "light")
    done = 0
    for outcome in pool.run(tasks(first)):
        done += 1
        results[outcome.task.key] = _record(by_name[outcome.task.key], outcome)
        if progress:
            progress(done, total, outcome.task.key, results[outcome.task.key])

    for attempt in range(2, retries + 2):
        again = [by_name[name] for name, record in results.items() if record["status"] in RETRIED]
        if not again:
            break
        single = WorkerPool(list(command), jobs=1, env=pool.env)
        for outcome in single.run(tasks(again)):
            record = _record(by_name[outcome.task.key], outcome)
            record["attempts"] = attempt
            results[outcome.task.key] = record
            if progress:
                progress(total, total, outcome.task.key, record)
    return {case.name: results[case.name] for case in cases}


def print_progress(verbose: bool) -> Progress:
    """Progress printer: every case when ``verbose``, else about every 5 % plus every
    timeout and crash (those are the ones worth watching live)."""
    start = time.monotonic()
    step = [0]

    def report(done: int, total: int, name: str, record: Record) -> None:
        status = record["status"]
        elapsed = time.monotonic() - start
        if verbose or status in ("timeout", "crash") or record.get("attempts"):
            retry = f" (attempt {record['attempts']})" if record.get("attempts") else ""
            message = f"  {record['message'][:160]}" if verbose and record.get("message") else ""
            print(f"[{done:>5}/{total}] {elapsed:7.1f}s {status:<14} {name} "
                  f"({record.get('seconds', 0):.1f}s){retry}{message}", flush=True)
        elif done * 20 // max(total, 1) > step[0] or done == total:
            step[0] = done * 20 // max(total, 1)
            print(f"[{done:>5}/{total}] {elapsed:7.1f}s", flush=True)

    return report


def save_results(results: Mapping[str, Record], path: str = DEFAULT_OUTPUT) -> str:
    """Write ``results`` as JSON (for --from-results and for reading a failed CI run)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as stream:
        json.dump(results, stream, indent=1, sort_keys=True)
    return path
