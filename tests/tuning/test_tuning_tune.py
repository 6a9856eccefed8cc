"""tilecraft.tune end to end (real builds, real runs), resume from records, and
tilecraft.compile(tuning_records=) applying the best record."""

import math
import re
from pathlib import Path

import mlir_text
import numpy as np
import pytest
import tilecraft
from tilecraft.errors import OptionError, TaskExtractionError, TunerNameError, TuningError
from tilecraft.runtime.significance import compare
from tilecraft.schedule.records import Record, RecordWriter, canonical_target
from tilecraft.tuning import best_records, extract_tasks, load_records, space_for
from tilecraft.tuning.tune import VALIDATION_ROUNDS

TARGET = "llvm"


def test_tune_writes_records_progress_and_report(tmp_path, capsys, matmul_64):
    records = tmp_path / "tune.jsonl"
    report = tmp_path / "report.png"
    result = tilecraft.tune(matmul_64, TARGET, trials=5, tuning_records=records, tuner="random",
                            timeout=60, batch_size=2, report=report, validate_top=0)
    lines = load_records(records, target=TARGET)
    assert len(lines) == 5
    assert lines[0].tuner == "default" and lines[0].ok
    assert {r.tuner for r in lines[1:]} == {"random"}
    assert all("transform.named_sequence" in r.script for r in lines)
    (task_result,) = result.tasks
    assert task_result.trials == 5 and task_result.best_gflops >= task_result.default_gflops > 0
    err = capsys.readouterr().err
    assert re.search(r"\[Task  1/ 1\] Current/Best: +\d+\.\d\d/ +\d+\.\d\d GFLOPS \| "
                     r"Progress: \(5/5\) \| \d+\.\d\d s", err)
    assert report.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Resume: configs already measured are not measured again and count as trials.
    again = tilecraft.tune(matmul_64, TARGET, trials=8, tuning_records=records, tuner="random",
                           prior_records=records, timeout=60, batch_size=2, progress=False,
                           validate_top=2)
    all_lines = load_records(records, target=TARGET)
    tuned = [tuple(sorted(r.config.items())) for r in all_lines if r.tuner == "random"]
    assert len(tuned) == len(set(tuned))
    assert again.tasks[0].trials >= 8
    # Validation: the two best configs and the default, re-measured side by side, decide.
    final = [r for r in all_lines if r.tuner == "final"]
    assert 2 <= len(final) <= 3 and all(len(r.costs) == VALIDATION_ROUNDS for r in final if r.ok)
    assert best_records(all_lines)[final[0].key].tuner == "final"


def test_a_budget_below_the_task_count_says_which_tasks_it_leaves_out(tmp_path, capsys):
    """Every task's default is its first trial, heaviest first: trials=1 on a two-task model
    measures one default; the other task is named before the run and in the summary as not
    measured (not as a default schedule that failed)."""
    two = mlir_text.matmul(64, 64, 128).replace("@main", "@big") + mlir_text.matmul(8, 8, 8).replace("@main", "@small")
    tasks = extract_tasks(two, TARGET)
    assert len(tasks) == 2
    result = tilecraft.tune(two, TARGET, trials=1, tuning_records=tmp_path / "r.jsonl", tuner="random",
                            timeout=60, validate_top=0, end_to_end=False, transfer=False)
    err = capsys.readouterr().err
    assert "warning: trials=1 covers the default schedules of 1 of 2 tasks only" in err
    assert tasks[1].name in err
    heavy, light = result.tasks
    assert heavy.trials == 1 and not heavy.skipped and math.isfinite(heavy.default_seconds)
    assert light.trials == 0 and light.skipped
    summary = result.summary().splitlines()
    assert "not measured: the trials budget ran out before this task" in summary[2]
    assert "nan" not in result.summary()


def test_a_task_searched_no_further_than_its_default_reports_no_speedup(tmp_path, matmul_64):
    """One trial is the default alone: there is nothing to validate (no 'final' records, which
    re-measured the default and reported it as up to 1.2x faster than itself)."""
    records = tmp_path / "r.jsonl"
    result = tilecraft.tune(matmul_64, TARGET, trials=1, tuning_records=records, tuner="random",
                            timeout=60, validate_top=4, end_to_end=False, transfer=False, progress=False)
    assert [r.tuner for r in load_records(records, target=TARGET)] == ["default"]
    (task,) = result.tasks
    assert task.best_seconds == task.default_seconds and task.best_config == space_for(task.task, TARGET).default()
    row = result.summary().splitlines()[1]
    assert row.split()[5] == "default" and row.endswith("(kept the default)")


