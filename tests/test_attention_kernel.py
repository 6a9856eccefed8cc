"""The fused attention kernel built for an AVX2 target (pipelines/tensor/attention_kernel.py),
whatever the host: ``-mcpu=znver3`` gives 8-lane vectors and 16 registers, so the blocked
form (``AttentionShape.blocked``: 4 query rows per key block, their outputs in an L1 scratch,
``O = O * alpha + p @ V`` as a register tile of the 4 rows by ``value_columns`` output
vectors) runs on AVX-512 hosts too. (Builds for the host take 16-lane vectors there and never
reach this form.) Numerics against onnxruntime at the token counts the suite holds (49: Swin's
windows, 128, 197: a prime, the ViT's, 512), primes and partial vectors of Dv, causal and
padding masks and grouped-query heads; the kernel's structure is checked by
tests/lit/pipelines/fuse-attention-blocks.mlir."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft
from tilecraft import CompileOptions
from tilecraft.runtime.host import host_cpu_flags
from tilecraft.pipelines.tensor.attention_kernel import AttentionShape, value_columns

from test_attention_blocks import KERNEL_CALL, _attention, _first, _onnxruntime, _random_feeds

AVX2 = "llvm -mcpu=znver3"
# The builds run here: the host must execute AVX2 + FMA code.
needs_avx2 = pytest.mark.skipif(not {"avx2", "fma"} <= set(host_cpu_flags()), reason="the host lacks AVX2 + FMA")


def test_value_product_tiles_share_v_between_the_block_rows():
    assert value_columns(4, 8) == 3   # Dv 64: 4 rows x 3 vectors (then 3, then 2), V loaded once for 4 rows
    assert value_columns(4, 4) == 3   # Dv 32: 3 + 1
    assert value_columns(4, 1) == 1
    assert value_columns(1, 8) == 8   # one row: its 8 outputs (V as FMA memory operands)
    assert value_columns(1, 16) == 8  # Dv 128: two chunks
    for rows in (2, 3, 4):            # at most 12 accumulators of the 16 registers
        for vectors in range(1, 17):
            assert 1 <= value_columns(rows, vectors) <= vectors and rows * value_columns(rows, vectors) <= 12


@pytest.mark.parametrize("heads, tokens, keys, depth, value_depth, mask, kv_heads", [
    (2, 49, 49, 32, 32, None, None),        # Swin's windows: one block of 56 keys
    (2, 128, 128, 64, 64, "causal", None),  # key blocks above the diagonal skipped
    (2, 197, 197, 64, 64, None, None),      # the ViT's 197 (a prime): 200 keys, 49 blocks of 4 rows + 1
    (1, 197, 197, 32, 32, "padding", None),
    (1, 131, 131, 64, 64, "causal", None),  # a prime with a causal mask: a partial last block of rows
    (4, 61, 61, 64, 64, None, 2),           # grouped-query heads
    (1, 37, 37, 64, 20, None, None),        # Dv 20: 3 output vectors, a partial last one (a 2 + 1 chunk split)
    (1, 43, 89, 64, 40, "padding", None),   # Dv 40: 5 vectors; fewer queries than keys
])
@needs_avx2
def test_blocked_kernel_matches_onnxruntime(heads, tokens, keys, depth, value_depth, mask, kv_heads):
    model = _attention(1, heads, tokens, keys, depth, value_depth, mask, kv_heads)
    compiled = tilecraft.compile(model, CompileOptions(keep_ir=True, cache=False, target=AVX2))
    simplified = compiled.ir("simplify")
    assert simplified.count(KERNEL_CALL) == 1
    assert ("attention_key_ranges" in simplified) == (mask == "causal")
    assert AttentionShape(heads, tokens, keys, depth, value_depth, (heads, tokens, keys), 8).blocked
    feeds = _random_feeds(model, 1)
    if mask == "padding":  # the last quarter of the keys masked out
        feeds["mask"] = np.where(np.arange(keys) >= keys - keys // 4, -1e4, 0).astype(np.float32) \
            * np.ones((1, 1, 1, keys), np.float32)
    np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds), rtol=1e-4, atol=2e-5)


@needs_avx2
def test_blocked_kernel_at_512_tokens_matches_onnxruntime(monkeypatch):
    """512 keys in 16 blocks of 32, built for two threads (row blocks split across tasks)."""
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "2")
    model = _attention(1, 2, 512, 512, 64, 64, "padding", None)
    compiled = tilecraft.compile(model, CompileOptions(cache=False, target=AVX2))
    feeds = _random_feeds(model, 2)
    feeds["mask"] = np.where(np.arange(512) >= 400, -1e4, 0).astype(np.float32).reshape(1, 1, 1, 512)
    np.testing.assert_allclose(_first(compiled(**feeds)), _onnxruntime(model, feeds), rtol=1e-4, atol=2e-5)
