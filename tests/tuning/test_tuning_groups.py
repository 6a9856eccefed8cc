"""Fusion groups as tuning tasks: extract_tasks returns the groups the schedule computes as
one loop nest, a record for a group applies to its anchor when the model (or the task's own
payload, which is what the measurement worker builds) is compiled, and the group stays one
loop nest with the tuned plan."""

import mlir_text
import numpy as np
import pytest
import tilecraft
from tilecraft.schedule.records import Record, RecordWriter, canonical_target
from tilecraft.tuning import extract_tasks, space_for

TARGET = "llvm"
M, N, K = 128, 256, 64


@pytest.fixture(autouse=True)
def two_threads(monkeypatch):
    # Groups become one loop nest through the anchor's thread level; pin it to two threads
    # so the tests do not depend on the machine's core count.
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")


@pytest.fixture
def model() -> str:
    return mlir_text.matmul_bias_relu(M, N, K)


def test_a_group_is_one_task_with_its_epilogue(model):
    (task,) = extract_tasks(model, TARGET)
    assert task.kind == "matmul" and task.op_name == "linalg.matmul"
    assert task.name == f"matmul_{M}x{N}x{K}_f32_fused1"
    assert task.ranges == (M, N, K)
    # The matmul's multiply-adds plus the epilogue's add and max per output element.
    assert task.flops == 2 * M * N * K + 2 * M * N
    assert "linalg.matmul" in task.payload and "arith.maximumf" in task.payload
    # Without operator fusion (opt_level 2) each op is a task of its own.
    kinds = sorted(t.kind for t in extract_tasks(model, TARGET, opt_level=2))
    assert kinds == ["elementwise", "matmul"]


def test_the_same_group_twice_is_one_task_counted_twice():
    a, b, bias, c = (f"tensor<{M}x{K}xf32>", f"tensor<{K}x{N}xf32>", f"tensor<{N}xf32>",
                     f"tensor<{M}x{N}xf32>")
    single = mlir_text.matmul_bias_relu(M, N, K)
    body = single[single.index("{\n") + 2: single.rindex("  return")]
    twice = (f"func.func @main(%a: {a}, %b: {b}, %bias: {bias}, %a2: {a}) -> ({c}, {c}) {{\n"
             + body + body.replace("%a,", "%a2,").replace("%acc", "%acc2").replace("%mm", "%mm2")
             .replace("%empty", "%empty2").replace("%r ", "%r2 ").replace("%zero", "%zero2")
             .replace("%acc2_init", "%acc_init2")
             + f"  return %r, %r2 : {c}, {c}\n}}\n")
    (task,) = extract_tasks(twice, TARGET)
    assert task.count == 2 and task.name.endswith("_fused1")


def _write_record(path, task, config):
    with RecordWriter(path) as writer:
        writer.write(Record(task=task.describe(), config=config, status="ok", costs=[1e-4],
                            gflops=task.flops / 1e-4 / 1e9, target=canonical_target(TARGET)))


def test_a_group_record_applies_to_the_model_and_to_the_task_payload(tmp_path, model):
    (task,) = extract_tasks(model, TARGET)
    space = space_for(task, TARGET)
    config = {**space.default(), "reg_m": 4}
    assert space.is_valid(config) and config != space.default()
    records = tmp_path / "records.jsonl"
    _write_record(records, task, config)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    bias = rng.standard_normal(N, dtype=np.float32)
    expected = np.maximum(a @ b + bias, 0)
    for source in (model, task.payload):
        default = tilecraft.compile(source, target=TARGET)
        tuned = tilecraft.compile(source, target=TARGET, tuning_records=records)
        scheduled = tuned.ir("schedule")
        # The record's 4-row register tile, and still one loop nest for the group.
        assert "vector<4x" in scheduled and "vector<4x" not in default.ir("schedule")
        assert tuned.kernel_count == default.kernel_count == 1
        np.testing.assert_allclose(tuned(a, b, bias), expected, rtol=1e-4, atol=1e-4)
