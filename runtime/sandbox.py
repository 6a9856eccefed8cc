"""Where remote runs happen: a store of verified packages, and one child process per run.

The server (runtime/server.py) and :class:`tilecraft.remote.LocalSession` share it, so a test
without a network exercises the same path as a device.

Why a child process per run: the package's code is native. A segfault, an abort or a run
past the memory limit kills the child, not the server; a hang is killed at the time limit.
The child sets its address-space limit (``RLIMIT_AS``) first, waits for its job (see
:class:`Executor`), then loads the package with :func:`tilecraft.runtime.load` (which
checks the package again and compares the manifest with the call contract compiled into
the library), runs it with :func:`tilecraft.run` and writes the outputs and timings beside
its inputs.

Nothing runs but packages :func:`verify` accepted at upload: members, manifest, this
machine's architecture and CPU flags, the SHA-256 of every library.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import (PackageError, RemoteError, RemoteLimitError, RemoteRunError,
                      RemoteTimeoutError, TilecraftError)
from . import rpc
from .package import verify

# Defaults of the server's limits (each has a command-line option).
DEFAULT_MAX_UPLOAD = 1 << 30
DEFAULT_TIMEOUT = 60.0
DEFAULT_MEMORY_LIMIT = 8 << 30
# Packages the store keeps; the least recently used one goes first.
DEFAULT_MAX_PACKAGES = 32
_REQUEST, _RESPONSE, _ERROR = "request.bin", "response.bin", "error.json"
_PACKAGE_ID_LENGTH = 64


def package_id(data: bytes) -> str:
    """A package's name on the server: the SHA-256 of its bytes."""
    return hashlib.sha256(data).hexdigest()


class PackageStore:
    """Uploaded packages, verified once, kept by content hash in a private folder."""

    def __init__(self, folder: "str | os.PathLike[str] | None" = None, *,
                 max_upload: int = DEFAULT_MAX_UPLOAD, max_packages: int = DEFAULT_MAX_PACKAGES,
                 trust: bytes | None = None, machine: str | None = None) -> None:
        self._owned = tempfile.TemporaryDirectory(prefix="tilecraft-server-") if folder is None else None
        self.folder = Path(folder if folder is not None else self._owned.name)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.max_upload = max_upload
        self.max_packages = max_packages
        # With a key, only packages signed with it are kept (runtime/package_signing.py).
        self.trust = trust
        # An emulated device's architecture (runtime/emulated.py): packages are checked against it.
        self.machine = machine
        self._lock = threading.Lock()
        self.manifests: dict[str, dict[str, Any]] = {}

    def check_size(self, size: int) -> None:
        if size > self.max_upload:
            raise RemoteLimitError(f"an upload of {size} bytes is above the server's limit of "
                                   f"{self.max_upload} (its --max-upload)")

    def add(self, data: bytes, name: str = "package") -> str:
        """Verify a package's bytes and keep them; returns its id. :class:`PackageError` (or
        :class:`PackageTargetError` for another machine) when the package is refused."""
        self.check_size(len(data))
        ident = package_id(data)
        with tempfile.TemporaryDirectory(prefix="upload-", dir=self.folder) as scratch:
            tar = Path(scratch) / "package.tar"
            tar.write_bytes(data)
            extracted = Path(scratch) / "members"
            extracted.mkdir()
            try:
                manifest = verify(tar, extracted, self.trust, self.machine)
            except PackageError as error:
                # Name the upload, not the server's scratch file.
                raise type(error)(str(error).replace(str(tar), name)) from None
            with self._lock:
                tar.replace(self.folder / f"{ident}.tar")
                self.manifests[ident] = manifest
                self._evict()
        return ident

    def _evict(self) -> None:
        kept = sorted(self.folder.glob("*.tar"), key=lambda p: p.stat().st_mtime)
        for old in kept[:max(0, len(kept) - self.max_packages)]:
            old.unlink(missing_ok=True)
            self.manifests.pop(old.stem, None)

    def path(self, ident: str) -> Path:
        """The stored package ``ident``; :class:`PackageError` when there is none (never
        uploaded, or evicted)."""
        path = self.folder / f"{ident}.tar"
        if len(ident) != _PACKAGE_ID_LENGTH or not all(c in "0123456789abcdef" for c in ident) \
                or not path.is_file():
            raise PackageError(f"no package {ident[:80]!r} on the server: upload it first")
        os.utime(path)
        return path

    def close(self) -> None:
        if self._owned is not None:
            self._owned.cleanup()


