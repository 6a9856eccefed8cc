"""The roles of a tuning run, one interface each (TVM MetaSchedule's names).

``tilecraft.tune`` (tune.py) only wires these together; each has the implementations listed
below behind it, and a new one (a search strategy, a runner for another cluster, a database
in another store) is a subclass the driver uses unchanged:

=================  ============================================================  ==============================
role               guarantees                                                    implementations
=================  ============================================================  ==============================
SpaceGenerator     the search space of a task on a target                        space_generators.py (CPU hand
                                                                                 spaces, CUDA, templates, sketches)
Runner             builds, checks and times candidates; a bad candidate is a     measure.py (LocalRunner),
                   ``MeasureResult``, never an exception                         measure_remote.py, measure_ray.py
Database           every committed record is on disk before ``commit`` returns;  database.py (JSON lines)
                   a run resumes from what an earlier one committed
CostModel          predicts a config's speed from its features                   cost_model.py (XGBoost)
SearchStrategy     proposes unmeasured configs, learns from their costs          tuners.py (xgb, random, grid)
TaskScheduler      splits a trials budget between a model's tasks                task_scheduler.py (gradient)
=================  ============================================================  ==============================

The search space itself (what a generator returns and a strategy walks) is
:class:`tilecraft.schedule.space.SearchSpace`: it lives with the schedules it renders.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

if TYPE_CHECKING:
    from ..schedule.records import Record
    from ..schedule.task import Placement, Producer
    from ..schedule.space import Config, SearchSpace


@dataclass(frozen=True)
class MeasureInput:
    """One candidate a :class:`Runner` measures: the task's payload and description, a config
    (``None``: the default schedule)."""

    payload: str
    task: dict[str, Any]
    config: dict[str, int] | None
    target: str
    reference: str | None = None  # .npy with the default schedule's output
    save_output: str | None = None  # write this candidate's output here (.npy)
    # A template's candidate (template.py): ``payload`` is already scheduled; this names its
    # entry function, and it is compiled as ``schedule.te.build`` compiles a Schedule.
    scheduled: str | None = None
    # The thread count the candidate is built for (the tuned Target's ``num_threads``): a
    # target string has no thread count, and the spawned worker's own default
    # (``TILECRAFT_NUM_THREADS``, else every core) need not be the one being tuned for.
    # ``None``: that default.
    threads: int | None = None
    # Where the model writes the task's result (``Task.placement``): the candidate writes it
    # into that slice of a larger tensor, as the model's kernel does, and only that slice of
    # its output is checked (schedule/task.py's ``place_result``). ``None``: a tensor of its own.
    placement: "Placement | None" = None
    # The kernels whose results the candidate reads (``Task.producer_cycle``): before each
    # timed call the next one runs, its result becoming the argument it feeds
    # (tuning/measure.py, ``producer_feed``), as the model's kernel reads its input just
    # written by the kernel before it; a ``None`` entry reads the arguments back into the
    # caches for that call. Empty: every call reads them back.
    producers: "tuple[Producer | None, ...]" = ()


@dataclass(frozen=True)
class MeasureResult:
    """What a :class:`Runner` gives back for a candidate: ``status`` is one of ok,
    build_error, run_error, wrong, timeout, crash."""

    status: str
    costs: tuple[float, ...] = ()
    error: str = ""
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class SpaceGenerator(abc.ABC):
    """Makes the search space of one task.

    Guarantees: the space's :meth:`~SearchSpace.default` point is the schedule the compiler
    uses without records, so its measurement is the baseline of every candidate; every point
    renders a transform script (:meth:`~SearchSpace.script`) stored with its record.
    """

    @abc.abstractmethod
    def generate(self, task: Any) -> "SearchSpace":
        """The space of ``task``; a typed :class:`~tilecraft.errors.TilecraftError` when the
        generator cannot describe it."""


class Runner(abc.ABC):
    """Builds, checks and times candidates (TVM's builder and runner in one).

    Guarantees: :meth:`measure` returns a :class:`MeasureResult` for every candidate, also
    for one that fails to build, crashes, hangs or computes a wrong output (its ``status``
    says which); it raises only when the runner itself is gone (an unreachable server), as
    then every further candidate would fail too. A job with ``save_output`` writes its output
    there; a job with ``reference`` is compared with it.
    """

    @property
    @abc.abstractmethod
    def scratch(self) -> Path:
        """A folder for the reference outputs, removed with the runner."""

    @abc.abstractmethod
    def measure(self, job: "MeasureInput") -> "MeasureResult":
        """Measure one candidate."""

    def measure_batch(self, jobs: Sequence["MeasureInput"],
                      on_result: "Callable[[int, MeasureResult], None] | None" = None,
                      ) -> "list[MeasureResult]":
        """Measure ``jobs``, handing each result to ``on_result(index, result)`` as soon as
        it arrives; one after the other here, side by side where a runner has several
        machines (it overrides this)."""
        results = []
        for index, job in enumerate(jobs):
            result = self.measure(job)
            if on_result is not None:
                on_result(index, result)
            results.append(result)
        return results

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the workers and remove the scratch folder."""

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Database(abc.ABC):
    """Where measurements are kept (TVM's database: commit a record, read the best).

    Guarantees: a record passed to :meth:`commit` is durable when the call returns (a run
    killed afterwards loses nothing it committed); :meth:`records` reads back what this and
    earlier runs committed for a target (a resumed run skips those configs); several writers
    may commit to one database at once without losing or interleaving records.
    """

    @abc.abstractmethod
    def commit(self, record: "Record") -> None:
        """Store ``record`` durably."""

    @abc.abstractmethod
    def records(self, target: Any = None) -> "list[Record]":
        """Every readable record (of ``target`` when given), oldest first."""

    def best(self, target: Any = None) -> "dict[str, Record]":
        """Per task key, the record the compiler applies (schedule/records.py's tiers)."""
        from ..schedule.records import best_records

        return best_records(self.records(target))

    def close(self) -> None:
        """Release the store (nothing to do by default)."""

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CostModel(abc.ABC):
    """Predicts how fast configs run from their features (higher: faster).

    Guarantees: :meth:`predict` returns one score per row, comparable within a task;
    before :meth:`fit` has seen enough rows (``trained`` is False) its scores mean nothing
    and a strategy must not rely on them.
    """

    @property
    @abc.abstractmethod
    def trained(self) -> bool:
        """Whether the scores mean anything yet."""

    @abc.abstractmethod
    def fit(self, features: Sequence[Sequence[float]], costs: Sequence[float]) -> None:
        """Train on measured rows (``costs`` in seconds, ``inf`` for a failed candidate)."""

    @abc.abstractmethod
    def predict(self, features: Sequence[Sequence[float]]) -> np.ndarray:
        """One score per row."""


class SearchStrategy(abc.ABC):
    """Walks one task's space: proposes configs, learns from their costs (TVM's tuners).

    Guarantees: :meth:`next_batch` proposes only valid configs not proposed or measured
    before (fewer, possibly none, when the space runs out); after :meth:`update`,
    ``best_cost``/``best_config`` are the fastest measured so far and ``configs``/``costs``
    hold every measurement in order.
    """

    space: "SearchSpace"
    configs: "list[Config]"
    costs: list[float]
    best_cost: float
    best_config: "Config | None"

    @abc.abstractmethod
    def has_next(self) -> bool:
        """Whether the space may still hold unproposed points."""

    @abc.abstractmethod
    def next_batch(self, size: int) -> "list[Config]":
        """Up to ``size`` configs to measure next."""

    @abc.abstractmethod
    def update(self, configs: "list[Config]", costs: list[float]) -> None:
        """Learn the measured ``costs`` (seconds; ``inf``: failed) of ``configs``."""


class TaskScheduler(abc.ABC):
    """Splits a budget of trials between the tasks of a model (Ansor's task scheduler).

    Guarantees: :meth:`run` measures at most ``budget`` trials in all, ends when the budget,
    the deadline or every task's search is spent (never loops on a task that measures
    nothing), and leaves each task's trials counted on its state.
    """

    @abc.abstractmethod
    def plan(self, budget: int) -> str:
        """The plan printed before the search."""

    @abc.abstractmethod
    def run(self, budget: int) -> None:
        """Hand out ``budget`` trials."""

    @abc.abstractmethod
    def allocation(self) -> str:
        """Which task got how many trials (printed at the end)."""


__all__ = ["CostModel", "Database", "Runner", "SearchStrategy", "SpaceGenerator", "TaskScheduler"]
