"""runtime/async_loop.h is the one copy of "a loop as async-parallel-for's lowered code
drives the async runtime" for C programs without MLIR: the overhead benchmark and the
ThreadSanitizer driver (tests/robustness/test_sanitizers.py runs that one) both include it
and declare none of the runtime's functions themselves; the benchmark builds and runs."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = [ROOT / "benchmarks" / "parallel_overhead.c", ROOT / "tests" / "robustness" / "async_runtime_driver.c"]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_each_program_includes_the_one_loop(program):
    text = program.read_text()
    assert re.search(r'#include "(\.\./)+runtime/async_loop\.h"', text)
    assert not re.search(r"^\w[\w\s*]*\bmlirAsyncRuntime\w+\(", text, re.MULTILINE)  # no declarations of its own
    assert "async_loop_run(" in text


def test_the_benchmark_builds_and_runs(tmp_path):
    compiler = os.environ.get("CC", "cc")
    binary = tmp_path / "overhead"
    subprocess.run([compiler, "-O1", "-Wall", "-Werror", "-pthread", str(PROGRAMS[0]),
                    str(ROOT / "runtime" / "async_runtime.c"), "-o", str(binary)], check=True,
                   capture_output=True, text=True)
    done = subprocess.run([str(binary), "3", "50"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TILECRAFT_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("async path") == 2 and done.stdout.count("flat parallel-for") == 2
