"""Compilation targets, named the way TVM names them.

``"llvm"`` is the host CPU. ``"llvm -mcpu=<cpu> -mattr=+f1,-f2 -mtriple=<triple>"`` names a
specific CPU. The target decides two things: the LLVM ``target-cpu``/``target-features``
attributes put on every function (so code generation uses, e.g., AVX-512), and the vector
width and thread count the default schedule plans for.

``"cuda -arch=sm_80"`` is an NVIDIA GPU (pipelines/cuda): kernels become PTX for that
architecture (and a cubin where ``ptxas`` is installed), the host code calls MLIR's CUDA
runtime wrappers.
"""

from __future__ import annotations

import os
import platform
import shlex
from dataclasses import dataclass, field

from ..errors import TargetError
from ..runtime.host import host_cpu_flags
from ..runtime.libraries import cuda_driver_available

# CPUs whose widest profitable vector registers are 512 bits (LLVM -mcpu names).
_AVX512_CPUS = frozenset(
    {
        "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
        "icelake-server", "tigerlake", "sapphirerapids", "emeraldrapids", "graniterapids",
        "znver4", "znver5", "x86-64-v4",
    }
)
# CPUs with 256-bit AVX/AVX2 as the widest vector unit.
_AVX2_CPUS = frozenset(
    {
        "haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake",
        "znver1", "znver2", "znver3", "x86-64-v3", "sandybridge", "ivybridge",
    }
)
_KNOWN_OPTIONS = ("mcpu", "mattr", "mtriple")
# CUDA architectures (LLVM NVPTX chip names) -> the PTX ISA version emitted for them: the
# lowest version that architecture exists in (LLVM rejects older ones; ptxas accepts newer).
CUDA_ARCHS: dict[str, str] = {
    "sm_70": "ptx60", "sm_72": "ptx61", "sm_75": "ptx63", "sm_80": "ptx70", "sm_86": "ptx71",
    "sm_87": "ptx74", "sm_89": "ptx78", "sm_90": "ptx78", "sm_90a": "ptx80",
    "sm_100": "ptx86", "sm_100a": "ptx86", "sm_103": "ptx88", "sm_110": "ptx90",
    "sm_120": "ptx87", "sm_120a": "ptx87", "sm_121": "ptx88",
}
DEFAULT_CUDA_ARCH = "sm_80"


def default_num_threads() -> int:
    """Threads parallel loops may use: ``TILECRAFT_NUM_THREADS`` if set, else all cores."""
    value = os.environ.get("TILECRAFT_NUM_THREADS")
    if value is None:
        return os.cpu_count() or 1
    try:
        threads = int(value)
    except ValueError:
        raise TargetError(f"TILECRAFT_NUM_THREADS must be a positive integer, got {value!r}") from None
    if threads < 1:
        raise TargetError(f"TILECRAFT_NUM_THREADS must be a positive integer, got {value!r}")
    return threads


