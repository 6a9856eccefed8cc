"""Attention as one fused kernel (pipelines/tensor/fused_attention.py): which graphs become the
kernel, and that its results match onnxruntime, PyTorch and tilecraft's own unfused build
(masks, causal, padded key blocks, fully masked rows)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft import CompileOptions
from tilecraft.errors import PipelineError
from tilecraft.pipelines.cpu import cpu_pipeline
from tilecraft.pipelines.tensor.attention_kernel import AttentionShape
from tilecraft.pipelines.tensor.fused_attention import FUSE_ATTENTION_PASS

KERNEL_CALL = "call @tilecraft_attention"


def _fused(model, **options):
    return tilecraft.compile(model, CompileOptions(keep_ir=True, **options))


def _unfused(model):
    pipeline = cpu_pipeline("llvm", opt_level=3)
    passes = [p for p in pipeline.stage("simplify").passes if not p.startswith(FUSE_ATTENTION_PASS)]
    return tilecraft.compile(model, CompileOptions(pipeline=pipeline.replace("simplify", passes)))


def _first(result):
    return np.asarray(result[0] if isinstance(result, (tuple, list)) else result)


def _attention_model(shape: tuple[int, ...], keys: int, value_depth: int, *, scale: bool = True,
                     mask: str | None = None, extra_output: bool = False) -> onnx.ModelProto:
    """MatMul(Q, Transpose(K)) [* scale] [+ mask] -> Softmax -> MatMul(P, V), as exporters
    write it; ``shape`` is Q's (batch dims..., M, D)."""
    *batch, m, d = shape
    k_shape, v_shape = [*batch, keys, d], [*batch, keys, value_depth]
    perm = list(range(len(shape)))
    perm[-2:] = perm[-1], perm[-2]
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, list(shape)),
              helper.make_tensor_value_info("k", TensorProto.FLOAT, k_shape),
              helper.make_tensor_value_info("v", TensorProto.FLOAT, v_shape)]
    inits = [numpy_helper.from_array(np.array(1 / np.sqrt(d), np.float32), "scale")]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=perm),
             helper.make_node("MatMul", ["q", "kt"], ["s0"])]
    last = "s0"
    if scale:
        nodes.append(helper.make_node("Mul", [last, "scale"], ["s1"]))
        last = "s1"
    if mask == "padding":  # [batch, 1, ..., keys], an input
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [*batch[:1], *[1] * (len(batch) - 1), 1, keys]))
        nodes.append(helper.make_node("Add", [last, "mask"], ["s2"]))
        last = "s2"
    elif mask == "causal":  # [M, keys] constant, -inf above the diagonal
        inits.append(numpy_helper.from_array(np.triu(np.full((m, keys), -np.inf, np.float32), 1), "mask"))
        nodes.append(helper.make_node("Add", [last, "mask"], ["s2"]))
        last = "s2"
    nodes += [helper.make_node("Softmax", [last], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*batch, m, value_depth])]
    if extra_output:
        outputs.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, [*batch, m, keys]))
    graph = helper.make_graph(nodes, "attention", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _feeds(model: onnx.ModelProto, rng: np.random.Generator) -> dict[str, np.ndarray]:
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
        if value.name == "mask":  # the last third of the keys padded out
            feeds[value.name] = np.where(np.arange(shape[-1]) >= shape[-1] - shape[-1] // 3, -1e4, 0).astype(
                np.float32) * np.ones(shape, np.float32)
    return feeds


def _onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.mark.parametrize("shape, keys, value_depth, mask", [
    ((12, 32, 64), 32, 64, None),            # 3-D, one block of keys
    ((2, 3, 20, 16), 20, 16, "padding"),     # 4-D heads, keys padded to 32, a mask per batch
    ((1, 4, 37, 24), 100, 40, "causal"),     # M not a multiple of 4, keys padded, Dv % 16 != 0
    ((2, 2, 64, 8), 197, 8, "padding"),      # ViT-like 197 keys, several blocks
])
def test_fused_attention_matches_onnxruntime(shape, keys, value_depth, mask):
    model = _attention_model(shape, keys, value_depth, mask=mask)
    compiled = _fused(model)
    assert compiled.ir("simplify").count(KERNEL_CALL) == 1
    assert "linalg.batch_matmul" not in compiled.ir("simplify")
    feeds = _feeds(model, np.random.default_rng(0))
    expected = _onnxruntime(model, feeds)[0]
    np.testing.assert_allclose(_first(compiled(**feeds)), expected, rtol=1e-5, atol=1e-5)


def test_attention_without_scale_and_causal_rows_of_one_key():
    """Row 0 of a causal mask sees one key: its output is that key's value row."""
    model = _attention_model((1, 2, 16, 16), 16, 16, scale=False, mask="causal")
    feeds = _feeds(model, np.random.default_rng(1))
    compiled = _fused(model)
    assert compiled.ir("simplify").count(KERNEL_CALL) == 1
    got = _first(compiled(**feeds))
    np.testing.assert_allclose(got[:, :, 0], feeds["v"][:, :, 0], rtol=1e-6)
    np.testing.assert_allclose(got, _onnxruntime(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_first_key_blocks_fully_masked():
    """-inf on the first 100 keys (two whole blocks of 48 or 64 keys and part of the next):
    the online softmax must not turn -inf - -inf into NaN."""
    model = _attention_model((1, 1, 8, 16), 160, 16, mask="padding")
    feeds = _feeds(model, np.random.default_rng(2))
    feeds["mask"] = np.where(np.arange(160) < 100, -np.inf, 0).astype(np.float32).reshape(1, 1, 1, 160)
    compiled = _fused(model)
    assert compiled.ir("simplify").count(KERNEL_CALL) == 1
    got = _first(compiled(**feeds))
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, _onnxruntime(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_fully_masked_row_is_nan_as_unfused():
    """A row whose every key is -inf: softmax is 0/0, NaN, in the fused kernel as without it."""
    model = _attention_model((1, 1, 4, 16), 32, 16, mask="padding")
    feeds = _feeds(model, np.random.default_rng(3))
    feeds["mask"] = np.full((1, 1, 1, 32), -np.inf, np.float32)
    got, reference = _first(_fused(model)(**feeds)), _first(_unfused(model)(**feeds))
    assert np.isnan(got).all() and np.isnan(reference).all()


def test_probabilities_also_an_output_stay_unfused():
    """P is a graph output too: it must be stored, so the ops stay as they are."""
    model = _attention_model((2, 16, 16), 16, 16, extra_output=True)
    compiled = _fused(model)
    assert KERNEL_CALL not in compiled.ir("simplify")
    feeds = _feeds(model, np.random.default_rng(4))
    for got, expected in zip(compiled(**feeds), _onnxruntime(model, feeds)):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_dynamic_shapes_stay_unfused():
    model = _attention_model((2, 16, 16), 16, 16)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    for name in ("k", "v"):
        value = next(v for v in model.graph.input if v.name == name)
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    compiled = tilecraft.compile(model, CompileOptions(keep_ir=True))
    assert KERNEL_CALL not in compiled.ir("simplify")
    feeds = _feeds(_attention_model((3, 16, 16), 16, 16), np.random.default_rng(5))
    np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rank", [3, 4])
def test_q_and_v_read_through_their_transposes(rank):
    """Q and V as exporters make them, [seq, heads, d] transposed to [heads, seq, d] (with a
    leading batch of 1 at rank 4): the kernel reads them in place, so only K's transpose
    (to [heads, d, seq]) is left as a copy. 32 keys: a whole block, so V needs no padding
    (a padded V is copied)."""
    seq, heads, d = 32, 3, 16
    lead = [1] if rank == 4 else []
    perm_qv = [0, 2, 1, 3] if rank == 4 else [1, 0, 2]
    perm_k = [0, 2, 3, 1] if rank == 4 else [1, 2, 0]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [*lead, seq, heads, d]) for n in ("xq", "xk", "xv")]
    nodes = [helper.make_node("Transpose", ["xq"], ["q"], perm=perm_qv),
             helper.make_node("Transpose", ["xk"], ["kt"], perm=perm_k),
             helper.make_node("Transpose", ["xv"], ["v"], perm=perm_qv),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*lead, heads, seq, d])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    compiled = _fused(model)
    simplified = compiled.ir("simplify")
    assert simplified.count(KERNEL_CALL) == 1 and simplified.count("linalg.transpose") == 1
    feeds = _feeds(model, np.random.default_rng(8))
    np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds)[0], rtol=1e-5, atol=1e-5)


