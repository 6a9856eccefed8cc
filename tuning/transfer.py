"""A cost model trained across tasks and runs, saved beside the records: warm starts.

Why: each task's XGBoost model (cost_model.py) starts from nothing, so the first batches of
every task, and of every new model's tasks, are random. AutoTVM's transfer learning and
MetaSchedule's shared cost model instead reuse what earlier searches measured. Here every
measurement of a run becomes a row of task-independent features
(``ScheduleSpace.transfer_features``: kernel class, task size, the plan's loop-nest
features; knob values are left out since knobs differ between spaces) with its label
normalized per task (best cost / cost, as the per-task model does), and one model is trained
on all rows. The rows and the trained booster are saved beside the records
(``<records>.costmodel.npz``); the next run, of the same model or another, loads the file
and its XGBoost tuners rank candidates with it until their own model has data.
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import TuningError
from .cost_model import CostModelConfig, XGBCostModel

SUFFIX = ".costmodel.npz"


def beside(records: "str | os.PathLike[str]") -> Path:
    """Where the cross-task model of ``records`` is saved: ``<records>.costmodel.npz``."""
    path = Path(records)
    return path.with_name(path.name + SUFFIX)


class TransferModel:
    """Rows of (transfer features, per-task normalized label) and the model trained on them."""

    def __init__(self, feature_names: Sequence[str], config: CostModelConfig | None = None) -> None:
        self.feature_names = list(feature_names)
        self.rows: list[list[float]] = []
        self.labels: list[float] = []
        self.model = XGBCostModel(config or CostModelConfig(min_samples=16))

    @property
    def trained(self) -> bool:
        return self.model.trained

    def add_task(self, features: Sequence[Sequence[float]], costs: Sequence[float]) -> None:
        """One task's measurements (seconds, ``inf`` for failures) as rows."""
        finite = [c for c in costs if math.isfinite(c) and c > 0]
        if not finite:
            return
        best = min(finite)
        for row, cost in zip(features, costs):
            if len(row) != len(self.feature_names):
                raise TuningError(f"transfer row has {len(row)} features, the model {len(self.feature_names)}")
            self.rows.append([float(v) for v in row])
            self.labels.append(best / cost if math.isfinite(cost) and cost > 0 else 0.0)

    def extend(self, other: "TransferModel") -> None:
        """Take ``other``'s rows (an earlier run's), when they have the same columns."""
        if other.feature_names == self.feature_names:
            self.rows.extend(other.rows)
            self.labels.extend(other.labels)

    def fit(self) -> None:
        """Train on every row (labels are normalized per task already)."""
        self.model.fit_labels(self.rows, self.labels)

    def predict(self, features: Sequence[Sequence[float]]) -> np.ndarray:
        return self.model.predict(features)

    def save(self, path: "str | os.PathLike[str]") -> None:
        """Rows, labels, column names and the booster (XGBoost's JSON) in one ``.npz``."""
        booster = self.model.raw()
        buffer = io.BytesIO()
        np.savez_compressed(buffer, rows=np.asarray(self.rows, dtype=np.float32).reshape(-1, len(self.feature_names)),
                            labels=np.asarray(self.labels, dtype=np.float32),
                            feature_names=np.asarray(self.feature_names),
                            booster=np.frombuffer(booster, dtype=np.uint8) if booster else np.zeros(0, np.uint8))
        Path(path).write_bytes(buffer.getvalue())

    @classmethod
    def load(cls, path: "str | os.PathLike[str]", config: CostModelConfig | None = None) -> "TransferModel":
        """The model saved at ``path``; :class:`TuningError` when it is not one."""
        try:
            with np.load(path, allow_pickle=False) as data:
                names = [str(n) for n in data["feature_names"]]
                rows, labels, booster = data["rows"], data["labels"], data["booster"].tobytes()
        except (OSError, ValueError, KeyError, EOFError) as error:
            raise TuningError(f"{path}: not a tilecraft cost model ({type(error).__name__}: {error})") from None
        if rows.ndim != 2 or rows.shape != (len(labels), len(names)):
            raise TuningError(f"{path}: cost model rows {rows.shape} do not match {len(labels)} labels "
                              f"of {len(names)} features")
        model = cls(names, config)
        model.rows, model.labels = rows.tolist(), labels.tolist()
        if booster:
            model.model.load_raw(booster)
        return model
