"""Fusion groups as tuning tasks: extract_tasks returns the groups the schedule computes as
one loop nest, a record for a group applies to its anchor when the model (or the task's own
payload, which is what the measurement worker builds) is compiled, and the group stays one
loop nest with the tuned plan."""

import re

import mlir_text
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

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
    # A register-tile height the default's schedule has nowhere (its 6-row tiles leave a
    # peeled 2-row one on AVX2; 8 rows on AVX-512).
    default_schedule = tilecraft.compile(model, target=TARGET).ir("schedule")
    (reg_m,) = [v for v in next(k.values for k in space.knobs if k.name == "reg_m")
                if v > 1 and f"vector<{v}x" not in default_schedule][:1]
    config = {**space.default(), "reg_m": reg_m}
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
        # The record's register-tile height, and still one loop nest for the group.
        assert f"vector<{reg_m}x" in scheduled and f"vector<{reg_m}x" not in default.ir("schedule")
        assert tuned.kernel_count == default.kernel_count == 1
        np.testing.assert_allclose(tuned(a, b, bias), expected, rtol=1e-4, atol=1e-4)


def test_an_input_channel_cache_block_applies_to_a_conv_group(tmp_path):
    """ConvSpace's ``cache_ic`` splits a convolution's input channels into blocks, each
    accumulated into the task's output before the next (onnxruntime's NCHWc kernels work
    so: the filter slice of one block stays in L1). In a group with an epilogue (bias,
    ReLU) the epilogue then runs once, after the last block, not on each register tile's
    accumulators: before that, the group dropped the knob, so every value of it built the
    same kernel and the tuner measured one schedule under many names."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4),
         helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 28, 28])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 28, 28])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    (task,) = [t for t in extract_tasks(model, TARGET) if t.kind == "conv2d"]
    space = space_for(task, TARGET)
    config = {**space.default(), "cache_ic": 16}
    assert space.is_valid(config)
    records = tmp_path / "records.jsonl"
    _write_record(records, task, config)
    x = rng.standard_normal((1, 64, 28, 28)).astype(np.float32)
    default = tilecraft.compile(model, target=TARGET, keep_ir=True)
    tuned = tilecraft.compile(model, target=TARGET, tuning_records=records, keep_ir=True)
    np.testing.assert_allclose(tuned(x), default(x), rtol=1e-4, atol=1e-4)
    # Blocks of 16 input channels around the register tiles, in the tuned build only.
    block_loop = r"scf\.for %\w+ = %c0 to %c64 step %c16 .*\n(.*\n){0,3}\s*scf\.for"
    assert re.search(block_loop, tuned.ir("loops"))
    assert not re.search(block_loop, default.ir("loops"))
