"""The tuning roles' interfaces (tuning/roles.py) are real: the existing implementations sit
behind them, and toy implementations of a runner, a database, a cost model and a search
strategy run through the driver (``search_tasks``) unchanged."""

from __future__ import annotations

import json
import math
import random
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from tilecraft.targets.cuda.space import GpuScheduleSpace
from tilecraft.schedule.records import Record, canonical_target
from tilecraft.schedule.space import ScheduleSpace, SearchSpace
from tilecraft.tuning import (
    GradientTaskScheduler,
    JsonLinesDatabase,
    TuneOptions,
    extract_tasks,
    space_generator_for,
)
from tilecraft.tuning.cost_model import XGBCostModel
from tilecraft.tuning.measure import LocalRunner, MeasureInput, MeasureResult
from tilecraft.tuning.measure_ray import RayRunner
from tilecraft.tuning.measure_remote import RemoteRunner
from tilecraft.tuning.roles import CostModel, Database, Runner, SearchStrategy, SpaceGenerator, TaskScheduler
from tilecraft.tuning.space_generators import (HandSpaceGenerator,
                                               TemplateSpaceGenerator)
from tilecraft.tuning.templates import TemplateSpace
from tilecraft.tuning.tune import search_tasks
from tilecraft.tuning.tuners import GridTuner, RandomTuner, Tuner, XGBTuner

TARGET = "llvm"


def test_every_implementation_is_behind_its_role():
    assert all(issubclass(c, Runner) for c in (LocalRunner, RemoteRunner, RayRunner))
    assert issubclass(XGBCostModel, CostModel)
    assert all(issubclass(c, SearchStrategy) for c in (Tuner, RandomTuner, GridTuner, XGBTuner))
    assert issubclass(JsonLinesDatabase, Database)
    assert issubclass(GradientTaskScheduler, TaskScheduler)
    assert all(issubclass(c, SearchSpace) for c in (ScheduleSpace, GpuScheduleSpace, TemplateSpace))
    assert all(issubclass(c, SpaceGenerator)
               for c in (HandSpaceGenerator, TemplateSpaceGenerator))
    with pytest.raises(TypeError):
        Runner()  # an interface: measure, scratch and close are abstract


def test_the_target_picks_the_space_generator_in_one_place(matmul_64):
    (task,) = extract_tasks(matmul_64, TARGET)
    cpu = space_generator_for(TARGET)
    assert isinstance(cpu, HandSpaceGenerator)
    cpu_space = cpu.generate(task)
    assert cpu_space.kind == "matmul" and cpu_space.is_valid(cpu_space.default())
    # The CUDA plugin's hand space, asked through the same generator (TargetPlugin.schedule_space),
    # whatever space was asked for: generated spaces plan CPU loop nests.
    gpu = space_generator_for("cuda -arch=sm_80", "generated")
    assert isinstance(gpu, HandSpaceGenerator)
    gpu_space = gpu.generate(task)
    assert gpu_space.kind == "contraction"
    assert [k.name for k in gpu_space.knobs][:2] == ["block_m", "block_n"]
    # The shared walk of every space: mixed radix, random and neighbouring valid points.
    rng = random.Random(0)
    for space in (cpu_space, gpu_space):
        point = space.random(rng)
        assert space.is_valid(point) and space.point(space.index(point)) == point
        assert space.is_valid(space.neighbour(point, rng))
        assert len(space.features(point)) == len(space.feature_names())


class ToyRunner(Runner):
    """Times nothing: a config's cost is a function of its knob values, and a config whose
    first knob has the first of its values other than the default's fails to build."""

    def __init__(self, tmp: Path, space: SearchSpace) -> None:
        self.tmp, self.space = tmp, space
        self.jobs: list[MeasureInput] = []
        self.batches: list[int] = []
        self.closed = False
        first, default = space.knobs[0], space.default()[space.knobs[0].name]
        self.failing = next((v for v in first.values if v != default), None)

    @property
    def scratch(self) -> Path:
        return self.tmp

    def cost(self, config: dict[str, int]) -> float:
        return 1e-3 * (1 + sum(abs(math.log2(1 + v) - 2) for v in config.values()))

    def measure(self, job: MeasureInput) -> MeasureResult:
        self.jobs.append(job)
        config = job.config if job.config is not None else self.space.default()
        if job.save_output is not None:
            np.save(job.save_output, np.zeros(1))
        if self.failing is not None and config[self.space.knobs[0].name] == self.failing:
            return MeasureResult("build_error", error="toy: this knob value never builds")
        return MeasureResult("ok", costs=(self.cost(config),) * 3)

    def measure_batch(self, jobs, on_result=None):
        self.batches.append(len(jobs))
        return super().measure_batch(jobs, on_result)

    def close(self) -> None:
        self.closed = True


class ListDatabase(Database):
    """Keeps records in memory."""

    def __init__(self) -> None:
        self.committed: list[Record] = []

    def commit(self, record: Record) -> None:
        self.committed.append(record)

    def records(self, target=None) -> list[Record]:
        return [r for r in self.committed if target is None or r.target == canonical_target(target)]


class FirstKnobModel(CostModel):
    """Believes the smallest first knob is fastest (and says so from the start)."""

    def __init__(self) -> None:
        self.fits = 0

    @property
    def trained(self) -> bool:
        return True

    def fit(self, features, costs) -> None:
        self.fits += 1

    def predict(self, features) -> np.ndarray:
        return -np.asarray([row[0] for row in features], dtype=float)


