"""onnxruntime's quantized contrib ops (domain ``com.microsoft``) as standard ONNX nodes.

``onnxruntime.quantization.quantize_static(..., quant_format=QuantFormat.QOperator)`` writes
standard QLinearConv / QLinearMatMul nodes, but also ops that exist only in onnxruntime's
``com.microsoft`` domain: QLinearAdd, QLinearMul, QLinearAveragePool,
QLinearGlobalAveragePool, QGemm, QLinearSoftmax, QLinearSigmoid, QLinearLeakyRelu and
QLinearConcat (onnxruntime's ContribOperators.md defines them). Each is a float op between
dequantized inputs and a quantized output, so this module rewrites it, before import, into
exactly that: DequantizeLinear nodes, the standard op, and a QuantizeLinear (the way
gradient.py expands Gradient); the importer then compiles them like any other nodes. A
contrib op outside this list stays, and the importer reports it as unsupported.

Numerics: the float op runs in f32 and QuantizeLinear rounds half to even, as the ops'
definitions say; onnxruntime's own kernels (fixed point for QLinearAdd and the averages) differ
from that by one quantization step in a few percent of the elements.

The quantized type of an output comes from its zero point (quantize_static always writes
them), else from the node's other zero points and inputs; a node where none is known is
refused, never guessed.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...errors import ModelImportError

DOMAIN = "com.microsoft"


def expand_contrib_ops(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with every top-level quantized ``com.microsoft`` node this module knows
    rewritten into standard nodes (the model itself when it has none)."""
    if not any(n.domain == DOMAIN and n.op_type in _EXPANSIONS for n in proto.graph.node):
        return proto
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    graph = proto.graph
    types = element_types(proto)
    nodes: list[onnx.NodeProto] = []
    for position, node in enumerate(list(graph.node)):
        if node.domain != DOMAIN or node.op_type not in _EXPANSIONS:
            nodes.append(node)
            continue
        expansion = _Expansion(node, position, graph, types)
        _EXPANSIONS[node.op_type](expansion)
        nodes.extend(expansion.nodes)
        graph.initializer.extend(expansion.initializers)
    del graph.node[:]
    graph.node.extend(nodes)
    return proto


def element_types(proto: onnx.ModelProto) -> dict[str, int]:
    """Value name -> ONNX element type, from initializers, Constant nodes and what shape
    inference knows (it skips the contrib nodes, whose outputs stay unknown)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False)
    except (onnx.shape_inference.InferenceError, UnicodeDecodeError):
        inferred = proto
    graph = inferred.graph
    types = {t.name: t.data_type for t in graph.initializer}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            types[value.name] = value.type.tensor_type.elem_type
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for attribute in node.attribute:
                if attribute.name == "value":
                    types[node.output[0]] = attribute.t.data_type
    return types


class _Expansion:
    """The standard nodes replacing one contrib node."""

    def __init__(self, node: onnx.NodeProto, position: int, graph: onnx.GraphProto, types: dict[str, int]) -> None:
        self.node = node
        self.label = node.name or f"{node.op_type}_{position}"
        self.types = types
        self.sizes = {t.name: int(np.prod(t.dims)) for t in graph.initializer}
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        self._count = 0

    def input(self, index: int) -> str:
        """Input ``index``'s name, '' when absent."""
        return self.node.input[index] if index < len(self.node.input) else ""

    def fail(self, why: str) -> ModelImportError:
        return ModelImportError(f"node {self.label!r} ({DOMAIN}.{self.node.op_type}): {why}",
                                problems=[(self.label, self.node.op_type, why)])

    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{self.label}/{hint}_{self._count}"

    def emit(self, op_type: str, inputs: list[str], output: str | None = None, **attributes) -> str:
        output = output or self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=self.fresh(op_type), **attributes))
        return output

    def output_zero(self, zero: str, *like: str) -> str:
        """The output's zero point: ``zero``, or where the node leaves it out, a 0 of the
        quantized type of the first of ``like`` (its other zero points and inputs) whose type
        is known: what QuantizeLinear needs to produce that type."""
        if zero:
            return zero
        element = next((self.types[name] for name in like if name and name in self.types), None)
        if element not in (onnx.TensorProto.UINT8, onnx.TensorProto.INT8):
            raise self.fail("cannot tell the output's quantized type (no zero point given and no inferred "
                            "type): give the node its zero points")
        name = self.fresh("zero_point")
        dtype = np.uint8 if element == onnx.TensorProto.UINT8 else np.int8
        self.initializers.append(numpy_helper.from_array(np.zeros((), dtype), name))
        return name

    def per_axis(self, scale: str) -> bool:
        """Whether ``scale`` is an initializer of more than one value (a per-axis scale)."""
        return self.sizes.get(scale, 1) > 1

    def dequantize(self, value: str, scale: str, zero: str, **attributes) -> str:
        inputs = [value, scale] + ([zero] if zero else [])
        return self.emit("DequantizeLinear", inputs, **attributes)

    def quantize(self, value: str, scale: str, zero: str) -> None:
        """The node's output: ``value`` quantized with ``scale`` and ``zero``."""
        self.emit("QuantizeLinear", [value, scale, zero], output=self.node.output[0])


