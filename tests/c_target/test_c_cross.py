"""The C target's sources cross-compiled for microcontrollers (zig cc, compile-only): each
object's ELF header names the architecture and float ABI asked for, and the size report
adds the planned workspace to the static RAM."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import pytest

import tilecraft
from tilecraft.targets.c.cross import (CROSS_TARGETS, EF_ARM_ABI_FLOAT_HARD, EF_RISCV_FLOAT_ABI, EF_RISCV_RVC,
                                        EM_ARM, EM_RISCV, cross_compile, read_elf, size_reports)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ziglang") is None,
                                reason="ziglang is not installed (extra 'cross': pip install -e '.[cross]')")

DIGITS = Path(tilecraft.__file__).resolve().parent / "examples" / "digits_cnn.onnx"


@pytest.fixture(scope="module")
def reports():
    model = tilecraft.compile(str(DIGITS), target="c", shape_dict={"input": [1, 1, 16, 16]})
    return model, {r.target.name: r for r in size_reports(model)}


def test_objects_are_for_the_named_architectures(reports):
    _, by_name = reports
    assert set(by_name) == set(CROSS_TARGETS)
    arm = by_name["cortex-m4f"].elf
    assert (arm.machine, arm.elf_class) == (EM_ARM, 32)
    assert arm.flags & EF_ARM_ABI_FLOAT_HARD
    rv32 = by_name["rv32imafc"].elf
    assert (rv32.machine, rv32.elf_class) == (EM_RISCV, 32)
    assert rv32.flags & EF_RISCV_RVC and rv32.flags & EF_RISCV_FLOAT_ABI == 2  # ilp32f
    rv64 = by_name["rv64gc"].elf
    assert (rv64.machine, rv64.elf_class) == (EM_RISCV, 64)
    assert rv64.flags & EF_RISCV_RVC and rv64.flags & EF_RISCV_FLOAT_ABI == 4  # lp64d
    assert rv64.architecture == "riscv64 rvc double-float"


def test_size_report(reports):
    model, by_name = reports
    for report in by_name.values():
        assert report.text > 0
        assert report.rodata >= model.weight_bytes  # the weights are const: flash, not RAM
        assert report.static_ram >= model.workspace_size
        assert report.target.name in report.line()


def test_read_elf_rejects_other_files(tmp_path, reports):
    path = tmp_path / "x.o"
    path.write_bytes(b"not an elf")
    with pytest.raises(tilecraft.errors.ToolchainError, match="not an ELF file"):
        read_elf(path)
    with tempfile.TemporaryDirectory() as scratch:  # a real object, cut short or mislabelled
        good = cross_compile(reports[0], CROSS_TARGETS["rv32imafc"], scratch).read_bytes()
    for data, message in ((good[:40], "truncated or malformed ELF"), (good[:4] + b"\x07" + good[5:], "unknown ELF class 7"),
                          (good[:2000], "truncated or malformed ELF")):
        path.write_bytes(data)
        with pytest.raises(tilecraft.errors.ToolchainError, match=message):
            read_elf(path)


def test_blob_weights_cross_build_into_rodata():
    """Weights as a blob still land in flash: the .incbin section counts as .rodata."""
    model = tilecraft.compile(str(DIGITS), target="c -weights=blob", shape_dict={"input": [1, 1, 16, 16]})
    (report,) = size_reports(model, ["cortex-m4f"])
    assert report.rodata >= model.weight_bytes
    assert report.elf.machine == EM_ARM
