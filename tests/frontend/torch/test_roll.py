"""``torch.roll`` and ``index_select`` by an import-time index of a few runs of consecutive
positions (frontend/torch/ops/shape.py): slices and a concat, as the ONNX exporter writes
``roll``, not a gather; results match eager, and other indices stay gathers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tilecraft.errors import TorchImportError
from tilecraft.frontend.torch import export, import_exported
from tilecraft.frontend.torch.ops.shape import _consecutive_runs

from torch_testing import Lambda, check


def _imported_text(fn, *inputs) -> str:
    return str(import_exported(export(Lambda(fn).eval(), inputs)))


def _gathers(text: str) -> bool:
    return "tensor.extract " in text


@pytest.mark.parametrize("shifts,dims", [
    ((-3, -3), (1, 2)),  # Swin's cyclic shift of a [1, H, W, C] map, and back
    ((3, 3), (1, 2)),
    (1, 0),
    (7, -1),             # a shift of the whole extent and more wraps
    (5, None),           # no dims: the flattened tensor rolls
])
def test_roll_is_slices_and_a_concat_and_matches_eager(shifts, dims):
    def roll(x):
        return torch.roll(x, shifts, dims) * 2.0

    x = torch.randn(2, 7, 5, 3)
    check(roll, x)
    text = _imported_text(roll, x)
    assert not _gathers(text)
    assert "tensor.concat" in text


def test_index_select_by_runs_matches_eager_and_other_indices_stay_gathers():
    runs = torch.tensor([4, 5, 0, 1, 2, 2])  # two runs and a repeat: three slices
    scattered = torch.tensor([3, 0, 4, 1, 5, 2])  # six runs: a gather

    def by_runs(x):
        return torch.index_select(x, 1, runs) + 1.0

    def by_scattered(x):  # the gather path (its numerics: test_torch_ops.py)
        return torch.index_select(x, 1, scattered) + 1.0

    x = torch.randn(3, 6)
    check(by_runs, x)
    assert not _gathers(_imported_text(by_runs, x))
    assert _gathers(_imported_text(by_scattered, x))


def test_runs_read_what_the_index_reads():
    for index, extent, expected in [
        ([2, 3, 4, 0, 1], 5, [(2, 3), (0, 2)]),
        ([0, 1, 2], 3, [(0, 3)]),
        ([1, 1], 3, [(1, 1), (1, 1)]),
        ([0, 5], 5, None),          # out of range: the gather's run-time check reports it
        ([4, 3, 2, 1, 0], 5, None),  # five runs
        ([1, 2], None, None),        # a dynamic extent
    ]:
        runs = _consecutive_runs(np.array(index, dtype=np.int64), extent)
        assert runs == expected, (index, runs)
        if runs:
            data = np.arange(extent) * 10
            assert np.concatenate([data[s:s + n] for s, n in runs]).tolist() == data[index].tolist()


def test_roll_with_mismatched_shifts_and_dims_is_a_typed_error():
    with pytest.raises(TorchImportError):
        export(Lambda(lambda x: torch.roll(x, (1, 2), (0,))).eval(), (torch.randn(3, 4),))