class Executor:
    """Runs stored packages, one at a time (timings must not share the CPU with another
    run), each in a child process with a time and a memory limit.

    The next run's process is started as soon as a run ends and waits, with numpy and the
    runtime imported, for its job on standard input: a run does not pay for the interpreter's
    start (about half a second on a loaded machine) and no import competes with a timed run,
    since only one run happens at a time and its process has finished importing before it
    reads its job."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT, memory_limit: int = DEFAULT_MEMORY_LIMIT) -> None:
        self.timeout = timeout
        self.memory_limit = memory_limit
        self._lock = threading.Lock()
        self._waiting: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        command = [sys.executable, "-m", f"{__package__}.sandbox", str(self.memory_limit)]
        return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=_child_environment())

    def _take(self) -> subprocess.Popen:
        """The waiting process if it is still alive, else a fresh one."""
        child, self._waiting = self._waiting, None
        if child is None or child.poll() is not None:
            if child is not None:
                child.communicate()
            child = self._start()
        return child

    def run(self, package: Path, inputs: Mapping[str, np.ndarray] | None, *, repeat: int = 0,
            number: int = 1, min_repeat_ms: float = 0.0, timeout: float | None = None) -> tuple[dict[str, Any], list[np.ndarray]]:
        """Outputs (and per-call seconds when ``repeat``) of one run of ``package``:
        ``(meta, arrays)`` with ``meta["outputs"]`` naming the arrays and ``meta["per_call"]``
        the timings. Raises the package's own typed error, :class:`RemoteTimeoutError` or
        :class:`RemoteRunError`."""
        limit = self.timeout if timeout is None else min(float(timeout), self.timeout)
        names = list(inputs or {})
        meta = {"inputs": names if inputs is not None else None, "repeat": int(repeat),
                "number": int(number), "min_repeat_ms": float(min_repeat_ms)}
        with self._lock, tempfile.TemporaryDirectory(prefix="tilecraft-run-") as scratch:
            job = Path(scratch)
            (job / _REQUEST).write_bytes(rpc.encode(meta, [inputs[n] for n in names] if inputs else []))
            child = self._take()
            try:
                _, stderr = child.communicate(f"{package}\n{job}\n".encode(), timeout=limit)
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
                raise RemoteTimeoutError(f"the package ran past the time limit of {limit:g} s "
                                         "and was killed") from None
            finally:
                self._waiting = self._start()
            if (job / _ERROR).is_file():
                raise rpc.error_from_json((job / _ERROR).read_bytes(), 500, "")
            if child.returncode != 0 or not (job / _RESPONSE).is_file():
                raise RemoteRunError(_death(child.returncode, stderr, self.memory_limit))
            return rpc.decode((job / _RESPONSE).read_bytes(), "run result")

    def close(self) -> None:
        """End the waiting process (it exits when its standard input closes)."""
        with self._lock:
            child, self._waiting = self._waiting, None
        if child is not None:
            try:
                child.communicate(b"", timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()


def _death(code: int, stderr: bytes, memory_limit: int) -> str:
    tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        detail = f" ({tail[0][:200]})" if tail[0] else ""
        # Compiled code does not check malloc: past RLIMIT_AS it dereferences NULL or aborts.
        return (f"the package's process died of {name}{detail}; a run needing more memory than the "
                f"limit of {memory_limit} bytes (the server's --memory-limit) ends this way too")
    if "MemoryError" in stderr.decode("utf-8", "replace"):
        return f"the package's process ran out of memory (limit {memory_limit} bytes, the server's --memory-limit)"
    return f"the package's process exited with code {code}" + (f": {tail[0][:300]}" if tail[0] else "")


def _child_environment() -> dict[str, str]:
    """This environment, with the folder this tilecraft was imported from first on the path
    (the server may have found it through its own ``sys.path``)."""
    environment = dict(os.environ)
    root = str(Path(__file__).absolute().parent.parent.parent)
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (root, environment.get("PYTHONPATH")) if p)
    return environment


# ---- the child --------------------------------------------------------------------------

def _child(memory_limit: int) -> int:
    """Limit the address space, import, wait for a job (the package's path and the job
    folder, one line each, on standard input), run it, write the result or the error."""
    import resource

    if memory_limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    from .run import run

    package, job = sys.stdin.readline().strip(), sys.stdin.readline().strip()
    if not package or not job:  # closed without a job: the executor is shutting down
        return 0
    folder = Path(job)
    try:
        meta, arrays = rpc.decode((folder / _REQUEST).read_bytes(), "run request")
        inputs = None if meta["inputs"] is None else dict(zip(meta["inputs"], arrays))
        result = run(package, inputs, repeat=meta["repeat"], number=meta["number"],
                     min_repeat_ms=meta["min_repeat_ms"])
        outputs = list(result.outputs)
        answer = {"outputs": outputs,
                  "per_call": list(result.timing.per_call) if result.timing is not None else None}
        (folder / _RESPONSE).write_bytes(rpc.encode(answer, [result.outputs[n] for n in outputs]))
    except TilecraftError as error:
        (folder / _ERROR).write_bytes(rpc.error_to_json(error))
    except MemoryError:
        (folder / _ERROR).write_bytes(rpc.error_to_json(RemoteLimitError(
            f"the package ran out of memory under the server's limit of {memory_limit} bytes")))
    except Exception as error:  # noqa: BLE001 - any other failure is reported, typed
        (folder / _ERROR).write_bytes(rpc.error_to_json(RemoteError(f"{type(error).__name__}: {error}")))
    return 0


if __name__ == "__main__":
    status = _child(int(sys.argv[1]))
    sys.stderr.flush()
    # The result is written and closed: skip the interpreter's teardown (numpy's, the
    # package's async-runtime threads), which the server would otherwise wait for.
    os._exit(status)