def _binary(op_type: str) -> Callable[[_Expansion], None]:
    """QLinearAdd / QLinearMul: (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp), by their
    definition, ``quantize(dequantize(A) op dequantize(B))``. (onnxruntime's AVX2 kernels
    compute in fixed point, and differ from this by one step in about 3 % of the elements.)"""

    def expand(e: _Expansion) -> None:
        a = e.dequantize(e.input(0), e.input(1), e.input(2))
        b = e.dequantize(e.input(3), e.input(4), e.input(5))
        zero = e.output_zero(e.input(7), e.input(2), e.input(0), e.input(5), e.input(3))
        e.quantize(e.emit(op_type, [a, b]), e.input(6), zero)

    return expand


def _unary(op_type: str, **fixed) -> Callable[[_Expansion], None]:
    """QLinearSigmoid / QLinearLeakyRelu: (X, X_scale, X_zp, Y_scale, Y_zp)."""

    def expand(e: _Expansion) -> None:
        x = e.dequantize(e.input(0), e.input(1), e.input(2))
        attributes = {k: e.attributes[k] for k in fixed if k in e.attributes}
        zero = e.output_zero(e.input(4), e.input(2), e.input(0))
        e.quantize(e.emit(op_type, [x], **attributes), e.input(3), zero)

    return expand


def _channels_first(e: _Expansion, x: str, to_first: bool) -> str:
    """NHWC <-> NCHW for the ``channels_last`` pools (their rank is needed: 4-D only)."""
    return e.emit("Transpose", [x], perm=[0, 3, 1, 2] if to_first else [0, 2, 3, 1])


def _average_pool(e: _Expansion) -> None:
    """QLinearAveragePool (X, x_scale, x_zp, y_scale, y_zp) with AveragePool's attributes."""
    channels_last = int(e.attributes.get("channels_last", 0))
    x = e.dequantize(e.input(0), e.input(1), e.input(2))
    if channels_last:
        x = _channels_first(e, x, True)
    keys = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides", "dilations")
    pooled = e.emit("AveragePool", [x], **{k: e.attributes[k] for k in keys if k in e.attributes})
    if channels_last:
        pooled = _channels_first(e, pooled, False)
    e.quantize(pooled, e.input(3), e.output_zero(e.input(4), e.input(2), e.input(0)))


