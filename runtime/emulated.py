"""An emulated device: ``tilecraft serve --emulate aarch64`` runs packages built for another
architecture under qemu-user, so a host without the board can test a cross build remotely.

Why a module apart from runtime/sandbox.py: a foreign package cannot be loaded into this
machine's Python (``dlopen`` of an AArch64 ``model.so`` fails), and no Python of that
architecture exists under the emulator. What runs there is ``runtime/c_api/run_files.c``
linked with the C runtime (docs/deploy.md), cross-compiled once per architecture with
zig cc (the ``cross`` extra) or a Debian ``<triple>-gcc``, cached by content like
runtime/native.py's libraries. Each call runs ``qemu-<arch> -L <sysroot> run_files ...`` in
a child process with the server's time and memory limits, inputs and outputs passed as raw
files in a private temporary folder.

The per-call seconds it reports are those of the emulator: they say nothing about the real
device's speed (docs/remote.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping

import numpy as np

from ..errors import (ArgumentTypeError, ArgumentValueError, OptionError, PackageError, PackageSignatureError,
                      PackageTargetError, RemoteLimitError, RemoteRunError, RemoteTimeoutError,
                      RuntimeCheckError, TilecraftError, ToolchainError)
from .native import cache_dir
from .package import MANIFEST, signature_from_manifest
from .run import random_inputs
from .sandbox import DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT

C_API = Path(__file__).resolve().parent / "c_api"
RUNNER_SOURCES = ("run_files.c", "tilecraft_runtime.c", "json.c", "sha256.c")
# Seconds the one-time cross build of the runner may take (zig builds its libc stubs once).
BUILD_TIMEOUT = 600


@dataclass(frozen=True)
class Emulation:
    """One architecture qemu-user can run: the manifest's ``machine`` name of its packages,
    the emulator, the Debian sysroot whose loader and libc the runner uses, and how to
    cross-compile the runner (zig's target flags; the Debian gcc's name)."""

    name: str
    machine: str
    qemu: str
    sysroot: Path
    zig_flags: tuple[str, ...]
    gcc: str
    debian_package: str

    def check(self) -> None:
        """:class:`ToolchainError` naming what to install when the emulator or the sysroot
        is missing."""
        missing = []
        if shutil.which(self.qemu) is None:
            missing.append(f"{self.qemu} (Debian's qemu-user)")
        if not (self.sysroot / "lib" / "libc.so.6").exists():
            missing.append(f"the {self.sysroot} sysroot ({self.debian_package})")
        if missing:
            raise ToolchainError(f"--emulate {self.name} needs {' and '.join(missing)}: run `make emulators` "
                                 f"as root, or apt-get install qemu-user {self.debian_package}")


_AARCH64 = Emulation("aarch64", "aarch64", "qemu-aarch64", Path("/usr/aarch64-linux-gnu"),
                     ("-target", "aarch64-linux-gnu"), "aarch64-linux-gnu-gcc", "libc6-arm64-cross")
# Debian armhf: ARMv7-A, VFPv3-D16, no NEON (compiler/cross_toolchain.py's baseline).
_ARMV7 = Emulation("armv7", "armv7l", "qemu-arm", Path("/usr/arm-linux-gnueabihf"),
                   ("-target", "arm-linux-gnueabihf", "-mcpu=generic+v7a+vfp3d16-d32-neon"),
                   "arm-linux-gnueabihf-gcc", "libc6-armhf-cross")
_RISCV64 = Emulation("riscv64", "riscv64", "qemu-riscv64", Path("/usr/riscv64-linux-gnu"),
                     ("-target", "riscv64-linux-gnu", "-mcpu=baseline_rv64", "-mabi=lp64d"),
                     "riscv64-linux-gnu-gcc", "libc6-riscv64-cross")
EMULATIONS: dict[str, Emulation] = {"aarch64": _AARCH64, "arm64": _AARCH64, "armv7": _ARMV7, "armv7l": _ARMV7,
                                    "arm": _ARMV7, "armhf": _ARMV7, "riscv64": _RISCV64}


def emulation(name: str) -> Emulation:
    """The emulation ``--emulate name`` asks for; :class:`OptionError` for an unknown one."""
    found = EMULATIONS.get(name.strip().lower())
    if found is None:
        raise OptionError(f"--emulate {name!r}: tilecraft emulates {', '.join(sorted(EMULATIONS))}")
    return found


def _compiler(chosen: Emulation) -> list[str]:
    if shutil.which(chosen.gcc):
        return [chosen.gcc]
    if importlib.util.find_spec("ziglang") is not None:
        return [sys.executable, "-m", "ziglang", "cc", *chosen.zig_flags]
    raise ToolchainError(f"--emulate {chosen.name} builds its runner with a cross C compiler: install "
                         f"{chosen.gcc} or the ziglang wheel (pip install -e '.[cross]')")


def build_runner(chosen: Emulation) -> Path:
    """The runner for ``chosen`` (run_files.c with the C runtime), cross-compiled once per
    content of the sources and compiler command, cached in :func:`cache_dir`."""
    sources = [C_API / name for name in RUNNER_SOURCES]
    command = [*_compiler(chosen), "-O2", "-std=c11", f"-I{C_API}", *map(str, sources)]
    text = "".join(source.read_text() for source in sources) + " ".join(command[1:] if command[0] == sys.executable
                                                                           else command)
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    output = cache_dir() / f"run_files-{chosen.name}-{key}" / "run_files"
    if output.is_file():
        return output
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output.parent) as scratch:
        partial = Path(scratch) / "run_files"
        try:
            result = subprocess.run([*command, "-o", str(partial), "-ldl", "-lpthread"], capture_output=True,
                                    text=True, timeout=BUILD_TIMEOUT, env={**os.environ, "TMPDIR": scratch})
        except subprocess.TimeoutExpired:
            raise ToolchainError(f"building the {chosen.name} runner took over {BUILD_TIMEOUT} s") from None
        if result.returncode != 0:
            raise ToolchainError(f"building the {chosen.name} runner failed:\n{result.stderr[-2000:]}")
        partial.replace(output)
    return output


# The C runtime's status codes (tilecraft_runtime.h) as the typed errors Python raises.
_STATUS_ERRORS: dict[int, type[TilecraftError]] = {
    3: PackageError, 4: PackageTargetError, 5: PackageSignatureError, 7: ArgumentTypeError,
    8: ArgumentValueError, 9: ArgumentValueError, 10: RuntimeCheckError, 11: RemoteLimitError}


def _manifest(package: Path) -> dict[str, Any]:
    try:
        with tarfile.open(package) as archive:
            member = archive.extractfile(MANIFEST)
            return json.loads(member.read()) if member is not None else {}
    except (OSError, tarfile.TarError, KeyError, ValueError) as error:
        raise PackageError(f"{package.name}: cannot read its {MANIFEST} ({error})") from None


class EmulatedExecutor:
    """:class:`~tilecraft.runtime.sandbox.Executor`'s interface for packages of ``chosen``'s
    architecture: one run at a time, each ``run_files`` under qemu-user in its own process
    group with the time limit and ``RLIMIT_AS``, outputs read back from raw files."""

    def __init__(self, chosen: Emulation, runner: Path, *, timeout: float = DEFAULT_TIMEOUT,
                 memory_limit: int = DEFAULT_MEMORY_LIMIT) -> None:
        self.emulation = chosen
        self.runner = runner
        self.timeout = timeout
        self.memory_limit = memory_limit
        self._lock = threading.Lock()

    def run(self, package: Path, inputs: Mapping[str, np.ndarray] | None, *, repeat: int = 0,
            number: int = 1, min_repeat_ms: float = 0.0,
            timeout: float | None = None) -> tuple[dict[str, Any], list[np.ndarray]]:
        """Outputs (and emulated per-call seconds when ``repeat``) of one run: the
        ``(meta, arrays)`` of :meth:`Executor.run`."""
        limit = self.timeout if timeout is None else min(float(timeout), self.timeout)
        if repeat < 0 or number < 1:
            raise OptionError(f"number and repeat must be >= 1, got {number} and {repeat}")
        manifest = _manifest(package)
        signature = signature_from_manifest(manifest)
        arguments = list(signature.arguments)
        if inputs is None:
            inputs = random_inputs(SimpleNamespace(signature=signature))
        names = [spec.name for spec in arguments]
        unknown = sorted(set(inputs) - set(names))
        missing = [name for name in names if name not in inputs]
        if unknown or missing:
            raise ArgumentValueError(f"the package takes inputs {names}; "
                                     + (f"missing {missing}" if missing else f"unknown {unknown}"))
        with self._lock, tempfile.TemporaryDirectory(prefix="tilecraft-emulated-") as scratch:
            job = Path(scratch)
            specs = []
            for index, spec in enumerate(arguments):
                array = np.ascontiguousarray(inputs[spec.name])
                if spec.dtype is not None and array.dtype != spec.dtype:
                    raise ArgumentTypeError(f"input {spec.name!r} must be {spec.dtype}, got {array.dtype}")
                path = job / f"input{index}.bin"
                array.tofile(path)
                specs.append(f"{path}:{','.join(map(str, array.shape))}")
            command = [self.emulation.qemu, "-L", str(self.emulation.sysroot), str(self.runner), str(package),
                       str(job), str(int(repeat)), str(int(number)), repr(float(min_repeat_ms)), *specs]
            stdout = self._execute(command, job, limit)
            return self._result(stdout, job, manifest)

    def _execute(self, command: list[str], job: Path, limit: float) -> str:
        memory_limit = self.memory_limit

        def limits() -> None:  # in the child, before exec
            import resource

            if memory_limit > 0:
                resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=job,
                                 env={**os.environ, "TMPDIR": str(job)}, preexec_fn=limits,
                                 start_new_session=True)
        try:
            stdout, stderr = child.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            raise RemoteTimeoutError(f"the emulated package ran past the time limit of {limit:g} s "
                                     "and was killed") from None
        text = stdout.decode("utf-8", "replace")
        for line in text.splitlines():
            if line.startswith("status "):
                code, _, message = line[len("status "):].partition(" ")
                error = _STATUS_ERRORS.get(int(code) if code.isdigit() else -1, RemoteRunError)
                raise error(message.partition(": ")[2] or message)
        if child.returncode != 0:
            tail = (stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:300]
            how = (f"died of {signal.Signals(-child.returncode).name}" if -child.returncode in signal.valid_signals()
                   else f"exited with code {child.returncode}")
            raise RemoteRunError(f"the emulated package's process ({self.emulation.qemu}) {how}"
                                 + (f": {tail}" if tail else "") + "; a run needing more memory than the limit "
                                 f"of {memory_limit} bytes (the server's --memory-limit) ends this way too")
        return text

    @staticmethod
    def _result(stdout: str, job: Path, manifest: Mapping[str, Any]) -> tuple[dict[str, Any], list[np.ndarray]]:
        names = [str(entry.get("name", f"output{i}")) for i, entry in enumerate(manifest.get("outputs", []))]
        arrays: list[np.ndarray] = []
        per_call: list[float] = []
        for line in stdout.splitlines():
            fields = line.split()
            if fields[:1] == ["output"]:
                index, dtype, shape = int(fields[1]), fields[2], tuple(int(d) for d in fields[3:])
                try:
                    kind = np.dtype("bool" if dtype == "bool" else dtype)
                except TypeError:
                    raise RemoteRunError(f"output {index} has dtype {dtype}, which the emulated runner "
                                         "cannot return") from None
                arrays.append(np.fromfile(job / f"output{index}.bin", dtype=kind).reshape(shape))
            elif fields[:1] == ["per_call"]:
                per_call.append(float(fields[1]))
        if len(arrays) != len(names):
            raise RemoteRunError(f"the emulated runner returned {len(arrays)} of {len(names)} outputs")
        return {"outputs": names, "per_call": per_call or None, "emulated": True}, arrays

    def close(self) -> None:
        """Nothing waits between runs (each is its own emulator process)."""
