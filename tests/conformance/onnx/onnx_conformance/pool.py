"""A pool of worker processes that survives its tasks: segfaults, aborts and hangs.

Each worker is a subprocess speaking protocol.py on stdin/stdout. The pool hands one task at
a time to each idle worker and waits on all of them with ``select``:

- a reply: the task is done, the worker takes the next one;
- end of file on the worker's stdout: the worker died (``crash``, with the signal or exit
  status and the tail of what it wrote to stderr for that task); a fresh worker replaces it;
- the task's deadline passes: the worker's process group is killed (``timeout``) and replaced.

A worker's stderr goes to a file; the offset at dispatch marks where a task's output starts.
Workers are also replaced after ``max_tasks_per_worker`` tasks, so a leak cannot accumulate.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from .protocol import READY, Decoder, encode

STDERR_TAIL_LINES = 12
STDERR_TAIL_CHARS = 1500
# Seconds a fresh worker may take to import everything before the pool gives up on it.
STARTUP_TIMEOUT = 300.0


class PoolError(RuntimeError):
    """Workers cannot start (a broken checkout, a missing module): no task can run."""


@dataclass
class Task:
    """``payload()`` is called in the parent when the task is dispatched (lazy loading)."""

    key: str
    timeout: float
    payload: Callable[[], Any]


@dataclass
class Outcome:
    """A finished task: ``reply`` from the worker, or ``failure`` ("timeout" / "crash" /
    "harness-error") with ``message``."""

    task: Task
    reply: Any = None
    failure: str | None = None
    message: str = ""
    seconds: float = 0.0


def _signal_name(returncode: int | None) -> str:
    if returncode is None:
        return "unknown status"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


def _condense(stderr: str) -> str:
    """The last lines a dying worker wrote, on one line. A faulthandler dump keeps its
    innermost frames only, so the native error printed before it stays in view."""
    kept, frames = [], 0
    for line in stderr.splitlines():
        line = line.strip()
        if not line or line.startswith("Extension modules:"):
            continue
        if line.startswith('File "'):
            frames += 1
            if frames > 3:
                continue
        elif not line.startswith(("Current thread", "Thread 0x", "Stack (most recent")):
            frames = 0
        kept.append(line)
    return " | ".join(kept[-STDERR_TAIL_LINES:])


class _Worker:
    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None, scratch: str, number: int) -> None:
        self.stderr_path = os.path.join(scratch, f"worker-{number}.stderr")
        self._stderr = open(self.stderr_path, "ab")
        self.process = subprocess.Popen(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env=dict(env) if env is not None else None, start_new_session=True,
        )
        os.set_blocking(self.process.stdout.fileno(), False)
        self.decoder = Decoder()
        self.ready = False
        self.started = time.monotonic()
        self.task: Task | None = None
        self.deadline = self.started + STARTUP_TIMEOUT
        self.dispatched = 0.0
        self.stderr_offset = 0
        self.tasks_done = 0

    @property
    def fd(self) -> int:
        return self.process.stdout.fileno()

    def dispatch(self, task: Task, message: bytes) -> None:
        self._stderr.flush()
        self.stderr_offset = os.path.getsize(self.stderr_path)
        self.task = task
        self.dispatched = time.monotonic()
        self.deadline = self.dispatched + task.timeout
        self.process.stdin.write(message)
        self.process.stdin.flush()

    def stderr_tail(self) -> str:
        try:
            with open(self.stderr_path, "rb") as stream:
                stream.seek(self.stderr_offset)
                text = stream.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return _condense(text)[-STDERR_TAIL_CHARS:]

    def kill(self) -> None:
        """Kill the worker's whole process group (it is its own session leader)."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.close()

    def close(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._stderr.close()


class WorkerPool:
    """Runs tasks in ``jobs`` workers started with ``command`` (see the module doc)."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        jobs: int,
        env: Mapping[str, str] | None = None,
        max_tasks_per_worker: int | None = 200,
    ) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {jobs}")
        self.command = list(command)
        self.jobs = jobs
        self.env = env
        self.max_tasks_per_worker = max_tasks_per_worker
        self._started = 0
        self._failed_starts = 0

    def run(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        """Yield an :class:`Outcome` per task, in completion order."""
        pending = deque(tasks)
        with tempfile.TemporaryDirectory(prefix="onnx-conformance-") as scratch:
            workers: list[_Worker] = []
            selector = selectors.DefaultSelector()
            try:
                yield from self._loop(pending, workers, selector, scratch)
            finally:
                for worker in workers:
                    worker.kill()
                selector.close()

    def _spawn(self, workers: list[_Worker], selector: selectors.BaseSelector, scratch: str) -> None:
        self._started += 1
        worker = _Worker(self.command, self.env, scratch, self._started)
        workers.append(worker)
        selector.register(worker.fd, selectors.EVENT_READ, worker)

    def _retire(self, worker: _Worker, workers: list[_Worker], selector: selectors.BaseSelector, kill: bool) -> None:
        selector.unregister(worker.fd)
        workers.remove(worker)
        if kill:
            worker.kill()
        else:
            worker.close()

    def _loop(self, pending: deque, workers: list[_Worker], selector: selectors.BaseSelector,
              scratch: str) -> Iterator[Outcome]:
        while pending or any(w.task is not None for w in workers):
            while len(workers) < min(self.jobs, len(pending) + sum(w.task is not None for w in workers)):
                self._spawn(workers, selector, scratch)
            for worker in workers:
                while worker.ready and worker.task is None and pending:
                    outcome = self._dispatch(worker, pending.popleft())
                    if outcome is not None:  # the case could not be loaded; next one
                        yield outcome
            now = time.monotonic()
            wait = max(0.0, min(w.deadline for w in workers) - now) if workers else 0.1
            for key, _events in selector.select(timeout=min(wait, 5.0)):
                yield from self._on_readable(key.data, workers, selector)
            now = time.monotonic()
            for worker in list(workers):
                if worker in workers and now >= worker.deadline:
                    yield from self._on_deadline(worker, workers, selector)

    def _dispatch(self, worker: _Worker, task: Task) -> Outcome | None:
        try:
            message = encode(task.payload())
        except Exception as error:  # a case whose data cannot be read: the harness's fault
            return Outcome(task, failure="harness-error", message=f"loading the case: {type(error).__name__}: {error}")
        try:
            worker.dispatch(task, message)
        except (BrokenPipeError, OSError):
            pass  # the worker died; the EOF on its stdout reports the crash
        return None

    def _on_readable(self, worker: _Worker, workers: list[_Worker],
                     selector: selectors.BaseSelector) -> Iterator[Outcome]:
        try:
            data = os.read(worker.fd, 1 << 20)
        except BlockingIOError:
            return
        if not data:
            yield from self._on_exit(worker, workers, selector)
            return
        for message in worker.decoder.feed(data):
            if not worker.ready:
                if message != READY:
                    raise PoolError(f"worker sent {message!r} before {READY!r}")
                worker.ready = True
                worker.deadline = float("inf")
                self._failed_starts = 0
                continue
            task, worker.task = worker.task, None
            worker.deadline = float("inf")
            worker.tasks_done += 1
            yield Outcome(task, reply=message, seconds=time.monotonic() - worker.dispatched)
            if self.max_tasks_per_worker and worker.tasks_done >= self.max_tasks_per_worker:
                self._retire(worker, workers, selector, kill=False)

    def _on_exit(self, worker: _Worker, workers: list[_Worker], selector: selectors.BaseSelector) -> Iterator[Outcome]:
        self._retire(worker, workers, selector, kill=False)
        status = _signal_name(worker.process.returncode)
        if worker.task is None:
            if not worker.ready:
                self._failed_starts += 1
                if self._failed_starts >= 3:
                    raise PoolError(f"workers die before they are ready ({status}): {worker.stderr_tail()}")
            return
        tail = worker.stderr_tail()
        yield Outcome(worker.task, failure="crash",
                      message=f"worker died ({status})" + (f": {tail}" if tail else ""),
                      seconds=time.monotonic() - worker.dispatched)

    def _on_deadline(self, worker: _Worker, workers: list[_Worker],
                     selector: selectors.BaseSelector) -> Iterator[Outcome]:
        self._retire(worker, workers, selector, kill=True)
        if worker.task is None:
            raise PoolError(f"a worker did not start within {STARTUP_TIMEOUT:.0f} s: {worker.stderr_tail()}")
        yield Outcome(worker.task, failure="timeout",
                      message=f"no result within {worker.task.timeout:g} s (worker killed)",
                      seconds=time.monotonic() - worker.dispatched)
