"""``nn.functional.embedding_bag`` (frontend/torch/ops/embedding_bag.py): sum, mean and max
bags from 1-D indices with offsets (empty bags, ``include_last_offset``) or 2-D indices,
``per_sample_weights``, ``padding_idx``, and ``nn.EmbeddingBag`` as a module."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft
import tilecraft.torch
from torch_testing import Lambda, check

# The row gather (the one F.embedding compiles to) keeps scalar loops, with the schedule's
# warning: not this op's to change.
pytestmark = pytest.mark.filterwarnings("ignore:tilecraft-schedule:RuntimeWarning")

WEIGHT = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_bags_from_offsets_with_an_empty_bag(mode):
    offsets = torch.tensor([0, 2, 2, 6])  # the second bag is empty: 0 in every mode
    check(Lambda(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode)), WEIGHT, INDICES, offsets)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_padding_idx_counts_nowhere(mode):
    offsets = torch.tensor([0, 3, 5])
    indices = torch.tensor([4, 4, 1, 4, 4, 2, 3, 4, 0])  # the middle bag is all padding
    check(Lambda(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode, padding_idx=4)), WEIGHT, indices, offsets)


def test_include_last_offset_and_per_sample_weights():
    offsets = torch.tensor([0, 3, 3, 7])
    weights = torch.rand(9)
    check(Lambda(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p,
                                                      include_last_offset=True)), WEIGHT, INDICES, offsets, weights)


def test_two_dimensional_indices_and_the_module():
    bag = torch.nn.EmbeddingBag(12, 5, mode="max")
    check(bag, torch.tensor([[1, 2, 3], [11, 0, 0], [4, 4, 7]]))
    check(Lambda(lambda w, i: F.embedding_bag(i, w, mode="mean")), WEIGHT, torch.tensor([[1, 2], [3, 9]]))


def test_per_sample_weights_outside_sum_is_refused_typed():
    with pytest.raises(tilecraft.TilecraftError):
        tilecraft.torch.compile(Lambda(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="max", per_sample_weights=p)).eval(),
                                (WEIGHT, INDICES, torch.tensor([0, 4]), torch.rand(9)))


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_max_norm_rescales_the_callers_weight(norm_type):
    """``max_norm``: eager rescales the named rows of the weight in place before the lookup
    (``embedding_renorm_``); the compiled call returns the same bags and writes the same
    rows back into the caller's weight."""
    weight = WEIGHT * 2
    offsets = torch.tensor([0, 2, 2, 6])
    module = Lambda(lambda w, i, o: F.embedding_bag(i, w, o, mode="mean", max_norm=1.5, norm_type=norm_type)).eval()
    compiled = tilecraft.torch.compile(module, (weight.clone(), INDICES, offsets))
    eager_weight, compiled_weight = weight.clone(), weight.clone()
    torch.testing.assert_close(compiled(compiled_weight, INDICES, offsets), module(eager_weight, INDICES, offsets),
                               rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(compiled_weight, eager_weight, rtol=1e-5, atol=1e-6)
    assert not torch.equal(compiled_weight, weight)  # some rows were over the norm
    assert torch.equal(compiled_weight[6:9], weight[6:9])  # rows no index names are untouched
