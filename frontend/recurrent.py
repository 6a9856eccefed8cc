"""The time loop of LSTM, GRU and RNN layers, shared by the ONNX and the PyTorch frontends.

One layer (all directions) is written as ONNX nodes in a :class:`GraphBuilder`; a frontend
imports the graph through the ONNX importer (``NodeContext.subgraph`` for an ONNX node,
``frontend.onnx.importer.import_graph_here`` for ``aten.lstm``), so both routes compile the
same loop. What that loop is, and why:

- the input projection ``X @ W^T + biases`` for every time step is one MatMul before the
  loop (one large GEMM instead of one per step);
- a Scan (``frontend/onnx/ops/control_flow.py``: one ``scf.for`` per direction) carries the
  hidden (and cell) state; each step does ``H @ R^T`` and the gates;
- ``sequence_lens`` masks the steps past a batch entry's length (state kept, output zero),
  forward direction only.

The layout is ONNX's: gates in W's rows in ONNX order (LSTM i o f c, GRU z r h), W
``[dirs, G*H, in]``, R ``[dirs, G*H, H]``, B ``[dirs, 2*G*H]`` (input biases, then recurrent),
states ``[dirs, batch, H]``; a frontend with another order (PyTorch: i f g o, r z n)
reorders its weights into this one (``frontend/torch/ops/recurrent.py``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

from ..errors import OperandError

_COUNTER = itertools.count()

# Gates per op, in the order of W's rows (ONNX: LSTM i o f c, GRU z r h, RNN one).
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
# The inputs of a layer, in the ONNX node's order (the keys of ``names`` in recurrent_layer).
FORMAL_INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
_SIMPLE = {"Sigmoid", "Tanh", "Relu", "Softsign", "Softplus"}
_WITH_ALPHA = {"LeakyRelu", "ThresholdedRelu", "Elu"}
_DEFAULT_ALPHA = {"LeakyRelu": 0.01, "HardSigmoid": 0.2, "Elu": 1.0, "ThresholdedRelu": 1.0}


@dataclass(frozen=True)
class RecurrentSpec:
    """What one recurrent layer computes (the ONNX node's attributes, in ONNX terms).

    ``activations`` lists each direction's activations in turn (LSTM: f g h, GRU: f g,
    RNN: f); empty means the op's defaults. ``alphas``/``betas`` are positional like
    ONNX's ``activation_alpha``/``activation_beta``."""

    op: str
    hidden: int
    direction: str = "forward"
    activations: tuple[str, ...] = ()
    alphas: tuple[float, ...] = ()
    betas: tuple[float, ...] = ()
    clip: float | None = None
    linear_before_reset: bool = False
    batch_major: bool = False
    reversed_directions: tuple[bool, ...] = field(init=False)

    def __post_init__(self) -> None:
        if self.op not in GATES:
            raise OperandError(f"recurrent op {self.op!r} is not one of {', '.join(GATES)}")
        if self.direction not in ("forward", "reverse", "bidirectional"):
            raise OperandError(f"direction {self.direction!r} is invalid")
        reversed_directions = (False, True) if self.direction == "bidirectional" else (self.direction == "reverse",)
        object.__setattr__(self, "reversed_directions", reversed_directions)
        if not self.activations:
            object.__setattr__(self, "activations", tuple(DEFAULT_ACTIVATIONS[self.op] * len(reversed_directions)))


