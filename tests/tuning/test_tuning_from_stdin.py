"""Tuning from a script read on stdin (``python - < tune.py``), as from a notebook: the
measuring workers start with the ``spawn`` method, and a ``__main__`` without a file must
not keep them from finding the user's compute (issue #44, item 6)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import numpy as np
    from tilecraft import auto_scheduler
    from tilecraft.schedule import te

    @auto_scheduler.register_workload
    def matmul_add(N, L, M, dtype):
        A = te.placeholder((N, L), name="A", dtype=dtype)
        B = te.placeholder((L, M), name="B", dtype=dtype)
        C = te.placeholder((N, M), name="C", dtype=dtype)
        k = te.reduce_axis(L, name="k")
        matmul = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")
        return [A, B, C, te.compute((N, M), lambda i, j: matmul[i, j] + C[i, j], name="out")]

    task = auto_scheduler.SearchTask(func=matmul_add, args=(32, 48, 40, "float32"), target="llvm")
    task.tune(auto_scheduler.TuningOptions(num_measure_trials=2, verbose=0,
                                           measure_callbacks=[auto_scheduler.RecordToFile("records.json")]))
    func = task.apply_best("records.json")
    a, b, c = np.random.rand(32, 48).astype(np.float32), np.random.rand(48, 40).astype(np.float32), \\
        np.random.rand(32, 40).astype(np.float32)
    np.testing.assert_allclose(func(a, b, c), a @ b + c, rtol=1e-4)
    print("tuned from stdin")
""")


@pytest.mark.slow
def test_a_script_on_stdin_tunes_and_applies_its_records(tmp_path):
    done = subprocess.run([sys.executable, "-"], input=SCRIPT, capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tuned from stdin" in done.stdout
    records = [json.loads(line) for line in (tmp_path / "records.json").read_text().splitlines() if line.strip()]
    assert records, "no measurement was recorded"
    measured = [record for record in records if record.get("status") == "ok" and record.get("costs")]
    assert measured, f"every candidate failed in the workers: {[r.get('error') for r in records][:3]}"
