"""The PyTorch route reaches the ONNX route's graph (issue #43): a SqueezeNet-style head
(1x1 conv -> ReLU -> adaptive_avg_pool2d(1) -> flatten) through ``tilecraft.torch.compile``
computes what eager computes, with no unit dim innermost in the ops the schedule sees, and
op for op as the same module exported to ONNX (benchmarks/route_graphs.py)."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest
import torch
from mlir import ir
from torch import nn

import tilecraft
from tilecraft.dialects import graph

from torch_testing import assert_close, check

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import public_suite  # noqa: E402
import route_graphs  # noqa: E402


def head(channels: int = 24, classes: int = 40, pool: nn.Module | None = None) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(channels, classes, 1), nn.ReLU(), pool or nn.AdaptiveAvgPool2d(1),
                         nn.Flatten()).eval()


def generic_result_shapes(text: str) -> list[list[int]]:
    """The result shapes of the ``linalg.generic`` ops in the IR ``text``."""
    context = ir.Context()
    graph.load(context)
    module = ir.Module.parse(text, context)
    shapes = []
    for op in route_graphs.graph_ops(module):
        if op.name.startswith("linalg.generic"):
            for result in op.results.split(", "):
                shapes.append([int(e) for e in result.removeprefix("tensor<").split("x")[:-1]])
    return shapes


def innermost_unit_dims(shape: list[int]) -> bool:
    """The shape ends with a unit dim after a dim of extent > 1 ([1, 13, 13, 1000, 1, 1])."""
    wide = [p for p, e in enumerate(shape) if e != 1]
    return bool(wide) and wide[-1] < len(shape) - 1


def test_innermost_unit_dims_reads_the_shape():
    assert innermost_unit_dims([1, 13, 13, 1000, 1, 1])
    assert not innermost_unit_dims([1, 13, 13, 1000]) and not innermost_unit_dims([1, 1, 1])
    assert not innermost_unit_dims([197, 1, 768])


@pytest.mark.parametrize("pool", ["adaptive", "mean"])
def test_squeezenet_head_matches_eager_without_innermost_unit_dims(pool):
    class Mean(nn.Module):  # adaptive_avg_pool2d(1) as users also write it
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean((2, 3), keepdim=True)

    model = head(pool=Mean() if pool == "mean" else None)
    x = torch.randn(1, 24, 13, 13)
    compiled = tilecraft.torch.compile(model, (x,), keep_ir=True)
    with torch.no_grad():
        assert_close(compiled(x), model(x))
    shapes = generic_result_shapes(compiled.ir("simplify"))
    assert shapes, "the head has generic ops (the ReLU, the pooling)"
    assert not [s for s in shapes if innermost_unit_dims(s)], shapes
    assert [1, 13, 13, 40] in shapes, shapes  # the 1x1 convolution's pixels x classes, channels innermost


def test_squeezenet_head_reaches_the_onnx_graph():
    routes = route_graphs.route_graphs(head(), (torch.randn(1, 24, 13, 13),))
    assert routes["onnx"] and routes["torch"]
    assert route_graphs.differences(routes["onnx"], routes["torch"]) == [], route_graphs.report("head", routes)


@pytest.mark.parametrize("shape", [(5,), (3, 8), (7, 1, 8), (2, 3, 4, 8)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_kept_whole_matches_eager(shape, bias):
    """``aten.linear`` is imported whole (ops/nn.py): every input rank, with and without bias."""
    torch.manual_seed(0)
    model = nn.Linear(shape[-1] if len(shape) > 1 else 5, 6, bias=bias).eval()
    check(model, torch.randn(*shape))


def test_linear_by_a_computed_weight_and_a_dynamic_batch():
    """A weight that is not a constant is transposed in the IR; a dynamic batch stays ``?``."""
    import torch.nn.functional as F

    check(lambda x, w, b: F.linear(x, w * 2, b), torch.randn(4, 3, 8), torch.randn(6, 8), torch.randn(6))
    model = nn.Linear(8, 6).eval()
    batch = torch.export.Dim("batch", min=1, max=32)
    compiled = tilecraft.torch.compile(model, (torch.randn(3, 8),), dynamic_shapes={"input": {0: batch}})
    with torch.no_grad():
        for n in (1, 5):
            x = torch.randn(n, 8)
            assert_close(compiled(x), model(x))


def test_vit_style_linear_reaches_the_onnx_graph():
    """Sequence-first tokens through Linear -> GELU -> Linear + residual: one graph from both
    routes (torch's decomposition of ``linear`` put reshapes between them)."""
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(32, 128), nn.Linear(128, 32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.fc2(nn.functional.gelu(self.fc1(x)))

    torch.manual_seed(0)
    routes = route_graphs.route_graphs(Block().eval(), (torch.randn(17, 1, 32),))
    assert route_graphs.differences(routes["onnx"], routes["torch"]) == [], route_graphs.report("block", routes)


def test_convnext_reaches_the_onnx_graph():
    """The suite's ConvNeXt (small sizes): permute -> LayerNorm -> permute over channels,
    Linears on channels-last maps, and a head whose ``mean(keepdim)`` of a channels-last map
    core ATen reads back through ``as_strided`` (imported as a reshape, not a gather:
    ops/views.py). Both routes give the same ops on the same shapes, in the same order."""
    module, inputs = public_suite.build("convnext", tiny=True)
    routes = route_graphs.route_graphs(module, inputs)
    assert route_graphs.differences(routes["onnx"], routes["torch"]) == [], route_graphs.report("convnext", routes)


def test_encoder_reaches_the_onnx_ops():
    """The suite's pre-norm encoder (small sizes) with ``scaled_dot_product_attention``: core
    ATen's decomposition of SDPA and the ONNX exporter's MatMul/Softmax/MatMul reach the same
    ops on the same shapes, the fused attention kernel among them (the two imports place one
    head transpose differently, so the ops are compared as multisets)."""
    module, inputs = public_suite.build("encoder_512", tiny=True)
    routes = route_graphs.route_graphs(module, inputs)
    onnx_ops, torch_ops = collections.Counter(routes["onnx"]), collections.Counter(routes["torch"])
    assert onnx_ops == torch_ops, route_graphs.report("encoder_512", routes)
    assert any(op.name == "func.call" and "x16x8xf32" in op.results for op in routes["torch"]), \
        "the attention is one fused kernel call"


def test_swin_reaches_the_onnx_graph():
    """The suite's Swin (small sizes): the shifted windows' ``torch.roll``, which core ATen
    writes as an ``index_select`` by a computed index, is slices and a concat as the ONNX
    exporter writes it (ops/shape.py), so both routes give the same ops in the same order."""
    module, inputs = public_suite.build("swin", tiny=True)
    routes = route_graphs.route_graphs(module, inputs)
    assert route_graphs.differences(routes["onnx"], routes["torch"]) == [], route_graphs.report("swin", routes)