class GraphBuilder:
    """Collects the nodes and constants of a synthesized ONNX graph, with unique names."""

    def __init__(self, prefix: str, dtype: np.dtype) -> None:
        self.prefix, self.dtype = prefix, dtype
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def name(self, hint: str) -> str:
        return f"{self.prefix}{hint}_{next(_COUNTER)}"

    def const(self, value: object, dtype: np.dtype | type | None = None) -> str:
        name = self.name("c")
        array = np.asarray(value, dtype=dtype or self.dtype)
        self.initializers.append(onnx.numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, inputs: list[str], outputs: int = 1, nodes: list | None = None,
           **attributes: object) -> list[str]:
        """A node of ``op_type`` appended to ``nodes`` (a body graph's) or to the outer graph."""
        names = [self.name(op_type.lower()) for _ in range(outputs)]
        (self.nodes if nodes is None else nodes).append(helper.make_node(op_type, inputs, names, **attributes))
        return names

    def one(self, op_type: str, inputs: list[str], nodes: list | None = None, **attributes: object) -> str:
        return self.op(op_type, inputs, 1, nodes, **attributes)[0]

    def ints(self, values: list[int]) -> str:
        """An int64 constant (the axes, starts and shapes ONNX takes as inputs)."""
        return self.const(values, np.int64)

    def graph(self, outputs: list[str]) -> onnx.GraphProto:
        """The graph of everything built so far, returning ``outputs`` (its inputs are bound
        by name when it is imported)."""
        float_type = helper.np_dtype_to_tensor_dtype(self.dtype)
        return helper.make_graph(self.nodes, self.name("graph"), [],
                                 [helper.make_tensor_value_info(n, float_type, None) for n in outputs],
                                 self.initializers)


def _activation(b: GraphBuilder, nodes: list, name: str, alpha: float, beta: float, x: str) -> str:
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
    raise OperandError(f"activation {name!r} is not supported")


def _direction(b: GraphBuilder, spec: RecurrentSpec, d: int, reverse: bool,
               names: dict) -> tuple[str, str, str | None]:
    """One direction: returns (Y [seq, batch, hidden], final H, final C or None)."""
    op, hidden = spec.op, spec.hidden
    gates = GATES[op]
    index = b.ints([d])
    w = b.one("Squeeze", [b.one("Gather", [names["W"], index], axis=0), b.ints([0])])
    r = b.one("Squeeze", [b.one("Gather", [names["R"], index], axis=0), b.ints([0])])
    r_t = b.one("Transpose", [r], perm=[1, 0])  # [hidden, gates * hidden]
    projected = b.one("MatMul", [names["X"], b.one("Transpose", [w], perm=[1, 0])])  # [seq, batch, G*H]
    recurrent_bias = None
    if "B" in names:
        bias = b.one("Squeeze", [b.one("Gather", [names["B"], index], axis=0), b.ints([0])])
        wb = b.one("Slice", [bias, b.ints([0]), b.ints([gates * hidden])])
        rb = b.one("Slice", [bias, b.ints([gates * hidden]), b.ints([2 * gates * hidden])])
        if op == "GRU":
            # The candidate's recurrent bias goes inside the step (with or after the reset gate).
            zr = b.one("Slice", [rb, b.ints([0]), b.ints([2 * hidden])])
            recurrent_bias = b.one("Slice", [rb, b.ints([2 * hidden]), b.ints([3 * hidden])])
            rb = b.one("Concat", [zr, b.const(np.zeros(hidden))], axis=0)
        projected = b.one("Add", [projected, b.one("Add", [wb, rb])])

    def initial(key: str) -> str:
        return b.one("Squeeze", [b.one("Gather", [names[key], index], axis=0), b.ints([0])])

    batch_zeros = b.one("Expand", [b.const(np.zeros(1)), b.one("Concat", [
        b.one("Slice", [b.one("Shape", [names["X"]]), b.ints([1]), b.ints([2])]), b.ints([hidden])], axis=0)])
    h0 = initial("initial_h") if "initial_h" in names else batch_zeros
    c0 = (initial("initial_c") if "initial_c" in names else batch_zeros) if op == "LSTM" else None

    body: list = []
    h_in, x_in, t_in = b.name("h_in"), b.name("x_in"), b.name("t_in")
    c_in = b.name("c_in") if op == "LSTM" else None
    per_direction = len(DEFAULT_ACTIVATIONS[op])

    def act(k: int, x: str) -> str:
        position = d * per_direction + k
        name = spec.activations[position]
        alpha = spec.alphas[position] if position < len(spec.alphas) else _DEFAULT_ALPHA.get(name, 1.0)
        beta = spec.betas[position] if position < len(spec.betas) else (0.5 if name == "HardSigmoid" else 0.0)
        if spec.clip is not None and not (op == "LSTM" and k == 2):  # gate inputs, not h(C) (as onnxruntime)
            x = b.one("Clip", [x, b.const(-float(spec.clip)), b.const(float(spec.clip))], body)
        return _activation(b, body, name, alpha, beta, x)

    def part(x: str, k: int) -> str:
        return b.one("Slice", [x, b.ints([k * hidden]), b.ints([(k + 1) * hidden]), b.ints([1])], body)

    r_all = b.one("MatMul", [h_in, r_t], body)
    if op == "GRU":
        rz = b.one("Add", [x_in, r_all], body)
        z = act(0, part(rz, 0))
        reset = act(0, part(rz, 1))
        rh = part(r_all, 2)
        if spec.linear_before_reset:
            if recurrent_bias is not None:
                rh = b.one("Add", [rh, recurrent_bias], body)
            candidate_in = b.one("Add", [part(x_in, 2), b.one("Mul", [reset, rh], body)], body)
        else:
            r_h = b.one("Slice", [r_t, b.ints([2 * hidden]), b.ints([3 * hidden]), b.ints([1])], body)
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
            p = b.one("Squeeze", [b.one("Gather", [names["P"], index], axis=0), b.ints([0])])
            for k, key in enumerate("iof"):
                peep[key] = b.one("Slice", [p, b.ints([k * hidden]), b.ints([(k + 1) * hidden])])
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
            raise OperandError("sequence_lens with the reverse direction is not supported")
        live = b.one("Unsqueeze", [b.one("Less", [t_in, names["sequence_lens"]], body), b.ints([1])], body)
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
        b.one("Slice", [b.one("Shape", [names["X"]]), b.ints([0]), b.ints([1])]), b.ints([0])]),
        b.const(1, np.int64)])], to=onnx.TensorProto.INT32)
    results = b.op("Scan", [h0, *([c0] if c0 else []), projected, steps], len(states) + 1, body=graph,
                   num_scan_inputs=2, scan_input_directions=[int(reverse), int(reverse)],
                   scan_output_directions=[int(reverse)])
    return results[-1], results[0], (results[1] if op == "LSTM" else None)


