"""The fused attention kernel's bf16 products (``precision="bf16"``; pipelines/tensor/
attention_kernel.py, ``bf16_products_apply``): Q K^T and p @ V as bf16 dot products, the
softmax and every sum in f32.

Numerics, two ways:

* against a float64 emulation of exactly that arithmetic (Q, K, V and p rounded to bf16, the
  products and sums exact, the softmax's max and sum from the unrounded p) where the keys
  fit one key block, so that p is rounded at the row's final max as the emulation rounds
  it: what is left is f32 summation order, so the bound is tight (rtol 2e-5 of the output's
  largest magnitude). A kernel that rounded anything else, or nothing, fails it;
* against onnxruntime's f32 over several key blocks, masks and odd sizes: bf16 keeps 8
  significant bits (each value rounded by at most 2^-9 relative, 0.2%); D = 64 random products
  per score and the rounded p and V put these outputs about 0.5% (of their largest magnitude)
  from f32. The bound is 2% of it, and the mean error at most 0.6%.

Built for the pinned AVX-512 target (16-lane vectors): with AVX512-BF16 (vdpbf16ps) where the
host has it, else without it (``-avx512bf16``: the portable ``vector.contract`` dot products,
the same arithmetic) where the host has AVX-512; AVX2-only hosts skip the runs (AVX2's 8-lane
kernel keeps f32 products: ``bf16_products_apply``). The IR's form is
tests/lit/pipelines/fuse-attention-bf16.mlir's.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.errors import PipelineError  # noqa: E402
from tilecraft.pipelines.cpu import cpu_pipeline  # noqa: E402
from tilecraft.pipelines.passes import lookup_pass  # noqa: E402
from tilecraft.pipelines.target import Target  # noqa: E402
from tilecraft.pipelines.tensor.bf16_weights import with_bf16_weights  # noqa: E402
from tilecraft.pipelines.tensor.fused_attention import FUSE_ATTENTION_PASS, with_bf16_products  # noqa: E402
from tilecraft.runtime.host import host_cpu_flags  # noqa: E402

from pinned_targets import AVX2, AVX512, HOST_HAS_AVX512  # noqa: E402

# The AVX-512 target this host runs: with vdpbf16ps where it can execute it.
HOST_TARGET = AVX512 if "avx512_bf16" in host_cpu_flags() else f"{AVX512} -mattr=-avx512bf16"
needs_avx512 = pytest.mark.skipif(not HOST_HAS_AVX512, reason="runs 16-lane AVX-512 kernels; this host has no AVX-512")
BF16_KERNEL = "call @tilecraft_attention_"


def _bf16(array: np.ndarray) -> np.ndarray:
    return np.asarray(array, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def _attention(heads: int, rows: int, keys: int, depth: int, value_depth: int, *, causal: bool = False,
               transposed: bool = False, depth_major_q: bool = False) -> onnx.ModelProto:
    """softmax(Q K^T / sqrt(D) [+ causal mask]) V. ``transposed``: Q, K and V come as
    exporters make them, [seq, heads, d] transposed (Q and V read in place by the kernel).
    ``depth_major_q``: Q comes as [heads, d, seq], transposed, so that the kernel reads it in
    place with d not innermost (its bf16 packing then reads Q element by element)."""
    if depth_major_q:
        inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [heads, depth, rows]),
                  helper.make_tensor_value_info("k", TensorProto.FLOAT, [heads, keys, depth]),
                  helper.make_tensor_value_info("v", TensorProto.FLOAT, [heads, keys, value_depth])]
        nodes = [helper.make_node("Transpose", ["q"], ["qh"], perm=[0, 2, 1]),
                 helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1])]
        q, v = "qh", "v"
    elif transposed:
        inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [rows, heads, depth]),
                  helper.make_tensor_value_info("k", TensorProto.FLOAT, [keys, heads, depth]),
                  helper.make_tensor_value_info("v", TensorProto.FLOAT, [keys, heads, value_depth])]
        nodes = [helper.make_node("Transpose", ["q"], ["qh"], perm=[1, 0, 2]),
                 helper.make_node("Transpose", ["k"], ["kt"], perm=[1, 2, 0]),
                 helper.make_node("Transpose", ["v"], ["vh"], perm=[1, 0, 2])]
        q, v = "qh", "vh"
    else:
        inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [heads, rows, depth]),
                  helper.make_tensor_value_info("k", TensorProto.FLOAT, [heads, keys, depth]),
                  helper.make_tensor_value_info("v", TensorProto.FLOAT, [heads, keys, value_depth])]
        nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1])]
        q, v = "q", "v"
    inits = [numpy_helper.from_array(np.array(1 / np.sqrt(depth), np.float32), "scale")]
    nodes += [helper.make_node("MatMul", [q, "kt"], ["s"]), helper.make_node("Mul", ["s", "scale"], ["x"])]
    last = "x"
    if causal:
        inits.append(numpy_helper.from_array(np.triu(np.full((rows, keys), -np.inf, np.float32), 1), "mask"))
        nodes.append(helper.make_node("Add", ["x", "mask"], ["xm"]))
        last = "xm"
    nodes += [helper.make_node("Softmax", [last], ["p"], axis=-1), helper.make_node("MatMul", ["p", v], ["y"])]
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [heads, rows, value_depth])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {value.name: rng.standard_normal([d.dim_value for d in value.type.tensor_type.shape.dim]).astype(np.float32)
            for value in model.graph.input}


def _compile_bf16(model: onnx.ModelProto):
    """``precision="bf16"`` where the host has AVX512-BF16; elsewhere the same pipeline with
    the bf16 kernels asked for (``kernels=True``: their portable dot products)."""
    if "-avx512bf16" in HOST_TARGET:
        target = Target.parse(HOST_TARGET)
        options = {"pipeline": with_bf16_weights(cpu_pipeline(target, opt_level=3), target, kernels=True)}
    else:
        options = {"precision": "bf16"}
    compiled = tilecraft.compile(model, tilecraft.CompileOptions(keep_ir=True, cache=False, target=HOST_TARGET,
                                                                 **options))
    assert f"{BF16_KERNEL}" in compiled.ir("simplify") and "_bf16_0(" in compiled.ir("simplify")
    assert ("llvm.x86.avx512bf16.dpbf16ps.512" in compiled.ir("vector")) == ("-avx512bf16" not in HOST_TARGET)
    return compiled


def _first(result) -> np.ndarray:
    return np.asarray(result[0] if isinstance(result, (tuple, list)) else result, np.float64)


def _emulated(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The bf16 kernel's arithmetic in float64 (no mask): bf16 operands and p, exact sums,
    the softmax's max and sum from the unrounded p."""
    scores = np.einsum("hmd,hnd->hmn", _bf16(q), _bf16(k)) / np.sqrt(np.float32(q.shape[-1]))
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.einsum("hmn,hnd->hmd", _bf16(p), _bf16(v)) / p.sum(axis=-1, keepdims=True)