def _banded_model(rows: int, keys: int, mask: np.ndarray) -> onnx.ModelProto:
    """Q K^T / 4 + a constant [rows, keys] mask, softmax, P V: 2 heads of 16."""
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [2, rows, 16]),
              helper.make_tensor_value_info("k", TensorProto.FLOAT, [2, keys, 16]),
              helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, keys, 16])]
    inits = [numpy_helper.from_array(np.array(0.25, np.float32), "scale"), numpy_helper.from_array(mask, "mask")]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Mul", ["s", "scale"], ["ss"]),
             helper.make_node("Add", ["ss", "mask"], ["sm"]), helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "banded", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, rows, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("fill, skipped", [(-np.inf, True), (-1e9, False)])
def test_key_blocks_a_constant_mask_rules_out_are_skipped(fill, skipped):
    """A sliding window of 40 keys (a band under the diagonal) over 200 keys: with -inf
    outside it, each register tile loops only over the blocks its rows' windows meet (the
    [first, end) keys per row are a constant of the call); a large finite fill (-1e9) is not
    -inf after the add, so every block is computed. The results match onnxruntime's."""
    rows = keys = 200
    r, k = np.arange(rows)[:, None], np.arange(keys)[None, :]
    mask = np.where((k <= r) & (k > r - 40), 0.0, fill).astype(np.float32)
    model = _banded_model(rows, keys, mask)
    compiled = _fused(model)
    simplified = compiled.ir("simplify")
    assert simplified.count(KERNEL_CALL) == 1
    assert ("attention_key_ranges" in simplified) == skipped
    feeds = _feeds(model, np.random.default_rng(9))
    np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fill", [-np.inf, np.finfo(np.float32).min])
