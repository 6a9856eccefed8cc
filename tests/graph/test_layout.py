"""tilecraft-convert-layout end to end: models compiled at opt_level 3 (convolutions in NHWC)
match onnxruntime, and after the graph stage the only layout transposes are at the model's
input and output. The rewrite rules themselves are checked in tests/lit/graph."""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnxruntime as ort
import pytest

import graph_models
import tilecraft
from tilecraft.errors import CompileError, PipelineError
from tilecraft.pipelines.graph.layout import parse_layout

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def _reference(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _graph_counts(compiled) -> dict[str, int]:
    text = compiled.ir("graph")
    return {name: text.count(name) for name in (
        "linalg.transpose", "graph.layout_convert", "linalg.conv_2d_nchw_fchw",
        "linalg.conv_2d_nhwc_hwcf", "linalg.depthwise_conv_2d_nhwc_hwc",
        "linalg.depthwise_conv_2d_nchw_chw", "linalg.pooling_nhwc", "linalg.pooling_nchw",
        "linalg.conv_2d_ngchw_gfchw")}


def _counts_after_matching_onnxruntime(model, shape, seed: int) -> dict[str, int]:
    """Compile ``model`` at opt_level 3, check it against onnxruntime on random input of
    ``shape``, and return its op counts after the graph stage."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    compiled = tilecraft.compile(model, opt_level=3)
    np.testing.assert_allclose(compiled(x), _reference(model, {"x": x})[0], rtol=1e-4, atol=1e-4)
    return _graph_counts(compiled)


def test_conv_bn_block_in_nhwc_matches_onnxruntime():
    counts = _counts_after_matching_onnxruntime(graph_models.conv_bn_block(channels=16, size=14),
                                                (1, 16, 14, 14), seed=3)
    assert counts["linalg.conv_2d_nhwc_hwcf"] == 2 and counts["linalg.conv_2d_nchw_fchw"] == 0
    # Input NCHW -> NHWC and output NHWC -> NCHW; the filters' transposes were folded.
    assert counts["linalg.transpose"] == 2
    assert counts["graph.layout_convert"] == 0


def test_depthwise_pooling_net_in_nhwc_matches_onnxruntime():
    counts = _counts_after_matching_onnxruntime(graph_models.depthwise_pool_net(), (1, 3, 12, 12),
                                                seed=4)
    assert counts["linalg.depthwise_conv_2d_nhwc_hwc"] == 1
    assert counts["linalg.depthwise_conv_2d_nchw_chw"] == 0
    # MaxPool; GlobalAveragePool is a reduction generic, reading NHWC through its map.
    assert counts["linalg.pooling_nchw"] == 0 and counts["linalg.pooling_nhwc"] == 1
    # Only the input: the pooled 1x1x1xC reaches Flatten as a reshape, not a transpose.
    assert counts["linalg.transpose"] == 1


def test_unet_upsampling_and_skip_concat_stay_nhwc():
    """The 2x2 stride-2 ConvTranspose (a contraction between NCHW <-> NHWC transposes) and the
    channel Concat of the skip connection run in NHWC: no transpose between the convolutions."""
    counts = _counts_after_matching_onnxruntime(graph_models.unet_block(), (1, 3, 12, 12), seed=6)
    assert counts["linalg.conv_2d_nhwc_hwcf"] == 3 and counts["linalg.conv_2d_nchw_fchw"] == 0
    assert counts["linalg.transpose"] == 2  # the model's input and output
    assert counts["graph.layout_convert"] == 0


def test_conv1d_stack_runs_as_nhwc_2d_convolutions():
    """1-D convolutions are 2-D ones over a unit row (ir/conv.py), so they run in
    NHWC with the 2-D schedules: no 1-D linalg convolution is left. The Relu between them
    runs NWC (layout.py ``unit_height_conversions``): only the model's NCW input and output
    are transposed, where the reshapes around each convolution had kept a transpose to NCW
    and back between every two."""
    x = np.random.default_rng(7).standard_normal((1, 8, 40)).astype(np.float32)
    model = graph_models.conv1d_net()
    compiled = tilecraft.compile(model, opt_level=3)
    np.testing.assert_allclose(compiled(x), _reference(model, {"x": x})[0], rtol=1e-4, atol=1e-4)
    text = compiled.ir("graph")
    assert text.count("linalg.conv_2d_nhwc_hwcf") == 2 and text.count("linalg.depthwise_conv_2d_nhwc_hwc") == 1
    assert "conv_1d" not in text and "linalg.conv_2d_nchw_fchw" not in text
    assert text.count("linalg.transpose") == 2 and "graph.layout_convert" not in text


@pytest.mark.parametrize("channels", [8, 16])
def test_grouped_conv_runs_in_nhwc(channels):
    """A grouped conv (4 or 8 channels per group) is one NHWC conv per group
    (conv._grouped_per_group), between transposes the layout pass cancels, so the only
    layout transpose left is the model's input (the pooled value is NHWC throughout)."""
    counts = _counts_after_matching_onnxruntime(graph_models.depthwise_pool_net(channels=channels, grouped=True),
                                                (1, 3, 12, 12), seed=5)
    assert counts["linalg.conv_2d_ngchw_gfchw"] == 0
    assert counts["linalg.conv_2d_nhwc_hwcf"] == 2  # the first conv, and the groups' one
    assert counts["linalg.transpose"] == 1


def test_pointwise_conv_on_13x13_is_a_matmul_in_nhwc():
    """SqueezeNet's classifier: a 1x1 conv over 13x13 pixels after a 3x3 one is a matmul of
    the 169 NHWC pixels (conv._pointwise_as_matmul), read in place (rows are not padded: the
    partial last register tile is peeled, docs/scheduling.md), and the model keeps only its
    input and output transposes."""
    rng = np.random.default_rng(7)
    inits = [onnx.numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)
             for name, shape in (("w1", (16, 8, 3, 3)), ("w2", (40, 16, 1, 1)), ("b2", (40,)))]
    nodes = [onnx.helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             onnx.helper.make_node("Relu", ["c1"], ["r1"]),
             onnx.helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
             onnx.helper.make_node("Relu", ["c2"], ["y"])]
    graph = onnx.helper.make_graph(
        nodes, "classifier", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8, 13, 13])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 40, 13, 13])], inits)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)
    x = rng.standard_normal((1, 8, 13, 13)).astype(np.float32)
    compiled = tilecraft.compile(model, opt_level=3)
    np.testing.assert_allclose(compiled(x), _reference(model, {"x": x})[0], rtol=1e-4, atol=1e-4)
    text = compiled.ir("graph")
    assert "linalg.matmul ins(%collapsed" in text and "tensor<169x16xf32>" in text
    assert _graph_counts(compiled)["linalg.transpose"] == 2


