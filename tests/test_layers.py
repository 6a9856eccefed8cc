"""The layering of docs/architecture.md holds: each folder imports only from the folders
below it (import-linter's layers contract in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_layer_contract_is_kept(tmp_path):
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.fail("lint-imports is missing: install the dev extra (pip install -e '.[dev]')")
    done = subprocess.run([lint, "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
