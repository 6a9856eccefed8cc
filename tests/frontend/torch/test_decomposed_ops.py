"""Ops the importer reaches through torch's own decompositions (``frontend/torch/export.py``
runs ``torch._decomp`` for ops no handler covers) and ``grid_sampler`` through the shared
GridSample emitter."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft
import tilecraft.torch
from tilecraft.frontend.torch.export import export
from torch_testing import Lambda, check

# Gathers at computed positions (resize, grid sample) keep scalar loops: the schedule warns.
pytestmark = pytest.mark.filterwarnings("ignore:tilecraft-schedule:RuntimeWarning")


def _targets(module, *inputs) -> set[str]:
    program = export(module.eval(), inputs)
    return {str(node.target) for node in program.graph.nodes if node.op == "call_function"}


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("resize", [dict(size=(5, 7)), dict(size=(1, 3)), dict(size=(3, 2)),
                                    dict(scale_factor=1.7), dict(scale_factor=(2.0, 0.5))])
def test_bilinear_interpolate(align_corners, resize):
    """Up, down, to one pixel and by scale factors (the coordinates then use the factor as
    given, not the ratio of the extents): the resize emitter, not torch's decomposition."""
    module = Lambda(lambda v: F.interpolate(v, mode="bilinear", align_corners=align_corners, **resize))
    x = torch.randn(2, 3, 4, 6)
    assert "aten.upsample_bilinear2d.vec" in _targets(module, x)
    check(module, x)


def test_dist_decomposes_and_matches():
    check(lambda a, b: torch.dist(a, b, p=3), torch.randn(4, 5), torch.randn(5))


def test_an_op_without_handler_or_decomposition_stays_refused_by_name():
    # linalg.eig of a real matrix: complex eigenvalues (LAPACK's geev is not wired).
    with pytest.raises(tilecraft.TilecraftError, match="aten.linalg_eig"):
        tilecraft.torch.compile(Lambda(lambda x: torch.linalg.eigvals(x).real).eval(), (torch.randn(3, 3),))


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_2d(mode, padding_mode, align_corners):
    if (mode, padding_mode) == ("bicubic", "border"):
        pytest.skip("refused: test_bicubic_border_grid_sample_is_refused")
    torch.manual_seed(0)
    x, grid = torch.randn(2, 3, 5, 6), torch.rand(2, 4, 7, 2) * 2.4 - 1.2  # some outside [-1, 1]
    check(lambda v, g: F.grid_sample(v, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners),
          x, grid)


def test_grid_sample_3d():
    torch.manual_seed(0)
    x, grid = torch.randn(1, 2, 3, 4, 5), torch.rand(1, 2, 3, 4, 3) * 2 - 1
    check(lambda v, g: F.grid_sample(v, g, align_corners=True), x, grid)


def test_bicubic_border_grid_sample_is_refused():
    """Eager clamps every tap to the border, the shared emitter (ONNX's rule) the position:
    refused by name rather than a different answer near the edges."""
    x, grid = torch.randn(1, 1, 4, 4), torch.rand(1, 2, 2, 2) * 2 - 1
    module = Lambda(lambda v, g: F.grid_sample(v, g, mode="bicubic", padding_mode="border", align_corners=False))
    with pytest.raises(tilecraft.TilecraftError, match="bicubic.*border"):
        tilecraft.torch.compile(module.eval(), (x, grid))
