"""Cross-compiling the C target's ``model.c`` for microcontrollers, and what the objects cost.

Why: the C target exists for devices without an OS; this module checks that its sources
build for them and reports what microTVM's model library format reports per target: code
size (``.text``), read-only data (``.rodata``: the weights), and static RAM (``.data`` +
``.bss`` + the planned workspace). Compile-only (object files): a device's firmware links
them with its own libm and start-up code.

The compiler is ``zig cc`` from the pinned ``ziglang`` wheel (extra ``cross`` in
pyproject.toml; compiler/package.py uses it the same way for Linux cross builds): one
download that carries Clang and every LLVM backend. Its freestanding targets have no libc
headers, hence ``-DTC_MODEL_FREESTANDING`` (model.c then declares its libm prototypes).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ...compiler.elf import (EF_ARM_ABI_FLOAT_HARD, EF_RISCV_FLOAT_ABI, EF_RISCV_RVC, EM_ARM,  # noqa: F401
                             EM_RISCV, ElfInfo, read_elf, zig_available)
from ...errors import ToolchainError
from .package import CModel


@dataclass(frozen=True)
class CrossTarget:
    """A microcontroller target: its name, ``zig cc`` target and CPU, and the ELF header
    fields an object built for it must carry."""

    name: str
    description: str
    zig_target: str
    cpu: str
    machine: int
    elf_class: int  # 32 or 64

    def command(self) -> list[str]:
        return [sys.executable, "-m", "ziglang", "cc", "-target", self.zig_target, f"-mcpu={self.cpu}"]


CROSS_TARGETS: dict[str, CrossTarget] = {
    target.name: target for target in (
        CrossTarget("cortex-m4f", "Arm Cortex-M4F (thumbv7em, hard float)", "thumb-freestanding-eabihf",
                    "cortex_m4", EM_ARM, 32),
        CrossTarget("rv32imafc", "RISC-V rv32imafc (ilp32f)", "riscv32-freestanding-none",
                    "generic_rv32+m+a+f+c", EM_RISCV, 32),
        CrossTarget("rv64gc", "RISC-V rv64gc (lp64d)", "riscv64-freestanding-none", "baseline_rv64", EM_RISCV, 64),
    )
}
# Seconds one cross build may take (a model of millions of weights is a large source file).
CROSS_TIMEOUT = 600
CROSS_FLAGS = ("-std=c99", "-pedantic", "-Os", "-g0", "-ffunction-sections", "-fdata-sections",
               "-DTC_MODEL_FREESTANDING", "-Wall", "-Wextra", "-Werror")


@dataclass(frozen=True)
class SizeReport:
    """What one target's object costs, as microTVM's model library format reports it."""

    target: CrossTarget
    elf: ElfInfo
    workspace: int

    @property
    def text(self) -> int:
        return self.elf.sections.get(".text", 0)

    @property
    def rodata(self) -> int:
        return self.elf.sections.get(".rodata", 0) + self.elf.sections.get(".srodata", 0)

    @property
    def static_ram(self) -> int:
        """``.data`` + ``.bss`` (small-data sections included) + the workspace."""
        return sum(self.elf.sections.get(s, 0) for s in (".data", ".bss", ".sdata", ".sbss")) + self.workspace

    def line(self) -> str:
        return (f"{self.target.name:<11} {self.elf.architecture:<26} .text {self.text:>8} B  "
                f".rodata {self.rodata:>9} B  static RAM {self.static_ram:>8} B "
                f"(.data+.bss {self.static_ram - self.workspace} + workspace {self.workspace})")


def cross_compile(model: CModel, target: CrossTarget, directory: "str | Path") -> Path:
    """Compile ``model.c`` for ``target`` into ``directory/model-<target>.o``."""
    if not zig_available():
        raise ToolchainError("cross-compiling the C target needs the ziglang wheel (pip install -e '.[cross]')")
    directory = model.write_sources(directory)
    output = directory / f"model-{target.name}.o"
    try:
        # -I: where the .incbin of a weight blob finds model_weights.bin
        completed = subprocess.run([*target.command(), *CROSS_FLAGS, "-I", str(directory), "-c",
                                    str(directory / "model.c"), "-o", str(output)],
                                   capture_output=True, text=True, timeout=CROSS_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ToolchainError(f"zig cc for {target.name} took more than {CROSS_TIMEOUT} s") from None
    if completed.returncode != 0:
        raise ToolchainError(f"zig cc for {target.name} failed: {completed.stderr.strip()[-2000:]}")
    return output


def size_reports(model: CModel, targets: Sequence[str] = tuple(CROSS_TARGETS)) -> list[SizeReport]:
    """Cross-compile for each named target and read back the objects' ELF headers and sizes."""
    reports = []
    with tempfile.TemporaryDirectory(prefix="tilecraft-cross-") as scratch:
        for name in targets:
            if name not in CROSS_TARGETS:
                raise ToolchainError(f"unknown cross target {name!r}; known: {', '.join(CROSS_TARGETS)}")
            target = CROSS_TARGETS[name]
            reports.append(SizeReport(target, read_elf(cross_compile(model, target, scratch)), model.workspace_size))
    return reports
