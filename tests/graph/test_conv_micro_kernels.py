"""ResNet-style convolution groups (conv + bias, folded BN, residual add, ReLU) whose
epilogue runs on the accumulator tile (schedule/conv_kernels.py), against onnxruntime at
opt_level 3 (NHWC after the layout pass), on one thread (no groups) and two: 3x3, strided
3x3 and 1x1, filter-heavy 1x1 with the residual, and the 7x7 stem. The loop and vector
structure is checked in tests/lit/schedule/conv-epilogue.mlir."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft


def _conv_model(cin: int, cout: int, kernel: int, stride: int, pad: int, size: int,
                residual: bool) -> onnx.ModelProto:
    """Conv + bias -> BatchNormalization -> (+ x) -> ReLU: a ResNet block's tail, so the
    folded batch norm, the residual add and the ReLU form the conv's fusion group."""
    rng = np.random.default_rng(cin * 131 + cout * 7 + kernel)
    out = (size + 2 * pad - kernel) // stride + 1
    weights = {
        "w": rng.standard_normal((cout, cin, kernel, kernel)) / np.sqrt(cin * kernel * kernel),
        "b": rng.standard_normal(cout),
        "scale": rng.uniform(0.5, 1.5, cout), "shift": rng.standard_normal(cout),
        "mean": rng.standard_normal(cout) * 0.1, "var": rng.uniform(0.5, 2.0, cout),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[stride] * 2, pads=[pad] * 4),
        helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["n"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size])]
    last = "n"
    if residual:
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, cout, out, out]))
        nodes.append(helper.make_node("Add", ["n", "r"], ["a"]))
        last = "a"
    nodes.append(helper.make_node("Relu", [last], ["y"]))
    graph = helper.make_graph(
        nodes, "block", inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, out, out])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("cin, cout, kernel, stride, pad, size, residual", [
    (32, 64, 3, 1, 1, 14, False),
    (64, 64, 3, 1, 1, 28, False),
    (64, 64, 3, 2, 1, 14, False),   # strided 3x3
    (64, 128, 1, 1, 0, 7, True),    # filter-heavy 1x1 with the residual add (7x7 stage)
    (128, 256, 1, 2, 0, 14, False),  # strided 1x1 projection shortcut
    (3, 64, 7, 2, 3, 56, False),    # the 7x7 stem
    (16, 24, 1, 1, 0, 28, True),    # 24 output channels: 8-lane vectors (MobileNetV2's project)
    (24, 144, 1, 1, 0, 28, False),  # 144 = 9 x 16 channels: one vector per tile
])
@pytest.mark.parametrize("threads", [1, 2])
def test_micro_kernel_matches_onnxruntime(cin, cout, kernel, stride, pad, size, residual,
                                          threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", str(threads))
    model = _conv_model(cin, cout, kernel, stride, pad, size, residual)
    rng = np.random.default_rng(7)
    feeds = {"x": rng.standard_normal((1, cin, size, size)).astype(np.float32)}
    if residual:
        out = (size + 2 * pad - kernel) // stride + 1
        feeds["r"] = rng.standard_normal((1, cout, out, out)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)[0]
    got = tilecraft.compile(model, opt_level=3)(**feeds)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("width, out_channels, in_channels, lanes, registers, heavy, expected", [
    (28, 128, 128, 16, 32, False, (7, 32, 4)),   # 7 pixels x 2 vectors, 4 input channels a step
    (56, 64, 64, 16, 32, False, (8, 32, 4)),     # 16 accumulators: the step shrinks to fit
    (7, 2048, 512, 16, 32, True, (7, 32, 4)),    # 7 x 4 vectors (33 registers) does not fit
    (8, 256, 64, 16, 32, True, (8, 32, 4)),      # neither does 8 x 3; powers of two only
    (28, 144, 24, 16, 32, False, (7, 16, 4)),    # no multiple of 32 channels: one vector
    (28, 24, 16, 16, 32, False, (7, 8, 4)),      # no whole 16-lane vector: 8-lane vectors
    (56, 64, 64, 8, 16, False, (6, 16, 1)),      # AVX2: 6 x 2 vectors (9 x 6 + 2 peeled), 12 + 2 + 1 <= 16
    (14, 64, 3, 16, 32, False, (7, 32, 3)),      # the stem's 3 input channels
])
def test_register_tile_fits_the_register_file(width, out_channels, in_channels, lanes, registers,
                                              heavy, expected):
    """The tile's accumulators, one reduction step's filter vectors and the broadcast fit the
    vector registers (no spill in the hot loop), with as many vectors as allowed."""
    from tilecraft.schedule.conv_plan import conv_register_tile

    pixels, channels, step = conv_register_tile(width, out_channels, in_channels, lanes, registers, heavy)
    assert (pixels, channels, step) == expected
    vectors = -(-channels // lanes)
    assert pixels * vectors + step * vectors + 1 <= registers


@pytest.mark.parametrize("threads", [1, 2])
def test_a_producer_of_the_conv_input_is_no_epilogue(threads, monkeypatch):
    """A layer with as many input as output channels on a model's NCHW input: the fused
    NCHW -> NHWC transpose has the conv's output shape but computes its input. Taken for an
    epilogue, it was fused into the accumulator tile's loop and recomputed whole per tile, as
    one vector of every input channel (vector<2048x1x7xf32> at 2048 channels, which LLVM did
    not finish compiling in 10 minutes). Now the group keeps one loop nest per op in each
    task: no vector spans the channels, the results match."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", str(threads))
    channels = 512
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((channels, channels, 1, 1)) / np.sqrt(channels)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 7, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, 7, 7])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = rng.standard_normal((1, channels, 7, 7)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, keep_ir=True)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
    assert f"vector<{channels}x1x7xf32>" not in compiled.ir("schedule")
