"""`tilecraft tune` as a new user runs it (benchmarks/tune_sweep.py's matrix): a killed run
rerun with the same command resumes, a tuned build that kept every default is the default
build, records survive a file cut short, and bad input is one line naming the flag."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("onnx")

import tilecraft  # noqa: E402
from tilecraft.compiler.options import CompileOptions  # noqa: E402
from tilecraft.schedule.records import Record, RecordWriter, canonical_target, load_records  # noqa: E402
from tilecraft.tools.cli import EXIT_INTERRUPTED, run_cli  # noqa: E402
from tilecraft.tuning import extract_tasks, space_for  # noqa: E402

TARGET = "llvm"
MODEL = Path(tilecraft.__file__).resolve().parent / "examples" / "digits_cnn.onnx"
SHAPES = {"input": [4, 1, 16, 16]}
SHAPES_FLAG = "input:[4,1,16,16]"


def _search_configs(records: Path) -> list[str]:
    return [json.dumps(r.config, sort_keys=True) for r in load_records(records, target=TARGET)
            if r.tuner == "random"]


def test_a_rerun_into_the_same_records_resumes_without_measuring_a_config_twice(tmp_path, capsys, matmul_64):
    """The same command again (no prior_records) continues the search: with one seed, a fresh
    random search would propose the very configs already measured. Validation records are
    re-measurements, not trials: they must not count as the resumed run's trials."""
    records = tmp_path / "r.jsonl"
    settings = dict(tuning_records=records, tuner="random", timeout=60, batch_size=2,
                    end_to_end=False, transfer=False)
    first = tilecraft.tune(matmul_64, TARGET, trials=4, validate_top=2, **settings)
    assert first.tasks[0].trials == 4
    assert any(r.tuner == "final" for r in load_records(records, target=TARGET))
    capsys.readouterr()
    again = tilecraft.tune(matmul_64, TARGET, trials=4, validate_top=0, **settings)
    assert "resuming: 3 measurement(s) of 1 task(s)" in capsys.readouterr().err
    configs = _search_configs(records)
    assert len(configs) == 6 and len(set(configs)) == 6
    # Its default again (the run's reference output), the 3 resumed, 3 new.
    assert again.tasks[0].trials == 1 + 3 + 3


def test_a_record_of_the_default_point_builds_the_default(tmp_path):
    """A task whose default won (in the model, or in validation) is recorded with its default
    config; compiled with it, the model must be the default build (its IR, byte for byte),
    so that tune says "unchanged" rather than timing two equal builds. The fusion group with
    the im2col producer planned its default point as a different schedule (the batch not
    split over the threads)."""
    options = CompileOptions(target=TARGET, shape_dict=SHAPES)
    records = tmp_path / "defaults.jsonl"
    with RecordWriter(records) as writer:
        for task in extract_tasks(str(MODEL), TARGET, shape_dict=SHAPES):
            writer.write(Record(task=task.describe(), config=space_for(task, TARGET).default(), status="ok",
                                costs=[1e-3], gflops=1.0, target=canonical_target(TARGET), tuner="in_model"))
    # The schedule stage's IR (the LLVM dialect's constants may come in another order from
    # one lowering to the next in a process that extracted tasks: test_a_run_that_kept_...).
    default = tilecraft.compile(str(MODEL), options.of(options, keep_ir=True, cache=False))
    tuned = tilecraft.compile(str(MODEL), options.of(options, keep_ir=True, cache=False, tuning_records=records))
    assert tuned.ir("schedule") == default.ir("schedule")


def test_a_record_appended_to_a_file_cut_inside_a_line_is_kept(tmp_path, matmul_64):
    records = tmp_path / "cut.jsonl"
    (task,) = extract_tasks(matmul_64, TARGET)
    record = Record(task=task.describe(), config=space_for(task, TARGET).default(), status="ok",
                    costs=[1e-3], gflops=1.0, target=canonical_target(TARGET), tuner="random")
    records.write_text(record.to_json() + "\n" + record.to_json()[:40])  # a copy cut short
    with RecordWriter(records) as writer:
        writer.write(record)
    with pytest.warns(RuntimeWarning, match="skipped 1 corrupt line"):
        assert len(load_records(records, target=TARGET)) == 2


# ---- the command line -----------------------------------------------------------------

def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("tilecraft: error: "), err
    return err[-1]


def test_a_dynamic_input_names_the_flag_that_fixes_it(tmp_path, capsys):
    assert run_cli(["tune", str(MODEL), "-o", str(tmp_path / "r.jsonl")]) == 2
    line = _error_line(capsys)
    assert "input [?,1,16,16]" in line and '--input-shapes "input:[1,1,16,16]"' in line


@pytest.mark.parametrize("output, message", [
    (".", "is a directory, not a file"),
    ("a_file/r.jsonl", "cannot make its folder"),
])
def test_an_unusable_records_path_is_refused_before_any_measurement(output, message, tmp_path, capsys,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("")
    assert run_cli(["tune", str(MODEL), "--input-shapes", SHAPES_FLAG, "-o", output, "--trials", "2"]) == 1
    assert message in _error_line(capsys)


def test_the_task_list_is_the_tasks_tuned(capsys):
    """With --offload the listing leaves out what the backend takes, as tune does: its
    indexes are the ones --tasks 0,3-5 selects."""
    assert run_cli(["tune", str(MODEL), "--input-shapes", SHAPES_FLAG, "--offload", "blas", "--tasks", "list"]) == 0
    listed = [line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]]
    options = CompileOptions(target=TARGET, shape_dict=SHAPES, offload=("blas",))
    assert listed == [t.name for t in tilecraft.tuning.model_tasks(str(MODEL), options)]
    assert listed != [t.name for t in extract_tasks(str(MODEL), TARGET, shape_dict=SHAPES)]


