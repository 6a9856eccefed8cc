"""LSTM, GRU and RNN as a loop over time (all directions, layouts, initial states), and
ReverseSequence.

Each direction is written as ONNX nodes and imported through the importer itself
(``NodeContext.subgraph``): the input projection ``X @ W^T + biases`` for every time step
is one MatMul before the loop (one large GEMM instead of one per step), and a Scan
(``ops/control_flow.py``: an ``scf.for``) carries the hidden (and cell) state, each step
doing ``H @ R^T`` and the gates. ``sequence_lens`` masks the steps past a batch entry's
length (state kept, output zero), forward direction only.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import helper

from ..node import HandlerError, NodeContext, Output
from ..registry import onnx_op

_COUNTER = itertools.count()

# Gates per op, in the order of W's rows (ONNX: LSTM i o f c, GRU z r h, RNN one).
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
_SIMPLE = {"Sigmoid", "Tanh", "Relu", "Softsign", "Softplus"}
_WITH_ALPHA = {"LeakyRelu", "ThresholdedRelu", "Elu"}


class _Builder:
    """Collects the nodes and constants of the synthesized graph, with unique names."""

    def __init__(self, prefix: str, dtype: np.dtype) -> None:
        self.prefix, self.dtype = prefix, dtype
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def name(self, hint: str) -> str:
        return f"{self.prefix}{hint}_{next(_COUNTER)}"

    def const(self, value, dtype=None) -> str:
        name = self.name("c")
        array = np.asarray(value, dtype=dtype or self.dtype)
        self.initializers.append(onnx.numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, inputs: list[str], outputs: int = 1, nodes=None, **attributes) -> list[str]:
        names = [self.name(op_type.lower()) for _ in range(outputs)]
        (self.nodes if nodes is None else nodes).append(helper.make_node(op_type, inputs, names, **attributes))
        return names

    def one(self, op_type: str, inputs: list[str], nodes=None, **attributes) -> str:
        return self.op(op_type, inputs, 1, nodes, **attributes)[0]


def _activation(b: _Builder, nodes: list, name: str, alpha, beta, x: str) -> str:
    if name in _SIMPLE:
        return b.one(name, [x], nodes)
    if name in _WITH_ALPHA:
        return b.one(name, [x], nodes, alpha=float(alpha))
    if name == "HardSigmoid":
        return b.one(name, [x], nodes, alpha=float(alpha), beta=float(beta))
    if name == "Affine":
        return b.one("Add", [b.one("Mul", [x, b.const(alpha)], nodes), b.const(beta)], nodes)
    if name == "ScaledTanh":
        return b.one("Mul", [b.one("Tanh", [b.one("Mul", [x, b.const(beta)], nodes)], nodes), b.const(alpha)], nodes)
    raise HandlerError(f"activation {name!r} is not supported")


def _direction(ctx: NodeContext, b: _Builder, op: str, d: int, reverse: bool, names: dict,
               activations: list, hidden: int) -> tuple[str, str, str | None]:
    """One direction: returns (Y [seq, batch, hidden], final H, final C or None)."""
    gates = GATES[op]
    index = b.const([d], np.int64)
    w = b.one("Squeeze", [b.one("Gather", [names["W"], index], axis=0), b.const([0], np.int64)])
    r = b.one("Squeeze", [b.one("Gather", [names["R"], index], axis=0), b.const([0], np.int64)])
    r_t = b.one("Transpose", [r], perm=[1, 0])  # [hidden, gates * hidden]
    projected = b.one("MatMul", [names["X"], b.one("Transpose", [w], perm=[1, 0])])  # [seq, batch, G*H]
    linear_before_reset = op == "GRU" and int(ctx.attr("linear_before_reset", 0))
    recurrent_bias = None
    if "B" in names:
        bias = b.one("Squeeze", [b.one("Gather", [names["B"], index], axis=0), b.const([0], np.int64)])
        wb = b.one("Slice", [bias, b.const([0], np.int64), b.const([gates * hidden], np.int64)])
        rb = b.one("Slice", [bias, b.const([gates * hidden], np.int64), b.const([2 * gates * hidden], np.int64)])
        if op == "GRU":
            # The candidate's recurrent bias goes inside the step (with or after the reset gate).
            zr = b.one("Slice", [rb, b.const([0], np.int64), b.const([2 * hidden], np.int64)])
            rh = b.one("Slice", [rb, b.const([2 * hidden], np.int64), b.const([3 * hidden], np.int64)])
            recurrent_bias = rh
            rb = b.one("Concat", [zr, b.const(np.zeros(hidden))], axis=0)
        projected = b.one("Add", [projected, b.one("Add", [wb, rb])])

    def initial(key: str) -> str:
        return b.one("Squeeze", [b.one("Gather", [names[key], index], axis=0), b.const([0], np.int64)])

    batch_zeros = b.one("Expand", [b.const(np.zeros(1)), b.one("Concat", [
        b.one("Slice", [b.one("Shape", [names["X"]]), b.const([1], np.int64), b.const([2], np.int64)]),
        b.const([hidden], np.int64)], axis=0)])
    h0 = initial("initial_h") if "initial_h" in names else batch_zeros
    c0 = (initial("initial_c") if "initial_c" in names else batch_zeros) if op == "LSTM" else None

    body: list = []
    h_in, x_in, t_in = b.name("h_in"), b.name("x_in"), b.name("t_in")
    c_in = b.name("c_in") if op == "LSTM" else None
    clip = ctx.attr("clip", None)
    alphas, betas = ctx.attr("activation_alpha", []), ctx.attr("activation_beta", [])
    per_direction = len(DEFAULT_ACTIVATIONS[op])

    def act(k: int, x: str) -> str:
        position = d * per_direction + k
        name = activations[position]
        alpha = alphas[position] if position < len(alphas) else {"LeakyRelu": 0.01, "HardSigmoid": 0.2, "Elu": 1.0,
                                                                 "ThresholdedRelu": 1.0}.get(name, 1.0)
        beta = betas[position] if position < len(betas) else (0.5 if name == "HardSigmoid" else 0.0)
        if clip is not None and not (op == "LSTM" and k == 2):  # gate inputs, not h(C) (as onnxruntime)
            x = b.one("Clip", [x, b.const(-float(clip)), b.const(float(clip))], body)
        return _activation(b, body, name, alpha, beta, x)

    def part(x: str, k: int) -> str:
        return b.one("Slice", [x, b.const([k * hidden], np.int64), b.const([(k + 1) * hidden], np.int64),
                               b.const([1], np.int64)], body)

    r_all = b.one("MatMul", [h_in, r_t], body)
    if op == "GRU":
        rz = b.one("Add", [x_in, r_all], body)
        z = act(0, part(rz, 0))
        reset = act(0, part(rz, 1))
        rh = part(r_all, 2)
        if linear_before_reset:
            if recurrent_bias is not None:
                rh = b.one("Add", [rh, recurrent_bias], body)
            candidate_in = b.one("Add", [part(x_in, 2), b.one("Mul", [reset, rh], body)], body)
        else:
            r_h = b.one("Slice", [r_t, b.const([2 * hidden], np.int64), b.const([3 * hidden], np.int64),
                                  b.const([1], np.int64)], body)
            reset_h = b.one("MatMul", [b.one("Mul", [reset, h_in], body), r_h], body)
            if recurrent_bias is not None:
                reset_h = b.one("Add", [reset_h, recurrent_bias], body)
            candidate_in = b.one("Add", [part(x_in, 2), reset_h], body)
        candidate = act(1, candidate_in)
        one_minus_z = b.one("Sub", [b.const(1), z], body)
        h_new = b.one("Add", [b.one("Mul", [one_minus_z, candidate], body), b.one("Mul", [z, h_in], body)], body)
        c_new = None
    elif op == "LSTM":
        g = b.one("Add", [x_in, r_all], body)
        peep = {}
        if "P" in names:
            p = b.one("Squeeze", [b.one("Gather", [names["P"], index], axis=0), b.const([0], np.int64)])
            for k, key in enumerate("iof"):
                peep[key] = b.one("Slice", [p, b.const([k * hidden], np.int64), b.const([(k + 1) * hidden], np.int64)])
        gi, go, gf, gc = (part(g, k) for k in range(4))
        if peep:
            gi = b.one("Add", [gi, b.one("Mul", [peep["i"], c_in], body)], body)
            gf = b.one("Add", [gf, b.one("Mul", [peep["f"], c_in], body)], body)
        i, f, c = act(0, gi), act(0, gf), act(1, gc)
        c_new = b.one("Add", [b.one("Mul", [f, c_in], body), b.one("Mul", [i, c], body)], body)
        if peep:
            go = b.one("Add", [go, b.one("Mul", [peep["o"], c_new], body)], body)
        o = act(0, go)
        h_new = b.one("Mul", [o, act(2, c_new)], body)
    else:
        h_new = act(0, b.one("Add", [x_in, r_all], body))
        c_new = None

    y_t = h_new
    if "sequence_lens" in names:
        if reverse:
            raise HandlerError("sequence_lens with the reverse direction is not supported")
        live = b.one("Unsqueeze", [b.one("Less", [t_in, names["sequence_lens"]], body), b.const([1], np.int64)], body)
        y_t = b.one("Where", [live, h_new, b.const(0)], body)
        h_new = b.one("Where", [live, h_new, h_in], body)
        if c_new is not None:
            c_new = b.one("Where", [live, c_new, c_in], body)
    h_out, y_out = b.one("Identity", [h_new], body), b.one("Identity", [y_t], body)
    c_out = b.one("Identity", [c_new], body) if c_new is not None else None

    states = [h_in] + ([c_in] if c_in else [])
    state_outs = [h_out] + ([c_out] if c_out else [])
    float_type = helper.np_dtype_to_tensor_dtype(b.dtype)
    inputs = [helper.make_tensor_value_info(n, float_type, None) for n in states]
    inputs += [helper.make_tensor_value_info(x_in, float_type, None),
               helper.make_tensor_value_info(t_in, onnx.TensorProto.INT32, None)]
    outputs = [helper.make_tensor_value_info(n, float_type, None) for n in [*state_outs, y_out]]
    graph = helper.make_graph(body, b.name("step"), inputs, outputs)
    steps = b.one("Cast", [b.one("Range", [b.const(0, np.int64), b.one("Squeeze", [
        b.one("Slice", [b.one("Shape", [names["X"]]), b.const([0], np.int64), b.const([1], np.int64)]),
        b.const([0], np.int64)]), b.const(1, np.int64)])], to=onnx.TensorProto.INT32)
    results = b.op("Scan", [h0, *([c0] if c0 else []), projected, steps], len(states) + 1, body=graph,
                   num_scan_inputs=2, scan_input_directions=[int(reverse), int(reverse)],
                   scan_output_directions=[int(reverse)])
    return results[-1], results[0], (results[1] if op == "LSTM" else None)


def _recurrent(ctx: NodeContext, op: str) -> list[Output]:
    hidden = int(ctx.attr("hidden_size"))
    direction = ctx.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise HandlerError(f"direction {direction!r} is invalid")
    if op == "LSTM" and int(ctx.attr("input_forget", 0)):
        raise HandlerError("input_forget=1 is not supported")
    if ctx.opset < 13:  # the nodes written here take axes/splits as inputs (opset 13 forms)
        raise HandlerError(f"{op} is supported from opset 13 (the model imports opset {ctx.opset})")
    layout = int(ctx.attr("layout", 0))
    dtype = np.dtype(ctx.dtype(0))
    if dtype.kind != "f":
        raise HandlerError(f"{op} on {dtype} is not supported (float types only)")
    directions = [False, True] if direction == "bidirectional" else [direction == "reverse"]
    activations = list(ctx.attr("activations", [])) or DEFAULT_ACTIVATIONS[op] * len(directions)
    b = _Builder(f"{ctx.node.output[0] or ctx.node.name}__{op.lower()}_", dtype)
    formal = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    names, bindings = {}, {}
    for position, key in enumerate(formal):
        if ctx.has_input(position):
            names[key] = b.name(key)
            bindings[names[key]] = ctx.inputs[position]
    if layout:  # batch-major: X [batch, seq, in], states [batch, dirs, hidden]
        names["X"] = b.one("Transpose", [names["X"]], perm=[1, 0, 2])
        for key in ("initial_h", "initial_c"):
            if key in names:
                names[key] = b.one("Transpose", [names[key]], perm=[1, 0, 2])
    if "sequence_lens" in names:
        names["sequence_lens"] = b.one("Cast", [names["sequence_lens"]], to=onnx.TensorProto.INT32)
    ys, hs, cs = [], [], []
    for d, reverse in enumerate(directions):
        y, h, c = _direction(ctx, b, op, d, reverse, names, activations, hidden)
        ys.append(b.one("Unsqueeze", [y, b.const([1], np.int64)]))
        hs.append(b.one("Unsqueeze", [h, b.const([0], np.int64)]))
        if c is not None:
            cs.append(b.one("Unsqueeze", [c, b.const([0], np.int64)]))
    y = b.one("Concat", ys, axis=1) if len(ys) > 1 else ys[0]  # [seq, dirs, batch, hidden]
    h = b.one("Concat", hs, axis=0) if len(hs) > 1 else hs[0]  # [dirs, batch, hidden]
    c = (b.one("Concat", cs, axis=0) if len(cs) > 1 else cs[0]) if cs else None
    if layout:
        y = b.one("Transpose", [y], perm=[2, 0, 1, 3])
        h = b.one("Transpose", [h], perm=[1, 0, 2])
        c = b.one("Transpose", [c], perm=[1, 0, 2]) if c else None
    outputs = [y, h] + ([c] if c else [])
    float_type = helper.np_dtype_to_tensor_dtype(dtype)
    graph = helper.make_graph(
        b.nodes, b.name("graph"), [], [helper.make_tensor_value_info(n, float_type, None) for n in outputs],
        b.initializers,
    )
    return ctx.subgraph(graph, bindings)


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
    b = _Builder(f"{ctx.node.output[0] or ctx.node.name}__reverse_", x_dtype)
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
