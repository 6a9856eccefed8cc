"""Selection ops (frontend/torch/ops/selection.py): medians, k-th values, modes, running
extremes and insertion points against eager, NaNs and repeats included, and their bad
input refused with a typed error."""

from __future__ import annotations

import pytest
import torch

import tilecraft
from tilecraft.errors import TorchImportError

from torch_testing import check

NAN = float("nan")


def test_median_and_nanmedian_of_rows_with_nans():
    x = torch.tensor([[3.0, NAN, 2.0, 5.0], [4.0, 1.0, 7.0, 0.5], [NAN, NAN, 1.0, 2.0]])
    check(lambda t: torch.median(t, dim=1), x)
    check(lambda t: torch.nanmedian(t, dim=1, keepdim=True), x)
    check(lambda t: (torch.median(t), torch.nanmedian(t)), x)


def test_kthvalue_along_a_middle_dim():
    x = torch.randn(3, 6, 4)
    check(lambda t: torch.kthvalue(t, 4, dim=1, keepdim=True), x)
    check(lambda t: torch.kthvalue(t, 1, dim=-1), x)


def test_mode_prefers_the_smallest_most_frequent_value_at_its_last_position():
    x = torch.tensor([[3.0, 1.0, 3.0, 1.0, 2.0], [5.0, 5.0, 2.0, 2.0, 2.0]])
    check(lambda t: torch.mode(t, dim=1), x)
    check(lambda t: torch.mode(t.t(), dim=0), x)


def test_cummax_and_cummin_with_ties_and_nan():
    x = torch.tensor([[3.0, 3.0, 2.0, 3.0, NAN, 1.0], [1.0, 4.0, 4.0, 0.0, 5.0, 5.0]])
    check(lambda t: torch.cummax(t, dim=1), x)
    check(lambda t: torch.cummin(t, dim=1), x)
    check(lambda t: torch.cummax(t, dim=0), torch.randint(0, 4, (5, 3)))


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize(right):
    boundaries = torch.tensor([1.0, 2.0, 2.0, 4.0, 8.0])
    values = torch.tensor([[0.0, 2.0, 3.0], [8.0, 9.0, 1.0]])
    check(lambda b, v: torch.searchsorted(b, v, right=right), boundaries, values)
    check(lambda v, b: torch.bucketize(v, b, right=right, out_int32=True), values, boundaries)
    rows = torch.sort(torch.randn(2, 7), dim=1).values
    check(lambda b, v: torch.searchsorted(b, v, side="right" if right else "left"), rows, torch.randn(2, 3))


def test_searchsorted_with_a_sorter():
    sequence = torch.tensor([5.0, 1.0, 3.0, 2.0])
    sorter = torch.argsort(sequence)
    check(lambda s, v, p: torch.searchsorted(s, v, sorter=p), sequence, torch.tensor([0.0, 2.5, 6.0]), sorter)


def test_isin_through_searchsorted():
    check(lambda a, b: torch.isin(a, b), torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([4.0, 2.0]))


def test_histc_with_given_and_data_ranges():
    x = torch.randn(4, 7) * 3
    x[0, 0], x[0, 1] = 2.0, -2.0  # on the edges: the top one counts in the last bin
    check(lambda t: torch.histc(t, bins=8, min=-2, max=2), x)
    check(lambda t: torch.histc(t, bins=5), x)
    check(lambda t: torch.histc(t, bins=3), torch.full((3,), 2.0))  # a one-point range, widened
    check(lambda t: torch.histc(t, bins=4, min=1, max=1), torch.tensor([0.5, 1.0, 1.5, 3.0]))


def test_bad_selection_input_is_a_typed_error():
    class KthTooLarge(torch.nn.Module):
        def forward(self, x):
            return torch.kthvalue(x, 9, dim=0)

    with pytest.raises(TorchImportError):
        tilecraft.torch.compile(KthTooLarge().eval(), (torch.randn(4),))

    class ContradictorySide(torch.nn.Module):
        def forward(self, b, v):
            return torch.searchsorted(b, v, right=True, side="left")

    with pytest.raises(TorchImportError):
        tilecraft.torch.compile(ContradictorySide().eval(), (torch.arange(4.0), torch.randn(2)))

    class IntegerHistogram(torch.nn.Module):
        def forward(self, x):
            return torch.histc(x, bins=3)

    with pytest.raises(TorchImportError):
        tilecraft.torch.compile(IntegerHistogram().eval(), (torch.arange(4),))


@pytest.mark.parametrize("reduce", ["sum", "prod", "max", "min", "mean"])
@pytest.mark.parametrize("initial", [None, 1.0])
def test_segment_reduce_by_lengths_and_offsets(reduce, initial):
    lengths, offsets = torch.tensor([0, 1, 2, 2]), torch.tensor([0, 0, 1, 3, 5])
    data = torch.tensor([-5.0, 0.5, -3.0, 4.0, -1.0])
    check(lambda d, n: torch.segment_reduce(d, reduce, lengths=n, initial=initial), data, lengths)
    check(lambda d, o: torch.segment_reduce(d, reduce, offsets=o, initial=initial), data, offsets)
    check(lambda d, n: torch.segment_reduce(d, reduce, lengths=n, initial=initial), torch.randn(5, 3), lengths)


def test_segment_reduce_of_integers_is_a_typed_error():
    class IntegerSegments(torch.nn.Module):
        def forward(self, d, n):
            return torch.segment_reduce(d, "sum", lengths=n)

    with pytest.raises(TorchImportError):
        tilecraft.torch.compile(IntegerSegments().eval(), (torch.arange(5), torch.tensor([2, 3])))