def _global_average_pool(e: _Expansion) -> None:
    """QLinearGlobalAveragePool (X, x_scale, x_zp, y_scale, y_zp), channels first or last."""
    x = e.dequantize(e.input(0), e.input(1), e.input(2))
    if int(e.attributes.get("channels_last", 0)):
        x = _channels_first(e, e.emit("GlobalAveragePool", [_channels_first(e, x, True)]), False)
    else:
        x = e.emit("GlobalAveragePool", [x])
    e.quantize(x, e.input(3), e.output_zero(e.input(4), e.input(2), e.input(0)))


def _softmax(e: _Expansion) -> None:
    """QLinearSoftmax (X, X_scale, X_zp, Y_scale, Y_zp); its ``opset`` attribute says whose
    Softmax it is: before 13, the input is flattened to 2-D at ``axis`` first."""
    x = e.dequantize(e.input(0), e.input(1), e.input(2))
    axis = int(e.attributes.get("axis", -1 if int(e.attributes.get("opset", 13)) >= 13 else 1))
    if int(e.attributes.get("opset", 13)) < 13:
        shape = e.emit("Shape", [x])
        flat = e.emit("Flatten", [x], axis=axis)
        y = e.emit("Reshape", [e.emit("Softmax", [flat], axis=1), shape])
    else:
        y = e.emit("Softmax", [x], axis=axis)
    e.quantize(y, e.input(3), e.output_zero(e.input(4), e.input(2), e.input(0)))


def _concat(e: _Expansion) -> None:
    """QLinearConcat (Y_scale, Y_zp, then (X, X_scale, X_zp) per input) along ``axis``."""
    rest = list(e.node.input[2:])
    if len(rest) % 3 or not rest:
        raise e.fail(f"expected (tensor, scale, zero point) triples after Y_scale and Y_zero_point, got {len(rest)} inputs")
    parts = [e.dequantize(rest[i], rest[i + 1], rest[i + 2]) for i in range(0, len(rest), 3)]
    joined = e.emit("Concat", parts, axis=int(e.attributes["axis"]))
    e.quantize(joined, e.input(0), e.output_zero(e.input(1), rest[2], rest[0]))


def _gemm(e: _Expansion) -> None:
    """QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp): ``alpha * (A' @ B' + C')``
    on the dequantized operands, C an int32 bias at scale ``a_scale * b_scale`` (b_scale per
    tensor or per output column), added to the product before alpha scales both (as
    onnxruntime computes it: Gemm's beta is alpha); quantized when y_scale is given, else
    float."""
    trans_b = int(e.attributes.get("transB", 0))
    b_scale = e.input(4)
    a = e.dequantize(e.input(0), e.input(1), e.input(2))
    per_column = {"axis": 0 if trans_b else 1} if e.per_axis(b_scale) else {}
    b = e.dequantize(e.input(3), b_scale, e.input(5), **per_column)
    inputs = [a, b]
    if e.input(6):
        bias_scale = e.emit("Mul", [e.input(1), b_scale])
        inputs.append(e.dequantize(e.input(6), bias_scale, "", **({"axis": 0} if per_column else {})))
    attributes = {k: e.attributes[k] for k in ("alpha", "transA", "transB") if k in e.attributes}
    if "alpha" in attributes and e.input(6):
        attributes["beta"] = attributes["alpha"]
    if not e.input(7):
        e.emit("Gemm", inputs, output=e.node.output[0], **attributes)
        return
    y = e.emit("Gemm", inputs, **attributes)
    e.quantize(y, e.input(7), e.output_zero(e.input(8), e.input(2), e.input(0)))


_EXPANSIONS: dict[str, Callable[[_Expansion], None]] = {
    "QLinearAdd": _binary("Add"),
    "QLinearMul": _binary("Mul"),
    "QLinearSigmoid": _unary("Sigmoid"),
    "QLinearLeakyRelu": _unary("LeakyRelu", alpha=None),
    "QLinearAveragePool": _average_pool,
    "QLinearGlobalAveragePool": _global_average_pool,
    "QLinearSoftmax": _softmax,
    "QLinearConcat": _concat,
    "QGemm": _gemm,
}
