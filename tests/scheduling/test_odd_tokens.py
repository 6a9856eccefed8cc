"""Transformer blocks at odd token counts (issue #43): a ViT-style MLP block in the
sequence-first layout ``nn.MultiheadAttention`` models use ([tokens, 1, width]), whose
second Linear reduces over the first one's weight-panel output (K = 3072 as 192 panels x
16: schedule/matmul_plan.py ``reduction_block``), with its bias, erf GELU and residual add
fused, at token counts no register tile divides; and the ViT's attention form (Q and K^T
each scaled by d^-1/4, Softmax, MatMul) at 197 tokens. Compared with onnxruntime, with any
schedule falling back to scalar loops an error."""

import warnings

import numpy as np
import pytest

import tilecraft

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HIDDEN = 3072


def mlp_block(tokens: int, width: int, seq_first: bool) -> "onnx.ModelProto":
    """x -> Linear(width, 3072) -> GELU (erf, as torch exports it) -> Linear(3072, width) + x."""
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((width, HIDDEN)) / np.sqrt(width)).astype(np.float32)
    w2 = (rng.standard_normal((HIDDEN, width)) / np.sqrt(HIDDEN)).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(rng.standard_normal(HIDDEN).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), "b2"),
             numpy_helper.from_array(np.array(np.sqrt(2.0), np.float32), "sqrt2"),
             numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Div", ["hb", "sqrt2"], ["hs"]), helper.make_node("Erf", ["hs"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["hb", "e1"], ["he"]),
             helper.make_node("Mul", ["he", "half"], ["g"]), helper.make_node("MatMul", ["g", "w2"], ["o"]),
             helper.make_node("Add", ["o", "b2"], ["ob"]), helper.make_node("Add", ["ob", "x"], ["y"])]
    shape = [tokens, 1, width] if seq_first else [tokens, width]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def vit_attention(heads: int, tokens: int, depth: int = 64) -> "onnx.ModelProto":
    """nn.MultiheadAttention's exported core: Q * s, K^T * s (s = depth^-1/4), MatMul,
    Softmax, MatMul with V."""
    shape = [heads, tokens, depth]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("q", "k", "v")]
    scale = numpy_helper.from_array(np.array(depth ** -0.25, np.float32), "s")
    nodes = [helper.make_node("Mul", ["q", "s"], ["qs"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("Mul", ["kt", "s"], ["kts"]), helper.make_node("MatMul", ["qs", "kts"], ["scores"]),
             helper.make_node("Softmax", ["scores"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "attention", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                              [scale])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _check(model, feeds, rtol=1e-4, atol=1e-4):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a schedule falling back to scalar loops
        got = tilecraft.compile(model, cache=False)(**feeds)
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("tokens", [1, 5, 13, 127, 197])
def test_sequence_first_mlp_block_at_odd_token_counts(monkeypatch, rand, tokens):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")
    model = mlp_block(tokens, 48, seq_first=True)
    _check(model, {"x": rand((tokens, 1, 48))}, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("threads", ["1", "2"])
def test_two_d_mlp_block_at_197_tokens(monkeypatch, rand, threads):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", threads)
    _check(mlp_block(197, 48, seq_first=False), {"x": rand((197, 48))}, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("tokens", [5, 197])
def test_vit_attention_form_at_odd_token_counts(monkeypatch, rand, tokens):
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    feeds = {n: rand((4, tokens, 64)) for n in ("q", "k", "v")}
    _check(vit_attention(4, tokens), feeds, rtol=1e-5, atol=1e-5)


def test_rows_are_peeled_not_padded_by_default(monkeypatch, rand):
    """197 tokens stay 197 rows in the graph stage (pipelines/graph/padded_extents.py
    ``PAD_ROWS`` is off): the schedule peels the partial register tile."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model = mlp_block(197, 48, seq_first=True)
    module = tilecraft.compile(model, keep_ir=True, cache=False)
    x = rand((197, 1, 48))
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(module(x), want, rtol=2e-4, atol=2e-4)
    graph_ir = module.ir("graph")
    assert "tensor<197x" in graph_ir and "tensor<216x" not in graph_ir
