"""``F.pad(mode="circular")``: torch decomposes it to slices copied into an empty tensor; the
column that wraps round is a gather from a strided view of a buffer, which the LLVM JIT
refused before ``tilecraft-unit-stride-gathers`` (pipelines/vector/strided_gathers.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from torch_testing import check


@pytest.mark.parametrize("shape, pad", [
    ((1, 2, 3, 4), (1, 2, 2, 1)),      # the OpInfo sample the JIT failed on
    ((2, 3, 5), (2, 3)),               # 1-D: the last dim only
    ((1, 2, 3, 4, 5), (1, 1, 0, 2, 2, 0)),
    ((2, 1, 4, 4), (0, 3, 3, 0)),      # padding as wide as the dim minus one
])
def test_circular_pad_matches_eager(shape, pad):
    torch.manual_seed(0)
    check(lambda v: F.pad(v, pad, mode="circular"), torch.randn(*shape))


def test_circular_pad_module():
    check(torch.nn.CircularPad2d((1, 0, 2, 1)), torch.randn(2, 3, 4, 5))
