"""The wheel's package list is discovered (setup.py), not written down: every folder of the
checkout with an ``__init__.py`` is a ``tilecraft.*`` package except the checkout's tooling.
The wheel itself is built, installed and used by check_wheel.sh (``make wheel``)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_SHIPPED = {"tests", "benchmarks", "examples", "docs", "build", "dist", "venv"}


def _setup_module():
    spec = importlib.util.spec_from_file_location("tilecraft_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines the helpers; setup() runs only as __main__
    return module


def _package_folders() -> set[str]:
    """``tilecraft.<dotted folder>`` of every shipped folder with an __init__.py."""
    names = set()
    for folder, subfolders, files in os.walk(ROOT):
        relative = Path(folder).relative_to(ROOT)
        if relative.parts and "__init__.py" in files:
            names.add("tilecraft." + ".".join(relative.parts))
        subfolders[:] = [d for d in subfolders if not (
            d.startswith(".") or d.endswith(".egg-info") or (not relative.parts and d in NOT_SHIPPED))]
    return names


def test_every_package_folder_is_discovered():
    expected = {"tilecraft"} | _package_folders()
    found = set(_setup_module().tilecraft_packages())
    assert found == expected
    assert {"tilecraft.frontend.onnx", "tilecraft.ir", "tilecraft.frontend.torch"} <= found


def test_pyproject_has_no_hand_written_package_list():
    text = (ROOT / "pyproject.toml").read_text()
    assert "\npackages = [" not in text, "the package list is discovered by setup.py"