@dataclass(frozen=True)
class Target:
    """A parsed target string.

    Attributes:
      kind: ``"llvm"`` (CPU code through LLVM); other kinds arrive with their backends.
      mcpu: LLVM CPU name, ``None`` for the host.
      mattr: LLVM feature toggles such as ``("+avx512f", "-avx512vl")``.
      mtriple: target triple, ``None`` for the host.
      num_threads: how many threads parallel loops are split for.
      arch: for ``kind == "cuda"``, the GPU architecture (``"sm_80"``); ``None`` otherwise.
    """

    kind: str = "llvm"
    mcpu: str | None = None
    mattr: tuple[str, ...] = ()
    mtriple: str | None = None
    num_threads: int = field(default_factory=default_num_threads)
    arch: str | None = None

    @classmethod
    def parse(cls, spec: "str | Target") -> "Target":
        """Parse ``"llvm [-mcpu=..] [-mattr=..] [-mtriple=..]"``; raises :class:`TargetError`."""
        if isinstance(spec, Target):
            return spec
        if not isinstance(spec, str) or not spec.strip():
            raise TargetError(f"target must be a non-empty string such as 'llvm', got {spec!r}")
        kind, *options = shlex.split(spec)
        if kind == "cuda":
            return cls._parse_cuda(spec, options)
        if kind != "llvm":
            raise TargetError(
                f"unknown target kind {kind!r} in {spec!r}; supported: 'llvm', 'cuda -arch=sm_XX'"
            )
        values: dict[str, str] = {}
        for option in options:
            key, sep, value = option.lstrip("-").partition("=")
            if not option.startswith("-") or not sep or key not in _KNOWN_OPTIONS or not value:
                raise TargetError(
                    f"bad target option {option!r} in {spec!r}; expected one of "
                    + ", ".join(f"-{k}=<value>" for k in _KNOWN_OPTIONS)
                )
            values[key] = value
        mattr = tuple(a for a in values.get("mattr", "").split(",") if a)
        bad = [a for a in mattr if a[0] not in "+-" or len(a) < 2]
        if bad:
            raise TargetError(f"-mattr entries must look like +feature or -feature, got {bad}")
        return cls(kind=kind, mcpu=values.get("mcpu"), mattr=mattr, mtriple=values.get("mtriple"))

    @classmethod
    def _parse_cuda(cls, spec: str, options: list[str]) -> "Target":
        """``cuda [-arch=sm_XX]``: TVM's spelling; the architecture defaults to sm_80."""
        arch = DEFAULT_CUDA_ARCH
        for option in options:
            key, sep, value = option.lstrip("-").partition("=")
            if not option.startswith("-") or key != "arch" or not sep:
                raise TargetError(f"bad target option {option!r} in {spec!r}; expected -arch=sm_XX")
            if value not in CUDA_ARCHS:
                raise TargetError(
                    f"unknown CUDA architecture {value!r} in {spec!r}; supported: "
                    + ", ".join(CUDA_ARCHS)
                )
            arch = value
        return cls(kind="cuda", arch=arch)

    @property
    def is_cuda(self) -> bool:
        """True for an NVIDIA GPU target (``cuda -arch=...``)."""
        return self.kind == "cuda"

    @property
    def ptx_version(self) -> str:
        """LLVM NVPTX feature naming the PTX ISA version (``"ptx70"``); CUDA targets only."""
        if self.arch is None:
            raise TargetError(f"{self} is not a CUDA target")
        return CUDA_ARCHS[self.arch]

    @property
    def is_host(self) -> bool:
        """True when code for this target can run on this machine."""
        if self.is_cuda:
            return cuda_driver_available()
        if self.mtriple is not None and not self.mtriple.startswith(platform.machine()):
            return False
        enabled = {a[1:] for a in self.mattr if a.startswith("+")}
        flags = host_cpu_flags()
        return not flags or enabled <= flags

    @property
    def vector_bits(self) -> int:
        """Width of the vector registers the schedule should fill."""
        enabled = {a[1:] for a in self.mattr if a.startswith("+")}
        disabled = {a[1:] for a in self.mattr if a.startswith("-")}
        if "avx512f" in disabled:
            return 256 if "avx2" not in disabled else 128
        if "avx512f" in enabled:
            return 512
        if self.mcpu is not None:
            if self.mcpu in _AVX512_CPUS:
                return 512
            if self.mcpu in _AVX2_CPUS or {"avx2", "avx"} & enabled:
                return 256
            return 128
        flags = host_cpu_flags()
        if "avx512f" in flags:
            return 512
        if "avx2" in flags or "avx" in flags:
            return 256
        return 128

    def llvm_function_attributes(self) -> dict[str, str]:
        """``target_cpu`` / ``target_features`` values for ``llvm.func`` (empty for the host).

        For the host nothing is set: the JIT already compiles for the host CPU and its features.
        """
        attributes: dict[str, str] = {}
        if self.mcpu:
            attributes["target_cpu"] = self.mcpu
        if self.mattr:
            attributes["target_features"] = ",".join(self.mattr)
        return attributes

    def __str__(self) -> str:
        if self.is_cuda:
            return f"cuda -arch={self.arch}"
        parts = [self.kind]
        if self.mcpu:
            parts.append(f"-mcpu={self.mcpu}")
        if self.mattr:
            parts.append("-mattr=" + ",".join(self.mattr))
        if self.mtriple:
            parts.append(f"-mtriple={self.mtriple}")
        return " ".join(parts)
