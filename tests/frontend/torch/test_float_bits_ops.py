"""``frexp`` and ``nextafter`` (frontend/torch/ops/float_bits.py) against eager, at the edges
where a log2/exp2 formulation would round: zeros, subnormals, infinities, NaN, the largest
finite value; and their bad input refused with a typed error."""

from __future__ import annotations

import pytest
import torch

import tilecraft
from tilecraft.errors import TorchImportError

from torch_testing import check

INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_frexp_at_the_edges(dtype):
    x = torch.tensor([0.0, -0.0, 1.0, -3.5, INF, -INF, NAN, 1e-40, -2e-45, 6.0, 3.4e38, 0.3], dtype=dtype)
    check(torch.frexp, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nextafter_at_the_edges(dtype):
    a = torch.tensor([0.0, 1.0, 1.0, -0.0, -1.0, NAN, 1e-45, -1e-45, 3.4e38, 5.0], dtype=dtype)
    b = torch.tensor([-1.0, 2.0, 1.0, 1.0, -2.0, 0.0, 0.0, 0.0, INF, NAN], dtype=dtype)
    check(torch.nextafter, a, b)


def test_frexp_of_integers_is_a_typed_error():
    class IntegerFrexp(torch.nn.Module):
        def forward(self, x):
            return torch.frexp(x)

    with pytest.raises(TorchImportError):
        tilecraft.torch.compile(IntegerFrexp().eval(), (torch.arange(4),))