@pytest.mark.parametrize("constant", [True, False])
def test_where_with_a_bool_mask(fill, constant):
    """``Where(mask, S, fill)`` as GPT-2 exports its causal mask: the bool mask is passed to
    the kernel as bytes; a constant one with -inf as the fill also bounds each tile's keys."""
    shape = [1, 2, 40, 16]
    causal = np.tril(np.ones((40, 40), bool)).reshape(1, 1, 40, 40)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "qkv"]
    inits = [numpy_helper.from_array(np.array(fill, np.float32), "fill")]
    if constant:
        inits.append(numpy_helper.from_array(causal, "m"))
    else:
        inputs.append(helper.make_tensor_value_info("m", TensorProto.BOOL, [1, 1, 40, 40]))
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Where", ["m", "s", "fill"], ["sm"]), helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "where", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    compiled = _fused(model)
    simplified = compiled.ir("simplify")
    assert simplified.count(KERNEL_CALL) == 1
    assert ("attention_key_ranges" in simplified) == (constant and fill == -np.inf)
    rng = np.random.default_rng(10)
    feeds = {n: rng.standard_normal(shape).astype(np.float32) for n in "qkv"}
    if not constant:
        feeds["m"] = causal
    np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_wide_value_heads_stay_unfused():
    """Dv = 128: the unfused ops are as fast or faster (fused_attention.MAX_VALUE_DEPTH)."""
    model = _attention_model((1, 2, 32, 128), 32, 128)
    compiled = _fused(model)
    assert KERNEL_CALL not in compiled.ir("simplify")
    feeds = _feeds(model, np.random.default_rng(7))
    np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_opt_level_0_keeps_the_unfused_ops():
    model = _attention_model((2, 16, 16), 16, 16)
    compiled = tilecraft.compile(model, CompileOptions(keep_ir=True, opt_level=0))
    assert KERNEL_CALL not in compiled.ir("simplify")


def _onnx_attention(mask: str | None, causal: int, rows: int = 12, keys: int = 40) -> onnx.ModelProto:
    """ONNX's opset-23 Attention (4-D Q, K, V), expanded from its function body."""
    shape = [2, 3, rows, 16]
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, shape),
              helper.make_tensor_value_info("k", TensorProto.FLOAT, [2, 3, keys, 16]),
              helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, 3, keys, 16])]
    names = ["q", "k", "v"]
    if mask is not None:
        element = TensorProto.BOOL if mask == "bool" else TensorProto.FLOAT
        inputs.append(helper.make_tensor_value_info("mask", element, [rows, keys]))
        names.append("mask")
    node = helper.make_node("Attention", names, ["y"], is_causal=causal)
    graph = helper.make_graph([node], "attention", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


@pytest.mark.parametrize("mask, causal", [(None, 0), (None, 1), ("float", 0), ("bool", 0), ("bool", 1)])
def test_onnx_attention_op_is_fused(mask, causal):
    model = _onnx_attention(mask, causal)
    rng = np.random.default_rng(6)
    feeds = {n: rng.standard_normal([2, 3, 12 if n == "q" else 40, 16]).astype(np.float32) for n in "qkv"}
    if mask == "float":
        feeds["mask"] = rng.standard_normal((12, 40)).astype(np.float32)
    elif mask == "bool":
        feeds["mask"] = rng.random((12, 40)) > 0.3
        feeds["mask"][5] = False  # a fully masked row: ONNX's Attention outputs 0 there
    compiled = _fused(model)
    assert compiled.ir("simplify").count(KERNEL_CALL) == 1
    got, reference = _first(compiled(**feeds)), _first(_unfused(model)(**feeds))
    np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-6)
    if mask == "bool":
        assert not np.isnan(got).any()


