"""The cross-task cost model (tuning/transfer.py): rows of task-independent features saved beside
the records, reloaded to warm-start the XGBoost tuners of the next run or another model; and the
HTML report with the end-to-end curve."""

from __future__ import annotations

import random

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import TuningError
from tilecraft.schedule.records import load_records
from tilecraft.tuning import extract_tasks, space_for
from tilecraft.tuning.report import end_to_end_curve, plot_report, task_rows
from tilecraft.tuning.transfer import TransferModel, beside
from tilecraft.tuning.tuners import XGBTuner

TARGET = "llvm"


def synthetic_prior(space, rows: int = 64, seed: int = 0) -> TransferModel:
    """A model that learned 'bigger register tiles are faster' from ``rows`` configs."""
    rng = random.Random(seed)
    configs = [space.random(rng) for _ in range(rows)]
    features = [space.transfer_features(c) for c in configs]
    register = space.transfer_feature_names().index("log_register_tile")
    costs = [1.0 / (1.0 + f[register]) for f in features]
    model = TransferModel(space.transfer_feature_names())
    model.add_task(features, costs)
    model.fit()
    return model


def test_transfer_features_have_the_same_columns_in_every_space(matmul_64):
    (task,) = extract_tasks(matmul_64, TARGET)
    space = space_for(task, TARGET)
    row = space.transfer_features(space.default())
    assert len(row) == len(space.transfer_feature_names())
    assert space.transfer_feature_names()[:6] == [f"kind.{k}" for k in space.TRANSFER_KINDS]
    assert row[space.TRANSFER_KINDS.index("matmul")] == 1.0


def test_saved_model_predicts_the_same_after_loading(tmp_path, matmul_64):
    (task,) = extract_tasks(matmul_64, TARGET)
    space = space_for(task, TARGET)
    model = synthetic_prior(space)
    path = tmp_path / "m.costmodel.npz"
    model.save(path)
    again = TransferModel.load(path)
    assert again.trained and len(again.rows) == 64 and again.feature_names == model.feature_names
    probe = [space.transfer_features(space.random(random.Random(7))) for _ in range(5)]
    np.testing.assert_allclose(again.predict(probe), model.predict(probe), rtol=1e-6)


@pytest.mark.parametrize("content", [b"not an npz", b""])
def test_a_file_that_is_no_model_is_a_tuning_error(tmp_path, content):
    path = tmp_path / "bad.costmodel.npz"
    path.write_bytes(content)
    with pytest.raises(TuningError, match="not a tilecraft cost model"):
        TransferModel.load(path)


def test_mismatched_rows_are_a_tuning_error(tmp_path):
    path = tmp_path / "bad.costmodel.npz"
    np.savez(path, rows=np.zeros((3, 2), np.float32), labels=np.zeros(4, np.float32),
             feature_names=np.asarray(["a", "b"]), booster=np.zeros(0, np.uint8))
    with pytest.raises(TuningError, match="do not match 4 labels"):
        TransferModel.load(path)


def test_a_warm_tuner_proposes_what_the_prior_ranks_high(matmul_64):
    """Before its own model has data, an XGB tuner with a prior anneals on the prior's
    scores instead of proposing at random."""
    (task,) = extract_tasks(matmul_64, TARGET)
    space = space_for(task, TARGET)
    prior = synthetic_prior(space)
    warm = XGBTuner(space, seed=1, prior=prior, epsilon=0.0)
    cold = XGBTuner(space, seed=1, epsilon=0.0)
    score = lambda configs: float(np.mean(prior.predict([space.transfer_features(c) for c in configs])))
    assert score(warm.next_batch(8)) > score(cold.next_batch(8))


def test_a_batch_that_is_all_exploration_is_random_unvisited_configs(matmul_64):
    """With ``epsilon`` 1 every slot explores and the annealing is asked for nothing: the
    batch is still full and unvisited (a warm tuner once indexed an empty heap here)."""
    (task,) = extract_tasks(matmul_64, TARGET)
    space = space_for(task, TARGET)
    for diverse in (True, False):
        tuner = XGBTuner(space, seed=3, prior=synthetic_prior(space), epsilon=1.0)
        tuner.diverse = diverse
        batch = tuner.next_batch(4)
        assert len(batch) == 4 and len({tuple(sorted(c.items())) for c in batch}) == 4


