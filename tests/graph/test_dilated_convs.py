"""Dilated convolutions split by the taps that read the input (pipelines/graph/dilated_convs.py):
the run arithmetic against a brute-force count, the rewrite's numerics against onnxruntime
(bias, batch norm, ReLU; rows only and rows x columns; strides; depthwise; pads wider than
the window reaches; batches), the convolutions it leaves alone, and the pass list."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.pipelines.graph import graph_pass_elements  # noqa: E402
from tilecraft.pipelines.graph.dilated_convs import (  # noqa: E402
    PASS, reads_of_input, tap_regions, tile_friendly_runs)
from graph_models import append_batch_norm_relu  # noqa: E402

CONV = "linalg.conv_2d_nhwc_hwcf"
DEPTHWISE = "linalg.depthwise_conv_2d_nhwc_hwc"


@pytest.mark.parametrize("outputs, extent, low, kernel, stride, dilation", [
    (32, 32, 18, 3, 1, 18), (32, 32, 6, 3, 1, 6), (33, 33, 12, 3, 1, 12), (35, 33, 2, 3, 1, 2),
    (16, 32, 6, 3, 2, 6), (8, 8, 12, 3, 1, 12), (10, 4, 5, 3, 1, 2), (20, 20, 4, 5, 1, 2)])
def test_tap_runs_match_a_brute_force_count(outputs, extent, low, kernel, stride, dilation):
    """Every output of a run reads the input through exactly the run's taps, and the runs
    cover the outputs in order."""
    regions = tap_regions(outputs, extent, low, kernel, stride, dilation)
    assert regions[0][0] == 0 and regions[-1][1] == outputs
    assert all(a[1] == b[0] for a, b in zip(regions, regions[1:]))
    for begin, end, first, last in regions:
        for o in range(begin, end):
            inside = [t for t in range(kernel) if 0 <= o * stride + t * dilation - low < extent]
            assert inside == list(range(first, last + 1))
    brute = sum(1 for o in range(outputs) for t in range(kernel) if 0 <= o * stride + t * dilation - low < extent)
    assert reads_of_input(regions) == brute


def test_column_runs_keep_register_tiles():
    """A 29-column run (dilation 2 on 33 columns) has no 4-8 pixel tile: it is cut in two that
    have, with the same taps."""
    runs = tile_friendly_runs(tap_regions(33, 33, 2, 3, 1, 2))
    assert [(b, e) for b, e, _, _ in runs] == [(0, 2), (2, 27), (27, 31), (31, 33)]
    assert runs[1][2:] == runs[2][2:] == (0, 2)


def _conv_model(channels: int, filters: int, size: int, dilation: int, *, pads: tuple[int, int] | None = None,
                stride: int = 1, groups: int = 1, batch: int = 1, batch_norm: bool = True, seed: int = 0):
    """Conv (+ bias) [+ BatchNormalization] + Relu, NCHW as ONNX stores it; "same" pads by
    default, else ``pads`` (rows, columns) on both sides."""
    rng = np.random.default_rng(seed)
    pads = (dilation, dilation) if pads is None else pads
    w = (rng.standard_normal((filters, channels // groups, 3, 3)) / np.sqrt(9 * channels // groups)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(rng.standard_normal(filters).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[*pads, *pads],
                              strides=[stride, stride], dilations=[dilation, dilation], group=groups)]
    append_batch_norm_relu(nodes, inits, rng, filters, "c", batch_norm)
    out = [(size + 2 * p - 2 * dilation - 1) // stride + 1 for p in pads]
    graph = helper.make_graph(
        nodes, "dilated", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, filters, *out])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = rng.standard_normal((batch, channels, size, size)).astype(np.float32)
    return model, x


def _graph_ir_after_checking(model, x) -> str:
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, cache=False, keep_ir=True)
    np.testing.assert_allclose(compiled(x=x), expected, rtol=1e-4, atol=1e-4)
    return compiled.ir("graph")


@pytest.mark.parametrize("case, convolutions", [
    (dict(size=32, dilation=4), 3),            # rows only: 8 % of the taps read padding
    (dict(size=32, dilation=18), 9),           # rows x columns: 3 x 3 parts
    (dict(size=32, dilation=12), 3),           # rows only (a quarter of the column taps read padding)
    (dict(size=33, dilation=12), 3),           # 33 columns widened to 35 by the frontend
    (dict(size=8, dilation=12), 1),            # only the centre tap reads the input: a 1x1 convolution
    (dict(size=20, dilation=6, stride=2), 3),  # strided
    (dict(size=16, dilation=6, batch=2), 3),
    (dict(size=10, dilation=2, pads=(5, 0)), 5),  # rows no tap reaches: the bias alone
    (dict(size=10, dilation=2, pads=(5, 5)), 5),  # 7 x 7 runs: too many parts, rows only
], ids=["d4-rows", "d18-rows-and-columns", "d12-rows", "d12-widened", "d12-centre-only", "stride2", "batch2",
        "pads-past-the-window", "too-many-column-runs"])
def test_a_split_convolution_matches_onnxruntime(case, convolutions):
    model, x = _conv_model(8, 16, **case)
    graph_ir = _graph_ir_after_checking(model, x)
    assert graph_ir.count(CONV + " ") == convolutions
    # No part reads a padded row: the input is padded in its columns at most.
    assert f"low[0, {case.get('pads', [case['dilation']])[0]}, " not in graph_ir


def test_a_depthwise_dilated_convolution_is_split():
    model, x = _conv_model(16, 16, 24, 12, groups=16)
    graph_ir = _graph_ir_after_checking(model, x)
    assert graph_ir.count(DEPTHWISE + " ") == 4  # rows 0-11 and 12-23 by the same columns


@pytest.mark.parametrize("case", [dict(size=32, dilation=1), dict(size=32, dilation=2), dict(size=16, dilation=2, pads=(0, 0))],
                         ids=["undilated", "few-padded-reads", "unpadded"])
def test_other_convolutions_are_left_alone(case):
    """Undilated convolutions, those whose padded reads are under the threshold (4 % at
    dilation 2 on 32 x 32) and unpadded ones keep their one convolution."""
    model, x = _conv_model(8, 16, **case)
    assert _graph_ir_after_checking(model, x).count(CONV + " ") == 1


def test_the_pass_runs_after_folding_at_opt_level_3_only():
    """After the folder, so batch norms fold into the whole convolution first; NHWC
    convolutions exist at opt_level 3 only."""
    elements = graph_pass_elements(3)
    assert elements.index(PASS) > elements.index("tilecraft-fold-constants")
    assert all(PASS not in graph_pass_elements(level) for level in (0, 1, 2))


@pytest.mark.parametrize("case", [
    dict(channels=13, filters=40, size=29, dilation=6),   # odd channels and map, rows only
    dict(channels=24, filters=64, size=31, dilation=18),  # rows x columns
    dict(channels=32, filters=48, size=19, dilation=4, stride=2),
], ids=["odd-rows", "odd-rows-and-columns", "strided"])
def test_split_parts_read_their_filters_block_major(case):
    """Each part's taps are a constant of its own, so the kernels read every filter
    block-major (pipelines/tensor/blocked_constants.py) as they read an unsplit
    convolution's: no vector read of a filter in its ``KH x KW x C x F`` layout remains.
    With the parts' filters as views of the whole one, none of them was blocked and the
    split convolutions ran slower than unsplit on the Zen 5 (docs/performance.md). The
    target is pinned (AVX2 code runs on every host the tests run on)."""
    from pinned_targets import AVX2

    model, x = _conv_model(case.pop("channels"), case.pop("filters"), **case)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})[0]
    compiled = tilecraft.compile(model, cache=False, keep_ir=True, target=AVX2)
    np.testing.assert_allclose(compiled(x=x), expected, rtol=1e-4, atol=1e-4)
    assert compiled.ir("graph").count(CONV + " ") > 1
    channels, filters = model.graph.initializer[0].dims[1], model.graph.initializer[0].dims[0]
    buffers = compiled.ir("bufferize")
    row_major = re.findall(rf"vector\.transfer_read [^\n]*memref<[123]x[123]x{channels}x{filters}xf32[,>]", buffers)
    assert not row_major, row_major[:2]
