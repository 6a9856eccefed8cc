"""``igamma`` / ``igammac`` (ir/incomplete_gamma.py): the series and the continued fraction in
f64, against scipy in f64 (eager's own float64 result switches to a Temme asymptotic series
near ``x = a``, about 3e-10 off there), against eager in float32, and PyTorch's special values."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special
import torch

import tilecraft
import tilecraft.torch
from torch_testing import Lambda, check

# The expansions are scf.while loops inside the elementwise op: the schedule warns that it
# cannot vectorize them and keeps scalar loops, the intended lowering.
pytestmark = pytest.mark.filterwarnings("ignore:tilecraft-schedule:RuntimeWarning")

OPS = {"igamma": (torch.igamma, scipy.special.gammainc), "igammac": (torch.igammac, scipy.special.gammaincc)}


@pytest.mark.parametrize("name", sorted(OPS))
def test_float64_matches_scipy(name):
    op, reference = OPS[name]
    a = torch.tensor([0.5, 1.0, 2.0, 10.0, 9.0, 100.0, 101.0, 1e4, 1e-3, 50.0, 0.1, 3.5, 7.0], dtype=torch.float64)
    x = torch.tensor([0.3, 1.0, 5.0, 9.0, 10.0, 101.0, 100.0, 1e4, 1.0, 30.0, 20.0, 1e-6, 60.0], dtype=torch.float64)
    compiled = tilecraft.torch.compile(Lambda(op).eval(), (a, x))
    np.testing.assert_allclose(compiled(a, x).numpy(), reference(a.numpy(), x.numpy()), rtol=1e-11, atol=1e-300)


@pytest.mark.parametrize("name", sorted(OPS))
def test_float32_matches_eager_with_broadcasting(name):
    torch.manual_seed(0)
    op = OPS[name][0]
    check(Lambda(op), torch.rand(6, 1) * 30, torch.rand(1, 40) * 30)


@pytest.mark.parametrize("name", sorted(OPS))
def test_special_values_are_eagers(name):
    op = OPS[name][0]
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([-1.0, 1.0, 0.0, 0.0, 2.0, inf, inf, 2.0, nan, 1.0, 0.0])
    x = torch.tensor([1.0, -1.0, 1.0, 0.0, 0.0, 3.0, inf, inf, 1.0, nan, inf])
    compiled = tilecraft.torch.compile(Lambda(op).eval(), (a, x))
    torch.testing.assert_close(compiled(a, x), op(a, x), rtol=0, atol=0, equal_nan=True)


def test_integer_operands_are_refused_typed():
    """Eager refuses integer tensors though the export's metadata promotes them to float."""
    a = torch.tensor([1, 2])
    with pytest.raises(tilecraft.TilecraftError, match="floating-point operands only"):
        tilecraft.torch.compile(Lambda(torch.igamma).eval(), (a, a))