def test_tune_warm_starts_from_a_model_and_saves_its_own(tmp_path, capsys, matmul_64):
    (task,) = extract_tasks(matmul_64, TARGET)
    prior_path = tmp_path / "other_model.costmodel.npz"
    synthetic_prior(space_for(task, TARGET)).save(prior_path)
    records = tmp_path / "run.jsonl"
    tilecraft.tune(matmul_64, TARGET, trials=4, tuning_records=records, tuner="xgb", timeout=60,
                   batch_size=2, validate_top=0, end_to_end=False, cost_model=prior_path,
                   report=tmp_path / "report.html")
    err = capsys.readouterr().err
    assert f"warm start: cost model {prior_path} (64 measurements" in err
    saved = TransferModel.load(beside(records))
    assert len(saved.rows) == 64 + 4 and saved.trained  # the prior's rows and this run's
    page = (tmp_path / "report.html").read_text()
    assert "<table>" in page and "data:image/png;base64," in page and task.name in page
    # The next run over the same records finds the saved model by itself.
    tilecraft.tune(matmul_64, TARGET, trials=5, tuning_records=records, prior_records=records,
                   tuner="xgb", timeout=60, batch_size=2, validate_top=0, end_to_end=False)
    assert f"warm start: cost model {beside(records)}" in capsys.readouterr().err
    with pytest.raises(TuningError, match="does not exist"):
        tilecraft.tune(matmul_64, TARGET, trials=2, tuning_records=records, cost_model=tmp_path / "none.npz",
                       end_to_end=False)


def test_end_to_end_curve_and_table_from_records(tmp_path, matmul_64):
    records = tmp_path / "r.jsonl"
    tilecraft.tune(matmul_64, TARGET, trials=4, tuning_records=records, tuner="random", timeout=60,
                   batch_size=2, validate_top=0, end_to_end=False, transfer=False)
    assert not beside(records).exists()  # transfer=False saves nothing
    lines = load_records(records, target=TARGET)
    curve = end_to_end_curve(lines)
    assert len(curve) == 4 and curve[0] == pytest.approx(lines[0].cost)  # one task, count 1
    assert all(b <= a for a, b in zip(curve, curve[1:]))  # the best only improves
    (row,) = task_rows(lines)
    assert row.trials == 4 and row.default_ms == pytest.approx(lines[0].cost * 1e3)
    assert row.speedup >= 1.0
    plot_report(lines, tmp_path / "r.png")
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_report_rows_compare_validated_times_with_each_other():
    """A validated task's row takes the default and the best from the side-by-side
    re-measurements, not the search's lucky single measurement against the default's first."""
    from tilecraft.schedule.records import Record

    def record(tuner, config, cost, key="k"):
        return Record(task={"key": key, "name": key}, config=config, status="ok", costs=[cost],
                      gflops=1.0, target=TARGET, tuner=tuner)

    rows = task_rows([
        record("default", {"a": 1}, 2.0), record("xgb", {"a": 2}, 1.0), record("xgb", {"a": 3}, 1.8),
        record("final", {"a": 2}, 1.6), record("final", {"a": 3}, 1.4), record("final", {"a": 1}, 1.5),
        record("default", {"a": 1}, 3.0, key="alone"),
    ])
    validated, alone = rows
    assert (validated.default_ms, validated.best_ms, validated.trials) == (1500.0, 1400.0, 3)
    assert validated.speedup == pytest.approx(1.5 / 1.4)
    # One round each is no evidence: the table claims no speedup.
    assert validated.speedup_cell() == "no measurable change"
    assert (alone.default_ms, alone.best_ms, alone.speedup) == (3000.0, 3000.0, 1.0)
    assert alone.speedup_cell() == "default"


def test_report_rows_claim_a_validated_speedup_with_evidence():
    from tilecraft.schedule.records import Record

    def final(config, costs):
        return Record(task={"key": "k", "name": "k"}, config=config, status="ok", costs=costs,
                      gflops=1.0, target=TARGET, tuner="final")

    default = Record(task={"key": "k", "name": "k"}, config={"a": 1}, status="ok", costs=[2.0],
                     gflops=1.0, target=TARGET, tuner="default")
    rounds_default, rounds_best = [2.0, 2.1, 1.9, 2.0, 2.05], [1.0, 1.1, 0.95, 1.0, 1.02]
    (row,) = task_rows([default, final({"a": 1}, rounds_default), final({"a": 2}, rounds_best)])
    assert row.comparison is not None and row.comparison.faster
    assert row.speedup_cell() == f"{row.comparison.ratio:.2f}x"
