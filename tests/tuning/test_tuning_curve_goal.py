"""Issue #44's tuner goal on seeded synthetic surfaces (no compiler, no timing): the XGBoost
tuner reaches random search's best after N = 48 trials within N/2 trials, measured with 3 %
noise as on a shared machine, on most of ten seeded runs; random search in its place does
not. The surfaces are tests/tuning/test_tuning_search.py's tile surfaces, with the optimum's
register tile, step and cache block moved between runs."""

from __future__ import annotations

import random
from typing import Mapping

from tilecraft.tuning.tuners import RandomTuner, Tuner, XGBTuner

from test_tuning_search import TileSurface

TRIALS = 48
# (registers, step, block) of each surface's optimum.
SURFACES = ((24, 4, 64), (12, 2, 32), (32, 8, 128), (16, 1, 16), (8, 16, 256))


class NoisySurface(TileSurface):
    """A tile surface whose every measurement is off by seeded Gaussian noise of 3 %."""

    def __init__(self, registers: int, step: int, block: int, noise_seed: int) -> None:
        super().__init__(registers, step, block)
        self.noise = random.Random(noise_seed)

    def cost(self, config: Mapping[str, int]) -> float:
        return 1.0 / (self.throughput(config) * (1.0 + 0.03 * self.noise.gauss(0.0, 1.0)))


def best_so_far(tuner: Tuner, space: NoisySurface) -> list[float]:
    """Best measured throughput after each trial (the default first), batches of 8."""
    tuner.update([space.default()], [space.cost(space.default())])
    while len(tuner.costs) < TRIALS:
        batch = tuner.next_batch(min(8, TRIALS - len(tuner.costs)))
        if not batch:
            break
        tuner.update(batch, [space.cost(c) for c in batch])
    curve, best = [], 0.0
    for cost in tuner.costs:
        best = max(best, 1.0 / cost)
        curve.append(best)
    return curve


def reached_within_half(challenger: type, seed: int, surface: tuple[int, int, int]) -> bool:
    """Whether ``challenger`` reached random search's best of N trials within N/2 trials
    (both measured on their own noise, as two tuners in one process are)."""
    level = best_so_far(RandomTuner(space := NoisySurface(*surface, seed), seed), space)[-1]
    other = NoisySurface(*surface, seed + 10)
    curve = best_so_far(challenger(other, seed + 50 if challenger is RandomTuner else seed), other)
    return any(value >= level for value in curve[: TRIALS // 2])


def hits(challenger: type) -> int:
    return sum(reached_within_half(challenger, seed, surface) for surface in SURFACES for seed in range(2))


def test_xgb_reaches_random_searchs_best_in_half_the_trials():
    """8 of 10 with the search of round 26 (random search in its place: 3), so a search no
    better than random's fails."""
    assert hits(XGBTuner) >= 7


def test_random_search_in_its_place_does_not():
    """The control that shows the goal's test can fail: a second random search reaches the
    first's best within N/2 in about a third of the runs (24 of 72 draws)."""
    assert hits(RandomTuner) <= 5