def test_channel_split_between_branches_stays_nhwc():
    """ShuffleNet-style branches: the channels split in two (ONNX Split, slices of the
    channel dim), a conv on each, concatenated: the slices run in NHWC along the last dim
    (layout.py ``rewrite_slice``), so only the model's input and output are transposed."""
    rng = np.random.default_rng(8)
    inits = [onnx.numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)
             for name, shape in (("w1", (16, 8, 3, 3)), ("wa", (8, 8, 3, 3)), ("wb", (8, 8, 1, 1)))]
    inits.append(onnx.numpy_helper.from_array(np.array([8, 8], np.int64), "halves"))
    nodes = [onnx.helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             onnx.helper.make_node("Split", ["c1", "halves"], ["left", "right"], axis=1),
             onnx.helper.make_node("Conv", ["left", "wa"], ["a"], pads=[1, 1, 1, 1]),
             onnx.helper.make_node("Conv", ["right", "wb"], ["b"]),
             onnx.helper.make_node("Concat", ["a", "b"], ["y"], axis=1)]
    graph = onnx.helper.make_graph(
        nodes, "branches", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8, 12, 12])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 16, 12, 12])], inits)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    compiled = tilecraft.compile(model, opt_level=3)
    np.testing.assert_allclose(compiled(x), _reference(model, {"x": x})[0], rtol=1e-4, atol=1e-4)
    counts = _graph_counts(compiled)
    assert counts["linalg.conv_2d_nhwc_hwcf"] == 3 and counts["linalg.transpose"] == 2


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("groups", [2, 4])
def test_channel_shuffle_is_one_transpose_in_nhwc(groups, relu):
    """ShuffleNet's channel shuffle between two convolutions (Reshape to (N, g, C/g, H, W),
    Transpose 0 2 1 3 4, Reshape back) runs in NHWC as one transpose of the channels' two
    factors (layout.py ``rewrite_channel_shuffle``): with the model's input and output
    conversions, 3 transposes where the NCHW round trip left 5 (a ReLU reading the shuffle).
    Read by the convolution directly, the shuffle is folded into its filter's input channels
    (tilecraft-slice-channel-shuffles, channel_shuffles.py): 2."""
    rng = np.random.default_rng(9)
    channels = 16
    inits = [onnx.numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)
             for name, shape in (("w1", (channels, 8, 3, 3)), ("w2", (channels, channels, 1, 1)))]
    inits += [onnx.numpy_helper.from_array(np.array(shape, np.int64), name) for name, shape in
              (("split", [1, groups, channels // groups, 12, 12]), ("merged", [1, channels, 12, 12]))]
    nodes = [onnx.helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             onnx.helper.make_node("Reshape", ["c1", "split"], ["s"]),
             onnx.helper.make_node("Transpose", ["s"], ["t"], perm=[0, 2, 1, 3, 4]),
             onnx.helper.make_node("Reshape", ["t", "merged"], ["m"]),
             *([onnx.helper.make_node("Relu", ["m"], ["r"])] if relu else []),
             onnx.helper.make_node("Conv", ["r" if relu else "m", "w2"], ["y"])]
    graph = onnx.helper.make_graph(
        nodes, "shuffle", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8, 12, 12])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, channels, 12, 12])], inits)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)
    counts = _counts_after_matching_onnxruntime(model, (1, 8, 12, 12), seed=10)
    assert counts["linalg.conv_2d_nhwc_hwcf"] == 2 and counts["linalg.transpose"] == (3 if relu else 2)


