"""The fused attention kernel's key blocks (issue #43, pipelines/tensor/attention_kernel.py):
whole blocks of 64 keys and one narrower tail block where N is not a multiple of 64
(``AttentionShape.tail_vectors``), and the online softmax's max and sum as butterflies.

Numerics against onnxruntime at token counts with a tail (the ViT's 197: three blocks and
one vector; 100: one block and three vectors), with none (13 keys: one partial vector), with a
padding mask read in the tail, grouped-query heads, and a causal mask (key ranges: whole
blocks, no tail). The kernel is built for the host (its vectors are the host's); the shape
rules are checked for pinned lanes."""

from __future__ import annotations

import numpy as np
import pytest

from test_attention_blocks import KERNEL_CALL, _attention, _compile, _first, _onnxruntime, _random_feeds
from tilecraft.pipelines.tensor.attention_kernel import AttentionShape


@pytest.mark.parametrize("keys, block, padded, tail", [
    (197, 64, 208, 1),   # the ViT: 3 blocks of 64, then 16 keys (11 past N)
    (100, 64, 112, 3),   # one block, then 48 keys
    (512, 64, 512, 0),   # whole blocks only
    (49, 64, 64, 0),     # fewer keys than a block: one block of whole vectors
    (13, 16, 16, 0),
])
def test_keys_past_the_whole_blocks_form_one_narrower_block(keys, block, padded, tail):
    shape = AttentionShape(4, 197, keys, 64, 64, (4, 197, keys), 16, key_tail=True)
    assert (shape.key_block, shape.padded_keys, shape.tail_vectors) == (block, padded, tail)
    whole = AttentionShape(4, 197, keys, 64, 64, (4, 197, keys), 16)  # without: whole blocks
    assert whole.tail_vectors == 0 and whole.padded_keys % whole.key_block == 0


@pytest.mark.parametrize("batch, heads, rows, keys, mask, kv_heads, value_depth", [
    (1, 2, 197, 197, None, None, 64),         # ViT: a tail of one vector, a partial row tile
    (1, 2, 37, 100, None, None, 40),          # a tail of 3 vectors, Dv of 2.5 vectors
    (2, 2, 19, 100, "padding", None, 64),     # the padding mask read in the tail
    (1, 4, 77, 77, None, 2, 64),              # grouped-query heads with a tail
    (1, 2, 13, 13, None, None, 64),           # fewer keys than a vector: no tail
    (1, 2, 197, 197, "causal", None, 64),     # key ranges: whole blocks, the masked ones skipped
])
def test_attention_with_a_tail_block_matches_onnxruntime(batch, heads, rows, keys, mask, kv_heads, value_depth):
    model = _attention(batch, heads, rows, keys, 64, value_depth, mask, kv_heads)
    compiled = _compile(model)
    assert compiled.ir("simplify").count(KERNEL_CALL) == 1
    feeds = _random_feeds(model, 1)
    if mask == "padding":  # the last 30 keys of each entry masked out: they span the tail
        feeds["mask"] = np.where(np.arange(keys) >= keys - 30, -1e4, 0).astype(np.float32) \
            * np.ones((batch, 1, 1, keys), np.float32)
    np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("tokens, depth", [(200, 16), (197, 64), (130, 32)])
def test_8_lane_kernels_keep_whole_blocks(tokens, depth):
    """AVX2's 8-lane kernels pad to whole blocks: their register tile's rows depend on the
    block (with blocks of 56 at Dv = 16 one row would fit, not two, and the kernel would turn
    blocked), so the pass sets no tail there; the numerics at such N against numpy."""
    from test_attention_tiles import _model
    from tilecraft import CompileOptions, compile
    from tilecraft.pipelines.cpu import cpu_pipeline
    from tilecraft.pipelines.tensor.fused_attention import FUSE_ATTENTION_PASS

    pipeline = cpu_pipeline("llvm", opt_level=3)
    passes = [f"{FUSE_ATTENTION_PASS}{{num-threads=2 lanes=8}}" if p.startswith(FUSE_ATTENTION_PASS) else p
              for p in pipeline.stage("simplify").passes]
    module = compile(_model(1, tokens, depth), CompileOptions(pipeline=pipeline.replace("simplify", passes),
                                                              cache=False, keep_ir=True))
    shape = AttentionShape(1, tokens, tokens, depth, depth, (1, tokens, tokens), 8)
    assert f"tensor<1x{depth}x{shape.padded_keys}xf32>" in module.ir("simplify")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, tokens, depth)).astype(np.float32) for _ in range(3))
    scores = q @ k.transpose(0, 2, 1) * depth ** -0.5
    p = np.exp(scores - scores.max(-1, keepdims=True))
    got = module(q, k, v)
    np.testing.assert_allclose(got[0] if isinstance(got, (list, tuple)) else got,
                               (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-4, atol=1e-5)


def test_a_nan_score_makes_its_row_nan_as_the_unfused_softmax_does():
    """The max as compare-and-select may drop a NaN, but exp(NaN - max) is NaN: the row's sum
    and output are NaN, the other rows are not."""
    model = _attention(1, 1, 8, 100, 64, 64, None, None)
    feeds = _random_feeds(model, 2)
    feeds["q"][0, 0, 3, 5] = np.nan  # every score of row 3
    feeds["k"][0, 0, 70, 9] = np.nan  # key 70's score in every row: every row NaN
    result = _first(_compile(model)(**feeds))
    assert np.isnan(result).all()
    feeds["k"][0, 0, 70, 9] = 0.0
    result, expected = _first(_compile(model)(**feeds)), _onnxruntime(model, feeds)
    assert np.isnan(result[0, 0, 3]).all() and not np.isnan(np.delete(result[0, 0], 3, axis=0)).any()
    np.testing.assert_allclose(np.delete(result[0, 0], 3, axis=0), np.delete(expected[0, 0], 3, axis=0),
                               rtol=1e-4, atol=2e-5)