def test_a_toy_runner_and_database_run_through_the_driver(tmp_path, matmul_64):
    (task,) = extract_tasks(matmul_64, TARGET)
    generator = space_generator_for(TARGET)
    space = generator.generate(task)
    search = TuneOptions(trials=12, batch_size=4, tuner="random", validate_top=2, progress=False)
    runner, database = ToyRunner(tmp_path, space), ListDatabase()
    (state,) = search_tasks([task], search, target_key=canonical_target(TARGET),
                            space_generator=generator, runner=runner, database=database)
    searched = [r for r in database.committed if r.tuner in ("default", "random")]
    assert len(searched) == 12 == state.trials
    assert searched[0].tuner == "default" and searched[0].config == space.default()
    assert runner.batches and all(size <= 4 for size in runner.batches)
    # Failures come back as records, not exceptions, and the best is the cheapest that ran.
    failed = [r for r in searched if not r.ok]
    assert all(r.status == "build_error" and "toy" in r.error for r in failed)
    ran = [r for r in searched if r.ok]
    assert state.tuner.best_cost == pytest.approx(min(runner.cost(r.config) for r in ran))
    # Validation measured the finalists and the default again, side by side.
    final = [r for r in database.committed if r.tuner == "final"]
    assert space.default() in [r.config for r in final] and len(final) >= 2
    assert database.best(TARGET)[task.key].tuner == "final"

    # Resume: a second run given the first one's records measures none of those configs again.
    again, database2 = ToyRunner(tmp_path, space), ListDatabase()
    (resumed,) = search_tasks([task], TuneOptions(trials=16, batch_size=4, tuner="random",
                                                  validate_top=0, progress=False),
                              target_key=canonical_target(TARGET), space_generator=generator,
                              runner=again, database=database2, prior=database.committed)
    before = {json.dumps(r.config, sort_keys=True) for r in searched[1:]}
    measured = [json.dumps(j.config, sort_keys=True) for j in again.jobs if j.config is not None]
    assert measured and not before & set(measured)
    # Validation records are re-measurements of configs already counted: no trials.
    prior = sum(1 for r in database.committed if r.tuner not in ("default", "final"))
    assert resumed.trials == 1 + prior + 15  # its default, the prior search records, the budget left


def test_a_cost_model_behind_the_model_guided_strategy(matmul_64):
    (task,) = extract_tasks(matmul_64, TARGET)
    space = space_generator_for(TARGET).generate(task)
    model = FirstKnobModel()
    strategy = XGBTuner(space, seed=0, epsilon=0.0, model=model)
    strategy.update([space.default()], [1e-3])
    batch = strategy.next_batch(4)
    assert model.fits == 1 and len(batch) == 4
    smallest = min(k for k in space.knobs[0].values)
    assert min(c[space.knobs[0].name] for c in batch) == smallest  # the model's choice led


class CountingStrategy(SearchStrategy):
    """Proposes the space's points in index order, valid ones only."""

    def __init__(self, space: SearchSpace) -> None:
        self.space, self.next_index = space, 0
        self.configs, self.costs = [], []
        self.best_cost, self.best_config = math.inf, None

    def has_next(self) -> bool:
        return self.next_index < self.space.size

    def next_batch(self, size: int):
        batch = []
        while len(batch) < size and self.has_next():
            config = self.space.point(self.next_index)
            self.next_index += 1
            if self.space.is_valid(config) and config not in self.configs:
                batch.append(config)
        return batch

    def update(self, configs, costs) -> None:
        for config, cost in zip(configs, costs):
            self.configs.append(dict(config))
            self.costs.append(cost)
            if cost < self.best_cost:
                self.best_cost, self.best_config = cost, dict(config)


def test_a_toy_search_strategy_is_driven_by_the_task_scheduler(tmp_path, matmul_64, monkeypatch):
    import tilecraft.tuning.session as session

    (task,) = extract_tasks(matmul_64, TARGET)
    generator = space_generator_for(TARGET)
    monkeypatch.setattr(session, "make_tuner", lambda name, space, seed, prior: CountingStrategy(space))
    database = ListDatabase()
    (state,) = search_tasks([task], TuneOptions(trials=9, batch_size=4, validate_top=0, progress=False),
                            target_key=canonical_target(TARGET), space_generator=generator,
                            runner=ToyRunner(tmp_path, generator.generate(task)), database=database)
    assert isinstance(state.tuner, CountingStrategy) and state.trials == 9
    indexes = [state.space.index(r.config) for r in database.committed[1:]]
    assert indexes == sorted(indexes)


def test_the_records_database_survives_concurrent_writers(tmp_path):
    """Two writers append long records (scripts far above a pipe's or a buffer's atomic size)
    to one file at once: every line is whole, none lost."""
    path = tmp_path / "shared.jsonl"
    script = "x" * 200_000

    def write(name: str) -> None:
        with JsonLinesDatabase(path) as database:
            for trial in range(40):
                database.commit(Record(task={"key": "k", "name": "t"}, config={"w": trial},
                                       status="ok", costs=[1e-3], gflops=1.0, target=TARGET,
                                       tuner=name, trial=trial, script=script))

    threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b", "c")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a corrupt line would warn
        records = JsonLinesDatabase(path).records(TARGET)
    assert len(records) == 120
    assert {(r.tuner, r.config["w"]) for r in records} == {(n, t) for n in "abc" for t in range(40)}
    assert JsonLinesDatabase(tmp_path / "absent.jsonl").records() == []
    assert not (tmp_path / "absent.jsonl").exists()  # reading creates nothing
