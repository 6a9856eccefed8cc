"""Search strategies over one task's schedule space (TVM's tuners).

A tuner proposes batches of configs it has not measured (:meth:`Tuner.next_batch`) and is
told their costs (:meth:`Tuner.update`: seconds, ``inf`` for a failed candidate):

- ``random``: uniform valid configs, without repetition;
- ``grid``: the space in index order (the last knob varies fastest), invalid points skipped;
- ``xgb`` / ``xgb_rank``: an XGBoost cost model (regression / pairwise-rank loss) retrained
  after every batch; simulated annealing over the space, scored by the model, collects the
  top predicted configs, of which a batch takes configs that differ from each other in at
  least two knobs first (diversity); a fraction ``epsilon`` of each batch stays random
  (exploration). Until the model has ``min_samples`` measurements, proposals are random, or
  ranked by a cross-task model of earlier runs when one is given (``prior``, transfer.py);
  while it has fewer than ``early_until``, batches hold at most ``early_batch`` configs.
"""

from __future__ import annotations

import heapq
import math
import random
from typing import Mapping

import numpy as np

from ..errors import TunerNameError
from ..schedule.space import Config, SearchSpace
from .cost_model import CostModelConfig, XGBCostModel
from .roles import CostModel, SearchStrategy
from .transfer import TransferModel

TUNERS = ("xgb", "xgb_rank", "random", "grid")


def _frozen(config: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(config.items()))


class Tuner(SearchStrategy):
    """The strategies' base: remembers what was measured and the best result."""

    name = "base"

    def __init__(self, space: SearchSpace, seed: int = 0) -> None:
        self.space = space
        self.rng = random.Random(seed)
        self.visited: set[tuple[tuple[str, int], ...]] = set()
        self.configs: list[Config] = []
        self.costs: list[float] = []
        self.best_cost = math.inf
        self.best_config: Config | None = None

    def has_next(self) -> bool:
        return len(self.visited) < self.space.size

    def next_batch(self, size: int) -> list[Config]:
        raise NotImplementedError

    def mark(self, config: Mapping[str, int]) -> None:
        """Count ``config`` as proposed (e.g. the default point measured first, or a prior record)."""
        self.visited.add(_frozen(config))

    def update(self, configs: list[Config], costs: list[float]) -> None:
        for config, cost in zip(configs, costs):
            self.mark(config)
            self.configs.append(dict(config))
            self.costs.append(cost)
            if cost < self.best_cost:
                self.best_cost, self.best_config = cost, dict(config)

    def _random_unvisited(self, count: int, exclude: set) -> list[Config]:
        found: list[Config] = []
        for _ in range(count * 50):
            if len(found) == count:
                break
            config = self.space.random(self.rng)
            key = _frozen(config)
            if key not in self.visited and key not in exclude:
                exclude.add(key)
                found.append(config)
        return found


class RandomTuner(Tuner):
    name = "random"

    def next_batch(self, size: int) -> list[Config]:
        return self._random_unvisited(size, set())


class GridTuner(Tuner):
    name = "grid"

    def __init__(self, space: SearchSpace, seed: int = 0) -> None:
        super().__init__(space, seed)
        self._cursor = 0

    def next_batch(self, size: int) -> list[Config]:
        batch: list[Config] = []
        while len(batch) < size and self._cursor < self.space.size:
            config = self.space.point(self._cursor)
            self._cursor += 1
            if _frozen(config) not in self.visited and self.space.is_valid(config):
                batch.append(config)
        return batch

    def has_next(self) -> bool:
        return self._cursor < self.space.size


