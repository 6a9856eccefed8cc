"""``torch.histogram`` (ir/binning.py): a static bin count over the data's range or a given
range, or bin edges as a tensor; weights and density. Both outputs (counts, edges) match
eager, including values exactly on an edge and a range of one point."""

from __future__ import annotations

import pytest
import torch

import tilecraft
import tilecraft.torch
from torch_testing import Lambda


def same(fn, *inputs):
    module = Lambda(fn).eval()
    compiled = tilecraft.torch.compile(module, inputs)
    got, expected = compiled(*inputs), module(*inputs)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    return got


@pytest.mark.parametrize("bins", [1, 3, 7])
@pytest.mark.parametrize("density", [False, True])
def test_bin_count_over_the_data_range(bins, density):
    torch.manual_seed(bins)
    x, w = torch.randn(6, 5), torch.rand(6, 5)
    same(lambda v: torch.histogram(v, bins, density=density), x)
    same(lambda v, u: torch.histogram(v, bins, weight=u, density=density), x, w)


def test_given_range_drops_values_outside():
    x = torch.tensor([-2.0, -1.0, -0.5, 0.0, 0.25, 1.0, 3.0, float("nan")])
    hist, edges = same(lambda v: torch.histogram(v, 4, range=(-1.0, 1.0)), x)
    assert hist.tolist() == [1.0, 1.0, 2.0, 1.0]  # -1 and 1 (the top edge) count; -2, 3, NaN not
    assert edges.tolist() == [-1.0, -0.5, 0.0, 0.5, 1.0]


def test_values_on_the_edges_and_a_one_point_range():
    same(lambda v: torch.histogram(v, 10), torch.arange(11, dtype=torch.float32) / 10)
    hist, edges = same(lambda v: torch.histogram(v, 2), torch.full((3,), 2.0))
    assert edges.tolist() == [1.5, 2.0, 2.5]


def test_bin_edges_as_a_tensor():
    torch.manual_seed(0)
    x, w = torch.randn(40), torch.rand(40)
    edges = torch.tensor([-1.5, -0.3, 0.0, 0.2, 2.0])
    same(lambda v, b, u: torch.histogram(v, b, weight=u, density=True), x, edges, w)
    same(lambda v, b: torch.histogram(v, b), x, torch.tensor([-1.0, 0.0, 0.0, 1.0]))  # an empty bin


def test_bad_arguments_are_refused_typed():
    x = torch.randn(4)
    with pytest.raises(tilecraft.TilecraftError, match="not finite"):  # torch.export's own check
        tilecraft.torch.compile(Lambda(lambda v: torch.histogram(v, 3, range=(0.0, float("inf")))).eval(), (x,))
    with pytest.raises(tilecraft.TilecraftError):
        tilecraft.torch.compile(Lambda(lambda v, u: torch.histogram(v, 3, weight=u)).eval(), (x, torch.rand(5)))


def test_unsorted_edges_bin_as_eagers_binary_search():
    """Edges that are not increasing: eager keeps values inside [first, last] edge and places
    them by std::upper_bound's binary search; the compiled search is the same one."""
    torch.manual_seed(1)
    same(lambda v, b: torch.histogram(v, b), torch.randn(50) * 4, torch.tensor([-8.5, -1.8, -4.3, 2.4, 6.0]))


@pytest.mark.parametrize("density", [False, True])
def test_histogramdd_with_bin_counts_and_weights(density):
    torch.manual_seed(2)
    points, w = torch.randn(4, 6, 3), torch.rand(4, 6)
    same(lambda v, u: torch.histogramdd(v, [2, 3, 4], weight=u, density=density), points, w)
    same(lambda v: torch.histogramdd(v, 3, range=[-1.0, 1.0, -2.0, 2.0, 0.0, 1.0]), points)


def test_histogramdd_with_edge_tensors():
    torch.manual_seed(3)
    edges = [torch.tensor([-2.0, 0.0, 1.5]), torch.tensor([-1.0, -0.5, 0.5, 1.0])]
    hist, *_ = same(lambda v, a, b: torch.histogramdd(v, [a, b]), torch.randn(30, 2), *edges)
    assert hist.shape == (2, 3)
