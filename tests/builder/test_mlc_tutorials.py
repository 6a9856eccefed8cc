"""The MLC course's end-to-end tutorials (examples/tutorials/mlc_*.py) run whole: each checks
its model against PyTorch itself and prints its timings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

TUTORIALS = Path(__file__).resolve().parents[2] / "examples" / "tutorials"


@pytest.mark.slow
@pytest.mark.parametrize("script, expected", [
    ("mlc_mlp.py", ["_tcx_3env6linear", "matches PyTorch", "time per call"]),
    ("mlc_cnn.py", ["matches PyTorch", "time per call", "loaded back: same outputs"]),
])
def test_mlc_tutorial_runs_and_matches_pytorch(script, expected):
    done = subprocess.run([sys.executable, str(TUTORIALS / script), "--repeat", "2"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    for line in expected:
        assert line in done.stdout
