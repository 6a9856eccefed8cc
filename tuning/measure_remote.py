"""Measure candidates on another machine: build here, time there (TVM's RPCRunner).

``tilecraft tune --runner remote://HOST:PORT`` (``TuneOptions(remote=...)``): the spawned
worker of :class:`LocalRunner` builds each candidate into a package instead of a JIT module
(same pipeline, same one-record ``tuning-records`` file); this process uploads it to the
tilecraft server (runtime/server.py) through :mod:`tilecraft.remote`, which runs it once on
the task's fixed inputs and times it on the device. The output is compared with the default
schedule's here, as the local runner does. Outcomes are :class:`MeasureResult` data as
before: a candidate that crashes or hangs on the device is a ``crash`` / ``timeout`` result
(the server survives it); only an unreachable server or a refused key stops the tuning, with
its typed error. Records are still appended and flushed by the driver (tune.py) alone.

The worker writes the package with the front door (``tilecraft.compile(...,
package_path=)``): the tuner sits above the compiler. ``flush_cache`` has no remote
equivalent yet, and the server times whole calls (``kernel_time`` is a local measurement).
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import (PackageError, RemoteAuthError, RemoteConnectionError, RemoteRunError,
                      RemoteTimeoutError, TilecraftError)
from ..runtime import remote
from ..runtime.package import signature_from_manifest, verify
from ..compiler.compile import compile as compile_model
from .measure import (LocalRunner, MeasureInput, MeasureResult, RunnerOptions, candidate_records,
                      candidate_source, job_target, outputs_match, random_inputs, result_region,
                      schedule_failures_raise)



def _build_package(job: MeasureInput, scratch: Path) -> str:
    """The candidate as a package in ``scratch``, compiled as ``tilecraft.compile(payload,
    tuning_records=<one record>, package_path=...)`` would; returns its path."""
    records = candidate_records(job, scratch)
    handle, name = tempfile.mkstemp(prefix="candidate-", suffix=".tar", dir=scratch)
    os.close(handle)
    path = Path(name)
    with schedule_failures_raise():
        compile_model(candidate_source(job), target=job_target(job), opt_level=3, tuning_records=records,
                      package_path=path)
    return str(path)


def _remote_worker_main(connection: Any, options: RunnerOptions, scratch: str) -> None:
    """The build worker's loop: a package path, or a ``build_error`` result, per job."""
    from .. import pipelines  # noqa: F401  (the MLIR import, before saying ready)

    connection.send("ready")
    while True:
        job = connection.recv()
        if job is None:
            return
        start = time.perf_counter()
        try:
            if options.hook is not None:
                options.hook(dict(job.config or {}))
            answer: Any = _build_package(job, Path(scratch))
        except Exception as error:  # noqa: BLE001 - every build failure is a result
            answer = MeasureResult("build_error", error=f"{type(error).__name__}: {error}"[:2000],
                                   elapsed=time.perf_counter() - start)
        except BaseException as error:  # noqa: BLE001 - report even a hook's exception
            answer = MeasureResult("run_error", error=traceback.format_exception_only(error)[-1])
        connection.send(answer)


class RemoteRunner(LocalRunner):
    """Builds candidates in a local worker process and times them on a tilecraft server.

    ``address``: ``HOST:PORT`` or ``remote://HOST:PORT``; ``key``: the server's shared key
    (default ``$TILECRAFT_RPC_KEY``). Connecting checks both at once (typed errors).
    """

    worker = staticmethod(_remote_worker_main)

    def __init__(self, address: str, options: RunnerOptions | None = None, *, key: "str | bytes | None" = None) -> None:
        self.session = remote.connect(address, key=key)
        super().__init__(options)

    def measure(self, job: MeasureInput) -> MeasureResult:
        """Build here, run and time on the server; never raises for a bad candidate."""
        start = time.perf_counter()
        built = self._ask(job)
        if isinstance(built, MeasureResult):
            return built
        package = Path(built)
        try:
            return self._measure_remotely(job, package, start)
        finally:
            package.unlink(missing_ok=True)

    def _measure_remotely(self, job: MeasureInput, package: Path, start: float) -> MeasureResult:
        options = self.options
        try:
            with tempfile.TemporaryDirectory(prefix="manifest-", dir=self.scratch) as folder:
                signature = signature_from_manifest(verify(package, folder))
            arguments = dict(zip((spec.name for spec in signature.arguments), random_inputs(signature)))
            uploaded = self.session.upload(package)
            result = self.session.time(uploaded, arguments, repeat=options.repeat, number=options.number,
                                       min_repeat_ms=options.min_repeat_ms, timeout=options.timeout)
        except (RemoteConnectionError, RemoteAuthError):
            raise  # the device is gone or refuses us: every further candidate would fail too
        except RemoteTimeoutError as error:
            return MeasureResult("timeout", error=str(error), elapsed=time.perf_counter() - start)
        except RemoteRunError as error:
            return MeasureResult("crash", error=str(error), elapsed=time.perf_counter() - start)
        except (PackageError, TilecraftError) as error:
            return MeasureResult("run_error", error=f"{type(error).__name__}: {error}"[:2000],
                                 elapsed=time.perf_counter() - start)
        outputs = list(result.outputs.values())
        output = result_region(outputs[0], job) if len(outputs) == 1 else tuple(outputs)
        if job.reference is not None and not outputs_match(output, np.load(job.reference)):
            return MeasureResult("wrong", error="output differs from the default schedule's",
                                 elapsed=time.perf_counter() - start)
        if job.save_output is not None:
            np.save(job.save_output, output)
        costs = result.timing.per_call if result.timing is not None else ()
        return MeasureResult("ok", costs=tuple(costs), elapsed=time.perf_counter() - start)

    def close(self) -> None:
        super().close()
        self.session.close()