class XGBTuner(Tuner):
    """Model-guided search: simulated annealing on the cost model's predictions."""

    def __init__(self, space: SearchSpace, seed: int = 0, *, loss: str = "reg",
                 epsilon: float = 0.1, sa_steps: int = 60, sa_walkers: int = 64,
                 model_config: CostModelConfig | None = None,
                 prior: "TransferModel | None" = None, model: CostModel | None = None,
                 early_batch: int = 4, early_until: int = 24, diverse: bool = True,
                 fill_pool: int = 16) -> None:
        super().__init__(space, seed)
        self.name = "xgb" if loss == "reg" else "xgb_rank"
        # Any CostModel ranks the annealing's candidates; XGBoost unless one is given. It
        # trains from 5 measurements (the default and the first small batch): see early_batch.
        self.model: CostModel = model if model is not None else XGBCostModel(
            model_config or CostModelConfig(loss=loss, seed=seed, min_samples=5))
        # Why small early batches: with a handful of measurements each new one changes the
        # model most, and a batch of 8 proposed from the model of 9 points spent 8 trials on
        # one poor guess (docs/tuning.md, the curve); measuring costs a build (about a
        # second), retraining milliseconds. Later batches take the size asked for (a Ray
        # runner measures a batch side by side).
        self.early_batch = early_batch
        self.early_until = early_until
        self.diverse = diverse
        # Random candidates per config the space-filling start chooses from (1: uniform draws).
        self.fill_pool = fill_pool
        # A model trained on earlier runs (transfer.py): ranks candidates until ours has data.
        self.prior = prior if prior is not None and prior.trained else None
        self.epsilon = epsilon
        self.sa_steps = sa_steps
        self.sa_walkers = sa_walkers
        self._features: list[list[float]] = []

    def update(self, configs: list[Config], costs: list[float]) -> None:
        super().update(configs, costs)
        self._features.extend(self.space.features(c) for c in configs)
        self.model.fit(self._features, self.costs)

    def _score(self, configs: list[Config]) -> np.ndarray:
        if not self.model.trained and self.prior is not None:
            return self.prior.predict([self.space.transfer_features(c) for c in configs])
        return self.model.predict([self.space.features(c) for c in configs])

    def _anneal(self, wanted: int) -> list[Config]:
        """The ``wanted`` best unvisited configs the annealing walk met, by predicted score.
        ``wanted`` is zero when every slot of a batch went to exploration."""
        if wanted <= 0:
            return []
        order = sorted(range(len(self.costs)), key=lambda i: self.costs[i])
        starts = [self.configs[i] for i in order[: self.sa_walkers // 2]]
        while len(starts) < self.sa_walkers:
            starts.append(self.space.random(self.rng))
        walkers = starts
        scores = self._score(walkers)
        best: list[tuple[float, int, Config]] = []
        seen: set = set()
        counter = 0
        temperature = 1.0
        for step in range(self.sa_steps):
            proposals = [self.space.neighbour(w, self.rng) for w in walkers]
            new_scores = self._score(proposals)
            for i, (proposal, score) in enumerate(zip(proposals, new_scores)):
                key = _frozen(proposal)
                if key not in self.visited and key not in seen:
                    seen.add(key)
                    counter += 1
                    item = (float(score), counter, proposal)
                    if len(best) < wanted:
                        heapq.heappush(best, item)
                    elif item[0] > best[0][0]:
                        heapq.heapreplace(best, item)
                delta = float(score - scores[i])
                if delta >= 0 or self.rng.random() < math.exp(delta / max(temperature, 1e-3)):
                    walkers[i], scores[i] = proposal, score
            temperature = 1.0 - (step + 1) / self.sa_steps
        return [config for _score, _n, config in sorted(best, reverse=True)]

    def _spread(self, ranked: list[Config], wanted: int) -> list[Config]:
        """``wanted`` of ``ranked`` (best predicted first): first those that differ from every
        one taken in at least two knobs, then the best of the rest. Why: the annealing's top
        predictions are mostly one-knob variations of one point, and a batch of them measures
        one guess of a model trained on a few points several times over."""
        taken: list[Config] = []
        for config in ranked:
            if len(taken) == wanted:
                return taken
            if all(sum(config[k] != other[k] for k in config) >= 2 for other in taken):
                taken.append(config)
        return taken + [c for c in ranked if c not in taken][: wanted - len(taken)]

    def _space_filling(self, count: int, exclude: set) -> list[Config]:
        """``count`` unvisited valid configs spread over the space: greedily, from a pool of
        random ones, the config farthest from everything measured or taken (maximin).

        Why: the proposals made before the model has data (and the exploration slots after)
        are what the model learns the space from; uniform draws of a handful of configs
        often repeat a knob's value (4 draws of an 8-valued knob repeat one with p = 0.6), so
        the model never sees the other values' effect. The distance is the number of knobs
        whose value differs (no pull towards the corners of the space, where tile products
        are extreme), then how far apart their positions are as a tie-break."""
        if count <= 0:
            return []
        pool = self._random_unvisited(count * self.fill_pool, set(exclude))
        if len(pool) <= count:
            exclude.update(_frozen(config) for config in pool)
            return pool
        spans = {k.name: max(len(k.values) - 1, 1) for k in self.space.knobs}
        position = {k.name: {v: i / spans[k.name] for i, v in enumerate(k.values)}
                    for k in self.space.knobs}

        def distance(a: Config, b: Mapping[str, int]) -> float:
            apart = [abs(position[k][a[k]] - position[k].get(b.get(k), 0.0)) for k in position]
            return sum(d > 0 for d in apart) + sum(apart) / (len(apart) + 1)

        anchors: list[Mapping[str, int]] = list(self.configs)
        nearest = [min((distance(c, a) for a in anchors), default=math.inf) for c in pool]
        taken: list[Config] = []
        while len(taken) < count and pool:
            index = max(range(len(pool)), key=lambda i: nearest[i])
            chosen = pool.pop(index)
            nearest.pop(index)
            taken.append(chosen)
            nearest = [min(n, distance(c, chosen)) for n, c in zip(nearest, pool)]
        for config in taken:
            exclude.add(_frozen(config))
        return taken

    def next_batch(self, size: int) -> list[Config]:
        if len(self.costs) < self.early_until:
            size = min(size, self.early_batch)
        if not self.model.trained and self.prior is None:
            return self._space_filling(size, set())
        explore = sum(1 for _ in range(size) if self.rng.random() < self.epsilon)
        if self.diverse:
            batch = self._spread(self._anneal(4 * (size - explore)), size - explore)
        else:
            batch = self._anneal(size - explore)
        taken = {_frozen(c) for c in batch}
        batch += self._space_filling(size - len(batch), taken)
        return batch


def make_tuner(name: str, space: SearchSpace, seed: int = 0,
               prior: "TransferModel | None" = None) -> Tuner:
    """The tuner called ``name`` (one of :data:`TUNERS`) over ``space``; the XGBoost tuners
    warm-start from ``prior``, a cross-task model of earlier runs, if given."""
    if name == "xgb":
        return XGBTuner(space, seed, loss="reg", prior=prior)
    if name == "xgb_rank":
        return XGBTuner(space, seed, loss="rank", prior=prior)
    if name == "random":
        return RandomTuner(space, seed)
    if name == "grid":
        return GridTuner(space, seed)
    raise TunerNameError(f"unknown tuner {name!r}; choose one of {', '.join(TUNERS)}")
