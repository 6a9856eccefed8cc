"""The fused attention kernel's AVX2 form and Swin's window attention (issue #43,
pipelines/tensor/fused_attention.py).

On AVX2 (8-lane vectors) a row's Dv / 8 output vectors and its score vectors leave no room
for a second row in 16 registers, so the kernel takes a block of ``BLOCK_ROWS`` query rows
per block of keys with their outputs in the output tile (L1), not in registers
(``AttentionShape.blocked``): numerics at odd token counts, causal and padding masks,
grouped-query heads and Dv of 32 and 64 against onnxruntime. Swin's scores get a bias per
head and, regrouped to [batch, windows, heads, M, N], the shift mask per window, then are
regrouped back before the softmax: the matcher does not follow a chain through a reshape
(fused, the whole Swin-T-style model ran at twice its unfused time), so those stay unfused
ops, with the bias a constant or an input, whichever dims the reshape regroups."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft import CompileOptions
from tilecraft.pipelines.tensor.attention_kernel import BLOCK_ROWS, AttentionShape

KERNEL_CALL = "call @tilecraft_attention"


def _first(result) -> np.ndarray:
    return np.asarray(result[0] if isinstance(result, (tuple, list)) else result)


def _onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _compile(model: onnx.ModelProto) -> "tilecraft.CompiledModule":
    return tilecraft.compile(model, CompileOptions(keep_ir=True, cache=False))


def _random_feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {value.name: rng.standard_normal([d.dim_value for d in value.type.tensor_type.shape.dim]).astype(np.float32)
            for value in model.graph.input}


def test_avx2_rows_share_key_blocks_where_one_row_fills_the_registers():
    vit = AttentionShape(12, 197, 197, 64, 64, (12, 197, 197), 8)
    assert vit.blocked and vit.tile_rows == BLOCK_ROWS and vit.key_block == 40
    assert vit.score_rows == 2  # 2 rows x 5 score vectors + 2 broadcasts in 16 registers
    window = AttentionShape(192, 49, 49, 32, 32, (64, 3, 49, 49), 8)
    assert window.blocked
    narrow = AttentionShape(12, 128, 128, 16, 16, (12, 128, 128), 8)  # 2 rows fit: registers
    assert not narrow.blocked and narrow.tile_rows == 2
    avx512 = AttentionShape(12, 197, 197, 64, 64, (12, 197, 197), 16)  # AVX-512's 4 x 4 tile, as before
    assert not avx512.blocked and avx512.tile_rows == 4


def _attention(batch: int, heads: int, rows: int, keys: int, depth: int, value_depth: int, mask: str | None,
               kv_heads: int | None = None) -> onnx.ModelProto:
    """MatMul(Q, Transpose(K)) * scale [+ mask] -> Softmax -> MatMul(P, V); ``kv_heads``:
    K and V have fewer heads, each repeated for heads / kv_heads query heads (Expand and
    Reshape, as grouped-query attention exports)."""
    kv = kv_heads or heads
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [batch, heads, rows, depth]),
              helper.make_tensor_value_info("k", TensorProto.FLOAT, [batch, kv, keys, depth]),
              helper.make_tensor_value_info("v", TensorProto.FLOAT, [batch, kv, keys, value_depth])]
    inits = [numpy_helper.from_array(np.array(depth ** -0.5, np.float32), "scale")]
    nodes, k, v = [], "k", "v"
    if kv_heads:
        group = heads // kv_heads
        for name, d in (("k", depth), ("v", value_depth)):
            inits += [numpy_helper.from_array(np.array([batch, kv, group, keys, d], np.int64), f"{name}_grouped"),
                      numpy_helper.from_array(np.array([batch, heads, keys, d], np.int64), f"{name}_heads"),
                      numpy_helper.from_array(np.array([2], np.int64), f"{name}_axis")]
            nodes += [helper.make_node("Unsqueeze", [name, f"{name}_axis"], [f"{name}_u"]),
                      helper.make_node("Expand", [f"{name}_u", f"{name}_grouped"], [f"{name}_e"]),
                      helper.make_node("Reshape", [f"{name}_e", f"{name}_heads"], [f"{name}_r"])]
        k, v = "k_r", "v_r"
    nodes += [helper.make_node("Transpose", [k], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "kt"], ["s"]),
              helper.make_node("Mul", ["s", "scale"], ["x" if mask is None else "xs"])]
    if mask == "causal":
        inits.append(numpy_helper.from_array(np.triu(np.full((rows, keys), -np.inf, np.float32), 1), "mask"))
        nodes.append(helper.make_node("Add", ["xs", "mask"], ["x"]))
    elif mask == "padding":
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [batch, 1, 1, keys]))
        nodes.append(helper.make_node("Add", ["xs", "mask"], ["x"]))
    nodes += [helper.make_node("Softmax", ["x"], ["p"], axis=-1), helper.make_node("MatMul", ["p", v], ["y"])]
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, heads, rows, value_depth])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("batch, heads, rows, keys, depth, value_depth, mask, kv_heads", [
    (1, 2, 37, 37, 64, 64, None, None),        # odd rows (a partial row block) and keys (a padded block)
    (1, 2, 49, 49, 32, 32, None, None),        # Swin's 7 x 7 windows, Dv 32
    (1, 2, 45, 45, 64, 64, "causal", None),    # key blocks a causal mask rules out skipped
    (2, 2, 19, 53, 64, 64, "padding", None),   # fewer queries than keys, a mask per batch entry
    (1, 4, 21, 21, 64, 64, None, 2),           # grouped-query heads: 2 K/V heads for 4 query heads
    (1, 2, 13, 13, 64, 40, None, None),        # Dv 40: a partial output vector
])
def test_blocked_attention_matches_onnxruntime(batch, heads, rows, keys, depth, value_depth, mask, kv_heads):
    model = _attention(batch, heads, rows, keys, depth, value_depth, mask, kv_heads)
    compiled = _compile(model)
    assert compiled.ir("simplify").count(KERNEL_CALL) == 1
    feeds = _random_feeds(model, 0)
    if mask == "padding":  # the last quarter of each entry's keys masked out
        feeds["mask"] = np.where(np.arange(keys) >= keys - keys // 4, -1e4, 0).astype(np.float32) \
            * np.ones((batch, 1, 1, keys), np.float32)
    np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds), rtol=1e-4, atol=2e-5)


def _swin_windows(windows: int, heads: int, tokens: int, depth: int, *, bias: str = "constant",
                  regroup: str = "windows") -> onnx.ModelProto:
    """Swin's window attention as PyTorch exports it: ``Q K^T * scale + bias`` (per head,
    [heads, tokens, tokens]; ``bias="input"``: a model input), reshaped to [1, windows, heads,
    tokens, tokens] to add the shift mask ([windows, 1, tokens, tokens]), reshaped back,
    softmax, @ V. ``regroup="keys"``: the mask is added with the keys split in two
    ([windows, heads, tokens, 7, tokens / 7]), which the kernel cannot read as vectors."""
    rng = np.random.default_rng(1)
    shape = [windows, heads, tokens, depth]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("q", "k", "v")]
    regions = rng.integers(0, 3, size=(windows, tokens))
    mask = np.where(regions[:, :, None] != regions[:, None, :], -100.0, 0.0).astype(np.float32)[:, None]
    inits = [numpy_helper.from_array(np.array(depth ** -0.5, np.float32), "scale"),
             numpy_helper.from_array(np.array([-1, heads, tokens, tokens], np.int64), "flat")]
    if bias == "input":
        inputs.append(helper.make_tensor_value_info("bias", TensorProto.FLOAT, [heads, tokens, tokens]))
    else:
        inits.append(numpy_helper.from_array((rng.standard_normal((heads, tokens, tokens)) * 0.5).astype(np.float32),
                                             "bias"))
    if regroup == "keys":
        inits += [numpy_helper.from_array(np.array([windows, heads, tokens, 7, tokens // 7], np.int64), "grouped"),
                  numpy_helper.from_array(mask.reshape(windows, 1, tokens, 7, tokens // 7), "mask")]
    else:
        inits += [numpy_helper.from_array(np.array([-1, windows, heads, tokens, tokens], np.int64), "grouped"),
                  numpy_helper.from_array(mask, "mask")]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "scale"], ["ss"]),
             helper.make_node("Add", ["ss", "bias"], ["sb"]),
             helper.make_node("Reshape", ["sb", "grouped"], ["s5"]),
             helper.make_node("Add", ["s5", "mask"], ["m5"]),
             helper.make_node("Reshape", ["m5", "flat"], ["x"]),
             helper.make_node("Softmax", ["x"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "swin_windows", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("bias, regroup", [("constant", "windows"), ("input", "windows"), ("constant", "keys")])
def test_swin_window_attention_stays_unfused(bias, regroup):
    """Not one ``tilecraft_attention`` call: the reshapes between the bias and the mask end
    the chain (fused_attention.py's docstring says why), and the unfused ops match."""
    model = _swin_windows(4, 3, 49, 32, bias=bias, regroup=regroup)
    compiled = _compile(model)
    assert KERNEL_CALL not in compiled.ir("simplify")
    feeds = _random_feeds(model, 2)
    np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds), rtol=1e-4, atol=2e-5)


def test_an_input_bias_is_read_per_call_not_folded():
    """The same build, two biases: an input's bias is read at each call."""
    model = _swin_windows(2, 2, 49, 32, bias="input")
    compiled = _compile(model)
    feeds = _random_feeds(model, 3)
    for scale in (0.0, 3.0):
        feeds["bias"] = (np.random.default_rng(4).standard_normal(feeds["bias"].shape) * scale).astype(np.float32)
        np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds), rtol=1e-4, atol=2e-5)
