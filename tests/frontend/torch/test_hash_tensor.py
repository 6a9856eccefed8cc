"""``torch.hash_tensor`` (ir/hashing.py): the XOR of the elements' 64-bit patterns, a uint64
result, over all dims or some (``keepdim``), for float, signed, unsigned and bool inputs."""

from __future__ import annotations

import pytest
import torch

import tilecraft
import tilecraft.torch
from torch_testing import Lambda

# The XOR reduction is no arithmetic combiner the schedule vectorizes: it keeps scalar loops.
pytestmark = pytest.mark.filterwarnings("ignore:tilecraft-schedule:RuntimeWarning")


def same(fn, x):
    module = Lambda(fn).eval()
    got, expected = tilecraft.torch.compile(module, (x,))(x), module(x)
    assert got.dtype == expected.dtype == torch.uint64 and got.shape == expected.shape
    assert torch.equal(got.view(torch.int64), expected.view(torch.int64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8, torch.bool])
def test_all_dims(dtype):
    torch.manual_seed(0)
    x = (torch.randn(3, 5) * 100).to(dtype)
    if dtype.is_floating_point:
        x[0, 0] = float("nan")
        x[1, 1] = -0.0
    same(torch.hash_tensor, x)


@pytest.mark.parametrize("dim, keepdim", [(-1, False), ((0, 2), True), (1, True)])
def test_some_dims(dim, keepdim):
    same(lambda v: torch.hash_tensor(v, dim=dim, keepdim=keepdim), torch.randn(3, 2, 4))


def test_zero_dim_input():
    same(lambda v: torch.hash_tensor(v, dim=0, keepdim=True), torch.tensor(2.5))
