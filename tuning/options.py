"""How ``tilecraft.tune`` searches: :class:`TuneOptions`, checked when made.

The model and target come as :class:`~tilecraft.compiler.options.CompileOptions`; these
options say how long to search, with which strategy, where to measure and where to keep the
records. A bad value is a :class:`~tilecraft.errors.TuningError` naming the field, raised
before any work.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import TunerNameError, TuningError
from ..runtime.rpc import Address
from .measure import RunnerOptions
from .space_generators import CPU_GENERATORS
from .tuners import TUNERS


@dataclass(frozen=True)
class TuneOptions:
    """How to search (the model and target come as :class:`CompileOptions`).

    Attributes:
      trials: measurements in total over all tasks (the default schedules included).
      trials_per_task: the minimum every task gets (after its default) before the task
        scheduler hands the rest to the tasks with the largest expected gain per trial.
      time_budget: stop searching after this many seconds (the trials budget still caps).
      tuning_records: JSON-lines file the measurements are appended to.
      tuner: ``xgb``, ``xgb_rank``, ``random`` or ``grid``.
      early_stopping: stop a task after this many trials without improvement.
      prior_records: records of an earlier (perhaps killed) run: their configs are not
        measured again and count toward each task's trials.
      timeout: seconds a candidate may take to build and run before it counts as failed.
      tasks: restrict to these tasks (``Task`` objects, keys or names).
      runner: measurement settings (``number``, ``repeat``, ``min_repeat_ms``, cache
        flush); its ``timeout`` is replaced by ``timeout``.
      batch_size: candidates proposed per tuner step (the model retrains between steps).
      seed: seed of the tuners' random choices.
      report: write a PNG plotting best-so-far GFLOPS vs trials per task and tuner.
      progress: print the progress lines.
      validate_top: after a task's search, re-measure its best ``validate_top`` configs and
        the default, round-robin (:data:`VALIDATION_ROUNDS` rounds), and record them as
        ``final``; ``compile`` then picks among these (0: no validation). Why: on a loaded
        machine the search's best single measurement is often a lucky one.
      end_to_end: after the search, profile the model with the default schedules and with the
        records, and record each tuned task's kernel time in both (``in_model`` records, which
        then decide: a config slower in the model than the default is not applied); then
        compile the model both ways and time them side by side (alternating calls): the
        speedup a user gets.
        Skipped with ``remote`` (it would time this machine, not the device).
      cost_model: a cross-task cost model saved by an earlier run (``<records>.costmodel.npz``,
        tuning/transfer.py) to warm-start the XGBoost tuners from, e.g. one of another
        model's run; by default the one beside ``tuning_records`` if that exists. Every run
        saves its own, trained on the earlier model's rows and its own measurements, beside
        its records.
      transfer: ``False``: no warm start, and no model saved.
      remote: ``"remote://HOST:PORT"`` (or ``"HOST:PORT"``): time candidates on a tilecraft
        server (tuning/measure_remote.py) instead of this machine; ``None``: locally.
      remote_key: that server's shared key (default ``$TILECRAFT_RPC_KEY``).
      ray: measure on a Ray cluster (tuning/measure_ray.py; ``pip install
        'tilecraft[distributed]'``): ``"local"`` starts one on this machine for the run,
        ``"ray://HOST:PORT"`` joins a running one. Each batch is spread over the cluster's
        nodes, one measurement at a time per node. Not with ``remote``.
      headroom: weigh each float32 contraction task by its gap to the machine's FMA peak
        (runtime/peak.py, measured once per machine) as well as by its share of the model's
        time, and say when every heavy task is already near the peak; ``False``: by time alone.
      space: the CPU search spaces: ``hand`` (the kernel-class spaces of schedule/space.py),
        ``generated`` (spaces derived from each op's loops, schedule/sketch.py, where the
        hand space has only generic knobs: elementwise, reductions, pooling, depthwise
        convolutions; the hand spaces for matmuls and convolutions) or ``sketch`` (derived
        spaces for every op).
    """

    trials: int = 200
    trials_per_task: int = 0
    time_budget: float | None = None
    tuning_records: "str | os.PathLike[str]" = "tuning.jsonl"
    tuner: str = "xgb"
    early_stopping: int | None = None
    prior_records: "str | os.PathLike[str] | None" = None
    timeout: float = 30.0
    tasks: Sequence[Any] | None = None
    runner: RunnerOptions | None = None
    batch_size: int = 8
    seed: int = 0
    report: "str | os.PathLike[str] | None" = None
    progress: bool = True
    validate_top: int = 4
    end_to_end: bool = True
    cost_model: "str | os.PathLike[str] | None" = None
    transfer: bool = True
    remote: str | None = None
    remote_key: str | None = field(default=None, repr=False)  # a secret: not in reprs or logs
    ray: str | None = None
    headroom: bool = True
    space: str = "hand"

    def __post_init__(self) -> None:
        if self.remote is not None:
            Address.parse(self.remote)  # RemoteAddressError now, not after the defaults
        if self.ray is not None:
            if self.remote is not None:
                raise TuningError("choose one runner: remote= or ray=, not both")
            if self.ray != "local" and not self.ray.startswith("ray://"):
                raise TuningError(f"ray must be 'local' or 'ray://HOST:PORT', got {self.ray!r}")
        if self.space not in CPU_GENERATORS:
            raise TuningError(f"space must be one of {', '.join(CPU_GENERATORS)}, got {self.space!r}")
        if self.tuner not in TUNERS:
            raise TunerNameError(f"unknown tuner {self.tuner!r}; choose one of {', '.join(TUNERS)}")
        trials = self.trials
        if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
            raise TuningError(f"trials must be a positive integer, got {trials!r}")
        stop = self.early_stopping
        if stop is not None and (not isinstance(stop, int) or stop < 1):
            raise TuningError(f"early_stopping must be a positive integer or None, got {stop!r}")
        timeout = self.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise TuningError(f"timeout must be a positive finite number of seconds, got {timeout!r}")
        for name in ("batch_size", "validate_top", "seed"):
            value = getattr(self, name)
            least = 1 if name == "batch_size" else 0
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise TuningError(f"{name} must be an integer >= {least}, got {value!r}")
        for name in ("headroom", "end_to_end", "transfer", "progress"):
            if not isinstance(getattr(self, name), bool):
                raise TuningError(f"{name} must be True or False, got {getattr(self, name)!r}")
        per_task = self.trials_per_task
        if not isinstance(per_task, int) or isinstance(per_task, bool) or per_task < 0:
            raise TuningError(f"trials_per_task must be a non-negative integer, got {per_task!r}")
        budget = self.time_budget
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                                   or not budget > 0):
            raise TuningError(f"time_budget must be positive seconds (a number), got {budget!r}")
