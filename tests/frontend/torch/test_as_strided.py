"""``aten.as_strided`` (frontend/torch/ops/views.py): a view that reads every element of its
dense input once is imported as reshape + ``linalg.transpose`` (what the schedules tile and
vectorize), any other as the gather of the positions PyTorch computes; both match eager, and
bad arguments are typed errors."""

from __future__ import annotations

import itertools

import pytest
import torch

import tilecraft
from tilecraft.errors import TorchImportError
from tilecraft.frontend.torch import export, import_exported
from tilecraft.frontend.torch.ops.views import _permuted_storage

from torch_testing import Lambda, check


def _imported_text(fn, *inputs) -> str:
    return str(import_exported(export(Lambda(fn).eval(), inputs)))


# (input shape, size, stride): each reads its whole input once, in another order
PERMUTATIONS = [
    ((2, 3, 4), (2, 3, 4), (12, 4, 1)),          # the identity
    ((2, 3, 4), (4, 2, 3), (1, 12, 4)),          # a permutation of all dims
    ((1, 6, 1, 1), (1, 6, 1, 1), (6, 1, 6, 6)),  # ConvNeXt's head: channels-last strides of a pooled map
    ((3, 5), (5, 1, 3), (1, 7, 5)),              # a transpose with a unit dim inserted (any stride)
    ((2, 3, 4, 5), (2, 4, 3, 5), (60, 5, 20, 1)),  # a window partition's middle swap
    ((24,), (2, 3, 4), (1, 8, 2)),               # a flat input read in another order
]


@pytest.mark.parametrize("shape,size,stride", PERMUTATIONS)
def test_a_permutation_of_the_storage_is_a_transpose_and_matches_eager(shape, size, stride):
    def view(x):
        return torch.as_strided(x, size, stride) * 2.0

    x = torch.randn(shape)
    check(view, x)
    text = _imported_text(view, x)
    assert "tensor.extract " not in text and "linalg.index" not in text  # no gather
    expected = _permuted_storage(list(shape), list(size), list(stride), 0)
    assert expected is not None
    if expected[1] != sorted(expected[1]):
        assert "linalg.transpose" in text


@pytest.mark.parametrize("size,stride,offset", [
    ((3, 3), (4, 1), 0),        # a strided sub-block: gaps between rows
    ((4, 4), (2, 1), 0),        # overlapping windows
    ((2, 3, 3), (9, 3, 1), 1),   # an offset
    ((2, 2), (0, 1), 0),        # a broadcast (stride 0)
])
def test_other_views_are_gathers_and_match_eager(size, stride, offset):
    assert _permuted_storage([24], list(size), list(stride), offset) is None

    def view(x):
        return torch.as_strided(x, size, stride, offset) + 1.0

    x = torch.randn(24)
    check(view, x)
    assert "linalg.transpose" not in _imported_text(view, x)


def test_the_permutation_reads_what_as_strided_reads():
    # the decision function against PyTorch itself, on every stride order of a 2x3x4 storage
    base = torch.arange(24)
    for order in itertools.permutations(range(3)):
        size = [(2, 3, 4)[d] for d in order]
        contiguous = [12, 4, 1]
        stride = [contiguous[d] for d in order]
        extents, permutation = _permuted_storage([24], size, stride, 0)
        want = torch.as_strided(base, size, stride)
        got = base.reshape(extents).permute(permutation).reshape(size)
        assert torch.equal(got, want), (order, extents, permutation)


def test_convnext_style_head_has_no_gather():
    # mean(keepdim) of a channels-last result, flattened: core ATen writes an as_strided
    class Head(torch.nn.Module):
        def forward(self, x):
            y = x.permute(0, 2, 3, 1) * 2.0
            return torch.nn.functional.adaptive_avg_pool2d(y.permute(0, 3, 1, 2), 1).flatten(1)

    x = torch.randn(1, 8, 5, 5)
    program = export(Head().eval(), (x,))
    check(Head(), x)
    assert "tensor.extract " not in str(import_exported(program))


def test_as_strided_of_a_non_contiguous_input_is_a_typed_error():
    def view(x):
        return torch.as_strided(x.t(), (3, 2), (2, 1))

    with pytest.raises(TorchImportError, match="non-contiguous"):
        tilecraft.torch.compile(Lambda(view).eval(), (torch.randn(2, 3),))
