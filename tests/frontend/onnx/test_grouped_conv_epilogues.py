"""Grouped convolutions with their batch norm, residual add and ReLU fused into the loop
over groups (pipelines/graph/grouped_epilogues.py; schedule/group.py runs the epilogue on
each group convolution's accumulators), against onnxruntime: 2 to 64 channels per group,
strides, odd widths, a channel multiplier, two images, two threads. A scalar fallback
would warn (``tilecraft-schedule``), which tests/conftest.py turns into a failure."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft


def block_model(x_shape, filters: int, groups: int, *, strides=(1, 1), residual: bool = False, seed: int = 0):
    """Conv (3x3, ``groups`` groups, no bias) -> BatchNormalization [-> Add(x)] -> Relu."""
    rng = np.random.default_rng(seed)
    channels = x_shape[1]
    initializers = {
        "w": rng.standard_normal((filters, channels // groups, 3, 3)) * 0.3,
        "scale": rng.uniform(0.5, 1.5, filters), "shift": rng.uniform(-0.2, 0.2, filters),
        "mean": rng.uniform(-0.1, 0.1, filters), "var": rng.uniform(0.5, 1.5, filters),
    }
    nodes = [helper.make_node("Conv", ["x", "w"], ["conv"], group=groups, kernel_shape=[3, 3],
                              strides=list(strides), pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["conv", "scale", "shift", "mean", "var"], ["bn"])]
    last = "bn"
    if residual:
        nodes.append(helper.make_node("Add", [last, "x"], ["sum"]))
        last = "sum"
    nodes.append(helper.make_node("Relu", [last], ["y"]))
    graph = helper.make_graph(
        nodes, "grouped_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x_shape[0], filters, None, None])],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def check(model, x_shape, **options):
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, **options)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
    return compiled


def epilogue_in_group_loop(compiled) -> bool:
    """Whether the graph's elementwise epilogue follows a group's convolution inside its
    loop over groups (before the loop's ``scf.yield``), as grouped_epilogues.py moves it."""
    lines = compiled.ir("simplify").splitlines()
    for at, line in enumerate(lines):
        if "linalg.conv_2d_nhwc_hwcf" in line:
            rest = lines[at + 1:]
            body = rest[:next(i for i, text in enumerate(rest) if "scf.yield" in text)]
            return any("linalg.generic" in text for text in body)
    return False


# (channels, channels per group, side): 2, 4, 8, 16 and 64 per group.
@pytest.mark.parametrize("channels, per_group, side", [
    (16, 2, 10), (32, 4, 12), (64, 8, 8), (64, 16, 14), (128, 64, 7),
])
def test_batch_norm_residual_relu_fused_per_group(channels, per_group, side):
    model = block_model((1, channels, side, side), channels, channels // per_group, residual=True)
    compiled = check(model, (1, channels, side, side))
    assert epilogue_in_group_loop(compiled)


@pytest.mark.parametrize("x_shape, filters, groups, strides", [
    ((1, 32, 16, 16), 32, 4, (2, 2)),      # stride 2 (a stage's first block)
    ((1, 24, 7, 15), 24, 3, (1, 1)),       # odd widths with a 5- and 7-pixel register tile
    ((2, 16, 10, 10), 32, 4, (1, 1)),      # 4 channels in, 8 filters out per group; two images
], ids=["stride2", "odd_widths", "multiplier_two_images"])
def test_batch_norm_relu_fused_per_group(x_shape, filters, groups, strides):
    compiled = check(block_model(x_shape, filters, groups, strides=strides), x_shape)
    assert epilogue_in_group_loop(compiled)


def test_two_threads_bands_of_rows():
    """56x56, 8 per group: several bands of rows (the parallel loop), each group's epilogue
    on its accumulators, with two threads."""
    x_shape = (1, 64, 56, 56)
    model = block_model(x_shape, 64, 8, residual=True)
    compiled = check(model, x_shape, target=tilecraft.Target(num_threads=2))
    assert epilogue_in_group_loop(compiled) and "scf.forall" in compiled.ir("simplify")


def test_a_row_with_no_whole_register_tile_fuses_its_epilogue_too():
    """A 9-pixel row has no 4-8 pixel register tile: the schedule peels its last pixel tile
    (the frontend once widened such rows to 10 and sliced the result back, which kept the
    epilogue out of the group loop), so the epilogue moves into the loop like any other."""
    model = block_model((1, 32, 9, 9), 32, 4)
    compiled = check(model, (1, 32, 9, 9))
    assert epilogue_in_group_loop(compiled)


def test_below_opt_level_3_nothing_moves():
    """No fusion groups below opt_level 3: the grouped convolution keeps its epilogue after it."""
    model = block_model((1, 32, 8, 8), 32, 4, residual=True)
    compiled = check(model, (1, 32, 8, 8), opt_level=2)
    assert not epilogue_in_group_loop(compiled)
