"""ONNX's ``Gradient`` (domain ``ai.onnx.preview.training``) as ordinary ONNX nodes.

``Gradient(xs=[...], y=...)`` outputs dY/dX for each named X: the derivative of the sum of
``y``'s elements (the seed is a tensor of ones shaped like ``y``). tilecraft imports only
forward computations, so this module rewrites each Gradient node, before import, into the
reverse-mode derivative of the nodes between ``xs`` and ``y``, written as ONNX nodes (the way
ops/recurrent.py writes LSTM); the importer then compiles them like any other nodes.

Why at the graph level and not as a handler: the derivative needs the forward nodes that
produce ``y``, which a node handler does not see. The derivative rules cover elementwise
arithmetic (Add, Sub, Mul, Div, Neg, Identity); a path through any other op is refused with
the op and node named. Broadcast operands get their gradient summed over the broadcast axes,
which needs their static shapes.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import helper

from ...errors import ModelImportError

DOMAIN = "ai.onnx.preview.training"
DIFFERENTIABLE = ("Add", "Sub", "Mul", "Div", "Neg", "Identity")


def expand_gradients(proto: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """``proto`` with every top-level Gradient node replaced by its derivative nodes (the
    model itself when it has none)."""
    if not any(n.op_type == "Gradient" and n.domain == DOMAIN for n in proto.graph.node):
        return proto
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    try:
        shapes = _static_shapes(onnx.shape_inference.infer_shapes(proto, strict_mode=False))
    except (onnx.shape_inference.InferenceError, UnicodeDecodeError):
        shapes = _static_shapes(proto)
    while True:
        nodes = list(proto.graph.node)
        position = next((i for i, n in enumerate(nodes) if n.op_type == "Gradient" and n.domain == DOMAIN), None)
        if position is None:
            return proto
        _Expansion(proto.graph, position, shapes, opset).apply()


def _static_shapes(proto: onnx.ModelProto) -> dict[str, tuple[tuple[int, ...] | None, int]]:
    """Value name -> (static shape or None, element type code)."""
    graph = proto.graph
    found: dict[str, tuple[tuple[int, ...] | None, int]] = {}
    for t in graph.initializer:
        found[t.name] = (tuple(t.dims), t.data_type)
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if not value.type.HasField("tensor_type"):
            continue
        tensor_type = value.type.tensor_type
        shape = None
        if tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in tensor_type.shape.dim):
            shape = tuple(d.dim_value for d in tensor_type.shape.dim)
        found.setdefault(value.name, (shape, tensor_type.elem_type))
    return found


class _Expansion:
    """The derivative nodes of one Gradient node, spliced into the graph in its place."""

    _counter = itertools.count()

    def __init__(self, graph: onnx.GraphProto, position: int, shapes: dict, opset: int) -> None:
        self.graph, self.position, self.shapes, self.opset = graph, position, shapes, opset
        self.node = graph.node[position]
        self.label = self.node.name or f"Gradient_{position}"
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def fail(self, why: str) -> ModelImportError:
        return ModelImportError(f"node {self.label!r} (Gradient): {why}",
                                problems=[(self.label, "Gradient", why)])

    def name(self, hint: str) -> str:
        return f"{self.label}__grad_{hint}_{next(self._counter)}"

    def emit(self, op_type: str, inputs: list[str], **attributes) -> str:
        output = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [output], **attributes))
        return output

    def const(self, array: np.ndarray) -> str:
        name = self.name("c")
        self.initializers.append(onnx.numpy_helper.from_array(array, name))
        return name

    def filled(self, like: str, value: float) -> str:
        """A tensor of ``value`` shaped like ``like``, of its element type."""
        code = self.shapes.get(like, (None, onnx.TensorProto.FLOAT))[1] or onnx.TensorProto.FLOAT
        fill = helper.make_tensor(self.name("fill"), code, [1], [value])
        return self.emit("ConstantOfShape", [self.emit("Shape", [like])], value=fill)

    def apply(self) -> None:
        attributes = {a.name: helper.get_attribute_value(a) for a in self.node.attribute}
        xs = [x.decode() if isinstance(x, bytes) else x for x in attributes.get("xs", [])]
        y = attributes.get("y")
        y = y.decode() if isinstance(y, bytes) else y
        if not xs or not y or len(xs) != len(self.node.output):
            raise self.fail("needs the attributes xs (one per output) and y")
        forward = self._forward_nodes(set(xs), y)
        grads: dict[str, list[str]] = {y: [self.filled(y, 1.0)]}
        for node in reversed(forward):
            upstream = [self._total(o, grads) for o in node.output]
            if upstream[0] is None:
                continue
            for name, grad in self._rule(node, upstream[0]):
                if name not in self.depends:
                    continue  # a constant or an input outside xs: its gradient is never read
                grads.setdefault(name, []).append(self._unbroadcast(grad, name, node.output[0]))
        for x, output in zip(xs, self.node.output):
            total = self._total(x, grads)
            self.nodes.append(helper.make_node("Identity", [total if total else self.filled(x, 0.0)], [output]))
        self._splice(forward)

    def _forward_nodes(self, xs: set[str], y: str) -> list[onnx.NodeProto]:
        """The nodes on a path from ``xs`` to ``y``, in graph order; any of them without a
        derivative rule is refused by name."""
        produced = {o: n for n in self.graph.node for o in n.output}
        if y not in produced and y not in xs:
            raise self.fail(f"y {y!r} is not computed by the graph")
        depends = self.depends = set(xs)
        for node in self.graph.node:
            if node is not self.node and depends.intersection(node.input):
                depends.update(node.output)
        needed, stack = set(), [y]
        while stack:
            name = stack.pop()
            node = produced.get(name)
            if node is None or id(node) in needed or name not in depends or name in xs:
                continue
            needed.add(id(node))
            stack.extend(node.input)
        path = [n for n in self.graph.node if id(n) in needed]
        for node in path:
            if node.op_type not in DIFFERENTIABLE or node.domain not in ("", "ai.onnx"):
                raise self.fail(
                    f"no derivative for {node.op_type} (node {node.name or node.output[0]!r}) on the path "
                    f"from xs to y; supported: {', '.join(DIFFERENTIABLE)}"
                )
        return path

    def _total(self, name: str, grads: dict[str, list[str]]) -> str | None:
        parts = grads.get(name)
        if not parts:
            return None
        if len(parts) > 1:
            grads[name] = [self.emit("Sum", parts)]
        return grads[name][0]

    def _rule(self, node: onnx.NodeProto, g: str) -> list[tuple[str, str]]:
        """(input name, its gradient contribution) for each input of ``node``."""
        op, inputs = node.op_type, list(node.input)
        if op in ("Identity", "Add"):
            return [(i, g) for i in inputs]
        if op == "Neg":
            return [(inputs[0], self.emit("Neg", [g]))]
        a, b = inputs
        if op == "Sub":
            return [(a, g), (b, self.emit("Neg", [g]))]
        if op == "Mul":
            return [(a, self.emit("Mul", [g, b])), (b, self.emit("Mul", [g, a]))]
        # Div: d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b
        return [(a, self.emit("Div", [g, b])),
                (b, self.emit("Neg", [self.emit("Div", [self.emit("Mul", [g, node.output[0]]), b])]))]

    def _unbroadcast(self, grad: str, operand: str, result: str) -> str:
        """``grad`` (shaped like ``result``) summed down to ``operand``'s shape."""
        have, want = self.shapes.get(result, (None, 0))[0], self.shapes.get(operand, (None, 0))[0]
        if have is not None and have == want:
            return grad
        if have is None or want is None:
            raise self.fail(f"the shapes of {operand!r} and {result!r} must be known to sum a broadcast gradient")
        lead = len(have) - len(want)
        axes = list(range(lead)) + [lead + i for i, d in enumerate(want) if d == 1 and have[lead + i] != 1]
        if axes:
            axes_array = np.array(axes, np.int64)
            grad = (self.emit("ReduceSum", [grad, self.const(axes_array)], keepdims=1) if self.opset >= 13
                    else self.emit("ReduceSum", [grad], axes=axes, keepdims=1))
        return self.emit("Reshape", [grad, self.const(np.array(want, np.int64))])

    def _splice(self, forward: list[onnx.NodeProto]) -> None:
        """Put the derivative nodes where the Gradient node was, or after the last forward
        node they read when that comes later (nothing in between may read their outputs)."""
        nodes = list(self.graph.node)
        last = max([self.position, *(nodes.index(n) for n in forward)])
        outputs = set(self.node.output)
        for between in nodes[self.position + 1:last + 1]:
            if outputs.intersection(between.input):
                raise self.fail(f"node {between.name or between.op_type!r} reads a gradient before y is computed")
        rebuilt = nodes[:self.position] + nodes[self.position + 1:last + 1] + self.nodes + nodes[last + 1:]
        del self.graph.node[:]
        self.graph.node.extend(rebuilt)
        self.graph.initializer.extend(self.initializers)
