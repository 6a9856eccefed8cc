"""The XGBoost cost model: predicts how fast a config runs from its features.

Labels are normalized per task (best cost / cost, so 1.0 is the fastest seen and a failed
candidate is 0), which makes a model trained on one task's scale meaningful and lets the
rank loss and the regression loss share the data. The model is retrained from scratch on all
measurements of the task each time new ones arrive (a few hundred rows: milliseconds).

Every XGBoost call runs on one thread, the data's conversion included (``DMatrix(nthread=1)``,
``inplace_predict``, ``nthread`` 1 in the booster's parameters). Why: by default XGBoost
converts a matrix with one OpenMP thread per core, and on a loaded machine (load 18 on 2
cores) each conversion of the annealing's 64 candidates then took 0.22 s of wall time for
milliseconds of work, 13 s per proposed batch, more than measuring the batch.
xgboost is imported on first use, so ``import tilecraft`` never loads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .roles import CostModel
from ..errors import OptionError

LOSSES = {"reg": "reg:squarederror", "rank": "rank:pairwise"}


@dataclass(frozen=True)
class CostModelConfig:
    """Settings of the model; immutable so a tuner's behaviour is fixed at construction.

    Attributes:
      loss: ``reg`` (squared error on normalized throughput) or ``rank`` (pairwise ranking).
      rounds: boosting rounds per retraining.
      max_depth, eta, subsample, min_child_weight: the usual XGBoost knobs.
      min_samples: below this many measurements the model does not predict (random order).
      seed: seed of XGBoost's sampling.
    """

    loss: str = "reg"
    rounds: int = 60
    max_depth: int = 6
    eta: float = 0.3
    subsample: float = 1.0
    min_child_weight: float = 1.0
    min_samples: int = 8
    seed: int = 0


class XGBCostModel(CostModel):
    """``fit(features, costs)`` then ``predict(features)`` (higher is faster)."""

    def __init__(self, config: CostModelConfig | None = None) -> None:
        self.config = config or CostModelConfig()
        if self.config.loss not in LOSSES:
            raise OptionError(f"loss must be one of {sorted(LOSSES)}, got {self.config.loss!r}")
        self._booster = None

    @property
    def trained(self) -> bool:
        return self._booster is not None

    def fit(self, features: Sequence[Sequence[float]], costs: Sequence[float]) -> None:
        """Retrain on every measurement so far; ``costs`` are seconds, ``inf`` for failures."""
        if len(costs) < self.config.min_samples:
            return
        finite = [c for c in costs if math.isfinite(c)]
        if not finite:
            return
        best = min(finite)
        self.fit_labels(features, [best / c if math.isfinite(c) else 0.0 for c in costs])

    def fit_labels(self, features: Sequence[Sequence[float]], labels: Sequence[float]) -> None:
        """Retrain on already normalized labels (1.0: the fastest of its task, 0: failed):
        what the cross-task model (transfer.py) trains on."""
        if len(labels) < self.config.min_samples:
            return
        import xgboost

        matrix = xgboost.DMatrix(np.asarray(features, dtype=np.float32),
                                 label=np.asarray(labels, dtype=np.float32), nthread=1)
        if self.config.loss == "rank":
            matrix.set_group([len(labels)])
        params = {
            "objective": LOSSES[self.config.loss], "max_depth": self.config.max_depth,
            "eta": self.config.eta, "subsample": self.config.subsample,
            "min_child_weight": self.config.min_child_weight, "seed": self.config.seed,
            "nthread": 1, "verbosity": 0,
        }
        self._booster = xgboost.train(params, matrix, num_boost_round=self.config.rounds)

    def raw(self) -> bytes:
        """The trained booster as XGBoost's JSON (empty before training)."""
        return bytes(self._booster.save_raw("json")) if self._booster is not None else b""

    def load_raw(self, raw: bytes) -> None:
        """Restore a booster :meth:`raw` returned."""
        import xgboost

        booster = xgboost.Booster()
        booster.load_model(bytearray(raw))
        self._booster = booster

    def predict(self, features: Sequence[Sequence[float]]) -> np.ndarray:
        """Scores (higher = predicted faster); zeros before the first training."""
        if self._booster is None:
            return np.zeros(len(features), dtype=np.float32)
        return self._booster.inplace_predict(np.asarray(features, dtype=np.float32))
