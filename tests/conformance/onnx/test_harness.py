"""The conformance harness itself (fast): the pool survives crashing and hanging cases,
outcomes are classified right, the expected-status comparison catches what CI must catch."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

import tilecraft  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from onnx_conformance import expected as expectations  # noqa: E402
from onnx_conformance import report, shards  # noqa: E402
from onnx_conformance.pool import PoolError, Task, WorkerPool  # noqa: E402
from onnx_conformance.protocol import Decoder, encode  # noqa: E402
from onnx_conformance.runner import HARNESS_DIR, default_jobs, run_cases, worker_env  # noqa: E402
from onnx_conformance.suite import Case, Payload, dummy_input, folder_cases, light_cases  # noqa: E402
from onnx_conformance.worker import compare_outputs, compare_value, run_case  # noqa: E402

# A stand-in worker: each task is a dict saying what to do, so the pool can be tested
# against every way a real case can end without compiling anything.
FAKE_WORKER = textwrap.dedent(
    f"""
    import ctypes, os, sys, time
    sys.path.insert(0, {HARNESS_DIR!r})
    from onnx_conformance.protocol import serve

    def handle(task):
        action = task["action"]
        print("stray stdout from", task["key"])  # must not corrupt the channel
        if action == "segfault":
            print("about to segfault", file=sys.stderr, flush=True)
            ctypes.string_at(0)
        if action == "abort":
            print("LLVM ERROR: pretend failure", file=sys.stderr, flush=True)
            os.abort()
        if action == "exit":
            os._exit(3)
        if action == "hang":
            time.sleep(3600)
        if action == "slow-once":
            marker = task["marker"]
            if not os.path.exists(marker):
                open(marker, "w").close()
                time.sleep(3600)
        return {{"status": "pass", "message": "", "pid": os.getpid()}}

    serve(handle)
    """
)
FAKE_COMMAND = [sys.executable, "-c", FAKE_WORKER]


def _task(key: str, action: str, timeout: float = 30.0, **extra) -> Task:
    return Task(key, timeout, lambda: {"key": key, "action": action, **extra})


def _run_pool(tasks: list[Task], jobs: int = 2, **options) -> dict:
    pool = WorkerPool(FAKE_COMMAND, jobs=jobs, **options)
    return {outcome.task.key: outcome for outcome in pool.run(tasks)}


# --- the pool -----------------------------------------------------------------------------


def test_pool_survives_crashes_and_hangs():
    tasks = [
        _task("ok1", "ok"), _task("segv", "segfault"), _task("ok2", "ok"), _task("abort", "abort"),
        _task("exit", "exit"), _task("hang", "hang", timeout=1.0), _task("ok3", "ok"), _task("ok4", "ok"),
    ]
    outcomes = _run_pool(tasks)
    assert set(outcomes) == {t.key for t in tasks}
    for key in ("ok1", "ok2", "ok3", "ok4"):
        assert outcomes[key].failure is None and outcomes[key].reply["status"] == "pass"
    assert outcomes["segv"].failure == "crash"
    assert "SIGSEGV" in outcomes["segv"].message and "about to segfault" in outcomes["segv"].message
    assert outcomes["abort"].failure == "crash"
    assert "SIGABRT" in outcomes["abort"].message and "LLVM ERROR: pretend failure" in outcomes["abort"].message
    assert outcomes["exit"].failure == "crash" and "exit status 3" in outcomes["exit"].message
    assert outcomes["hang"].failure == "timeout" and "1 s" in outcomes["hang"].message


def test_crash_message_holds_only_that_tasks_stderr():
    outcomes = _run_pool([_task("first", "ok"), _task("second", "abort")], jobs=1)
    assert "stray stdout from first" not in outcomes["second"].message
    assert "stray stdout from second" in outcomes["second"].message


def test_pool_replaces_workers_after_max_tasks():
    outcomes = _run_pool([_task(f"t{i}", "ok") for i in range(5)], jobs=1, max_tasks_per_worker=2)
    pids = [outcomes[f"t{i}"].reply["pid"] for i in range(5)]
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]


def test_pool_reports_a_case_that_cannot_load():
    def broken():
        raise FileNotFoundError("no model.onnx")

    outcomes = _run_pool([Task("broken", 30.0, broken), _task("ok", "ok")], jobs=1)
    assert outcomes["broken"].failure == "harness-error" and "no model.onnx" in outcomes["broken"].message
    assert outcomes["ok"].reply["status"] == "pass"


def test_pool_gives_up_when_workers_cannot_start():
    pool = WorkerPool([sys.executable, "-c", "raise SystemExit('broken checkout')"], jobs=1)
    with pytest.raises(PoolError, match="broken checkout"):
        list(pool.run([_task("a", "ok")]))


def test_protocol_decoder_reassembles_chunks():
    stream = encode({"a": 1}) + encode([np.arange(3)])
    decoder = Decoder()
    messages = [m for i in range(len(stream)) for m in decoder.feed(stream[i:i + 1])]
    assert messages[0] == {"a": 1} and np.array_equal(messages[1][0], np.arange(3))


def test_run_cases_retries_a_timeout_once(tmp_path):
    marker = str(tmp_path / "seen")
    cases = [
        Case("flaky", "node", ("Relu",), lambda: {"key": "flaky", "action": "slow-once", "marker": marker}),
        Case("stuck", "simple", ("Loop",), lambda: {"key": "stuck", "action": "hang"}),
        Case("fine", "node", ("Add",), lambda: {"key": "fine", "action": "ok"}),
    ]
    results = run_cases(cases, jobs=2, timeouts={"node": 1.0, "simple": 1.0}, command=FAKE_COMMAND, env=worker_env())
    assert list(results) == ["flaky", "stuck", "fine"]
    assert results["flaky"]["status"] == "pass" and results["flaky"]["attempts"] == 2
    assert results["stuck"]["status"] == "timeout" and results["stuck"]["attempts"] == 2
    assert results["stuck"]["group"] == "simple" and results["stuck"]["op_types"] == ["Loop"]
    assert results["fine"] == {"group": "node", "op_types": ["Add"], "status": "pass", "message": "", "pid": results["fine"]["pid"]}


# --- classifying one case (in this process) -----------------------------------------------


def _model(op_type: str, inputs: dict[str, np.ndarray], outputs: int = 1) -> bytes:
    graph = helper.make_graph(
        [helper.make_node(op_type, list(inputs), [f"y{i}" for i in range(outputs)])],
        "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in inputs.items()],
        [helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.FLOAT, X.shape) for i in range(outputs)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


X = np.array([[-1.0, 0.5], [2.0, -3.0]], np.float32)


def _relu_case(expected, inputs=(X,)) -> Payload:
    return Payload("t", _model("Relu", {"x": X}), [(list(inputs), [expected])], 1e-3, 1e-7)


def test_run_case_pass():
    assert run_case(_relu_case(np.maximum(X, 0)))["status"] == "pass"


def test_run_case_wrong_result():
    result = run_case(_relu_case(np.maximum(X, 0) + np.float32(1)))
    assert result["status"] == "wrong-result" and "4/4 values differ" in result["message"]


def test_run_case_import_error_names_the_op():
    result = run_case(Payload("t", _model("NoSuchOp", {"x": X}), [([X], [X])], 1e-3, 1e-7))
    assert result["status"] == "import-error" and result["unsupported"] == ["NoSuchOp"]


def test_run_case_runtime_error():
    result = run_case(_relu_case(X, inputs=(X.astype(np.float64),)))
    assert result["status"] == "runtime-error" and "ArgumentTypeError" in result["message"]


def test_run_case_compile_error(monkeypatch):
    def failing_compile(model):
        raise tilecraft.CompileError("pass failed", stage="bufferize")

    monkeypatch.setattr(tilecraft, "compile", failing_compile)
    result = run_case(_relu_case(X))
    assert result["status"] == "compile-error" and "stage bufferize" in result["message"]


@pytest.mark.parametrize(
    "got, expected, problem",
    [
        (np.array([np.nan, np.inf], np.float32), np.array([np.nan, np.inf], np.float32), None),
        (np.array([1.0005], np.float32), np.array([1.0], np.float32), None),
        (np.array([1.01], np.float32), np.array([1.0], np.float32), "1/1 values differ"),
        (np.array([np.nan], np.float32), np.array([1.0], np.float32), "1/1 values differ"),
        (np.array([1.0], np.float64), np.array([1.0], np.float32), "dtype float64, expected float32"),
        (np.zeros((2, 1), np.float32), np.zeros((2,), np.float32), "shape (2, 1), expected (2,)"),
        (np.array([10**12 + 1], np.int64), np.array([10**12], np.int64), "1/1 values differ"),
        (np.array(True), np.array(False), "1/1 values differ"),
        (np.array(3.0, np.float32), np.array(3.0, np.float32), None),
    ],
)
def test_compare_value(got, expected, problem):
    found = compare_value(got, expected, 1e-3, 1e-7, "output 0")
    assert (found is None) if problem is None else (problem in found)


def test_compare_outputs_counts_and_sequences():
    one = np.ones(2, np.float32)
    assert compare_outputs((one, one), [one], 1e-3, 0) == "2 outputs, expected 1"
    assert compare_outputs(one, [[one, one]], 1e-3, 0).startswith("output 0: expected a sequence")
    assert compare_outputs((one, one), [one, one], 1e-3, 0) is None


# --- expected statuses ----------------------------------------------------------------------


def test_comparison_flags_regressions_unexpected_passes_and_case_set_changes():
    expected = {"a": "pass", "b": "import-error", "c": "pass", "d": "import-error", "gone": "pass"}
    actual = {"a": "pass", "b": "pass", "c": "crash", "d": "compile-error", "new": "pass"}
    comparison = expectations.compare(expected, actual)
    assert comparison.regressions == ["c"]
    assert comparison.unexpected_passes == ["b"]
    assert comparison.removed == ["gone"] and comparison.added == ["new"]
    assert comparison.changed_failures == ["d"] and not comparison.ok
    results = {n: {"status": s, "message": "boom" if n == "c" else ""} for n, s in actual.items()}
    text = expectations.format_comparison(comparison, expected, results)
    assert "REGRESSIONS (expected pass) (1):\n  c: pass -> crash: boom" in text
    assert "UNEXPECTED PASSES" in text and "b: import-error -> pass" in text


def test_comparison_ignores_a_change_between_failures():
    assert expectations.compare({"a": "import-error"}, {"a": "wrong-result"}).ok


def test_expected_file_round_trip(tmp_path):
    path = str(tmp_path / "expected.txt")
    expectations.write_expected({"test_b": "pass", "test_a": "crash"}, path)
    lines = open(path).read().splitlines()
    assert [l for l in lines if not l.startswith("#")] == ["test_a crash", "test_b pass"]
    assert expectations.read_expected(path) == {"test_a": "crash", "test_b": "pass"}


def test_checked_in_expected_file_parses():
    statuses = expectations.read_expected()
    assert statuses and all(name.startswith("test_") for name in statuses)


# --- report and case loading ------------------------------------------------------------------


def test_report_rates_and_op_types():
    results = {
        "test_relu": {"group": "node", "status": "pass", "op_types": ["Relu"]},
        "test_foo": {"group": "node", "status": "import-error", "op_types": ["Foo"], "unsupported": ["Foo"]},
        "test_bar": {"group": "node", "status": "crash", "op_types": ["Bar", "Foo"], "message": "worker died"},
        "test_alexnet": {"group": "light", "status": "timeout", "op_types": ["Conv"], "message": "no result"},
        "test_lrn": {"group": "node", "status": "pass", "op_types": ["LRN"], "warnings": [
            'tilecraft-schedule: schedule_op_3 failed | Diagnostic message at loc("n2(LRN)"("model.onnx":0:0)): x']},
    }
    text = report.render_text(results)
    assert "node   2/4     50.0 %" in text
    assert "light  0/1     0.0 %" in text and "9/9" in text and "NOT met" in text
    assert report.failing_node_op_types(results)[0][:2] == ["Foo", "2"]
    assert report.unsupported_op_types(results) == [["Foo", "1"]]
    assert report.schedule_fallbacks(results) == [["LRN", "1", "test_lrn"]]
    assert report.failing_node_cases(results) == [["test_bar", "crash", "worker died"]]
    markdown = report.render_markdown(results, onnx_version="1.0")
    assert markdown.startswith("<!-- Generated by") and "| light | test_alexnet | timeout | no result |" in markdown


def test_light_cases_use_the_runners_dummy_inputs():
    cases = light_cases()
    assert len(cases) == 9 and {c.group for c in cases} == {"light"}
    payload = next(c for c in cases if c.name == "test_squeezenet").load()
    (inputs, outputs), = payload.data_sets
    assert len(inputs) == 1 and inputs[0].shape == (1, 3, 224, 224) and inputs[0].dtype == np.float32
    assert inputs[0].flat[-1] == np.float32((inputs[0].size - 1) / inputs[0].size)
    assert outputs[0].shape == (1, 1000, 1, 1) and (payload.rtol, payload.atol) == (1e-3, 1e-7)


def test_folder_cases_load_their_data_sets():
    case = next(c for c in folder_cases("pytorch-converted") if c.name == "test_AvgPool2d")
    payload = case.load()
    assert case.op_types == ("AveragePool",) and (payload.rtol, payload.atol) == (1e-3, 1e-7)
    (inputs, outputs), = payload.data_sets
    assert len(inputs) == 1 and len(outputs) == 1


def test_dummy_input_unknown_dims_are_one():
    value = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 4])
    assert np.array_equal(dummy_input(value), np.arange(4, dtype=np.float32).reshape(1, 4) / 4)


def test_real_worker_through_the_pool():
    """One real case through a real worker process, as the suite runs them."""
    case = Case("relu", "node", ("Relu",), lambda: _relu_case(np.maximum(X, 0)))
    results = run_cases([case], jobs=1)
    assert results["relu"]["status"] == "pass", results


# --- shards (test_conformance.py, ../torch/test_opinfo.py) ------------------------------------


def test_a_case_falls_in_one_shard_the_same_in_every_process():
    names = sorted(expectations.read_expected())
    assert [shards.shard_of(n, 8) for n in names] == [zlib.crc32(n.encode()) % 8 for n in names]
    # another interpreter (a different hash seed) puts the cases in the same shards
    script = ("import sys; sys.path.insert(0, %r); from onnx_conformance import shards; "
              "print([shards.shard_of(n, 8) for n in %r])" % (HARNESS_DIR, names[:50]))
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": "123"}, check=True)
    assert other.stdout.strip() == str([shards.shard_of(n, 8) for n in names[:50]])
    # no hashed shard is empty or holds more than twice its share
    counts = collections.Counter(shards.shard_of(n, 8) for n in names)
    assert set(counts) == set(range(8)) and max(counts.values()) < 2 * len(names) / 8


def test_shard_ids_and_selection():
    assert shards.hashed_shard_ids("cases", 3) == ["cases-0of3", "cases-1of3", "cases-2of3"]
    assert shards.shard_id("test_vgg19", "cases", 3, own_shard=True) == "test_vgg19"
    hashed = shards.shard_id("test_abs", "cases", 3)
    assert hashed == f"cases-{shards.shard_of('test_abs', 3)}of3"
    cases = [Case(n, "node", (), lambda: None) for n in ("test_abs", "test_add", "test_relu", "test_sum")]
    key = lambda case: shards.shard_id(case.name, "cases", 3)  # noqa: E731
    picked = [shards.select(cases, key, shard) for shard in shards.hashed_shard_ids("cases", 3)]
    assert sorted(c.name for part in picked for c in part) == [c.name for c in cases]
    assert shards.missing_shards(["cases-0of3", "test_vgg19"], ["cases-0of3"]) == ["test_vgg19"]


def test_a_shard_under_xdist_runs_one_pool_worker(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert shards.pool_jobs() == 1
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert shards.pool_jobs() == default_jobs()


def test_the_light_models_are_shards_of_their_own_and_every_case_has_a_shard():
    suite = _load_by_path("onnx_conformance_suite_shards", "test_conformance.py")

    assert set(suite.LIGHT_NAMES) == {c.name for c in light_cases()} and len(suite.SHARD_IDS) == 9 + suite.HASHED_SHARDS
    expected = expectations.read_expected()
    assert not shards.missing_shards([suite.name_shard(n) for n in expected], suite.SHARD_IDS)
    assert all(suite.name_shard(n) == n for n in suite.LIGHT_NAMES)
    # a failing shard says how to rerun and record just its offending cases
    assert suite._update_command(["test_b", "test_a"]).endswith("run.py -k '^(test_a|test_b)$' --update-expected")


def _load_by_path(name: str, file: str):
    """A module of this folder under its own name: the torch harness has a ``run`` and a
    test module of its own too, and whichever ran first in a process owns the bare name."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_py_merges_several_results_files(tmp_path, capsys):
    run = _load_by_path("onnx_conformance_run", "run.py")
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"test_a": {"group": "node", "status": "pass", "op_types": ["Relu"]}}))
    second.write_text(json.dumps({"test_b": {"group": "simple", "status": "crash", "op_types": [], "message": "x"}}))
    assert run.main(["--from-results", str(first), str(second)]) == 0
    out = capsys.readouterr().out
    assert "2 case results from" in out and "simple  0/1" in out and "node    1/1" in out
