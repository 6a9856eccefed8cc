"""Measure candidates on a Ray cluster: TVM's RPC tracker role, for users who outgrow one machine.

``RayRunner`` has the local runner's interface (``measure``, ``scratch``, ``close``) plus
``measure_batch``, which spreads a batch over the cluster. Each node gets
``workers_per_node`` measurement actors (default 1: one measurement at a time per node, so
candidates measured side by side do not disturb each other), pinned to it with a node
affinity. An actor builds and times candidates in its own process, as the local runner's
worker does, so the cluster's workers need tilecraft installed, not the driver's files:
a task's reference output travels with the job as an array, and the default schedule's
output comes back as one.

Failures are results, never exceptions: an actor whose process dies mid-measurement (a
crashing candidate, a node lost) yields a ``crash`` result for that candidate alone and is
replaced; one that runs past ``timeout`` is killed, replaced, and yields ``timeout``. The
driver receives results as they finish and hands each to ``on_result`` at once, so the
tuner appends and flushes its record before the batch ends (records are written by the
driver only).

``address``: ``None`` starts a local cluster for the run (stopped on ``close``), or
``"ray://HOST:PORT"`` / ``"HOST:PORT"`` joins a running one. Ray is an optional extra:
``pip install 'tilecraft[distributed]'``.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import TuningError
from .measure import MeasureInput, MeasureResult, RunnerOptions, _run_job
from .roles import Runner

# Arguments ray.init gets for a local cluster: no dashboard, workers' logs kept off the
# tuner's progress lines.
_LOCAL_CLUSTER = {"include_dashboard": False, "log_to_driver": False}


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise TuningError("the Ray runner needs Ray: pip install 'tilecraft[distributed]'") from None
    return ray


class _Measurer:
    """The actor's body: build, check and time candidates in this (the actor's) process."""

    def __init__(self, options: RunnerOptions) -> None:
        self.options = options
        self.scratch = Path(tempfile.mkdtemp(prefix=f"tilecraft-measure-{os.getpid()}-ray-"))

    def ready(self) -> str:
        from .. import pipelines  # noqa: F401  (the MLIR import, before the first candidate)

        return os.uname().nodename

    def measure(self, job: MeasureInput, reference: "np.ndarray | None",
                want_output: bool) -> "tuple[MeasureResult, np.ndarray | None]":
        local = replace(job, reference=None, save_output=None)
        if reference is not None:
            path = self.scratch / "reference.npy"
            np.save(path, reference)
            local = replace(local, reference=str(path))
        output = self.scratch / "output.npy"
        if want_output:
            local = replace(local, save_output=str(output))
        result = _run_job(local, self.options, self.scratch)
        return result, (np.load(output) if want_output and result.ok else None)


class RayRunner(Runner):
    """Measures candidates on the actors of a Ray cluster (see the module docstring)."""

    def __init__(self, options: RunnerOptions | None = None, address: str | None = None,
                 workers_per_node: int = 1) -> None:
        self.options = options or RunnerOptions()
        if workers_per_node < 1:
            raise TuningError(f"workers_per_node must be >= 1, got {workers_per_node}")
        self.ray = _import_ray()
        self._own_cluster = False
        if not self.ray.is_initialized():
            try:
                if address is None:
                    self.ray.init(**_LOCAL_CLUSTER)
                    self._own_cluster = True
                else:
                    self.ray.init(address=address if "://" in address else f"ray://{address}",
                                  log_to_driver=False)
            except Exception as error:  # Ray's connection errors have no common base class
                # A failed client connection leaves Ray half-initialized: without this, the
                # next local ray.init() in the process fails with a bare AssertionError.
                self.ray.shutdown()
                raise TuningError(f"cannot start or reach the Ray cluster {address or '(local)'}: "
                                  f"{type(error).__name__}: {error}") from None
        self._actor_class = self.ray.remote(num_cpus=0, max_concurrency=1)(_Measurer)
        self._scratch = tempfile.TemporaryDirectory(prefix=f"tilecraft-measure-{os.getpid()}-")
        nodes = [n["NodeID"] for n in self.ray.nodes() if n.get("Alive")]
        self._slots = [node for node in nodes for _ in range(workers_per_node)]
        self._actors: list[Any] = [self._spawn(node) for node in self._slots]
        self.ray.get([actor.ready.remote() for actor in self._actors],
                     timeout=self.options.startup_timeout)

    @property
    def scratch(self) -> Path:
        """A folder for reference outputs on the driver, removed with the runner."""
        return Path(self._scratch.name)

    @property
    def workers(self) -> int:
        return len(self._actors)

    def _spawn(self, node: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return self._actor_class.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False)
        ).remote(self.options)

    def _replace(self, slot: int) -> None:
        self.ray.kill(self._actors[slot], no_restart=True)
        self._actors[slot] = self._spawn(self._slots[slot])

    def measure(self, job: MeasureInput) -> MeasureResult:
        """Build, check and time one candidate on some worker; never raises for a bad one."""
        return self.measure_batch([job])[0]

    def measure_batch(self, jobs: Sequence[MeasureInput],
                      on_result: Callable[[int, MeasureResult], None] | None = None) -> list[MeasureResult]:
        """Measure ``jobs`` over the workers, each worker one at a time; ``on_result(i,
        result)`` is called as each finishes (in completion order); returns the results in
        ``jobs``' order."""
        ray = self.ray
        results: list[MeasureResult | None] = [None] * len(jobs)
        pending = list(range(len(jobs)))
        running: dict[Any, tuple[int, int, float]] = {}  # ref -> (job index, slot, start)
        idle = list(range(len(self._actors)))
        while pending or running:
            while pending and idle:
                index, slot = pending.pop(0), idle.pop(0)
                job = jobs[index]
                reference = np.load(job.reference) if job.reference is not None else None
                ref = self._actors[slot].measure.remote(job, reference, job.save_output is not None)
                running[ref] = (index, slot, time.perf_counter())
            done, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
            now = time.perf_counter()
            finished = [(ref, None) for ref in done]
            finished += [(ref, "timeout") for ref, (_, _, start) in running.items()
                         if ref not in done and now - start > self.options.timeout]
            for ref, verdict in finished:
                index, slot, start = running.pop(ref)
                result = self._collect(ref, verdict, jobs[index], slot, now - start)
                results[index] = result
                idle.append(slot)
                if on_result is not None:
                    on_result(index, result)
        return [r for r in results if r is not None]

    def _collect(self, ref: Any, verdict: str | None, job: MeasureInput, slot: int,
                 elapsed: float) -> MeasureResult:
        ray = self.ray
        if verdict == "timeout":
            self._replace(slot)
            return MeasureResult("timeout", error=f"no result within {self.options.timeout:g} s",
                                 elapsed=elapsed)
        try:
            result, output = ray.get(ref)
        except ray.exceptions.RayActorError as error:
            self._replace(slot)
            return MeasureResult("crash", error=f"the Ray worker died ({type(error).__name__})"[:2000],
                                 elapsed=elapsed)
        except ray.exceptions.RayError as error:
            return MeasureResult("run_error", error=f"{type(error).__name__}: {error}"[:2000],
                                 elapsed=elapsed)
        if output is not None and job.save_output is not None:
            np.save(job.save_output, output)
        return result

    def close(self) -> None:
        for actor in self._actors:
            self.ray.kill(actor, no_restart=True)
        self._actors = []
        if self._own_cluster:
            self.ray.shutdown()
        self._scratch.cleanup()
