"""Every repository file the docs name exists: a ``path/like/this.py`` in docs/*.md or the
README names a file of this repository (from its root, from the doc's folder, or, as the
sections about one folder write it, a tail such as ``ops/nn.py`` of a file under that
folder). A file that moved or was removed must take its docs along; a file outside the
repository is never cited (issue 42)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
SKIPPED = {".venv", "build", ".git", "node_modules", "__pycache__"}
# A path: folders, then a file name with one of the repository's source or doc suffixes.
PATH = re.compile(r"(?<![\w./$~-])((?:\.\./)?(?:[\w.-]+/)+[\w.-]+\.(?:py|c|h|md|toml|mlir|json|sh|td))(?![\w/])")
# Files a command writes (not in the repository), named as outputs.
OUTPUTS = {
    "build/onnx-conformance/results.json",  # written by tests/conformance/onnx/run.py
    "model.c/model.h",  # the C target's two generated sources, named together
}


def _repository_files() -> list[str]:
    files = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if path.is_file() and not SKIPPED.intersection(parts):
            files.append(path.relative_to(ROOT).as_posix())
    return files


def _named_paths() -> list[tuple[Path, int, str]]:
    found = []
    for doc in DOCS:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            found += [(doc, number, match.group(1)) for match in PATH.finditer(line)]
    return found


def _exists(doc: Path, named: str, files: set[str], tails: set[str]) -> bool:
    if (ROOT / named).is_file() or (doc.parent / named).resolve().is_file():
        return True
    return named in tails


def test_every_path_the_docs_name_exists():
    files = set(_repository_files())
    tails = {"/".join(f.split("/")[i:]) for f in files for i in range(1, f.count("/") + 1)}
    missing = [f"{doc.relative_to(ROOT)}:{number}: {named}" for doc, number, named in _named_paths()
               if named not in OUTPUTS and not _exists(doc, named, files, tails)]
    assert not missing, "docs name files this repository does not have:\n" + "\n".join(missing)


def test_no_doc_cites_a_file_outside_the_repository():
    outside = re.compile(r"(?<![\w.])(/work/|/home/|/root/|shared/STACK\.md|tilecraft/errors\.py)")
    cited = [f"{doc.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
             for doc in DOCS for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
             if outside.search(line)]
    assert not cited, "\n".join(cited)


def test_the_path_finder_sees_paths():
    line = "see `pipelines/jit.py`, frontend/onnx/ops/nn.py (and ops/shape.py); not 1.5/2.0 or a/b"
    assert [m.group(1) for m in PATH.finditer(line)] == ["pipelines/jit.py", "frontend/onnx/ops/nn.py",
                                                         "ops/shape.py"]
