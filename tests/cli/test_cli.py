"""The `tilecraft` command line: compile -> package -> run, bench, and one-line errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import tilecraft  # noqa: E402
from tilecraft.tools.cli import parse_input_shapes, parse_tasks, run_cli  # noqa: E402

EXAMPLES = Path(tilecraft.__file__).resolve().parent / "examples"
MODEL = EXAMPLES / "digits_cnn.onnx"
SHAPES = "input:[4,1,16,16]"


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    with np.load(EXAMPLES / "digits_test.npz") as split:
        return split["images"][:4]


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "digits.tar"
    assert run_cli(["compile", str(MODEL), "--input-shapes", SHAPES, "-o", str(path)]) == 0
    return path


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1
    assert err[-1].startswith("tilecraft: error: "), err
    return err[-1]


@pytest.mark.parametrize("command", ["compile", "run", "tune", "bench"])
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_cli([command, "--help"])
    assert exit_info.value.code == 0
    assert f"usage: tilecraft {command}" in capsys.readouterr().out


def test_compile_then_run_with_npz_inputs_and_outputs(package, images, tmp_path, capsys):
    np.savez(tmp_path / "in.npz", input=images)
    code = run_cli(["run", str(package), "--inputs", str(tmp_path / "in.npz"),
                    "--output", str(tmp_path / "out.npz"), "--print-time", "--repeat", "3"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Execution time summary" in out and "median (ms)" in out and "std (ms)" in out
    session = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"input": images})
    with np.load(tmp_path / "out.npz") as outputs:
        np.testing.assert_allclose(outputs["logits"], expected, rtol=1e-4, atol=1e-4)


def test_run_without_inputs_uses_random_inputs_and_prints_outputs(package, capsys):
    assert run_cli(["run", str(package), "--print-top", "3"]) == 0
    assert "top 3 of logits" in capsys.readouterr().out


def test_profile_needs_a_profiling_package(package, capsys):
    assert run_cli(["run", str(package), "--profile"]) == 1
    assert "recompile with `tilecraft compile --profile`" in _error_line(capsys)


def test_compile_with_profile_and_dump_ir(tmp_path, capsys):
    path = tmp_path / "profiled.tar"
    code = run_cli(["compile", str(MODEL), "--input-shapes", "input:[2,1,16,16]", "--profile",
                    "--dump-ir", str(tmp_path / "ir"), "--opt-level", "2", "-o", str(path)])
    assert code == 0
    dumped = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert dumped[0] == "00-source.mlir" and any(name.endswith("-schedule.mlir") for name in dumped)
    capsys.readouterr()
    assert run_cli(["run", str(path), "--profile"]) == 0
    out = capsys.readouterr().out
    assert "conv1(Conv)" in out and "fc2(Gemm)" in out and "share" in out


def test_bench_against_onnxruntime(capsys):
    code = run_cli(["bench", str(MODEL), "--input-shapes", SHAPES, "--vs", "onnxruntime", "--repeat", "2"])
    out = capsys.readouterr().out
    assert code == 0
    assert "outputs vs onnxruntime: max error" in out
    assert re.search(r"ratio tilecraft / onnxruntime: (no measurable difference \(|[\d.]+ \(tilecraft [\d.]+x (faster|slower) than onnxruntime; )95% interval", out)


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (["compile", "missing.onnx"], 1, "missing.onnx: no such file"),
        (["compile", str(MODEL), "--input-shapes", "data:[1,3]"], 1, "not inputs of the model"),
        (["compile", str(MODEL), "--target", "llvm -mfoo=1"], 1, "bad target option '-mfoo=1'"),
        (["compile", str(MODEL), "--target", "opencl"], 1, "unknown target kind 'opencl'"),
        (["run", "missing.tar"], 1, "no such package file"),
        (["bench", str(MODEL), "--vs", "tvm"], 2, "unknown anchor(s) ['tvm']"),
        (["bench", str(MODEL), "--vs", "torch"], 2, "the torch anchor needs a PyTorch model"),
        (["tune", str(MODEL), "-o", "r.jsonl", "--trials-per-task", "-1"], 1, "trials_per_task"),
    ],
)
def test_errors_are_one_line_with_nonzero_exit(argv, code, message, capsys):
    assert run_cli(argv) == code
    assert message in _error_line(capsys)


@pytest.mark.parametrize("budget, message", [("soon", "a duration like 90s"), ("-5m", "a positive duration")])
def test_bad_time_budget_is_a_usage_error(budget, message, capsys):
    with pytest.raises(SystemExit) as exited:
        run_cli(["tune", str(MODEL), "-o", "r.jsonl", f"--time-budget={budget}"])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_input_shapes_is_a_usage_error(capsys):
    assert run_cli(["compile", str(MODEL), "--input-shapes", "input:[1,x]"]) == 2
    assert "dimension 'x' of 'input' is not a number" in _error_line(capsys)


def test_run_rejects_a_file_that_is_not_a_package(tmp_path, capsys):
    path = tmp_path / "model.tar"
    path.write_bytes(b"\x00" * 100)
    assert run_cli(["run", str(path)]) == 1
    assert "not a tilecraft package" in _error_line(capsys)


def test_run_rejects_inputs_of_the_wrong_shape(package, tmp_path, capsys):
    np.savez(tmp_path / "bad.npz", input=np.zeros((4, 1, 8, 8), np.float32))
    assert run_cli(["run", str(package), "--inputs", str(tmp_path / "bad.npz")]) == 1
    assert "argument 'input': expected shape tensor<4x1x16x16xf32>" in _error_line(capsys)


def test_run_rejects_an_unreadable_inputs_file(package, tmp_path, capsys):
    (tmp_path / "in.npz").write_text("not numpy")
    assert run_cli(["run", str(package), "--inputs", str(tmp_path / "in.npz")]) == 1
    assert "not a readable .npz file" in _error_line(capsys)


def test_tune_rejects_bad_task_lists(capsys):
    assert run_cli(["tune", str(MODEL), "-o", "r.jsonl", "--tasks", "3-1"]) == 2
    assert "empty range '3-1'" in _error_line(capsys)


def test_tune_needs_an_output_file_unless_listing(capsys):
    assert run_cli(["tune", str(MODEL), "--input-shapes", SHAPES, "--tasks", "0"]) == 2
    assert "-o/--output FILE is required" in _error_line(capsys)


def test_value_parsers():
    assert parse_input_shapes("data:[1,3,224,224] mask:[?,4]") == {"data": [1, 3, 224, 224], "mask": [None, 4]}
    assert parse_input_shapes("a:[2], b:[-1]") == {"a": [2], "b": [None]}
    assert parse_tasks("0,3-5,4") == [0, 3, 4, 5]
    assert parse_tasks("list") == "list"


def test_console_script_entry_point():
    completed = subprocess.run([sys.executable, "-m", "tilecraft.tools.cli", "run", "--help"],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0 and "--print-time" in completed.stdout
    completed = subprocess.run([sys.executable, "-m", "tilecraft.tools.cli", "run", "nothing.tar"],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 1
    assert completed.stderr.strip() == "tilecraft: error: nothing.tar: no such package file"


def test_tune_lists_tasks(capsys):
    # Listing writes no records, so it needs no -o (the README's command, as written).
    assert run_cli(["tune", str(MODEL), "--input-shapes", SHAPES, "--tasks", "list"]) == 0
    out = capsys.readouterr().out
    # The second conv, in NHWC after the layout pass, as a group with its bias + ReLU.
    assert "conv_2d_nhwc_hwcf_4x8x8x16x3x3x8_f32_fused1" in out and "conv2d" in out


def test_tune_then_compile_with_the_records(tmp_path, images, capsys):
    records = tmp_path / "records.jsonl"
    code = run_cli(["tune", str(MODEL), "--input-shapes", SHAPES, "-o", str(records), "--tasks", "0",
                    "--trials", "2", "--tuner", "random", "--timeout", "60"])
    assert code == 0, capsys.readouterr().err
    assert records.is_file() and records.read_text().strip()
    assert "tuning records written to" in capsys.readouterr().out
    package = tmp_path / "tuned.tar"
    assert run_cli(["compile", str(MODEL), "--input-shapes", SHAPES, "--tuning-records", str(records),
                    "-o", str(package)]) == 0
    session = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"input": images})
    np.testing.assert_allclose(tilecraft.runtime.load(package)(images), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("runner, expected", [
    ("local", {"ray": None, "remote": None}),
    ("ray", {"ray": "local", "remote": None}),  # the documented spelling of a local cluster
    ("ray://10.0.0.5:10001", {"ray": "ray://10.0.0.5:10001", "remote": None}),
    ("remote://127.0.0.1:9090", {"ray": None, "remote": "remote://127.0.0.1:9090"}),
])
def test_tune_runner_flag_becomes_the_tune_options(runner, expected, monkeypatch, capsys):
    import tilecraft.tuning

    seen = {}

    def fake_tune(model, options, search):
        seen.update(ray=search.ray, remote=search.remote)
        raise tilecraft.errors.TuningError("stopped by the test")

    monkeypatch.setattr(tilecraft.tuning, "tune", fake_tune)
    assert run_cli(["tune", str(MODEL), "--input-shapes", SHAPES, "-o", "unused.jsonl",
                    "--runner", runner]) == 1
    assert seen == expected
    assert "stopped by the test" in _error_line(capsys)


def test_tune_flags_mirror_the_tune_options(monkeypatch, capsys):
    import tilecraft.tuning

    seen = {}

    def fake_tune(model, options, search):
        seen.update(search.__dict__)
        raise tilecraft.errors.TuningError("stopped by the test")

    monkeypatch.setattr(tilecraft.tuning, "tune", fake_tune)
    assert run_cli(["tune", str(MODEL), "--input-shapes", SHAPES, "-o", "unused.jsonl", "--trials", "30",
                    "--trials-per-task", "3", "--time-budget", "2m", "--batch-size", "4",
                    "--validate-top", "0", "--seed", "7", "--no-end-to-end", "--early-stopping", "5"]) == 1
    assert {k: seen[k] for k in ("trials", "trials_per_task", "time_budget", "batch_size", "validate_top",
                                 "seed", "end_to_end", "early_stopping")} == {
        "trials": 30, "trials_per_task": 3, "time_budget": 120.0, "batch_size": 4, "validate_top": 0,
        "seed": 7, "end_to_end": False, "early_stopping": 5}
    assert run_cli(["tune", str(MODEL), "-o", "r.jsonl", "--validate-top", "-1"]) == 1
    assert "validate_top must be an integer >= 0" in _error_line(capsys)


def test_tune_rejects_a_malformed_ray_runner(capsys):
    assert run_cli(["tune", str(MODEL), "--input-shapes", SHAPES, "-o", "unused.jsonl",
                    "--runner", "ray:10.0.0.5"]) == 1
    assert "ray must be 'local' or 'ray://HOST:PORT'" in _error_line(capsys)


def test_tune_rejects_a_task_index_beyond_the_model(capsys):
    assert run_cli(["tune", str(MODEL), "--input-shapes", SHAPES, "-o", "unused.jsonl", "--tasks", "99"]) == 2
    assert "--tasks: no task 99" in _error_line(capsys)


def test_compile_with_missing_tuning_records(capsys):
    assert run_cli(["compile", str(MODEL), "--tuning-records", "absent.jsonl", "-o", "unused.tar"]) == 1
    assert "absent.jsonl" in _error_line(capsys)


@pytest.fixture(scope="module")
def torch_program(tmp_path_factory) -> Path:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    path = tmp_path_factory.mktemp("torch") / "mlp.pt2"
    torch.export.save(torch.export.export(module, (torch.randn(8, 32),)), str(path))
    return path


def test_bench_a_pytorch_program_against_torch(torch_program, capsys):
    assert run_cli(["bench", str(torch_program), "--vs", "torch", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "outputs vs torch: max error" in out and "ratio tilecraft / torch:" in out


def test_compile_and_run_a_pytorch_program(torch_program, tmp_path, capsys):
    package = tmp_path / "mlp.tar"
    assert run_cli(["compile", str(torch_program), "-o", str(package)]) == 0
    assert run_cli(["run", str(package), "--print-time"]) == 0
    assert "Execution time summary" in capsys.readouterr().out


def test_onnxruntime_anchor_needs_an_onnx_model(torch_program, capsys):
    assert run_cli(["bench", str(torch_program), "--vs", "onnxruntime"]) == 2
    assert "the onnxruntime anchor runs ONNX models" in _error_line(capsys)


def test_run_needs_no_mlir(package, tmp_path):
    """`tilecraft run` imports the package loader only: it works where `import mlir` fails."""
    script = (
        "import importlib.abc, sys\n"
        "class NoMLIR(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('mlir', 'onnx', 'onnxruntime', 'torch'):\n"
        "            raise ImportError(name + ' is blocked')\n"
        "sys.meta_path.insert(0, NoMLIR())\n"
        "from tilecraft.tools.cli import run_cli\n"
        "sys.exit(run_cli(sys.argv[1:]))\n"
    )
    completed = subprocess.run([sys.executable, "-c", script, "run", str(package), "--print-time", "--repeat", "2"],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert "Execution time summary" in completed.stdout


def test_compile_for_cuda_writes_the_kernels(tmp_path, capsys):
    """No GPU is needed to compile: -o names a directory of PTX (and cubin where ptxas runs),
    or a package (.tar: tests/cuda/test_cuda_package.py); an existing other file is refused."""
    out = tmp_path / "kernels"
    assert run_cli(["compile", str(MODEL), "--target", "cuda -arch=sm_80", "--input-shapes",
                    "input:[4,1,16,16]", "-o", str(out)]) == 0
    ptx = sorted(out.glob("*.ptx"))
    assert ptx and all(".target sm_80" in p.read_text() for p in ptx)
    capsys.readouterr()
    (tmp_path / "notes.txt").write_text("")
    assert run_cli(["compile", str(MODEL), "--target", "cuda", "-o", str(tmp_path / "notes.txt")]) == 2
    assert "is a file" in _error_line(capsys)
