"""Every fenced code block of README.md and docs/*.md, run as written.

Blocks are read with pytest-codeblocks' parser (pinned in the ``dev`` extra), so its
HTML-comment markers apply, on the lines right before a block:

    <!--pytest.mark.skip(reason="...")-->   CI cannot run it (a GPU, your own file): reason required
    <!--pytest.mark.slow-->                 a heavier block, deselected by -m "not slow"
    <!--pytest.mark.gpu-->                  runs kernels on a CUDA GPU: skipped without one
    <!--pytest-codeblocks:cont-->           continues the previous block (one program)

``python`` blocks run in this process, ``sh``/``bash`` blocks with ``bash -e -o pipefail``.
Both run in one scratch copy of the checkout per document, in document order, so what a
block writes (``digits.tar``, ``digits_in.npz``) is there for the blocks after it; this
environment's ``bin/`` (``tilecraft``, ``tilecraft-opt``, ``python``) is first on PATH.
Every fence names its language: ``text``, ``mlir``, ``json`` ... (not in RUNNABLE) are
output or IR listings and are not run; a fence without one fails ``test_fences_name_a_language``.
A block that depends on a slow one is marked slow too. Under pytest-xdist (``make test``
runs ``--dist loadgroup``) the module is one group, so one worker runs every block, in order.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

codeblocks = pytest.importorskip("pytest_codeblocks")

# The blocks of a document share its scratch copy and run in order: one xdist worker.
pytestmark = pytest.mark.xdist_group("doc_blocks")

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = {"python", "sh", "bash"}
NOT_COPIED = shutil.ignore_patterns(".venv", ".git", "build", "dist", "Output", "__pycache__",
                                    "*.egg-info", ".pytest_cache")
SH_TIMEOUT = 540


def _cuda_gpu_present() -> bool:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    except OSError:
        return False


def _marks(block) -> list:
    marks = []
    for text in block.marks:
        mark = eval(text, {"pytest": pytest, "sys": sys})  # what pytest-codeblocks does
        if mark.name == "skip" and not mark.kwargs.get("reason") and not mark.args:
            raise ValueError(f"{text}: a skipped block must say why (reason=...)")
        marks.append(mark)
        if mark.name == "gpu":
            marks.append(pytest.mark.skipif(not _cuda_gpu_present(), reason="needs a CUDA GPU"))
    return marks


def _blocks():
    for document in DOCUMENTS:
        for block in codeblocks.extract_from_file(document):
            if block.syntax in RUNNABLE:
                name = f"{document.relative_to(ROOT)}:{block.lineno}"
                yield pytest.param(document, block, id=name, marks=_marks(block))


@pytest.fixture(scope="session")
def workspaces(tmp_path_factory):
    """One scratch copy of the checkout per document, made on first use."""
    made: dict[Path, Path] = {}

    def workspace(document: Path) -> Path:
        if document not in made:
            made[document] = tmp_path_factory.mktemp(document.stem) / "checkout"
            shutil.copytree(ROOT, made[document], ignore=NOT_COPIED, symlinks=True)
        return made[document]

    return workspace


@pytest.mark.parametrize("document, block", list(_blocks()))
def test_block(document, block, workspaces, monkeypatch):
    cwd = workspaces(document)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    where = f"{document.relative_to(ROOT)}:{block.lineno}"
    if block.syntax == "python":
        exec(compile(block.code, where, "exec"), {"__name__": "__main__"})
        return
    completed = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=cwd,
                               capture_output=True, text=True, timeout=SH_TIMEOUT)
    if completed.returncode != 0:
        pytest.fail(f"{where}: exit {completed.returncode}\n--- stdout\n{completed.stdout[-4000:]}"
                    f"\n--- stderr\n{completed.stderr[-4000:]}", pytrace=False)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: str(d.relative_to(ROOT)))
def test_fences_name_a_language(document):
    unnamed = [block.lineno for block in codeblocks.extract_from_file(document) if not block.syntax]
    assert not unnamed, f"{document.name}: fences at lines {unnamed} name no language (text for output)"
