"""Depthwise convolutions (schedule/conv_plan.py ``depthwise_window_fits``, schedule/group.py
``_accumulator_epilogue``): the whole kw window in each reduction step where the register
file holds it, and the group's bias + ReLU6 on the register tile's accumulators. MobileNet
and EfficientNet shapes, 3x3 and 5x5, stride 1 and 2, odd sizes (7x7, 15x15), against
onnxruntime on one and two threads, for AVX2 and AVX-512."""

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mlir_text as mt
import tilecraft
from pinned_targets import AVX2, AVX512, needs_avx512_host
from tilecraft.schedule.conv_plan import depthwise_window_fits


@pytest.mark.parametrize("pixels, taps, registers, fits", [
    (8, 3, 32, True),    # AVX-512: 8 accumulators, 17 inputs at stride 2, 3 filter vectors
    (8, 5, 32, True),    # 8 + 19 + 5: the register file exactly
    (8, 7, 32, False),   # 7x7: 8 + 21 + 7
    (8, 3, 16, False),   # AVX2: the window does not fit, one tap per step
    (1, 3, 16, True),
])
def test_window_fits_the_register_file(pixels, taps, registers, fits):
    assert depthwise_window_fits(pixels, taps, registers) is fits


def _depthwise_relu6(channels: int, size: int, kernel: int, stride: int):
    """NCHW: a depthwise Conv (with bias, as a folded batch norm leaves it) + Clip(0, 6)."""
    rng = np.random.default_rng(channels * size + kernel + stride)
    w = rng.standard_normal((channels, 1, kernel, kernel)) / kernel
    inits = [numpy_helper.from_array(w.astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(channels).astype(np.float32), "b"),
             numpy_helper.from_array(np.array(0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6, np.float32), "hi")]
    out = (size + 2 * (kernel // 2) - kernel) // stride + 1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=channels, kernel_shape=[kernel, kernel],
                              strides=[stride, stride], pads=[kernel // 2] * 4),
             helper.make_node("Clip", ["c", "lo", "hi"], ["y"])]
    graph = helper.make_graph(nodes, "depthwise", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                 [1, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, out, out])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": (3 * rng.standard_normal((1, channels, size, size))).astype(np.float32)}


def _compare(model, feeds, target):
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed op sequence falls back to scalar loops with a warning
        compiled = tilecraft.compile(model, cache=False, keep_ir=True, target=target)
    np.testing.assert_allclose(compiled(**feeds), expected, rtol=1e-4, atol=1e-4)
    return compiled.ir("schedule")


SHAPES = [  # channels, size, kernel, stride
    (32, 56, 3, 1), (96, 56, 3, 2), (144, 15, 3, 1), (48, 15, 5, 2), (24, 7, 3, 1), (240, 7, 5, 1),
    (40, 15, 5, 1),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("target", [AVX2, pytest.param(AVX512, marks=needs_avx512_host)])
@pytest.mark.parametrize("channels, size, kernel, stride", SHAPES)
def test_depthwise_relu6_matches_onnxruntime(channels, size, kernel, stride, target, threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", str(threads))
    _compare(*_depthwise_relu6(channels, size, kernel, stride), target)


@pytest.mark.parametrize("kernel, stride, window", [(3, 1, 10), (3, 2, 17), (5, 2, 19)])
def test_avx512_reads_each_window_row_once_and_clamps_in_registers(kernel, stride, window, monkeypatch):
    """8 output pixels x 16 channels: each kh step reads the ``window`` input pixels its taps
    span as one vector per pixel (not one per tap and pixel; each tap's pixels are slices
    of it at stride 1, single vectors at stride 2), and the clamp runs on the
    8 x 16 accumulators, stored once: no epilogue loop nest is left."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model, _feeds = _depthwise_relu6(32, 32 * stride, kernel, stride)
    text = str(tilecraft.compile(model, cache=False, keep_ir=True, target=AVX512).ir("schedule"))
    assert f"vector<{window}x16xf32>" in text
    assert "arith.minimumf" in text and ": vector<8x16xf32>, tensor<1x1x8x16xf32>" in text
    assert "linalg.depthwise_conv" not in text and "linalg.generic" not in text


@pytest.mark.parametrize("mcpu, vector_bits, window", [("haswell", 256, False), ("znver5", 512, True)])
def test_the_tuning_space_plans_the_default_window(mcpu, vector_bits, window):
    """The tuner's convolution space (schedule/space.py) plans the default point as the
    default schedule does: on AVX-512 the kw loop untiled (the whole window row per step), on
    AVX2 one tap per step."""
    from tilecraft.pipelines.target import Target
    from tilecraft.schedule.plan import plan_default_schedule
    from tilecraft.schedule.space import task_nest
    from tilecraft.tuning import extract_tasks, space_for

    target = Target(mcpu=Target.parse(f"llvm -mcpu={mcpu}").mcpu, num_threads=1)
    (task,) = [t for t in extract_tasks(mt.depthwise_nhwc(1, 4, 67, 16, 3, 3), target) if "depthwise" in t.kind]
    space = space_for(task, target)
    nest = task_nest(task)
    expected = plan_default_schedule(nest, 3, vector_bits=vector_bits, num_threads=1, caches=target.caches)
    kw = nest.convolution[3][-1]
    assert (expected.reduction_tiles[kw] == 0) is window
    assert space.plan(space.validate(space.default()), 3) == expected
