"""Tuning the reduced-precision dot-product kernels (tuning/kernel_tasks.py): their configs
(pipelines/tensor/register_tiles.py's KernelConfig), spaces (schedule/space.py's
KernelSpace), tasks, records applied by the kernel passes, and ``tune --precision``.

The kernels are built only for targets with AVX512-BF16 / VNNI, so the IR checks pin
``AVX512`` (tests/pinned_targets.py) and run on any host; the checks that run kernels
need a host with AVX-512 BF16 (bf16) or VNNI (int8)."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from mlir import ir  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.compiler.options import CompileOptions  # noqa: E402
from tilecraft.errors import KnobError, PipelineError, TaskExtractionError, TuningError  # noqa: E402
from tilecraft.pipelines.cpu import cpu_pipeline  # noqa: E402
from tilecraft.pipelines.target import Target  # noqa: E402
from tilecraft.pipelines.tensor import bf16_matmul, int8_matmul  # noqa: E402
from tilecraft.pipelines.tensor.int8_matmul import Window  # noqa: E402
from tilecraft.pipelines.tensor.register_tiles import (KernelConfig, format_kernel_configs,  # noqa: E402
                                                       parse_kernel_configs)
from tilecraft.runtime.host import host_cpu_flags  # noqa: E402
from tilecraft.schedule.record_plan import kernel_configs, with_kernel_configs, with_records  # noqa: E402
from tilecraft.schedule.records import Record, best_records, canonical_target  # noqa: E402
from tilecraft.schedule.space import KernelSpace, space_for  # noqa: E402
from tilecraft.schedule.task import Task  # noqa: E402
from tilecraft.tools.cli import run_cli  # noqa: E402
from tilecraft.tuning.kernel_tasks import (extract_kernel_tasks, kernel_measured_module, payload_pipeline,  # noqa: E402
                                           kernel_pipeline)

from pinned_targets import AVX2, AVX512  # noqa: E402

needs_bf16_host = pytest.mark.skipif("avx512_bf16" not in host_cpu_flags(),
                                     reason="runs vdpbf16ps kernels; this host has no AVX512-BF16")


@pytest.fixture(autouse=True)
def two_threads(monkeypatch):
    """Kernels are split for the target's threads, which their names say (``_t2``)."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")


