"""ONNX's LSTM, GRU and RNN (a thin adapter: the time loop is ``frontend/recurrent.py``'s,
shared with the PyTorch frontend), and ReverseSequence."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ...recurrent import FORMAL_INPUTS, GraphBuilder, RecurrentSpec, recurrent_layer
from ..node import HandlerError, NodeContext, Output
from ..registry import onnx_op


def _recurrent(ctx: NodeContext, op: str) -> list[Output]:
    """The node's attributes as a ``RecurrentSpec``, its inputs bound by name, the layer's
    nodes imported in place of it."""
    if op == "LSTM" and int(ctx.attr("input_forget", 0)):
        raise HandlerError("input_forget=1 is not supported")
    if ctx.opset < 13:  # the nodes written here take axes/splits as inputs (opset 13 forms)
        raise HandlerError(f"{op} is supported from opset 13 (the model imports opset {ctx.opset})")
    dtype = np.dtype(ctx.dtype(0))
    if dtype.kind != "f":
        raise HandlerError(f"{op} on {dtype} is not supported (float types only)")
    clip = ctx.attr("clip", None)
    spec = RecurrentSpec(
        op=op, hidden=int(ctx.attr("hidden_size")), direction=ctx.attr("direction", "forward"),
        activations=tuple(ctx.attr("activations", [])),
        alphas=tuple(ctx.attr("activation_alpha", [])), betas=tuple(ctx.attr("activation_beta", [])),
        clip=None if clip is None else float(clip),
        linear_before_reset=op == "GRU" and bool(int(ctx.attr("linear_before_reset", 0))),
        batch_major=bool(int(ctx.attr("layout", 0))),
    )
    b = GraphBuilder(f"{ctx.node.output[0] or ctx.node.name}__{op.lower()}_", dtype)
    names, bindings = {}, {}
    for position, key in enumerate(FORMAL_INPUTS):
        if ctx.has_input(position):
            names[key] = b.name(key)
            bindings[names[key]] = ctx.inputs[position]
    outputs = recurrent_layer(b, spec, names)
    return ctx.subgraph(b.graph(outputs), bindings)


@onnx_op("LSTM", since=7)
def lstm(ctx: NodeContext) -> list[Output]:
    return _recurrent(ctx, "LSTM")


@onnx_op("GRU", since=7)
def gru(ctx: NodeContext) -> list[Output]:
    return _recurrent(ctx, "GRU")


@onnx_op("RNN", since=7)
def rnn(ctx: NodeContext) -> list[Output]:
    return _recurrent(ctx, "RNN")


@onnx_op("ReverseSequence", since=10)
def reverse_sequence(ctx: NodeContext) -> list[Output]:
    """Reverse the first ``sequence_lens[b]`` steps of each batch entry (the padded batches
    bidirectional RNN models feed backwards): a GatherElements along the time axis with
    indices ``len - 1 - t`` below the length, ``t`` past it."""
    x_dtype = np.dtype(ctx.dtype(0))
    b = GraphBuilder(f"{ctx.node.output[0] or ctx.node.name}__reverse_", x_dtype)
    rank = len(ctx.input_infos[0].shape) if ctx.input_infos[0] is not None and ctx.input_infos[0].shape is not None \
        else None
    if rank is None:
        raise HandlerError("ReverseSequence needs the input's rank")
    time_axis, batch_axis = int(ctx.attr("time_axis", 0)), int(ctx.attr("batch_axis", 1))
    x, lens = b.name("x"), b.name("lens")
    shape = b.one("Shape", [x])
    steps = b.one("Range", [b.const(0, np.int64), b.one("Squeeze", [
        b.one("Slice", [shape, b.const([time_axis], np.int64), b.const([time_axis + 1], np.int64)]),
        b.const([0], np.int64)]), b.const(1, np.int64)])
    grid = [1] * rank
    time_shape, batch_shape = list(grid), list(grid)
    time_shape[time_axis], batch_shape[batch_axis] = -1, -1
    t = b.one("Reshape", [steps, b.const(time_shape, np.int64)])
    n = b.one("Reshape", [b.one("Cast", [lens], to=onnx.TensorProto.INT64), b.const(batch_shape, np.int64)])
    reversed_index = b.one("Sub", [b.one("Sub", [n, b.const(1, np.int64)]), t])
    index = b.one("Where", [b.one("Less", [t, n]), reversed_index, t])
    out = b.one("GatherElements", [x, b.one("Expand", [index, shape])], axis=time_axis)
    graph = helper.make_graph(b.nodes, b.name("graph"), [], [helper.make_tensor_value_info(out, 0, None)],
                              b.initializers)
    return ctx.subgraph(graph, {x: ctx.inputs[0], lens: ctx.inputs[1]})
