"""``aten.lstm``, ``aten.gru``, ``aten.rnn_tanh`` and ``aten.rnn_relu`` imported whole: every
layer is the time loop ONNX's LSTM/GRU/RNN import to (``frontend/recurrent.py``), one input
GEMM over all steps and one ``scf.for`` over time per direction.

Why whole (export.py keeps these ops out of the decomposition table): torch's decomposition
unrolls ``nn.LSTM`` into one cell of small kernels per time step and layer: a long compile
and slower code than eager (docs/performance.md, "Recurrent layers through the torch route").

PyTorch's conventions become ONNX's here, as nodes the ONNX importer folds for constant
weights: gate rows reordered (LSTM i f g o -> i o f c, GRU r z n -> z r h), each direction's
weights stacked, ``b_ih`` and ``b_hh`` concatenated, GRU with ``linear_before_reset`` (what
PyTorch computes); layers are chained (one layer's ``[seq, dirs, batch, H]`` output is the
next one's ``[seq, batch, dirs*H]`` input) and the final states concatenated by layer.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ....errors import OperandError
from ....ir import core
from ...onnx.importer import import_graph_here
from ...recurrent import GATES, GraphBuilder, RecurrentSpec, recurrent_layer
from ..importer import OpContext
from . import table

# The ONNX opset the synthesized nodes are written for (axes and splits as inputs: >= 13).
_OPSET = 17
# ONNX's gate k is PyTorch's gate _TORCH_GATE[op][k] (rows of W, R and both biases).
_TORCH_GATE = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2), "RNN": (0,)}


def _shape(value: Any) -> list[int | None]:
    """An import-time array's or an SSA tensor's shape (``None`` for a dynamic extent)."""
    return list(value.shape) if isinstance(value, np.ndarray) else core.static_shape(value)


def _reordered(b: GraphBuilder, op: str, hidden: int, name: str) -> str:
    """``name``'s rows (gates stacked along axis 0) in ONNX's gate order."""
    if op == "RNN":
        return name
    parts = [b.one("Slice", [name, b.ints([k * hidden]), b.ints([(k + 1) * hidden])]) for k in _TORCH_GATE[op]]
    return b.one("Concat", parts, axis=0)


def _stacked(b: GraphBuilder, names: list[str]) -> str:
    """``[dirs, ...]`` from one name per direction."""
    unsqueezed = [b.one("Unsqueeze", [n, b.ints([0])]) for n in names]
    return b.one("Concat", unsqueezed, axis=0) if len(unsqueezed) > 1 else unsqueezed[0]


def _recurrent(ctx: OpContext, op: str, activation: str | None, x: Any, states: list[Any], params: Sequence[Any],
               has_biases: bool, num_layers: int, dropout: float, train: bool, bidirectional: bool,
               batch_first: bool) -> tuple:
    dtype = ctx.result_dtype(0)
    if dtype.kind != "f":
        raise OperandError(f"{op} on {dtype} is not supported (float types only)")
    if len(_shape(x)) != 3:
        raise OperandError(f"{op} takes a 3-D input (batched), got rank {len(_shape(x))}")
    if None in _shape(x):
        raise OperandError(f"{op} on an input of dynamic shape {_shape(x)} is not supported: the time "
                           "loop stacks per-step outputs of static extents")
    if train and dropout > 0:
        raise OperandError(f"{op} with dropout={dropout} in training mode is not supported (inference only)")
    directions = 2 if bidirectional else 1
    per_direction = 4 if has_biases else 2
    if len(params) != num_layers * directions * per_direction:
        raise OperandError(
            f"{op} with {len(params)} weights for {num_layers} layer(s) x {directions} direction(s): "
            "projections (nn.LSTM proj_size > 0) are not supported")
    hidden = _shape(params[0])[0] // GATES[op]  # w_ih: [gates * hidden, in]
    b = GraphBuilder(f"{ctx.node.name}__{op.lower()}_", dtype)
    bindings: dict[str, Any] = {}

    def bound(hint: str, value: Any) -> str:
        name = b.name(hint)
        bindings[name] = ctx.tensor(value, dtype) if not isinstance(value, np.ndarray) else value.astype(dtype, copy=False)
        return name

    layer_input = bound("input", x)
    if batch_first:
        layer_input = b.one("Transpose", [layer_input], perm=[1, 0, 2])
    state_names = [bound(f"state{k}", s) for k, s in enumerate(states)]
    spec = RecurrentSpec(op=op, hidden=hidden, direction="bidirectional" if bidirectional else "forward",
                         activations=(activation,) * directions if activation else (),
                         linear_before_reset=op == "GRU")
    finals: list[list[str]] = [[] for _ in states]
    weights = iter(params)
    for layer in range(num_layers):
        w, r, bias = [], [], []
        for _ in range(directions):
            w_ih, w_hh = bound("w_ih", next(weights)), bound("w_hh", next(weights))
            w.append(_reordered(b, op, hidden, w_ih))
            r.append(_reordered(b, op, hidden, w_hh))
            if has_biases:
                b_ih, b_hh = bound("b_ih", next(weights)), bound("b_hh", next(weights))
                bias.append(b.one("Concat", [_reordered(b, op, hidden, b_ih), _reordered(b, op, hidden, b_hh)],
                                  axis=0))
        names = {"X": layer_input, "W": _stacked(b, w), "R": _stacked(b, r)}
        if bias:
            names["B"] = _stacked(b, bias)
        for key, state in zip(("initial_h", "initial_c"), state_names):
            names[key] = b.one("Slice", [state, b.ints([layer * directions]), b.ints([(layer + 1) * directions])])
        y, *layer_states = recurrent_layer(b, spec, names)
        for final, state in zip(finals, layer_states):
            final.append(state)
        # [seq, dirs, batch, H] -> [seq, batch, dirs * H], the next layer's input
        layer_input = b.one("Reshape", [b.one("Transpose", [y], perm=[0, 2, 1, 3]), b.ints([0, 0, -1])])
    output = b.one("Transpose", [layer_input], perm=[1, 0, 2]) if batch_first else layer_input
    outputs = [output] + [b.one("Concat", f, axis=0) if len(f) > 1 else f[0] for f in finals]
    return tuple(import_graph_here(b.graph(outputs), bindings, opset=_OPSET, label=ctx.node.name))


@table.aten("lstm.input")
def lstm(ctx: OpContext, x: Any, hx: Sequence[Any], params: Sequence[Any], has_biases: bool, num_layers: int,
         dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple:
    h0, c0 = hx
    if _shape(h0)[-1] != _shape(c0)[-1]:
        raise OperandError(f"nn.LSTM with proj_size={_shape(h0)[-1]} (hidden size {_shape(c0)[-1]}) "
                           "is not supported")
    return _recurrent(ctx, "LSTM", None, x, [h0, c0], params, has_biases, num_layers, dropout, train,
                      bidirectional, batch_first)


@table.aten("gru.input")
def gru(ctx: OpContext, x: Any, hx: Any, params: Sequence[Any], has_biases: bool, num_layers: int,
        dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple:
    return _recurrent(ctx, "GRU", None, x, [hx], params, has_biases, num_layers, dropout, train,
                      bidirectional, batch_first)


@table.aten("rnn_tanh.input")
def rnn_tanh(ctx: OpContext, x: Any, hx: Any, params: Sequence[Any], has_biases: bool, num_layers: int,
             dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple:
    return _recurrent(ctx, "RNN", "Tanh", x, [hx], params, has_biases, num_layers, dropout, train,
                      bidirectional, batch_first)


@table.aten("rnn_relu.input")
def rnn_relu(ctx: OpContext, x: Any, hx: Any, params: Sequence[Any], has_biases: bool, num_layers: int,
             dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple:
    return _recurrent(ctx, "RNN", "Relu", x, [hx], params, has_biases, num_layers, dropout, train,
                      bidirectional, batch_first)


