"""Hashes of the lowered IR of the light model zoo, per target: the check that a refactoring
of how targets are found (tilecraft/targets, the target registry) changed no compiled code.

Run it before and after a change and compare the lines: for the CPU target the IR after the
schedule stage and after the LLVM stage, for CUDA the host IR and the kernels' PTX (no GPU needed; the later stages' IR carries
the PTX translation's time in milliseconds),
for C the emitted ``model.c``. Models: the MLC course CNN and the GPT-2-style block of
tests/models/zoo.py (the light ones: seconds to a minute each).

    PYTHONPATH=<checkout parent> python benchmarks/target_ir_hashes.py
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "models"))
from zoo import ZOO  # noqa: E402

import tilecraft  # noqa: E402

MODELS = ("mlc_cnn", "gpt2_block")
CUDA_MODELS = MODELS


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def exported(name: str) -> torch.export.ExportedProgram:
    build, inputs = ZOO[name]
    return torch.export.export(build(), inputs())


def main() -> None:
    for name in MODELS:
        program = exported(name)
        cpu = tilecraft.compile(program, target="llvm -mcpu=haswell", cache=False, verbose=False)
        print(f"{name} llvm schedule {digest(cpu.ir('schedule'))} llvm {digest(cpu.ir('llvm'))}")
        if name in CUDA_MODELS:
            cuda = tilecraft.compile(program, target="cuda -arch=sm_80", cache=False, verbose=False)
            print(f"{name} cuda host {digest(cuda.ir('host'))} ptx {digest(cuda.ptx())}")
    c_model = tilecraft.compile(exported("mlc_cnn"), target="c", cache=False, verbose=False)
    print(f"mlc_cnn c model.c {digest(c_model.sources['model.c'])}")


if __name__ == "__main__":
    main()
