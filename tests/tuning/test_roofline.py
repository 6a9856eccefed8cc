"""The roofline as the headroom bar (issue #44, tunespace): a task's attainable bound is
``min(FMA peak, bandwidth x arithmetic intensity)`` (runtime/peak.py), its headroom the gap to
that bound, and a task inside the loops around a grouped convolution's per-group kernels
counts each of its executions (``Task.runs``). No timings are asserted: bounds are given."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlir_text
from tilecraft.runtime import peak
from tilecraft.runtime.peak import Roofline, attainable_gflops
from tilecraft.tuning import GradientTaskScheduler, TuneOptions, extract_tasks, space_for
from tilecraft.tuning.session import TaskState

TARGET = "llvm"
# A machine of round figures: 200 GFLOPS; 400 GB/s within 1 MiB, 50 within 32 MiB, 20 beyond.
ROOF = Roofline(200.0, (("L2", 1 << 20, 400.0), ("L3", 32 << 20, 50.0), ("memory", float("inf"), 20.0)))


def test_the_bound_is_the_peak_or_bandwidth_times_intensity():
    # 100 flops per byte: compute-bound, whatever the bandwidth.
    assert attainable_gflops(1e9, 1e7, 200.0, 50.0) == 200.0
    # 0.5 flops per byte at 50 GB/s: 25 GFLOPS.
    assert attainable_gflops(1e6, 2e6, 200.0, 50.0) == pytest.approx(25.0)
    # The ridge: 4 flops per byte at 50 GB/s is exactly the peak.
    assert attainable_gflops(4e6, 1e6, 200.0, 50.0) == pytest.approx(200.0)
    assert attainable_gflops(1e6, 0, 200.0, 50.0) == 200.0  # moves nothing: the peak


def test_the_level_is_the_first_that_holds_the_bytes():
    assert ROOF.level_for(512 << 10)[0] == "L2"
    assert ROOF.level_for(1 << 20)[0] == "L2"
    assert ROOF.level_for(2 << 20)[0] == "L3"
    assert ROOF.level_for(1 << 30)[0] == "memory"
    # One flop per byte: 400, 50, 20 GFLOPS as the bytes leave each level (capped by 200).
    assert [ROOF.attainable(b, b) for b in (1 << 19, 4 << 20, 64 << 20)] == [200.0, 50.0, 20.0]


def test_task_bytes_and_intensity():
    (task,) = extract_tasks(mlir_text.matmul(64, 32, 128), TARGET)
    # A (64x128), B (128x32) and C (64x32), f32, each once.
    assert task.moved_bytes == 4 * (64 * 128 + 128 * 32 + 64 * 32)
    assert task.flops == 2 * 64 * 32 * 128
    assert task.runs == (1,) and task.executions == 1


def _states(task, gflops, roof=ROOF):
    state = TaskState(task, space_for(task, TARGET), "random", 0, None, None, roof)
    state.default_cost = task.flops / (gflops * 1e9)
    return state


def test_a_memory_bound_task_at_its_bandwidth_bound_has_no_headroom():
    """A depthwise convolution far below the FMA peak but at its bandwidth bound is not where
    tuning pays; a matmul at the same fraction of the peak is."""
    (depthwise,) = extract_tasks(mlir_text.depthwise_nhwc(1, 58, 58, 64, 3, 3), TARGET)
    (matmul,) = extract_tasks(mlir_text.matmul(256, 256, 256), TARGET)
    intensity = depthwise.flops / depthwise.moved_bytes
    # 9 FMAs per output element, about 8 bytes moved for it (its input and itself).
    assert depthwise.kind == "depthwise_conv2d" and 1.5 < intensity < 2.5
    dw = _states(depthwise, 0.95 * ROOF.attainable(depthwise.flops, depthwise.moved_bytes))
    assert dw.bound_gflops == pytest.approx(ROOF.bandwidth_for(depthwise.moved_bytes) * intensity)
    assert dw.bound_name == "L3" and dw.bound_gflops < ROOF.peak_gflops
    assert dw.headroom() == pytest.approx(0.05)
    mm = _states(matmul, dw.gflops(dw.default_cost))  # as many GFLOPS: far from its bound, the peak
    assert mm.bound_gflops == ROOF.peak_gflops and mm.bound_name == "FMA peak"
    assert mm.headroom() > 0.4  # about half the peak
    scheduler = GradientTaskScheduler([dw, mm], TuneOptions(trials=20, trials_per_task=0, progress=False),
                                      None, None)
    assert scheduler.priority(mm) / scheduler.weight(mm) > scheduler.priority(dw) / scheduler.weight(dw)
    plan = scheduler.plan(20)
    assert "of its bound" in plan and "L3" in plan
    # Both at their bounds: the model has no headroom, memory-bound or not.
    both = [dw, _states(matmul, 0.9 * ROOF.peak_gflops)]
    assert GradientTaskScheduler(both, TuneOptions(progress=False), None, None).no_headroom() is not None
    # Without a roofline, the FMA peak bounds contractions alone, as before.
    only_peak = TaskState(depthwise, space_for(depthwise, TARGET), "random", 0, None, 200.0)
    assert only_peak.bound_gflops == 200.0 and only_peak.bound_name == "FMA peak"


def _grouped_conv_model(channels: int, groups: int, size: int):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((channels, channels // groups, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], group=groups, pads=[1, 1, 1, 1])], "grouped",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, size, size])],
        [numpy_helper.from_array(weight, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_grouped_convolutions_per_group_kernel_counts_every_execution():
    """The frontend computes a grouped convolution as one group's kernel inside a loop over
    the groups (RegNet's 3 % of the FMA peak was that kernel's time per model run over one
    group's flops): its executions times its flops are the whole convolution's."""
    channels, groups, size = 64, 4, 14
    tasks = [t for t in extract_tasks(_grouped_conv_model(channels, groups, size), TARGET)
             if t.kind == "conv2d"]
    whole = 2 * size * size * channels * (channels // groups) * 9
    assert sum(t.flops * t.executions for t in tasks) == whole
    assert all(t.executions >= groups for t in tasks)
    assert all(t.flops * groups <= whole for t in tasks)


def test_the_bandwidth_is_measured_once_per_machine_threads_and_working_set(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(peak.PEAK_ENVIRONMENT, "100")
    asked = []
    monkeypatch.setattr(peak, "measure_bandwidth", lambda threads, size: asked.append(size) or 1e-6 * size)
    roof = peak.roofline(1, 1 << 20, 32 << 20)
    assert roof is not None and roof.peak_gflops == 100.0
    assert [level[0] for level in roof.levels] == ["L2", "L3", "memory"]
    assert asked == [1 << 19, 16 << 20, 128 << 20]  # half the L2, half the L3, four L3s
    assert peak.roofline(1, 1 << 20, 32 << 20) == roof and len(asked) == 3  # cached
    stored = json.loads((tmp_path / "bandwidth.json").read_text())
    assert stored == {f"{peak.machine_key(1)}-{size}": 1e-6 * size for size in asked}
    monkeypatch.setattr(peak, "measure_bandwidth", lambda threads, size: None)
    assert peak.roofline(2, 1 << 20, 32 << 20) is None  # a level that cannot be measured


@pytest.mark.skipif(shutil.which("cc") is None, reason="the probe is built with the host C compiler")
def test_the_probe_measures_a_bandwidth(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(peak, "STREAM_BYTES", 64 << 20)  # short: the figure is not checked
    gbs = peak.measure_bandwidth(1, 256 << 10)
    assert gbs is not None and gbs > 0.1


# ---- the spaces of the two op classes with real headroom contain the fast tiles ------------

AVX512 = "llvm -mcpu=znver5"  # tests/pinned_targets.py's: the same space on any host


def test_a_per_group_kernels_space_holds_whole_channel_vectors_and_wide_rows():
    """RegNet's grouped 3x3 (16 channels per group): one 16-lane vector of output channels
    per register row, rows of 7 or 14 columns (7 or 14 accumulators), the reduction over the
    group's 16 input channels in one step or several."""
    (task,) = [t for t in extract_tasks(_grouped_conv_model(64, 4, 14), AVX512) if t.kind == "conv2d"]
    assert task.ranges[-1] == 16 and task.executions >= 4
    space = space_for(task, AVX512)
    for reg_ow in (7, 14):
        for step_ic in (4, 16):
            tile = {**space.default(), "reg_oc": 16, "reg_ow": reg_ow, "step_ic": step_ic}
            assert space.is_valid(tile), tile


def test_a_few_input_channel_1x1_space_holds_the_tiles_that_won_alone():
    """EfficientNet's 112x112 1x1 convolution over 16 input channels: the tile that ran 1.19x
    faster than the default alone (docs/performance.md, round 23: reg_ow 7, output-channel
    blocks outermost, reg_oc 32, step_ic 4), and the whole reduction as one step."""
    (task,) = extract_tasks(mlir_text.conv_nhwc(1, 112, 112, 16, 1, 1, 96), AVX512)
    space = space_for(task, AVX512)
    won = {**space.default(), "reg_ow": 7, "oc_outer": 1, "reg_oc": 32, "step_ic": 4}
    assert space.is_valid(won) and space.is_valid({**won, "step_ic": 16})
    assert space.is_valid({**won, "reg_oc": 48, "reg_ow": 8})  # 3 x 8 accumulators of 32