@needs_avx512
@pytest.mark.parametrize("heads, rows, keys, depth, value_depth", [
    (3, 24, 48, 64, 64),   # one key block of 48, BERT's head size: K^T packed from K in place
    (2, 13, 40, 5, 20),    # an odd D (its last row paired with zeros), keys padded to 48, Dv 20 of 2 vectors
])
def test_bf16_products_match_their_emulation(heads, rows, keys, depth, value_depth):
    model = _attention(heads, rows, keys, depth, value_depth)
    feeds = _feeds(model, 3)
    result = _first(_compile_bf16(model)(**feeds))
    expected = _emulated(feeds["q"], feeds["k"], feeds["v"])
    np.testing.assert_allclose(result, expected, rtol=0, atol=2e-5 * np.abs(expected).max())
    # and the rounding is there to see: f32 products land farther away
    scores = np.einsum("hmd,hnd->hmn", feeds["q"].astype(np.float64), feeds["k"]) / np.sqrt(depth)
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    plain = np.einsum("hmn,hnd->hmd", p / p.sum(axis=-1, keepdims=True), feeds["v"])
    assert np.abs(plain - expected).max() > 10 * np.abs(result - expected).max()


@needs_avx512
@pytest.mark.parametrize("heads, rows, keys, depth, value_depth, causal, transposed, depth_major_q", [
    (12, 128, 128, 64, 64, False, True, False),   # BERT-base's attention, Q and V read through their transposes
    (2, 37, 100, 24, 40, True, False, False),     # causal: blocks skipped, keys padded, a partial tile of rows
    (2, 64, 197, 64, 64, False, False, False),    # the ViT's 197 keys: 4 blocks, the last partial
    (3, 20, 64, 21, 16, False, False, True),      # Q read with d not innermost (odd D: 21)
])
def test_bf16_attention_is_close_to_f32(heads, rows, keys, depth, value_depth, causal, transposed, depth_major_q):
    import onnxruntime

    model = _attention(heads, rows, keys, depth, value_depth, causal=causal, transposed=transposed,
                       depth_major_q=depth_major_q)
    feeds = _feeds(model, 5)
    compiled = _compile_bf16(model)
    if transposed:  # Q, V and (D = 64, no padded keys) K read in place: no transpose is copied
        assert "linalg.transpose" not in compiled.ir("simplify")
    result = _first(compiled(**feeds))
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)[0].astype(np.float64)
    scale = np.abs(expected).max()
    assert np.abs(result - expected).max() <= 2e-2 * scale
    assert np.abs(result - expected).mean() <= 6e-3 * scale


