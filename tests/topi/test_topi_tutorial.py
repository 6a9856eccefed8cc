"""examples/tutorials/topi_ops.py end to end at a small size: every step checked against
numpy (the script exits 1 on a mismatch) and its timing table printed."""

import subprocess
import sys
from pathlib import Path

import pytest

import tilecraft

SCRIPT = Path(tilecraft.__file__).resolve().parent / "examples" / "tutorials" / "topi_ops.py"


@pytest.mark.slow
def test_topi_tutorial_runs():
    result = subprocess.run([sys.executable, str(SCRIPT), "--size", "8", "--repeat", "1"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    for line in ("topi.sum(A, axis=1): OK", "topi.add (4,1,8) + (5,8): OK", "conv2d-relu-pool-dense-softmax: OK",
                 "conv2d scheduled: OK", "sch.compute_at(b10, l8)", "scheduled conv2d vs default:"):
        assert line in result.stdout, result.stdout
    assert "GFLOPS" in result.stdout
