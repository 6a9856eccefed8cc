"""Grouped convolutions (ResNeXt, RegNet, ShuffleNet: 2 to 64 channels per group) against
onnxruntime: one NHWC convolution per group (ir/conv.py, ``_grouped_per_group``), which
the default schedule vectorizes as it does a plain convolution. A scalar fallback would
warn (``tilecraft-schedule``), which tests/conftest.py turns into a failure."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.errors import TilecraftError

def grouped_model(x_shape, filters: int, groups: int, *, kernel=(3, 3), strides=(1, 1), dilations=(1, 1),
                  pads=(1, 1, 1, 1), bias: bool = False, batch_norm_relu: bool = False, seed: int = 0):
    """Conv (``groups`` groups) [+ bias] [-> BatchNormalization -> Relu] as an ONNX model."""
    rng = np.random.default_rng(seed)
    channels = x_shape[1]
    group_channels = channels // groups if channels % groups == 0 else channels // groups + 1
    initializers = {"w": rng.standard_normal((filters, group_channels, *kernel)).astype(np.float32) * 0.3}
    conv_inputs = ["x", "w"]
    if bias:
        initializers["b"] = rng.uniform(-0.5, 0.5, filters).astype(np.float32)
        conv_inputs.append("b")
    nodes = [helper.make_node("Conv", conv_inputs, ["conv" if batch_norm_relu else "y"], group=groups,
                              kernel_shape=list(kernel), strides=list(strides), dilations=list(dilations),
                              pads=list(pads))]
    if batch_norm_relu:
        initializers.update(scale=rng.uniform(0.5, 1.5, filters), shift=rng.uniform(-0.2, 0.2, filters),
                            mean=rng.uniform(-0.1, 0.1, filters), var=rng.uniform(0.5, 1.5, filters))
        nodes += [helper.make_node("BatchNormalization", ["conv", "scale", "shift", "mean", "var"], ["bn"]),
                  helper.make_node("Relu", ["bn"], ["y"])]
    graph = helper.make_graph(
        nodes, "grouped", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x_shape[0], filters, None, None])],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def check_against_onnxruntime(model, x_shape, opt_level: int = 3, seed: int = 1):
    x = np.random.default_rng(seed).standard_normal(x_shape).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, opt_level=opt_level)
    np.testing.assert_allclose(compiled(x), expected, rtol=1e-4, atol=1e-4)
    return compiled


# (channels, channels per group, side): 2, 4, 8, 16, 24 and 64 per group.
@pytest.mark.parametrize("channels, per_group, side", [
    (16, 2, 10), (32, 4, 12), (64, 8, 8), (64, 16, 14), (48, 24, 7), (128, 64, 7),
])
def test_group_sizes_match_onnxruntime(channels, per_group, side):
    model = grouped_model((1, channels, side, side), channels, channels // per_group, batch_norm_relu=True)
    compiled = check_against_onnxruntime(model, (1, channels, side, side))
    graph = compiled.ir("graph")
    assert "conv_2d_ngchw_gfchw" not in graph and "linalg.conv_2d_nhwc_hwcf" in graph


@pytest.mark.parametrize("case", [
    dict(strides=(2, 2)),
    dict(dilations=(2, 2), pads=(2, 2, 2, 2)),
    dict(strides=(2, 2), dilations=(2, 2), pads=(2, 1, 1, 2)),
    dict(pads=(0, 0, 0, 0)),
    dict(pads=(0, 2, 1, 0), bias=True),
    dict(kernel=(1, 1), pads=(0, 0, 0, 0), bias=True),  # ShuffleNet's grouped 1x1
    dict(kernel=(3, 1), pads=(1, 0, 1, 0)),
], ids=["stride2", "dilation2", "stride2_dilation2_uneven_pads", "no_padding", "uneven_pads_bias",
        "pointwise", "3x1"])
def test_windows_match_onnxruntime(case):
    model = grouped_model((1, 32, 11, 13), 32, 4, **case)
    check_against_onnxruntime(model, (1, 32, 11, 13))


@pytest.mark.parametrize("width", [13, 11, 9])
def test_odd_widths_with_bias_bn_relu(width):
    """Rows with no 4-8 pixel register tile are widened and sliced back, as for plain convs."""
    model = grouped_model((1, 64, 9, width), 64, 8, bias=True, batch_norm_relu=True)
    check_against_onnxruntime(model, (1, 64, 9, width))


def test_filters_per_group_differ_from_channels_per_group_and_batch_of_two():
    """4 channels in, 8 filters out per group (a channel multiplier), two images."""
    model = grouped_model((2, 16, 10, 10), 32, 4, bias=True)
    check_against_onnxruntime(model, (2, 16, 10, 10))


@pytest.mark.parametrize("opt_level", [0, 2])
def test_below_opt_level_3_still_correct(opt_level):
    """No layout pass (NCHW model values): the groups' convolutions are NHWC inside."""
    model = grouped_model((1, 32, 9, 9), 32, 8, strides=(2, 2), bias=True, batch_norm_relu=True)
    check_against_onnxruntime(model, (1, 32, 9, 9), opt_level=opt_level)


def test_channels_that_do_not_split_into_groups_are_a_typed_error():
    """10 input channels, 3 groups: the filter's 4 channels per group expect 12."""
    model = grouped_model((1, 10, 8, 8), 12, 3)
    with pytest.raises(TilecraftError, match="channels"):
        tilecraft.compile(model)


def test_filters_that_do_not_split_into_groups_are_a_typed_error():
    model = grouped_model((1, 12, 8, 8), 10, 3)
    with pytest.raises(TilecraftError, match="groups"):
        tilecraft.compile(model)
