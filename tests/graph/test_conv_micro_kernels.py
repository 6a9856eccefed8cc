"""Convolutions under the register-blocked micro-kernels of schedule/conv_kernels.py against
onnxruntime (opt_level 3, NHWC after the layout pass): one case per tile shape the planner
picks for ResNet-style layers, and the register budget those shapes come from. The loop and
vector structure is checked in tests/lit/schedule/conv-micro-kernel.mlir."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.schedule.conv_kernels import conv_micro_kernel, vector_registers


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
    (32, 64, 3, 1, 1, 14, False),   # 14 pixels x 2 vectors, input-channel step 4
    (64, 64, 3, 1, 1, 28, False),   # 28 columns: two 14-pixel tiles per row
    (64, 64, 3, 2, 1, 14, False),   # strided 3x3 on a 7x7 output: 7 pixels x 2 vectors
    (64, 128, 1, 1, 0, 7, True),    # filter-heavy 1x1 with the residual add (7x7 stage)
    (128, 256, 1, 2, 0, 14, False),  # strided 1x1 projection shortcut
    (3, 64, 7, 2, 3, 56, False),    # the 7x7 stem: 3 input channels in one step
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


@pytest.mark.parametrize("width, channels, in_channels, bits, expected", [
    (14, 256, 256, 512, (14, 32, 4)),   # 28 accumulators: step 4
    (7, 2048, 512, 512, (7, 32, 8)),    # was 4 vectors x 7 pixels: 33 registers, spilled
    (56, 64, 64, 512, (14, 32, 4)),
    (112, 64, 3, 512, (14, 32, 3)),     # the stem: the whole 3-channel reduction per step
    (28, 48, 64, 512, (14, 16, 8)),     # 48 channels: one vector, 14 pixels at most
    (14, 64, 64, 256, (14, 8, 8)),      # AVX2: 16 registers
])
def test_register_budget(width, channels, in_channels, bits, expected):
    lanes = bits // 32
    kernel = conv_micro_kernel(width, channels, in_channels, lanes=lanes, vector_bits=bits)
    assert (kernel.pixels, kernel.channels, kernel.ic_step) == expected
    assert kernel.registers <= vector_registers(bits)


def test_channels_off_the_vector_width_keep_the_generic_tile():
    assert conv_micro_kernel(14, 24, 16, lanes=16, vector_bits=512) is None
