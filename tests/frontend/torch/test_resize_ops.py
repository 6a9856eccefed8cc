"""``resize_`` / ``resize_as_`` (frontend/torch/ops/resize.py) and antialiased bilinear
interpolation (``_upsample_bilinear2d_aa``, frontend/torch/ops/antialias.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft
import tilecraft.torch
from torch_testing import Lambda, check


def test_resize_as_keeps_the_elements_and_resizes_the_callers_tensor():
    x, like = torch.randn(4, 6), torch.empty(3, 8)
    module = Lambda(lambda a, b: a.resize_as_(b) * 2).eval()
    compiled = tilecraft.torch.compile(module, (x.clone(), like))
    mine, theirs = x.clone(), x.clone()
    torch.testing.assert_close(compiled(mine, like), module(theirs, like))
    assert mine.shape == theirs.shape == (3, 8)
    torch.testing.assert_close(mine, theirs)


def test_resize_to_fewer_elements_keeps_the_first():
    x, like = torch.arange(12.0).reshape(3, 4), torch.empty(2, 5)
    module = Lambda(lambda a, b: a.resize_as_(b) + 0).eval()
    compiled = tilecraft.torch.compile(module, (x.clone(), like))
    mine, theirs = x.clone(), x.clone()
    assert torch.equal(compiled(mine, like), module(theirs, like))
    assert mine.shape == (2, 5) and torch.equal(mine, theirs)


def test_resize_that_grows_is_refused_typed():
    """Eager's new elements are uninitialized memory: no answer to compile."""
    module = Lambda(lambda a, b: a.resize_as_(b) + 0).eval()
    with pytest.raises(tilecraft.TilecraftError, match="uninitialized"):
        tilecraft.torch.compile(module, (torch.randn(3, 4), torch.empty(5, 5)))


@pytest.mark.parametrize("shape, size, align_corners", [
    ((2, 3, 10, 20), (3, 3), False),   # downsampling: the filter widens with the scale
    ((1, 2, 7, 5), (11, 2), True),     # up along H, down along W
    ((1, 1, 1, 6), (3, 2), False),
])
def test_antialiased_bilinear_matches_eager(shape, size, align_corners):
    torch.manual_seed(0)
    check(lambda v: F.interpolate(v, size=size, mode="bilinear", antialias=True, align_corners=align_corners),
          torch.randn(*shape))


def test_antialiased_bilinear_with_scale_factors():
    check(lambda v: F.interpolate(v, scale_factor=(0.45, 0.6), mode="bilinear", antialias=True),
          torch.randn(1, 2, 9, 9))