def _model(seed: int = 0) -> onnx.ModelProto:
    """A 3x3 convolution of 8 channels (a window kernel), ReLU, then a dense layer with a
    bias (a matmul kernel whose bias becomes its epilogue)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    m = rng.standard_normal((16 * 6 * 6, 40)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["f"]),
             helper.make_node("MatMul", ["f", "m"], ["p"]),
             helper.make_node("Add", ["p", "b"], ["y"])]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 40])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(m, "m"),
                               numpy_helper.from_array(b, "b"),
                               numpy_helper.from_array(np.array([1, -1], np.int64), "shape")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _kernel_task(kind: str, m: int, n: int, k: int, name: str = "kernel") -> Task:
    return Task(key="k", name=name, kind=kind, op_name="func.call", ranges=(m, n, k),
                parallel=(True, True, False), element_type="bf16", flops=2 * m * n * k, count=1, payload="")


# ---- configs and spaces ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["bf16_kernel", "int8_kernel"])
@pytest.mark.parametrize("m, n", [(1, 40), (36, 16), (49, 1000), (3136, 64), (128, 3072), (7, 130), (197, 768)])
@pytest.mark.parametrize("threads", [1, 2, 8])
def test_space_default_is_the_builders_own_config(kind, m, n, threads):
    space = KernelSpace(_kernel_task(kind, m, n, 64), replace(Target.parse(AVX512), num_threads=threads))
    default = space.default()
    assert space.validate(default) == default
    assert space.kernel_config(default) == KernelConfig.default(m, n, 16, threads)


def test_space_points_are_valid_configs_and_bad_ones_are_refused():
    space = space_for(_kernel_task("int8_kernel", 3136, 64, 576), AVX512)
    assert [k.name for k in space.knobs] == ["kr_rows", "kr_vectors", "kr_row_tasks"]
    assert space.knobs[1].values == (1, 2, 3, 4)  # 64 columns: up to four vectors of 16
    import random
    rng = random.Random(0)
    for _ in range(50):
        config = space.random(rng)
        space.kernel_config(config).check(3136, 64, 16)  # every point the tuner proposes builds
    with pytest.raises(KnobError, match="more than 24"):
        space.validate({"kr_rows": 12, "kr_vectors": 4, "kr_row_tasks": 1})  # 48 accumulators
    with pytest.raises(KnobError, match="kr_vectors"):
        space.validate({"kr_rows": 4, "kr_vectors": 5, "kr_row_tasks": 1})  # not a value of the knob
    narrow = KernelSpace(_kernel_task("bf16_kernel", 4, 16, 32), AVX512)
    with pytest.raises(KnobError, match="register tiles of M = 4"):
        narrow.validate({"kr_rows": 2, "kr_vectors": 1, "kr_row_tasks": 3})  # 2 row tiles, 3 tasks
    with pytest.raises(KnobError, match="not a dot-product kernel"):
        KernelSpace(_kernel_task("matmul", 4, 16, 32), AVX512)


def test_bad_kernel_configs_fail_the_build_not_the_kernel():
    with pytest.raises(PipelineError, match="task_rows 5 not a positive multiple of rows 2"):
        KernelConfig(2, 1, 5).check(64, 64, 16)
    with pytest.raises(PipelineError, match=r"vectors 3 not in 1\.\.2"):
        KernelConfig(2, 3, 2).check(64, 20, 16)
    with ir.Context(), ir.Location.unknown(), pytest.raises(PipelineError, match="more than 24"):
        bf16_matmul.kernel_module(64, 64, 64, 1, config=KernelConfig(12, 4, 12))
    with pytest.raises(PipelineError, match="configs item"):
        parse_kernel_configs("tilecraft_bf16_matmul_4x4x4_t1:6.4", "p")
    configs = {"a_kernel": KernelConfig(6, 4, 12), "b": KernelConfig(1, 1, 1)}
    assert parse_kernel_configs(format_kernel_configs(configs), "p") == configs


def test_a_config_changes_the_kernel_and_its_name():
    with ir.Context(), ir.Location.unknown():
        default = str(int8_matmul.kernel_module(64, 64, 64, True, 1))
        other = int8_matmul.kernel_module(64, 64, 64, True, 1, config=KernelConfig(2, 2, 8))
        text = str(other)
    assert "@tilecraft_int8_matmul_64x64x64_u8_t1(" in default
    assert "@tilecraft_int8_matmul_64x64x64_u8_t1_r2v2b8(" in text
    # 2 rows x 2 vectors: four accumulators carried over k, 32 columns per tile: 2 tiles x 8 row blocks
    assert "tensor<2x16x128xi8>" in text and "scf.forall (%arg3, %arg4) in (8, 2)" in text


# ---- tasks, records, the built kernel --------------------------------------------------------


def test_kernel_tasks_of_a_bf16_build():
    tasks = extract_kernel_tasks(_model(), CompileOptions(target=AVX512, precision="bf16"))
    names = [t.name for t in tasks]
    assert names == ["tilecraft_bf16_matmul_36x16x72_t2_conv1x8x8x8_k3x3_s1x1_d1x1",
                     "tilecraft_bf16_matmul_1x40x576_t2"]  # heaviest first
    assert [t.kind for t in tasks] == ["bf16_kernel"] * 2 and tasks[0].ranges == (36, 16, 72)
    assert len({t.key for t in tasks}) == 2


def test_kernel_tasks_of_a_calibrated_int8_build():
    """Static quantization (calibration) makes the convolution an int8 window kernel too."""
    pytest.importorskip("onnxruntime")
    samples = [{"x": np.random.default_rng(i).standard_normal((1, 8, 6, 6)).astype(np.float32)} for i in range(2)]
    tasks = extract_kernel_tasks(_model(), CompileOptions(target=AVX512, precision="int8", calibration=samples))
    assert {t.kind for t in tasks} == {"int8_kernel"}
    assert any("_conv1x8x8x8_k3x3_s1x1_d1x1" in t.name for t in tasks), [t.name for t in tasks]


def test_no_kernels_without_avx512_bf16():
    with pytest.raises(TaskExtractionError, match="no dot-product kernel"):
        extract_kernel_tasks(_model(), CompileOptions(target=AVX2, precision="bf16"))


@pytest.mark.parametrize("kind, window, name", [
    ("bf16_kernel", None, "tilecraft_bf16_matmul_36x40x72_t2"),
    ("bf16_kernel", Window((1, 8, 8, 8), (3, 3), (1, 1), (1, 1), 6, 6),
     "tilecraft_bf16_matmul_36x40x72_t2_conv1x8x8x8_k3x3_s1x1_d1x1"),
    ("int8_kernel", None, "tilecraft_int8_matmul_36x40x72_s8_t2"),
    ("int8_kernel", Window((1, 8, 8, 8), (3, 3), (1, 1), (1, 1), 6, 6),
     "tilecraft_int8_matmul_36x40x72_s8_t2_conv1x8x8x8_k3x3_s1x1_d1x1"),
])
def test_payload_builds_the_tasks_kernel(kind, window, name):
    """What a candidate compiles makes the very kernel the task names, a config applied
    (the kernel pass's ``configs``) makes it with that config."""
    from tilecraft.tuning.kernel_tasks import _task

    task = _task(kind, name, 36, 40, 72, window, False, 1)
    target = Target.parse(AVX512)
    config = KernelConfig(3, 1, 9)
    for configs, built in (({}, name), ({kind: {name: config}}, name + "_r3v1b9")):
        context = ir.Context()
        module = kernel_measured_module(task.payload, context)
        pipeline = with_kernel_configs(payload_pipeline(kind, target), configs)
        simplify = pipeline.stages[: pipeline.stage_names.index("simplify") + 1]
        with context, ir.Location.unknown():
            type(pipeline)(simplify).run(module)
        assert re.search(rf"call @{built}(_epilogue\d+)?\(", str(module)), str(module)[:3000]


def _record(task: Task, config: dict[str, int], target: str) -> Record:
    return Record(task=task.describe(), config=config, status="ok", costs=[1e-6], gflops=1.0,
                  target=canonical_target(target))


def test_records_of_f32_ops_and_kernels_never_cross(tmp_path):
    target = AVX512
    tasks = extract_kernel_tasks(_model(), CompileOptions(target=target, precision="bf16"))
    conv = tasks[0]
    records = tmp_path / "records.jsonl"
    f32_task = tilecraft.tuning.extract_tasks(_model(), target)[0]
    f32_config = space_for(f32_task, target).default()
    lines = [_record(conv, {"kr_rows": 4, "kr_vectors": 1, "kr_row_tasks": 3}, target),
             _record(f32_task, f32_config, target)]
    records.write_text("".join(r.to_json() + "\n" for r in lines))
    configs = kernel_configs(best_records([*lines]), target)
    assert configs["bf16_kernel"] == {conv.name: KernelConfig(4, 1, 12)} and configs["int8_kernel"] == {}
    # The f32 build's pipeline has no kernel pass: the kernel record leaves it as it was,
    # but for the schedule's records.
    f32 = cpu_pipeline(Target.parse(target))
    f32_tuned = with_records(f32, records, Target.parse(target))
    assert "configs=" not in str(f32_tuned.to_pass_pipeline())
    bf16_tuned = with_records(kernel_pipeline("bf16_kernel", target), records, Target.parse(target))
    assert f"configs={conv.name}:4.1.12" in bf16_tuned.to_pass_pipeline()


def test_a_record_the_space_rejects_is_ignored_with_a_warning():
    task = _kernel_task("bf16_kernel", 36, 16, 72, name="tilecraft_bf16_matmul_36x16x72_t1")
    record = _record(task, {"kr_rows": 12, "kr_vectors": 1, "kr_row_tasks": 32}, AVX512)
    with pytest.warns(RuntimeWarning, match="ignored"):
        assert kernel_configs({task.key: record}, AVX512)["bf16_kernel"] == {}


@needs_bf16_host
def test_a_tuned_bf16_build_applies_its_record_and_matches_f32(tmp_path):
    target = AVX512
    model = _model()
    tasks = extract_kernel_tasks(model, CompileOptions(target=target, precision="bf16"))
    records = tmp_path / "records.jsonl"
    records.write_text(_record(tasks[0], {"kr_rows": 5, "kr_vectors": 1, "kr_row_tasks": 2}, target).to_json() + "\n")
    tuned = tilecraft.compile(model, target=target, precision="bf16", tuning_records=str(records))
    # the convolution's kernel with its record's config: 5-row tiles, 2 tasks of 20 rows
    assert re.search(rf"call @{tasks[0].name}_r5v1b20(_epilogue\d+)?\(", tuned.ir("simplify"))
    reference = tilecraft.compile(model, target=target)
    x = np.random.default_rng(3).standard_normal((1, 8, 6, 6)).astype(np.float32)
    expected = reference(x)
    np.testing.assert_allclose(tuned(x), expected, rtol=0, atol=3e-2 * np.abs(expected).max())
    assert tuned.accuracy.max_relative_error < 3e-2


def test_cli_lists_the_kernel_tasks_of_a_precision(tmp_path, capsys):
    path = tmp_path / "net.onnx"
    onnx.save(_model(), str(path))
    assert run_cli(["tune", str(path), "--precision", "bf16", "--target", AVX512,
                    "--tasks", "list"]) == 0
    out = capsys.readouterr().out
    assert "tilecraft_bf16_matmul_36x16x72_t2_conv1x8x8x8_k3x3_s1x1_d1x1" in out and "bf16_kernel" in out


def test_cli_lists_a_calibrated_int8_builds_window_kernel(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    path, calibration = tmp_path / "net.onnx", tmp_path / "calibration.npz"
    onnx.save(_model(), str(path))
    np.savez(calibration, x=np.random.default_rng(0).standard_normal((1, 8, 6, 6)).astype(np.float32))
    assert run_cli(["tune", str(path), "--precision", "int8", "--calibration", str(calibration),
                    "--target", AVX512, "--tasks", "list"]) == 0
    assert "tilecraft_int8_matmul_36x16x72_u8_t2_conv1x8x8x8_k3x3_s1x1_d1x1" in capsys.readouterr().out


@needs_bf16_host
def test_cli_tunes_a_bf16_build(tmp_path, capsys):
    path = tmp_path / "net.onnx"
    onnx.save(_model(), str(path))
    records = tmp_path / "records.jsonl"
    code = run_cli(["tune", str(path), "--precision", "bf16", "--target", AVX512,
                    "-o", str(records), "--trials", "4", "--tuner", "random", "--validate-top", "1",
                    "--no-end-to-end"])
    assert code == 0, capsys.readouterr().err
    lines = [Record.from_json(line) for line in records.read_text().splitlines()]
    assert lines and {r.task["kind"] for r in lines} == {"bf16_kernel"} and all(r.ok for r in lines)
    assert set(lines[0].config) == {"kr_rows", "kr_vectors", "kr_row_tasks"}


def test_precision_tuning_searches_the_kernel_space_only():
    with pytest.raises(TuningError, match="space='sketch' is for f32 ops"):
        tilecraft.tune(_model(), target=AVX512, precision="bf16", space="sketch", tuning_records="unused.jsonl")
