"""Thread tasks of convolutions and pooling whose output rows split neither in 2 nor in 4
(schedule/conv_plan.py: ``busiest_chunk`` bands of rows where the channel split leaves a
thread idle): the chunks chosen, the plans of SqueezeNet's layers, and compiled layers on
two threads against onnxruntime, their ``scf.forall`` checked to run the bands."""

import re
import warnings

import numpy as np
import onnxruntime as ort
import pytest
from mlir import ir
from onnx import TensorProto, helper, numpy_helper

import mlir_text as mt
import tilecraft
from pinned_targets import AVX2
from tilecraft.pipelines.loop_nest import analyze_loop_nests
from tilecraft.schedule.op_schedule import busiest_chunk, busy_share
from tilecraft.schedule.plan import plan_default_schedule


@pytest.mark.parametrize("extent, threads, chunk", [
    (55, 2, 5),    # 11 tasks: 6 rounds of 2, the last half idle (0.92); 5 tasks of 11: 0.83
    (13, 2, 1),    # a prime: 13 one-row tasks
    (27, 2, 3),    # 9 tasks of 3 (0.9); 3 tasks of 9: 0.75
    (56, 2, 7),    # 8 equal tasks: the fewest among the busiest that reach 4 per thread
    (111, 2, 37),  # 3 tasks: 37 tasks would exceed 8 per thread
    (3, 4, None),  # fewer rows than threads
    (55, 1, None),  # one thread: no split
])
def test_busiest_chunk(extent, threads, chunk):
    assert busiest_chunk(extent, threads) == chunk


def test_busy_share():
    assert busy_share(4, 2) == 1.0
    assert busy_share(3, 2) == 0.75
    assert busy_share(1, 2) == 0.5


def _nest(source: str, op_name: str):
    with ir.Context():
        module = ir.Module.parse(source)
        (nest,) = [nest for op, nest in analyze_loop_nests(module.operation) if op.name == op_name]
        return nest


def _plan(source: str, op_name: str, threads: int = 2):
    return plan_default_schedule(_nest(source, op_name), 0, vector_bits=256, num_threads=threads)


def test_squeeze_to_16_channels_splits_rows():
    """SqueezeNet's Fire squeeze at 55x55 (1x1, 64 -> 16): one 16-channel register tile, so
    the channel split was one task; now 11 bands of 5 rows, channels whole."""
    plan = _plan(mt.conv_nhwc(1, 55, 55, 64, 1, 1, 16), "linalg.conv_2d_nhwc_hwcf")
    assert plan.thread_tiles == (1, 5, 0, 0, 0, 0, 0)


def test_three_channel_tasks_become_row_bands():
    """48 output channels in 16-channel tiles are 3 tasks (0.75 busy on 2 threads); 27 rows
    are 9 tasks of 3 (0.9). (At 13x13 the filter outweighs the image: channels stay.)"""
    plan = _plan(mt.conv_nhwc(1, 29, 29, 32, 3, 3, 48), "linalg.conv_2d_nhwc_hwcf")
    assert plan.thread_tiles == (1, 3, 0, 0, 0, 0, 0)


def test_balanced_channel_split_stays():
    """SqueezeNet's 13x13 expand (3x3, 48 -> 192): equal channel tasks fill both threads in
    every round; the channels stay split (each task reads its filter slice only). 12 tasks
    of one 16-channel tile since tasks aim at 4 per thread (test_thread_tasks.py; were 4 of 48)."""
    plan = _plan(mt.conv_nhwc(1, 15, 16, 48, 3, 3, 192), "linalg.conv_2d_nhwc_hwcf")
    assert plan.thread_tiles == (1, 0, 0, 16, 0, 0, 0)


def test_even_rows_keep_their_split():
    """56 rows split in equal bands (8 of 7 since tasks aim at 4 per thread, test_thread_tasks.py)."""
    plan = _plan(mt.conv_nhwc(1, 58, 58, 64, 3, 3, 16), "linalg.conv_2d_nhwc_hwcf")
    assert plan.thread_tiles == (1, 7, 0, 0, 0, 0, 0)


def test_one_thread_has_no_tasks():
    assert _plan(mt.conv_nhwc(1, 55, 55, 64, 1, 1, 16), "linalg.conv_2d_nhwc_hwcf", threads=1).thread_tiles is None


def test_depthwise_channels_in_one_vector_split_rows():
    """A depthwise 3x3 over 8 channels (one vector) at 55x55: rows in 11 bands of 5."""
    plan = _plan(mt.depthwise_nhwc(1, 57, 57, 8, 3, 3), "linalg.depthwise_conv_2d_nhwc_hwc")
    assert plan.thread_tiles[1] == 5 and not plan.thread_tiles[3]


# ---- compiled on two threads against onnxruntime ---------------------------------------------

