"""tilecraft.torch.compile and the torch.compile backend: API, dynamic shapes, bad input."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tilecraft
from tilecraft.errors import ArgumentTypeError, ArgumentValueError, TorchImportError
from tilecraft.compiler.dynamo import TilecraftFallbackWarning

from torch_testing import Lambda, assert_close, check


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softmax(self.fc(F.relu(self.conv(x)).flatten(1)), -1)


def small() -> nn.Module:
    torch.manual_seed(0)
    return Small().eval()


def test_returns_tensors_in_the_module_structure():
    compiled = check(lambda x: {"double": (x * 2,), "sum": x.sum(0)}, torch.randn(3, 4))
    out = compiled(torch.randn(3, 4))
    assert set(out) == {"double", "sum"} and isinstance(out["double"][0], torch.Tensor)


def test_dynamic_batch_becomes_a_question_mark():
    model = small()
    batch = torch.export.Dim("batch", min=1, max=64)
    compiled = tilecraft.torch.compile(model, (torch.randn(2, 2, 6, 6),), dynamic_shapes={"x": {0: batch}})
    assert compiled.signature.arguments[0].shape == (None, 2, 6, 6)
    assert "tensor<?x2x6x6xf32>" in compiled.ir("source")
    with torch.no_grad():
        for n in (1, 2, 7):
            x = torch.randn(n, 2, 6, 6)
            assert_close(compiled(x), model(x))


def test_dynamic_sequence_length_through_views():
    def attention_like(x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        heads = x.view(b, t, 2, c // 2).transpose(1, 2)
        scores = (heads @ heads.transpose(-1, -2)).softmax(-1)
        return (scores @ heads).transpose(1, 2).reshape(b, t, c)

    seq = torch.export.Dim("seq", min=2, max=256)
    compiled = tilecraft.torch.compile(Lambda(attention_like).eval(), (torch.randn(2, 8, 6),),
                                       dynamic_shapes=(({1: seq},),))  # forward(*args)
    for t in (3, 16):
        x = torch.randn(2, t, 6)
        assert_close(compiled(x), attention_like(x))


def test_weights_travel_as_resources_not_text():
    torch.manual_seed(0)
    layer = nn.Linear(64, 32).eval()
    compiled = check(layer, torch.randn(2, 64))
    source = compiled.ir("source")
    assert "dense_resource<" in source
    assert f"{layer.weight[0, 0].item():.6e}"[:6] not in source


def test_inputs_are_not_modified_and_results_are_writable():
    x = torch.randn(2, 2, 6, 6)
    before = x.clone()
    compiled = tilecraft.torch.compile(small(), (x,))
    y = compiled(x)
    assert torch.equal(x, before)
    y += 1  # the result owns its memory
    non_contiguous = torch.randn(6, 6, 2, 2).permute(2, 3, 0, 1)
    with torch.no_grad():
        assert_close(compiled(non_contiguous), small()(non_contiguous))


class UsesFft(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x).exp().abs() + 1  # the line the error must name (exp of a complex tensor)


def test_unsupported_op_is_listed_with_its_source_line():
    line = UsesFft.forward.__code__.co_firstlineno + 1
    with pytest.raises(TorchImportError) as error:
        tilecraft.torch.compile(UsesFft().eval(), (torch.randn(8),))
    assert "complex:aten.exp.default" in str(error.value)
    assert f"test_torch_api.py:{line}" in str(error.value)
    assert any(op == "complex:aten.exp.default" for _, op, _ in error.value.problems)


def test_training_mode_is_refused_with_a_clear_message():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    with pytest.raises(TorchImportError, match=r"training mode.*eval\(\)"):
        tilecraft.torch.compile(model, (torch.randn(2, 4),))


@pytest.mark.parametrize("fn", [lambda x: (x + 1, 3), lambda x: (x * 2, x.shape[0])])
def test_non_tensor_outputs_are_refused(fn):
    with pytest.raises(TorchImportError, match="not a tensor"):
        tilecraft.torch.compile(Lambda(fn).eval(), (torch.randn(2, 4),))


def test_wrong_inputs_raise_typed_errors():
    compiled = tilecraft.torch.compile(small(), (torch.randn(2, 2, 6, 6),))
    with pytest.raises(ArgumentValueError, match="shape|dim"):
        compiled(torch.randn(2, 2, 7, 7))
    with pytest.raises(ArgumentTypeError):
        compiled(torch.randn(2, 2, 6, 6, dtype=torch.float64))
    with pytest.raises(ArgumentTypeError):
        compiled(np.zeros((2, 2, 6, 6), np.float32))
    with pytest.raises(ArgumentValueError):
        compiled(torch.randn(2, 2, 6, 6), torch.randn(1))


class Pairs(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a + b, b * c


def test_plain_tensor_calls_skip_pytree_and_keep_every_check(monkeypatch):
    """A call of as many plain tensors as the example has leaves skips pytree's flattening
    (compiler/torch_module.py); every other form is flattened and checked as before, after
    warm plain calls. Counted, not timed: the flattenings of each call."""
    from tilecraft.compiler import torch_module

    a, b, c = (torch.randn(2, 3) for _ in range(3))
    compiled = tilecraft.torch.compile(Pairs().eval(), (a, b, c))
    flattened = [0]
    flatten = torch_module.pytree.tree_flatten

    def counting(*args, **kwargs):
        flattened[0] += 1
        return flatten(*args, **kwargs)

    monkeypatch.setattr(torch_module.pytree, "tree_flatten", counting)
    expected = (a + b, b * c)
    for _ in range(3):
        got = compiled(a, b, c)
        assert isinstance(got, tuple) and all(torch.equal(g, e) for g, e in zip(got, expected))
    assert flattened[0] == 0
    # grad-tracking, conjugate-free negated and non-contiguous tensors: the values, as eager
    tracked = a.clone().requires_grad_(True)
    negated = torch._neg_view(b)
    assert negated.is_neg()
    strided = torch.randn(3, 2).t()
    for args in [(tracked, b, c), (a, negated, c), (a, b, strided)]:
        with torch.no_grad():
            want = Pairs()(*(x.resolve_neg() for x in args))
        for g, e in zip(compiled(*args), want):
            assert torch.equal(g, e)
    assert flattened[0] == 0
    for error, call in [
        (ArgumentValueError, lambda: compiled(a, b)),  # too few: flattened, refused by structure
        (ArgumentValueError, lambda: compiled((a, b), c, c)),  # a tuple where a tensor was
        (ArgumentTypeError, lambda: compiled(a, b, c.numpy())),
        (ArgumentTypeError, lambda: compiled(a, b, c.double())),
        (ArgumentValueError, lambda: compiled(a, b, torch.randn(2, 4))),
    ]:
        assert all(torch.equal(g, e) for g, e in zip(compiled(a, b, c), expected))
        with pytest.raises(error):
            call()
    assert flattened[0] == 3  # the three calls not of three plain tensors


def test_export_failure_is_a_typed_error():
    class DataDependent(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x > 0]  # the result's size depends on the data

    with pytest.raises(TorchImportError):
        tilecraft.torch.compile(DataDependent().eval(), (torch.randn(5),))


# --- torch.compile(backend="tilecraft") ---------------------------------------------------------

def test_backend_compiles_and_follows_new_shapes():
    torch._dynamo.reset()
    model = small()
    compiled = torch.compile(model, backend="tilecraft")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", TilecraftFallbackWarning)
        for n in (2, 2, 3, 5):
            x = torch.randn(n, 2, 6, 6)
            assert_close(compiled(x), model(x))


def test_backend_with_symbolic_shapes():
    torch._dynamo.reset()
    model = small()
    compiled = torch.compile(model, backend="tilecraft", dynamic=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", TilecraftFallbackWarning)
        for n in (2, 3, 3):
            x = torch.randn(n, 2, 6, 6)
            assert_close(compiled(x), model(x))


def test_backend_compiles_each_graph_around_a_graph_break():
    torch._dynamo.reset()
    graphs = []

    def counting_backend(graph, example_inputs):
        from tilecraft.compiler.dynamo import tilecraft_backend

        graphs.append(graph)
        return tilecraft_backend(graph, example_inputs)

    def two_graphs(x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x) @ x.T
        torch._dynamo.graph_break()
        return y.softmax(-1) + 1

    compiled = torch.compile(two_graphs, backend=counting_backend)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", TilecraftFallbackWarning)
        x = torch.randn(4, 4)
        assert_close(compiled(x), two_graphs(x))
    assert len(graphs) == 2


def test_backend_falls_back_to_eager_with_one_warning():
    torch._dynamo.reset()

    def partly_supported(x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x).exp().abs().sum(-1) + x.relu().sum(-1)  # exp of a complex tensor

    compiled = torch.compile(partly_supported, backend="tilecraft")
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(4, 8)
            assert_close(compiled(x), partly_supported(x))
    fallbacks = [w for w in caught if issubclass(w.category, TilecraftFallbackWarning)]
    assert len(fallbacks) == 1
    assert "aten.exp" in str(fallbacks[0].message)
    assert "test_torch_api.py" in str(fallbacks[0].message)
    assert "1 region(s) of the graph around them are compiled" in str(fallbacks[0].message)


def _counting_tilecraft_backend(graphs: list):
    def backend(graph, example_inputs):
        from tilecraft.compiler.dynamo import tilecraft_backend

        compiled = tilecraft_backend(graph, example_inputs)
        graphs.append(compiled)
        return compiled

    return backend


def test_backend_compiles_module_state_as_constants_and_follows_weight_updates():
    """Parameters and buffers Dynamo lifts to inputs are compiled as constants (folded, not
    passed per call); a weight changed in place afterwards (an optimizer step, copy_) is
    seen: the graph compiles again and matches eager."""
    torch._dynamo.reset()
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU()).eval()
    graphs: list = []
    compiled = torch.compile(model, backend=_counting_tilecraft_backend(graphs))
    x = torch.randn(1, 2, 6, 6)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", TilecraftFallbackWarning)
        assert_close(compiled(x), model(x))
        (graph,) = graphs
        assert len(graph.state) == 6  # conv weight and bias; BN weight, bias, running mean and var
        (module,) = graph.compiled.values()
        assert len(module.signature.arguments) == 1
        model[0].weight.mul_(-2.0)
        model[1].running_mean.add_(0.5)
        assert_close(compiled(x), model(x))
        assert_close(compiled(x), model(x))
    assert len(graphs) == 1


def test_backend_keeps_buffers_the_graph_writes_as_inputs():
    """A BatchNorm in training mode under no_grad updates its running statistics on each
    call: those buffers stay inputs (written back as eager writes them), so the weights
    stay constants and nothing compiles again per call."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4)).train()
    reference = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4)).train()
    reference.load_state_dict(model.state_dict())
    graphs: list = []
    compiled = torch.compile(model, backend=_counting_tilecraft_backend(graphs))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", TilecraftFallbackWarning)
        for _ in range(3):
            x = torch.randn(2, 2, 6, 6)
            assert_close(compiled(x), reference(x))
    assert_close(model[1].running_mean, reference[1].running_mean)
    assert_close(model[1].running_var, reference[1].running_var)
    (graph,) = graphs
    assert len(graph.compiled) == 1 and len(graph.state) == 4  # conv weight, bias; BN weight, bias


def test_backend_leaves_autograd_to_eager():
    torch._dynamo.reset()
    torch.manual_seed(0)
    layer = nn.Linear(4, 3)
    compiled = torch.compile(layer, backend="tilecraft")
    x = torch.randn(2, 4)
    with pytest.warns(TilecraftFallbackWarning, match="gradients"):
        y = compiled(x)
    y.sum().backward()
    assert layer.weight.grad is not None
    assert_close(y.detach(), layer(x).detach())


def test_backend_is_found_by_name_without_importing_tilecraft():
    script = (
        "import sys, torch\n"
        "assert 'tilecraft' not in sys.modules\n"
        "f = torch.compile(lambda x: torch.relu(x) * 2, backend='tilecraft')\n"
        "with torch.no_grad():\n"
        "    x = torch.randn(3, 5)\n"
        "    assert torch.allclose(f(x), torch.relu(x) * 2)\n"
        "assert 'tilecraft.compiler.dynamo' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            cwd="/")
    assert result.returncode == 0, result.stderr[-2000:]


def test_import_tilecraft_does_not_import_torch():
    script = "import sys, tilecraft\nassert 'torch' not in sys.modules\nassert tilecraft.torch.compile\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd="/")
    assert result.returncode == 0, result.stderr[-2000:]