def test_compile_applies_the_best_record(tmp_path, matmul_64):
    (task,) = extract_tasks(matmul_64, TARGET)
    space = space_for(task, TARGET)
    best = {**space.default(), "cache_k": 64, "pack_a": 0, "pack_b": 1, "reg_m": 4, "par_n": 64}
    assert space.is_valid(best)
    slower = {**space.default(), "reg_m": 1}
    path = tmp_path / "records.jsonl"
    with RecordWriter(path) as writer:
        for config, cost, status in ((slower, 2e-3, "ok"), (best, 1e-3, "ok"),
                                     ({**space.default(), "reg_m": 2}, 1e-6, "wrong")):
            writer.write(Record(task=task.describe(), config=config, status=status, costs=[cost],
                                gflops=task.flops / cost / 1e9, target=canonical_target(TARGET)))
    tuned = tilecraft.compile(matmul_64, target=TARGET, tuning_records=path)
    scheduled = tuned.ir("schedule")
    assert "memref<64x" in scheduled  # the packed panel of B: the record with pack_b=1
    assert "vector<4x" in scheduled
    a = np.random.default_rng(0).random((64, 128), dtype=np.float32)
    b = np.random.default_rng(1).random((128, 64), dtype=np.float32)
    np.testing.assert_allclose(tuned(a, b), a @ b, rtol=1e-4)
    # An op without a record keeps the default schedule.
    other = mlir_text.matmul(32, 32, 32)
    default = tilecraft.compile(other, target=TARGET)
    assert tilecraft.compile(other, target=TARGET, tuning_records=path).ir("schedule") == default.ir("schedule")


def test_bad_arguments_are_typed_errors(tmp_path, matmul_64):
    with pytest.raises(TunerNameError):
        tilecraft.tune(matmul_64, TARGET, trials=2, tuning_records=tmp_path / "r", tuner="ga")
    with pytest.raises(TuningError, match="trials"):
        tilecraft.tune(matmul_64, TARGET, trials=0, tuning_records=tmp_path / "r")
    with pytest.raises(TaskExtractionError):
        tilecraft.tune(matmul_64, TARGET, trials=2, tuning_records=tmp_path / "r", tasks=["nope"])
    with pytest.raises(TuningError, match="no such file"):
        tilecraft.compile(matmul_64, tuning_records=tmp_path / "missing.jsonl")
    with pytest.raises(TypeError, match="unknown tune option.*'trails'"):
        tilecraft.tune(matmul_64, TARGET, trails=2)
    with pytest.raises(TuningError, match="early_stopping"):
        tilecraft.TuneOptions(early_stopping=0)
    with pytest.raises(OptionError, match="not dict"):
        tilecraft.tune(matmul_64, {"trials": 2})


def test_tune_takes_the_compile_options_and_search_options_objects(tmp_path, matmul_64):
    records = tmp_path / "objects.jsonl"
    result = tilecraft.tune(matmul_64, tilecraft.CompileOptions(target=TARGET),
                            tilecraft.TuneOptions(trials=2, tuning_records=records, tuner="random",
                                                  progress=False, validate_top=0))
    assert result.records == records and len(load_records(records, target=TARGET)) == 2
    if result.unchanged:  # the second trial's config lowered to the default's IR
        assert result.default_seconds is None and "end to end: unchanged" in result.summary()
    else:
        assert result.default_seconds > 0 and result.tuned_seconds > 0
        assert re.search(r"end to end: default [\d.]+ ms, tuned [\d.]+ ms: "
                         r"(no measurable change|[\d.]+x (faster|slower)) \(95% interval",
                         result.summary())
    # The search options alone, in the second place: tune(model, TuneOptions(...)).
    again = tilecraft.tune(matmul_64, tilecraft.TuneOptions(trials=1, tuning_records=tmp_path / "alone.jsonl",
                                                            tuner="random", progress=False, validate_top=0,
                                                            end_to_end=False))
    assert len(load_records(again.records)) == 1