def _layer(kind: str, size: int, cin: int, cout: int, stride: int = 1):
    """NCHW ONNX: ``conv`` (k x k + bias + Relu), ``depthwise`` (3x3 group conv + Relu) or
    ``maxpool`` (3x3, stride 2, ceil mode, as SqueezeNet's)."""
    rng = np.random.default_rng(size * 100 + cin)
    x = rng.standard_normal((1, cin, size, size)).astype(np.float32)
    inits, nodes = [], []
    if kind == "maxpool":
        out = (1, cin, -(-(size - 3) // 2) + 1, -(-(size - 3) // 2) + 1)
        nodes.append(helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))
    else:
        k = 1 if kind == "pointwise" else 3
        groups = cin if kind == "depthwise" else 1
        side = (size + 2 * (k // 2) - k) // stride + 1
        out = (1, cout, side, side)
        w = rng.standard_normal((cout, cin // groups, k, k)) / np.sqrt(k * k * cin / groups)
        inits = [numpy_helper.from_array(w.astype(np.float32), "w"),
                 numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b")]
        nodes += [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[k // 2] * 4, group=groups,
                                   strides=[stride, stride]),
                  helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, x


@pytest.mark.parametrize("kind, size, cin, cout, stride, tasks", [
    ("pointwise", 55, 64, 16, 1, 11),   # SqueezeNet's squeeze: 11 bands of 5 rows
    ("conv", 27, 32, 48, 1, 9),         # 3 channel tasks -> 9 bands of 3 rows
    ("conv", 55, 16, 24, 2, 14),        # stride 2, 28 rows: 14 bands of 2 (4 per thread or more, test_thread_tasks.py)
    ("depthwise", 55, 8, 8, 1, 11),     # one channel vector: 11 bands of 5 rows
    ("maxpool", 55, 8, 8, 1, 9),        # 27 rows of 8 channels, ceil mode
])
def test_bands_match_onnxruntime_on_two_threads(kind, size, cin, cout, stride, tasks, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model, x = _layer(kind, size, cin, cout, stride)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed op sequence falls back to scalar loops with a warning
        compiled = tilecraft.compile(model, cache=False, keep_ir=True)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
    foralls = re.findall(r"scf.forall \([^)]*\) in \(([\d, ]+)\)", compiled.ir("schedule"))
    assert any(int(np.prod([int(v) for v in bounds.split(",")])) == tasks for bounds in foralls), foralls


@pytest.mark.parametrize("source", [mt.conv_nhwc(1, 55, 55, 64, 1, 1, 16), mt.depthwise_nhwc(1, 57, 57, 8, 3, 3)])
def test_the_tuning_space_holds_the_banded_default(source):
    """The tuner's convolution space (schedule/space.py: ``par`` 0, ``par_rows`` the band)
    plans its default point as the default schedule does, on two threads (AVX2)."""
    from tilecraft.pipelines.target import Target
    from tilecraft.schedule.space import task_nest
    from tilecraft.tuning import extract_tasks, space_for

    target = Target.parse("llvm -mcpu=haswell")
    target = Target(mcpu=target.mcpu, num_threads=2)
    (task,) = [t for t in extract_tasks(source, target) if t.kind.startswith("conv") or "depthwise" in t.kind]
    space = space_for(task, target)
    default = space.default()
    assert space.is_valid(default)
    expected = plan_default_schedule(task_nest(task), 3, vector_bits=256, num_threads=2, caches=target.caches)
    assert expected.thread_tiles[1] == 5
    assert space.plan(space.validate(default), 3) == expected


def test_squeeze_bands_in_the_scheduled_ir(check, monkeypatch):
    """The 55x55 squeeze on two threads, AVX2: one ``scf.forall`` of 11 tasks over the
    16-channel output, each a band of 5 rows whose 5-pixel x 16-channel register tiles
    contract, bias and ReLU on the accumulators. The model input's transpose to NHWC runs
    before it, in tasks of its own (not fused into the conv's group: schedule/group.py
    ``_fused_producers``)."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model, _ = _layer("pointwise", 55, 64, 16)
    compiled = tilecraft.compile(model, cache=False, keep_ir=True, target=AVX2)
    check(compiled.ir("schedule"), """
CHECK: scf.forall (%{{.*}}) in (11) shared_outs(%{{.*}}) -> (tensor<1x55x55x64xf32>)
CHECK: scf.forall (%{{.*}}) in (11) shared_outs(%{{.*}}) -> (tensor<1x55x55x16xf32>)
CHECK: tensor<1x5x55x16xf32>
CHECK: vector.contract {{.*}} : vector<5x1xf32>, vector<1x16xf32> into vector<5x16xf32>
CHECK: arith.maximumf {{.*}} : vector<5x16xf32>
CHECK: scf.forall.in_parallel
""")