torch = pytest.importorskip("torch")


class _Sdpa(torch.nn.Module):
    def __init__(self, causal: bool, mask: "torch.Tensor | None") -> None:
        super().__init__()
        self.causal, self.mask = causal, mask

    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.mask, is_causal=self.causal)


@pytest.mark.parametrize("causal, mask", [(False, None), (True, None), (False, "float"), (False, "bool")])
def test_torch_scaled_dot_product_attention_is_fused(causal, mask):
    """PyTorch's decomposition of scaled_dot_product_attention (scale on Q and K, the mask,
    softmax, and its zeroing of fully masked rows) becomes the kernel."""
    import tilecraft.torch as tilecraft_torch

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 24, 16) for _ in range(3))
    attn_mask = None
    if mask == "float":
        attn_mask = torch.randn(24, 24)
    elif mask == "bool":
        attn_mask = torch.rand(24, 24) > 0.3
        attn_mask[7] = False  # a fully masked row
    module = _Sdpa(causal, attn_mask).eval()
    expected = module(q, k, v).numpy()
    compiled = tilecraft_torch.compile(module, (q, k, v), keep_ir=True)
    assert compiled.ir("simplify").count(KERNEL_CALL) == 1
    got = _first(compiled(q, k, v))
    got = got.numpy() if hasattr(got, "numpy") else got
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_key_blocks_pad_the_keys_least():
    assert AttentionShape(1, 1, 128, 64, 64, (1, 1, 128)).key_block == 64
    assert AttentionShape(1, 1, 197, 64, 64, (1, 1, 197)).padded_keys == 224  # blocks of 32
    assert AttentionShape(1, 1, 20, 64, 64, (1, 1, 20)).key_block == 32
    assert AttentionShape(1, 1, 144, 64, 64, (1, 1, 144)).key_block == 48


def test_bad_thread_option_is_a_pipeline_error():
    from mlir import ir

    from tilecraft.pipelines.passes import lookup_pass

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        with pytest.raises(PipelineError, match="num-threads"):
            lookup_pass(FUSE_ATTENTION_PASS).run(module.operation, {"num-threads": "0"})


@pytest.mark.parametrize("lanes", ["0", "5", "eight"])
def test_bad_lanes_option_is_a_pipeline_error(lanes):
    """Lanes that are not a positive divisor of every key block would leave keys unread."""
    from mlir import ir

    from tilecraft.pipelines.passes import lookup_pass

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        with pytest.raises(PipelineError, match="lanes"):
            lookup_pass(FUSE_ATTENTION_PASS).run(module.operation, {"lanes": lanes})


def test_kernel_of_eight_lanes_matches_onnxruntime():
    """The vector width is the pass's ``lanes`` option (the target's): 8-lane vectors, with
    padded keys and a padding mask, compute what 16-lane ones do."""
    model = _attention_model((2, 2, 12, 16), 40, 24, mask="padding")
    pipeline = cpu_pipeline("llvm", opt_level=3)
    passes = [f"{FUSE_ATTENTION_PASS}{{num-threads=1 lanes=8}}" if p.startswith(FUSE_ATTENTION_PASS) else p
              for p in pipeline.stage("simplify").passes]
    compiled = tilecraft.compile(model, CompileOptions(keep_ir=True, pipeline=pipeline.replace("simplify", passes)))
    simplified = compiled.ir("simplify")
    assert simplified.count(KERNEL_CALL) == 1
    assert "vector<8xf32>" in simplified and "vector<16xf32>" not in simplified
    feeds = _feeds(model, np.random.default_rng(11))
    np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds)[0], rtol=1e-5, atol=1e-5)
