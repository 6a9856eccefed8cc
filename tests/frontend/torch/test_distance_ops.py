"""``cdist`` and ``pdist`` (frontend/torch/ops/distance.py) against eager for every norm
order they special-case and one they do not, with broadcast batch dims, and ``bilinear``
(ops/bilinear.py); bad input refused with a typed error."""

from __future__ import annotations

import pytest
import torch

import tilecraft
from tilecraft.errors import TorchImportError

from torch_testing import check


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_cdist(p):
    x1, x2 = torch.randn(2, 5, 3), torch.randn(1, 4, 3)
    x1[0, 1] = x2[0, 2]  # a zero distance (and equal coordinates for p=0)
    check(lambda a, b: torch.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist"), x1, x2)


@pytest.mark.parametrize("p", [1.0, 2.0, 0.5, float("inf")])
def test_pdist(p):
    check(lambda x: torch.nn.functional.pdist(x, p=p), torch.randn(6, 4))


def test_cdist_of_a_negative_order_is_a_typed_error():
    class Negative(torch.nn.Module):
        def forward(self, a, b):
            return torch.cdist(a, b, p=-1.0)

    with pytest.raises(TorchImportError):
        tilecraft.torch.compile(Negative().eval(), (torch.randn(3, 2), torch.randn(4, 2)))


def test_bilinear_through_trilinear():
    check(lambda a, b, w, c: torch.nn.functional.bilinear(a, b, w, c), torch.randn(2, 3), torch.randn(2, 4),
          torch.randn(5, 3, 4), torch.randn(5))
    check(lambda a, b, w: torch.nn.functional.bilinear(a, b, w), torch.randn(2, 6, 3), torch.randn(2, 6, 4),
          torch.randn(5, 3, 4))
