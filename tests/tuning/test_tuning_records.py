"""Records: appended durably, corrupt and foreign lines skipped with one warning, best of
successful measurements only; the task scheduler's split; the tuners' bookkeeping."""

import math
import random
import warnings

import pytest
from tilecraft.errors import TunerNameError, TuningError
from tilecraft.schedule.records import Record, RecordWriter, canonical_target
from tilecraft.tuning import (
    TaskScheduler,
    TuneOptions,
    best_records,
    extract_tasks,
    load_records,
    make_tuner,
    space_for,
)

TARGET = "llvm -mcpu=znver4"


def _record(key="k1", status="ok", costs=(1.0,), target=TARGET, version=None, config=None):
    extra = {"tilecraft": version} if version else {}
    return Record(task={"key": key, "name": key}, config=config or {"a": 1}, status=status,
                  costs=list(costs), gflops=1.0, target=canonical_target(target), **extra)


def test_records_round_trip_and_best_skips_failures(tmp_path):
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as writer:
        writer.write(_record(costs=(2.0,), config={"a": 1}))
        writer.write(_record(status="timeout", costs=(), config={"a": 2}))
        writer.write(_record(status="wrong", costs=(0.1,), config={"a": 3}))
        writer.write(_record(costs=(1.0, 3.0, 1.5), config={"a": 4}))
        # Each line is on disk as soon as it is written (a killed tuning keeps it).
        assert len(path.read_text().splitlines()) == 4
    records = load_records(path, target=TARGET)
    assert [r.status for r in records] == ["ok", "timeout", "wrong", "ok"]
    assert best_records(records)["k1"].config == {"a": 4}
    assert math.isinf(records[1].cost)


def test_validated_records_decide():
    fast_once = _record(costs=(0.5,), config={"a": 1})
    validated = [Record(**{**_record(costs=(1.0, 1.1, 0.9), config={"a": 2}).__dict__, "tuner": "final"}),
                 Record(**{**_record(costs=(2.0, 2.0, 2.0), config={"a": 1}).__dict__, "tuner": "final"})]
    assert best_records([fast_once, *validated])["k1"].config == {"a": 2}
    assert best_records([fast_once])["k1"].config == {"a": 1}


def test_in_model_records_decide_over_validated_ones():
    """A config that won alone (validated) but lost inside the model is not applied; tasks
    without in-model records keep their validated best."""
    validated = [Record(**{**_record(costs=(1.0,), config={"a": 2}).__dict__, "tuner": "final"}),
                 Record(**{**_record(costs=(2.0,), config={"a": 1}).__dict__, "tuner": "final"})]
    in_model = [Record(**{**_record(costs=(3.0,), config={"a": 2}).__dict__, "tuner": "in_model"}),
                Record(**{**_record(costs=(2.5,), config={"a": 1}).__dict__, "tuner": "in_model"})]
    other_task = Record(**{**_record(key="k2", costs=(1.0,), config={"a": 2}).__dict__, "tuner": "final"})
    best = best_records([*validated, *in_model, other_task])
    assert best["k1"].config == {"a": 1} and best["k1"].tuner == "in_model"
    assert best["k2"].config == {"a": 2}


