"""Reading what an ELF object or library was built for, and whether zig cc is installed.

Why its own module: the C target's size reports (targets/c/cross.py) and the check of
cross-built packages (compiler/cross_toolchain.py) both read ELF headers; neither may
import the other (the C target's module depends on the package writer).
"""

from __future__ import annotations

import importlib.util
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolchainError

EM_ARM, EM_RISCV = 40, 243
EF_ARM_ABI_FLOAT_HARD = 0x400
EF_RISCV_RVC, EF_RISCV_FLOAT_ABI = 0x1, 0x6
_RISCV_FLOAT_ABIS = {0: "soft-float", 2: "single-float", 4: "double-float", 6: "quad-float"}


@dataclass(frozen=True)
class ElfInfo:
    """The ELF header fields that say what an object is for, and its section sizes summed
    by kind (``.text.foo`` counts as ``.text``)."""

    elf_class: int
    machine: int
    flags: int
    sections: dict[str, int]

    @property
    def architecture(self) -> str:
        """A readable architecture: ``arm32 hard-float``, ``riscv32 rvc single-float``..."""
        if self.machine == EM_ARM:
            return "arm32 " + ("hard-float" if self.flags & EF_ARM_ABI_FLOAT_HARD else "soft-float")
        if self.machine == EM_RISCV:
            abi = _RISCV_FLOAT_ABIS[self.flags & EF_RISCV_FLOAT_ABI]
            return f"riscv{self.elf_class}" + (" rvc" if self.flags & EF_RISCV_RVC else "") + f" {abi}"
        return f"machine {self.machine} ({self.elf_class}-bit)"


def read_elf(path: "str | Path") -> ElfInfo:
    """Parse an ELF file's header and section table (either class, little-endian);
    :class:`ToolchainError` for anything else, a truncated or malformed file included."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or len(data) < 6:
        raise ToolchainError(f"{path} is not an ELF file")
    if data[4] not in (1, 2):
        raise ToolchainError(f"{path}: unknown ELF class {data[4]}")
    if data[5] != 1:
        raise ToolchainError(f"{path}: big-endian ELF is not supported")
    try:
        return _parse_elf(data, 32 if data[4] == 1 else 64)
    except (struct.error, ValueError, IndexError, UnicodeDecodeError) as error:
        raise ToolchainError(f"{path}: truncated or malformed ELF ({error})") from None


def _parse_elf(data: bytes, elf_class: int) -> ElfInfo:
    if elf_class == 32:
        machine, = struct.unpack_from("<H", data, 18)
        flags, = struct.unpack_from("<I", data, 36)
        shoff, = struct.unpack_from("<I", data, 32)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 46)
    else:
        machine, = struct.unpack_from("<H", data, 18)
        shoff, = struct.unpack_from("<Q", data, 40)
        flags, = struct.unpack_from("<I", data, 48)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)

    def section(index: int) -> tuple[int, int, int, int]:
        base = shoff + index * shentsize
        if elf_class == 32:
            name, kind, _flags, _addr, offset, size = struct.unpack_from("<IIIIII", data, base)
        else:
            name, kind, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, base)
        return name, kind, offset, size

    _, _, names_offset, _ = section(shstrndx)
    sizes: dict[str, int] = {}
    for index in range(shnum):
        name_at, kind, _, size = section(index)
        end = data.index(b"\0", names_offset + name_at)
        name = data[names_offset + name_at:end].decode()
        for prefix in (".text", ".rodata", ".data", ".bss", ".sdata", ".sbss", ".srodata"):
            if name == prefix or name.startswith(prefix + "."):
                sizes[prefix] = sizes.get(prefix, 0) + size
                break
    return ElfInfo(elf_class, machine, flags, sizes)


def zig_available() -> bool:
    return importlib.util.find_spec("ziglang") is not None
