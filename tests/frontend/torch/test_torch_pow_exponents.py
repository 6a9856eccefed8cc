"""``x ** n`` for n = 1..4 through the PyTorch frontend is multiplied out
(ir/elementwise.py, ``float_power_by_multiplication``): transformers' NewGELUActivation,
``torch.pow(x, 3.0)``, as GPT-2 and ALBERT compute it. The ONNX side is
tests/frontend/onnx/test_constant_exponents.py."""

from __future__ import annotations

import pytest
import torch

from torch_testing import check


def _gelu_new(t: torch.Tensor, exponent: float) -> torch.Tensor:
    return 0.5 * t * (1.0 + torch.tanh(0.7978845608 * (t + 0.044715 * torch.pow(t, exponent))))


@pytest.mark.parametrize("exponent", [1, 2, 3, 4.0])
def test_pow_by_small_integer_matches_eager(exponent):
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(4)) * 3
    check(lambda t: _gelu_new(t, exponent), x)


def test_pow_special_values():
    x = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e20, -1e-20, -7.5])
    compiled = check(lambda t: torch.pow(t, 3.0), x)
    assert torch.equal(torch.signbit(compiled(x)), torch.signbit(torch.pow(x, 3.0)))