def test_compare_tuners_interleaves_batches(tmp_path, matmul_64):
    from tilecraft.tuning.tune import compare_tuners

    (task,) = extract_tasks(matmul_64, TARGET)
    paths = {"random": tmp_path / "random.jsonl", "grid": tmp_path / "grid.jsonl"}
    results = compare_tuners(task, paths, TARGET, trials=5, timeout=60, batch_size=2,
                             progress=False, validate_top=0)
    assert {name: r.trials for name, r in results.items()} == {"random": 5, "grid": 5}
    random_lines = load_records(paths["random"], target=TARGET)
    grid_lines = load_records(paths["grid"], target=TARGET)
    assert random_lines[0] == grid_lines[0] and random_lines[0].tuner == "default"
    assert len(random_lines) == len(grid_lines) == 5
    # Batch by batch: the first random batch was measured before the last grid batch.
    assert random_lines[1].timestamp < grid_lines[-1].timestamp
    assert grid_lines[1].timestamp < random_lines[-1].timestamp


def test_cuda_target_stops_before_any_measurement(tmp_path, matmul_64):
    """Without a GPU the error says why; with one, that GPU measurement is not built. Either
    way no record is written (a CPU timing of a GPU schedule would be a wrong ranking)."""
    from tilecraft.runtime.libraries import cuda_driver_available

    records = tmp_path / "cuda.jsonl"
    expected = TuningError if cuda_driver_available() else tilecraft.errors.DeviceUnavailableError
    with pytest.raises(expected, match="GPU|CUDA"):
        tilecraft.tune(matmul_64, target="cuda -arch=sm_80", trials=2, tuning_records=records)
    assert not records.exists()


def test_tune_from_a_script_read_on_standard_input(tmp_path, matmul_64):
    """``python - <<EOF``: spawn's re-import of a main module that is no file made the
    worker die and the parent raise EOFError."""
    import subprocess
    import sys

    payload = tmp_path / "mm.mlir"
    payload.write_text(matmul_64)
    script = (
        "import tilecraft\n"
        f"r = tilecraft.tune({str(payload)!r}, trials=2, tuning_records={str(tmp_path / 'r.jsonl')!r},\n"
        "                   tuner='random', progress=False, validate_top=0)\n"
        "print('measured', sum(t.trials for t in r.tasks))\n"
    )
    done = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "measured" in done.stdout


