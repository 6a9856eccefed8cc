"""The model zoo through tilecraft.torch.compile and torch.compile(backend="tilecraft"):
each result matches eager PyTorch within 1e-4 relative / 1e-5 absolute (f32)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tilecraft
from tilecraft.compiler.dynamo import TilecraftFallbackWarning

from zoo import ZOO

RTOL, ATOL = 1e-4, 1e-5

# Embedding gathers and depthwise convolutions are not vectorized by the default schedule
# yet: it warns and keeps scalar loops, which tests/conftest.py turns into errors.
SCALAR_FALLBACK = pytest.mark.filterwarnings("ignore:tilecraft-schedule:RuntimeWarning")

MODELS = [
    pytest.param("mlc_cnn"),
    pytest.param("gpt2_block", marks=SCALAR_FALLBACK),
    pytest.param("resnet18", marks=pytest.mark.slow),
    pytest.param("resnet50", marks=pytest.mark.slow),
    pytest.param("mobilenet_v2", marks=[pytest.mark.slow, SCALAR_FALLBACK]),
    pytest.param("bert_encoder", marks=[pytest.mark.slow, SCALAR_FALLBACK]),
]


def assert_matches(actual, expected) -> None:
    for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected), strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=RTOL, atol=ATOL)


@pytest.fixture
def no_fused_attention_kernels():
    """Eager ``nn.TransformerEncoderLayer`` under ``no_grad`` takes a fused fast path
    (``aten._transformer_encoder_layer_fwd``, one opaque kernel) that Dynamo captures as is;
    without it Dynamo sees the layer's decomposable ops. ``torch.export`` never takes it."""
    enabled = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(enabled)


@pytest.mark.parametrize("name", MODELS)
def test_tilecraft_torch_compile(name):
    build, inputs = ZOO[name]
    model, example = build(), inputs()
    compiled = tilecraft.torch.compile(model, example)
    with torch.no_grad():
        assert_matches(compiled(*example), model(*example))


@pytest.mark.parametrize("name", MODELS)
def test_torch_compile_backend(name, no_fused_attention_kernels):
    torch._dynamo.reset()
    build, inputs = ZOO[name]
    model, example = build(), inputs()
    compiled = torch.compile(model, backend="tilecraft")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", TilecraftFallbackWarning)  # no eager fallback allowed here
        assert_matches(compiled(*example), model(*example))
