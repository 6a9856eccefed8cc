"""The fused attention kernel's register tile on AVX2 (issue #43): 8-lane vectors, key blocks
of up to 6 vectors and as many query rows as 16 registers hold (attention_kernel.py,
``AttentionShape.tile_rows``), with AVX-512's 16-lane 4 x 4 tile unchanged; numerics of the
8-lane kernel at odd token counts against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft import CompileOptions
from tilecraft.pipelines.cpu import cpu_pipeline
from tilecraft.pipelines.target import Target
from tilecraft.pipelines.tensor.attention_kernel import AttentionShape, kernel_module
from tilecraft.pipelines.tensor.fused_attention import FUSE_ATTENTION_PASS


@pytest.mark.parametrize("keys, depth, value_depth, lanes, block, rows", [
    (197, 64, 64, 16, 32, 4),   # AVX-512: 4 rows x 2 key vectors, as before
    (128, 64, 64, 16, 64, 4),
    # AVX2: 197 keys pad to 200; 8 output + 5 score vectors a row leave no room for a second
    # row: a block of 4 rows, their outputs in L1 (AttentionShape.blocked; test_attention_blocks.py)
    (197, 64, 64, 8, 40, 4),
    (128, 64, 64, 8, 32, 4),
    (49, 32, 32, 8, 56, 4),     # swin's 7 x 7 windows: 49 keys in one block of 56
    (20, 16, 16, 8, 24, 3),     # fewer keys than a block: all of them, whole vectors; 3 rows
    (128, 16, 16, 8, 32, 2),    # 2 output + 4 score vectors a row: two rows in 16 registers
])
def test_the_tile_fits_the_register_file(keys, depth, value_depth, lanes, block, rows):
    shape = AttentionShape(12, 197, keys, depth, value_depth, (12, 197, keys), lanes)
    assert shape.key_block == block and shape.tile_rows == rows
    if lanes == 8 and not shape.blocked:  # outputs and scores of every row, and a broadcast, in 16 registers
        assert rows * (value_depth // lanes + block // lanes) + 1 <= 16


def test_avx2_targets_take_8_lanes_and_avx512_16():
    assert Target.parse("llvm -mcpu=znver2").attention_lanes == 8
    assert Target.parse("llvm -mcpu=sapphirerapids").attention_lanes == 16


def test_the_8_lane_kernel_uses_256_bit_vectors():
    with ir.Context(), ir.Location.unknown():
        text = str(kernel_module("k", AttentionShape(2, 37, 37, 64, 64, (2, 37, 37), 8), [], 1))
    assert "vector<8xf32>" in text and "vector<16xf32>" not in text


def _model(batch: int, tokens: int, depth: int) -> object:
    shape = [batch, tokens, depth]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "qkv"]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "scale"], ["x"]),
             helper.make_node("Softmax", ["x"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                              [numpy_helper.from_array(np.array(depth ** -0.5, np.float32), "scale")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("batch, tokens, depth", [(2, 37, 64), (3, 49, 32), (2, 11, 16)])
def test_8_lane_attention_at_odd_token_counts_matches_numpy(batch, tokens, depth):
    pipeline = cpu_pipeline("llvm", opt_level=3)
    passes = [f"{FUSE_ATTENTION_PASS}{{num-threads=2 lanes=8}}" if p.startswith(FUSE_ATTENTION_PASS) else p
              for p in pipeline.stage("simplify").passes]
    module = tilecraft.compile(_model(batch, tokens, depth),
                               CompileOptions(pipeline=pipeline.replace("simplify", passes), cache=False))
    assert "call @tilecraft_attention" in module.ir("simplify")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((batch, tokens, depth)).astype(np.float32) for _ in range(3))
    scores = q @ k.transpose(0, 2, 1) * depth ** -0.5
    p = np.exp(scores - scores.max(-1, keepdims=True))
    expected = (p / p.sum(-1, keepdims=True)) @ v
    got = module(q, k, v)
    np.testing.assert_allclose(got[0] if isinstance(got, (list, tuple)) else got, expected, rtol=1e-4, atol=1e-5)
