"""Small C libraries built with the system C compiler at first use, cached by content.

Why at first use and not at install: the wheel is pure Python (the compiled code comes from
MLIR's JIT), and a C compiler is one of the three things a machine needs (python3, pip, cc).
The cache key is the sources' text and the command line, so an edited source or another flag
gives a fresh build; builds land in a temporary name first, so a concurrent process never
loads a half-written library. They live in :func:`cache_dir`, beside the compile cache's
entries (compiler/cache.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

from ..errors import CompileError, TilecraftError


def cache_dir() -> Path:
    """tilecraft's cache folder (built libraries, compiled models): ``$TILECRAFT_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/tilecraft``, else ``~/.cache/tilecraft`` (the XDG default)."""
    explicit = os.environ.get("TILECRAFT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "tilecraft"


def build_shared_library(filename: str, sources: Sequence[Path], flags: Sequence[str] = (), *,
                         what: str, error: type[TilecraftError] = CompileError) -> Path:
    """``cc -O2 -shared -fPIC <flags> <sources> -o <filename>`` once per content; returns the
    cached library. ``what`` names the library in errors (raised as ``error``)."""
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        raise error(f"{what} is built with a C compiler: no {compiler!r} on the PATH (set CC)")
    command = [compiler, "-O2", "-shared", "-fPIC", *flags, *(str(s) for s in sources), "-o"]
    text = "".join(Path(s).read_text() for s in sources) + " ".join(command)
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    output = cache_dir() / f"{Path(filename).stem}-{key}" / filename
    if output.is_file():
        return output
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output.parent) as scratch:
        partial = Path(scratch) / filename
        result = subprocess.run([*command, str(partial)], capture_output=True, text=True)
        if result.returncode != 0:
            raise error(f"building {what} failed:\n{result.stderr}")
        partial.replace(output)
    return output
