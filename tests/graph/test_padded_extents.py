"""Matmuls on padded extents (pipelines/graph/padded_extents.py): which extents are padded,
numerics against onnxruntime with the padded lines carried through epilogues and layer
norms, and with ops after them that would sum padded lines in (a reduction or a softmax
over the rows), where the slice back must come first."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.pipelines.graph import padded_extents  # noqa: E402
from tilecraft.pipelines.graph.padded_extents import (  # noqa: E402
    needs_column_padding,
    needs_row_padding,
    padded_filters,
)


@pytest.fixture(autouse=True)
def pad_rows(monkeypatch):
    """Row padding is off by default (peeling ran faster, docs/performance.md "Transformers at
    odd token counts"); these tests switch it on to cover the padded lines' slicing."""
    monkeypatch.setattr(padded_extents, "PAD_ROWS", True)


def _model(nodes, inputs, output, output_shape, initializers):
    graph = helper.make_graph(
        nodes, "padded",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, output_shape)],
        [numpy_helper.from_array(array, name) for name, array in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _weights(rng, *shape):
    return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)


def _check(model, feeds, threads, monkeypatch):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    compiled = tilecraft.compile(model, keep_ir=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)[0]
    got = compiled(*feeds.values())
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-4)
    return compiled.ir("graph")


@pytest.mark.parametrize("rows,padded", [(197, True), (33, False), (121, True), (128, False), (196, False),
                                         (10, False), (1, False)])
def test_rows_padded_where_no_register_tile_divides(rows, padded):
    # 33 rows: 48 would add 45 % more work; 196 = 7 x 28 takes 7-row tiles.
    assert needs_row_padding(rows) is padded


@pytest.mark.parametrize("columns,padded", [(500, True), (250, True), (4001, True), (1000, False),
                                            (768, False), (10, False), (20, False)])
def test_columns_padded_where_vectors_would_be_narrow(columns, padded):
    # 1000 keeps 8-lane vectors; 10 and 20 fit a register or two (20 -> 32 is 60 % more).
    assert needs_column_padding(columns) is padded


@pytest.mark.parametrize("threads", ["1", "2"])
def test_vit_shaped_block_runs_on_padded_rows(monkeypatch, threads):
    """197 tokens: both projections, the GELU, the residual and the layer norm run on 216
    rows; the slice comes once, at the output."""
    rng = np.random.default_rng(0)
    width, hidden = 64, 256
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Erf", ["hb"], ["g"]), helper.make_node("MatMul", ["g", "w2"], ["o"]),
             helper.make_node("Add", ["o", "x"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "gamma", "beta"], ["y"], axis=-1)]
    model = _model(nodes, [("x", [1, 197, width])], "y", [1, 197, width],
                   {"w1": _weights(rng, width, hidden), "b1": rng.standard_normal(hidden).astype(np.float32),
                    "w2": _weights(rng, hidden, width), "gamma": rng.standard_normal(width).astype(np.float32),
                    "beta": rng.standard_normal(width).astype(np.float32)})
    graph_ir = _check(model, {"x": rng.standard_normal((1, 197, width)).astype(np.float32)}, threads, monkeypatch)
    assert "tensor<216x" in graph_ir
    assert graph_ir.count("tensor.extract_slice") == 1


@pytest.mark.parametrize("reduction", ["ReduceSum", "Softmax"])
def test_ops_mixing_rows_read_the_real_rows_only(monkeypatch, reduction):
    """A bias makes the padded rows nonzero: a sum or a softmax over the rows that read them
    would be wrong."""
    rng = np.random.default_rng(1)
    after = (helper.make_node("ReduceSum", ["hb", "axes"], ["y"], keepdims=0) if reduction == "ReduceSum"
             else helper.make_node("Softmax", ["hb"], ["y"], axis=0))
    initializers = {"w": _weights(rng, 64, 48), "b": (3 + rng.standard_normal(48)).astype(np.float32)}
    if reduction == "ReduceSum":
        initializers["axes"] = np.array([0], np.int64)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]), after]
    model = _model(nodes, [("x", [197, 64])], "y", [48] if reduction == "ReduceSum" else [197, 48], {
        k: v for k, v in initializers.items() if k != "axes"})
    if reduction == "ReduceSum":
        model.graph.initializer.append(numpy_helper.from_array(initializers["axes"], "axes"))
    graph_ir = _check(model, {"x": rng.standard_normal((197, 64)).astype(np.float32)}, "2", monkeypatch)
    assert "tensor<216x" in graph_ir


