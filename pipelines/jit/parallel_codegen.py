"""Parallel code generation: a lowered module's kernels compiled to machine code in worker
processes while the JIT compiles the entry, then bound to the JIT by address.

Why processes: LLVM's code generation is most of a cold compile's JIT step, spread over
the functions the lowering outlined (ResNet-50: 99 functions, none above a fifth of the
time; docs/performance.md, "Compile time, part 2"), and the MLIR bindings hold the
interpreter lock while LLVM runs, so threads do not overlap it; processes use every core.

How: :func:`plan` picks the functions another process may compile (pipelines/jit/
function_split.py: local kernels that name no global and no symbol the JIT binds itself)
and balances them into one part per worker. :meth:`ParallelCodegen.start` writes the
module's bytecode once (the weights are already declarations: pipelines/jit/weights.py),
starts one codegen_worker.py per part and turns the parts' functions into declarations of
the JIT's module. While the workers run, the caller creates its ExecutionEngine (LLVM's
optimizer on the rest). :meth:`ParallelCodegen.finish` waits for them, links their objects
into one shared library (``cc -shared``, as the compile cache links the JIT's object:
compiler/cache.py), loads it with its symbols local, and returns each function's address,
which the caller binds with ``raw_register_runtime`` before the entry's code is generated.

Each part is compiled by the same ExecutionEngine at the same optimization level as the
serial JIT would have compiled it; the kernels are reached through function pointers (the
parallel-loop runtime) and calls, as before, so the outputs are bit-identical
(tests/test_parallel_codegen.py). A worker that dies or fails raises :class:`CompileError`
naming the part; no compile waits on a dead worker, nor longer than
:data:`WORKER_TIMEOUT_S` on a hung one.

Off with ``TILECRAFT_CODEGEN_WORKERS=0``; a number sets how many workers (default: the CPUs
this process may run on, at most :data:`MAX_WORKERS`). Modules whose movable functions hold
fewer than :data:`MIN_PARALLEL_OPS` operations are compiled serially: a worker's start and
the link cost more than such a part's code generation.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Sequence

from mlir import ir

from ...errors import CompileError, OptionError
from ...runtime import parallel_runtime
from ...runtime.checks import REPORT_SYMBOL
from ...runtime.extern import C_INTERFACE_PREFIX
from ...runtime.libraries import runtime_library
from .function_split import balance, declare_functions, movable_functions

WORKERS_ENV = "TILECRAFT_CODEGEN_WORKERS"
MAX_WORKERS = 8
# Below this many LLVM-dialect operations in the movable functions, the serial JIT is faster
# (docs/performance.md, "Compile time: parallel codegen").
MIN_PARALLEL_OPS = 8_000
WORKER_SCRIPT = Path(__file__).with_name("codegen_worker.py")
# How long the compile waits for all workers together before it stops them and fails: far
# above any model's whole code generation on a loaded machine (DenseNet-121's serial JIT is
# under a minute of CPU), so only a worker that hangs reaches it.
WORKER_TIMEOUT_S = 900.0


def worker_count() -> int:
    """How many codegen workers a compile may start (``$TILECRAFT_CODEGEN_WORKERS``; 0: none)."""
    text = os.environ.get(WORKERS_ENV)
    if text is None or not text.strip():
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 1
        return min(cpus, MAX_WORKERS) if cpus > 1 else 0
    try:
        count = int(text)
    except ValueError:
        raise OptionError(f"{WORKERS_ENV} must be a number of worker processes (0: off), got {text!r}") from None
    if count < 0:
        raise OptionError(f"{WORKERS_ENV} must be >= 0, got {text!r}")
    return count


def worker_command() -> list[str]:
    """The command that runs one worker (its arguments are appended)."""
    return [sys.executable, str(WORKER_SCRIPT)]


@cache
def _process_symbols(runtime_libraries: tuple[str, ...]) -> ctypes.CDLL:
    """The process's global symbols, after loading the runtimes the parts may call (MLIR's
    ``runtime_libraries`` and the parallel-loop runtime, their symbols global, as the
    compile cache's libraries find them: engine.py's LibraryFunction)."""
    parallel_runtime.load()
    for name in runtime_libraries:
        ctypes.CDLL(runtime_library(name), mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(None)


def _resolvable(symbol: str, runtime_libraries: tuple[str, ...]) -> bool:
    """Whether a loaded library of the process defines ``symbol`` (and the JIT does not bind
    it itself: extern callbacks and the check reporter go by address)."""
    if symbol.startswith(C_INTERFACE_PREFIX) or symbol == REPORT_SYMBOL:
        return False
    return hasattr(_process_symbols(runtime_libraries), symbol)


@dataclass
class CodegenParts:
    """What a parallel code generation did: the parts' function names and operation counts,
    the object file of each part (kept for ``dump_object_file``), and its costs: each
    worker's CPU seconds and peak resident set, this process's CPU seconds until it waited
    for the workers (writing the module, LLVM's optimizer on the entry), the wall seconds it
    waited, and its CPU seconds linking and loading the parts (the linker's own excluded)."""
    parts: list[list[str]]
    operations: int
    objects: list[bytes] = field(default_factory=list)
    library: ctypes.CDLL | None = None
    worker_cpu_s: list[float] = field(default_factory=list)
    worker_peak_rss_mb: list[float] = field(default_factory=list)
    cpu_before_wait_s: float = 0.0
    waited_s: float = 0.0
    link_wall_s: float = 0.0


class ParallelCodegen:
    """A started parallel code generation (module docstring)."""

    def __init__(self, module: ir.Module, parts: list[list[str]], operations: int, opt_level: int) -> None:
        self.module = module
        self.report = CodegenParts(parts, operations)
        self.opt_level = opt_level
        self._scratch = Path(tempfile.mkdtemp(prefix="tilecraft-codegen-"))
        self._workers: list[subprocess.Popen] = []

    def start(self) -> None:
        """Write the module, start a worker per part, and declare the parts' functions."""
        self._started_cpu = time.process_time()
        try:
            module_path = self._scratch / "module.mlirbc"
            with open(module_path, "wb") as stream:
                self.module.operation.write_bytecode(stream)
            for index, names in enumerate(self.report.parts):
                part = self._scratch / f"part{index}.json"
                part.write_text(json.dumps(names))
                command = [*worker_command(), str(module_path), str(part), str(self.opt_level),
                           str(self._scratch / f"part{index}.o")]
                self._workers.append(subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                      stderr=subprocess.PIPE, text=True))
        except OSError as error:
            self.cancel()
            raise CompileError(f"could not start the code generation workers ({error})", stage="jit") from None
        declare_functions(self.module, [name for names in self.report.parts for name in names])

    def finish(self) -> dict[str, int]:
        """Wait for the workers, link and load their code; each function's address by name."""
        report = self.report
        report.cpu_before_wait_s = time.process_time() - self._started_cpu
        waiting = time.perf_counter()
        try:
            deadline = waiting + WORKER_TIMEOUT_S
            for index, worker in enumerate(self._workers):
                try:
                    output, errors = worker.communicate(timeout=max(deadline - time.perf_counter(), 0.0))
                except subprocess.TimeoutExpired:
                    raise CompileError(f"code generation worker {index + 1} of {len(self._workers)} "
                                       f"({len(self.report.parts[index])} functions) did not finish in "
                                       f"{WORKER_TIMEOUT_S:g} s; stopped (TILECRAFT_CODEGEN_WORKERS=0 "
                                       "compiles in this process)", stage="jit") from None
                if worker.returncode != 0:
                    how = (f"was killed by signal {-worker.returncode}" if worker.returncode < 0
                           else f"exited with status {worker.returncode}")
                    detail = " | ".join(errors.strip().splitlines()[-3:])
                    raise CompileError(f"code generation worker {index + 1} of {len(self._workers)} "
                                       f"({len(self.report.parts[index])} functions) {how}"
                                       + (f": {detail}" if detail else ""), stage="jit")
                figures = json.loads(output.strip().splitlines()[-1]) if output.strip() else {}
                report.worker_cpu_s.append(figures.get("cpu_s", 0.0))
                report.worker_peak_rss_mb.append(figures.get("peak_rss_mb", 0.0))
            report.waited_s = time.perf_counter() - waiting
            linking = time.perf_counter()
            objects = [self._scratch / f"part{index}.o" for index in range(len(self._workers))]
            library = self._scratch / "kernels.so"
            link_shared_library(library, objects)
            self.report.objects = [path.read_bytes() for path in objects]
            try:
                loaded = ctypes.CDLL(str(library), mode=ctypes.RTLD_LOCAL)
            except OSError as error:
                raise CompileError(f"the parallel code generation's library does not load: {error}",
                                   stage="jit") from None
            self.report.library = loaded
            report.link_wall_s = time.perf_counter() - linking
            addresses = {}
            for names in self.report.parts:
                for name in names:
                    address = ctypes.cast(loaded[name], ctypes.c_void_p).value
                    addresses[name] = address
            return addresses
        finally:
            self.cancel()

    def cancel(self) -> None:
        """Stop the workers still running and delete the scratch folder."""
        for worker in self._workers:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
            for stream in (worker.stdout, worker.stderr):
                if stream is not None and not stream.closed:
                    stream.close()
        shutil.rmtree(self._scratch, ignore_errors=True)


def plan(module: ir.Module, opt_level: int, workers: int | None, runtime_libraries: Sequence[str]
         ) -> ParallelCodegen | None:
    """The parallel code generation of ``module`` (not started), or None when it is not
    worth it (no workers, too few operations to move). ``runtime_libraries``: MLIR's
    libraries the JIT links (the parts may call them; they are loaded here first)."""
    workers = worker_count() if workers is None else workers
    if workers <= 0:
        return None
    libraries = tuple(runtime_libraries)
    sizes = movable_functions(module, lambda symbol: _resolvable(symbol, libraries))
    operations = sum(sizes.values())
    if operations < MIN_PARALLEL_OPS or not sizes:
        return None
    return ParallelCodegen(module, balance(sizes, workers), operations, opt_level)


def link_shared_library(output: Path, objects: Sequence[Path], extra: Sequence[str] = ()) -> None:
    """JIT object code (and ``extra`` sources) -> a shared library. The JIT's code is built
    for its large code model (absolute addresses), so the library has text relocations
    (``-z notext``), applied once at load; ``-Bsymbolic`` binds its calls between its own
    functions inside it. Symbols it does not define are found in the process when it is
    loaded (the parallel-loop runtime, MLIR's runner utilities, libc). :class:`CompileError`
    when the C compiler is missing or fails."""
    compiler = os.environ.get("CC", "cc")
    command = [compiler, "-shared", "-O2", "-fPIC", "-fvisibility=hidden", "-Wl,-Bsymbolic", "-Wl,-z,notext",
               "-o", str(output), *map(str, objects), *extra]
    _run(command, "linking the compiled code into a shared library")


def link_relocatable(output: Path, objects: Sequence[Path]) -> None:
    """Several JIT objects -> one relocatable object (``ld -r``), what ``dump_object_file``
    writes for code generated in parts."""
    compiler = os.environ.get("CC", "cc")
    _run([compiler, "-r", "-nostdlib", "-o", str(output), *map(str, objects)], "combining the object files")


def _run(command: list[str], what: str) -> None:
    try:
        completed = subprocess.run(command, capture_output=True, text=True)
    except OSError as error:
        raise CompileError(f"{what}: cannot run {command[0]} ({error})", stage="jit") from None
    if completed.returncode != 0:
        raise CompileError(f"{what} failed: {completed.stderr.strip()[-500:]}", stage="jit")


__all__ = ["CodegenParts", "ParallelCodegen", "link_relocatable", "link_shared_library", "plan",
           "worker_count", "WORKERS_ENV"]
