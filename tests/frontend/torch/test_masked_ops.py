"""``masked_scatter`` (frontend/torch/ops/masked.py) against eager, with a broadcast mask
and a larger source; a source too short for the mask's True positions is a typed error
at call time (the gather's run-time index check), not garbage."""

from __future__ import annotations

import pytest
import torch

import tilecraft

from torch_testing import check


def test_masked_scatter_takes_the_source_in_row_major_order():
    x, mask = torch.randn(3, 4), torch.rand(3, 4) > 0.5
    check(lambda a, m, s: a.masked_scatter(m, s), x, mask, torch.randn(20))
    check(lambda a, m, s: a.masked_scatter(m, s), x, torch.tensor([True, False, True, True]), torch.randn(4, 5))


def test_a_source_too_short_is_a_typed_error():
    class Scatter(torch.nn.Module):
        def forward(self, a, m, s):
            return a.masked_scatter(m, s)

    x, too_many = torch.randn(2, 3), torch.ones(2, 3, dtype=torch.bool)
    try:
        compiled = tilecraft.torch.compile(Scatter().eval(), (x, too_many, torch.randn(4)))
    except tilecraft.TilecraftError:
        return  # refused at compile time: as good
    with pytest.raises(tilecraft.TilecraftError):
        compiled(x, too_many, torch.randn(4))


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_through_a_mask_with_a_row_of_values(accumulate):
    x, rows = torch.randn(5, 4), torch.tensor([True, False, True, False, True])
    check(lambda a, m, v: torch.index_put(a, (m,), v, accumulate=accumulate), x, rows, torch.randn(4))
    check(lambda a, m, v: torch.index_put(a, (m,), v, accumulate=accumulate), x, rows, torch.randn(1, 4))


def test_index_put_of_one_value_per_masked_row_stays_refused_by_name():
    class PerPosition(torch.nn.Module):
        def forward(self, a, m, v):
            return torch.index_put(a, (m,), v)

    rows = torch.tensor([True, False, True])
    with pytest.raises(tilecraft.TilecraftError, match="several values through a boolean mask"):
        tilecraft.torch.compile(PerPosition().eval(), (torch.randn(3, 2), rows, torch.randn(2, 2)))


@pytest.mark.parametrize("accumulate", [False, True])
def test_put_into_the_flattened_tensor(accumulate):
    index = torch.tensor([[6, -5], [2, 6]])  # a negative position and a repeat
    check(lambda x, i, s: torch.put(x, i, s, accumulate=accumulate), torch.randn(3, 3), index, torch.randn(2, 2))
