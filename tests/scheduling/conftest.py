"""Helpers for the scheduling tests: FileCheck on printed IR, small random arrays."""

import importlib.util
import subprocess
from pathlib import Path

import numpy as np
import pytest

_LLVM_BIN = Path(next(iter(importlib.util.find_spec("llvm").submodule_search_locations))) / "bin"


def filecheck(text: str, checks: str, tmp_path: Path) -> None:
    """Run LLVM's FileCheck with ``checks`` (lines of ``CHECK:`` directives) over ``text``."""
    check_file = tmp_path / "checks.txt"
    check_file.write_text(checks)
    result = subprocess.run(
        [str(_LLVM_BIN / "FileCheck"), str(check_file), "--dump-input=fail"],
        input=text, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr[-4000:]


@pytest.fixture
def check(tmp_path):
    return lambda text, checks: filecheck(text, checks, tmp_path)


@pytest.fixture
def arrays():
    rng = np.random.default_rng(0)
    return lambda *shape: (rng.random(shape, dtype=np.float32) * 2 - 1)