@needs_avx512
@pytest.mark.parametrize("causal", [0, 1])
def test_bf16_attention_zeroes_fully_masked_rows(causal):
    """ONNX's Attention with a bool mask that rules out every key of one row: its output
    there is 0, not NaN, as in the f32 build (the kernel's row zeroing), and the rest within
    the bf16 bound of the f32 build."""
    rows, keys = 12, 40
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3, rows if name == "q" else keys, 16])
              for name in "qkv"]
    inputs.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, [rows, keys]))
    node = helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"], is_causal=causal)
    graph = helper.make_graph([node], "attention", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, rows, 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    rng = np.random.default_rng(6)
    feeds = {n: rng.standard_normal([2, 3, rows if n == "q" else keys, 16]).astype(np.float32) for n in "qkv"}
    feeds["mask"] = rng.random((rows, keys)) > 0.3
    feeds["mask"][5] = False
    result = _first(_compile_bf16(model)(**feeds))
    expected = _first(tilecraft.compile(model, target=HOST_TARGET)(**feeds))
    assert not np.isnan(result).any() and not np.isnan(expected).any()
    assert (result[:, :, 5] == 0).all() and (expected[:, :, 5] == 0).all()
    assert np.abs(result - expected).max() <= 2e-2 * np.abs(expected).max()


def test_bf16_pipelines_ask_for_bf16_products_where_the_lanes_allow():
    """precision="bf16" turns the option on for 16-lane kernels only; f32 builds never."""
    def attention_element(pipeline) -> str:
        return next(p for p in pipeline.stage("simplify").passes if p.startswith(FUSE_ATTENTION_PASS))

    wide, narrow = Target.parse(AVX512), Target.parse(AVX2)
    assert "bf16=1" in attention_element(with_bf16_weights(cpu_pipeline(wide, opt_level=3), wide))
    assert "bf16=1" not in attention_element(cpu_pipeline(wide, opt_level=3))
    assert "bf16=1" not in attention_element(with_bf16_weights(cpu_pipeline(narrow, opt_level=3), narrow,
                                                               kernels=True))
    assert with_bf16_products("canonicalize") == "canonicalize"
    assert with_bf16_products(f"{FUSE_ATTENTION_PASS}{{num-threads=2 lanes=16}}") \
        == f"{FUSE_ATTENTION_PASS}{{num-threads=2 lanes=16 bf16=1}}"


@pytest.mark.parametrize("options, message", [({"lanes": "8", "bf16": "1"}, "bf16=1 needs lanes=16"),
                                              ({"bf16": "2"}, "must be 0 or 1")])
def test_bad_bf16_option_is_a_pipeline_error(options, message):
    from mlir import ir

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        with pytest.raises(PipelineError, match=message):
            lookup_pass(FUSE_ATTENTION_PASS).run(module.operation, options)