def recurrent_layer(b: GraphBuilder, spec: RecurrentSpec, names: dict[str, str]) -> list[str]:
    """Nodes computing one recurrent layer into ``b``: returns the names of its outputs as
    the ONNX node has them, Y ``[seq, dirs, batch, H]``, Y_h and (LSTM) Y_c ``[dirs, batch, H]``
    (batch first when ``spec.batch_major``, ONNX's ``layout=1``).

    ``names`` maps the inputs present (keys of ``FORMAL_INPUTS``) to value names in ``b``'s
    graph. Raises ``OperandError`` for what the loop does not compute (an unknown
    activation, ``sequence_lens`` with the reverse direction)."""
    names = dict(names)
    if spec.batch_major:  # X [batch, seq, in], states [batch, dirs, hidden]
        names["X"] = b.one("Transpose", [names["X"]], perm=[1, 0, 2])
        for key in ("initial_h", "initial_c"):
            if key in names:
                names[key] = b.one("Transpose", [names[key]], perm=[1, 0, 2])
    if "sequence_lens" in names:
        names["sequence_lens"] = b.one("Cast", [names["sequence_lens"]], to=onnx.TensorProto.INT32)
    ys, hs, cs = [], [], []
    for d, reverse in enumerate(spec.reversed_directions):
        y, h, c = _direction(b, spec, d, reverse, names)
        ys.append(b.one("Unsqueeze", [y, b.ints([1])]))
        hs.append(b.one("Unsqueeze", [h, b.ints([0])]))
        if c is not None:
            cs.append(b.one("Unsqueeze", [c, b.ints([0])]))
    y = b.one("Concat", ys, axis=1) if len(ys) > 1 else ys[0]  # [seq, dirs, batch, hidden]
    h = b.one("Concat", hs, axis=0) if len(hs) > 1 else hs[0]  # [dirs, batch, hidden]
    c = (b.one("Concat", cs, axis=0) if len(cs) > 1 else cs[0]) if cs else None
    if spec.batch_major:
        y = b.one("Transpose", [y], perm=[2, 0, 1, 3])
        h = b.one("Transpose", [h], perm=[1, 0, 2])
        c = b.one("Transpose", [c], perm=[1, 0, 2]) if c else None
    return [y, h] + ([c] if c else [])