def test_ctrl_c_says_how_to_resume(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tilecraft.tuning, "tune", interrupted)
    records = tmp_path / "r.jsonl"
    assert run_cli(["tune", str(MODEL), "--input-shapes", SHAPES_FLAG, "-o", str(records)]) == EXIT_INTERRUPTED
    assert f"interrupted; the measurements so far are in {records}: the same command resumes" \
        in capsys.readouterr().err


def test_bench_prints_a_ratio_only_beyond_noise_and_its_interval_bounds_it():
    """Identical timings: no ratio at all. A build at twice the anchor's time: the ratio and an
    interval around it in the same direction (tilecraft's time over the anchor's; the
    comparison's own interval is the inverse)."""
    from tilecraft.runtime.significance import compare
    from tilecraft.tools.cli import comparison_line

    equal = [1.0e-3, 1.1e-3, 0.9e-3, 1.05e-3, 1.0e-3, 0.95e-3]
    line = comparison_line("onnxruntime", compare(equal, list(reversed(equal))))
    assert "no measurable difference" in line and not re.search(r": \d\.\d\d \(", line)
    slowed = [2 * t for t in equal]
    line = comparison_line("onnxruntime", compare(equal, slowed))
    ratio, low, high = (float(v) for v in re.search(r": ([\d.]+) \(.*interval ([\d.]+)-([\d.]+),", line).groups())
    assert ratio == pytest.approx(2.0, rel=0.05) and low <= ratio <= high
    assert "tilecraft 2.00x slower than onnxruntime" in line


def test_a_target_this_machine_cannot_run_is_refused_before_any_measurement(tmp_path, capsys):
    """Every candidate would fail to run here; the run ended with exit 0 and no task tuned."""
    records = tmp_path / "arm.jsonl"
    assert run_cli(["tune", str(MODEL), "--input-shapes", SHAPES_FLAG, "-o", str(records), "--trials", "2",
                    "--target", "llvm -mtriple=riscv64-linux-gnu"]) == 1
    assert "does not run on this machine" in _error_line(capsys)
    assert not records.exists()


def test_the_cli_prints_a_warning_as_one_line(tmp_path, capsys):
    """A corrupt records line is skipped with a warning: one line saying so, once, not
    Python's two lines naming the source file of the warnings.warn call."""
    records = tmp_path / "corrupt.jsonl"
    records.write_text("{not json\n")
    assert run_cli(["compile", str(MODEL), "--input-shapes", SHAPES_FLAG, "--tuning-records", str(records),
                    "-o", str(tmp_path / "m.tar")]) == 0
    err = capsys.readouterr().err.splitlines()
    said = [line for line in err if line.startswith("tilecraft: warning: ") and "skipped 1 corrupt line" in line]
    assert len(said) == 1, err  # once, however many steps read the file
    assert not any(".py:" in line for line in err), err


def test_a_default_that_timed_out_once_is_measured_again(tmp_path, matmul_64):
    """On a loaded (or paused) machine a default of microseconds timed out, and its task was
    not tuned at all; one timeout of the compiler's own build is the machine's."""
    from tilecraft.tuning.measure import MeasureResult
    from tilecraft.tuning.options import TuneOptions
    from tilecraft.tuning.space_generators import space_generator_for
    from tilecraft.tuning.tune import search_tasks
    from test_tuning_roles import ListDatabase, ToyRunner

    (task,) = extract_tasks(matmul_64, TARGET)
    generator = space_generator_for(TARGET)

    class PausedOnce(ToyRunner):
        def measure(self, job):
            if job.config is None and not any(j.config is None for j in self.jobs):
                self.jobs.append(job)
                return MeasureResult("timeout", error="no result within 10 s")
            return super().measure(job)

    database = ListDatabase()
    (state,) = search_tasks([task], TuneOptions(trials=4, tuner="random", validate_top=0, progress=False),
                            target_key=canonical_target(TARGET), space_generator=generator,
                            runner=PausedOnce(tmp_path, generator.generate(task)), database=database)
    assert state.reference is not None and state.trials > 2
    assert [r.status for r in database.committed if r.tuner == "default"] == ["timeout", "ok"]


def test_a_run_that_kept_every_default_times_nothing(tmp_path, matmul_64, monkeypatch):
    """Every task kept its default: the tuned build is the default build, known from the
    records alone; lowering and timing the two builds (whose IR a process that extracted tasks
    does not reproduce byte for byte) would print noise."""
    import importlib

    tune_module = importlib.import_module("tilecraft.tuning.tune")  # the module: tuning.tune is the function

    def lowered(*args, **kwargs):
        raise AssertionError("the two builds were lowered and timed")

    monkeypatch.setattr(tune_module, "_lowered", lowered)
    result = tilecraft.tune(matmul_64, TARGET, trials=1, tuning_records=tmp_path / "r.jsonl", tuner="random",
                            timeout=60, transfer=False, progress=False)
    assert result.unchanged and result.end_to_end is None
    assert "end to end: unchanged (all tasks kept the default" in result.summary()