def test_unknown_layout_is_a_pipeline_error():
    with pytest.raises(PipelineError, match="unknown layout 'NCHW8c'.*supported: NHWC"):
        parse_layout("NCHW8c")
    pipeline = tilecraft.cpu_pipeline("llvm", opt_level=3)
    graph_passes = [("tilecraft-convert-layout{layout=NCHW8c}" if e == "tilecraft-convert-layout" else e)
                    for e in pipeline.stage("graph").passes]
    with pytest.raises(CompileError, match="unknown layout") as caught:
        tilecraft.compile(graph_models.conv_bn_block(), pipeline=pipeline.replace("graph", graph_passes))
    assert isinstance(caught.value.__cause__, PipelineError)


@pytest.mark.slow
def test_resnet50_converts_layout_only_at_its_boundaries(monkeypatch):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import graph_passes  # noqa: PLC0415  (the benchmark's ResNet-50 loader: light zoo model)

    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")  # the loop nest count depends on it
    model, feeds = graph_passes.resnet50()
    compiled = tilecraft.compile(model, opt_level=3)
    counts = _graph_counts(compiled)
    assert counts["linalg.conv_2d_nhwc_hwcf"] == 53 and counts["linalg.conv_2d_nchw_fchw"] == 0
    assert counts["linalg.transpose"] == 1  # the image; the pooled features leave by a reshape
    # 176 ONNX nodes -> 57 fusion groups -> each group one loop nest, except what
    # docs/graph-dialect.md lists (the image's transpose, the final 1x1000 softmax, too
    # small for a thread level: max, exp, sum and the normalization, one loop nest each).
    # Pads are no kernels: their sources' producers write into them (pad_destinations.py).
    assert compiled.group_count == 57
    assert compiled.kernel_count <= 63
    got = compiled(*feeds.values())
    got = list(got) if isinstance(got, tuple) else [got]
    for value, reference in zip(got, _reference(model, feeds)):
        scale = float(np.abs(reference).max())
        np.testing.assert_allclose(value, reference, rtol=1e-3, atol=1e-3 * scale)