def test_corrupt_and_foreign_lines_are_skipped_with_one_warning(tmp_path):
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as writer:
        writer.write(_record(config={"a": 1}))
        writer.write(_record(target="llvm -mcpu=haswell", config={"a": 2}))
        writer.write(_record(version="0.0.1", config={"a": 3}))
    with path.open("a") as out:
        out.write('{"version": 1, "task": {"key": "k1"}, "config": {"a": 5}, "stat\n')
        out.write("not json at all\n")
        out.write('{"version": 99}\n')
        out.write('{"version": 1, "task": {"key": "k1"}, "config": {"a": "x"}, "status": "ok",'
                  ' "costs": [1], "gflops": 1, "target": "llvm -mcpu=znver4", "tilecraft": "0.1.0"}\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = load_records(path, target=TARGET)
    assert [r.config for r in records] == [{"a": 1}]
    assert len(caught) == 1
    assert "4 corrupt line(s) and 2 record(s) of another target" in str(caught[0].message)


def test_missing_file_has_no_records(tmp_path):
    assert load_records(tmp_path / "nothing.jsonl") == []


class _FakeTask:
    def __init__(self, name: str, seconds: float, count: int = 1) -> None:
        self.name, self.count, self.executions = name, count, count
        self.default_cost = self.best_cost = seconds
        self.trials, self.stopped = 0, False
        self.task = self
        self.peak_gflops = self.bound_gflops = None  # no bound known: weighed by time alone

    def headroom(self) -> float:
        return 1.0


class _SimulatedScheduler(TaskScheduler):
    """Trials improve a task's best time by 2 % each, without measuring anything."""

    def _give(self, state, trials):
        state.trials += trials
        state.best_cost *= 0.98 ** trials
        self.weighted_history[id(state)].append(state.best_cost * state.count)
        return trials


def test_task_scheduler_gives_every_task_its_minimum_then_follows_the_weights():
    heavy, light, idle = _FakeTask("heavy", 9e-3), _FakeTask("light", 1e-3), _FakeTask("idle", 1e-5, count=2)
    search = TuneOptions(trials=100, trials_per_task=4, batch_size=4)
    scheduler = _SimulatedScheduler([light, heavy, idle], search, run=None, deadline=None)
    assert scheduler.plan(60).splitlines()[1].split()[0] == "heavy"  # heaviest first
    scheduler.run(60)
    assert all(t.trials >= 4 for t in (heavy, light, idle))
    assert heavy.trials + light.trials + idle.trials == 60
    assert heavy.trials > light.trials > idle.trials
    assert "heavy" in scheduler.allocation().splitlines()[1]


def test_plan_prints_the_trials_each_task_is_expected_to_get():
    heavy, light = _FakeTask("heavy", 3e-3), _FakeTask("light", 1e-3)
    scheduler = _SimulatedScheduler([light, heavy], TuneOptions(trials_per_task=2, batch_size=4),
                                    run=None, deadline=None)
    planned = dict((s.name, n) for s, n in scheduler.planned(41))
    # The minimum, then the remaining 37 by weight (3:1: 27.75 and 9.25), largest remainder first.
    assert planned == {"heavy": 2 + 28, "light": 2 + 9}
    lines = scheduler.plan(41).splitlines()
    assert lines[1].split()[0] == "heavy" and lines[1].endswith("trials ~30")
    assert "then validation: up to 5 configs x 5 rounds per task, not counted in trials" in lines[-1]
    # A budget below the minima: the heaviest tasks get theirs, the rest nothing.
    assert [n for _, n in scheduler.planned(3)] == [2, 1]


def test_time_budget_must_be_a_number():
    for bad in ("30m", True, 0, -1.0, float("nan")):
        with pytest.raises(TuningError, match="time_budget must be positive seconds"):
            TuneOptions(time_budget=bad)
    assert TuneOptions(time_budget=90).time_budget == 90


def test_task_scheduler_stops_at_the_time_budget_and_without_live_tasks():
    task = _FakeTask("t", 1e-3)
    expired = _SimulatedScheduler([task], TuneOptions(trials_per_task=2), run=None, deadline=0.0)
    expired.run(10)
    assert task.trials == 0
    task.stopped = True
    _SimulatedScheduler([task], TuneOptions(), run=None, deadline=None).run(10)
    assert task.trials == 0


@pytest.fixture
def matmul_space(matmul_64):
    return space_for(extract_tasks(matmul_64, TARGET)[0], TARGET)


def test_unknown_tuner_is_a_typed_error(matmul_space):
    with pytest.raises(TunerNameError, match="xgb, xgb_rank, random, grid"):
        make_tuner("annealing", matmul_space)


@pytest.mark.parametrize("name", ["random", "grid", "xgb", "xgb_rank"])
def test_tuners_propose_new_valid_configs_only(name, matmul_space):
    tuner = make_tuner(name, matmul_space, seed=0)
    seen = set()

    def cost(config):  # a synthetic landscape: larger register tiles are faster
        return 1.0 / (config["reg_m"] * config["reg_n"]) + 0.01 * config["step_k"]

    for _ in range(5):
        batch = tuner.next_batch(8)
        assert batch
        for config in batch:
            key = tuple(sorted(config.items()))
            assert key not in seen and matmul_space.is_valid(config)
            seen.add(key)
        tuner.update(batch, [cost(c) for c in batch])
    assert tuner.best_cost == min(cost(c) for c in tuner.configs)


def test_xgb_tuner_follows_its_model(matmul_space):
    """After training on a landscape, the model-guided batch beats a random batch."""
    def cost(config):
        return (1.0 / (config["reg_m"] * config["reg_n"])) * (1 + config["pack_b"]) + 0.001 * config["step_k"]

    tuner = make_tuner("xgb", matmul_space, seed=0)
    tuner.epsilon = 0.0
    rng = random.Random(3)
    warm = [matmul_space.random(rng) for _ in range(40)]
    tuner.update(warm, [cost(c) for c in warm])
    guided = tuner.next_batch(8)
    randoms = [matmul_space.random(random.Random(i)) for i in range(8)]
    assert sum(cost(c) for c in guided) < sum(cost(c) for c in randoms)


def test_xgb_tuner_retrains_after_small_batches_while_its_data_is_scarce(matmul_space):
    """Until it has ``early_until`` measurements the XGB tuner proposes at most
    ``early_batch`` configs per batch (its model retrains after each), then the size asked;
    its model trains from five measurements (the default and the first small batch)."""
    def cost(config):
        return 1.0 / (config["reg_m"] * config["reg_n"]) + 0.01 * config["step_k"]

    tuner = make_tuner("xgb", matmul_space, seed=0)
    tuner.update([matmul_space.default()], [cost(matmul_space.default())])
    sizes = []
    while len(tuner.costs) < 30:
        batch = tuner.next_batch(8)
        sizes.append(len(batch))
        tuner.update(batch, [cost(c) for c in batch])
        if len(tuner.costs) == 5:
            assert tuner.model.trained
    assert sizes[:6] == [4] * 6 and sizes[6] == 8  # 1 + 6 x 4 = 25 >= early_until (24)


def test_a_guided_batch_spreads_over_the_space(matmul_space):
    """A model-guided batch takes configs at least two knobs apart before near-duplicates of
    one guess, the best predicted first."""
    tuner = make_tuner("xgb", matmul_space, seed=0)
    rng = random.Random(1)
    ranked = [matmul_space.random(rng) for _ in range(40)]
    step_k = next(k for k in matmul_space.knobs if k.name == "step_k")
    near = {**ranked[0], "step_k": next(v for v in step_k.values if v != ranked[0]["step_k"])}
    ranked.insert(1, near)  # one knob from the best: taken only after the far ones
    spread = tuner._spread(ranked, 4)
    assert spread[0] == ranked[0] and near not in spread and len(spread) == 4
    assert all(sum(a[k] != b[k] for k in a) >= 2 for i, a in enumerate(spread) for b in spread[:i])
    assert tuner._spread([ranked[0], near], 2) == [ranked[0], near]  # filled when none is far
