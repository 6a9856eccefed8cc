"""nn.LSTM, nn.GRU and nn.RNN through the torch route (frontend/torch/ops/recurrent.py: the
ATen ops imported whole, as the ONNX route's time loop) against eager PyTorch: 1-2 layers,
bidirectional, batch_first or not, with and without initial states and biases, dropout in
eval mode; projections refused by name."""

from __future__ import annotations


import numpy as np
import pytest
import torch

import tilecraft
from tilecraft.errors import TorchImportError
from tilecraft.frontend.torch.export import export

from torch_testing import Lambda, check

# torch.export warns that nn.RNNBase assigns its flat weights while tracing (its own code)
pytestmark = pytest.mark.filterwarnings("ignore:The tensor attributes")

LAYERS = {
    "lstm": lambda **kw: torch.nn.LSTM(5, 6, **kw),
    "gru": lambda **kw: torch.nn.GRU(5, 6, **kw),
    "rnn_tanh": lambda **kw: torch.nn.RNN(5, 6, **kw),
    "rnn_relu": lambda **kw: torch.nn.RNN(5, 6, nonlinearity="relu", **kw),
}


class WithStates(torch.nn.Module):
    """The layer called with initial states (h0, and c0 for an LSTM), all its outputs returned."""

    def __init__(self, layer: torch.nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor) -> tuple:
        if isinstance(self.layer, torch.nn.LSTM):
            y, (h, c) = self.layer(x, (h0, c0))
            return y, h, c
        y, h = self.layer(x, h0)
        return y, h


def _inputs(layers: int, directions: int, batch_first: bool, seq: int = 7, batch: int = 3) -> tuple:
    torch.manual_seed(1)
    x = torch.randn(batch, seq, 5) if batch_first else torch.randn(seq, batch, 5)
    states = torch.randn(layers * directions, batch, 6), torch.randn(layers * directions, batch, 6)
    return x, *states


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_one_layer_no_states_matches_eager(kind):
    torch.manual_seed(0)
    x, _, _ = _inputs(1, 1, batch_first=False)
    check(LAYERS[kind](), x)


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_two_layers_bidirectional_batch_first_with_states_matches_eager(kind):
    torch.manual_seed(0)
    layer = LAYERS[kind](num_layers=2, bidirectional=True, batch_first=True)
    check(WithStates(layer), *_inputs(2, 2, batch_first=True))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_no_biases_and_dropout_in_eval_mode(kind):
    """Dropout between layers is off in eval mode: the result is eager's."""
    torch.manual_seed(0)
    x, _, _ = _inputs(2, 1, batch_first=False)
    check(LAYERS[kind](num_layers=2, bias=False, dropout=0.4), x)


def test_unbatched_input():
    torch.manual_seed(0)
    check(torch.nn.LSTM(5, 6, bidirectional=True), torch.randn(7, 5))


def test_the_ops_are_kept_whole():
    """No cell per step: the exported program calls aten.lstm once for two layers."""
    torch.manual_seed(0)
    program = export(torch.nn.LSTM(5, 6, num_layers=2).eval(), (torch.randn(30, 2, 5),))
    targets = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert targets.count("aten.lstm.input") == 1
    assert not any("sigmoid" in t or "mm" in t for t in targets)


def test_projection_is_refused_by_name():
    torch.manual_seed(0)
    module = torch.nn.LSTM(5, 6, proj_size=3).eval()
    with pytest.raises(TorchImportError, match="proj_size"):
        tilecraft.torch.compile(module, (torch.randn(7, 2, 5),))


def test_weights_computed_at_run_time():
    """Weights that are inputs, not parameters: the gate reordering runs in the compiled code."""
    torch.manual_seed(0)
    layer = torch.nn.GRU(5, 6)
    weights = [p.detach().clone() for p in layer.parameters()]

    def run(x, h0, *params):
        return torch.gru(x, h0, list(params), True, 1, 0.0, False, False, False)

    x, h0, _ = _inputs(1, 1, batch_first=False)
    check(run, x, h0[:1], *weights)


def test_dropout_in_training_mode_is_refused():
    """aten.lstm with train=True draws dropout masks between layers: refused by name, not
    computed without them."""
    torch.manual_seed(0)
    layer = torch.nn.LSTM(5, 6, num_layers=2)
    weights = [p.detach() for p in layer.parameters()]
    x, h0, c0 = _inputs(2, 1, batch_first=False)

    def run(x, h0, c0):
        return torch.lstm(x, (h0, c0), weights, True, 2, 0.5, True, False, False)[0]

    with pytest.raises(TorchImportError, match="dropout"):
        tilecraft.torch.compile(Lambda(run).eval(), (x, h0, c0))


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_onnx_export_of_the_same_layers_matches_onnxruntime(kind):
    """The ONNX route on the same variants: torch.onnx's LSTM/GRU/RNN nodes (two layers,
    both directions, batch first, initial states), compiled against onnxruntime."""
    onnx = pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    import io

    torch.manual_seed(0)
    module = WithStates(LAYERS[kind](num_layers=2, bidirectional=True, batch_first=True)).eval()
    inputs = _inputs(2, 2, batch_first=True)
    buffer = io.BytesIO()
    torch.onnx.export(module, inputs, buffer, dynamo=False, opset_version=17,
                      input_names=["x", "h0", "c0"])
    proto = onnx.load_from_string(buffer.getvalue())
    feeds = {i.name: t.numpy() for i, t in zip(proto.graph.input, inputs)}
    session = onnxruntime.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    got = tilecraft.compile(proto)(**feeds)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_dynamic_batch_is_refused_by_name():
    """The time loop stacks per-step outputs of static extents: a dynamic batch is a typed
    error naming the op (the decomposed cells crashed the MLIR bindings before)."""
    from torch.export import Dim

    torch.manual_seed(0)
    module = torch.nn.LSTM(5, 6, batch_first=True).eval()
    with pytest.raises(TorchImportError, match="LSTM on an input of dynamic shape"):
        tilecraft.torch.compile(module, (torch.randn(2, 7, 5),), dynamic_shapes=({0: Dim("batch", min=2, max=8)},))


def test_a_saved_program_compiles_through_the_same_decomposition(tmp_path):
    """A .pt2 file (frontend/loader.py) is decomposed as tilecraft.torch.compile does: the LSTM
    stays one op (its IR names the loop's Scan), and the result is eager's."""
    from tilecraft.frontend.loader import exported_program_bytecode

    torch.manual_seed(0)
    module = torch.nn.LSTM(5, 6, num_layers=2).eval()
    x, _, _ = _inputs(2, 1, batch_first=False)
    path = tmp_path / "lstm.pt2"
    torch.export.save(torch.export.export(module, (x,)), str(path))
    assert b"Scan" in exported_program_bytecode(torch.export.load(str(path)))
    got = tilecraft.compile(str(path))(x.numpy())
    with torch.no_grad():
        want = module(x)
    for g, w in zip(got, torch.utils._pytree.tree_leaves(want)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)