def test_tune_from_a_script_file_without_a_main_guard(tmp_path, matmul_64):
    """A script calling tune at top level: spawn re-ran it in every worker (a tuning run per
    worker, and multiprocessing's bootstrapping error) before the main module was hidden."""
    import subprocess
    import sys

    payload = tmp_path / "mm.mlir"
    payload.write_text(matmul_64)
    script = tmp_path / "tune_me.py"
    script.write_text(
        "import tilecraft\n"
        f"r = tilecraft.tune({str(payload)!r}, trials=2, tuning_records={str(tmp_path / 'r.jsonl')!r},\n"
        "                   tuner='random', progress=False, validate_top=0, end_to_end=False)\n"
        "print('measured', sum(t.trials for t in r.tasks))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("measured") == 1  # the script ran once, not once per worker


def test_a_task_whose_tuned_config_lost_in_the_model_shows_its_default(matmul_64):
    """The summary says what compile applies: the default, where the confirmation inside the
    model found the tuned config slower (tuning/in_model.py's confirm_in_model)."""
    from tilecraft.tuning.tune import TaskResult, TuningResult

    (task,) = extract_tasks(matmul_64, TARGET)
    lost = TaskResult(task=task, default_gflops=1.0, best_gflops=2.0, best_config={}, trials=5,
                      default_seconds=2e-3, best_seconds=1e-3, slower_in_model=True)
    won = TaskResult(task=task, default_gflops=1.0, best_gflops=2.0, best_config={}, trials=5,
                     default_seconds=2e-3, best_seconds=1e-3,
                     comparison=compare([2e-3, 2.1e-3, 1.9e-3, 2e-3, 2.2e-3], [1e-3, 1.1e-3, 0.9e-3, 1e-3, 1e-3]))
    lines = TuningResult(Path("r.jsonl"), [lost, won]).summary().splitlines()
    assert lines[1].split()[5] == "default" and "slower in the model: default kept" in lines[1]
    assert lines[2].split()[5] == "2.00x" and "slower in the model" not in lines[2]


def test_a_speedup_is_printed_only_with_evidence(matmul_64):
    """The summary's speedup cell: a ratio where validation put it beyond noise, 'none' with
    the interval where it did not, '?' where nothing was validated."""
    from tilecraft.tuning.tune import TaskResult, TuningResult

    (task,) = extract_tasks(matmul_64, TARGET)

    def row(**fields) -> str:
        result = TaskResult(task=task, default_gflops=1.0, best_gflops=1.1, best_config={"x": 1}, trials=9,
                            default_seconds=1.1e-3, best_seconds=1e-3, **fields)
        return TuningResult(Path("r.jsonl"), [result]).summary().splitlines()[1]

    noisy = compare([1.0e-3, 1.3e-3, 0.9e-3, 1.2e-3, 1.0e-3], [1.1e-3, 1.0e-3, 1.2e-3, 0.95e-3, 1.05e-3])
    assert not noisy.significant
    assert row(comparison=noisy).split()[5] == "none" and "no measurable change" in row(comparison=noisy)
    assert row().split()[5] == "?" and "not validated" in row()
    assert row(kept_default=True).split()[5] == "default"


def test_identical_builds_never_report_a_speedup(tmp_path, matmul_64):
    """A tune whose records hold only the default schedule builds the default program: the
    summary says so and times nothing (a ratio of two timings of one program is noise)."""
    result = tilecraft.tune(matmul_64, TARGET, trials=1, tuning_records=tmp_path / "r.jsonl", tuner="random",
                            timeout=60, validate_top=4, transfer=False, progress=False)
    assert result.unchanged and result.end_to_end is None and result.tuned_seconds is None
    summary = result.summary()
    assert "end to end: unchanged (all tasks kept the default" in summary
    assert not re.search(r"\d\.\d\dx", summary)


def test_the_plan_weighs_tasks_by_their_gap_to_the_fma_peak(monkeypatch, capsys, tmp_path):
    """With a known peak, a float32 matmul near it gets fewer trials than its time alone
    would give it, and a model whose heavy tasks are all near the peak is told so."""
    from tilecraft.tuning import GradientTaskScheduler, TuneOptions, space_for
    from tilecraft.tuning.session import TaskState

    two = mlir_text.matmul(64, 64, 128).replace("@main", "@big") + mlir_text.matmul(32, 32, 64).replace("@main", "@small")
    big, small = extract_tasks(two, TARGET)
    search = TuneOptions(trials=20, trials_per_task=0, progress=False)

    def states(peak, big_gflops, small_gflops):
        made = []
        for task, gflops in ((big, big_gflops), (small, small_gflops)):
            state = TaskState(task, space_for(task, TARGET), "random", 0, None, peak)
            state.default_cost = task.flops / (gflops * 1e9)
            made.append(state)
        return made

    near, far = states(100.0, 95.0, 30.0)
    scheduler = GradientTaskScheduler([near, far], search, None, None)
    assert near.headroom() == pytest.approx(0.05) and far.headroom() == pytest.approx(0.7)
    planned = dict((s.task.name, n) for s, n in scheduler.planned(20))
    by_time = near.default_cost * near.task.count > far.default_cost * far.task.count
    assert by_time and planned[far.task.name] > planned[near.task.name]
    assert scheduler.no_headroom() is None  # the small task is heavy too, and far from the peak
    plan = scheduler.plan(20)
    assert "GFLOPS" in plan and "of its bound" in plan

    both_near = GradientTaskScheduler(states(100.0, 95.0, 90.0), search, None, None)
    assert both_near.no_headroom() is not None and "no headroom" in both_near.plan(20)
    unknown = GradientTaskScheduler(states(None, 95.0, 90.0), search, None, None)
    assert unknown.no_headroom() is None and all(s.headroom() == 1.0 for s in unknown.states)


def test_headroom_must_be_a_bool():
    with pytest.raises(TuningError, match="headroom"):
        tilecraft.TuneOptions(headroom="yes")
