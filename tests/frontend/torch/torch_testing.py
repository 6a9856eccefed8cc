"""Helpers for the PyTorch frontend tests: compile a module, compare with eager PyTorch."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

import tilecraft

RTOL, ATOL = 1e-4, 1e-5  # the f32 tolerance


class Lambda(torch.nn.Module):
    """A module whose forward is ``fn``: one op-level test case."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def assert_close(actual: Any, expected: Any, rtol: float = RTOL, atol: float = ATOL) -> None:
    actual_flat = torch.utils._pytree.tree_leaves(actual)
    expected_flat = torch.utils._pytree.tree_leaves(expected)
    assert len(actual_flat) == len(expected_flat)
    for a, e in zip(actual_flat, expected_flat):
        assert isinstance(a, torch.Tensor)
        assert a.dtype == e.dtype, (a.dtype, e.dtype)
        assert a.shape == e.shape, (a.shape, e.shape)
        np.testing.assert_allclose(a.numpy(), e.detach().numpy(), rtol=rtol, atol=atol)


def check(module: torch.nn.Module | Callable[..., Any], *inputs: torch.Tensor, dynamic_shapes: Any = None,
          rtol: float = RTOL, atol: float = ATOL) -> Any:
    """Compile with ``tilecraft.torch.compile`` and compare with eager on ``inputs``."""
    if not isinstance(module, torch.nn.Module):
        module = Lambda(module)
    module = module.eval()
    compiled = tilecraft.torch.compile(module, inputs, dynamic_shapes=dynamic_shapes)
    with torch.no_grad():
        assert_close(compiled(*inputs), module(*inputs), rtol, atol)
    return compiled
