"""Winograd convolutions (pipelines/graph/winograd.py): the transforms' algebra in numpy, the
rewrite's numerics against onnxruntime (bias, batch norm, ReLU after it; sizes that are not
whole tiles; batches), the convolutions it leaves alone, and its bad options."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.errors import PipelineError  # noqa: E402
from tilecraft.pipelines import cpu_pipeline  # noqa: E402
from tilecraft.pipelines.graph.winograd import (  # noqa: E402
    DEFAULT_MAX_TRANSFORMED_KIB, DEFAULT_MIN_TILES, TILE_SIZES, transforms, winograd_elements)
from graph_models import append_batch_norm_relu  # noqa: E402

CONV = "linalg.conv_2d_nhwc_hwcf"


@pytest.mark.parametrize("tile", TILE_SIZES)
def test_the_transforms_compute_a_valid_3x3_correlation(tile):
    """``A^T [(G g G^T) * (B^T d B)] A`` is the m x m valid correlation of the (m+2)^2 tile d
    with the 3x3 filter g: the identity every rewritten convolution rests on."""
    bt, g, at = transforms(tile)
    rng = np.random.default_rng(tile)
    d = rng.standard_normal((tile + 2, tile + 2))
    w = rng.standard_normal((3, 3))
    winograd = at @ ((g @ w @ g.T) * (bt @ d @ bt.T)) @ at.T
    direct = np.array([[np.sum(d[i:i + 3, j:j + 3] * w) for j in range(tile)] for i in range(tile)])
    np.testing.assert_allclose(winograd, direct, rtol=1e-12, atol=1e-12)


def _winograd_pipeline(tile: int, min_tiles: int = 1):
    """The default pipeline with the rewrite appended; every candidate rewritten unless
    ``min_tiles`` says otherwise (the tests' images are a few tiles)."""
    pipeline = cpu_pipeline("llvm", opt_level=3)
    return pipeline.replace("graph", [*pipeline.stage("graph").passes, *winograd_elements(tile, min_tiles)])


def _transformed_kib(batch: int, size: int, channels: int, tile: int = 4) -> float:
    tiles = batch * (-(-size // tile)) ** 2
    return (tile + 2) ** 2 * tiles * channels * 4 / 1024


def _conv_model(batch: int, channels: int, filters: int, height: int, width: int, *,
                pads: int = 1, stride: int = 1, kernel: int = 3, batch_norm: bool = False,
                filter_input: bool = False, seed: int = 0):
    """Conv (+ bias) [+ BatchNormalization] + Relu, NCHW as ONNX stores it."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((filters, channels, kernel, kernel)) / np.sqrt(channels * kernel * kernel)).astype(np.float32)
    inits = [numpy_helper.from_array(rng.standard_normal(filters).astype(np.float32), "b")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, channels, height, width])]
    if filter_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.shape)))
    else:
        inits.append(numpy_helper.from_array(w, "w"))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[kernel, kernel],
                              pads=[pads] * 4, strides=[stride, stride])]
    append_batch_norm_relu(nodes, inits, rng, filters, "c", batch_norm)
    out_h = (height + 2 * pads - kernel) // stride + 1
    out_w = (width + 2 * pads - kernel) // stride + 1
    graph = helper.make_graph(nodes, "conv", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, filters, out_h, out_w])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), w


def _check_against_onnxruntime(model, feeds, tile, min_tiles=1):
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    compiled = tilecraft.compile(model, pipeline=_winograd_pipeline(tile, min_tiles), keep_ir=True)
    # F(4x4) multiplies by up to 8 and divides by 24: a looser bound than the direct conv's.
    np.testing.assert_allclose(compiled(**feeds), expected, rtol=2e-4, atol=2e-4)
    return compiled.ir("graph")


@pytest.mark.parametrize("tile", TILE_SIZES)
@pytest.mark.parametrize("shape", [(1, 8, 16, 9, 9), (2, 4, 8, 6, 11), (1, 16, 32, 8, 8)],
                         ids=["9x9-not-whole-tiles", "batch2-6x11", "8x8"])
def test_a_rewritten_convolution_matches_onnxruntime(tile, shape):
    batch, channels, filters, height, width = shape
    model, _ = _conv_model(batch, channels, filters, height, width)
    x = np.random.default_rng(1).standard_normal((batch, channels, height, width)).astype(np.float32)
    graph_ir = _check_against_onnxruntime(model, {"x": x}, tile)
    assert CONV not in graph_ir  # rewritten: the test would pass on the direct conv too
    assert f"tensor<{(tile + 2) ** 2}x" in graph_ir  # the batched matmul over transform points


def test_a_folded_batch_norm_reaches_the_winograd_form():
    """The rewrite runs after the first folding, so the batch norm is in the filter and bias
    the transforms read (folding after the rewrite would find no convolution)."""
    model, _ = _conv_model(1, 8, 16, 10, 10, batch_norm=True)
    x = np.random.default_rng(2).standard_normal((1, 8, 10, 10)).astype(np.float32)
    graph_ir = _check_against_onnxruntime(model, {"x": x}, 4)
    assert CONV not in graph_ir


@pytest.mark.parametrize("case", [dict(stride=2), dict(kernel=1, pads=0), dict(kernel=5, pads=2),
                                  dict(filter_input=True)],
                         ids=["stride-2", "1x1", "5x5", "filter-not-constant"])
def test_other_convolutions_are_left_alone(case):
    model, w = _conv_model(1, 4, 8, 9, 9, **case)
    feeds = {"x": np.random.default_rng(3).standard_normal((1, 4, 9, 9)).astype(np.float32)}
    if case.get("filter_input"):
        feeds["w"] = w
    graph_ir = _check_against_onnxruntime(model, feeds, 4)
    if case.get("kernel") == 1:
        # A 1x1 convolution on rows no register tile divides (9) is a matmul of the pixels
        # before the Winograd rewrite runs (ir/conv.py): no transform either way.
        assert CONV in graph_ir or "linalg.matmul" in graph_ir
    else:
        assert CONV in graph_ir


def test_convolutions_with_few_tiles_are_left_alone_by_default():
    """The default ``min-tiles`` keeps the direct convolution where the matmuls would wait
    for their transformed filter: 9x9 is 9 tiles of 4x4, 54 at batch 6."""
    assert 9 < DEFAULT_MIN_TILES <= 54
    model, _ = _conv_model(1, 8, 16, 9, 9)
    x = np.random.default_rng(5).standard_normal((1, 8, 9, 9)).astype(np.float32)
    assert CONV in _check_against_onnxruntime(model, {"x": x}, 4, DEFAULT_MIN_TILES)
    batched, _ = _conv_model(6, 8, 16, 9, 9)
    xs = np.random.default_rng(5).standard_normal((6, 8, 9, 9)).astype(np.float32)
    assert CONV not in _check_against_onnxruntime(batched, {"x": xs}, 4, DEFAULT_MIN_TILES)


def test_convolutions_whose_transformed_input_outgrows_the_cache_are_left_alone():
    """The default ``max-transformed-kib``: the transforms write their results whole, so a
    transformed input past the bound (ResNet-50's 56x56 layer at batch 8: 14.5 MB) keeps
    the direct convolution, and one below it (batch 1: 1.8 MB) is rewritten."""
    assert _transformed_kib(1, 56, 64) <= DEFAULT_MAX_TRANSFORMED_KIB < _transformed_kib(8, 56, 64)
    pipeline = cpu_pipeline("llvm", opt_level=3)
    source = """
func.func @main(%x: tensor<BATCHx58x58x64xf32>) -> tensor<BATCHx56x56x64xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.01> : tensor<3x3x64x64xf32>
  %e = tensor.empty() : tensor<BATCHx56x56x64xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<BATCHx56x56x64xf32>) -> tensor<BATCHx56x56x64xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<BATCHx58x58x64xf32>, tensor<3x3x64x64xf32>) outs(%i : tensor<BATCHx56x56x64xf32>) -> tensor<BATCHx56x56x64xf32>
  return %c : tensor<BATCHx56x56x64xf32>
}
"""
    winograd = pipeline.replace("graph", [*pipeline.stage("graph").passes, *winograd_elements(4)])
    for batch, rewritten in ((1, True), (8, False)):
        compiled = tilecraft.compile(source.replace("BATCH", str(batch)), pipeline=winograd, keep_ir=True)
        assert (CONV not in compiled.ir("graph")) == rewritten, batch


@pytest.mark.parametrize("tile", [3, 0, -2, 6])
def test_an_unknown_tile_size_is_a_pipeline_error(tile):
    with pytest.raises(PipelineError, match="no transforms for tile"):
        winograd_elements(tile)


@pytest.mark.parametrize("min_tiles", [0, -1])
def test_a_min_tiles_below_one_is_a_pipeline_error(min_tiles):
    with pytest.raises(PipelineError, match="min-tiles"):
        winograd_elements(4, min_tiles)


def test_a_max_transformed_kib_below_one_is_a_pipeline_error():
    with pytest.raises(PipelineError, match="max-transformed-kib"):
        winograd_elements(4, 1, 0)


def test_a_bad_tile_option_is_a_pipeline_error():
    model, _ = _conv_model(1, 4, 8, 6, 6)
    pipeline = cpu_pipeline("llvm", opt_level=3)
    bad = pipeline.replace("graph", [*pipeline.stage("graph").passes, "tilecraft-winograd-conv{tile=four}"])
    with pytest.raises(tilecraft.TilecraftError, match="no transforms for tile"):
        tilecraft.compile(model, pipeline=bad)


def test_an_input_larger_than_the_output_needs():
    """linalg lets a convolution's input hold rows and columns it never reads (hand-written
    IR, other frontends); the rewrite transforms only the ones it reads."""
    source = """
func.func @main(%x: tensor<1x9x9x4xf32>) -> tensor<1x4x4x8xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<3x3x4x8xf32>
  %e = tensor.empty() : tensor<1x4x4x8xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x9x9x4xf32>, tensor<3x3x4x8xf32>) outs(%i : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %c : tensor<1x4x4x8xf32>
}
"""
    x = np.random.default_rng(4).standard_normal((1, 9, 9, 4)).astype(np.float32)
    expected = np.zeros((1, 4, 4, 8), np.float32)
    for i in range(4):
        for j in range(4):
            expected[0, i, j, :] = 0.5 * x[0, i:i + 3, j:j + 3, :].sum()
    for tile in TILE_SIZES:
        compiled = tilecraft.compile(source, pipeline=_winograd_pipeline(tile), keep_ir=True)
        assert CONV not in compiled.ir("graph")
        np.testing.assert_allclose(compiled(x), expected, rtol=2e-4, atol=2e-4)