def test_mlp_columns_padded_with_constant_weights(monkeypatch):
    """500 and 250 outputs: padded to 512 and 256 (weights padded at compile time); the
    10-way classifier is left alone."""
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h1"]), helper.make_node("Relu", ["h1"], ["r1"]),
             helper.make_node("Gemm", ["r1", "w2", "b2"], ["h2"]), helper.make_node("Tanh", ["h2"], ["r2"]),
             helper.make_node("Gemm", ["r2", "w3", "b3"], ["y"])]
    model = _model(nodes, [("x", [32, 100])], "y", [32, 10],
                   {"w1": _weights(rng, 100, 500), "b1": rng.standard_normal(500).astype(np.float32),
                    "w2": _weights(rng, 500, 250), "b2": rng.standard_normal(250).astype(np.float32),
                    "w3": _weights(rng, 250, 10), "b3": rng.standard_normal(10).astype(np.float32)})
    graph_ir = _check(model, {"x": rng.standard_normal((32, 100)).astype(np.float32)}, "2", monkeypatch)
    assert "x512x" in graph_ir or "32x512" in graph_ir


def test_input_weights_keep_their_columns(monkeypatch):
    """B is an input: padding its columns would copy it per call, so only the rows are
    padded."""
    rng = np.random.default_rng(3)
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", [197, 64]), ("w", [64, 500])],
                   "y", [197, 500], {})
    feeds = {"x": rng.standard_normal((197, 64)).astype(np.float32),
             "w": rng.standard_normal((64, 500)).astype(np.float32)}
    graph_ir = _check(model, feeds, "2", monkeypatch)
    assert "216x500" in graph_ir
    assert "512" not in graph_ir


@pytest.mark.parametrize("filters,computed", [(71, 72), (37, 40), (131, 144), (1000, 1000), (64, 64),
                                              (5, 5), (8, 8), (1001, 1008), (100, 112)])
def test_conv_filters_padded_to_whole_vectors(filters, computed):
    # 71 -> 80 would add 12.7 %: one vector's multiple (72) instead of two vectors' (80).
    assert padded_filters(filters) == computed


@pytest.mark.parametrize("filters,computed", [(71, 80), (37, 48), (131, 144), (72, 80), (24, 32), (40, 48),
                                              (144, 144), (240, 240), (5, 5), (8, 8), (20, 32), (100, 112),
                                              (496, 496)])
def test_conv_filters_on_16_lanes_padded_to_16(filters, computed):
    # An 8-lane FMA is one instruction as a 16-lane one is: 71 filters as 5 vectors of 16,
    # not 9 of 8, whatever the padding adds in flops; 24 as 2 vectors of 16, not 3 of 8. An
    # odd count of 16-lane vectors stays odd where one more is more than 1/32 of the work
    # (9, 15 and 31 vectors: 144, 240, 496).
    assert padded_filters(filters, lanes=16) == computed


@pytest.mark.parametrize("filters,computed", [(24, 24), (40, 40), (72, 72), (71, 80), (1000, 1024)])
def test_filters_into_a_destination_stay_multiples_of_8_on_16_lanes(filters, computed):
    # A result padded or concatenated next is written into the pad's interior or its part
    # of the concat; sliced back from padded filters it would be copied there.
    assert padded_filters(filters, lanes=16, into_destination=True) == computed


@pytest.mark.parametrize("filters,reduction,computed", [
    (232, 232, 240),   # ShuffleNet's 232 -> 232 1x1: 29 8-lane FMAs against 15 16-lane ones
    (232, 9, 232),     # a short reduction: the copy costs more than the FMAs saved
    (24, 144, 24),     # a 144 -> 24 projection: 3 against 2, kept in place
    (24, 27, 24),      # ShuffleNet's stem, 3 channels x 3 x 3
    (40, 1152, 48),    # 5 against 3 over 128 channels x 3 x 3
    (72, 232, 80),     # 9 against 5
    (80, 4096, 80),    # whole 16-lane vectors: nothing to save
    (1000, 8, 1024),   # even vectors of 32 whatever the destination (1/32 of the filters)
])
def test_filters_into_a_destination_padded_where_the_fmas_saved_outweigh_the_copy(filters, reduction, computed):
    assert padded_filters(filters, lanes=16, into_destination=True, reduction=reduction) == computed
    # Not into a destination, the reduction does not matter; on 8 lanes nothing changes.
    assert padded_filters(filters, lanes=16, reduction=reduction) == padded_filters(filters, lanes=16)
    assert padded_filters(filters, into_destination=True, reduction=reduction) == padded_filters(filters)


def test_destination_padding_weighs_the_fmas_saved_against_the_copy():
    # reduction x (8-lane vectors - 16-lane vectors) against the copy's cost per 16-lane vector.
    copy = padded_extents.DESTINATION_COPY_FMAS
    assert not padded_extents.destination_padding_pays(24, 2 * copy)       # 2 x 128 x 1 = 128 x 2
    assert padded_extents.destination_padding_pays(24, 2 * copy + 1)
    assert not padded_extents.destination_padding_pays(48, 10 ** 6)        # 3 vectors of 16: none saved


@pytest.mark.parametrize("filters,computed", [(1000, 1024), (1001, 1024), (1008, 1024), (720, 736), (1024, 1024),
                                              (528, 544), (1152, 1152)])
