"""The search itself on synthetic cost surfaces (no compiler, no timing): the XGBoost tuner
finds a surface's optimum in fewer trials than random search, its first proposals spread
over the space, and a comparison of tuners ends when a space runs out of valid configs."""

from __future__ import annotations

import math
import statistics
from types import SimpleNamespace
from typing import Mapping

import pytest

from tilecraft.schedule.space import Knob, SearchSpace, validate_config
from tilecraft.tuning import compare_tuners as compare_module
from tilecraft.tuning.tuners import RandomTuner, XGBTuner


class TileSurface(SearchSpace):
    """A tile-like space with a smooth optimum and an invalid region: throughput peaks where
    the register tile ``rows x cols`` fills ``registers`` accumulators, the step and the
    cache block have a preferred value, and a tile past the register file spills."""

    kind = "synthetic"

    def __init__(self, registers: int = 24, step: int = 4, block: int = 64) -> None:
        self.knobs = (
            Knob("rows", (1, 2, 3, 4, 6, 8, 12, 16), "register tile rows"),
            Knob("cols", (1, 2, 3, 4, 6, 8), "register tile vectors"),
            Knob("step", (1, 2, 4, 8, 16), "reduction step"),
            Knob("block", (0, 16, 32, 64, 128, 256), "cache block (0: none)"),
            Knob("order", (0, 1), "loop order"),
        )
        self.registers, self.step, self.block = registers, step, block

    def default(self) -> dict[str, int]:
        return {"rows": 1, "cols": 1, "step": 1, "block": 0, "order": 0}

    def validate(self, config: Mapping[str, object]) -> dict[str, int]:
        return validate_config(self.knobs, config, "tile surface")

    def is_valid(self, config: Mapping[str, int]) -> bool:
        return not (config["block"] and config["step"] > config["block"])

    def script(self, config: Mapping[str, int], tag: int = 0) -> str:
        return repr(sorted(config.items()))

    def throughput(self, config: Mapping[str, int]) -> float:
        tile = config["rows"] * config["cols"]
        registers = 0.2 if tile > self.registers else math.exp(
            -(math.log2(tile) - math.log2(self.registers)) ** 2 / 2)
        step = math.exp(-0.3 * (math.log2(config["step"]) - math.log2(self.step)) ** 2)
        block = 1.0 if config["block"] == self.block else 0.75
        return registers * step * block * (1.05 if config["order"] else 1.0)

    def cost(self, config: Mapping[str, int]) -> float:
        return 1.0 / self.throughput(config)


def trials_to_optimum(tuner, space: TileSurface, budget: int) -> int:
    """Trials (the default first) until ``tuner`` has measured the surface's best config;
    ``budget + 1`` if it never does."""
    optimum = max(space.throughput(space.point(i)) for i in range(space.size)
                  if space.is_valid(space.point(i)))
    tuner.update([space.default()], [space.cost(space.default())])
    while len(tuner.costs) < budget:
        batch = tuner.next_batch(min(8, budget - len(tuner.costs)))
        if not batch:
            break
        tuner.update(batch, [space.cost(c) for c in batch])
        for trial, cost in enumerate(tuner.costs, 1):
            if 1.0 / cost >= optimum:
                return trial
    return budget + 1


def test_xgb_finds_the_optimum_in_fewer_trials_than_random_search():
    """Over seeded runs on three surfaces (2,000 points, 1,600 valid) the model-guided search
    needs a fraction of random search's trials (random's expectation: 800)."""
    xgb, rnd = [], []
    for registers, step, block in ((24, 4, 64), (12, 2, 32), (32, 8, 128)):
        for seed in range(2):
            space = TileSurface(registers, step, block)
            xgb.append(trials_to_optimum(XGBTuner(space, seed), space, 64))
            rnd.append(trials_to_optimum(RandomTuner(space, seed), space, 64))
    assert statistics.median(xgb) <= 48 and statistics.median(xgb) < statistics.median(rnd), (xgb, rnd)


def test_the_first_proposals_fill_the_space():
    """Before the model has data, a batch is spread: every pair of its configs differs in at
    least four of the five knobs, where uniform draws repeat values (the default counts as
    measured, so the batch also keeps away from it)."""
    space = TileSurface()
    tuner = XGBTuner(space, seed=0)
    tuner.update([space.default()], [space.cost(space.default())])
    batch = tuner.next_batch(4)
    assert len(batch) == 4 and all(space.is_valid(c) for c in batch)
    apart = [sum(a[k] != b[k] for k in a) for i, a in enumerate(batch)
             for b in batch[:i] + [space.default()]]
    assert min(apart) >= 4, apart
    again = XGBTuner(space, seed=0)
    again.update([space.default()], [space.cost(space.default())])
    assert again.next_batch(4) == batch  # seeded: the same start every run


class TinySpace(TileSurface):
    """Four valid configs (the default one of them) among 2,000 points: random draws run out long before has_next()."""

    def is_valid(self, config: Mapping[str, int]) -> bool:
        return config["rows"] == 1 and config["step"] == 1 and config["block"] == 0 and config["cols"] <= 2


class FakeSession:
    """Stands in for MeasureSession: every config costs what the surface says."""

    def __init__(self, runner, target, threads) -> None:
        pass

    def measure_default(self, states, databases) -> None:
        for state in states:
            state.reference, state.default_cost = "reference", state.space.cost(state.space.default())
            state.tuner.update([state.space.default()], [state.default_cost])

    def measure(self, state, config, name, databases):
        state.trials += 1
        state.history.append(1.0)
        return SimpleNamespace(ok=True, costs=[state.space.cost(config)])


class NullRunner:
    def __init__(self, options) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


@pytest.mark.timeout(60)
def test_comparing_tuners_ends_when_the_space_runs_out(monkeypatch, tmp_path):
    """A space with fewer valid configs than the trials asked (a GEMM of odd extents at one
    thread has four) once made compare_tuners loop without end: each tuner's empty batch
    now ends its search."""
    space = TinySpace()
    monkeypatch.setattr(compare_module, "LocalRunner", NullRunner)
    monkeypatch.setattr(compare_module, "MeasureSession", FakeSession)
    monkeypatch.setattr(compare_module, "space_generator_for",
                        lambda target, name: SimpleNamespace(generate=lambda task: space))
    task = SimpleNamespace(kind="synthetic", element_type="f32", moved_bytes=0, flops=1, name="tiny")
    results = compare_module.compare_tuners(
        task, {"random": tmp_path / "r.jsonl", "xgb": tmp_path / "x.jsonl"}, trials=16,
        progress=False, validate_top=0)
    assert {name: r.trials for name, r in results.items()} == {"random": 3, "xgb": 3}