def test_wide_conv_filters_on_16_lanes_padded_to_even_vectors(filters, computed):
    # An odd count of 16-lane vectors (1008: 63) leaves the register tile one vector of
    # channels; from 33 vectors on, one more is at most 1/32 of the work.
    assert padded_filters(filters, lanes=16) == computed


@pytest.mark.parametrize("threads", ["1", "2"])
def test_conv_chain_with_prime_channels_runs_on_padded_filters(monkeypatch, threads):
    """3 -> 37 -> 71 channels (primes) through Conv, BatchNormalization (folded into the
    padded filter) and ReLU, then a 3x3 conv reading the 71 real channels: each conv
    computes whole vectors of filters (40, 72 on AVX2's 8 lanes, 48, 80 on 16) and slices
    back after its epilogue."""
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("BatchNormalization", ["c1", "scale", "shift", "mean", "var"], ["n1"]),
             helper.make_node("Relu", ["n1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["y"])]
    model = _model(nodes, [("x", [1, 3, 29, 29])], "y", [1, 71, 15, 15],
                   {"w1": _weights(rng, 37, 3, 3, 3), "b1": rng.standard_normal(37).astype(np.float32),
                    "scale": rng.uniform(0.5, 2, 37).astype(np.float32),
                    "shift": rng.standard_normal(37).astype(np.float32),
                    "mean": rng.standard_normal(37).astype(np.float32),
                    "var": rng.uniform(0.5, 2, 37).astype(np.float32),
                    "w2": (rng.standard_normal((71, 37, 3, 3)) / 18).astype(np.float32)})
    graph_ir = _check(model, {"x": rng.standard_normal((1, 3, 29, 29)).astype(np.float32)}, threads, monkeypatch)
    lanes = tilecraft.Target.parse("llvm").vector_bits // 32
    assert f"x{padded_filters(37, lanes)}xf32>" in graph_ir and f"x{padded_filters(71, lanes)}xf32>" in graph_ir
    # The batch norm folded into the padded filter: a bias add and two ReLUs are left.
    assert graph_ir.count("linalg.generic") == 3


def _shufflenet_unit(rng, channels: int, groups: int):
    """A ShuffleNet V2 unit of ``2 * channels`` channels: the input split in halves, the second
    through 1x1 conv + ReLU, 3x3 depthwise, 1x1 conv + ReLU (the first conv's result is padded
    for the depthwise one, the last one's concatenated: both write into a destination), the
    halves concatenated and shuffled in ``groups`` groups (reshape, transpose, reshape)."""
    total = 2 * channels
    nodes = [helper.make_node("Split", ["x", "halves"], ["x1", "x2"], axis=1),
             helper.make_node("Conv", ["x2", "w1", "b1"], ["c1"]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "wd"], ["d"], pads=[1, 1, 1, 1], group=channels),
             helper.make_node("Conv", ["d", "w2", "b2"], ["c2"]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Concat", ["x1", "r2"], ["cat"], axis=1),
             helper.make_node("Reshape", ["cat", "grouped"], ["g"]),
             helper.make_node("Transpose", ["g"], ["t"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t", "flat"], ["y"])]
    initializers = {"halves": np.array([channels, channels], np.int64),
                    "w1": _weights(rng, channels, channels, 1, 1), "b1": rng.standard_normal(channels).astype(np.float32),
                    "wd": (rng.standard_normal((channels, 1, 3, 3)) / 3).astype(np.float32),
                    "w2": _weights(rng, channels, channels, 1, 1), "b2": rng.standard_normal(channels).astype(np.float32),
                    "grouped": np.array([1, groups, total // groups, 7, 7], np.int64),
                    "flat": np.array([1, total, 7, 7], np.int64)}
    return _model(nodes, [("x", [1, total, 7, 7])], "y", [1, total, 7, 7], initializers)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("channels,groups", [(232, 2), (232, 29), (40, 5)])
def test_shufflenet_unit_with_branch_filters_into_destinations(monkeypatch, threads, channels, groups):
    """ShuffleNet's 232-channel units (and 40: 5 8-lane vectors over a short reduction),
    odd group counts included: the branch convs write into the depthwise conv's pad and into
    the concat; on 16 lanes 232 -> 232 computes 240 filters and copies the slice there, as
    ``destination_padding_pays`` weighs it, and 40 -> 40 stays in place (40 x 2 < 128 x 3)."""
    rng = np.random.default_rng(7)
    model = _shufflenet_unit(rng, channels, groups)
    graph_ir = _check(model, {"x": rng.standard_normal((1, 2 * channels, 7, 7)).astype(np.float32)},
                      threads, monkeypatch)
    lanes = tilecraft.Target.parse("llvm").vector_bits // 32
    computed = padded_filters(channels, lanes, into_destination=True, reduction=channels)
    assert f"x1x{channels}x{computed}xf32>" in graph_ir
    if lanes >= 16:
        assert computed == (240 if channels == 232 else 40)
